package redistest

import "testing"

// TestSetSlotOrder: a migrated slot's new owner is told first, then the old
// one, then the other masters, whatever their order in the cluster.
func TestSetSlotOrder(t *testing.T) {
	a, b, c, d := &Server{port: 1}, &Server{port: 2}, &Server{port: 3}, &Server{port: 4}
	nodes := []*Server{a, b, c, d}
	for _, tc := range []struct {
		from, to *Server
		want     []*Server
	}{
		{a, b, []*Server{b, a, c, d}},
		{c, a, []*Server{a, c, b, d}},
		{d, c, []*Server{c, d, a, b}},
	} {
		got := setSlotOrder(nodes, tc.from, tc.to)
		if len(got) != len(tc.want) {
			t.Fatalf("from %d to %d: %d nodes, want %d", tc.from.port, tc.to.port, len(got), len(tc.want))
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("from %d to %d: node %d is %d, want %d", tc.from.port, tc.to.port, i, got[i].port, tc.want[i].port)
			}
		}
	}
}
