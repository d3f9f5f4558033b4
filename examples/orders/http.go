package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
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

// httpHandler serves the orders API over HTTP; changes are locked per order.
//
// The order of the middleware on a locked route matters:
//
//	readBody (MaxBody, within the server's ReadTimeout) → budget (HandlerTimeout) → ginlock → handler
//
// The body is read whole before the lock is taken, so the lock is held only
// while the handler works, never while a client sends. Handlers pass
// c.Request.Context(), which carries the lease and is cancelled at the end of
// the budget or when the lease is lost, to the store: its Acquire of the same
// order is then reentrant (c itself would not carry it; see ginlock's
// documentation), and it stops when the context ends.
func httpHandler(s *store, locker *core.Locker, cfg Config, opts ...ginlock.Option) (http.Handler, error) {
	key, err := keyfunc.Template("order:{param.id}")
	if err != nil {
		return nil, err
	}
	if err := ginlock.Check(locker, key, opts...); err != nil {
		return nil, err
	}
	locked := []gin.HandlerFunc{readBody(cfg.MaxBody), budget(cfg.HandlerTimeout), ginlock.New(locker, key, opts...)}
	r := gin.New()
	r.Use(gin.Recovery(), otelgin.Middleware("orders")) // request spans, parents of the lock spans
	r.GET("/orders/:id", func(c *gin.Context) {
		if o, ok := s.get(c.Param("id")); ok {
			c.JSON(http.StatusOK, o)
			return
		}
		c.JSON(http.StatusNotFound, gin.H{"error": errNotFound.Error()})
	})
	r.POST("/orders/:id", append(locked, func(c *gin.Context) {
		defer s.enter(c.Param("id"))()
		var in struct {
			AmountCents int64 `json:"amount_cents"`
		}
		if err := c.ShouldBindJSON(&in); err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			return
		}
		answer(c)(s.create(c.Request.Context(), c.Param("id"), in.AmountCents))
	})...)
	r.POST("/orders/:id/pay", append(locked, func(c *gin.Context) {
		defer s.enter(c.Param("id"))()
		answer(c)(s.pay(c.Request.Context(), c.Param("id")))
	})...)
	r.POST("/orders/:id/cancel", append(locked, func(c *gin.Context) {
		defer s.enter(c.Param("id"))()
		answer(c)(s.cancel(c.Request.Context(), c.Param("id")))
	})...)
	return r, nil
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
		case errors.Is(err, errExists), errors.Is(err, errState):
			c.JSON(http.StatusUnprocessableEntity, gin.H{"error": err.Error(), "order": o})
		case retryable(err):
			c.Header("Retry-After", "1")
			c.JSON(http.StatusServiceUnavailable, gin.H{"error": "nothing was written, try again: " + err.Error()})
		default:
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
		}
	}
}
