package hotspot

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// contended joins key twice and leaves twice, as two goroutines contending
// for it would, the first suspected of contention by the in-flight sketch:
// the entry turns hot and stays idle in the table.
func contended(t *testing.T, tb *table, key string) *entry {
	t.Helper()
	e, hits, bypassed := tb.join(key, false, true)
	if e == nil || !e.tentative || hits != 0 || bypassed {
		t.Fatalf("join(%q) = %v, %d hits, bypassed %v; want a tentative entry, no hit", key, e, hits, bypassed)
	}
	if again, hits, _ := tb.join(key, false, false); again != e || hits != 2 {
		t.Fatalf("a second join of %q: %v, %d hits; want the same entry and two hits", key, again, hits)
	}
	tb.leave(e)
	tb.leave(e)
	return e
}

// A million distinct hot names through a table of capacity 1,000 keep it at
// 1,000 entries and the heap flat.
func TestTableMillionNames(t *testing.T) {
	const capacity, names = 1000, 1_000_000
	tb := newTable(capacity, time.Hour, true)
	key := make([]byte, 0, 32)
	name := func(i int) string { return string(strconv.AppendInt(append(key[:0], "orders:"...), int64(i), 10)) }
	for i := 0; i < capacity; i++ {
		contended(t, tb, name(i))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := capacity; i < names; i++ {
		contended(t, tb, name(i))
		if i%10_000 == 0 {
			if size, _ := tb.size(); size > capacity {
				t.Fatalf("size %d over the capacity after %d names", size, i)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	size, evictions := tb.size()
	if size != capacity || evictions != names-capacity {
		t.Fatalf("size %d, evictions %d; want %d and %d", size, evictions, capacity, names-capacity)
	}
	// A leak of one entry per name would be over 100 MB here.
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 4<<20 {
		t.Fatalf("the heap grew by %d bytes over %d names", grown, names-capacity)
	}
	runtime.KeepAlive(tb)
}

// Entries in use are never evicted, however many others go through; when
// every entry is in use, a new name of WithKeys bypasses the table.
func TestTableNeverEvictsBusyEntries(t *testing.T) {
	tb := newTable(3, time.Hour, false)
	held, _, _ := tb.join("held", true, false)
	waited, _, _ := tb.join("waited", false, true)
	if again, _, _ := tb.join("waited", false, true); again != waited || waited.tentative {
		t.Fatal("a waiter got another entry, or contention did not keep it")
	}
	for i := 0; i < 1000; i++ {
		contended(t, tb, "other"+strconv.Itoa(i))
		if size, _ := tb.size(); size > 3 {
			t.Fatalf("size %d over the capacity", size)
		}
	}
	if _, evictions := tb.size(); evictions != 999 {
		t.Fatalf("%d evictions, want 999", evictions)
	}
	if e, _, _ := tb.join("held", false, false); e != held {
		t.Fatal("the held entry was evicted")
	}
	if e, _, _ := tb.join("waited", false, false); e != waited {
		t.Fatal("the waited-on entry was evicted")
	}
	third, _, _ := tb.join("third", true, false) // evicts the last idle one
	if e, _, bypassed := tb.join("fourth", true, false); e != nil || !bypassed {
		t.Fatalf("a full table of busy entries: join = %v, bypassed %v; want a bypass", e, bypassed)
	}
	tb.leave(third)
	if e, _, bypassed := tb.join("fourth", true, false); e == nil || bypassed {
		t.Fatal("no room after an entry went idle")
	}
}

// An entry that was never contended goes as soon as it is idle; a hot one
// stays until its hot period ends; a pinned one stays.
func TestTableKeepsHotEntriesOnly(t *testing.T) {
	tb := newTable(10, time.Second, false)
	now := time.Now()
	tb.now = func() time.Time { return now }
	e, _, _ := tb.join("cold", false, true)
	tb.leave(e)
	if size, _ := tb.size(); size != 0 || tb.tentative != 0 {
		t.Fatalf("an uncontended entry stayed (size %d, %d tentative)", size, tb.tentative)
	}
	hot := contended(t, tb, "hot")
	pinned, _, _ := tb.join("pinned", true, false)
	tb.leave(pinned)
	if size, _ := tb.size(); size != 2 {
		t.Fatalf("size %d, want the hot and the pinned entry", size)
	}
	now = now.Add(time.Second / 2)
	if e, hits, _ := tb.join("hot", false, false); e != hot || hits != 1 {
		t.Fatal("a hot entry was not found within its hot period")
	}
	tb.leave(hot)
	now = now.Add(2 * time.Second)
	if e, _, _ := tb.join("hot", false, false); e != nil {
		t.Fatal("an entry past its hot period was used")
	}
	if e, _, _ := tb.join("pinned", false, false); e != pinned {
		t.Fatal("a pinned entry went")
	}
	tb.leave(pinned)
	if size, _ := tb.size(); size != 1 {
		t.Fatalf("size %d, want the pinned entry only", size)
	}
}

// Tentative entries, made for acquires the in-flight sketch suspects (mostly
// cold names whose bucket is shared), live outside the capacity: they never
// evict an entry, never count as a bypass, never count as hits until
// contention is seen on them, and go with their last user.
func TestTableTentativeEntries(t *testing.T) {
	tb := newTable(2, time.Hour, false)
	hot := contended(t, tb, "hot") // idle and hot: must survive the suspects
	var suspects []*entry
	for _, key := range []string{"a", "b"} {
		e, hits, bypassed := tb.join(key, false, true)
		if e == nil || !e.tentative || hits != 0 || bypassed {
			t.Fatalf("suspect %q: %v, %d hits, bypassed %v; want a tentative entry", key, e, hits, bypassed)
		}
		suspects = append(suspects, e)
	}
	if e, hits, bypassed := tb.join("c", false, true); e != nil || hits != 0 || bypassed {
		t.Fatalf("a suspect beyond capacity tentative entries: %v, %d hits, bypassed %v; want none, no bypass", e, hits, bypassed)
	}
	if size, evictions := tb.size(); size != 1 || evictions != 0 {
		t.Fatalf("size %d, %d evictions; the suspects must not touch the kept entries", size, evictions)
	}
	if e, _, _ := tb.join("hot", false, false); e != hot {
		t.Fatal("the idle hot entry went")
	}
	// A name of WithKeys takes the free slot, not one of the suspects'.
	p, hits, bypassed := tb.join("p", true, false)
	if p == nil || p.tentative || hits != 1 || bypassed {
		t.Fatalf("a pinned name with room: %v, %d hits, bypassed %v", p, hits, bypassed)
	}
	// Contention on a suspect with no room left: it stays tentative, and
	// its users count as hits.
	if e, hits, _ := tb.join("b", false, false); e != suspects[1] || !e.tentative || hits != 2 {
		t.Fatalf("contention on a suspect in a full table: %v, %d hits; want it tentative, two hits", e, hits)
	}
	tb.leave(suspects[0])
	tb.leave(p) // pinned: idle, kept
	tb.leave(hot)
	// Suspect a goes with its only user; b stays with its second one.
	if tb.tentative != 1 {
		t.Fatalf("%d tentative entries, want b only", tb.tentative)
	}
	if e, _, _ := tb.join("a", false, false); e != nil {
		t.Fatal("an uncontended suspect stayed")
	}
	// b's last user leaves: b is hot and takes the place of the least
	// recently used idle entry, p.
	tb.leave(suspects[1])
	tb.leave(suspects[1])
	if size, evictions := tb.size(); size != 2 || evictions != 1 || tb.tentative != 0 {
		t.Fatalf("size %d, %d evictions, %d tentative; want b kept in the place of p", size, evictions, tb.tentative)
	}
	if e, _, _ := tb.join("p", false, false); e != nil {
		t.Fatal("p, the least recently used idle entry, was not the one evicted")
	}
	if e, _, _ := tb.join("b", false, false); e != suspects[1] || e.tentative {
		t.Fatal("the contended suspect was not kept")
	}
}
