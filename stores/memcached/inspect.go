package memcachedstore

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/reqlock/reqlock/lockstore"
)

// This file is the store's lockstore.Inspector: List (memcached's
// lru_crawler metadump, on a connection of its own to each server) and
// Inspect (gets of the lock's items, meta get for the TTLs left).

var _ lockstore.Inspector = (*Store)(nil)

// companionFlags are the client flags of the items that are not locks: the
// share items, the waiter records and the fence counters. List tells them
// from lock items by them, also when their keys are hashed (see itemKey),
// which hides what they belong to.
const companionFlags uint32 = 0x72716331 // "rqc1"

// getBatch bounds the keys of one GetMulti of List.
const getBatch = 500

// maxReplyLine bounds a line of memcached's reply that List and Inspect
// read: a metadump line is a key of up to 250 bytes, URL-encoded (three
// bytes each at worst), and a few fields.
const maxReplyLine = 4096

// List is part of lockstore.Inspector. memcached cannot enumerate keys
// through gomemcache: List asks each server of WithServers for
// `lru_crawler metadump hash` on a connection of its own (memcached 1.6.9
// or later, its LRU crawler on, as it is by default: the dump walks the
// server's hash table in its crawler thread and does not hold up other
// requests), keeps the keys that begin with prefix and sort after the
// cursor (memcached sends them URL-encoded, in no order), the limit
// smallest of them, and checks that each is a held lock (one gets of them,
// and one of the share items of those that list shares): share items,
// waiter records and fence counters (marked by their flags), released and
// expired items, and lists whose shares all expired are left out. Keys
// come in byte order; the cursor is the last key the page considered
// (base64url), so a page may hold fewer keys than limit.
//
// Each page dumps every item of every server again: a listing is O(items
// in memcached) per page, which suits an operator's tool, not a request
// path. A memcached older than 1.6.9 (from 1.4.31) is asked for
// `lru_crawler metadump all`, a walk of its LRUs while they change, which
// misses an item that memcached moves from one LRU to another during the
// walk (an item read recently, for one). A key that memcached could not
// take as it is (see Keys in the package documentation) is listed by its
// item key, "reqlock-sha256:" and a hex SHA-256, when prefix is a prefix
// of that; Inspect takes that key.
//
// A limit outside 1..MaxListLimit, a cursor that does not decode to a key
// under prefix, or a Store built without WithServers is an error wrapping
// lockstore.ErrInvalidOption. A server that answers the dump with an
// error (the crawler turned off, a memcached older than 1.4.31) fails the
// listing with an error that quotes the server's answer; one that is busy
// with another crawl is asked again until ctx ends.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if limit < 1 || limit > lockstore.MaxListLimit {
		return nil, "", fmt.Errorf("memcachedstore: list %s: %w: the limit %d is not within 1..%d", prefix, lockstore.ErrInvalidOption, limit, lockstore.MaxListLimit)
	}
	after := ""
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(raw) == 0 || !strings.HasPrefix(string(raw), prefix) {
			return nil, "", fmt.Errorf("memcachedstore: list %s: %w: the cursor %q is not one this listing handed out", prefix, lockstore.ErrInvalidOption, cursor)
		}
		after = string(raw)
	}
	if len(s.servers) == 0 {
		return nil, "", fmt.Errorf("memcachedstore: list %s: %w: the Store does not know its servers: build it WithServers (gomemcache does not tell them)", prefix, lockstore.ErrInvalidOption)
	}
	page := smallest{limit: limit}
	for _, addr := range s.servers {
		err := s.metadump(ctx, addr, func(k string) {
			if strings.HasPrefix(k, prefix) && k > after && legalKey(k) {
				page.add(k)
			}
		})
		if err != nil {
			return nil, "", fmt.Errorf("memcachedstore: list %s: %w", prefix, err)
		}
	}
	cands, more := page.result()
	keys, err := s.heldOf(ctx, cands)
	if err != nil {
		return nil, "", fmt.Errorf("memcachedstore: list %s: %w", prefix, err)
	}
	next := ""
	if more {
		next = base64.RawURLEncoding.EncodeToString([]byte(cands[len(cands)-1]))
	}
	return keys, next, nil
}

// smallest keeps the limit smallest distinct keys it is given, in memory
// of the order of limit, and whether it dropped any.
type smallest struct {
	limit int
	keys  []string
	more  bool
}

func (p *smallest) add(k string) {
	p.keys = append(p.keys, k)
	if len(p.keys) >= 2*p.limit+64 {
		p.compact()
	}
}

func (p *smallest) compact() {
	slices.Sort(p.keys)
	p.keys = slices.Compact(p.keys)
	if len(p.keys) > p.limit {
		p.keys, p.more = p.keys[:p.limit], true
	}
}

// result returns the keys in byte order, and whether there were more.
func (p *smallest) result() ([]string, bool) {
	p.compact()
	return p.keys, p.more
}

// heldOf returns the keys of cands, item keys, whose items are held locks:
// an exclusive holder's token, or a list of shares one of which is live
// (a share item that holds its token). A hashed item key's shares cannot
// be checked (their keys derive from the lock key the hash hides): such a
// list counts as held while it lists shares.
func (s *Store) heldOf(ctx context.Context, cands []string) ([]string, error) {
	items, err := s.getBatched(ctx, cands)
	if err != nil {
		return nil, err
	}
	held := make(map[string]bool)
	shareOwner := make(map[string]string) // share item key → its lock's item key
	shareToken := make(map[string]string) // share item key → its token
	var shareKeys []string
	for _, k := range cands {
		it := items[k]
		if it == nil || it.Flags == companionFlags || len(it.Value) == 0 {
			continue
		}
		list, isList, err := decodeShares(it.Value)
		switch {
		case !isList:
			held[k] = true
		case err != nil: // not a list of this store's
		case hashedItemKey(k):
			held[k] = len(list.entries) > 0
		default:
			for _, e := range list.entries {
				sk := shareKey(k, e.token)
				shareOwner[sk], shareToken[sk] = k, e.token
				shareKeys = append(shareKeys, sk)
			}
		}
	}
	if len(shareKeys) > 0 {
		shares, err := s.getBatched(ctx, shareKeys)
		if err != nil {
			return nil, err
		}
		for _, sk := range shareKeys {
			if it := shares[sk]; it != nil && string(it.Value) == shareToken[sk] {
				held[shareOwner[sk]] = true
			}
		}
	}
	var keys []string
	for _, k := range cands {
		if held[k] {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// getBatched reads keys with GetMulti, getBatch keys at a time.
func (s *Store) getBatched(ctx context.Context, keys []string) (map[string]*memcache.Item, error) {
	all := make(map[string]*memcache.Item, len(keys))
	for batch := range slices.Chunk(keys, getBatch) {
		items, err := s.getMulti(ctx, batch)
		if err != nil {
			return nil, err
		}
		for k, it := range items {
			all[k] = it
		}
	}
	return all, nil
}

// hashedItemKey reports whether k is the item key of a key that memcached
// could not take as it is: "reqlock-sha256:" and 64 lowercase hex digits
// (see itemKey). No key of a Locker has that form (they hold a '{').
func hashedItemKey(k string) bool {
	h, ok := strings.CutPrefix(k, hashedPrefix)
	if !ok || len(h) != 2*32 || strings.ToLower(h) != h {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// Inspect is part of lockstore.Inspector. One GetMulti reads the lock's
// item, its waiter record and its fence counter; when the item lists
// shares, a second reads their share items, to keep the live ones (in slot
// order; shared holds in the order they were taken); with WithServers, a
// meta get (`mg <key> t v`) on a connection of its own to the item's
// server asks for the TTL left of each holder's item (the lock's item, or
// the share item), one exchange per server. The TTL is memcached's, whole
// seconds by the server's clock, less the two seconds the store adds to
// every TTL (see TTL resolution in the package documentation): what is
// left of the TTL the holder asked for, to within a second (a TTL that was
// not whole seconds was rounded up); memcached holds the item up to two
// seconds longer. It is 0 without WithServers, when the item changed
// between the reads, or in those last two seconds.
//
// Fence is the value of the key's fence counter, the last fence drawn for
// it (0 if none lives); a holder's own Fence is 0: the counter does not
// tell whose draw it was. Writer is the token of the exclusive holder that
// waits for the shares to drain (the waiter record's value). The store has
// no fair queue: no waiters.
//
// key may also be an item key that List returned for a key memcached could
// not take as it is ("reqlock-sha256:<hex>"): its holders are read from
// the item, but its companion items, whose keys derive from the key the
// hash hides, are not: no waiting writer, no fence, and every share its
// list holds (their expiry cannot be checked).
func (s *Store) Inspect(ctx context.Context, key string) (lockstore.KeyState, error) {
	st := lockstore.KeyState{Key: key}
	k, hashed := itemKey(key), hashedItemKey(key)
	if hashed {
		k = key
	}
	keys := []string{k}
	if !hashed {
		keys = append(keys, waiterKey(key), counterKey(key))
	}
	fail := func(err error) (lockstore.KeyState, error) {
		return lockstore.KeyState{Key: key}, fmt.Errorf("memcachedstore: inspect %s: %w", key, err)
	}
	items, err := s.getMulti(ctx, keys)
	if err != nil {
		return fail(err)
	}
	if !hashed {
		if w := items[waiterKey(key)]; w != nil {
			st.Writer = string(w.Value)
		}
		if f := items[counterKey(key)]; f != nil {
			st.Fence, _ = strconv.ParseInt(string(f.Value), 10, 64)
		}
	}
	it := items[k]
	if it == nil || it.Flags == companionFlags || len(it.Value) == 0 {
		return st, nil
	}
	list, isList, err := decodeShares(it.Value)
	if err != nil {
		return fail(err)
	}
	var holderItems []string // the item of each holder, for its TTL
	if !isList {
		st.Holders = []lockstore.HolderState{{Token: string(it.Value), Exclusive: true}}
		holderItems = []string{k}
	} else {
		if !hashed {
			if list, err = s.live(ctx, key, list); err != nil {
				return fail(err)
			}
		}
		slices.SortStableFunc(list.entries, func(a, b shareEntry) int { return cmp.Compare(a.slot, b.slot) })
		for _, e := range list.entries {
			st.Holders = append(st.Holders, lockstore.HolderState{Token: e.token, Hold: lockstore.Hold{N: list.n}, Slot: e.slot})
			if hashed {
				holderItems = append(holderItems, "")
			} else {
				holderItems = append(holderItems, shareKey(key, e.token))
			}
		}
	}
	if len(s.servers) == 0 {
		return st, nil
	}
	ttls, err := s.itemTTLs(ctx, holderItems)
	if err != nil {
		return fail(err)
	}
	for i := range st.Holders {
		if t, ok := ttls[holderItems[i]]; ok && t.value == st.Holders[i].Token {
			st.Holders[i].TTL = max(t.ttl-expirationMargin*time.Second, 0)
		}
	}
	return st, nil
}

// itemTTL is what meta get told of an item: its value and TTL left.
type itemTTL struct {
	value string
	ttl   time.Duration // 0 when it does not expire
}

// itemTTLs asks each item's server (picked as memcache.New's ServerList
// does) for its value and TTL left, pipelined on one connection per
// server. Missing items are not in the result; "" keys are skipped.
func (s *Store) itemTTLs(ctx context.Context, keys []string) (map[string]itemTTL, error) {
	byServer := make(map[string][]string)
	for _, k := range keys {
		if k != "" {
			addr := s.pickServer(k)
			byServer[addr] = append(byServer[addr], k)
		}
	}
	out := make(map[string]itemTTL, len(keys))
	for addr, ks := range byServer {
		err := s.exchange(ctx, addr, func(rw *bufio.ReadWriter) error {
			for _, k := range ks {
				if _, err := fmt.Fprintf(rw, "mg %s t v\r\n", k); err != nil {
					return err
				}
			}
			if err := rw.Flush(); err != nil {
				return err
			}
			for _, k := range ks {
				t, ok, err := readMetaGet(rw.Reader)
				if err != nil {
					return err
				}
				if ok {
					out[k] = t
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("the TTLs at %s: %w", addr, err)
		}
	}
	return out, nil
}

// pickServer returns the server of key k among WithServers, as
// memcache.ServerList.PickServer picks it.
func (s *Store) pickServer(k string) string {
	if len(s.servers) == 1 {
		return s.servers[0]
	}
	return s.servers[crc32.ChecksumIEEE([]byte(k))%uint32(len(s.servers))]
}

// readMetaGet reads the reply to `mg <key> t v`: "VA <size> t<ttl>", then
// the value; "EN" for a miss.
func readMetaGet(r *bufio.Reader) (itemTTL, bool, error) {
	line, err := readLine(r)
	if err != nil {
		return itemTTL{}, false, err
	}
	if line == "EN" {
		return itemTTL{}, false, nil
	}
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "VA" {
		return itemTTL{}, false, fmt.Errorf("unexpected reply to mg: %q", line)
	}
	size, err := strconv.Atoi(f[1])
	if err != nil || size < 0 || size > 1<<20 {
		return itemTTL{}, false, fmt.Errorf("unexpected reply to mg: %q", line)
	}
	var t itemTTL
	for _, flag := range f[2:] {
		if v, ok := strings.CutPrefix(flag, "t"); ok {
			secs, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return itemTTL{}, false, fmt.Errorf("unexpected reply to mg: %q", line)
			}
			t.ttl = time.Duration(max(secs, 0)) * time.Second // -1: no expiry
		}
	}
	data := make([]byte, size+2)
	if _, err := io.ReadFull(r, data); err != nil {
		return itemTTL{}, false, err
	}
	if !bytes.HasSuffix(data, []byte("\r\n")) {
		return itemTTL{}, false, fmt.Errorf("unexpected value in the reply to mg: %q", data)
	}
	t.value = string(data[:size])
	return t, true, nil
}

// errBusy is memcached's answer to a crawl while another runs; errBadClass
// its answer to a dump of a class it does not know, which is how a
// memcached older than 1.6.9 answers `lru_crawler metadump hash`.
var (
	errBusy     = errors.New("the LRU crawler is busy")
	errBadClass = errors.New("memcached does not know the class to dump")
)

// busyPause is the first pause before a dump that found the crawler busy
// is asked again; it doubles up to busyPauseMax.
const (
	busyPause    = 20 * time.Millisecond
	busyPauseMax = time.Second
)

// metadump sends `lru_crawler metadump hash` to the server at addr (a
// walk of its hash table) and calls keep with the key of each item of its
// reply; a server too old to walk its hash table is asked for
// `lru_crawler metadump all` (a walk of its LRUs, which misses the items
// that move from one LRU to another during the walk). When the crawler is
// busy (another crawl runs), it asks again, after a pause, until ctx ends.
func (s *Store) metadump(ctx context.Context, addr string, keep func(string)) error {
	return s.exchange(ctx, addr, func(rw *bufio.ReadWriter) error {
		what := "hash"
		for pause := busyPause; ; pause = min(2*pause, busyPauseMax) {
			if _, err := rw.WriteString("lru_crawler metadump " + what + "\r\n"); err != nil {
				return err
			}
			if err := rw.Flush(); err != nil {
				return err
			}
			err := parseMetadump(rw.Reader, keep)
			if errors.Is(err, errBadClass) && what == "hash" {
				what = "all"
				continue
			}
			if !errors.Is(err, errBusy) {
				if err != nil {
					return fmt.Errorf("lru_crawler metadump %s at %s: %w", what, addr, err)
				}
				return nil
			}
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	})
}

// parseMetadump reads the reply to `lru_crawler metadump all` up to its
// END, and calls keep with the key of each item line ("key=<URL-encoded
// key> exp=... la=... ..."). An answer of memcached's that is not a dump
// (ERROR, CLIENT_ERROR, SERVER_ERROR) is an error that quotes it; BUSY is
// errBusy.
func parseMetadump(r *bufio.Reader, keep func(string)) error {
	for {
		line, err := readLine(r)
		if err != nil {
			return err
		}
		switch {
		case line == "END":
			return nil
		case strings.HasPrefix(line, "key="):
			enc, _, _ := strings.Cut(line[len("key="):], " ")
			k, err := url.PathUnescape(enc)
			if err != nil || k == "" {
				return fmt.Errorf("a malformed key in %q", line)
			}
			keep(k)
		case strings.HasPrefix(line, "BUSY"):
			return errBusy
		case strings.HasPrefix(line, "BADCLASS"):
			return errBadClass
		case line == "ERROR", strings.HasPrefix(line, "ERROR "), strings.HasPrefix(line, "CLIENT_ERROR"), strings.HasPrefix(line, "SERVER_ERROR"):
			return fmt.Errorf("memcached answered %q (it needs memcached 1.4.31 or later, with its LRU crawler on)", line)
		default:
			return fmt.Errorf("an unexpected line %q", line)
		}
	}
}

// readLine reads a line of up to maxReplyLine bytes, without its "\n" or
// "\r\n" (metadump ends its item lines with "\n" alone).
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, err := r.ReadSlice('\n')
		b = append(b, chunk...)
		if len(b) > maxReplyLine {
			return "", fmt.Errorf("a reply line longer than %d bytes", maxReplyLine)
		}
		switch {
		case err == nil:
			return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return "", io.ErrUnexpectedEOF
		default:
			return "", err
		}
	}
}

// exchange runs f on a connection of its own to the server at addr
// (dialled with the client's DialContext when it has one, "unix" for a
// path), cut when ctx ends; each read and write must make progress within
// the client's Timeout (a dump may take longer than that in all).
func (s *Store) exchange(ctx context.Context, addr string, f func(rw *bufio.ReadWriter) error) error {
	dial := s.client.DialContext
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	network := "tcp"
	if strings.Contains(addr, "/") {
		network = "unix"
	}
	dctx, cancel := context.WithTimeout(ctx, s.timeout())
	c, err := dial(dctx, network, addr)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	defer c.Close()
	ic := &idleConn{Conn: c, idle: s.timeout()}
	ic.until, _ = ctx.Deadline()
	stop := context.AfterFunc(ctx, ic.cutOff) // a cancel cuts the exchange
	defer stop()
	err = f(bufio.NewReadWriter(bufio.NewReaderSize(ic, maxReplyLine), bufio.NewWriter(ic)))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			return context.DeadlineExceeded // the connection's deadline, ctx's, came first
		}
	}
	return err
}

// idleConn is a connection whose every read and write must make progress
// within idle, and end by until (when set).
type idleConn struct {
	net.Conn
	idle  time.Duration
	until time.Time

	mu  sync.Mutex
	cut bool // ctx ended: every read and write fails at once
}

// cutOff makes the connection's reads and writes fail at once, for good.
func (c *idleConn) cutOff() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	_ = c.Conn.SetDeadline(time.Now())
}

// deadline sets the deadline of the next read or write.
func (c *idleConn) deadline() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return
	}
	d := time.Now().Add(c.idle)
	if !c.until.IsZero() && c.until.Before(d) {
		d = c.until
	}
	_ = c.Conn.SetDeadline(d)
}

func (c *idleConn) Read(p []byte) (int, error) {
	c.deadline()
	return c.Conn.Read(p)
}

func (c *idleConn) Write(p []byte) (int, error) {
	c.deadline()
	return c.Conn.Write(p)
}
