package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
)

// chromiumPath returns the headless browser the test drives: $CHROMIUM_PATH,
// or Debian's chromium. Without one the test fails, saying how to install
// it: ./scripts/test.sh installs it as it installs the servers.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("CHROMIUM_PATH")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(path); err != nil {
		t.Fatalf("this test opens the debug page in headless Chromium, and there is none at %s (%v): "+
			"install Debian's package (apt-get install chromium, as ./scripts/test.sh does), or set CHROMIUM_PATH", path, err)
	}
	return path
}

// TestAdminFlag: -admin takes a loopback address or off, and refuses any
// other, since the page shows lock names; off serves no page and the
// banner says nothing of it.
func TestAdminFlag(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:6060": true, "[::1]:0": true, "localhost:0": true, "off": true, "": true,
		":6060": false, "0.0.0.0:6060": false, "[::]:6060": false, "10.0.0.1:6060": false, "example.com:6060": false, "6060": false,
	} {
		if err := checkAdmin(addr); (err == nil) != ok {
			t.Errorf("-admin %q: %v", addr, err)
		} else if err != nil && !strings.Contains(err.Error(), "loopback") && addr != "6060" {
			t.Errorf("-admin %q: %v does not say why", addr, err)
		}
	}
	adaptertest.LeakCheck(t)
	cfg := testConfig(redistest.Start(t).Addr())
	cfg.AdminAddr = "off"
	a, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	var banner strings.Builder
	a.printUsage(&banner)
	if a.adminAddr != "" || strings.Contains(banner.String(), "/debug/reqlock/") {
		t.Errorf("-admin off: admin address %q, banner:\n%s", a.adminAddr, banner.String())
	}
	cfg.AdminAddr = "0.0.0.0:0"
	if _, err := start(cfg); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("start with -admin 0.0.0.0:0: %v", err)
	}
}

// TestDebugPageInChromium opens the service's debug page in headless
// Chromium and watches it refresh itself: a lock taken through the
// service's Locker shows on the page by its name and holder, with a request
// waiting for it; a name made of markup shows as text; both are gone from
// the page once the lock is released.
// It takes a screenshot while they show, into the test's directory, and
// into docs/debug-page.png (the README's) when REQLOCK_WRITE_SCREENSHOT=1.
func TestDebugPageInChromium(t *testing.T) {
	adaptertest.LeakCheck(t)
	browser := chromiumPath(t)
	cfg := testConfig(redistest.Start(t).Addr())
	// A request waits for the held order for as long as the test needs.
	cfg.Wait, cfg.HandlerTimeout, cfg.TTL = 30*time.Second, 40*time.Second, time.Minute
	a, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	base := "http://" + a.httpAddr
	// Waits for the histogram: orders created, then paid by three
	// duplicates at once (one pays, the others wait for it).
	for i := range 4 {
		if code, body := post(t, fmt.Sprint(base, "/orders/", 100+i), `{"amount_cents":100}`); code != http.StatusOK {
			t.Fatalf("create: %d %s", code, body)
		}
	}
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = send(context.Background(), http.MethodPost, fmt.Sprint(base, "/orders/", 100+i%4, "/pay"))
		}()
	}
	wg.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(browser),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(1200, 820),
	)
	defer cancelAlloc() // ends the browser process and waits for it
	tab, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	// The first run starts the browser, which lives as long as that run's
	// context: tab's, bounded by the test's.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start %s: %v", browser, err)
	}
	// step runs actions with a bound of its own, so that a page that never
	// shows what the test waits for fails the test with what it waited for.
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, done := context.WithTimeout(tab, 30*time.Second)
		defer done()
		if err := chromedp.Do(sctx, actions...); err != nil {
			page, _ := chromedp.Run(tab, chromedp.Text(chromedp.CSS("body")))
			t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, page)
		}
	}
	// until waits until the page's script expression is true.
	until := func(expression string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expression, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))
	}
	// The page is served with the state of the moment, then its script
	// refreshes it from the JSON: "live" says the script ran and fetched.
	step("open the page and see it live",
		chromedp.Navigate(a.debugURL()),
		until(`document.getElementById("live").textContent === "live"`))

	id := "4242"
	if code, body := post(t, base+"/orders/"+id, `{"amount_cents":1250}`); code != http.StatusOK {
		t.Fatalf("create: %d %s", code, body)
	}
	name := lockName(id)
	lease, err := a.store.locker.Acquire(ctx, name, core.Route("/admin/hold"), core.RequestID("ops-7f3a2c"))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background()) // released below; a no-op then
	paid := make(chan error, 1)
	go func() {
		code, body, err := send(ctx, http.MethodPost, base+"/orders/"+id+"/pay")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("pay: %d %s", code, body)
		}
		paid <- err
	}()
	// The holder, as its token carries it: this host and process, and the
	// request id.
	host, _ := os.Hostname()
	holder := fmt.Sprintf("%s pid %d request ops-7f3a2c", host, os.Getpid())
	step("see the lease by its name and holder, and the request waiting for it",
		until(fmt.Sprintf(`(() => {
			const held = document.getElementById("held-rows").innerText, waiting = document.getElementById("waiting-rows").innerText;
			return held.includes(%q) && held.includes(%q) && held.includes("/admin/hold") && waiting.includes(%q) && waiting.includes("/orders/:id/pay");
		})()`, name, holder, name)))
	shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), "debug-page.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("REQLOCK_WRITE_SCREENSHOT") == "1" {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "debug-page.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A name made of markup shows as text: the script writes textContent,
	// never HTML.
	markup := `order:<img id="injected" src="x"><b>bold</b>`
	odd, err := a.store.locker.Acquire(ctx, markup)
	if err != nil {
		t.Fatal(err)
	}
	step("see a name made of markup as text",
		until(fmt.Sprintf(`document.getElementById("held-rows").innerText.includes(%q) && document.querySelector("#injected, #held-rows b") === null`, markup)))
	if err := odd.Release(ctx); err != nil {
		t.Fatal(err)
	}

	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-paid; err != nil {
		t.Fatal(err)
	}
	step("see the lease and the waiter gone",
		until(fmt.Sprintf(`(() => {
			const held = document.getElementById("held-rows").innerText, waiting = document.getElementById("waiting-rows").innerText;
			return !held.includes(%q) && !waiting.includes(%q) && document.getElementById("held-count").textContent === "0";
		})()`, name, name)))
	total, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#waits-total")))
	if err != nil || total == "0" || total == "" {
		t.Errorf("the histogram counts %q waits (%v), want the test's", total, err)
	}

	// The browser goes before the service, so that it holds no connection
	// to the admin port when the service shuts down.
	cancelTab()
	cancelAlloc()
	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("the test ran out of its time")
	}
}

// send makes one request and returns its status and body.
func send(ctx context.Context, method, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
