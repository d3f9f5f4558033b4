package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/ginlock"
	"github.com/reqlock/reqlock/keyfunc"
)

// httpServer is the HTTP server with every timeout set: a client cannot keep
// a connection (nor, through the handlers' order, a lock) by sending slowly.
// ReadTimeout covers the whole request, body included; WriteTimeout runs from
// the end of the headers, so it covers reading the body, the handler's budget
// and writing the answer.
func httpServer(h http.Handler, cfg Config) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(cfg.ReadTimeout, 2*time.Second),
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.ReadTimeout + cfg.HandlerTimeout + time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
}

// httpHandler serves the orders API over HTTP, in the three lock modes:
//
//   - an order's routes hold the order's lock with WithSharedReads: GET
//     /orders/:id shared (reads run together), create, pay and cancel
//     exclusively (a read-write lock, as Redisson's RReadWriteLock);
//   - POST /orders/:id/transfer/:to holds both orders, all or none, in one
//     canonical order (a key of two names: AcquireAll), so that crossing
//     transfers never deadlock;
//   - POST /items/:sku/buy, the flash sale, holds one of itemSegments
//     permits of the item (WithPermits) and sells from the segment of its
//     slot.
//
// The order of the middleware on a locked route matters:
//
//	readBody (MaxBody, within the server's ReadTimeout) → [amountInput] → budget (HandlerTimeout) → ginlock → handler
//
// The body is read whole before the lock is taken, so the lock is held only
// while the handler works, never while a client sends; a create's body is
// (and a transfer's) also checked before it (amountInput), so a request that cannot succeed
// never waits for, nor holds, an order's lock. A method that a path does
// not have is answered 405 with an Allow header, an unknown path 404, both
// with a JSON error like every other answer. Handlers pass
// c.Request.Context(), which carries the lease and is cancelled at the end of
// the budget or when the lease is lost, to the store: its Acquire of the same
// order is then reentrant (c itself would not carry it; see ginlock's
// documentation), and it stops when the context ends.
func httpHandler(s *store, locker *core.Locker, cfg Config, opts ...ginlock.Option) (http.Handler, error) {
	key, err := keyfunc.Template("order:{param.id}")
	if err != nil {
		return nil, err
	}
	pair, err := keyfunc.Templates("order:{param.id}", "order:{param.to}")
	if err != nil {
		return nil, err
	}
	itemKey, err := keyfunc.Template("item:{param.sku}")
	if err != nil {
		return nil, err
	}
	// Shared holds and permits need a store that keeps several holders of
	// a name (a core.Sharer); on one that does not, reads are locked
	// exclusively and the flash sale is not served.
	shares := locker.CheckMode(core.ModeShared) == nil
	orderOpts := slices.Clip(opts)
	if shares {
		orderOpts = append(orderOpts, ginlock.WithSharedReads())
	}
	itemOpts := append(slices.Clip(opts), ginlock.WithPermits(itemSegments))
	type route struct {
		key  keyfunc.Func
		opts []ginlock.Option
	}
	routes := []route{{key, orderOpts}, {pair, opts}}
	if shares {
		routes = append(routes, route{itemKey, itemOpts})
	}
	for _, rt := range routes {
		if err := ginlock.Check(locker, rt.key, rt.opts...); err != nil {
			return nil, err
		}
	}
	// GETs of an order hold it shared, its writes exclusively: reads run
	// together, never beside a create, pay, cancel or transfer of it.
	lock := ginlock.New(locker, key, orderOpts...)
	// A transfer holds both orders, all or none (AcquireAll).
	lockPair := ginlock.New(locker, pair, opts...)
	locked := []gin.HandlerFunc{readBody(cfg.MaxBody), budget(cfg.HandlerTimeout), lock}
	r := gin.New()
	r.HandleMethodNotAllowed = true                     // 405 with Allow, not 404, for a method the path lacks
	r.Use(gin.Recovery(), otelgin.Middleware("orders")) // request spans, parents of the lock spans
	r.NoMethod(func(c *gin.Context) {
		c.JSON(http.StatusMethodNotAllowed, gin.H{"error": fmt.Sprintf("method %s is not allowed on %s; allowed: %s",
			c.Request.Method, c.Request.URL.Path, c.Writer.Header().Get("Allow"))}) // gin has set Allow
	})
	r.NoRoute(func(c *gin.Context) {
		c.JSON(http.StatusNotFound, gin.H{"error": fmt.Sprintf("no route for %s %s; the routes are GET /orders/:id, "+
			"POST /orders/:id (create), POST /orders/:id/pay, POST /orders/:id/cancel, "+
			"POST /orders/:id/transfer/:to (move amount_cents to order :to), "+
			"GET /items/:sku (stock) and POST /items/:sku/buy (the flash sale)", c.Request.Method, c.Request.URL.Path)})
	})
	r.GET("/orders/:id", budget(cfg.HandlerTimeout), lock, func(c *gin.Context) {
		defer s.enterRead(c.Param("id"))()
		answer(c)(s.read(c.Request.Context(), c.Param("id")))
	})
	r.POST("/orders/:id", readBody(cfg.MaxBody), amountInput(orderBody), budget(cfg.HandlerTimeout), lock, func(c *gin.Context) {
		defer s.enter(c.Param("id"))()
		answer(c)(s.create(c.Request.Context(), c.Param("id"), c.GetInt64(amountKey)))
	})
	r.POST("/orders/:id/pay", append(locked, func(c *gin.Context) {
		defer s.enter(c.Param("id"))()
		answer(c)(s.pay(c.Request.Context(), c.Param("id")))
	})...)
	r.POST("/orders/:id/cancel", append(locked, func(c *gin.Context) {
		defer s.enter(c.Param("id"))()
		answer(c)(s.cancel(c.Request.Context(), c.Param("id")))
	})...)
	r.POST("/orders/:id/transfer/:to", readBody(cfg.MaxBody), amountInput(transferBody), budget(cfg.HandlerTimeout), lockPair, func(c *gin.Context) {
		from, to := c.Param("id"), c.Param("to")
		defer s.enter(from)()
		defer s.enter(to)()
		t, err := s.transfer(c.Request.Context(), from, to, c.GetInt64(amountKey))
		if err != nil {
			answer(c)(Order{}, err)
			return
		}
		c.JSON(http.StatusOK, t)
	})
	r.GET("/items/:sku", func(c *gin.Context) {
		if it, ok := s.item(c.Param("sku")); ok {
			c.JSON(http.StatusOK, it)
			return
		}
		c.JSON(http.StatusNotFound, gin.H{"error": fmt.Sprintf("%v: %s", errNoItem, c.Param("sku"))})
	})
	if !shares {
		r.POST("/items/:sku/buy", func(c *gin.Context) {
			c.JSON(http.StatusNotImplemented, gin.H{"error": fmt.Sprintf("the flash sale needs permits, which this lock store does not keep: %v",
				locker.CheckMode(core.ModePermits))})
		})
		return r, nil
	}
	r.POST("/items/:sku/buy", readBody(cfg.MaxBody), itemKnown(s), budget(cfg.HandlerTimeout),
		ginlock.New(locker, itemKey, itemOpts...), func(c *gin.Context) {
			sale, err := s.buy(c.Request.Context(), c.Param("sku"), ginlock.Lease(c))
			switch {
			case err == nil:
				c.JSON(http.StatusOK, sale)
			case errors.Is(err, errSegmentEmpty):
				c.Header("Retry-After", "0")
				c.JSON(http.StatusConflict, gin.H{"error": err.Error(), "retry": true})
			case errors.Is(err, errSoldOut):
				c.JSON(http.StatusGone, gin.H{"error": err.Error()})
			case errors.Is(err, errNoItem):
				c.JSON(http.StatusNotFound, gin.H{"error": err.Error()})
			default:
				answer(c)(Order{}, err)
			}
		})
	return r, nil
}

// itemKnown answers 404 for an item that the store does not have, before
// the lock: a buy of an unknown item takes no permit.
func itemKnown(s *store) gin.HandlerFunc {
	return func(c *gin.Context) {
		if _, ok := s.item(c.Param("sku")); !ok {
			c.AbortWithStatusJSON(http.StatusNotFound, gin.H{"error": fmt.Sprintf("%v: %s (item %s is stocked at start-up)", errNoItem, c.Param("sku"), flashSKU)})
		}
	}
}

// readBody reads the whole request body, at most max bytes, before the
// middleware after it runs, and gives them the bytes read. A larger body is
// answered 413 and a body that does not arrive within the server's
// ReadTimeout 408, both without taking a lock. (gin has no body limit of its
// own: http.MaxBytesReader is the one.)
func readBody(max int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		r := c.Request
		if r.Body == nil || r.Body == http.NoBody {
			return
		}
		if r.ContentLength > max {
			c.AbortWithStatusJSON(http.StatusRequestEntityTooLarge, gin.H{"error": fmt.Sprintf("the body is larger than %d bytes", max)})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(c.Writer, r.Body, max))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			c.AbortWithStatusJSON(http.StatusRequestEntityTooLarge, gin.H{"error": fmt.Sprintf("the body is larger than %d bytes", max)})
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			c.AbortWithStatusJSON(http.StatusRequestTimeout, gin.H{"error": "the body did not arrive in time"})
			return
		case err != nil:
			c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": "reading the body: " + err.Error()})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
}

// amountKey is where amountInput leaves a create's or a transfer's amount
// for the handler (c.GetInt64).
const amountKey = "amount_cents"

// amountInput checks a create's or a transfer's body, which readBody has
// read whole, before the lock: a body that is not JSON is answered 400,
// saying where the decoder stopped; JSON that is not a valid one 422, naming
// each missing, unknown or invalid field ({"error": "...", "fields":
// {"amount_cents": "..."}}); a transfer of an order to itself 422. A valid
// amount is left for the handler under amountKey.
func amountInput(kind bodyKind) gin.HandlerFunc {
	return func(c *gin.Context) {
		var body []byte
		if r := c.Request; r.Body != nil && r.Body != http.NoBody {
			body, _ = io.ReadAll(r.Body) // bytes already in memory (readBody)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		amount, bad := parseAmount(body, kind)
		if bad == nil && kind == transferBody && c.Param("id") == c.Param("to") {
			bad = &inputError{status: http.StatusUnprocessableEntity,
				msg: fmt.Sprintf("the transfer is invalid: order %s cannot be transferred to itself; name two different orders", c.Param("id"))}
		}
		if bad != nil {
			h := gin.H{"error": bad.msg}
			if len(bad.fields) > 0 {
				h["fields"] = bad.fields
			}
			c.AbortWithStatusJSON(bad.status, h)
			return
		}
		c.Set(amountKey, amount)
	}
}

// bodyKind is what a body of {"amount_cents": N} is for, in messages.
type bodyKind struct {
	a, the, missing string
}

// The bodies that carry an amount.
var (
	orderBody    = bodyKind{"an order", "the order", "the order's amount in cents"}
	transferBody = bodyKind{"a transfer", "the transfer", "the cents to move from the order to the other"}
)

// inputError is a body that amountInput refuses.
type inputError struct {
	status int               // 400: not JSON; 422: JSON, but not a valid order
	msg    string            // the JSON error
	fields map[string]string // of a 422: what is wrong with each field, by name
}

// createExample is a valid create body, for the messages.
const createExample = `{"amount_cents":1250}`

// parseAmount reads a create's or a transfer's body: a JSON object whose
// only field, amount_cents, is a positive whole number. Field names match
// ignoring case, as encoding/json binds them.
func parseAmount(body []byte, kind bodyKind) (int64, *inputError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return 0, &inputError{status: http.StatusBadRequest, msg: "the body is empty: send a JSON object such as " + createExample}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		var syntax *json.SyntaxError
		var notObject *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syntax):
			return 0, &inputError{status: http.StatusBadRequest, msg: "the body is not valid JSON: " + syntaxWhere(body, syntax) +
				"; send a JSON object such as " + createExample}
		case errors.As(err, &notObject):
			return 0, &inputError{status: http.StatusUnprocessableEntity, msg: "the body is a JSON " + notObject.Value +
				", not an object: send a JSON object such as " + createExample}
		}
		return 0, &inputError{status: http.StatusBadRequest, msg: "the body is not valid JSON: " + err.Error()}
	}
	problems := map[string]string{}
	var amount int64
	seen := false
	for name, raw := range fields {
		if !strings.EqualFold(name, "amount_cents") {
			problems[name] = fmt.Sprintf("%q is not a field of %s (its only field is amount_cents)", name, kind.a)
			continue
		}
		seen = true
		var n int64
		if string(bytes.TrimSpace(raw)) == "null" || json.Unmarshal(raw, &n) != nil {
			problems[name] = fmt.Sprintf("%s must be a whole number of cents, such as 1250, not %s", name, shorten(raw))
			continue
		}
		if n <= 0 {
			problems[name] = fmt.Sprintf("%s must be positive, not %d", name, n)
			continue
		}
		amount = n
	}
	if !seen {
		problems["amount_cents"] = "amount_cents is missing (" + kind.missing + ", a positive whole number such as 1250)"
	}
	if len(problems) == 0 {
		return amount, nil
	}
	msgs := make([]string, 0, len(problems))
	for _, name := range slices.Sorted(maps.Keys(problems)) {
		msgs = append(msgs, problems[name])
	}
	return 0, &inputError{status: http.StatusUnprocessableEntity, msg: kind.the + " is invalid: " + strings.Join(msgs, "; "), fields: problems}
}

// syntaxWhere describes a JSON syntax error with its place in body: line
// and column of the offending byte, or the end of a body that stops early.
func syntaxWhere(body []byte, err *json.SyntaxError) string {
	if err.Offset >= int64(len(body)) {
		return fmt.Sprintf("it ends, after %d bytes, before the JSON value is complete (%v)", len(body), err)
	}
	at := max(err.Offset-1, 0) // the decoder has read the offending byte
	line := 1 + bytes.Count(body[:at], []byte("\n"))
	col := at - int64(bytes.LastIndexByte(body[:at], '\n'))
	return fmt.Sprintf("%v, at line %d, column %d", err, line, col)
}

// shorten returns a JSON value for a message, cut to 40 bytes.
func shorten(raw json.RawMessage) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}

// budget bounds the rest of the chain, lock wait included, to d: the
// request's context is cancelled then.
func budget(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), d)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

// answer writes the result of a store operation.
func answer(c *gin.Context) func(Order, error) {
	return func(o Order, err error) {
		switch {
		case err == nil:
			c.JSON(http.StatusOK, o)
		case errors.Is(err, errNotFound):
			c.JSON(http.StatusNotFound, gin.H{"error": err.Error()})
		case errors.Is(err, errInvalid):
			c.JSON(http.StatusUnprocessableEntity, gin.H{"error": err.Error()})
		case errors.Is(err, errExists), errors.Is(err, errState):
			h := gin.H{"error": err.Error()}
			if o.ID != "" { // the order as it is, which the request did not change; never an empty one
				h["order"] = o
			}
			c.JSON(http.StatusUnprocessableEntity, h)
		case retryable(err):
			c.Header("Retry-After", "1")
			c.JSON(http.StatusServiceUnavailable, gin.H{"error": "nothing was written, try again: " + err.Error()})
		default:
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
		}
	}
}
