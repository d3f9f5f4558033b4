package lockbench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// errTimeout is the failure of an acquire whose wait budget ran out, for the
// implementations that have no error of their own for it.
var errTimeout = errors.New("lockbench: wait budget spent")

// plainRelease is the plain spin lock's release: delete the key if it still
// holds this token.
var plainRelease = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// plain is the plain spin lock, the baseline of the comparison: the
// single-instance lock of the Redis documentation
// (https://redis.io/docs/latest/develop/use/patterns/distributed-locks/)
// retried after a random sleep. SET name token NX PX ttl; while another
// holds the name, sleep a random time in [SpinMin, SpinMin+SpinRandom) and
// try again until the wait budget is spent; release with a
// compare-and-delete script.
type plain struct {
	client *redis.Client
	p      Params
}

func openPlain(env *Env) (Lock, error) {
	return &plain{client: env.Client, p: env.Params}, nil
}

func (l *plain) Acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	token := rand.Text()
	deadline := time.Now().Add(l.p.Wait)
	for {
		err := l.client.Do(ctx, "SET", name, token, "NX", "PX", l.p.TTL.Milliseconds()).Err()
		if err != nil && err != redis.Nil {
			return nil, err
		}
		if err == nil {
			return func(ctx context.Context) error {
				n, err := plainRelease.Run(ctx, l.client, []string{name}, token).Int64()
				if err == nil && n != 1 {
					err = fmt.Errorf("lockbench: release %q: not held", name)
				}
				return err
			}, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, errTimeout
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(l.p.spin(), left)):
		}
	}
}
