package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The load of -load: this many concurrent clients, each of which buys the
// hot item half the time and one of loadItems other items otherwise, reads
// an item one request in five, and pauses up to loadPause between requests.
const (
	loadBuyers = 16
	loadItems  = 50
	loadPause  = 20 * time.Millisecond
)

// loadResult counts the answers of a load.
type loadResult struct {
	requests, bought, busy, soldOut, read, failed int64
	errors                                        []string // the first few failures
}

func (r loadResult) String() string {
	s := fmt.Sprintf("load: %d requests: %d bought, %d busy (409), %d sold out, %d reads, %d failed",
		r.requests, r.bought, r.busy, r.soldOut, r.read, r.failed)
	if len(r.errors) > 0 {
		s += "\nfirst failures: " + strings.Join(r.errors, "; ")
	}
	return s
}

// load fires buyers concurrent clients at the service until ctx ends or,
// with requests > 0, until they have sent that many requests in all. A
// request cut short by the end of ctx is not counted.
func (a *app) load(ctx context.Context, buyers, requests int) loadResult {
	tr := &http.Transport{MaxIdleConnsPerHost: buyers}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	base := "http://" + a.httpAddr + "/items/"

	var sent, bought, busy, soldOut, read, failed atomic.Int64
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for range buyers {
		wg.Go(func() {
			for ctx.Err() == nil && (requests <= 0 || sent.Add(1) <= int64(requests)) {
				sku := a.cfg.hotItem()
				if rand.IntN(2) == 0 {
					sku = fmt.Sprint(20001 + rand.IntN(loadItems))
				}
				method, url := http.MethodPost, base+sku+"/buy"
				if rand.IntN(5) == 0 {
					method, url = http.MethodGet, base+sku
				}
				status, err := call(ctx, client, method, url)
				switch {
				case ctx.Err() != nil:
					return
				case err == nil && status == http.StatusOK && method == http.MethodGet:
					read.Add(1)
				case err == nil && status == http.StatusOK:
					bought.Add(1)
				case err == nil && status == http.StatusConflict:
					busy.Add(1)
				case err == nil && status == http.StatusGone:
					soldOut.Add(1)
				default:
					failed.Add(1)
					if err == nil {
						err = fmt.Errorf("%s %s: HTTP %d", method, url, status)
					}
					mu.Lock()
					if len(errs) < 5 {
						errs = append(errs, err.Error())
					}
					mu.Unlock()
				}
				pause := time.NewTimer(rand.N(loadPause))
				select {
				case <-pause.C:
				case <-ctx.Done():
					pause.Stop()
				}
			}
		})
	}
	wg.Wait()
	res := loadResult{bought: bought.Load(), busy: busy.Load(), soldOut: soldOut.Load(), read: read.Load(), failed: failed.Load(), errors: errs}
	res.requests = res.bought + res.busy + res.soldOut + res.read + res.failed
	return res
}

// call sends a request without a body and returns its status.
func call(ctx context.Context, c *http.Client, method, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}
