package lockotel

import "runtime/debug"

// module is the path of the module this package belongs to.
const module = "github.com/reqlock/reqlock/otel"

// develVersion is what Version returns when the build records no version.
const develVersion = "devel"

// Version returns the version of this instrumentation, which New gives the
// Handler's tracer and meter as their instrumentation scope's version, as the
// contrib instrumentations do. It is the version of the
// github.com/reqlock/reqlock module the running binary was built with, as its
// build information records it: "v0.4.1", say, or a pseudo-version, or the
// version of a replacement module. It is "devel" when none is recorded: in
// tests, in builds from a work tree that Go did not stamp, and where the
// module is replaced by a directory.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return develVersion
	}
	return moduleVersion(bi)
}

// moduleVersion returns the version of module in bi, or develVersion.
func moduleVersion(bi *debug.BuildInfo) string {
	m := &bi.Main
	if m.Path != module {
		m = nil
		for _, d := range bi.Deps {
			if d.Path == module {
				m = d
				break
			}
		}
	}
	switch {
	case m == nil:
		return develVersion
	case m.Replace != nil:
		m = m.Replace // a directory has no version
	}
	if m.Version == "" || m.Version == "(devel)" {
		return develVersion
	}
	return m.Version
}
