package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dstlgo/dstl/examples/internal/exampletest"
)

// TestMain lets the test binary play the service: verify starts it as a
// child process with WORDCOUNT_CHILD set; with WORDCOUNT_VERIFY set, it
// plays verify, for a test that kills verify.
func TestMain(m *testing.M) {
	if os.Getenv("WORDCOUNT_CHILD") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	if os.Getenv("WORDCOUNT_VERIFY") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := verifyMain(ctx, os.Args[1:], testCommand, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func testCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	c := exec.CommandContext(ctx, os.Args[0], args...)
	c.Env = append(os.Environ(), "WORDCOUNT_CHILD=1")
	return c, nil
}

// TestVerify runs verify: processes killed (SIGKILL) and stopped
// (SIGSTOP) at random moments (seeded; the seed is logged), restarted,
// rescaled from 3 instances in 3 processes to 2 in 2 and to 4 in 2, then
// checked: the final counts against an independent count, the latest
// complete checkpoint restored as one instance, and the store's content
// against the deletion rule. On MinIO under `make test`, else on a local
// directory; there, with stops that may exceed a short grace (a stalled
// committer's objects are held by the checkpoint they were made for); with
// local recovery too (each process a directory of its own), where restores
// must read local copies; and with the state on disk (-disk), where
// restores must load snapshot files and the retained checkpoint must name
// some, kept in the store. -short runs shorter phases on less input, the
// remote case only.
func TestVerify(t *testing.T) {
	localCopies := regexp.MustCompile(`snapshot\(s\) \(([0-9]+) local\), [0-9]+ change sets \(([0-9]+) local\)`)
	materializations := regexp.MustCompile(`materialisations: ([0-9]+)`)
	diskRestores := regexp.MustCompile(`state on disk: ([0-9]+) restores loaded snapshot files`)
	sharedFiles := regexp.MustCompile(`name ([0-9]+) snapshot files, ([0-9]+) of them written by a process of an earlier layout`)
	keptFiles := regexp.MustCompile(`, ([0-9]+) snapshot file\), `)
	for _, tc := range []struct {
		name  string
		local bool
		disk  bool
		args  []string
	}{
		{"remote", false, false, []string{"-records", "500", "-phase", "5s", "-grace", "1200ms", "-max-stop", "2s"}},
		{"local-recovery", true, false, []string{"-records", "300", "-phase", "3s"}},
		{"disk", false, true, []string{"-records", "500", "-phase", "5s", "-disk"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && (tc.local || tc.disk) {
				t.Skip("-short: the remote case only")
			}
			seed := uint64(time.Now().UnixNano())
			t.Logf("fault seed %d", seed)
			args := append([]string{"-base-path", exampletest.BasePath(t, "wordcount-test"), "-fault-seed", fmt.Sprint(seed), "-v",
				"-rate", "300", "-fault-every", "700ms", "-faults", "10", "-timeout", "110s"}, tc.args...)
			if tc.local {
				args = append(args, "-local-recovery-dir", t.TempDir())
			}
			if testing.Short() {
				args = append(args, "-records", "250", "-phase", "3s", "-fault-every", "500ms")
			}
			var out, errs bytes.Buffer
			if code := verifyMain(context.Background(), args, testCommand, &out, &errs); code != 0 {
				t.Fatalf("verify exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
			}
			log := out.String()
			for _, want := range []string{"OK:", restoredMessage, "rescale 3 → 2", "rescale 2 → 4/2", "0 left behind, 0 missing"} {
				if !strings.Contains(log, want) {
					t.Errorf("verify's output lacks %q:\n%s", want, log)
				}
			}
			if tc.local {
				read := false
				for _, m := range localCopies.FindAllStringSubmatch(log, -1) {
					read = read || m[1] != "0" || m[2] != "0"
				}
				if !read {
					t.Errorf("no restore read a local copy:\n%s", log)
				}
			}
			if m := materializations.FindStringSubmatch(log); m == nil || m[1] == "0" {
				t.Errorf("no materialisation (%q):\n%s", m, log)
			}
			if tc.disk {
				if m := diskRestores.FindStringSubmatch(log); m == nil || m[1] == "0" {
					t.Errorf("no restore loaded snapshot files (%q):\n%s", m, log)
				}
				// How many of them the last rescale shared depends on how
				// far the later snapshots' segments went: not checked.
				if m := sharedFiles.FindStringSubmatch(log); m == nil || m[1] == "0" {
					t.Errorf("the retained checkpoint names no snapshot files (%q):\n%s", m, log)
				}
				if m := keptFiles.FindStringSubmatch(log); m == nil || m[1] == "0" {
					t.Errorf("the job's prefix keeps no snapshot files for the retained checkpoint (%q):\n%s", m, log)
				}
			}
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(line, "faults:") || strings.Contains(line, "materialisations:") || strings.Contains(line, "snapshot files, ") ||
					strings.Contains(line, "deletion rule:") || strings.Contains(line, "OK:") {
					t.Log(line)
				}
			}
		})
	}
}

// TestVerifyFailsWithoutRestore: verify fails when a process started
// after a checkpoint completed restores nothing (here the three processes
// of the first layout run without a fault, and the processes of the
// second layout join another job, which has no checkpoint).
func TestVerifyFailsWithoutRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for seconds")
	}
	var calls atomic.Int32
	forgetful := func(ctx context.Context, args ...string) (*exec.Cmd, error) {
		if calls.Add(1) > 3 {
			args = append(slices.Clone(args), "-job-id", "another-job")
		}
		return testCommand(ctx, args...)
	}
	args := []string{"-base-path", t.TempDir(), "-records", "300", "-rate", "300", "-scales", "3,2", "-phase", "4s",
		"-fault-every", "1h", "-faults", "0", "-timeout", "60s"}
	var out, errs bytes.Buffer
	code := verifyMain(context.Background(), args, forgetful, &out, &errs)
	if code != 1 || !strings.Contains(errs.String(), "restored no checkpoint") {
		t.Fatalf("verify exited %d, want 1 for a start without restore\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
	}
}

// TestOneInstance: a job of one instance counts its input, writes its
// counts and exits; run again, it restores its last checkpoint, which
// holds the whole input, and writes the same counts without reading a
// record.
func TestOneInstance(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	output := filepath.Join(dir, "counts.json")
	want := expected(3, 200)
	for i, event := range []string{firstStart, restoredMessage} {
		c, _ := testCommand(ctx, "-base-path", filepath.Join(dir, "store"), "-job-id", "job", "-instances", "1", "-index", "0",
			"-records", "200", "-seed", "3", "-rate", "20000", "-output", output)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("run %d: %v\n%s", i+1, err, out)
		}
		if !strings.Contains(string(out), event) || !strings.Contains(string(out), doneEvent) {
			t.Fatalf("run %d did not say %q and %q:\n%s", i+1, event, doneEvent, out)
		}
		b, err := os.ReadFile(output)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]int64
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if bad := compare(want, got); len(bad) > 0 {
			t.Fatalf("run %d: %d words differ: %q", i+1, len(bad), bad)
		}
		if i == 1 && !strings.Contains(string(out), fmt.Sprintf("%d records read", 200*nonEmptyPartitions())) {
			t.Errorf("the second run did not restore the whole input:\n%s", out)
		}
	}
}

// TestInputIsPinned: the input and its counts for a seed are fixed (the
// service and verify compute them in different processes, and a
// checkpoint's offsets must mean the same records in every version):
// known values of seed 7. Each partition's words are of its key group.
func TestInputIsPinned(t *testing.T) {
	for _, tc := range []struct {
		kg   int
		i    int64
		want []string
	}{
		{0, 0, []string{"his", "his"}},
		{5, 999, []string{"can", "been", "can", "can", "been", "been"}},
		{30, 3, []string{"it", "it"}},
	} {
		if got := record(7, tc.kg, tc.i); !slices.Equal(got, tc.want) {
			t.Errorf("record %d of partition %d = %q, want %q", tc.i, tc.kg, got, tc.want)
		}
	}
	if n := nonEmptyPartitions(); n != 30 || partitionLen(18, 10) != 0 || partitionLen(31, 10) != 0 {
		t.Errorf("%d partitions with records; 18 and 31 should be empty", n)
	}
	c := expected(7, 100)
	var total int64
	for _, n := range c {
		total += n
	}
	if len(c) != 105 || total != 10468 || c["the"] != 170 || c["of"] != 144 || c["and"] != 210 {
		t.Errorf("seed 7, 100 records a partition: %d distinct words, %d in all, the %d, of %d, and %d; want 105, 10468, 170, 144, 210",
			len(c), total, c["the"], c["of"], c["and"])
	}
}
