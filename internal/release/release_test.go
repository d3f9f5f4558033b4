package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

const testVersion = "v0.99.0"

// TestReleaseFromProxy is the release procedure end to end: in a throwaway
// clone of the repository's HEAD, scripts/release.sh tags every module;
// the tagged modules are served from a module proxy directory
// (GOPROXY=file://…, zips made with golang.org/x/mod/zip); and a program
// outside the repository that imports every public package of every
// released module builds and vets against them, with no replace directive,
// as a user's would with `go get`.
func TestReleaseFromProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every module from a local proxy")
	}
	top := strings.TrimSpace(run(t, ".", nil, "git", "rev-parse", "--show-toplevel"))
	clone := filepath.Join(t.TempDir(), "clone")
	run(t, ".", nil, "git", "clone", "-q", top, clone)
	ident := []string{"GIT_AUTHOR_NAME=release test", "GIT_AUTHOR_EMAIL=release@test.invalid",
		"GIT_COMMITTER_NAME=release test", "GIT_COMMITTER_EMAIL=release@test.invalid"}
	t.Log(strings.TrimSpace(run(t, clone, ident, "scripts/release.sh", testVersion)))

	mods, err := Modules(clone)
	if err != nil {
		t.Fatal(err)
	}
	tags := strings.Fields(run(t, clone, nil, "git", "tag", "--points-at", "HEAD"))
	var released []Module
	for _, m := range mods {
		if m.Released() {
			released = append(released, m)
			if !slices.Contains(tags, m.Tag(testVersion)) {
				t.Errorf("no tag %s on the release commit (tags: %v)", m.Tag(testVersion), tags)
			}
		}
		f, err := readMod(clone, m.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Replace {
			t.Errorf("%s: the release's go.mod replaces %s", m.Path, r.Old.Path)
		}
		for _, r := range f.Require {
			if sibling(mods, r.Mod.Path) && r.Mod.Version != testVersion {
				t.Errorf("%s: the release's go.mod requires %s %s, want %s", m.Path, r.Mod.Path, r.Mod.Version, testVersion)
			}
		}
	}
	if len(tags) != len(released) {
		t.Errorf("%d tags for %d released modules: %v", len(tags), len(released), tags)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The release commit builds in the repository before its tags are
	// published: with the committed go.work, and with a module's own
	// workspace (scripts/test.sh), from no proxy but the usual one.
	local := []string{"GOFLAGS=", "GOPROXY=" + strings.TrimSpace(run(t, clone, nil, "go", "env", "GOPROXY"))}
	run(t, filepath.Join(clone, "examples"), append(local, "GOWORK="+filepath.Join(clone, "go.work")), "go", "build", "./...")
	own, err := Workspace(clone, "ginlock")
	if err != nil {
		t.Fatal(err)
	}
	ownWork := filepath.Join(t.TempDir(), "go.work")
	write(t, ownWork, own)
	run(t, filepath.Join(clone, "ginlock"), append(local, "GOWORK="+ownWork), "go", "vet", "./...")

	proxy := t.TempDir()
	var (
		imports  []string
		libs     []Module // modules with packages to import
		commands []Module // modules of commands only (cmd/reqlock): installed, not imported
	)
	for _, m := range released {
		serve(t, proxy, clone, m)
		pkgs := publicPackages(t, clone, m)
		if len(pkgs) == 0 {
			commands = append(commands, m)
		} else {
			libs = append(libs, m)
		}
		imports = append(imports, pkgs...)
	}
	t.Logf("%d modules served, %d public packages, %d commands", len(released), len(imports), len(commands))

	// The user's program, outside the repository.
	prog := t.TempDir()
	var src bytes.Buffer
	src.WriteString("// Command releasecheck imports every public package of reqlock.\npackage main\n\nimport (\n")
	for _, p := range imports {
		fmt.Fprintf(&src, "\t_ %q\n", p)
	}
	src.WriteString(")\n\nfunc main() {}\n")
	write(t, filepath.Join(prog, "main.go"), src.Bytes())
	write(t, filepath.Join(prog, "go.mod"), []byte("module example.com/releasecheck\n\ngo 1.26.0\n"))
	upstream := strings.TrimSpace(run(t, prog, nil, "go", "env", "GOPROXY"))
	nosum := strings.TrimSpace(run(t, prog, nil, "go", "env", "GONOSUMDB"))
	if nosum != "" {
		nosum += ","
	}
	// A module cache of its own: the machine's may hold a v0.99.0 of an
	// earlier run, which the go command would take instead of this one's.
	// The machine's cache still serves the other modules, as a proxy.
	shared := strings.TrimSpace(run(t, prog, nil, "go", "env", "GOMODCACHE"))
	env := []string{
		"GOWORK=off", "GOFLAGS=-modcacherw",
		"GOMODCACHE=" + filepath.Join(t.TempDir(), "modcache"),
		"GOPROXY=file://" + filepath.ToSlash(proxy) + ",file://" + filepath.ToSlash(filepath.Join(shared, "cache", "download")) + "," + upstream,
		"GONOSUMDB=" + nosum + mods[0].Path,
		"GONOPROXY=", "GOPRIVATE=",
	}
	get := []string{"get"}
	for _, m := range libs {
		get = append(get, m.Path+"@"+testVersion)
	}
	run(t, prog, env, "go", get...)
	run(t, prog, env, "go", "mod", "tidy")
	run(t, prog, env, "go", "build", "./...")
	run(t, prog, env, "go", "vet", "./...")
	gomod := string(readFile(t, filepath.Join(prog, "go.mod")))
	if strings.Contains(gomod, "replace") {
		t.Errorf("the program's go.mod has a replace directive:\n%s", gomod)
	}
	for _, m := range libs {
		if !strings.Contains(gomod, m.Path+" "+testVersion) {
			t.Errorf("the program's go.mod does not require %s %s:\n%s", m.Path, testVersion, gomod)
		}
	}
	// A command installs as its users install it: go install PATH@VERSION,
	// which takes the module's own go.mod and no replace.
	for _, m := range commands {
		bin := t.TempDir()
		run(t, prog, append(env, "GOBIN="+bin), "go", "install", m.Path+"@"+testVersion)
		if _, err := os.Stat(filepath.Join(bin, path.Base(m.Path))); err != nil {
			t.Errorf("go install %s@%s: %v", m.Path, testVersion, err)
		}
	}
}

// serve writes module m of the release commit in clone into the proxy
// directory: list, .info, .mod and .zip (GOPROXY protocol).
func serve(t *testing.T, proxy, clone string, m Module) {
	t.Helper()
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(proxy, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "list"), []byte(testVersion+"\n"))
	info, _ := json.Marshal(struct{ Version, Time string }{testVersion, time.Now().UTC().Format(time.RFC3339)})
	write(t, filepath.Join(dir, testVersion+".info"), info)
	write(t, filepath.Join(dir, testVersion+".mod"), readFile(t, filepath.Join(clone, m.Dir, "go.mod")))
	f, err := os.Create(filepath.Join(dir, testVersion+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := zip.CreateFromVCS(f, module.Version{Path: m.Path, Version: testVersion}, clone, m.Tag(testVersion), m.Dir); err != nil {
		t.Fatalf("zip of %s: %v", m.Path, err)
	}
}

// publicPackages returns the import paths of m's packages that a user may
// import: not internal, not a command, not testdata, not of a nested
// module.
func publicPackages(t *testing.T, clone string, m Module) []string {
	t.Helper()
	base := filepath.Join(clone, m.Dir)
	var pkgs []string
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(base, p)
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if rel != "." {
			if name == "internal" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		pkg := packageName(t, p)
		if pkg == "" || pkg == "main" {
			return nil
		}
		if rel == "." {
			pkgs = append(pkgs, m.Path)
		} else {
			pkgs = append(pkgs, path.Join(m.Path, rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// packageName returns the package of the non-test Go files in dir, or "".
func packageName(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		return af.Name.Name
	}
	return ""
}

// run runs a command in dir with env added and returns its output; it
// fails the test when the command fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s%s", name, strings.Join(args, " "), dir, err, out.String(), errb.String())
	}
	return out.String()
}

func write(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
