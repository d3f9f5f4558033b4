package redisscript_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestModel drives the fair queue's scripts with seeded random schedules of
// simulated waiters (arrivals, polls alone or in batches, releases,
// give-ups, crashes, stale calls and time passing, with patience and TTLs
// of tens of ms), and checks after every step that Redis agrees with the
// model and that the queue's invariants hold. It runs a few fixed seeds and
// one fresh seed; a failure prints its seed and the last steps
// (-model.seed reruns one seed: the same choices, though not the same
// timings).
func TestModel(t *testing.T) {
	c := newClient(t)
	requireRedis7(t, c)
	steps := 250
	if *stepsFlag > 0 {
		steps = *stepsFlag
	}
	seeds := []uint64{1, 2, 3, 4, rand.Uint64()}
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	}
	// The seeds run at once (mostly, they wait for time to pass), whatever
	// -parallel says.
	concurrently(len(seeds), func(i int) {
		seed := seeds[i]
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			cfg := config{seed: seed, steps: steps, waiters: 6, scripts: realScripts}
			start := time.Now()
			stats, err := modelRun(context.Background(), c, t.Name(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d steps in %v: %v", steps, time.Since(start).Round(time.Millisecond), stats)
		})
	})
}

// concurrently calls f(0), ..., f(n-1) each on a goroutine of its own, and
// waits for them.
func concurrently(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}

// requireRedis7 skips t on a server without PEXPIRETIME (before Redis 7.0),
// which the snapshot reads.
func requireRedis7(t *testing.T, c *redis.Client) {
	t.Helper()
	err := c.Do(context.Background(), "PEXPIRETIME", "model:probe").Err()
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown command") {
		t.Skipf("the model's snapshot needs PEXPIRETIME (Redis 7.0): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// replacement is a change of a script's text.
type replacement struct{ old, new string }

// mutants are deliberate bugs in the scripts, each a set of replacements in
// the text of the scripts (the libraries' text is in each script that uses
// them). The model test must fail on every one, on a check rather than on
// a script error.
var mutants = []struct {
	name string
	reps []replacement
}{
	{"a release grants the tail instead of the head", []replacement{
		{`redis.call("ZRANGE", KEYS[3], 0, 0)[1]`, `redis.call("ZRANGE", KEYS[3], -1, -1)[1]`}}},
	{"dead entries are not dropped", []replacement{
		{`if e and e.deadline > now then`, `if e then`}}},
	{"a grant lasts the full TTL, not min(ttl, patience)", []replacement{
		{`local ttl = math.min(e.ttl, e.patience)`, `local ttl = e.ttl`}}},
	{"a dequeue does not pass on a held grant", []replacement{
		{`grant(now_ms(), ARGV[2], tonumber(ARGV[3]))`, `tidy()`}}},
	{"a release by a token that does not hold the lock leaves it its place in line", []replacement{
		{"if redis.call(\"EXISTS\", KEYS[3]) == 1 then\n    drop(ARGV[1])", "if false then\n    drop(ARGV[1])"}}},
	{"a release does not check the token", []replacement{
		{`if redis.call("GET", KEYS[1]) ~= ARGV[1] then`, `if redis.call("EXISTS", KEYS[1]) == 0 then`}}},
	{"an enqueue takes a free lock over live waiters", []replacement{
		{`if not first or first == token then`, `if true then`}}},
	{"newcomers queue at the head", []replacement{
		{`redis.call("ZRANGE", KEYS[3], -1, -1, "WITHSCORES")[2]`, `redis.call("ZRANGE", KEYS[3], 0, 0, "WITHSCORES")[2]`},
		{`(tonumber(last) or 0) + 1`, `(tonumber(last) or 0) - 1`}}},
	{"a poll sends its waiter to the tail", []replacement{
		{`if not redis.call("ZSCORE", KEYS[3], token) then`, `if true then`}}},
	{"a grant is not published", []replacement{
		{`redis.call("PUBLISH", channel, string.format("%s %d %d", token, fence, ttl))`, ``}}},
	{"a grant prints its fence as a Lua number (1.79e+15)", []replacement{
		{`string.format("%s %d %d", token, fence, ttl)`, `token .. " " .. fence .. " " .. ttl`}}},
	{"a grant draws no fence", []replacement{
		{`if e.fenced then`, `if false then`}}},
	{"an entry lives twice its patience", []replacement{
		{`(now + patience) .. " "`, `(now + 2 * patience) .. " "`}}},
	{"the queue's keys never expire", []replacement{
		{`redis.call("PEXPIREAT", KEYS[3], at)`, ``},
		{`redis.call("PEXPIREAT", KEYS[4], at)`, ``}}},
	{"a re-sent poll of the holder queues it", []replacement{
		{`if holder == token then`, `if false then`}}},
	{"a batch poll answers only the grants it makes", []replacement{
		{"local now = now_ms()\nfor i = 5", "local now = now_ms()\nlocal held = holder\nfor i = 5"},
		{`if ARGV[i] == holder then`, `if ARGV[i] == holder and holder ~= held then`}}},
	{"a batch poll does not grant a free lock", []replacement{
		{`holder = grant(now, ARGV[3], grace)`, `tidy()`}}},
	{"a batch poll answers its waiter's place from 0", []replacement{
		{`r[1] = (i - 3) / 2`, `r[1] = (i - 5) / 2`}}},
	{"a batch poll that answers a holder does not renew the queue's keys", []replacement{
		{"end\noutlive(patience)\nfor i = 5", "end\nfor i = 5"},
		{"  end\nend\nreturn {0, 0, 0}", "  end\nend\noutlive(patience)\nreturn {0, 0, 0}"}}},
	{"a batch poll answers no fence", []replacement{
		{`holding(holder, fenced, grace)`, `holding(holder, false, grace)`}}},
	{"a batch poll renews each waiter with the first one's TTL", []replacement{
		{`renew(ARGV[i], tonumber(ARGV[i + 1])`, `renew(ARGV[i], tonumber(ARGV[6])`}}},
}

// mutated returns the real scripts with reps applied, and fails t if a
// replacement matches none of them (the mutant would be the real scripts).
func mutated(t *testing.T, reps []replacement) scripts {
	t.Helper()
	s := realScripts
	for _, r := range reps {
		n := 0
		for _, text := range []*string{&s.enqueue, &s.poll, &s.release, &s.dequeue} {
			n += strings.Count(*text, r.old)
			*text = strings.ReplaceAll(*text, r.old, r.new)
		}
		if n == 0 {
			t.Fatalf("%q is in none of the scripts", r.old)
		}
	}
	return s
}

// TestModelCatchesMutants shows that the model test catches bugs: each
// mutant of the scripts must fail one of its checks within a few seeds (it
// takes one, mostly).
func TestModelCatchesMutants(t *testing.T) {
	c := newClient(t)
	requireRedis7(t, c)
	concurrently(len(mutants), func(i int) {
		mu := mutants[i]
		t.Run(mu.name, func(t *testing.T) {
			cfg := config{steps: 400, waiters: 6, scripts: mutated(t, mu.reps)}
			start := time.Now()
			for seed := uint64(1); seed <= 5; seed++ {
				cfg.seed = seed
				_, err := modelRun(context.Background(), c, t.Name()+fmt.Sprint(seed), cfg)
				if err == nil {
					continue
				}
				f := asFailure(err)
				if f == nil || f.check == checkCall {
					t.Fatalf("the mutant failed, but not on a check: %v", err)
				}
				t.Logf("caught by %q at seed %d, step %d, in %v: %s", f.check, f.seed, f.step, time.Since(start).Round(time.Millisecond), f.msg)
				return
			}
			t.Errorf("the model test passed the mutant in 5 seeds of %d steps", cfg.steps)
		})
	})
}

// TestShareModel drives the scripts of shares, permits, the waiting writer,
// the exclusive lock beside them and acquire_all.lua with seeded random
// schedules of simulated clients (readers, permit holders, some asking for
// another n, writers, holders of two names at once; arrivals, retries,
// re-sent attempts, extends, releases, give-ups, crashes, stale releases
// and time passing, with TTLs and patience of tens of ms), and checks
// after every step that Redis agrees with the model and that the modes'
// invariants hold: no exclusive holder beside another holder, at most n
// permits in distinct slots, fences increasing whatever the mode. A
// failure prints its seed and the last steps (-model.seed reruns one).
func TestShareModel(t *testing.T) {
	c := newClient(t)
	requireRedis7(t, c)
	steps := 250
	if *stepsFlag > 0 {
		steps = *stepsFlag
	}
	seeds := []uint64{1, 2, 3, 4, rand.Uint64()}
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	}
	concurrently(len(seeds), func(i int) {
		seed := seeds[i]
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			cfg := config{seed: seed, steps: steps, waiters: 7}
			start := time.Now()
			stats, err := shareModelRun(context.Background(), c, t.Name(), cfg, realShareScripts)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d steps in %v: %v", steps, time.Since(start).Round(time.Millisecond), stats)
		})
	})
}

// shareMutants are deliberate bugs in the scripts of shares and of
// acquire_all.lua (libraries included), each of which TestShareModel must
// catch on a check.
var shareMutants = []struct {
	name string
	reps []replacement
}{
	{"a share is taken while a writer waits", []replacement{
		{`if redis.call("EXISTS", KEYS[5]) == 1 then`, `if false then`}}},
	{"one permit too many", []replacement{
		{`if held and redis.call("ZCARD", KEYS[3]) >= n then`, `if held and redis.call("ZCARD", KEYS[3]) > n then`}}},
	{"slots collide", []replacement{
		{`used[tonumber(s)] = true`, `used[tonumber(s) + 1] = true`}}},
	{"the last share out leaves the marker", []replacement{
		{`if not settle(n) and ARGV[3] == "1" then`, `if redis.call("ZCARD", KEYS[3]) == 0 and ARGV[3] == "1" then`}}},
	{"expired shares are not pruned", []replacement{
		{`if #gone > 0 then`, `if false then`}}},
	{"another mode is let in", []replacement{
		{`if held and held ~= n then`, `if false then`}}},
	{"a share is taken beside an exclusive holder", []replacement{
		{`if v and not held then`, `if false then`}}},
	{"an extend draws no fence", []replacement{
		{`local fence = draw(last - now + tonumber(ARGV[4]))`, `local fence = tonumber(redis.call("GET", KEYS[2]) or "0")`}}},
	{"a writer is recorded behind an exclusive holder", []replacement{
		{"if mode_of(v) then\n  redis.call(\"SET\", KEYS[5]", "if v then\n  redis.call(\"SET\", KEYS[5]"}}},
	{"a writer that takes the name keeps its record", []replacement{
		{`redis.call("DEL", KEYS[5], KEYS[3], KEYS[4])`, `redis.call("DEL", KEYS[3], KEYS[4])`}}},
	{"the marker expires with the earliest share", []replacement{
		{`redis.call("ZRANGE", KEYS[3], -1, -1, "WITHSCORES")[2]`, `redis.call("ZRANGE", KEYS[3], 0, 0, "WITHSCORES")[2]`}}},
	{"acquire_all checks its first key only", []replacement{
		{"for i = 1, m do\n  local v", "for i = 1, 1 do\n  local v"}}},
	{"a re-sent acquire_all draws new fences", []replacement{
		{`local c = mine[i] and redis.call("GET", counter)`, `local c = false`}}},
	{"a release of a share not held answers 1", []replacement{
		{"if had == 0 then\n  return 0\nend", ""}}},
	{"the last share out publishes nothing", []replacement{
		{"if not settle(n) and ARGV[3] == \"1\" then\n  redis.call(\"PUBLISH\", ARGV[2], \"\")", "if not settle(n) and ARGV[3] == \"1\" then\n  redis.call(\"ECHO\", ARGV[2])"}}},
	{"a share lives twice its TTL", []replacement{
		{`redis.call("ZADD", KEYS[3], now + ttl, token)`, `redis.call("ZADD", KEYS[3], now + 2 * ttl, token)`}}},
	{"a re-sent share is taken anew", []replacement{
		{"local slot, fence = share(token)\nif slot then", "local slot, fence = share(token)\nif false then"}}},
	{"a share's fence is printed as a Lua number", []replacement{
		{`string.format("%d %d", slot, fence)`, `slot .. " " .. fence`}}},
}

// TestShareModelCatchesMutants shows that TestShareModel catches bugs in
// the new scripts: each mutant must fail one of its checks within a few
// seeds.
func TestShareModelCatchesMutants(t *testing.T) {
	c := newClient(t)
	requireRedis7(t, c)
	concurrently(len(shareMutants), func(i int) {
		mu := shareMutants[i]
		t.Run(mu.name, func(t *testing.T) {
			s := realShareScripts
			for _, r := range mu.reps {
				n := 0
				for _, text := range s.texts() {
					n += strings.Count(*text, r.old)
					*text = strings.ReplaceAll(*text, r.old, r.new)
				}
				if n == 0 {
					t.Fatalf("%q is in none of the scripts", r.old)
				}
			}
			cfg := config{steps: 400, waiters: 7}
			start := time.Now()
			for seed := uint64(1); seed <= 5; seed++ {
				cfg.seed = seed
				_, err := shareModelRun(context.Background(), c, t.Name()+fmt.Sprint(seed), cfg, s)
				if err == nil {
					continue
				}
				f := asFailure(err)
				if f == nil || f.check == checkCall {
					t.Fatalf("the mutant failed, but not on a check: %v", err)
				}
				t.Logf("caught by %q at seed %d, step %d, in %v: %s", f.check, f.seed, f.step, time.Since(start).Round(time.Millisecond), f.msg)
				return
			}
			t.Errorf("the share model passed the mutant in 5 seeds of %d steps", cfg.steps)
		})
	})
}
