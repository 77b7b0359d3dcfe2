package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary play the service: verify starts it as a
// child process with KAFKAWORDCOUNT_CHILD set.
func TestMain(m *testing.M) {
	if os.Getenv("KAFKAWORDCOUNT_CHILD") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func testCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	c := exec.CommandContext(ctx, os.Args[0], args...)
	c.Env = append(os.Environ(), "KAFKAWORDCOUNT_CHILD=1")
	return c, nil
}

// TestVerify runs verify on a kfake cluster it hosts: 3 processes killed
// (SIGKILL) and stopped (SIGSTOP) at random moments (seeded; the seed is
// logged), restarted, and scaled out to 4 during a rebalance, then every
// partition's latest checkpoint restored and compared with an independent
// count of the input, and the output topic, produced in transactions,
// read with read_committed and compared with the input's words. It fails if
// a count differs, a partition is not checkpointed at its end, no restore
// happened, a process exited unasked, no stop made a process lose its
// partitions, or there were fewer than 10 kills, stops and scale-outs.
func TestVerify(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("fault seed %d", seed)
	var out bytes.Buffer
	code := verifyMain(context.Background(), []string{"-fault-seed", fmt.Sprint(seed), "-input", "12s",
		"-rate", "1000", "-fault-every", "1s", "-checkpoint-interval", "300ms", "-grace", "20s",
		"-timeout", "80s"}, testCommand, &out, &out)
	t.Log(out.String())
	if code != 0 {
		t.Fatalf("verify exited %d", code)
	}
	faults := regexp.MustCompile(`faults: (\d+) kills, (\d+) stops, (\d+) scale-out \(each a rebalance: (\d+)\), \d+ restarts, (\d+) unasked exits`).FindStringSubmatch(out.String())
	restores := regexp.MustCompile(`partitions: (\d+) restored from a checkpoint, \d+ first starts, \d+ revoked, (\d+) lost`).FindStringSubmatch(out.String())
	if faults == nil || restores == nil {
		t.Fatal("verify printed no summary")
	}
	if n, _ := strconv.Atoi(faults[5]); n != 0 {
		t.Errorf("%d processes exited unasked, want none", n)
	}
	if n, _ := strconv.Atoi(faults[2]); n == 0 {
		t.Error("no stop (SIGSTOP)")
	}
	if n, _ := strconv.Atoi(restores[2]); n == 0 {
		t.Error("no partition lost")
	}
	if n, _ := strconv.Atoi(faults[4]); n < 10 {
		t.Errorf("%d rebalances by faults, want at least 10", n)
	}
	if n, _ := strconv.Atoi(faults[1]); n == 0 {
		t.Error("no kill")
	}
	if n, _ := strconv.Atoi(restores[1]); n == 0 {
		t.Error("no restore")
	}
	if !regexp.MustCompile(`OK: \d+ words`).MatchString(out.String()) {
		t.Error("verify did not report OK")
	}
	if !regexp.MustCompile(`OK: the output topic \S+, read with read_committed, has [1-9]\d* records`).MatchString(out.String()) {
		t.Error("verify did not check the transactional output")
	}
}
