package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestWorkspace: a module's own workspace holds the module and the reqlock
// modules it requires, directly or through one another, and no other.
func TestWorkspace(t *testing.T) {
	top := strings.TrimSpace(run(t, ".", nil, "git", "rev-parse", "--show-toplevel"))
	for dir, want := range map[string][]string{
		"":                 {""},
		"ginlock":          {"ginlock", ""},
		"grpclock":         {"grpclock", "", "protokey"},
		"stores/zookeeper": {"stores/zookeeper", ""},
		"cmd/reqlock":      {"cmd/reqlock", "", "stores/etcd", "stores/memcached", "stores/sql", "stores/zookeeper"},
	} {
		data, err := Workspace(top, dir)
		if err != nil {
			t.Fatal(err)
		}
		work, err := modfile.ParseWork("go.work", data, nil)
		if err != nil {
			t.Fatalf("%s: %v\n%s", dir, err, data)
		}
		var got []string
		for _, u := range work.Use {
			rel, err := filepath.Rel(top, u.Path)
			if err != nil {
				t.Fatal(err)
			}
			if rel == "." {
				rel = ""
			}
			got = append(got, filepath.ToSlash(rel))
		}
		if got[0] != dir {
			t.Errorf("workspace of %s begins with %s", strconv.Quote(dir), strconv.Quote(got[0]))
		}
		slices.Sort(got)
		slices.Sort(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("workspace of %s: %s, want %s", strconv.Quote(dir), strings.Join(got, ","), strings.Join(want, ","))
		}
	}
	if _, err := Workspace(top, "nowhere"); err == nil {
		t.Error("Workspace of a directory with no module: no error")
	}
}

// TestModulesPathMustMatchDir: a nested module whose path is not the root's
// path and its directory is refused: the go command would not find its
// tags.
func TestModulesPathMustMatchDir(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "go.work"), []byte("go 1.26.0\n\nuse (\n\t.\n\t./a\n)\n"))
	write(t, filepath.Join(root, "go.mod"), []byte("module example.com/r\n\ngo 1.26.0\n"))
	if err := os.MkdirAll(filepath.Join(root, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "a", "go.mod"), []byte("module example.com/r/b\n\ngo 1.26.0\n"))
	if _, err := Modules(root); err == nil || !strings.Contains(err.Error(), "its tags would not be found") {
		t.Errorf("Modules: %v, want the mismatch named", err)
	}
	write(t, filepath.Join(root, "a", "go.mod"), []byte("module example.com/r/a\n\ngo 1.26.0\n"))
	if _, err := Modules(root); err != nil {
		t.Errorf("Modules of matching paths: %v", err)
	}
}
