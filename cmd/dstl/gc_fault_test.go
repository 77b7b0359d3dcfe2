package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// timedBackend is a backend whose List reports the modification times of
// mod for the names in it (a zero time for a storage that reports none),
// and whose Close leaves the backend open for the test to inspect.
type timedBackend struct {
	*dstltest.Backend
	mod map[string]time.Time
}

func (b timedBackend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	return b.Backend.List(ctx, prefix, func(oi backends.ObjectInfo) error {
		if t, ok := b.mod[oi.Name]; ok {
			oi.ModTime = t
		}
		return fn(oi)
	})
}

func (timedBackend) Close() error { return nil }

// gcRun is one gc run over an in-memory backend.
type gcRun struct {
	code        int
	out, errOut string
	rep         gcReport
}

// runGCOver runs "dstl gc --json args..." over b, with the clock now of
// the machine running gc.
func runGCOver(t *testing.T, ctx context.Context, b backends.Backend, now func() time.Time, args ...string) gcRun {
	t.Helper()
	var out, errOut bytes.Buffer
	o := gcOptions{
		open: func(context.Context, string, string) (backends.Backend, string, error) { return b, dstltest.ID, nil },
		now:  now,
	}
	code := runGCWith(ctx, append([]string{"--json", "--base-path", "mem://test", "--job-id", "job"}, args...), &out, &errOut, o)
	r := gcRun{code: code, out: out.String(), errOut: errOut.String()}
	if out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), &r.rep); err != nil {
			t.Fatalf("report: %v\n%s", err, out.String())
		}
	}
	return r
}

// memObjects puts n dstl objects under "job/" named and modified at "at",
// and returns their sorted names.
func memObjects(t *testing.T, b timedBackend, n int, at time.Time) []string {
	t.Helper()
	var names []string
	for range n {
		name := v7Name(t, "job/", at)
		if err := b.Put(t.Context(), name, strings.NewReader("some bytes"), 10); err != nil {
			t.Fatal(err)
		}
		b.mod[name] = at
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// countRows counts the object rows of a text report whose status is
// status.
func countRows(report, status string) int {
	n := 0
	for line := range strings.Lines(report) {
		if rest, ok := strings.CutPrefix(line, status+"  "); ok && strings.Contains(rest, ".dstl") {
			n++
		}
	}
	return n
}

func statuses(rep gcReport) map[string]bool {
	m := map[string]bool{}
	for _, o := range rep.Objects {
		m[o.Name] = o.Deleted
	}
	return m
}

// TestGCDeleteFaults: deletes that fail, all or some, are reported as
// FAILED rows beside the deleted ones, in a report printed all the same,
// and gc exits 3.
func TestGCDeleteFaults(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		fault     func(victim string) dstltest.FaultFunc
		wantFails int
	}{
		{"one delete fails", func(victim string) dstltest.FaultFunc {
			return func(op dstltest.Op, name string) dstltest.Fault {
				if op == dstltest.OpDelete && name == victim {
					return dstltest.Fault{Err: boom}
				}
				return dstltest.Fault{}
			}
		}, 1},
		{"every delete fails", func(string) dstltest.FaultFunc { return dstltest.FailAll(dstltest.OpDelete, boom) }, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := timedBackend{dstltest.NewBackend(), map[string]time.Time{}}
			names := memObjects(t, b, 5, time.Now().Add(-3*time.Hour))
			b.SetFault(tc.fault(names[2]))
			r := runGCOver(t, t.Context(), b, time.Now, "--grace", "1h", "--keep-none")
			if r.code != exitRuntime || !strings.Contains(r.errOut, "deletes failed") {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.out, r.errOut)
			}
			if len(r.rep.Failed) != tc.wantFails || r.rep.Deleted.Objects != 5-tc.wantFails || !r.rep.DeletesRun {
				t.Errorf("report %+v", r.rep)
			}
			left := 0
			for _, oi := range b.Objects() {
				if !strings.Contains(oi.Name, objname.ClockProbePrefix) { // a probe left behind when every delete fails
					left++
				}
			}
			if left != tc.wantFails {
				t.Errorf("%d objects left, want %d", left, tc.wantFails)
			}
			// The text report labels each row by what happened to it.
			var text bytes.Buffer
			r.rep.print(&text)
			if got := countRows(text.String(), "FAILED"); got != tc.wantFails {
				t.Errorf("%d FAILED rows, want %d:\n%s", got, tc.wantFails, text.String())
			}
			if got := countRows(text.String(), "deleted"); got != 5-tc.wantFails {
				t.Errorf("%d deleted rows, want %d:\n%s", got, 5-tc.wantFails, text.String())
			}
			for name, deleted := range statuses(r.rep) {
				_, stored := b.ObjectBytes(name)
				if deleted == stored {
					t.Errorf("%s: reported deleted %v, stored %v", name, deleted, stored)
				}
			}
		})
	}
}

// TestGCInterrupted: a run interrupted while deleting reports what it
// deleted, what failed and what it did not get to, and exits 3.
func TestGCInterrupted(t *testing.T) {
	b := timedBackend{dstltest.NewBackend(), map[string]time.Time{}}
	names := memObjects(t, b, 6, time.Now().Add(-3*time.Hour))
	var once sync.Once
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op == dstltest.OpDelete && name == names[1] {
			stall := false
			once.Do(func() { stall = true })
			return dstltest.Fault{Stall: stall}
		}
		return dstltest.Fault{}
	})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		if b.WaitStalled(t.Context(), 1) == nil {
			cancel()
		}
	}()
	r := runGCOver(t, ctx, b, time.Now, "--grace", "1h", "--keep-none", "--concurrency", "1")
	if r.code != exitRuntime || !strings.Contains(r.errOut, "interrupted") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.out, r.errOut)
	}
	st := statuses(r.rep)
	if !st[names[0]] || st[names[1]] || r.rep.Deleted.Objects != 1 || len(r.rep.Failed) != 1 || r.rep.Failed[0].Name != names[1] {
		t.Fatalf("report %+v", r.rep)
	}
	if b.Len() != 5 {
		t.Errorf("%d objects left, want 5", b.Len())
	}
	var text bytes.Buffer
	r.rep.print(&text)
	if got := countRows(text.String(), "not deleted"); got != 4 || !strings.Contains(text.String(), "not deleted (interrupted)  4") {
		t.Errorf("%d rows not deleted, want 4:\n%s", got, text.String())
	}
}

// TestGCReportOfNothing: gc's report of a run that deletes nothing has
// its lists as JSON arrays, the storage's clock, and no clock probe left.
// (How ages count from the clocks is package collect's TestRunClock.)
func TestGCReportOfNothing(t *testing.T) {
	b := timedBackend{dstltest.NewBackend(), map[string]time.Time{}}
	memObjects(t, b, 1, time.Now().Add(-10*time.Minute))
	r := runGCOver(t, t.Context(), b, time.Now, "--grace", "1h", "--keep-none")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.out, r.errOut)
	}
	if r.rep.Objects == nil || !strings.Contains(r.out, `"objects": [`) || r.rep.Uploads == nil || !strings.Contains(r.out, `"incomplete_uploads": [`) {
		t.Errorf("lists not JSON arrays:\n%s", r.out)
	}
	if r.rep.Young.Objects != 1 || b.Len() != 1 || r.rep.StoreNow == nil || r.rep.Now.After(*r.rep.StoreNow) || r.rep.Now.After(r.rep.LocalNow) {
		t.Errorf("report %+v, %d objects left", r.rep, b.Len())
	}
	for _, oi := range b.Objects() {
		if strings.Contains(oi.Name, objname.ClockProbePrefix) {
			t.Errorf("the clock probe %s was left behind", oi.Name)
		}
	}
}

// TestGCClockProbeFails: without the storage's clock gc deletes nothing and
// exits 3; a dry run goes on with the local clock and says so.
func TestGCClockProbeFails(t *testing.T) {
	for _, dryRun := range []bool{false, true} {
		b := timedBackend{dstltest.NewBackend(), map[string]time.Time{}}
		memObjects(t, b, 2, time.Now().Add(-3*time.Hour))
		b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
			if op == dstltest.OpPut && strings.Contains(name, objname.ClockProbePrefix) {
				return dstltest.Fault{Err: backends.ErrPermission}
			}
			return dstltest.Fault{}
		})
		args := []string{"--grace", "1h", "--keep-none"}
		wantCode, wantMsg := exitRuntime, "nothing deleted"
		if dryRun {
			args, wantCode, wantMsg = append(args, "--dry-run"), exitOK, "this machine's clock"
		}
		r := runGCOver(t, t.Context(), b, time.Now, args...)
		if r.code != wantCode || !strings.Contains(r.errOut, wantMsg) || b.Len() != 2 {
			t.Errorf("dry run %v: exit %d, %d objects left\n%s\n%s", dryRun, r.code, b.Len(), r.out, r.errOut)
		}
		if dryRun && (r.rep.StoreNow != nil || r.rep.Deletable.Objects != 2) {
			t.Errorf("dry run report %+v", r.rep)
		}
	}
}
