package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
)

// workerEnv carries a worker's job, as JSON, to the process it runs in.
const workerEnv = "REQLOCK_FAULTHISTORY_WORKER"

// Job is what the parent asks of one worker process.
type Job struct {
	Proc       int
	Store      string // the URL of the lock's store, through this worker's proxies (see Opener)
	Resource   string // the resource's Redis
	Name       string
	Goroutines int
	TTL        time.Duration
	Wait       time.Duration
	IOTimeout  time.Duration
	Variant    Variant
	End        int64 // Unix nanoseconds: stop acquiring then, if the parent has not said so before
	Window     time.Duration
	Work       time.Duration
}

// Opener builds, in a worker process, the Locker of the store at j.Store
// (a URL) with the options opts (which include j's TTL and I/O timeout),
// and returns what closes it, the store and its clients.
// Each test binary that runs the fault history has its own (the root
// module's knows Redis only; internal/faulthistory/stores knows every
// store).
type Opener func(j Job, opts ...core.Option) (l *core.Locker, closeAll func(), err error)

// The resource's check-and-set. KEYS[1]: the highest fence accepted;
// KEYS[2]: the value; KEYS[3]: the log. ARGV[1]: the write's fence; ARGV[2]:
// the writer ("proc.g.seq:write"). A write with a lower fence than the
// highest accepted is refused; every write is logged, in the order the
// resource runs them, as "writer:fence:1" (accepted) or ":0" (refused).
var resourceWrite = redis.NewScript(`
local fence = tonumber(ARGV[1])
local ok = fence >= tonumber(redis.call("GET", KEYS[1]) or "0")
if ok then
  redis.call("SET", KEYS[1], ARGV[1])
  redis.call("SET", KEYS[2], ARGV[2])
end
redis.call("RPUSH", KEYS[3], ARGV[2] .. ":" .. ARGV[1] .. ":" .. (ok and "1" or "0"))
return ok and 1 or 0
`)

// Keys of the resource.
const (
	resourceFence = "resource:fence"
	resourceValue = "resource:value"
	resourceLog   = "resource:log"
)

// quiet drops go-redis's log lines (dial failures while the test has
// Redis stopped); the worker records the errors it gets.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...interface{}) {}

// WorkerMain is the body of the test TestWorkerProcess that every test
// binary running the fault history has: one worker of a run, in a process
// of its own, started by the run with its job in the environment, its
// history pipe on file descriptor 3, stopped when its standard input
// closes. Without the job in the environment it skips the test.
func WorkerMain(t *testing.T, open Opener) {
	spec, ok := os.LookupEnv(workerEnv)
	if !ok {
		t.Skip("a worker process of the fault history: runs only when started by it")
	}
	var j Job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		t.Fatal(err)
	}
	// However the parent fares, this process ends: it has nothing to do
	// long after the end of the run.
	stop := time.AfterFunc(time.Until(time.Unix(0, j.End))+30*time.Second, func() {
		fmt.Fprintln(os.Stderr, "worker: still running 30 s after the end of the run; exiting")
		os.Exit(3)
	})
	defer stop.Stop()
	out := os.NewFile(3, "history")
	if out == nil {
		t.Fatal("no history pipe on fd 3")
	}
	defer out.Close()
	if err := runWorker(j, open, out, os.Stdin); err != nil {
		t.Fatal(err)
	}
}

// recorder writes records as JSON lines, one write per line.
type recorder struct {
	mu  sync.Mutex
	out io.Writer
	err error
}

func (r *recorder) put(rec Record) {
	line, _ := json.Marshal(rec)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		_, r.err = r.out.Write(append(line, '\n'))
	}
}

// runWorker runs j.Goroutines goroutines that lock j.Name until stop
// (standard input) closes, or j.End.
func runWorker(j Job, open Opener, out io.Writer, stop io.Reader) error {
	redis.SetLogger(quiet{})
	resClient := redis.NewClient(&redis.Options{Addr: j.Resource, ContextTimeoutEnabled: true})
	defer resClient.Close()
	opts := []core.Option{core.WithTTL(j.TTL), core.WithWait(j.Wait), core.WithIOTimeout(j.IOTimeout)}
	if j.Variant.Watchdog {
		opts = append(opts, core.WithWatchdog())
	}
	if j.Variant.Fencing {
		opts = append(opts, core.WithFencing())
	}
	if j.Variant.Fair {
		opts = append(opts, core.WithFair())
	}
	locker, closeAll, err := open(j, opts...)
	if err != nil {
		return fmt.Errorf("open %s: %w", j.Store, err)
	}
	defer closeAll()
	if err := locker.Err(); err != nil {
		return err
	}
	rec := &recorder{out: out}
	rec.put(Record{Kind: "ready", Proc: j.Proc})
	end := time.Unix(0, j.End)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	go func() { // the parent closes our standard input to stop us
		_, _ = io.Copy(io.Discard, stop)
		cancel()
	}()

	var mu sync.Mutex
	failed := map[string]int{}
	var others []string // the first few distinct errors of kind "other"
	var wg sync.WaitGroup
	for g := range j.Goroutines {
		wg.Go(func() {
			for seq := 0; ctx.Err() == nil; seq++ {
				if kind, err := criticalSection(ctx, j, locker, resClient, rec, g, seq); kind != "" {
					mu.Lock()
					failed[kind]++
					if kind == "other" && len(others) < 5 && !slices.Contains(others, err.Error()) {
						others = append(others, err.Error())
					}
					mu.Unlock()
					if kind != "timeout" {
						time.Sleep(5 * time.Millisecond) // the store is down: do not spin on it
					}
				}
			}
		})
	}
	wg.Wait()
	rec.put(Record{Kind: "end", Proc: j.Proc, Errors: failed, Err: strings.Join(others, "; ")})
	return rec.err
}

// criticalSection runs one critical section: acquire, two writes to the resource
// each after a check of Done and a short window (where a real process may
// be frozen), some work between them, release. It returns the kind of a
// failed acquire ("timeout", "storage", "other") and its error, or "".
func criticalSection(ctx context.Context, j Job, locker *core.Locker, res *redis.Client, rec *recorder, g, seq int) (string, error) {
	base := Record{Proc: j.Proc, G: g, Seq: seq}
	called := time.Now()
	lease, err := locker.Acquire(ctx, j.Name)
	if err != nil {
		if ctx.Err() != nil {
			return "", nil
		}
		kind := "other"
		switch {
		case errors.Is(err, core.ErrTimeout):
			kind = "timeout"
		case errors.Is(err, core.ErrStorage):
			kind = "storage"
		}
		fail := base
		fail.Kind, fail.Called, fail.At, fail.Fail = "fail", called.UnixNano(), time.Now().UnixNano(), kind
		rec.put(fail)
		return kind, err
	}
	acq := base
	acq.Kind, acq.Called, acq.At, acq.Fence, acq.Valid = "acq", called.UnixNano(), time.Now().UnixNano(), lease.Fence(), lease.ValidUntil().UnixNano()
	acq.Token, acq.TTL = lease.Token(), int64(lease.TTL())
	rec.put(acq)

	work := j.Work
	if j.Proc == 0 && g == 0 && seq%12 == 11 {
		work = j.TTL * 6 / 5 // now and then a section that outlasts its TTL: the watchdog keeps it, or Done ends it
	}
	for k := range 2 {
		if k > 0 {
			select { // the work between the writes
			case <-time.After(work):
			case <-lease.Done():
			}
		}
		w := base
		w.Kind, w.W = "write", k
		w.Check, w.ValidAtCheck = time.Now().UnixNano(), lease.ValidUntil().UnixNano()
		w.DoneAtCheck = closed(lease.Done())
		if w.DoneAtCheck {
			rec.put(w) // skipped: sent stays 0
			break
		}
		time.Sleep(j.Window) // between the check and the write
		w.Sent, w.DoneAtSend = time.Now().UnixNano(), closed(lease.Done())
		wctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		n, err := resourceWrite.Run(wctx, res, []string{resourceFence, resourceValue, resourceLog},
			lease.Fence(), fmt.Sprintf("%v:%d", id{j.Proc, g, seq}, k)).Int()
		cancel()
		w.Accepted = err == nil && n == 1
		if err != nil {
			w.Err = err.Error()
		}
		rec.put(w)
	}

	rel := base
	rel.Kind, rel.At, rel.Valid, rel.Lost = "rel", time.Now().UnixNano(), lease.ValidUntil().UnixNano(), lease.Lost()
	if err := lease.Release(context.Background()); err != nil {
		rel.Err = err.Error()
	}
	rec.put(rel)
	return "", nil
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
