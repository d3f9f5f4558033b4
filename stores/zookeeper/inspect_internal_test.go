package zkstore

import "testing"

// FuzzUnescape: unescape undoes escape for every non-empty string, and
// accepts no other spelling of it (a node name that escape would not write
// is no key of the store's).
func FuzzUnescape(f *testing.F) {
	for _, s := range []string{"a", "reqlock:{order:42}", "a/b", "%", "%41", ".", "..", "...", "ü", "\x00\xff", "a b", "-_.:{}@+=,~!*()[]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" {
			if _, ok := unescape(escape(s)); ok {
				t.Fatal("unescape accepts the escape of the empty string")
			}
			return
		}
		got, ok := unescape(escape(s))
		if !ok || got != s {
			t.Fatalf("unescape(escape(%q)) = %q, %v", s, got, ok)
		}
		if u, ok := unescape(s); ok && escape(u) != s {
			t.Fatalf("unescape(%q) = %q, whose escape is %q", s, u, escape(u))
		}
	})
}
