package conformance_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/conformance"
	"github.com/dstlgo/dstl/dstltest"
)

// childEnv names the environment variable that turns
// TestConditionStoreChild on in a child process; its value is the mode
// of the store, a key of childModes.
const childEnv = "DSTL_CONFORMANCE_CHILD"

// childModes are the stores' modes by the value of childEnv.
var childModes = map[string]dstltest.Conditions{
	"honour":           dstltest.HonourConditions,
	"ignore-multipart": dstltest.IgnoreOnMultipart,
	"ignore":           dstltest.IgnoreConditions,
}

// childPartSize is the part size of the child's store: small, so that
// the multipart cases stay fast.
const childPartSize = 64 << 10

// TestConditionStoreChild runs the backend suite on a
// dstltest.ConditionStore in the mode childEnv names. It runs only in the
// child processes of TestSuiteCatchesIgnoredConditions, where it is meant
// to fail.
func TestConditionStoreChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip(childEnv + " is not set: this test runs in a child process of TestSuiteCatchesIgnoredConditions")
	}
	c, ok := childModes[mode]
	if !ok {
		t.Fatalf("%s=%q names no mode", childEnv, mode)
	}
	conformance.TestBackend(t, func(*testing.T) backends.Backend {
		return dstltest.NewConditionStore(c, childPartSize)
	}, conformance.WithPartSize(childPartSize))
}

// resultLine is a line of -test.v output that ends a test.
var resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(`)

// TestSuiteCatchesIgnoredConditions runs the backend suite in a child
// process on a store that honours create-only conditions, one that
// ignores them on multipart uploads only, and one that ignores them
// everywhere, and checks which cases fail: none, the multipart cases,
// and every case that puts an existing name or races Puts for one name.
func TestSuiteCatchesIgnoredConditions(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child process")
	}
	multipart := []string{"ConcurrentMultipart", "PutExistingMultipart"}
	for _, tc := range []struct {
		mode string
		fail []string
	}{
		{"honour", nil},
		{"ignore-multipart", multipart},
		{"ignore", []string{"Concurrent", "ConcurrentMultipart", "PutExisting", "PutExistingMultipart"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			results, out := runChild(t, tc.mode)
			var failed, passed []string
			for name, r := range results {
				if strings.Contains(name, "/") {
					continue // a subtest of a case
				}
				switch r {
				case "FAIL":
					failed = append(failed, name)
				case "PASS":
					passed = append(passed, name)
				}
			}
			slices.Sort(failed)
			if !slices.Equal(failed, tc.fail) {
				t.Errorf("failed cases %q, want %q; the child's output:\n%s", failed, tc.fail, out)
			}
			// A Put takes the multipart path only above the part size:
			// where only that path ignores the condition, a small Put
			// over a large object still fails as it should.
			if tc.mode == "ignore-multipart" {
				for name, want := range map[string]string{
					"PutExistingMultipart/large_over_small": "FAIL",
					"PutExistingMultipart/large_over_large": "FAIL",
					"PutExistingMultipart/small_over_large": "PASS",
				} {
					if got := results[name]; got != want {
						t.Errorf("%s: %q, want %s", name, got, want)
					}
				}
			}
			// Every case ran: none is missing from the output, which
			// would hide a failure.
			for _, name := range append([]string{"PutExisting", "Concurrent", "LargeObject"}, multipart...) {
				if _, ok := results[name]; !ok {
					t.Errorf("case %s did not run; the child's output:\n%s", name, out)
				}
			}
			t.Logf("mode %s: %d cases passed, %d failed (%q)", tc.mode, len(passed), len(failed), failed)
		})
	}
}

// runChild runs TestConditionStoreChild in a child process of the test
// binary, in mode, and returns the result ("PASS", "FAIL" or "SKIP") of
// each case of the suite and of each subtest of a case, by its name below
// TestConditionStoreChild ("PutExisting", "PutExistingMultipart/large_over_small"),
// with the child's output.
func runChild(t *testing.T, mode string) (map[string]string, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0],
		"-test.run=^TestConditionStoreChild$", "-test.v", "-test.count=1", "-test.timeout=90s")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the child did not end in time: %v; its output:\n%s", ctx.Err(), out)
	}
	if _, ok := errors.AsType[*exec.ExitError](err); err != nil && !ok {
		t.Fatalf("running the child: %v", err)
	}
	results := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := resultLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if name, ok := strings.CutPrefix(m[2], "TestConditionStoreChild/"); ok {
			results[name] = m[1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the child's output: %v", err)
	}
	if len(results) == 0 {
		t.Fatalf("the child reported no case; its output:\n%s", out)
	}
	// The exit status agrees with the cases: it fails when one failed.
	if failed := slices.Contains(slices.Collect(maps.Values(results)), "FAIL"); failed != (err != nil) {
		t.Fatalf("the child exited with %v, and a case failed: %v; its output:\n%s", err, failed, out)
	}
	return results, out
}
