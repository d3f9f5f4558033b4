package main

import (
	"strings"
	"testing"

	"github.com/reqlock/reqlock/internal/redistest"
)

func TestQuickstartOnRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	var out strings.Builder
	if err := run(&out, srv.Addr()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1. acquired \"order:42\"", "2. a second request for order:42 is busy", "3. released", "4. 80 locked updates of order:7, 0 overlaps"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
