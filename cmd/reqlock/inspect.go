package main

import (
	"context"

	"github.com/reqlock/reqlock/core"
)

// inspect returns name's state: a name as the service locks it, or the
// hashed form ("sha256:" and 64 hex digits) that ls prints for a name too
// long to be kept verbatim (core's Locker.Inspect takes both).
func (c *conn) inspect(ctx context.Context, name string) (core.LockState, error) {
	st, err := c.locker.Inspect(ctx, name)
	return st, storeErr(c, err)
}

// forceRelease releases token's hold of name and reports whether token
// still held it (core's Locker.ForceRelease: an exclusive hold by the
// store's compare-and-delete, a share by ReleaseShare, never another
// token's).
func (c *conn) forceRelease(ctx context.Context, name, token string) (bool, error) {
	ok, err := c.locker.ForceRelease(ctx, name, token)
	return ok, storeErr(c, err)
}
