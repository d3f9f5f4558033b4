package lockbench

import (
	"bufio"
	"os"
	"runtime"
	"strings"
)

// Machine describes where a run took place, for the README.
type Machine struct {
	CPU   string // the CPU model, as the OS reports it
	Cores int    // logical CPUs
	OS    string // GOOS/GOARCH
	Go    string // the Go version the benchmark was built with
}

// ThisMachine describes the running machine.
func ThisMachine() Machine {
	return Machine{CPU: cpuModel(), Cores: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}
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
