package lockdebug

import (
	"strconv"
	"strings"

	"github.com/reqlock/reqlock/core"
)

// holderOf reads the holder's identity from a lease's token
// (core.ParseHolder); ok is false for a token that carries none (a Locker
// built with core.WithoutHolder), which the page then shows as it is.
func holderOf(token string) (*Holder, bool) {
	h, ok := core.ParseHolder(token)
	if !ok {
		return nil, false
	}
	out := &Holder{Host: h.Host, PID: h.PID, Route: h.Route, RequestID: h.RequestID, Since: utcMS(h.Since)}
	var b strings.Builder
	b.WriteString(h.Host + " pid " + strconv.Itoa(h.PID))
	if h.RequestID != "" {
		b.WriteString(" request " + h.RequestID)
	}
	for _, f := range h.Fields {
		out.Fields = append(out.Fields, Field{Key: f.Key, Value: f.Value})
		b.WriteString(" " + f.Key + "=" + f.Value)
	}
	out.Text = b.String()
	return out, true
}
