package lockbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/servers"
)

// storeServer is a store of the stores section as the runner runs it: its
// server (nil for the stores on the benchmark's redis-server) and the
// delaying proxy in front of it, which every worker's client of the store
// dials and which counts their exchanges.
type storeServer struct {
	kind    StoreKind
	proc    *servers.Process
	proxy   *redistest.Proxy
	version string
}

func (s *storeServer) close() {
	if s.proxy != nil {
		s.proxy.Close()
	}
	if s.proc != nil {
		s.proc.Close()
	}
}

// runStores runs the stores section: for each store, uncontended acquires,
// then the contention experiment for each setting, store after store, so
// that the rows of a setting run close together.
func (b *bench) runStores(ctx context.Context, rep *Report, log io.Writer) error {
	kinds, err := LookupStores(b.p.Stores)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "lockbench: stores: starting %d servers...\n", len(kinds))
	srvs, err := b.startStores(ctx, kinds, rep.Redis)
	defer func() {
		for _, s := range srvs {
			s.close()
		}
	}()
	if err != nil {
		return err
	}
	rep.StoreVersions = make(map[string]string)
	for _, s := range srvs {
		rep.StoreVersions[s.kind.Name] = s.version
	}

	solo := b.p
	solo.SoloOps = b.p.StoreSoloOps
	for _, s := range srvs {
		fmt.Fprintf(log, "lockbench: stores: %s: %d uncontended acquires...\n", s.kind.Name, solo.SoloOps)
		j := job{Scenario: scenarioSolo, Impl: StoreSettings[0], Params: solo, Store: s.kind.Name, StoreAddr: s.proxy.Addr()}
		run, err := b.run(ctx, j, 1, s.proxy)
		if err != nil {
			return fmt.Errorf("lockbench: stores: %s: uncontended: %w", s.kind.Name, err)
		}
		r := mergeSolo(StoreSettings[0], solo, run)
		r.Store = s.kind.Name
		rep.StoreSolo = append(rep.StoreSolo, r)
	}

	contention := b.p
	contention.Attempts = b.p.StoreAttempts
	for _, setting := range StoreSettings {
		for _, s := range srvs {
			if !s.kind.Runs(setting) {
				continue
			}
			fmt.Fprintf(log, "lockbench: stores: %s, %s: %d processes × %d attempts in rounds of %d...\n", s.kind.Name, setting, contention.Procs, contention.Attempts, contention.Goroutines)
			j := job{Scenario: scenarioContention, Impl: setting, Params: contention, Store: s.kind.Name, StoreAddr: s.proxy.Addr()}
			run, err := b.run(ctx, j, contention.Procs, s.proxy)
			if err != nil {
				return fmt.Errorf("lockbench: stores: %s, %s: contention: %w", s.kind.Name, setting, err)
			}
			r := mergeContention(setting, contention, run)
			r.Store = s.kind.Name
			rep.StoreResults = append(rep.StoreResults, r)
		}
	}
	return nil
}

// startStores starts the servers of kinds at once, each behind a proxy with
// the run's delay, and prepares them. It returns what it started, to be
// closed by the caller also when it fails. A server that is not installed
// fails it with the message of internal/servers, which names the Debian
// package to install.
func (b *bench) startStores(ctx context.Context, kinds []StoreKind, redisVersion string) ([]*storeServer, error) {
	srvs := make([]*storeServer, len(kinds))
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		srvs[i] = &storeServer{kind: k, version: redisVersion}
		if k.spec == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			proc, err := servers.Launch(k.spec())
			if err != nil {
				errs[i] = fmt.Errorf("lockbench: the stores section needs %s: %w", k.Name, err)
				return
			}
			srvs[i].proc = proc
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return srvs, err
	}
	for _, s := range srvs {
		addr := b.redis
		if s.proc != nil {
			addr = s.proc.Addr()
			v, err := s.kind.prepare(ctx, addr)
			if err != nil {
				return srvs, fmt.Errorf("lockbench: stores: prepare %s: %w", s.kind.Name, err)
			}
			s.version = v
		}
		proxy, err := redistest.StartProxy(addr)
		if err != nil {
			return srvs, err
		}
		proxy.SetDelay(b.p.RTT / 2)
		s.proxy = proxy
	}
	return srvs, nil
}
