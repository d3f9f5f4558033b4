package memcachedstore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// memcachedEncode encodes k as memcached's metadump does (uriencode in
// its util.c): every byte but ASCII letters, digits and "-._~" as %XX.
func memcachedEncode(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("-._~", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func dumpOf(r string) (keys []string, err error) {
	err = parseMetadump(bufio.NewReaderSize(strings.NewReader(r), maxReplyLine), func(k string) { keys = append(keys, k) })
	return keys, err
}

// TestParseMetadump: item lines (ended by "\n", as memcached ends them)
// give their URL-decoded keys; END ends the dump; memcached's other
// answers are errors (BUSY and BADCLASS ones of their own); a malformed or
// cut reply is an error.
func TestParseMetadump(t *testing.T) {
	keys, err := dumpOf("key=reqlock%3A%7Border%3A42%7D exp=1795692821 la=1795692721 cas=1 fetch=no cls=1 size=84\n" +
		"key=plain exp=-1 la=1 cas=2 fetch=yes cls=1 size=63\r\n" +
		"key=a%20b%25c%2Bd+e exp=-1 la=1 cas=3 fetch=no cls=1 size=63\n" +
		"END\r\nkey=after-the-end exp=-1\n")
	if want := []string{"reqlock:{order:42}", "plain", "a b%c+d+e"}; err != nil || !slices.Equal(keys, want) {
		t.Errorf("dump: %q, %v; want %q", keys, err, want)
	}
	for _, c := range []struct {
		reply string
		want  error // nil: any error
	}{
		{"BUSY currently processing crawler request\r\n", errBusy},
		{"BADCLASS invalid class id\r\n", errBadClass},
		{"key=x exp=-1\nERROR\r\n", nil},
		{"CLIENT_ERROR bad command line format\r\n", nil},
		{"SERVER_ERROR out of memory\r\n", nil},
		{"key=bad%zz exp=-1\nEND\r\n", nil},
		{"key= exp=-1\nEND\r\n", nil},
		{"key=x exp=-1\n", io.ErrUnexpectedEOF}, // cut before END
		{"key=" + strings.Repeat("%41", maxReplyLine) + "\nEND\r\n", nil},
		{"STORED\r\n", nil},
	} {
		_, err := dumpOf(c.reply)
		if err == nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("dump %.40q: %v; want an error (%v)", c.reply, err, c.want)
		}
	}
}

// FuzzParseMetadump: parseMetadump never panics, and the keys of a dump
// memcached would send (any key the store writes, encoded as memcached
// encodes it) come back as they were.
func FuzzParseMetadump(f *testing.F) {
	f.Add("reqlock:{order:42}", "key=a%3Ab exp=-1 la=1\nEND\r\n")
	f.Add("reqlock-sha256:00ff", "BUSY\r\n")
	f.Add("k:share:ABC.def-_", "key=%\n")
	f.Fuzz(func(t *testing.T, key, raw string) {
		_, _ = dumpOf(raw) // no panic
		if !legalKey(key) {
			return
		}
		keys, err := dumpOf("key=" + memcachedEncode(key) + " exp=-1 la=1 cas=1 fetch=no cls=1 size=70\nEND\r\n")
		if err != nil || len(keys) != 1 || keys[0] != key {
			t.Fatalf("dump of %q: %q, %v", key, keys, err)
		}
	})
}

// TestSmallest: the page keeps the limit smallest distinct keys, in order,
// and tells whether it dropped any.
func TestSmallest(t *testing.T) {
	for _, limit := range []int{1, 3, 10} {
		p := smallest{limit: limit}
		var all []string
		for i := range 500 {
			k := fmt.Sprintf("k%03d", (i*37)%250) // each key twice, shuffled
			p.add(k)
			all = append(all, k)
		}
		slices.Sort(all)
		all = slices.Compact(all)
		keys, more := p.result()
		if !slices.Equal(keys, all[:limit]) || !more {
			t.Errorf("limit %d: %q, more %v; want %q, more", limit, keys, more, all[:limit])
		}
	}
	p := smallest{limit: 5}
	p.add("b")
	p.add("a")
	p.add("b")
	if keys, more := p.result(); !slices.Equal(keys, []string{"a", "b"}) || more {
		t.Errorf("a short page: %q, %v", keys, more)
	}
}

// TestReadMetaGet: the replies of `mg <key> t v`.
func TestReadMetaGet(t *testing.T) {
	r := bufio.NewReader(strings.NewReader("VA 3 t98\r\nabc\r\nEN\r\nVA 1 t-1 f0\r\nx\r\nVA 0 t5\r\n\r\nVA 5 t1\r\nabc\r\n"))
	for i, want := range []struct {
		ok bool
		it itemTTL
	}{
		{true, itemTTL{"abc", 98 * time.Second}},
		{false, itemTTL{}},
		{true, itemTTL{"x", 0}},
		{true, itemTTL{"", 5 * time.Second}},
	} {
		it, ok, err := readMetaGet(r)
		if err != nil || ok != want.ok || it != want.it {
			t.Errorf("reply %d: %+v, %v, %v; want %+v, %v", i, it, ok, err, want.it, want.ok)
		}
	}
	if _, _, err := readMetaGet(r); err == nil {
		t.Error("a cut value: no error")
	}
	for _, reply := range []string{"CLIENT_ERROR bad\r\n", "VA x t1\r\n", "VA 1 tx\r\na\r\n", "VA 1 t1\r\nab\r\n", "HD t5\r\n"} {
		if _, _, err := readMetaGet(bufio.NewReader(strings.NewReader(reply))); err == nil {
			t.Errorf("reply %q: no error", reply)
		}
	}
}

// TestHashedItemKey: only "reqlock-sha256:" and 64 lowercase hex digits,
// what itemKey makes, is a hashed item key.
func TestHashedItemKey(t *testing.T) {
	h := itemKey("a key with spaces")
	if !hashedItemKey(h) {
		t.Errorf("%q is not a hashed item key", h)
	}
	for _, k := range []string{"reqlock:{x}", hashedPrefix, h[:len(h)-1], strings.ToUpper(h[:len(hashedPrefix)]) + h[len(hashedPrefix):], h[:len(h)-1] + "g", h[:len(hashedPrefix)] + strings.ToUpper(h[len(hashedPrefix):]), h + "0"} {
		if hashedItemKey(k) {
			t.Errorf("%q is a hashed item key", k)
		}
	}
}
