package lockotel

import (
	"context"
	"log/slog"
	"time"

	"github.com/reqlock/reqlock/core"
)

// LogHandler writes an access log of locks on a log/slog Logger: one line per
// acquire ("lock acquire") and one per release ("lock release"). It is the
// seed framework's logging plug-in, as a core.Handler.
//
// Lines have these attributes, those in brackets only when they apply:
//
//	acquire: [lock] [route] outcome wait [local_wait] attempts ttl [fence] [error_type error]
//	release: [lock] [route] outcome hold [fence] [error_type error]
//
// lock is the lock name. Unlike span and metric attributes, a log line may
// carry it: logs are not aggregated by attribute, and "who waited for
// order:42" is what an access log is for. Names may hold personal data,
// though; WithoutName leaves them out, and the error text with them (it
// quotes the name), keeping error_type. outcome and error_type take the
// values documented with OutcomeKey and ErrorTypeKey.
//
// Put it first in core.WithHandlers, or next to the tracing Handler, before a
// hotspot Guard, so that wait includes the Guard's local wait and every
// release is logged: after a Guard with local handoff, the acquires served by
// a handoff and the releases that hand a lease off are never logged.
type LogHandler struct {
	logger   *slog.Logger
	level    slog.Leveler
	errLevel slog.Leveler
	name     bool
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

// WithoutName leaves the lock name out of the lines, and the error text,
// which contains it; error_type stays.
func WithoutName() LogOption {
	return func(h *LogHandler) { h.name = false }
}

// NewLogHandler returns a LogHandler writing to logger, or to slog.Default()
// (as it is at each line) when logger is nil.
func NewLogHandler(logger *slog.Logger, opts ...LogOption) *LogHandler {
	h := &LogHandler{logger: logger, level: slog.LevelInfo, errLevel: slog.LevelWarn, name: true}
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

// logState is what the LogHandler keeps on a Lease between its acquire and
// its release, under the LogHandler itself as the key.
type logState struct {
	acquired time.Time
	route    string
}

// Acquire calls next and logs the outcome. Should next panic, it logs the
// acquire as failed (error_type _OTHER), and the panic goes on up the stack.
func (h *LogHandler) Acquire(ctx context.Context, req *core.Request, next core.AcquireFunc) (*core.Lease, error) {
	returned := false
	defer func() {
		if !returned { // next panicked: log it, and let the panic go on
			h.acquired(ctx, req, nil, errPanicked)
		}
	}()
	lease, err := next(ctx, req)
	returned = true
	h.acquired(ctx, req, lease, err)
	return lease, err
}

// acquired logs an acquire of req that returned lease and err.
func (h *LogHandler) acquired(ctx context.Context, req *core.Request, lease *core.Lease, err error) {
	end := time.Now()
	if err == nil && lease != nil {
		lease.SetValue(h, &logState{acquired: end, route: req.Route})
	}
	outcome, errType := acquireOutcome(err)
	logger, level := h.enabled(ctx, errType)
	if logger == nil {
		return
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = h.head(attrs, req.Name, req.Route, outcome)
	attrs = append(attrs, slog.Duration("wait", end.Sub(req.Start)))
	if req.LocalWait > 0 {
		attrs = append(attrs, slog.Duration("local_wait", req.LocalWait))
	}
	attrs = append(attrs, slog.Int("attempts", req.Attempts), slog.Duration("ttl", req.TTL))
	if lease != nil && lease.Fence() != 0 {
		attrs = append(attrs, slog.Int64("fence", lease.Fence()))
	}
	attrs = h.tail(attrs, errType, err)
	logger.LogAttrs(ctx, level, "lock acquire", attrs...)
}

// Release calls next and logs the outcome and the hold time. A lease the
// LogHandler did not see acquired is released without a line. As with the
// Handler, a lease lost before the release (core.Lease.Lost, read before
// next runs) is logged as lost, and a panic in next is logged as a failure
// (error_type _OTHER) before it goes on up the stack.
func (h *LogHandler) Release(ctx context.Context, lease *core.Lease, next core.ReleaseFunc) error {
	st, _ := lease.Value(h).(*logState)
	if st == nil {
		return next(ctx, lease)
	}
	before := leaseBefore(lease)
	returned := false
	defer func() {
		if !returned { // next panicked: log it, and let the panic go on
			h.released(ctx, lease, st, before, errPanicked)
		}
	}()
	err := next(ctx, lease)
	returned = true
	h.released(ctx, lease, st, before, err)
	return err
}

// released logs the release of lease, in state before when it started, that
// returned err.
func (h *LogHandler) released(ctx context.Context, lease *core.Lease, st *logState, before leaseAtRelease, err error) {
	end := time.Now()
	outcome, errType := releaseOutcome(err, before)
	logger, level := h.enabled(ctx, errType)
	if logger == nil {
		return
	}
	attrs := make([]slog.Attr, 0, 8)
	attrs = h.head(attrs, lease.Name(), st.route, outcome)
	attrs = append(attrs, slog.Duration("hold", end.Sub(st.acquired)))
	if lease.Fence() != 0 {
		attrs = append(attrs, slog.Int64("fence", lease.Fence()))
	}
	attrs = h.tail(attrs, errType, err)
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
func (h *LogHandler) head(attrs []slog.Attr, name, route, outcome string) []slog.Attr {
	if h.name {
		attrs = append(attrs, slog.String("lock", name))
	}
	if route != "" {
		attrs = append(attrs, slog.String("route", route))
	}
	return append(attrs, slog.String("outcome", outcome))
}

// tail appends the error attributes of a failed line.
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
