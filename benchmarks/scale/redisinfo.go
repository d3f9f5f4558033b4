package scale

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// serverStats is what one Redis server counted: calls and microseconds per
// command (INFO commandstats), errors per kind (INFO errorstats) and the
// CPU seconds of the server process (INFO cpu, user + system).
type serverStats struct {
	Calls  map[string]int64
	Usec   map[string]int64
	Errors map[string]int64
	CPU    float64
}

// readStats reads INFO commandstats, errorstats and cpu from c.
func readStats(ctx context.Context, c *redis.Client) (serverStats, error) {
	s := serverStats{Calls: map[string]int64{}, Usec: map[string]int64{}, Errors: map[string]int64{}}
	info, err := c.Info(ctx, "commandstats", "errorstats", "cpu").Result()
	if err != nil {
		return s, fmt.Errorf("scale: INFO: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "cmdstat_"); ok {
			name, fields, _ := strings.Cut(rest, ":")
			f := infoFields(fields)
			s.Calls[name] = int64(f["calls"])
			s.Usec[name] = int64(f["usec"])
		} else if rest, ok := strings.CutPrefix(line, "errorstat_"); ok {
			name, fields, _ := strings.Cut(rest, ":")
			s.Errors[name] = int64(infoFields(fields)["count"])
		} else if v, ok := strings.CutPrefix(line, "used_cpu_user:"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			s.CPU += f
		} else if v, ok := strings.CutPrefix(line, "used_cpu_sys:"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			s.CPU += f
		}
	}
	return s, nil
}

func infoFields(s string) map[string]float64 {
	out := map[string]float64{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		f, err := strconv.ParseFloat(v, 64)
		if err == nil {
			out[k] = f
		}
	}
	return out
}

// sub returns s less before, counting only the lock commands (see
// notLocking).
func (s serverStats) sub(before serverStats) serverStats {
	d := serverStats{Calls: map[string]int64{}, Usec: map[string]int64{}, Errors: map[string]int64{}, CPU: s.CPU - before.CPU}
	for k, v := range s.Calls {
		if notLocking(k) {
			continue
		}
		if n := v - before.Calls[k]; n != 0 {
			d.Calls[k] = n
			d.Usec[k] = s.Usec[k] - before.Usec[k]
		}
	}
	for k, v := range s.Errors {
		if n := v - before.Errors[k]; n != 0 {
			d.Errors[k] = n
		}
	}
	return d
}

// add sums o into s.
func (s *serverStats) add(o serverStats) {
	if s.Calls == nil {
		*s = serverStats{Calls: map[string]int64{}, Usec: map[string]int64{}, Errors: map[string]int64{}}
	}
	for k, v := range o.Calls {
		s.Calls[k] += v
		s.Usec[k] += o.Usec[k]
	}
	for k, v := range o.Errors {
		s.Errors[k] += v
	}
	s.CPU += o.CPU
}

// totalCalls and totalUsec are the lock commands' calls and microseconds
// (INFO commandstats). A command that a script calls is counted under its
// own name as well as in the script's time, so totalUsec counts a script's
// commands twice: INFO cpu (serverStats.CPU) is the figure to compare
// between implementations, totalUsec says where the time goes.
func (s serverStats) totalCalls() int64 {
	var n int64
	for _, v := range s.Calls {
		n += v
	}
	return n
}

func (s serverStats) totalUsec() int64 {
	var n int64
	for _, v := range s.Usec {
		n += v
	}
	return n
}

// redirects counts the MOVED and ASK replies and CROSSSLOT errors.
func (s serverStats) redirects() (moved, ask, crossslot int64) {
	return s.Errors["MOVED"], s.Errors["ASK"], s.Errors["CROSSSLOT"]
}

// notLocking reports the commands that are not the locks' own: the
// harness's and connection set-up.
func notLocking(name string) bool {
	switch name {
	case "info", "flushdb", "flushall", "ping", "hello", "select", "scan", "memory|usage", "dbsize", "readonly":
		return true
	}
	for _, prefix := range []string{"config|", "client|", "cluster|", "command|", "memory|"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
