package core

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/reqlock/reqlock/lockstore"
)

// The inspection seam lives in package lockstore; these names keep it
// reachable from core.
type (
	// Inspector lists and inspects a store's locks (see
	// lockstore.Inspector).
	Inspector = lockstore.Inspector
	// KeyState is what an Inspector knows of a key (see
	// lockstore.KeyState).
	KeyState = lockstore.KeyState
	// HolderState is one holder of a key (see lockstore.HolderState).
	HolderState = lockstore.HolderState
	// WaiterState is one waiter of a key's fair queue (see
	// lockstore.WaiterState).
	WaiterState = lockstore.WaiterState
)

// MaxListLimit is the largest page List returns.
const MaxListLimit = lockstore.MaxListLimit

// ErrNoInspector means the Locker's store cannot list or inspect its locks
// (it is not an Inspector).
var ErrNoInspector = errors.New("reqlock: the store cannot list or inspect its locks")

// LockState is what Locker.Inspect found of one name: who holds it, who
// waits in its fair queue, its last fence. It is a snapshot, stale as soon
// as it is returned.
type LockState struct {
	// Name is the name inspected, and Key its store key.
	Name, Key string
	// Holders hold the name: one exclusive holder, or shares in slot order.
	// Empty when the name is free.
	Holders []HolderInfo
	// Waiters are the fair queue's live waiters, head first (WithFair).
	// Waiters that spin are not in the store and not listed.
	Waiters []WaiterInfo
	// Writer is the exclusive holder that waits for the name's shares to
	// drain, nil if none.
	Writer *WaiterInfo
	// Fence is the last fencing token drawn for the name, 0 if none.
	Fence int64
}

// Held reports whether the name has a holder.
func (s LockState) Held() bool { return len(s.Holders) > 0 }

// HolderInfo is one holder of a name, with who it is when its token
// carries a holder record (Identified).
type HolderInfo struct {
	HolderState
	// Holder is read from the token (ParseHolder); Identified reports
	// whether it carried one.
	Holder     Holder
	Identified bool
}

// WaiterInfo is one waiter, with who it is when its token carries a holder
// record (Identified).
type WaiterInfo struct {
	WaiterState
	Holder     Holder
	Identified bool
}

// inspector returns the store as an Inspector, or ErrNoInspector.
func (l *Locker) inspector() (Inspector, error) {
	if l.err != nil {
		return nil, l.err
	}
	in, ok := l.store.(Inspector)
	if !ok {
		return nil, fmt.Errorf("%w (%T)", ErrNoInspector, l.store)
	}
	return in, nil
}

// List returns the names of locks held now whose name begins with prefix
// ("" for all), at most limit (1..MaxListLimit) of them, and the cursor of
// the next page: pass "" to begin; "" comes back when the listing is done.
// A page may hold fewer names than limit before the end, and a name may
// appear on more than one page (see Inspector.List). Names too long to be
// kept verbatim are listed as their "sha256:" form (see Locker.Key). It
// reads only, and never scans a whole keyspace in one call; ctx bounds it,
// not the Locker's I/O timeout: a page can take a store longer than one
// lock command (memcached dumps its items for every page).
func (l *Locker) List(ctx context.Context, prefix, cursor string, limit int) (names []string, next string, err error) {
	in, err := l.inspector()
	if err != nil {
		return nil, "", err
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, "", fmt.Errorf("%w: List: limit %d, want 1 to %d", ErrInvalidOption, limit, MaxListLimit)
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, "", fmt.Errorf("%w: List: the prefix %q has a brace, which no kept name has", ErrInvalidName, prefix)
	}
	keys, next, err := in.List(ctx, l.cfg.prefix+"{"+prefix, cursor, limit)
	if err != nil {
		return nil, "", l.inspectErr("list", prefix, err)
	}
	names = make([]string, 0, len(keys))
	for _, k := range keys {
		if n, ok := l.nameOf(k); ok {
			names = append(names, n)
		}
	}
	return names, next, nil
}

// listedKey is Key for a name as Inspect and ForceRelease take it: the
// "sha256:" and 64 hex digits that List returns for a hashed name is its
// key's name already (Key would hash it again, so that no name given to
// Acquire meets a hashed one).
func (l *Locker) listedKey(name string) (string, error) {
	if hex, ok := strings.CutPrefix(name, hashedMark); ok && len(hex) == 64 && strings.Trim(hex, "0123456789abcdef") == "" {
		return l.cfg.prefix + "{" + name + "}", nil
	}
	return l.Key(name)
}

// nameOf returns the name whose key is key: key without the Locker's
// prefix and the braces of the hash tag.
func (l *Locker) nameOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, l.cfg.prefix+"{")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "}")
	if !ok || name == "" || strings.ContainsAny(name, "{}") {
		return "", false
	}
	return name, true
}

// Inspect returns who holds name, who waits for it in its fair queue, and
// its last fence, with each holder's identity read from its token. A free
// name is no error: its state has no holders. name is a name as Acquire
// takes it, or the "sha256:" form in which List gives a name too long to
// be kept verbatim. ctx bounds it (a store may
// need a few round trips: etcd asks each holder's lease its TTL).
func (l *Locker) Inspect(ctx context.Context, name string) (LockState, error) {
	in, err := l.inspector()
	if err != nil {
		return LockState{}, err
	}
	key, err := l.listedKey(name)
	if err != nil {
		return LockState{}, err
	}
	ks, err := in.Inspect(ctx, key)
	if err != nil {
		return LockState{}, l.inspectErr("inspect", name, err)
	}
	st := LockState{Name: name, Key: key, Fence: ks.Fence}
	for _, h := range ks.Holders {
		who, ok := ParseHolder(h.Token)
		st.Holders = append(st.Holders, HolderInfo{h, who, ok})
	}
	for _, w := range ks.Waiters {
		who, ok := ParseHolder(w.Token)
		st.Waiters = append(st.Waiters, WaiterInfo{w, who, ok})
	}
	if ks.Writer != "" {
		who, ok := ParseHolder(ks.Writer)
		st.Writer = &WaiterInfo{WaiterState{Token: ks.Writer}, who, ok}
	}
	return st, nil
}

// ForceRelease is the operator's way out of a lock whose holder is stuck:
// it releases name's hold by token, and only that token's (an exclusive
// hold by the store's compare-and-delete, a share by ReleaseShare), as a
// Release by that holder would, and reports whether token still held name.
// It never releases a hold it was not given the token of, so a stale
// command cannot free a later holder. The holder's lease learns it at its
// next extend (the watchdog) or release, which fail with ErrNotHeld; its
// handler may still be running, which is why this is for operators only.
func (l *Locker) ForceRelease(ctx context.Context, name, token string) (bool, error) {
	if token == "" {
		return false, fmt.Errorf("%w: ForceRelease: the token is empty", ErrInvalidOption)
	}
	st, err := l.Inspect(ctx, name)
	if err != nil {
		return false, err
	}
	for _, h := range st.Holders {
		if h.Token != token {
			continue
		}
		ioCtx, cancel := context.WithTimeout(ctx, l.cfg.ioTimeout)
		defer cancel()
		var ok bool
		if h.Exclusive {
			ok, err = l.store.Release(ioCtx, st.Key, token)
		} else if sh, isSharer := l.store.(Sharer); isSharer {
			ok, err = sh.ReleaseShare(ioCtx, st.Key, token)
		} else {
			return false, fmt.Errorf("reqlock: ForceRelease %q: the store reported a share but is not a Sharer", name)
		}
		if err != nil {
			return false, l.storageErr("release", name, err)
		}
		return ok, nil
	}
	return false, nil
}

// inspectErr wraps an Inspector's error: invalid arguments as they are,
// everything else as a storage error.
func (l *Locker) inspectErr(op, what string, err error) error {
	if errors.Is(err, ErrInvalidOption) {
		return fmt.Errorf("reqlock: %s %q: %w", op, what, err)
	}
	return l.storageErr(op, what, err)
}
