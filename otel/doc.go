// Package lockotel traces and measures reqlock's lock waits and hold times
// with OpenTelemetry, and writes an access log of locks with log/slog. Both
// are core.Handlers. Its import path ends in "otel", like the OpenTelemetry
// API's own package, so import it under an alias:
//
//	import lockotel "github.com/reqlock/reqlock/otel"
//
//	locker := core.New(client, core.WithHandlers(
//		lockotel.New(),                       // outermost: sees the whole wait
//		lockotel.NewLogHandler(slog.Default()),
//		guard,                                // a local-lock handler, if any
//	))
//
// # Order in the chain
//
// Put the Handler (and the LogHandler) first, before a hotspot Guard:
// core.WithHandlers(lockotel.New(), guard). A handler placed after the Guard,
// as in core.WithHandlers(guard, lockotel.New()), sees only what reaches
// Redis. With the Guard's local handoff on, that is wrong, not just partial:
// an acquire served by a handoff is neither traced nor counted, and the
// release that hands a lease off never reaches the handler, so that lease's
// hold is not recorded and reqlock.leases.held grows by one at every handoff,
// for good. Even without handoff, the local wait is then outside the acquire
// span and metrics.
//
// Adapters label each request's context with its route template or RPC
// method (core.ContextWithRoute); the Handler uses that label, never the lock
// name, which has unbounded cardinality and may carry personal data.
//
// # Spans
//
// reqlock.acquire (internal kind) is a child of the span in the context given
// to Acquire, so a slow request's trace shows the time it spent waiting for
// its lock; the Redis commands of the attempts, if the client is
// instrumented, are its children. It starts when Locker.Acquire was called
// (Request.Start) and has these attributes:
//
//	reqlock.route               route template or RPC method; omitted when empty
//	reqlock.outcome             acquired, timeout, canceled or error
//	reqlock.attempts            Redis attempts made (0 when a local waiter got the lock by handoff)
//	reqlock.wait.seconds        time from the call to the lock or the failure
//	reqlock.local_wait.seconds  part of it spent on a local lock (hotspot guard); when positive
//	error.type                  on failures: timeout, canceled, deadline_exceeded, storage, invalid, _OTHER
//
// A failed acquire has status Error, described by the kind of the error
// (core.ErrTimeout's message, say) rather than by its text, which names the
// lock; for the same reason no exception event is recorded. Retries are not
// events: the chain shows a handler the attempts only once they are over, so
// their number is an attribute.
//
// reqlock.release (internal kind) is a child of the span in the context given
// to Release (Lease.Release keeps the context's values), linked to the
// lease's acquire span. A release is a span rather than an event because the
// acquire span has ended by then, and because a release is a Redis round
// trip of its own that can fail. Attributes:
//
//	reqlock.route         as above
//	reqlock.outcome       released, lost or error
//	reqlock.hold.seconds  time from the acquire's return to the release's end
//	error.type            on lost leases: expired, not_held or renewal_failed; on failures: storage, _OTHER
//
// A lease is lost when it ended before Release was called: its TTL ran out
// (error.type expired: Lease.Done had closed for the expiry), Redis no
// longer held its token (not_held: the TTL ran out on the server first, or
// an Extend found the key gone and closed Done), or its watchdog could not
// renew it while Redis was unreachable and gave it up (renewal_failed: Done
// had closed, although the release may still have found the key and deleted
// it). The Handler tells them apart at the release, from Lease.Lost and
// Lease.ValidUntil read before the release runs and from the release's
// error: it starts no goroutine or timer per lease to watch Done. A lease
// that is never released is not recorded (and stays counted in
// reqlock.leases.held).
//
// A panic further in the chain, during an acquire or a release, ends the
// span with error.type _OTHER and status Error and is recorded in the
// metrics like any failure (a lease whose release panicked stops counting as
// held: core ends it); then the panic goes on up the stack, unchanged. The
// LogHandler logs such calls as failures too.
//
// # Metrics
//
//	reqlock.acquire.duration  histogram, s          route, outcome, error.type
//	reqlock.hold.duration     histogram, s          route, outcome, error.type  (of the release)
//	reqlock.acquire.attempts  counter, {attempt}    route, outcome, error.type
//	reqlock.acquires          counter, {acquire}    route, outcome, error.type
//	reqlock.leases.held       up-down counter       route
//
// The histograms advise bucket bounds suited to lock waits: 0.5, 1, 2.5, 5,
// 10, 25, 50, 100, 250, 500 ms, 1, 2.5, 5 and 10 s for acquires; 1 ms to 60 s
// for holds. An SDK View overrides them.
//
// With WithGuard, a local-lock handler's counters are observed too:
// reqlock.hotspot.hits, .bypasses, .evictions and .handoffs (counters) and
// reqlock.hotspot.size (up-down counter), without attributes.
//
// # Providers
//
// WithTracerProvider and WithMeterProvider choose the providers; by default
// New takes the global ones (which forward to providers installed later with
// otel.SetTracerProvider and otel.SetMeterProvider). The tracer and meter are
// named ScopeName, with the instrumentation version Version() (the module's
// version in the binary's build information). The package keeps no global
// state of its own.
package lockotel
