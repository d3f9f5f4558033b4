package faulthistory

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/faulthistory/history"
)

// TestWorkerProcess is one worker of TestFaultHistory, run in a process of
// its own; it is skipped unless that test started it.
func TestWorkerProcess(t *testing.T) {
	history.WorkerMain(t, openRedis)
}

// openRedis opens a Locker on the Redis of the URL "redis://host:port",
// through go-redis (core.New).
func openRedis(j history.Job, opts ...core.Option) (*core.Locker, func(), error) {
	addr, ok := strings.CutPrefix(j.Store, "redis://")
	if !ok {
		return nil, nil, fmt.Errorf("not a Redis URL: %q", j.Store)
	}
	client := redis.NewClient(&redis.Options{
		Addr: addr, DialTimeout: j.IOTimeout, ReadTimeout: time.Second, WriteTimeout: time.Second,
		ContextTimeoutEnabled: true,
	})
	locker := core.New(client, opts...)
	return locker, func() {
		_ = locker.Close()
		_ = client.Close()
	}, nil
}
