package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets the test binary play the service: verify starts it as a
// child process with WORDCOUNT_CHILD set.
func TestMain(m *testing.M) {
	if os.Getenv("WORDCOUNT_CHILD") == "1" {
		os.Exit(runMain(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func testCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	c := exec.CommandContext(ctx, os.Args[0], args...)
	c.Env = append(os.Environ(), "WORDCOUNT_CHILD=1")
	return c, nil
}

// TestCrashAndRestore kills the service with SIGKILL mid-run, restarts it
// and checks its counts against a run without the crash, with and without
// local recovery.
func TestCrashAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for seconds")
	}
	for _, local := range []bool{false, true} {
		t.Run(map[bool]string{false: "remote", true: "local-recovery"}[local], func(t *testing.T) {
			args := []string{"-records", "20000", "-rate", "8000", "-checkpoint-interval", "300ms",
				"-materialize-interval", "500ms", "-kill-after", "1500ms", "-base-path", t.TempDir()}
			if local {
				args = append(args, "-local-recovery-dir", t.TempDir())
			}
			var out, errs bytes.Buffer
			if code := verifyMain(context.Background(), args, testCommand, &out, &errs); code != 0 {
				t.Fatalf("verify exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
			}
			log := out.String() + errs.String()
			if !strings.Contains(log, "restored checkpoint") || !strings.Contains(log, "OK:") {
				t.Fatalf("no restore or no verdict:\n%s", log)
			}
			if local && !strings.Contains(log, "snapshot(s) (1 local)") {
				t.Errorf("the snapshot was not restored from its local copy:\n%s", log)
			}
		})
	}
}

func TestExpectedIsDeterministic(t *testing.T) {
	a, b := expected(7, 1000), expected(7, 1000)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatal("different counts for one seed")
	}
	for w, n := range a {
		if b[w] != n {
			t.Fatalf("%q: %d and %d", w, n, b[w])
		}
	}
}
