package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reqlock/reqlock/core"
)

// The lock modes' demo, after the duplicates' one: concurrent reads of one
// order (shared holds), a flash sale (permits) and crossing transfers
// (AcquireAll), all over HTTP.
const (
	demoReaders   = 20  // concurrent GETs of one order, beside a few pays and cancels of it
	demoBuyers    = 150 // concurrent buyers of an item of demoPerSegment × itemSegments units
	demoInFlight  = 25  // of which at most this many have a request in flight
	demoPerSeg    = 20  // units per segment of the demo's item: 100 in all
	demoTransfers = 20  // transfers each way between two orders, all at once
	demoAttempts  = 2000
)

// modesResult is what the lock modes' demo saw.
type modesResult struct {
	sharesSkipped string // why the flash sale did not run (the store keeps no shares), or ""

	// Reads: GETs of one order under shared holds, beside writes of it.
	reads, readWrites int
	readRetries       int64 // GETs answered 409 (a writer held the order past the wait) and sent again
	maxReaders        int64 // the most readers of one order inside at once
	readOverlaps      int64
	readP50, readP99  time.Duration

	// The flash sale.
	buyers           int
	stock, left      int64
	sold, soldOut    int64 // buyers answered 200, and 410
	saleRetries      int64 // 409s sent again (own segment empty, or every permit held past the wait)
	oversold         int64 // sales answered 200 beyond the units taken off the stock
	maxSellers       int64
	segOverlaps      int64
	saleP50, saleP99 time.Duration

	// Crossing transfers.
	transfers           int   // requested, each way
	moved               int64 // transfers answered 200
	moveRetries         int64 // transfers answered 409 (busy) and sent again
	timeouts            int64 // transfers that never got both orders (demoAttempts spent)
	sumBefore, sumAfter int64
	moveP50, moveP99    time.Duration

	unavailable   int64 // answers 503 (nothing was done: the lock store was unavailable, or a lease was lost), sent again
	overlapsAfter int64 // the order detector's overlaps at the end, all demos included
	failMu        sync.Mutex
	failures      []string
}

func (r *modesResult) fail(s string) {
	r.failMu.Lock()
	r.failures = append(r.failures, s)
	r.failMu.Unlock()
}

// demoModes runs the three parts one after the other against the service's
// HTTP API; run prints them after the duplicates' table.
func (a *app) demoModes(ctx context.Context) (*modesResult, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: demoBuyers}
	defer tr.CloseIdleConnections()
	web := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	base := "http://" + a.httpAddr
	run := fmt.Sprintf("modes-%d-", time.Now().UnixNano()) // fresh orders and items on a shared store
	res := &modesResult{}
	if err := a.store.locker.CheckMode(core.ModePermits); err != nil {
		res.sharesSkipped = err.Error()
	}
	do := func(method, url, body string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		if err != nil {
			return 0, err.Error()
		}
		resp, err := web.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	create := func(id string, cents int64) error {
		if code, body := do(http.MethodPost, base+"/orders/"+id, fmt.Sprintf(`{"amount_cents":%d}`, cents)); code != http.StatusOK {
			return fmt.Errorf("create %s: %d %s", id, code, body)
		}
		return nil
	}
	resetWaits := func() {
		a.waits.mu.Lock()
		a.waits.d = nil
		a.waits.mu.Unlock()
	}
	p5099 := func() (time.Duration, time.Duration) {
		ps := a.waits.percentiles(0.50, 0.99)
		return ps[0], ps[1]
	}

	// 1. Reads: demoReaders GETs of one order at once, beside two pays and
	// two cancels of it; a GET answered 409 waited past the budget behind a
	// writer, and is sent again.
	id := run + "read"
	if err := create(id, 1250); err != nil {
		return nil, err
	}
	resetWaits()
	readStart := a.store.overlaps.Load()
	res.reads, res.readWrites = demoReaders, 4
	var wg sync.WaitGroup
	startGun := make(chan struct{})
	for i := range demoReaders + res.readWrites {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGun
			if i >= demoReaders {
				op := [...]string{"pay", "cancel"}[i%2]
				for range demoAttempts {
					switch code, body := do(http.MethodPost, base+"/orders/"+id+"/"+op, ""); code {
					case http.StatusOK, http.StatusUnprocessableEntity, http.StatusConflict:
						return
					case http.StatusServiceUnavailable: // nothing was done: send it again
						atomic.AddInt64(&res.unavailable, 1)
						continue
					default:
						res.fail(fmt.Sprintf("%s beside the reads: %d %s", op, code, body))
						return
					}
				}
				res.fail(op + " beside the reads: still unavailable after every attempt")
				return
			}
			for range demoAttempts {
				code, body := do(http.MethodGet, base+"/orders/"+id, "")
				switch code {
				case http.StatusOK:
					return
				case http.StatusConflict:
					atomic.AddInt64(&res.readRetries, 1)
					continue
				case http.StatusServiceUnavailable:
					atomic.AddInt64(&res.unavailable, 1)
					continue
				}
				res.fail(fmt.Sprintf("GET: %d %s", code, body))
				return
			}
			res.fail("GET: still busy after every attempt")
		}()
	}
	close(startGun)
	wg.Wait()
	res.maxReaders = a.store.maxReaders.Load()
	res.readOverlaps = a.store.overlaps.Load() - readStart
	res.readP50, res.readP99 = p5099()

	// 2. The flash sale: demoBuyers buyers at once of an item of
	// demoPerSeg × itemSegments units; each retries on 409 until it buys
	// one (200) or the item is sold out (410).
	res.buyers, res.stock = demoBuyers, demoPerSeg*itemSegments
	if res.sharesSkipped == "" {
		sku := run + "sku"
		a.store.stock(sku, demoPerSeg)
		resetWaits()
		startGun = make(chan struct{})
		// At most demoInFlight buys at once: a store whose permits cost a
		// round trip per holder or waiter (ZooKeeper's children) slows
		// down with every waiting request.
		inFlight := make(chan struct{}, demoInFlight)
		for range demoBuyers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-startGun
				for range demoAttempts {
					inFlight <- struct{}{}
					code, body := do(http.MethodPost, base+"/items/"+sku+"/buy", "")
					<-inFlight
					switch code {
					case http.StatusOK:
						atomic.AddInt64(&res.sold, 1)
						return
					case http.StatusGone:
						atomic.AddInt64(&res.soldOut, 1)
						return
					case http.StatusConflict:
						atomic.AddInt64(&res.saleRetries, 1)
						continue
					case http.StatusServiceUnavailable:
						atomic.AddInt64(&res.unavailable, 1)
						continue
					}
					res.fail(fmt.Sprintf("buy: %d %s", code, body))
					return
				}
				res.fail("buy: still 409 after every attempt")
			}()
		}
		close(startGun)
		wg.Wait()
		it, _ := a.store.item(sku)
		res.left = it.Left
		res.oversold = res.sold - (res.stock - it.Left)
		res.maxSellers = a.store.maxSellers.Load()
		res.segOverlaps = a.store.segOverlaps.Load()
		res.saleP50, res.saleP99 = p5099()
	}

	// 3. Crossing transfers: demoTransfers from A to B and as many from B
	// to A, all at once; each retries on 409 (busy) until it is done. (Every
	// part also sends again a request answered 503: the lock store did not
	// answer in time, and nothing was done.)
	from, to := run+"A", run+"B"
	if err := create(from, 10000); err != nil {
		return nil, err
	}
	if err := create(to, 10000); err != nil {
		return nil, err
	}
	res.transfers, res.sumBefore = demoTransfers, 20000
	resetWaits()
	startGun = make(chan struct{})
	for i := range 2 * demoTransfers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGun
			url := base + "/orders/" + from + "/transfer/" + to
			if i%2 == 1 {
				url = base + "/orders/" + to + "/transfer/" + from
			}
			for range demoAttempts {
				code, body := do(http.MethodPost, url, `{"amount_cents":7}`)
				switch code {
				case http.StatusOK:
					atomic.AddInt64(&res.moved, 1)
					return
				case http.StatusConflict:
					atomic.AddInt64(&res.moveRetries, 1)
					continue
				case http.StatusServiceUnavailable:
					atomic.AddInt64(&res.unavailable, 1)
					continue
				}
				res.fail(fmt.Sprintf("transfer: %d %s", code, body))
				return
			}
			atomic.AddInt64(&res.timeouts, 1)
			res.fail("transfer: still busy after every attempt")
		}()
	}
	close(startGun)
	wg.Wait()
	for _, id := range []string{from, to} {
		o, _ := a.store.get(id)
		res.sumAfter += o.AmountCents
	}
	res.moveP50, res.moveP99 = p5099()
	res.overlapsAfter = a.store.overlaps.Load()
	return res, nil
}

// broken returns what the lock modes' demo saw go wrong, or "".
func (r *modesResult) broken() string {
	var bad []string
	if r.readOverlaps != 0 || r.overlapsAfter != 0 {
		bad = append(bad, fmt.Sprintf("%d overlapping critical sections of an order", r.overlapsAfter))
	}
	if r.sharesSkipped == "" && (r.oversold != 0 || r.segOverlaps != 0 || r.maxSellers > itemSegments || r.sold != min(int64(r.buyers), r.stock)) {
		bad = append(bad, fmt.Sprintf("the flash sale sold %d of %d (oversold %d), %d sellers of one item at once, %d segment overlaps",
			r.sold, r.stock, r.oversold, r.maxSellers, r.segOverlaps))
	}
	if r.sumAfter != r.sumBefore || r.timeouts != 0 {
		bad = append(bad, fmt.Sprintf("the transfers left %d cents of %d, %d timed out", r.sumAfter, r.sumBefore, r.timeouts))
	}
	if len(r.failures) != 0 {
		bad = append(bad, fmt.Sprintf("%d errors", len(r.failures)))
	}
	return strings.Join(bad, "; ")
}

// print writes the lock modes' figures.
func (r *modesResult) print(w io.Writer) {
	us := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	fmt.Fprintf(w, "\nlock modes (HTTP):\n")
	fmt.Fprintf(w, "reads, shared (GET /orders/:id, WithSharedReads): %d concurrent GETs of one order beside %d pays/cancels of it\n",
		r.reads, r.readWrites)
	fmt.Fprintf(w, "  most readers inside at once: %d; overlaps seen: %d; GETs sent again after a 409: %d; lock wait p50 %v, p99 %v\n",
		r.maxReaders, r.readOverlaps, r.readRetries, us(r.readP50), us(r.readP99))
	if r.sharesSkipped != "" {
		fmt.Fprintf(w, "flash sale: skipped: %s\n", r.sharesSkipped)
	} else {
		fmt.Fprintf(w, "flash sale, permits (POST /items/:sku/buy, WithPermits(%d)): %d buyers at once (%d requests in flight), %d units in %d segments, retrying on 409\n",
			itemSegments, r.buyers, demoInFlight, r.stock, itemSegments)
		fmt.Fprintf(w, "  sold: %d (left %d), sold out (410): %d, oversold: %d; most sellers inside at once: %d (at most %d); segment overlaps: %d\n",
			r.sold, r.left, r.soldOut, r.oversold, r.maxSellers, itemSegments, r.segOverlaps)
		fmt.Fprintf(w, "  409s sent again: %d; lock wait p50 %v, p99 %v\n", r.saleRetries, us(r.saleP50), us(r.saleP99))
	}
	fmt.Fprintf(w, "crossing transfers, AcquireAll (POST /orders/:id/transfer/:to): %d A→B and %d B→A at once, retrying on 409\n",
		r.transfers, r.transfers)
	fmt.Fprintf(w, "  done: %d; deadlocks / timeouts: %d; sum of the two amounts: %d before, %d after; 409s sent again: %d; lock wait p50 %v, p99 %v\n",
		r.moved, r.timeouts, r.sumBefore, r.sumAfter, r.moveRetries, us(r.moveP50), us(r.moveP99))
	fmt.Fprintf(w, "answers 503 (nothing was done: the lock store was unavailable, or a lease was lost), sent again: %d\n", r.unavailable)
	for i, f := range r.failures {
		if i == 5 {
			fmt.Fprintf(w, "... %d more errors\n", len(r.failures)-5)
			break
		}
		fmt.Fprintln(w, "error:", f)
	}
}
