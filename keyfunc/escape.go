package keyfunc

import "strings"

const hexDigits = "0123456789ABCDEF"

// escaped reports whether Escape percent-encodes b: '%', the separators
// ':' '|' ',' '=', the braces, the space and control characters.
func escaped(b byte) bool {
	switch b {
	case '%', ':', '|', ',', '=', '{', '}', ' ', 0x7f:
		return true
	}
	return b < 0x20
}

// separator reports whether b, in template text, separates two values: a
// byte that Escape always encodes, so that it never occurs in an escaped
// value ('%' does, as the start of an escape).
func separator(b byte) bool {
	return b != '%' && escaped(b)
}

// Escape returns s with '%', ':', '|', ',', '=', '{', '}', the space and
// control characters percent-encoded ("a:b" becomes "a%3Ab"). Other bytes,
// including '/', '.' and UTF-8 letters, stay as they are, so that names stay
// readable. Escape is injective, and an escaped value contains no separator,
// so that joined parts can be told apart. Funcs written outside this package
// should escape request values with it.
func Escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if escaped(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if escaped(c) {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
