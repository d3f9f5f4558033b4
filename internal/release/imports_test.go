package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// lockstepKit are the root module's internal packages that the adapters
// and stores (other modules) may import from non-test code. They are not a
// stable API: every module is released at the same version as the root
// module (scripts/release.sh), and requires it at exactly that version, so
// that an adapter or a store of one version never builds against the kit
// of another. Add a package here only under that rule (README, "Releases").
var lockstepKit = []string{
	"internal/adapter",     // the middleware flow of every adapter
	"internal/pubsub",      // grant delivery of the fair queue (rueidis store)
	"internal/redisscript", // the Redis scripts (rueidis store)
	"internal/undo",        // the clean-up queue of failed calls (stores)
}

// TestInternalImports: a released module's non-test code imports another
// module's internal packages only from the lockstep kit; a module's tests
// may use the root module's test helpers (internal/servers, redistest, …),
// which users never build.
func TestInternalImports(t *testing.T) {
	top := strings.TrimSpace(run(t, ".", nil, "git", "rev-parse", "--show-toplevel"))
	mods, err := Modules(top)
	if err != nil {
		t.Fatal(err)
	}
	root := mods[0].Path
	for _, m := range mods {
		if !m.Released() {
			continue
		}
		for file, imports := range moduleImports(t, top, m, mods) {
			for _, imp := range imports {
				owner := ownerOf(mods, imp)
				if owner == "" || owner == m.Path || !isInternal(strings.TrimPrefix(imp, owner)) {
					continue
				}
				rel := strings.TrimPrefix(imp, root+"/")
				if owner == root && slices.Contains(lockstepKit, rel) {
					continue
				}
				t.Errorf("%s imports %s, an internal package of %s outside the lockstep kit (internal/release/imports_test.go)", file, imp, owner)
			}
		}
	}
}

// moduleImports returns the imports of each non-test Go file of m, leaving
// out the directories of nested modules.
func moduleImports(t *testing.T, top string, m Module, mods []Module) map[string][]string {
	t.Helper()
	base := filepath.Join(top, m.Dir)
	out := map[string][]string{}
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != base {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
				if n := d.Name(); n == "testdata" || strings.HasPrefix(n, ".") {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(top, p)
		for _, s := range f.Imports {
			path, _ := strconv.Unquote(s.Path.Value)
			out[rel] = append(out[rel], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ownerOf returns the module of mods that holds the package imp (the
// longest matching path), or "".
func ownerOf(mods []Module, imp string) string {
	owner := ""
	for _, m := range mods {
		if (imp == m.Path || strings.HasPrefix(imp, m.Path+"/")) && len(m.Path) > len(owner) {
			owner = m.Path
		}
	}
	return owner
}

// isInternal reports whether the package path (relative to its module,
// with a leading slash) has an internal element.
func isInternal(rel string) bool {
	return slices.Contains(strings.Split(rel, "/"), "internal")
}
