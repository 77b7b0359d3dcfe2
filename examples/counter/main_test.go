package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/examples/internal/exampletest"
)

// TestMain lets the test binary play the service: verify starts it as a
// child process with COUNTER_CHILD set.
func TestMain(m *testing.M) {
	if os.Getenv("COUNTER_CHILD") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := 0
		if err := run(ctx, os.Args[1:]); err != nil && ctx.Err() == nil {
			os.Stderr.WriteString("counter run: " + err.Error() + "\n")
			code = 1
		}
		stop()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

func testCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	c := exec.CommandContext(ctx, os.Args[0], args...)
	c.Env = append(os.Environ(), "COUNTER_CHILD=1")
	return c, nil
}

// TestVerify runs verify, within a minute: 4 instances in 2 processes,
// killed (SIGKILL) and restarted 6 times, the latest complete checkpoint
// restored and checked against the input at every kill, and at the end
// against the whole input. On MinIO under `make test`, else on a local
// directory.
func TestVerify(t *testing.T) {
	args := []string{"-base-path", exampletest.BasePath(t, "counter-test"), "-records", "250", "-rate", "50",
		"-kills", "6", "-kill-every", "700ms", "-timeout", "55s"}
	var out, errs bytes.Buffer
	if code := verifyMain(context.Background(), args, testCommand, &out, &errs); code != 0 {
		t.Fatalf("verify exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "kill") || strings.Contains(line, "OK:") {
			t.Log(line)
		}
	}
	if !strings.Contains(out.String(), "OK: 6 kills") {
		t.Errorf("verify's output lacks %q:\n%s", "OK: 6 kills", out.String())
	}
}
