package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/objname"
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

// TestCrashAndRestore kills the service with SIGKILL at a random moment
// after its first checkpoint completed (seeded; the seed is logged),
// restarts it and checks its counts against a run without the crash, with
// and without local recovery.
func TestCrashAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for seconds")
	}
	for _, local := range []bool{false, true} {
		t.Run(map[bool]string{false: "remote", true: "local-recovery"}[local], func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("crash seed %d", seed)
			args := []string{"-records", "20000", "-rate", "8000", "-checkpoint-interval", "300ms",
				"-materialize-interval", "500ms", "-crash-seed", fmt.Sprint(seed), "-base-path", t.TempDir()}
			if local {
				args = append(args, "-local-recovery-dir", t.TempDir())
			}
			var out, errs bytes.Buffer
			if code := verifyMain(context.Background(), args, testCommand, &out, &errs); code != 0 {
				t.Fatalf("verify exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
			}
			log := out.String() + errs.String()
			if !strings.Contains(log, restoredMessage) || !strings.Contains(log, "OK:") {
				t.Fatalf("no restore or no verdict:\n%s", log)
			}
			if local && !strings.Contains(log, "(1 local)") && !strings.Contains(log, "0 snapshot(s)") {
				t.Errorf("the snapshot was not restored from its local copy:\n%s", log)
			}
		})
	}
}

// TestVerifyFailsWithoutRestore: verify fails when the restarted service
// restores no checkpoint, even though its counts are right (it counted the
// whole stream from the start).
func TestVerifyFailsWithoutRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for seconds")
	}
	var calls atomic.Int32
	// The second start gets a job of its own: it finds no checkpoint.
	forgetful := func(ctx context.Context, args ...string) (*exec.Cmd, error) {
		if calls.Add(1) == 2 {
			args = append(slices.Clone(args), "-job-id", "another-job")
		}
		return testCommand(ctx, args...)
	}
	args := []string{"-records", "12000", "-rate", "8000", "-checkpoint-interval", "200ms", "-base-path", t.TempDir()}
	var out, errs bytes.Buffer
	code := verifyMain(context.Background(), args, forgetful, &out, &errs)
	if code != 1 || !strings.Contains(errs.String(), "restored no checkpoint") {
		t.Fatalf("verify exited %d, want 1 for a restart without restore\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
	}
}

// TestStreamIsPinned: the stream and its counts for a seed are fixed (the
// service and verify compute them in different processes, and a checkpoint
// must mean the same offset in every version): known values of seed 7.
func TestStreamIsPinned(t *testing.T) {
	if got := record(7, 0); !slices.Equal(got, []string{"had", "at"}) {
		t.Errorf("record 0 = %q", got)
	}
	if got := record(7, 999); !slices.Equal(got, []string{"than"}) {
		t.Errorf("record 999 = %q", got)
	}
	c := expected(7, 1000)
	var total int64
	for _, n := range c {
		total += n
	}
	if len(c) != 103 || total != 3493 || c["the"] != 167 || c["of"] != 140 || c["and"] != 122 {
		t.Errorf("seed 7, 1000 records: %d distinct words, %d in all, the %d, of %d, and %d; want 103, 3493, 167, 140, 122",
			len(c), total, c["the"], c["of"], c["and"])
	}
}

// TestOldLogObjectsDeleted: after a run without a crash, the only log
// objects left are those the last checkpoint names; the older ones were
// deleted as checkpoints completed.
func TestOldLogObjectsDeleted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a second")
	}
	ctx := context.Background()
	dir := t.TempDir()
	c, _ := testCommand(ctx, "-base-path", dir, "-job-id", "job", "-records", "8000", "-rate", "8000",
		"-checkpoint-interval", "100ms", "-materialize-interval", "300ms", "-output", filepath.Join(dir, "counts.json"))
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	b, _, err := backends.Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cs := checkpointStore{backend: b, prefix: objname.JobPrefix("job") + "checkpoints/"}
	last, err := cs.latest(ctx)
	if err != nil || last == nil {
		t.Fatalf("last checkpoint: %v, %v", last, err)
	}
	if last.CheckpointID < 5 {
		t.Fatalf("only %d checkpoints", last.CheckpointID)
	}
	kept := logObjects(last)
	var left []string
	err = b.List(ctx, objname.JobPrefix("job"), func(o backends.ObjectInfo) error {
		if strings.HasSuffix(o.Name, objname.LogSuffix) && !kept[o.Name] {
			left = append(left, o.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("%d log objects that checkpoint %d does not name are left: %q", len(left), last.CheckpointID, left)
	}
}
