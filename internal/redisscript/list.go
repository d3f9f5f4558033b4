package redisscript

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/reqlock/reqlock/lockstore"
)

// Scanner is a Redis deployment as List walks it: its masters, and per
// master SCAN and a check of keys, each one round trip.
type Scanner interface {
	// Nodes returns the addresses of the deployment's masters, sorted, or
	// [""] for a deployment of one master (a standalone server, a
	// Sentinel-managed master).
	Nodes(ctx context.Context) ([]string, error)
	// Scan runs SCAN cursor MATCH match COUNT count on node (an address of
	// Nodes).
	Scan(ctx context.Context, node string, cursor uint64, match string, count int) (keys []string, next uint64, err error)
	// Strings reports which of keys hold a string value now (TYPE, in one
	// pipeline): a lock key holds its holder's token, or the marker of its
	// shares, while it is held, and is gone once it is not.
	Strings(ctx context.Context, keys []string) ([]bool, error)
}

// maxScans bounds the SCAN calls of one List call, so that a call over a
// large keyspace where few keys match returns within a few round trips
// (with fewer keys than its limit, or none).
const maxScans = 16

// listCursor is the state of a listing between List calls: the master
// being scanned (its address, "" for a deployment of one) and its SCAN
// cursor, the keys of the last SCAN that did not fit in the page (they
// are checked again and handed out first), and a hash of the prefix, so
// that a cursor of another listing is refused.
type listCursor struct {
	Prefix  uint32   `json:"h"`
	Node    string   `json:"n,omitempty"`
	Scan    uint64   `json:"c,omitempty"`
	Pending []string `json:"p,omitempty"`
	Done    bool     `json:"d,omitempty"` // every master is walked: only Pending is left
}

// cursorTag begins every cursor List hands out.
const cursorTag = "rs1."

func prefixHash(prefix string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(prefix))
	return h.Sum32()
}

func (c listCursor) encode() string {
	b, _ := json.Marshal(c) // a struct of strings and numbers: never fails
	return cursorTag + base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor of List for prefix; "" begins the listing.
func decodeCursor(s, prefix string) (listCursor, error) {
	c := listCursor{Prefix: prefixHash(prefix)}
	if s == "" {
		return c, nil
	}
	bad := func(why string) (listCursor, error) {
		return listCursor{}, fmt.Errorf("%w: cursor %q was not handed out by List for prefix %q (%s)", lockstore.ErrInvalidOption, s, prefix, why)
	}
	raw, ok := strings.CutPrefix(s, cursorTag)
	if !ok {
		return bad("unknown format")
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return bad("not base64")
	}
	var got listCursor
	if err := json.Unmarshal(b, &got); err != nil {
		return bad("not a cursor")
	}
	if got.Prefix != c.Prefix {
		return bad("another prefix")
	}
	for _, k := range got.Pending {
		if !strings.HasPrefix(k, prefix) || IsCompanion(k) {
			return bad("a key outside the listing")
		}
	}
	return got, nil
}

// List is lockstore.Inspector.List on a Redis deployment: the lock keys
// that begin with prefix and hold a string value now (a token, or the
// marker of shares), at most limit of them, and the cursor of the next
// page.
//
// It walks the masters of the deployment in the order of their addresses
// and each with SCAN cursor MATCH <prefix, escaped>* COUNT <room left in
// the page> (never KEYS, which blocks the server for the whole keyspace),
// drops the companion keys (IsCompanion), and checks the others with TYPE
// in one pipeline per SCAN, as SCAN may return a key that expired since.
// A SCAN may return more keys than the page has room for: those are kept
// in the cursor and handed out (checked again) on the next page. One call
// makes at most 16 SCANs; a page may hold fewer keys than limit, or none,
// before the end. A cursor whose master is no longer one (a failover, a
// resharding) starts the walk over: keys may come again, but none held
// throughout is missed, as SCAN guarantees on each master. A key whose
// slot migrates to a master already walked while the listing runs may be
// missed.
//
// Its errors wrap lockstore.ErrInvalidOption for a limit out of
// 1..lockstore.MaxListLimit or a cursor List did not hand out; the caller
// prefixes them with its package.
func List(ctx context.Context, sc Scanner, prefix, cursor string, limit int) ([]string, string, error) {
	if limit < 1 || limit > lockstore.MaxListLimit {
		return nil, "", fmt.Errorf("%w: list limit %d is out of 1..%d", lockstore.ErrInvalidOption, limit, lockstore.MaxListLimit)
	}
	cur, err := decodeCursor(cursor, prefix)
	if err != nil {
		return nil, "", err
	}
	nodes, err := sc.Nodes(ctx)
	if err != nil {
		return nil, "", err
	}
	idx := 0
	switch {
	case cur.Done:
		idx = len(nodes)
	case cursor != "":
		if idx = slices.Index(nodes, cur.Node); idx < 0 {
			idx, cur.Scan = 0, 0 // the master is gone: start over
		}
	}
	var out []string
	take := func(keys []string) error {
		if len(keys) == 0 {
			return nil
		}
		held, err := sc.Strings(ctx, keys)
		if err != nil {
			return err
		}
		cur.Pending = nil
		for i, k := range keys {
			switch {
			case !held[i]:
			case len(out) < limit:
				out = append(out, k)
			default:
				cur.Pending = append(cur.Pending, k)
			}
		}
		return nil
	}
	if err := take(cur.Pending); err != nil {
		return nil, "", err
	}
	match := MatchPattern(prefix)
	for scans := 0; len(out) < limit && idx < len(nodes) && scans < maxScans; scans++ {
		keys, next, err := sc.Scan(ctx, nodes[idx], cur.Scan, match, limit-len(out))
		if err != nil {
			return nil, "", err
		}
		if cur.Scan = next; next == 0 {
			idx++
		}
		cands := keys[:0:0]
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) && !IsCompanion(k) {
				cands = append(cands, k)
			}
		}
		if err := take(cands); err != nil {
			return nil, "", err
		}
	}
	if idx == len(nodes) && len(cur.Pending) == 0 {
		return out, "", nil
	}
	if idx < len(nodes) {
		cur.Node = nodes[idx]
	} else {
		cur.Node, cur.Scan, cur.Done = "", 0, true
	}
	return out, cur.encode(), nil
}
