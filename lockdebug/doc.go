// Package lockdebug is a live debug page of one process's locks, mounted
// like net/http/pprof: the leases this process holds (route, mode, how long
// held, validity and TTL left, fence, and with WithNames the name and the
// holder's identity), the acquires waiting, the hot names of its hotspot
// Guard with their local waiters and hand-offs, and a histogram of the lock
// waits of the last five minutes by outcome. The page refreshes itself every
// second from a JSON endpoint beside it (a small script; without script it
// shows the state it was served with).
//
//	page := lockdebug.New(lockdebug.WithGuard(guard))
//	locker := core.New(client, core.WithHandlers(guard), core.WithObservers(page))
//	admin := http.NewServeMux()
//	admin.Handle("/debug/reqlock/", page) // the page; /debug/reqlock/json is its JSON
//
// A Page is a core.StartObserver: the Locker tells it when an Acquire
// begins and ends, and when a lease ends. It sees only the Lockers it is
// given to, in this process; to see every holder of a name across
// processes, ask the store (core.Locker.Inspect, the reqlock command).
//
// # Safe by default
//
// Mount the page behind the service's admin authentication, or on an admin
// port that only operators reach (a loopback or internal address), never on
// the public port: it tells how busy the service's locks are. By default it
// shows no lock name, key, token, request id or holder identity (names are
// order numbers and user ids, request ids tie to logs): only routes, modes,
// durations and counts. WithNames shows them, for a page that only
// operators reach. The handler answers GET and HEAD only, forbids caching
// and framing, sets a Content-Security-Policy that lets the page load its
// own script and style sheet only, and escapes every value (html/template on
// the server, textContent in the script).
//
// # Bounded memory
//
// The page lists at most WithMaxLeases leases and WithMaxWaiters waiters
// (200 each by default) and counts the others; the histogram lives in a
// fixed ring of 60 slots that slides over the window (WithWindow, five
// minutes by default), so its memory does not grow with the traffic. An
// event costs one mutex and, for a listed lease, one small allocation.
package lockdebug
