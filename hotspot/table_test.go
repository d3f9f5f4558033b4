package hotspot

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// contended joins key twice and leaves twice, as two goroutines contending
// for it would: the entry turns hot and stays idle in the table.
func contended(t *testing.T, tb *table, key string) *entry {
	e, bypassed := tb.join(key, true, false)
	if e == nil || bypassed {
		t.Fatalf("join(%q) = %v, %v", key, e, bypassed)
	}
	if again, _ := tb.join(key, false, false); again != e {
		t.Fatalf("a second join of %q found another entry", key)
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
// every entry is in use, a new name bypasses the table.
func TestTableNeverEvictsBusyEntries(t *testing.T) {
	tb := newTable(3, time.Hour, false)
	held, _ := tb.join("held", true, false)
	waited, _ := tb.join("waited", true, false)
	if again, _ := tb.join("waited", true, false); again != waited {
		t.Fatal("a waiter got another entry")
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
	if e, _ := tb.join("held", false, false); e != held {
		t.Fatal("the held entry was evicted")
	}
	if e, _ := tb.join("waited", false, false); e != waited {
		t.Fatal("the waited-on entry was evicted")
	}
	third, _ := tb.join("third", true, false) // evicts the last idle one
	if e, bypassed := tb.join("fourth", true, false); e != nil || !bypassed {
		t.Fatalf("a full table of busy entries: join = %v, bypassed %v; want a bypass", e, bypassed)
	}
	tb.leave(third)
	if e, bypassed := tb.join("fourth", true, false); e == nil || bypassed {
		t.Fatal("no room after an entry went idle")
	}
}

// An entry that was never contended goes as soon as it is idle; a hot one
// stays until its hot period ends; a pinned one stays.
func TestTableKeepsHotEntriesOnly(t *testing.T) {
	tb := newTable(10, time.Second, false)
	now := time.Now()
	tb.now = func() time.Time { return now }
	e, _ := tb.join("cold", true, false)
	tb.leave(e)
	if size, _ := tb.size(); size != 0 {
		t.Fatalf("an uncontended entry stayed (size %d)", size)
	}
	hot := contended(t, tb, "hot")
	pinned, _ := tb.join("pinned", true, true)
	tb.leave(pinned)
	if size, _ := tb.size(); size != 2 {
		t.Fatalf("size %d, want the hot and the pinned entry", size)
	}
	now = now.Add(time.Second / 2)
	if e, _ := tb.join("hot", false, false); e != hot {
		t.Fatal("a hot entry was not found within its hot period")
	}
	tb.leave(hot)
	now = now.Add(2 * time.Second)
	if e, _ := tb.join("hot", false, false); e != nil {
		t.Fatal("an entry past its hot period was used")
	}
	if e, _ := tb.join("pinned", false, false); e != pinned {
		t.Fatal("a pinned entry went")
	}
	tb.leave(pinned)
	if size, _ := tb.size(); size != 1 {
		t.Fatalf("size %d, want the pinned entry only", size)
	}
}
