package lockotel

import (
	"runtime/debug"
	"testing"
)

func TestModuleVersion(t *testing.T) {
	dep := func(path, version string, replace *debug.Module) *debug.Module {
		return &debug.Module{Path: path, Version: version, Replace: replace}
	}
	for _, c := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"a dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/svc", Version: "v1.0.0"},
			Deps: []*debug.Module{dep("example.com/other", "v9.9.9", nil), dep(module, "v0.4.1", nil)}}, "v0.4.1"},
		{"a pseudo-version", debug.BuildInfo{Main: debug.Module{Path: "example.com/svc"},
			Deps: []*debug.Module{dep(module, "v0.0.0-20261122002954-bca6e5c12412", nil)}}, "v0.0.0-20261122002954-bca6e5c12412"},
		{"replaced by another version", debug.BuildInfo{Main: debug.Module{Path: "example.com/svc"},
			Deps: []*debug.Module{dep(module, "v0.4.1", dep("example.com/fork", "v0.4.2-fork", nil))}}, "v0.4.2-fork"},
		{"replaced by a directory", debug.BuildInfo{Main: debug.Module{Path: "example.com/svc"},
			Deps: []*debug.Module{dep(module, "v0.4.1", dep("../reqlock", "", nil))}}, develVersion},
		{"the main module, stamped", debug.BuildInfo{Main: debug.Module{Path: module, Version: "v0.5.0"}}, "v0.5.0"},
		{"the main module, unstamped", debug.BuildInfo{Main: debug.Module{Path: module, Version: "(devel)"}}, develVersion},
		{"absent", debug.BuildInfo{Main: debug.Module{Path: "example.com/svc", Version: "v1.0.0"}}, develVersion},
	} {
		if got := moduleVersion(&c.bi); got != c.want {
			t.Errorf("%s: moduleVersion = %q, want %q", c.name, got, c.want)
		}
	}
}
