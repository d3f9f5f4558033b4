package memcachedstore

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

// hashedPrefix begins the item key of a key that memcached cannot take as
// it is (see itemKey).
const hashedPrefix = "reqlock-sha256:"

// maxKeyLen is the longest key memcached takes.
const maxKeyLen = 250

// itemKey returns the memcached key of key: key itself when memcached takes
// it (at most 250 bytes, no space or control character) and it does not
// begin with hashedPrefix; otherwise hashedPrefix and the hex SHA-256 of
// key. Distinct keys get distinct item keys (SHA-256 collisions aside).
func itemKey(key string) string {
	if legalKey(key) && !strings.HasPrefix(key, hashedPrefix) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hashedPrefix + hex.EncodeToString(sum[:])
}

// legalKey reports whether memcached's text protocol takes key as it is.
func legalKey(key string) bool {
	if key == "" || len(key) > maxKeyLen {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] == 0x7f {
			return false
		}
	}
	return true
}

// counterKey returns the item key of the fence counter of a lock key.
func counterKey(key string) string { return itemKey(key + ":fence") }

// draw returns the next fence of key, locked with ttl: the counter's incr,
// or, when the counter is missing, the clock's time in microseconds, with
// which the counter is created (add, so that of two creators one wins and
// the other increments), to expire counterGrace after ttl.
func (s *Store) draw(ctx context.Context, key string, ttl time.Duration) (int64, error) {
	ck := counterKey(key)
	for range casTries {
		n, err := call(ctx, s, func() (uint64, error) { return s.client.Increment(ck, 1) })
		switch {
		case err == nil && n > math.MaxInt64:
			return 0, fmt.Errorf("memcachedstore: the fence counter %s overflowed", ck)
		case err == nil:
			return int64(n), nil
		case !errors.Is(err, memcache.ErrCacheMiss):
			return 0, err
		}
		now, err := s.clock(ctx)
		if err != nil {
			return 0, err
		}
		exp, err := expiration(min(ttl+counterGrace, (maxExpiration-1)*time.Second))
		if err != nil {
			return 0, err
		}
		err = s.do(ctx, func() error {
			return s.client.Add(&memcache.Item{Key: ck, Value: strconv.AppendInt(nil, now, 10), Flags: companionFlags, Expiration: exp})
		})
		switch {
		case err == nil:
			return now, nil
		case !errors.Is(err, memcache.ErrNotStored):
			return 0, err
		}
		// Created meanwhile by another draw: increment it.
	}
	return 0, errContention
}

// localClock is this process's clock in microseconds.
func localClock(context.Context) (int64, error) { return time.Now().UnixMicro(), nil }

// serverClock returns the clock of the memcached server at addr, in
// microseconds: the time field of its stats (whole seconds) times a
// million. It asks on a connection of its own (gomemcache does not send
// stats), dialled with the client's DialContext when it has one, and
// bounded by ctx and the client's Timeout.
func (s *Store) serverClock(ctx context.Context, addr string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	dial := s.client.DialContext
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return 0, fmt.Errorf("memcachedstore: the server clock: %w", err)
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) }) // a cancel cuts the exchange
	defer stop()
	if err := c.SetDeadline(deadline); err != nil {
		return 0, fmt.Errorf("memcachedstore: the server clock: %w", err)
	}
	secs, err := statsTime(c)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("memcachedstore: the server clock: %w", err)
	}
	return secs * 1_000_000, nil
}

// statsTime sends stats on c and returns the time field of the reply.
func statsTime(c net.Conn) (int64, error) {
	if _, err := c.Write([]byte("stats\r\n")); err != nil {
		return 0, err
	}
	r := bufio.NewReader(c)
	secs := int64(-1)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "END" {
			break
		}
		if v, ok := strings.CutPrefix(line, "STAT time "); ok {
			if secs, err = strconv.ParseInt(v, 10, 64); err != nil || secs <= 0 {
				return 0, fmt.Errorf("stats time %q", v)
			}
		} else if !strings.HasPrefix(line, "STAT ") {
			return 0, fmt.Errorf("unexpected reply to stats: %q", line)
		}
	}
	if secs < 0 {
		return 0, errors.New("the reply to stats has no time")
	}
	return secs, nil
}
