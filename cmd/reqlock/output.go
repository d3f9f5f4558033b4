package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/reqlock/reqlock/core"
)

// The JSON documents of --json. Their field names are stable: scripts read
// them. Durations are whole milliseconds (_ms), times RFC 3339 in UTC.

// identityJSON is who a holder or waiter is, read from its token
// (core.ParseHolder).
type identityJSON struct {
	Host      string      `json:"host"`
	PID       int         `json:"pid"`
	Route     string      `json:"route"`
	RequestID string      `json:"request_id"`
	Since     time.Time   `json:"since"`
	Mode      string      `json:"mode"`
	Permits   int         `json:"permits"`
	Fields    []fieldJSON `json:"fields"`
}

// fieldJSON is a field a service adds to its holders
// (core.WithHolderField).
type fieldJSON struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// holderJSON is one holder of a lock.
type holderJSON struct {
	Token string `json:"token"`
	// Mode is "exclusive", "shared" or "permits" (with Permits, the n of
	// Permits(n), and Slot).
	Mode    string `json:"mode"`
	Permits int    `json:"permits"`
	Slot    int    `json:"slot"`
	TTLms   int64  `json:"ttl_ms"`
	Fence   int64  `json:"fence"`
	// Identity is null when the token carries no holder record (a Locker
	// built with core.WithoutHolder, or another library's token).
	Identity *identityJSON `json:"identity"`
}

// waiterJSON is one waiter: of the fair queue, or the exclusive holder
// waiting for shares to drain.
type waiterJSON struct {
	Position   int           `json:"position,omitempty"`
	Token      string        `json:"token"`
	TTLms      int64         `json:"ttl_ms"`
	PatienceMs int64         `json:"patience_ms"`
	Identity   *identityJSON `json:"identity"`
}

// lockJSON is one lock (reqlock show; each lock of ls --long and watch).
type lockJSON struct {
	Name    string       `json:"name"`
	Key     string       `json:"key"`
	Held    bool         `json:"held"`
	Fence   int64        `json:"fence"`
	Holders []holderJSON `json:"holders"`
	Writer  *waiterJSON  `json:"writer"`
	Waiters []waiterJSON `json:"waiters"`
}

func identity(h core.Holder, ok bool) *identityJSON {
	if !ok {
		return nil
	}
	id := &identityJSON{Host: h.Host, PID: h.PID, Route: h.Route, RequestID: h.RequestID,
		Since: h.Since.UTC(), Mode: h.Mode.String(), Permits: h.Permits, Fields: []fieldJSON{}}
	for _, f := range h.Fields {
		id.Fields = append(id.Fields, fieldJSON{f.Key, f.Value})
	}
	return id
}

// holderMode returns a holder's mode and permits as the store reports
// them.
func holderMode(h core.HolderState) (string, int) {
	switch {
	case h.Exclusive:
		return "exclusive", 0
	case h.Hold.N == 0:
		return "shared", 0
	default:
		return "permits", h.Hold.N
	}
}

func holderDoc(h core.HolderInfo) holderJSON {
	mode, n := holderMode(h.HolderState)
	return holderJSON{Token: h.Token, Mode: mode, Permits: n, Slot: h.Slot, TTLms: h.TTL.Milliseconds(),
		Fence: h.Fence, Identity: identity(h.Holder, h.Identified)}
}

func waiterDoc(w core.WaiterInfo, position int) waiterJSON {
	return waiterJSON{Position: position, Token: w.Token, TTLms: w.TTL.Milliseconds(),
		PatienceMs: w.Patience.Milliseconds(), Identity: identity(w.Holder, w.Identified)}
}

// lockDoc is the JSON document of st.
func lockDoc(st core.LockState) lockJSON {
	d := lockJSON{Name: st.Name, Key: st.Key, Held: st.Held(), Fence: st.Fence,
		Holders: []holderJSON{}, Waiters: []waiterJSON{}}
	for _, h := range st.Holders {
		d.Holders = append(d.Holders, holderDoc(h))
	}
	for i, w := range st.Waiters {
		d.Waiters = append(d.Waiters, waiterDoc(w, i+1))
	}
	if st.Writer != nil {
		w := waiterDoc(*st.Writer, 0)
		d.Writer = &w
	}
	return d
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("reqlock: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// clean makes text read from a store safe to print on a terminal: control
// characters (which could move the cursor or recolour the screen) and
// other unprintable runes are escaped as Go escapes them, and so are tabs,
// which would break the tables.
func clean(s string) string {
	ok := true
	for _, r := range s {
		if !unicode.IsPrint(r) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return clean(s)
}

// ttlText formats a TTL left: "-" when the store cannot tell.
func ttlText(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(100 * time.Millisecond).String()
}

// sinceText formats when a holder began, and how long ago.
func sinceText(t, now time.Time) string {
	ago := now.Sub(t).Round(100 * time.Millisecond)
	if ago < 0 {
		ago = 0
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z") + " (" + ago.String() + " ago)"
}

// fieldsText formats a holder's own fields, "k=v k=v".
func fieldsText(fs []core.HolderField) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = clean(f.Key) + "=" + clean(f.Value)
	}
	return strings.Join(parts, " ")
}

// modeText formats a holder's mode.
func modeText(h core.HolderState) string {
	mode, n := holderMode(h)
	if mode == "permits" {
		return fmt.Sprintf("permits(%d)", n)
	}
	return mode
}

// newTable returns a tabwriter for an aligned table.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// printLock writes st for a person: its key and fence, a table of its
// holders, the waiting writer and the fair queue's waiters in order.
func printLock(w io.Writer, st core.LockState, now time.Time) {
	fmt.Fprintf(w, "name:   %s\nkey:    %s\nfence:  %d\n", clean(st.Name), clean(st.Key), st.Fence)
	if !st.Held() {
		fmt.Fprintf(w, "holders: none (the lock is free)\n")
	} else {
		fmt.Fprintf(w, "holders: %d\n", len(st.Holders))
		tw := newTable(w)
		fmt.Fprintln(tw, "  #\tMODE\tSLOT\tTTL\tFENCE\tHOST\tPID\tROUTE\tREQUEST\tSINCE\tFIELDS\tTOKEN")
		for i, h := range st.Holders {
			slot := "-"
			if !h.Exclusive && h.Hold.N > 0 {
				slot = strconv.Itoa(h.Slot)
			}
			fence := "-"
			if h.Fence > 0 {
				fence = strconv.FormatInt(h.Fence, 10)
			}
			host, pid, route, req, since, fields := identityCells(h.Holder, h.Identified, now)
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, modeText(h.HolderState), slot,
				ttlText(h.TTL), fence, host, pid, route, req, since, fields, clean(h.Token))
		}
		tw.Flush()
	}
	if st.Writer != nil {
		host, pid, route, req, since, _ := identityCells(st.Writer.Holder, st.Writer.Identified, now)
		fmt.Fprintf(w, "writer waiting for the shares to drain: host %s pid %s route %s request %s since %s token %s\n",
			host, pid, route, req, since, clean(st.Writer.Token))
	}
	if len(st.Waiters) == 0 {
		fmt.Fprintf(w, "waiters: none in the fair queue\n")
		return
	}
	fmt.Fprintf(w, "waiters: %d in the fair queue, head first\n", len(st.Waiters))
	tw := newTable(w)
	fmt.Fprintln(tw, "  #\tPATIENCE\tTTL\tHOST\tPID\tROUTE\tREQUEST\tSINCE\tFIELDS\tTOKEN")
	for i, wt := range st.Waiters {
		host, pid, route, req, since, fields := identityCells(wt.Holder, wt.Identified, now)
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, ttlText(wt.Patience), ttlText(wt.TTL),
			host, pid, route, req, since, fields, clean(wt.Token))
	}
	tw.Flush()
}

// identityCells returns the table cells of a holder's identity, dashes when
// its token carries none.
func identityCells(h core.Holder, ok bool, now time.Time) (host, pid, route, req, since, fields string) {
	if !ok {
		return "-", "-", "-", "-", "-", "-"
	}
	return orDash(h.Host), strconv.Itoa(h.PID), orDash(h.Route), orDash(h.RequestID), sinceText(h.Since, now), orDash(fieldsText(h.Fields))
}

// printSummary writes one line per lock: the table of ls --long and
// watch.
func printSummary(w io.Writer, locks []core.LockState, now time.Time) {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tMODE\tHOLDERS\tWAITERS\tTTL\tFENCE\tHOST\tPID\tROUTE\tREQUEST\tHELD FOR")
	for _, st := range locks {
		waiters := len(st.Waiters)
		if st.Writer != nil {
			waiters++
		}
		mode, ttl := "-", time.Duration(0)
		if len(st.Holders) > 0 {
			mode = modeText(st.Holders[0].HolderState)
			ttl = st.Holders[0].TTL
		}
		host, pid, route, req, held := "-", "-", "-", "-", "-"
		var oldest time.Time
		for _, h := range st.Holders {
			if h.TTL > 0 && h.TTL < ttl {
				ttl = h.TTL
			}
			if h.Identified && (oldest.IsZero() || h.Holder.Since.Before(oldest)) {
				oldest = h.Holder.Since
				host, pid, route, req, _, _ = identityCells(h.Holder, true, now)
			}
		}
		if !oldest.IsZero() {
			held = max(now.Sub(oldest), 0).Round(100 * time.Millisecond).String()
			if len(st.Holders) > 1 {
				host += fmt.Sprintf(" (+%d)", len(st.Holders)-1)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", clean(st.Name), mode, len(st.Holders), waiters,
			ttlText(ttl), st.Fence, host, pid, route, req, held)
	}
	tw.Flush()
}
