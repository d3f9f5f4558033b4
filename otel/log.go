package lockotel

import (
	"context"
	"log/slog"
	"time"

	"github.com/reqlock/reqlock/core"
)

var (
	_ core.Observer = (*LogHandler)(nil)
	_ core.Handler  = (*LogHandler)(nil)
)

// LogHandler writes an access log of locks on a log/slog Logger: one line per
// acquire ("lock acquire") and one per end of a lease ("lock release"). It is
// a core.Observer, so it logs every acquire and release of the Locker, local
// hand-offs included, wherever it stands among the options: give it to
// core.WithObservers, or to core.WithHandlers, which puts it in the same
// slot.
//
// Lines have these attributes, those in brackets only when they apply:
//
//	acquire: [lock] [route] [mode] [permits] outcome wait [local_wait] attempts [handed_off] ttl [slot] [fence] [error_type] [error]
//	release: [lock] [route] [mode] [permits] outcome hold [handed_off] [slot] [fence] [error_type] [error]
//
// mode is how the lock holds its name, shared or permits as with ModeKey;
// it is left out for an exclusive lock, the default, so that the lines of
// plain locks stay as short as they were. permits (the n of core.Permits)
// and slot (the lease's slot, core.Lease.Slot) come with mode permits. A lease of core.Locker.AcquireAll
// is logged name by name: an acquire line per name, and a release line per
// name when the lease ends, each with that name's fence.
//
// lock is the lock name, and error the text of a failure's error, which
// quotes the name. By default both are left out: names are built from
// requests (order ids, user ids, tenants) and may hold personal data, which
// logs tend to keep longer, and show to more people, than the lock store.
// error_type is logged either way. WithName puts both in: unlike span and
// metric attributes, a log line may carry the name (logs are not aggregated
// by attribute), and "who waited for order:42" is what an access log can
// then answer. outcome and
// error_type take the values documented with OutcomeKey and ErrorTypeKey,
// and handed_off (true, present only then) those of HandedOffKey: the lock
// came from, or went to, another holder in this process without a Redis
// round trip.
type LogHandler struct {
	logger   *slog.Logger
	level    slog.Leveler
	errLevel slog.Leveler
	name     bool // WithName: log the lock name and the error text
}

// LogOption configures a LogHandler.
type LogOption func(*LogHandler)

// WithLevel sets the level of the lines of successful acquires and releases
// (default slog.LevelInfo). A *slog.LevelVar changes it at run time.
func WithLevel(level slog.Leveler) LogOption {
	return func(h *LogHandler) { h.level = level }
}

// WithErrorLevel sets the level of the lines of failed acquires (timeout,
// canceled, error) and of releases of lost leases or failed in Redis
// (default slog.LevelWarn).
func WithErrorLevel(level slog.Leveler) LogOption {
	return func(h *LogHandler) { h.errLevel = level }
}

// WithName puts the lock name in the lines (lock), and the text of a
// failure's error (error), which quotes it. Without it, neither is logged
// (see LogHandler); error_type is logged either way. Choose it when the
// names carry nothing personal, or the log is kept as carefully as the data
// the names come from.
func WithName() LogOption {
	return func(h *LogHandler) { h.name = true }
}

// WithoutName leaves the lock name and the error text out of the lines;
// error_type stays. It is the default, so it only undoes a WithName given
// earlier among the options (the last of the two wins).
func WithoutName() LogOption {
	return func(h *LogHandler) { h.name = false }
}

// NewLogHandler returns a LogHandler writing to logger, or to slog.Default()
// (as it is at each line) when logger is nil. Its lines leave the lock name
// out unless WithName is given.
func NewLogHandler(logger *slog.Logger, opts ...LogOption) *LogHandler {
	h := &LogHandler{logger: logger, level: slog.LevelInfo, errLevel: slog.LevelWarn}
	for _, opt := range opts {
		if opt != nil {
			opt(h)
		}
	}
	if h.level == nil {
		h.level = slog.LevelInfo
	}
	if h.errLevel == nil {
		h.errLevel = slog.LevelWarn
	}
	return h
}

// ObserveAcquire logs an acquire that has ended, and for an acquired lock
// returns the state its release line needs.
func (h *LogHandler) ObserveAcquire(ctx context.Context, e core.AcquireEvent) core.LeaseObserver {
	r := describeAcquire(e.Outcome)
	if logger, level := h.enabled(ctx, r.errType); logger != nil {
		attrs := make([]slog.Attr, 0, 14)
		attrs = h.head(attrs, e.Name, e.Route, e.Mode, e.Permits, r.outcome)
		attrs = append(attrs, slog.Duration("wait", e.End.Sub(e.Start)))
		if e.LocalWait > 0 {
			attrs = append(attrs, slog.Duration("local_wait", e.LocalWait))
		}
		attrs = append(attrs, slog.Int("attempts", e.Attempts))
		if e.HandedOver {
			attrs = append(attrs, slog.Bool("handed_off", true))
		}
		attrs = append(attrs, slog.Duration("ttl", e.TTL))
		if e.Lease != nil && e.Mode == core.ModePermits {
			attrs = append(attrs, slog.Int("slot", e.Lease.Slot()))
		}
		if fence := fenceOf(e.Lease, e.Name); fence != 0 {
			attrs = append(attrs, slog.Int64("fence", fence))
		}
		attrs = h.tail(attrs, r.errType, e.Err)
		logger.LogAttrs(ctx, level, "lock acquire", attrs...)
	}
	if e.Lease == nil {
		return nil
	}
	// Kept whatever the level now: it may change while the lease is held.
	l := &logLease{h: h, acquired: e.End, name: e.Name, route: e.Route, mode: e.Mode, permits: e.Permits}
	if e.Mode == core.ModePermits {
		l.slot = e.Lease.Slot()
	}
	return l
}

// fenceOf returns the fence of name in lease (one name of an AcquireAll
// lease, or the lease's own name), 0 for no lease.
func fenceOf(lease *core.Lease, name string) int64 {
	if lease == nil {
		return 0
	}
	if f := lease.FenceOf(name); f != 0 {
		return f
	}
	return lease.Fence()
}

// logLease is what the LogHandler keeps of a lease between its acquire and
// its end: the name is the acquire's, which for a lease of AcquireAll is
// one of the lease's names.
type logLease struct {
	h        *LogHandler
	acquired time.Time
	name     string
	route    string
	mode     core.Mode
	permits  int
	slot     int // with mode permits
}

// ObserveRelease logs the end of the lease, with the hold time. As with the
// Handler, a lease that lost its lock before its release is logged as lost,
// and one handed to a local waiter as released, with handed_off=true.
func (l *logLease) ObserveRelease(ctx context.Context, e core.ReleaseEvent) {
	h := l.h
	r := describe(e.Outcome)
	logger, level := h.enabled(ctx, r.errType)
	if logger == nil {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = h.head(attrs, l.name, l.route, l.mode, l.permits, r.outcome)
	attrs = append(attrs, slog.Duration("hold", e.End.Sub(l.acquired)))
	if e.Outcome == core.OutcomeHandedOff {
		attrs = append(attrs, slog.Bool("handed_off", true))
	}
	if l.mode == core.ModePermits {
		attrs = append(attrs, slog.Int("slot", l.slot))
	}
	if fence := fenceOf(e.Lease, l.name); fence != 0 {
		attrs = append(attrs, slog.Int64("fence", fence))
	}
	attrs = h.tail(attrs, r.errType, e.Err)
	logger.LogAttrs(ctx, level, "lock release", attrs...)
}

// enabled returns the logger and the level of a line with error type
// errType, or a nil logger when the line is not to be written.
func (h *LogHandler) enabled(ctx context.Context, errType string) (*slog.Logger, slog.Level) {
	level := h.level.Level()
	if errType != "" {
		level = h.errLevel.Level()
	}
	logger := h.logger
	if logger == nil {
		logger = slog.Default()
	}
	if !logger.Enabled(ctx, level) {
		return nil, level
	}
	return logger, level
}

// head appends the attributes that start every line.
func (h *LogHandler) head(attrs []slog.Attr, name, route string, mode core.Mode, permits int, outcome string) []slog.Attr {
	if h.name {
		attrs = append(attrs, slog.String("lock", name))
	}
	if route != "" {
		attrs = append(attrs, slog.String("route", route))
	}
	if mode != core.ModeExclusive {
		attrs = append(attrs, slog.String("mode", mode.String()))
	}
	if mode == core.ModePermits && permits > 0 {
		attrs = append(attrs, slog.Int("permits", permits))
	}
	return append(attrs, slog.String("outcome", outcome))
}

// tail appends the error attributes of a failed line: the error type, and
// with WithName the error's text (which names the lock).
func (h *LogHandler) tail(attrs []slog.Attr, errType string, err error) []slog.Attr {
	if errType == "" {
		return attrs
	}
	attrs = append(attrs, slog.String("error_type", errType))
	if h.name && err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	return attrs
}

// Acquire calls next and returns its error. core.WithHandlers puts a
// LogHandler in the Locker's observer slot, where the Locker calls
// ObserveAcquire; this method and Release only make the LogHandler a
// core.Handler, so that it can be given to core.WithHandlers.
func (h *LogHandler) Acquire(ctx context.Context, req *core.AcquireCall, next core.AcquireFunc) error {
	_, err := next(ctx, req)
	return err
}

// Release calls next: see Acquire.
func (h *LogHandler) Release(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
	return next(ctx, lease)
}
