package unclaimed

import (
	"fmt"
	"testing"
)

func TestKeepClaim(t *testing.T) {
	var u Grants[int]
	if _, ok := u.Claim("a"); ok {
		t.Fatal("claimed a grant never kept")
	}
	u.Keep("a", 7)
	if g, ok := u.Claim("a"); !ok || g != 7 {
		t.Fatalf("Claim = %d, %v; want 7, true", g, ok)
	}
	if _, ok := u.Claim("a"); ok {
		t.Fatal("a grant was claimed twice")
	}
	for i := range 3 * Max {
		u.Keep(fmt.Sprint(i), i)
	}
	if u.Len() > Max {
		t.Fatalf("%d grants kept, want at most %d", u.Len(), Max)
	}
	if g, ok := u.Claim(fmt.Sprint(3*Max - 1)); !ok || g != 3*Max-1 {
		t.Fatalf("the newest grant was dropped: %d, %v", g, ok)
	}
}
