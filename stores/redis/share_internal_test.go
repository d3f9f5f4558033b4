package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/reqlock/reqlock/internal/redisscript"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/lockstore"
)

// A share attempt that fails while the server is frozen is undone when it
// resumes: the server runs the late attempt, and the clean-up (a
// ReleaseShare of its token, retried in the background) removes its share,
// so that no share without a holder keeps the name from its exclusive
// holders for a whole TTL. Another token's share is left alone.
func TestUndoOfAShareOnAFrozenServer(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := context.Background()
	s := New(client)
	defer s.Close()
	s.ioTimeout.Store(int64(time.Second))
	const ttl = 5 * time.Minute // a clean-up that found nothing would go on that long
	key := "frozen-share"
	if ok, _, _, err := s.TryAcquireShare(ctx, key, "other", ttl, lockstore.Hold{N: 2}, false); !ok || err != nil {
		t.Fatalf("TryAcquireShare(other) = %v, %v", ok, err)
	}
	srv.Freeze(t)
	actx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, _, _, err := s.TryAcquireShare(actx, key, "late", ttl, lockstore.Hold{N: 2}, false)
	cancel()
	if err == nil {
		srv.Thaw(t)
		t.Fatal("TryAcquireShare on a frozen server succeeded")
	}
	n, _ := s.shareUndos.Pending()
	srv.Thaw(t)
	if n != 1 {
		t.Fatalf("%d share clean-ups pending after a failed attempt, want 1", n)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		shares := client.ZRange(ctx, redisscript.SharesKey(key), 0, -1).Val()
		if len(shares) == 1 && shares[0] == "other" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the thaw the shares are %v, want [other]", shares)
		}
	}
}
