package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/statestore"
)

// snapName returns a snapshot object's name of operator op under the
// job's prefix, whose UUIDv7 holds at.
func snapName(t *testing.T, job, op string, at time.Time) string {
	t.Helper()
	n := objname.Parse("", v7Name(t, "", at))
	n.Kind, n.Operator = objname.Snapshot, op
	name, err := objname.Format(objname.JobPrefix(job), n)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// writeCheckpointHandle writes h in its binary encoding to path.
func writeCheckpointHandle(t *testing.T, path string, h statestore.CheckpointHandle) string {
	t.Helper()
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGCSnapshots: snapshot objects (JOB/statestore/OP/UUIDv7.snap) that a
// crash left are collected by the rule of log objects, under the operators
// of the kept checkpoint handles (or all, with --keep-none): only when no
// kept handle references them and both clocks call them older than the
// grace. Of an operator no kept checkpoint handle names (kept only log
// handles: of every operator), gc cannot know which snapshots the job's
// checkpoints name, and deletes none.
func TestGCSnapshots(t *testing.T) {
	now := time.Now()
	old, young := now.Add(-3*time.Hour), now.Add(-10*time.Minute)
	for _, tc := range []struct {
		name   string
		keep   string // "checkpoint", "log" or "none"
		dryRun bool
	}{
		{"checkpoint handles kept", "checkpoint", false},
		{"checkpoint handles kept, dry run", "checkpoint", true},
		{"log handles kept only", "log", false},
		{"keep none", "none", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			hs := persistHandles(t, dir, "job", 2)
			for _, h := range hs {
				os.Chtimes(objectPath(dir, h.Entries[0].Object), old, old)
			}
			// The snapshots of two checkpoints of op-0, the second one
			// restored by op-1 after a rescale.
			kept0, kept1 := snapName(t, "job", "op-0", old), snapName(t, "job", "op-1", old)
			type obj struct {
				mod, named    time.Time
				collectable   bool // deleted when its operator's snapshots are collected
				referenceable bool // kept handles reference it
				noHandle      bool // of an operator no kept checkpoint handle names
			}
			objects := map[string]obj{
				kept0:                             {old, old, false, true, false},
				kept1:                             {old, old, false, true, false},
				snapName(t, "job", "op-0", old):   {old, old, true, false, false},    // a crash's leftover
				snapName(t, "job", "op-2", old):   {old, old, true, false, true},     // of an operator no handle names
				snapName(t, "job", "op-0", young): {old, young, false, false, false}, // young by name
			}
			youngByTime := snapName(t, "job", "op-1", old)
			objects[youngByTime] = obj{young, old, false, false, false}
			objects["job/statestore/op-0/not-a-uuid.snap"] = obj{old, old, false, false, false}
			objects[v7Name(t, "job/statestore/op-0/", old)] = obj{old, old, false, false, false} // a log object's name beside snapshots: not one of the job's
			for name, o := range objects {
				putObject(t, dir, name, o.mod)
			}
			cp := func(id int64, op string, snap string, log dstl.Handle) statestore.CheckpointHandle {
				return statestore.CheckpointHandle{CheckpointID: id, Operator: op, KeyGroups: log.KeyGroups, MaxParallelism: 128,
					Snapshots: []statestore.SnapshotRef{{Object: snap, Size: int64(len("some bytes"))}},
					Logs:      []statestore.LogRef{{Remote: log}}}
			}
			kdir := t.TempDir()
			args := []string{"gc", "--json", "--base-path", dir, "--job-id", "job", "--grace", "1h"}
			switch tc.keep {
			case "checkpoint":
				args = append(args, "--keep", writeCheckpointHandle(t, filepath.Join(kdir, "cp-0"), cp(7, "op-0", kept0, hs[0])),
					writeCheckpointHandle(t, filepath.Join(kdir, "cp-1"), cp(7, "op-1", kept1, hs[1])))
			case "log":
				args = append(args, "--keep", writeHandleFile(t, filepath.Join(kdir, "logs.json"), false, hs...))
			case "none":
				args = append(args, "--keep-none")
			}
			if tc.dryRun {
				args = append(args, "--dry-run")
			}
			code, out, errOut := runCLI(t, args...)
			if code != exitOK {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			var rep gcReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			var want []string
			for name, o := range objects {
				deletable := tc.keep == "none" && (o.collectable || o.referenceable) || tc.keep == "checkpoint" && o.collectable && !o.noHandle
				if deletable {
					want = append(want, name)
				}
				if gone := !exists(dir, name); gone != (deletable && !tc.dryRun) {
					t.Errorf("%s: deleted %v, want %v", name, gone, deletable && !tc.dryRun)
				}
			}
			// The log objects, named now, are young by name.
			for _, h := range hs {
				if !exists(dir, h.Entries[0].Object) {
					t.Errorf("log object %s deleted", h.Entries[0].Object)
				}
			}
			var got []string
			for _, o := range rep.Objects {
				got = append(got, o.Name)
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("report lists %q, want %q", got, want)
			}
			// Not collected: with log handles, the 6 snapshots no handle
			// references; with checkpoint handles, op-2's.
			if want := map[string]int{"log": 6, "checkpoint": 1}[tc.keep]; rep.SnapshotsKept.Objects != want {
				t.Errorf("snapshots not collected: %+v, want %d", rep.SnapshotsKept, want)
			}
			var text strings.Builder
			rep.print(&text)
			if got := strings.Contains(text.String(), "snapshots, no checkpoint handle kept for the operator (kept)"); got != (tc.keep == "log" || tc.keep == "checkpoint") {
				t.Errorf("text report names the snapshots not collected: %v\n%s", got, text.String())
			}
			if tc.keep == "checkpoint" && (rep.Referenced.Objects != 4 || rep.KeptHandles != 2) {
				t.Errorf("referenced %+v, kept handles %d; want 4 objects of 2 handles", rep.Referenced, rep.KeptHandles)
			}
		})
	}
}

// TestGCSnapshotMissing: a snapshot that a kept checkpoint handle names and
// that is not there stops gc before it deletes anything.
func TestGCSnapshotMissing(t *testing.T) {
	dir := t.TempDir()
	hs := persistHandles(t, dir, "job", 1)
	old := time.Now().Add(-3 * time.Hour)
	stale := snapName(t, "job", "op-0", old)
	putObject(t, dir, stale, old)
	h := statestore.CheckpointHandle{CheckpointID: 3, Operator: "op-0", KeyGroups: hs[0].KeyGroups, MaxParallelism: 128,
		Snapshots: []statestore.SnapshotRef{{Object: snapName(t, "job", "op-0", old), Size: 10}},
		Logs:      []statestore.LogRef{{Remote: hs[0]}}}
	keep := writeCheckpointHandle(t, filepath.Join(t.TempDir(), "cp"), h)
	code, out, errOut := runCLI(t, "gc", "--base-path", dir, "--job-id", "job", "--grace", "1h", "--keep", keep)
	if code != exitFailed || !strings.Contains(errOut, "nothing deleted") || !strings.Contains(out, "missing: "+h.Snapshots[0].Object) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !exists(dir, stale) {
		t.Error("a snapshot was deleted")
	}
	// A checkpoint handle that does not decode is a problem found (1).
	b, _ := h.MarshalBinary()
	b[len(b)-1] ^= 1
	os.WriteFile(keep, b, 0o644)
	if code, _, errOut := runCLI(t, "gc", "--base-path", dir, "--job-id", "job", "--grace", "1h", "--keep", keep); code != exitFailed || !strings.Contains(errOut, keep) {
		t.Errorf("damaged checkpoint handle: exit %d\n%s", code, errOut)
	}
}
