package lockbench

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Machine describes where a run took place, for the README.
type Machine struct {
	CPU   string // the CPU model, as the OS reports it
	Cores int    // logical CPUs
	OS    string // GOOS/GOARCH
	Go    string // the Go version the benchmark was built with
	// TempDir is the temporary directory, where the stores section's
	// servers keep their data, and TempFS the type of its file system
	// ("tmpfs", "ext4"; "" when unknown).
	TempDir string
	TempFS  string
}

// ThisMachine describes the running machine.
func ThisMachine() Machine {
	return Machine{CPU: cpuModel(), Cores: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(), TempDir: os.TempDir(), TempFS: fileSystem(os.TempDir())}
}

// fileSystem returns the type of the file system that holds dir, from the
// longest mount point in /proc/mounts that contains it; "" when unknown.
func fileSystem(dir string) string {
	data, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return ""
	}
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved
	}
	var best, fs string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line) // device, mount point, type, ...
		if len(f) < 3 {
			continue
		}
		mount := f[1]
		inside := dir == mount || strings.HasPrefix(dir, strings.TrimSuffix(mount, "/")+"/")
		if inside && len(mount) >= len(best) {
			best, fs = mount, f[2]
		}
	}
	return fs
}

// cpuModel reads the model name from /proc/cpuinfo where there is one.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return "unknown CPU"
}
