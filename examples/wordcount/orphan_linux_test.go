//go:build linux

package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// children returns the processes whose parent is pid, from /proc.
func children(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, state, ok := procStat(p); ok && ppid == pid && state != "Z" {
			out = append(out, p)
		}
	}
	return out
}

// procStat returns a process's parent and state, and false once it is
// gone.
func procStat(pid int) (ppid int, state string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0], err == nil
}

// TestInstancesDieWithVerify: when verify dies without stopping its
// instances (SIGKILL, as a test binary's timeout does), the instances end
// too; they would otherwise run on forever, since an instance of several
// exits only when stopped.
func TestInstancesDieWithVerify(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service")
	}
	c := exec.Command(os.Args[0], "-base-path", t.TempDir(), "-records", "100000", "-rate", "100", "-phase", "1m",
		"-fault-every", "1m", "-timeout", "2m", "-v")
	c.Env = append(os.Environ(), "WORDCOUNT_VERIFY=1")
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
	sc := bufio.NewScanner(out)
	started := 0
	for started < 3 && sc.Scan() {
		if strings.Contains(sc.Text(), firstStart) {
			started++
		}
	}
	if started < 3 {
		t.Fatalf("verify's instances did not start: %v", sc.Err())
	}
	kids := children(t, c.Process.Pid)
	if len(kids) != 3 {
		t.Fatalf("verify has %d children %v, want 3", len(kids), kids)
	}
	defer func() {
		for _, k := range kids {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
	}()
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var alive []int
		for _, k := range kids {
			if _, state, ok := procStat(k); ok && state != "Z" {
				alive = append(alive, k)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("instances %v still run 10s after verify died", alive)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
