package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/dstlgo/dstl/internal/benchreport"
)

// machine describes the computer a benchmark ran on, as a report
// records it.
type machine benchreport.Machine

// describeMachine reads the machine's description (on Linux, from /proc
// and /etc/os-release; elsewhere what the runtime knows).
func describeMachine() machine {
	m := machine{CPU: "unknown", Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if v := fileField("/proc/cpuinfo", "model name", ":"); v != "" {
		m.CPU = v
	}
	if v := fileField("/proc/meminfo", "MemTotal", ":"); v != "" {
		if kb, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64); err == nil {
			m.Memory = kb << 10
		}
	}
	if v := fileField("/etc/os-release", "PRETTY_NAME", "="); v != "" {
		m.OS += ", " + strings.Trim(v, `"`)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.OS += ", kernel " + strings.TrimSpace(string(b))
	}
	return m
}

func (m machine) String() string {
	mem := "memory unknown"
	if m.Memory > 0 {
		mem = formatBytes(m.Memory) + " memory"
	}
	return fmt.Sprintf("%s, %d %s, %s, %s, %s", m.CPU, m.Cores, plural(m.Cores, "core"), mem, m.GoVersion, m.OS)
}

// fileField returns the value of the first line "key SEP value" of a file.
func fileField(path, key, sep string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), sep)
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
