// Command release prepares a lockstep release of reqlock's modules in a
// clone: scripts/release.sh runs it, then commits and tags. It sets every
// module's requirements on the other reqlock modules to the version, drops
// their replace directives (the committed go.work keeps local development
// on the sibling directories), dates the CHANGELOG's Unreleased section,
// and prints the tags to make, one per line: vX.Y.Z for the root module,
// DIR/vX.Y.Z for the module in DIR. The modules under internal/, benchmarks
// and examples are edited but not tagged: nobody imports them.
//
// With -work DIR it prints a go.work instead, for testing the module in
// DIR as its users build it: the module and the reqlock modules it requires
// (directly or through one another), from their directories, and no other.
// scripts/test.sh tests each module on its own such workspace: the module
// graph is the one a user's build has at a release, where the siblings are
// required at the same version, and the go.mod files need no replace.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

func main() {
	root := flag.String("root", ".", "the clone's top directory (where go.work is)")
	version := flag.String("version", "", "the version to release: vX.Y.Z")
	date := flag.String("date", time.Now().Format(time.DateOnly), "the release date written into the CHANGELOG")
	work := flag.String("work", "", "instead of a release: print a go.work for the module in this directory (relative to -root) and the reqlock modules it requires, directly or not")
	flag.Parse()
	if *work != "" {
		data, err := Workspace(*root, *work)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write(data)
		return
	}
	tags, err := prepare(*root, *version, *date)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, t := range tags {
		fmt.Println(t)
	}
}

// replaceInWork makes root's go.work replace each module at version by its
// directory. The go command reads the go.mod of a required version even
// when the workspace holds that module (golang/go#45713), so until the tags
// are published it needs these lines to build the release commit; once they
// are, the lines change nothing. Replaces of the modules at other versions
// are dropped.
func replaceInWork(root string, mods []Module, version string) error {
	work, err := readWork(root)
	if err != nil {
		return err
	}
	for _, r := range work.Replace {
		if sibling(mods, r.Old.Path) {
			if err := work.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return fmt.Errorf("release: %w", err)
			}
		}
	}
	for _, m := range mods {
		dir := "./" + m.Dir
		if m.Dir == "" {
			dir = "./"
		}
		if err := work.AddReplace(m.Path, version, dir, ""); err != nil {
			return fmt.Errorf("release: %w", err)
		}
	}
	work.Cleanup()
	if err := os.WriteFile(filepath.Join(root, "go.work"), modfile.Format(work.Syntax), 0o644); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// readWork reads and parses root's go.work.
func readWork(root string) (*modfile.WorkFile, error) {
	name := filepath.Join(root, "go.work")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	work, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	return work, nil
}

// Module is one module of the workspace.
type Module struct {
	Path string // module path
	Dir  string // directory relative to the root, "" for the root module
}

// Tag returns the module's tag for version.
func (m Module) Tag(version string) string {
	if m.Dir == "" {
		return version
	}
	return m.Dir + "/" + version
}

// Released reports whether the module is tagged: not one of internal/,
// benchmarks or examples.
func (m Module) Released() bool {
	first, _, _ := strings.Cut(m.Dir, "/")
	switch first {
	case "internal", "benchmarks", "examples":
		return false
	}
	return true
}

// Modules returns the modules that root's go.work uses, the root module
// first.
func Modules(root string) ([]Module, error) {
	work, err := readWork(root)
	if err != nil {
		return nil, err
	}
	var mods []Module
	for _, u := range work.Use {
		dir := filepath.ToSlash(filepath.Clean(u.Path))
		if dir == "." {
			dir = ""
		}
		f, err := readMod(root, dir)
		if err != nil {
			return nil, err
		}
		if f.Module == nil {
			return nil, fmt.Errorf("release: %s/go.mod has no module line", dir)
		}
		m := Module{Path: f.Module.Mod.Path, Dir: dir}
		if dir == "" {
			mods = append([]Module{m}, mods...)
		} else {
			mods = append(mods, m)
		}
	}
	if len(mods) == 0 || mods[0].Dir != "" {
		return nil, errors.New("release: go.work does not use the root module (.)")
	}
	// The go command finds a nested module's tag (DIR/vX.Y.Z) by its path
	// below the root module's: the two must agree.
	for _, m := range mods[1:] {
		if m.Path != mods[0].Path+"/"+m.Dir {
			return nil, fmt.Errorf("release: the module in %s is %s, not %s/%s: its tags would not be found", m.Dir, m.Path, mods[0].Path, m.Dir)
		}
	}
	return mods, nil
}

func readMod(root, dir string) (*modfile.File, error) {
	name := filepath.Join(root, dir, "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	return f, nil
}

// sibling reports whether path is one of the modules mods.
func sibling(mods []Module, path string) bool {
	for _, m := range mods {
		if m.Path == path {
			return true
		}
	}
	return false
}

// prepare edits the go.mod files and the CHANGELOG under root for version
// and returns the tags to make.
func prepare(root, version, date string) ([]string, error) {
	if !semver.IsValid(version) || semver.Canonical(version) != version || semver.Build(version) != "" {
		return nil, fmt.Errorf("release: %q is not a version vX.Y.Z (a semantic version, e.g. v0.1.0 or v1.2.0-rc.1)", version)
	}
	if major := semver.Major(version); major != "v0" && major != "v1" {
		return nil, fmt.Errorf("release: %s is major version %s: the module paths would need a /%s suffix first", version, major, major)
	}
	mods, err := Modules(root)
	if err != nil {
		return nil, err
	}
	for _, m := range mods {
		if err := module.Check(m.Path, version); err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
	}
	for _, m := range mods {
		f, err := readMod(root, m.Dir)
		if err != nil {
			return nil, err
		}
		for _, r := range f.Require {
			if sibling(mods, r.Mod.Path) {
				if err := f.AddRequire(r.Mod.Path, version); err != nil {
					return nil, fmt.Errorf("release: %s: %w", m.Path, err)
				}
			}
		}
		for _, r := range f.Replace {
			if sibling(mods, r.Old.Path) {
				if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
					return nil, fmt.Errorf("release: %s: %w", m.Path, err)
				}
			}
		}
		f.Cleanup()
		out, err := f.Format()
		if err != nil {
			return nil, fmt.Errorf("release: %s: %w", m.Path, err)
		}
		if err := os.WriteFile(filepath.Join(root, m.Dir, "go.mod"), out, 0o644); err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
	}
	if err := replaceInWork(root, mods, version); err != nil {
		return nil, err
	}
	if err := dateChangelog(filepath.Join(root, "CHANGELOG.md"), version, date); err != nil {
		return nil, err
	}
	var tags []string
	for _, m := range mods {
		if m.Released() {
			tags = append(tags, m.Tag(version))
		}
	}
	return tags, nil
}

// dateChangelog gives the changes under "## [Unreleased]" the version's
// heading, leaving an empty Unreleased section above them (Keep a
// Changelog). A missing file or section is left alone.
func dateChangelog(name, version, date string) error {
	data, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	heading := []byte("## [Unreleased]\n")
	if !bytes.Contains(data, heading) {
		return nil
	}
	dated := fmt.Appendf(nil, "## [Unreleased]\n\n## [%s] - %s\n", strings.TrimPrefix(version, "v"), date)
	data = bytes.Replace(data, heading, dated, 1)
	if err := os.WriteFile(name, data, 0o644); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

// Workspace returns a go.work (absolute paths) for the module in dir
// (relative to root) and the sibling modules it requires, transitively.
func Workspace(root, dir string) ([]byte, error) {
	mods, err := Modules(root)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	byPath := map[string]Module{}
	for _, m := range mods {
		byPath[m.Path] = m
	}
	dir = filepath.ToSlash(filepath.Clean(dir))
	if dir == "." {
		dir = ""
	}
	var start *Module
	for i := range mods {
		if mods[i].Dir == dir {
			start = &mods[i]
		}
	}
	if start == nil {
		return nil, fmt.Errorf("release: go.work uses no module in %q", dir)
	}
	seen := map[string]bool{start.Path: true}
	queue := []Module{*start}
	var dirs []string
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		dirs = append(dirs, filepath.Join(abs, m.Dir))
		f, err := readMod(root, m.Dir)
		if err != nil {
			return nil, err
		}
		for _, r := range f.Require {
			if s, ok := byPath[r.Mod.Path]; ok && !seen[s.Path] {
				seen[s.Path] = true
				queue = append(queue, s)
			}
		}
	}
	var b bytes.Buffer
	work, err := readWork(root)
	if err != nil {
		return nil, err
	}
	if work.Go == nil {
		return nil, errors.New("release: go.work has no go line")
	}
	fmt.Fprintf(&b, "go %s\n\nuse (\n", work.Go.Version)
	for _, d := range dirs {
		fmt.Fprintf(&b, "\t%s\n", strconv.Quote(d))
	}
	b.WriteString(")\n")
	// The root go.work's replaces of the modules at a released version
	// (see replaceInWork), from their directories.
	for _, r := range work.Replace {
		if _, ok := byPath[r.Old.Path]; !ok || r.New.Version != "" {
			continue
		}
		to := r.New.Path
		if !filepath.IsAbs(to) {
			to = filepath.Join(abs, to)
		}
		old := r.Old.Path
		if r.Old.Version != "" {
			old += " " + r.Old.Version
		}
		fmt.Fprintf(&b, "\nreplace %s => %s\n", old, strconv.Quote(to))
	}
	return b.Bytes(), nil
}
