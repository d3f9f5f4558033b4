package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/reqlock/reqlock/core"
)

// hashedName reports whether name is the form in which List gives a name
// too long (or unfit) to be kept verbatim: "sha256:" and 64 hex digits
// (see core's Locker.Key).
func hashedName(name string) bool {
	hex, ok := strings.CutPrefix(name, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	return strings.Trim(hex, "0123456789abcdef") == ""
}

// inspect returns name's state. A name in the hashed form that ls prints is
// inspected by its key, through the store's Inspector: core's
// Locker.Inspect would hash it once more (a name given as "sha256:..." is
// hashed, so that it never meets a hashed one), and find nothing.
func (c *conn) inspect(ctx context.Context, name string) (core.LockState, error) {
	if !hashedName(name) {
		st, err := c.locker.Inspect(ctx, name)
		return st, storeErr(c, err)
	}
	in, ok := c.store.(core.Inspector)
	if !ok {
		return core.LockState{}, storeErr(c, core.ErrNoInspector)
	}
	key := c.prefix + "{" + name + "}"
	ks, err := in.Inspect(ctx, key)
	if err != nil {
		return core.LockState{}, fmt.Errorf("%w: inspect %q: %w", core.ErrStorage, name, err)
	}
	st := core.LockState{Name: name, Key: key, Fence: ks.Fence}
	for _, h := range ks.Holders {
		who, ok := core.ParseHolder(h.Token)
		st.Holders = append(st.Holders, core.HolderInfo{HolderState: h, Holder: who, Identified: ok})
	}
	for _, w := range ks.Waiters {
		who, ok := core.ParseHolder(w.Token)
		st.Waiters = append(st.Waiters, core.WaiterInfo{WaiterState: w, Holder: who, Identified: ok})
	}
	if ks.Writer != "" {
		who, ok := core.ParseHolder(ks.Writer)
		st.Writer = &core.WaiterInfo{WaiterState: core.WaiterState{Token: ks.Writer}, Holder: who, Identified: ok}
	}
	return st, nil
}

// forceRelease releases token's hold of name, as core's
// Locker.ForceRelease does, and reports whether token still held it; a
// name in its hashed form is released by its key, as inspect reads it: an
// exclusive hold by the store's compare-and-delete (Release), a share by
// ReleaseShare, and nothing that token does not hold.
func (c *conn) forceRelease(ctx context.Context, name, token string) (bool, error) {
	if !hashedName(name) {
		ok, err := c.locker.ForceRelease(ctx, name, token)
		return ok, storeErr(c, err)
	}
	st, err := c.inspect(ctx, name)
	if err != nil {
		return false, err
	}
	for _, h := range st.Holders {
		if h.Token != token {
			continue
		}
		var ok bool
		if h.Exclusive {
			ok, err = c.store.Release(ctx, st.Key, token)
		} else if sh, isSharer := c.store.(core.Sharer); isSharer {
			ok, err = sh.ReleaseShare(ctx, st.Key, token)
		} else {
			return false, errors.New("reqlock: the store reported a share but is not a Sharer")
		}
		if err != nil {
			return false, fmt.Errorf("%w: release %q: %w", core.ErrStorage, name, err)
		}
		return ok, nil
	}
	return false, nil
}
