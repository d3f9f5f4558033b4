package main

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/ginlock"
	"github.com/reqlock/reqlock/keyfunc"
)

// httpHandler serves the orders API over HTTP; changes are locked per order.
// Handlers pass c.Request.Context(), which carries the lease, to the store:
// its Acquire of the same order is then reentrant (c itself would not carry
// it; see ginlock's documentation).
func httpHandler(s *store, locker *core.Locker, opts ...ginlock.Option) (http.Handler, error) {
	key, err := keyfunc.Template("order:{param.id}")
	if err != nil {
		return nil, err
	}
	lock := ginlock.New(locker, key, opts...)
	r := gin.New()
	r.Use(gin.Recovery(), otelgin.Middleware("orders")) // request spans, parents of the lock spans
	r.GET("/orders/:id", func(c *gin.Context) {
		if o, ok := s.get(c.Param("id")); ok {
			c.JSON(http.StatusOK, o)
			return
		}
		c.JSON(http.StatusNotFound, gin.H{"error": errNotFound.Error()})
	})
	r.POST("/orders/:id", lock, func(c *gin.Context) {
		defer s.enter(c.Param("id"))()
		var in struct {
			AmountCents int64 `json:"amount_cents"`
		}
		if err := c.ShouldBindJSON(&in); err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			return
		}
		answer(c)(s.create(c.Request.Context(), c.Param("id"), in.AmountCents))
	})
	r.POST("/orders/:id/pay", lock, func(c *gin.Context) {
		defer s.enter(c.Param("id"))()
		answer(c)(s.pay(c.Request.Context(), c.Param("id")))
	})
	r.POST("/orders/:id/cancel", lock, func(c *gin.Context) {
		defer s.enter(c.Param("id"))()
		answer(c)(s.cancel(c.Request.Context(), c.Param("id")))
	})
	return r, nil
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
		default:
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
		}
	}
}
