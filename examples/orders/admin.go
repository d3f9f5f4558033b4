package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/reqlock/reqlock/lockdebug"
)

// debugPath is where the admin port serves reqlock's debug page (and its
// JSON at debugPath+"json").
const debugPath = "/debug/reqlock/"

// adminOn reports whether -admin asks for the admin port: "off" and ""
// serve none.
func adminOn(addr string) bool {
	return addr != "" && addr != "off"
}

// checkAdmin refuses an admin address that is not on the loopback
// interface: the debug page it serves shows lock names and their holders
// (lockdebug.WithNames), which must not leave the machine. A service that
// serves it elsewhere puts it behind its admin authentication instead.
func checkAdmin(addr string) error {
	if !adminOn(addr) {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-admin %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-admin %q: the debug page shows lock names and holders, so it listens on a loopback address only "+
			"(127.0.0.1, [::1] or localhost), or not at all (-admin off)", addr)
	}
	return nil
}

// newDebugPage returns the debug page of the service's locks, or nil when
// -admin is off. It shows lock names and holders (WithNames) because the
// admin port listens on loopback only (checkAdmin); on a port that others
// reach, a service serves it behind its admin authentication.
func newDebugPage(cfg Config) (*lockdebug.Page, error) {
	if !adminOn(cfg.AdminAddr) {
		return nil, nil
	}
	page := lockdebug.New(lockdebug.WithNames())
	return page, page.Err()
}

// serveAdmin serves the debug page on the admin address until the app
// closes.
func (a *app) serveAdmin(page *lockdebug.Page) error {
	l, err := net.Listen("tcp", a.cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("admin port (-admin off serves no debug page): %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(debugPath, page)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	a.adminAddr = l.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			a.failed <- fmt.Errorf("admin server: %w", err)
		}
	}()
	a.closers = append(a.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return nil
}

// debugURL is the debug page's address, "" without one.
func (a *app) debugURL() string {
	if a.adminAddr == "" {
		return ""
	}
	return "http://" + loopback(a.adminAddr) + debugPath
}
