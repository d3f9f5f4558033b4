package core_test

import (
	"strings"
	"testing"

	"github.com/reqlock/reqlock/core"
)

// hashTag returns the part of key that Redis Cluster hashes, by its rules.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

// FuzzKey checks the key derivation for any pair of names: keys are bounded,
// carry a non-empty hash tag that a companion key (key+suffix) shares, and
// different names never share a key.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"order:42", "a{b}c", "}", "{", "sha256:x", strings.Repeat("z", 200), "é€😀", "\x00"} {
		f.Add(s, s+"1")
	}
	l := core.New(nil, core.WithPrefix("p:")) // Key needs no client
	f.Fuzz(func(t *testing.T, a, b string) {
		ka, erra := l.Key(a)
		kb, errb := l.Key(b)
		if (a == "") != (erra != nil) || (b == "") != (errb != nil) {
			t.Fatalf("Key(%q) err=%v, Key(%q) err=%v: only empty names are invalid", a, erra, b, errb)
		}
		if erra != nil || errb != nil {
			return
		}
		if !strings.HasPrefix(ka, "p:{") || len(ka) > len("p:{}")+core.MaxNameLen {
			t.Fatalf("Key(%q) = %q: not prefixed or too long", a, ka)
		}
		tag := hashTag(ka)
		if tag == ka || tag == "" || hashTag(ka+":fence") != tag || hashTag(ka+":released") != tag {
			t.Fatalf("Key(%q) = %q: hash tag %q is not shared by companion keys", a, ka, tag)
		}
		if (a == b) != (ka == kb) {
			t.Fatalf("Key(%q) = %q, Key(%q) = %q", a, ka, b, kb)
		}
	})
}
