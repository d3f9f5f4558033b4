package core

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Holder says who holds a lock: the process and the request that took it.
// A Locker writes it into every token it sends (so it costs no round trip
// and no store change: the store keeps the token it keeps anyway), and
// ParseHolder reads it back from a token an operator sees in a store
// (Locker.Inspect, the reqlock command). It is bounded in size: each text
// is cut to a few dozen bytes and a token is at most MaxTokenLen bytes.
type Holder struct {
	// Host is the host name of the holder's process (os.Hostname).
	Host string
	// PID is the holder's process id.
	PID int
	// Route is the call's route label (Route, ContextWithRoute: a route
	// template or a gRPC method), "" if none.
	Route string
	// RequestID is the request's id (RequestID, ContextWithRequestID,
	// WithRequestID; the adapters take a header they name, or the W3C
	// trace id of the request), "" if none.
	RequestID string
	// Since is when the holder's Acquire began, to the millisecond: the
	// time it asked for the name. It took the name then, or after waiting
	// at most its wait budget.
	Since time.Time
	// Mode is how it holds the name, and Permits the n of Permits(n).
	Mode    Mode
	Permits int
	// Fields are the service's own fields (WithHolderField), in order.
	Fields []HolderField
}

// HolderField is a field a service adds to its holders (WithHolderField).
type HolderField struct {
	Key, Value string
}

// MaxTokenLen is the longest token a Locker sends: 26 random base32
// characters, a dot and the holder record in unpadded base64url. Tokens use
// only the characters A-Z, a-z, 0-9, '.', '-' and '_', so that every store
// can keep them in a key, a node name or a VARBINARY(255) column.
const MaxTokenLen = randomLen + 1 + (maxRecord*8+5)/6

// The holder record's bounds, in bytes: each text is cut to its bound (at a
// UTF-8 boundary), and fields that do not fit in maxRecord are left out.
const (
	randomLen     = 26 // base32 of 128 random bits, as crypto/rand.Text
	maxRecord     = 160
	maxHostLen    = 32
	maxRouteLen   = 40
	maxRequestLen = 36 // a UUID; a W3C trace id is 32
	maxFieldKey   = 16
	maxFieldValue = 32
	recordVersion = 1
)

var (
	b32 = base32.StdEncoding.WithPadding(base32.NoPadding)
	b64 = base64.RawURLEncoding
)

// process is the holder record's part that is the same for every lock of
// the process.
var process = sync.OnceValue(func() struct {
	host string
	pid  int
} {
	host, _ := os.Hostname()
	return struct {
		host string
		pid  int
	}{clip(host, maxHostLen), os.Getpid()}
})

// holderFor returns the holder of an Acquire that begins now: this
// process, the call's route, mode and request id, and the Locker's fields.
func (l *Locker) holderFor(ctx context.Context, p callParams, start time.Time) Holder {
	id := p.requestID
	if id == "" {
		id = RequestIDFromContext(ctx)
	}
	if id == "" && l.cfg.requestID != nil {
		id = l.cfg.requestID(ctx)
	}
	proc := process()
	h := Holder{Host: proc.host, PID: proc.pid, Route: p.route, RequestID: id, Since: start, Mode: p.mode, Permits: p.permits}
	if len(l.cfg.holderFields) > 0 {
		h.Fields = make([]HolderField, len(l.cfg.holderFields))
		for i, f := range l.cfg.holderFields {
			h.Fields[i] = HolderField{f.key, f.value(ctx)}
		}
	}
	return h
}

// newToken returns a fresh token for one attempt of req: random, followed
// by req's holder record unless the Locker was built WithoutHolder.
func (l *Locker) newToken(req *AcquireCall) string {
	if l.cfg.noHolder {
		return rand.Text()
	}
	return req.holder.token()
}

// token returns a fresh random token that carries h.
func (h *Holder) token() string {
	var rec [maxRecord]byte
	r := h.appendRecord(rec[:0])
	var buf [MaxTokenLen]byte
	var random [16]byte
	_, _ = rand.Read(random[:]) // never fails (crypto/rand)
	b32.Encode(buf[:randomLen], random[:])
	buf[randomLen] = '.'
	n := b64.EncodedLen(len(r))
	b64.Encode(buf[randomLen+1:], r)
	return string(buf[:randomLen+1+n])
}

// appendRecord appends h's record to b, within maxRecord bytes: version,
// mode, permits, Since in Unix milliseconds, pid, then host, route and
// request id, then as many fields as fit, each text length-prefixed.
func (h *Holder) appendRecord(b []byte) []byte {
	b = append(b, recordVersion, byte(h.Mode))
	b = binary.AppendUvarint(b, uint64(max(h.Permits, 0)))
	b = binary.AppendVarint(b, h.Since.UnixMilli())
	b = binary.AppendUvarint(b, uint64(max(h.PID, 0)))
	b = appendText(b, h.Host, maxHostLen)
	b = appendText(b, h.Route, maxRouteLen)
	b = appendText(b, h.RequestID, maxRequestLen)
	for _, f := range h.Fields {
		k, v := clip(f.Key, maxFieldKey), clip(f.Value, maxFieldValue)
		if len(b)+2+len(k)+len(v) > maxRecord {
			break
		}
		b = appendText(b, k, maxFieldKey)
		b = appendText(b, v, maxFieldValue)
	}
	return b
}

// appendText appends s, cut to n bytes, with its length first.
func appendText(b []byte, s string, n int) []byte {
	s = clip(s, n)
	b = append(b, byte(len(s)))
	return append(b, s...)
}

// clip cuts s to at most n bytes at a UTF-8 boundary, and replaces what
// is not printable (control characters, bidi overrides, line separators,
// invalid UTF-8) with '?', so that what an operator reads is one honest
// line.
func clip(s string, n int) string {
	if len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return printable(s)
		}
	}
	return s
}

// printable replaces the runes of s that unicode.IsPrint refuses with '?'.
func printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ParseHolder reads the holder a Locker wrote into token. It reports false
// for a token that carries none: one of a Locker built WithoutHolder, of
// another library, or a store's marker.
func ParseHolder(token string) (Holder, bool) {
	if len(token) <= randomLen+1 || len(token) > MaxTokenLen || token[randomLen] != '.' {
		return Holder{}, false
	}
	var rec [maxRecord]byte
	n, err := b64.Decode(rec[:], []byte(token[randomLen+1:]))
	if err != nil {
		return Holder{}, false
	}
	r := reader{b: rec[:n]}
	var h Holder
	if r.byte() != recordVersion {
		return Holder{}, false
	}
	h.Mode = Mode(r.byte())
	h.Permits = int(r.uvarint(MaxPermits))
	ms := r.varint()
	h.PID = int(r.uvarint(1 << 31))
	h.Host, h.Route, h.RequestID = r.text(maxHostLen), r.text(maxRouteLen), r.text(maxRequestLen)
	for r.err == nil && len(r.b) > 0 {
		k, v := r.text(maxFieldKey), r.text(maxFieldValue)
		h.Fields = append(h.Fields, HolderField{k, v})
	}
	if r.err != nil || h.Mode > ModePermits {
		return Holder{}, false
	}
	h.Since = time.UnixMilli(ms)
	return h, true
}

// reader reads a holder record; its first error sticks.
type reader struct {
	b   []byte
	err error
}

var errRecord = fmt.Errorf("reqlock: malformed holder record")

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errRecord
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint(limit uint64) uint64 {
	v, n := binary.Uvarint(r.b)
	if r.err != nil || n <= 0 || v > limit {
		r.err = errRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if r.err != nil || n <= 0 {
		r.err = errRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) text(limit int) string {
	n := int(r.byte())
	if r.err != nil || n > limit || n > len(r.b) || !utf8.Valid(r.b[:n]) {
		r.err = errRecord
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// String returns h on one line, such as
// "host api-7 pid 4242 route /orders/:id request 7f3a… since 2026-11-26T12:00:00.123Z exclusive".
func (h Holder) String() string {
	var b strings.Builder
	b.WriteString("host " + h.Host + " pid " + strconv.Itoa(h.PID))
	if h.Route != "" {
		b.WriteString(" route " + h.Route)
	}
	if h.RequestID != "" {
		b.WriteString(" request " + h.RequestID)
	}
	b.WriteString(" since " + h.Since.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	b.WriteString(" " + h.Mode.String())
	if h.Mode == ModePermits {
		b.WriteString(" " + strconv.Itoa(h.Permits))
	}
	for _, f := range h.Fields {
		b.WriteString(" " + f.Key + "=" + f.Value)
	}
	return b.String()
}

// holderField is a field of WithHolderField.
type holderField struct {
	key   string
	value func(context.Context) string
}

// WithHolderField adds a field to the holder record of every lock the
// Locker takes: value is called once per Acquire, with its context, and
// its answer cut to 32 bytes (key to 16). Use it for what an operator needs
// beside host, process, route and request id (a tenant, a build), never
// for personal data: the record is readable by whoever reads the store.
// Fields that do not fit the record's bound are left out, last first.
func WithHolderField(key string, value func(ctx context.Context) string) Option {
	return func(c *config) {
		switch {
		case key == "" || len(key) > maxFieldKey:
			c.errs = append(c.errs, fmt.Errorf("%w: WithHolderField(%q): the key must be 1 to %d bytes", ErrInvalidOption, key, maxFieldKey))
		case value == nil:
			c.errs = append(c.errs, fmt.Errorf("%w: WithHolderField(%q): the value func is nil", ErrInvalidOption, key))
		default:
			c.holderFields = append(c.holderFields, holderField{key, value})
		}
	}
}

// WithoutHolder makes the Locker's tokens plain random text (26 base32
// characters), without the holder record: Inspect then tells tokens, TTLs
// and fences, but not who holds a lock.
func WithoutHolder() Option {
	return func(c *config) { c.noHolder = true }
}

// WithRequestID sets where the Locker finds a request's id when the call
// and its context carry none (RequestID, ContextWithRequestID): for
// instance lockotel.TraceID, the trace id of the request's span.
func WithRequestID(id func(ctx context.Context) string) Option {
	return func(c *config) {
		if id == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithRequestID: the func is nil", ErrInvalidOption))
			return
		}
		c.requestID = id
	}
}

// RequestID sets the request id of the call's holder record (see Holder).
// The adapters set it from a header they name or the W3C trace id.
func RequestID(id string) CallOption {
	return func(c *callConfig) { c.requestID = id }
}

type requestIDKey struct{}

// ContextWithRequestID returns a copy of ctx whose locks record id as the
// request id of their holder, unless the call sets one (RequestID).
func ContextWithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFromContext returns the id set on ctx with
// ContextWithRequestID, or "".
func RequestIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
