// Package lockotel traces and measures reqlock's lock waits and hold times
// with OpenTelemetry, and writes an access log of locks with log/slog. Both
// are core.Observers. Its import path ends in "otel", like the OpenTelemetry
// API's own package, so import it under an alias:
//
//	import lockotel "github.com/reqlock/reqlock/otel"
//
//	locker := core.New(client, core.WithHandlers(
//		guard,                                  // a local queue, if any (hotspot)
//		lockotel.New(),                         // in any order
//		lockotel.NewLogHandler(slog.Default()),
//	))
//
// # Observers, in any order
//
// The Handler and the LogHandler are core.Observers: the Locker tells them of
// every acquire once it has ended (core.AcquireEvent) and of the end of every
// lease (core.ReleaseEvent), with its own account of what happened: the
// outcome (core.Outcome), the store attempts, the time spent in the local
// queue, whether the lock was handed off by the previous holder in the
// process. core.WithHandlers puts them in the Locker's observer slot (so
// does core.WithObservers), so their place among the options does not
// matter: before or after a hotspot Guard, they see every acquire, the
// local wait and local hand-offs included, and every release, and
// reqlock.leases.held stays balanced. Their Acquire and Release methods only
// pass through, so that core.WithHandlers takes them.
//
// Adapters label each request's context with its route template or RPC
// method (core.ContextWithRoute); the Handler uses that label, never the lock
// name, which has unbounded cardinality and may carry personal data. The
// LogHandler leaves the name out too, unless it is given WithName.
//
// # Spans
//
// reqlock.acquire (internal kind) is a child of the span in the context given
// to Acquire, so a slow request's trace shows the time it spent waiting for
// its lock. It is recorded when the acquire has ended, with the times of the
// call of Locker.Acquire (core.AcquireEvent.Start) and of its return; the
// Redis commands of the attempts, if the client is instrumented, are its
// siblings under the request's span. Attributes:
//
//	reqlock.route               route template or RPC method; omitted when empty
//	reqlock.mode                exclusive, shared (core.Shared) or permits (core.Permits)
//	reqlock.permits             the n of core.Permits(n); with mode permits only
//	reqlock.slot                the slot of an acquired permit, 0 to n-1 (core.Lease.Slot); with mode permits only
//	reqlock.outcome             acquired, timeout, canceled or error
//	reqlock.attempts            Redis attempts made (0 when the lock was handed off locally)
//	reqlock.wait.seconds        time from the call to the lock or the failure
//	reqlock.local_wait.seconds  part of it spent in the local queue (hotspot Guard); when positive
//	reqlock.handed_off          true when the previous holder in this process handed the lock over; absent otherwise
//	error.type                  on failures: timeout, canceled, deadline_exceeded, storage, invalid, _OTHER
//
// A failed acquire has status Error, described by the kind of the error
// (core.ErrTimeout's message, say) rather than by its text, which names the
// lock; for the same reason no exception event is recorded. Retries are not
// events: the Locker reports the attempts once they are over, so their number
// is an attribute.
//
// reqlock.release (internal kind) is a child of the span in the context given
// to Release (Lease.Release keeps the context's values), linked to the
// lease's acquire span, from the call of Release to its return. A release is
// a span rather than an event because the acquire span has ended by then,
// and because a release is a Redis round trip of its own that can fail.
// Attributes:
//
//	reqlock.route         as above
//	reqlock.mode          as above
//	reqlock.permits       as above
//	reqlock.slot          as above
//	reqlock.outcome       released, lost or error
//	reqlock.hold.seconds  time from the acquire's return to the release's end
//	reqlock.handed_off    true when the lock went to the next holder in this process instead of Redis; absent otherwise
//	error.type            on lost leases: expired, not_held or renewal_failed; on failures: storage, _OTHER
//
// A lease handed to a local waiter (core.OutcomeHandedOff) is released: it
// held its lock to the end, and the waiter's acquire span carries
// reqlock.handed_off too.
//
// A lease is lost when it lost its lock before Release was called: its TTL
// ran out (error.type expired: Lease.Done had closed for the expiry), Redis
// no longer held its token (not_held: the TTL ran out on the server first,
// or an Extend found the key gone and closed Done), or its watchdog could
// not renew it while Redis was unreachable and gave it up (renewal_failed:
// Done had closed, although the release may still have found the key and
// deleted it). The Locker tells them apart at the release (core.Outcome);
// the Handler starts no goroutine or timer per lease to watch Done. A lease
// that is never released is not recorded (and stays counted in
// reqlock.leases.held).
//
// # Modes and several names
//
// Every span and metric carries the lock's mode (reqlock.mode), so that a
// dashboard tells readers' waits (shared) from writers' (exclusive), and
// permit holders from both; with core.Permits(n) it carries n too
// (reqlock.permits, a value per route, so it adds no cardinality), and the
// spans the slot of the lease. A lease of core.Locker.AcquireAll is
// recorded name by name, as the Locker reports it: an acquire span and
// metrics per name, counted in reqlock.leases.held once per name, and a
// release span per name when the lease ends. For example, with lockotel.New
// among a Locker's observers,
//
//	lease, err := locker.AcquireAll(ctx, []string{"account:1", "account:2"}, core.Shared())
//
// records two reqlock.acquire spans with reqlock.mode=shared, and adds 2 to
// reqlock.acquires{reqlock.mode=shared, reqlock.outcome=acquired}.
//
// # Outcomes
//
// The values of reqlock.outcome and error.type come from core.Outcome, the
// vocabulary the adapters use too, through one table:
//
//	core.Outcome    reqlock.outcome  error.type
//	Acquired        acquired
//	Busy            timeout          timeout
//	Canceled        canceled         canceled
//	Deadline        canceled         deadline_exceeded
//	Unavailable     error            storage
//	Invalid         error            invalid
//	BadRequest      error            invalid
//	Error           error            _OTHER   (a panic in a Handler included)
//	Released        released
//	HandedOff       released                  (reqlock.handed_off=true)
//	Expired         lost             expired
//	NotHeld         lost             not_held (error, on an acquire)
//	GaveUp          lost             renewal_failed
//
// A Handler that panics (in Acquire or in Release) is recorded as a failure
// with error.type _OTHER and status Error; core releases the lock it leaves
// behind, so that reqlock.leases.held does not drift, and the panic goes on
// up the stack, unchanged. The LogHandler logs such calls as failures too.
//
// # Metrics
//
//	reqlock.acquire.duration  histogram, s          route, mode, permits, outcome, error.type
//	reqlock.hold.duration     histogram, s          route, mode, permits, outcome, error.type  (of the release)
//	reqlock.acquire.attempts  counter, {attempt}    route, mode, permits, outcome, error.type
//	reqlock.acquires          counter, {acquire}    route, mode, permits, outcome, error.type
//	reqlock.leases.held       up-down counter       route, mode, permits
//	reqlock.acquire.pending   up-down counter       route, mode  (acquires in progress: requests waiting for a lock)
//
// (permits is reqlock.permits, set with mode permits only; the start of an
// acquire, which pending counts, does not tell it.)
//
// The histograms advise bucket bounds suited to lock waits: 0.5, 1, 2.5, 5,
// 10, 25, 50, 100, 250, 500 ms, 1, 2.5, 5 and 10 s for acquires; 1 ms to 60 s
// for holds. An SDK View overrides them.
//
// With WithGuard, the hotspot Guard's typed counters (hotspot.Stats) are
// observed too: reqlock.hotspot.hits, .bypasses, .evictions and .handoffs
// (counters) and reqlock.hotspot.size (up-down counter), without attributes.
//
// # Providers
//
// WithTracerProvider and WithMeterProvider choose the providers; by default
// New takes the global ones (which forward to providers installed later with
// otel.SetTracerProvider and otel.SetMeterProvider). The tracer and meter are
// named ScopeName, with the instrumentation version Version() (the module's
// version in the binary's build information). The package keeps no global
// state of its own.
//
// # Request ids
//
// Every lock's token carries who holds it (core.Holder), with a request id.
// The adapters take it from a header or the request's W3C traceparent;
// TraceID is the Locker's fallback for the rest, the trace id of the span
// in the acquire's context, so that the holder an operator sees
// (core.ParseHolder, reqlock show) leads to the request's trace:
//
//	locker := core.New(client, core.WithRequestID(lockotel.TraceID), core.WithHandlers(lockotel.New()))
package lockotel
