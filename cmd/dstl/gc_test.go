package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl/objname"
)

// v7Name returns a dstl object name under prefix whose UUIDv7 holds t.
func v7Name(t *testing.T, prefix string, at time.Time) string {
	t.Helper()
	u, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(at.UnixMilli()))
	copy(u[:6], ms[2:])
	name, err := objname.Format(prefix, objname.Name{Kind: objname.Log, ID: u})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// putObject writes a file for a local backend's object, modified at mod.
func putObject(t *testing.T, dir, name string, mod time.Time) {
	t.Helper()
	p := objectPath(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("some bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mod, mod); err != nil {
		t.Fatal(err)
	}
}

func exists(dir, name string) bool {
	_, err := os.Stat(objectPath(dir, name))
	return err == nil
}

func TestGC(t *testing.T) {
	now := time.Now()
	old, young := now.Add(-3*time.Hour), now.Add(-10*time.Minute)
	for _, dryRun := range []bool{false, true} {
		t.Run(map[bool]string{false: "delete", true: "dry run"}[dryRun], func(t *testing.T) {
			dir := t.TempDir()
			// Real objects, referenced by the kept handles, made old.
			hs := persistHandles(t, dir, "job", 3)
			for _, h := range hs {
				for _, e := range h.Entries {
					os.Chtimes(objectPath(dir, e.Object), old, old)
				}
			}
			kept := []string{hs[0].Entries[0].Object, hs[1].Entries[0].Object}
			unkeptReal := hs[2].Entries[0].Object // its handle is not kept, and it was named now
			objects := map[string]bool{           // name -> deleted
				v7Name(t, "job/", old):                true,  // old by both clocks, unreferenced
				v7Name(t, "job/", young):              false, // young by name
				v7Name(t, "job/", now.Add(time.Hour)): false, // a name from the future
				"job/snapshots/op-1.snap":             false, // not a dstl object
				"job/not-a-uuid.dstl":                 false,
				v7Name(t, "other-job/", old):          false, // another job's: not listed
				unkeptReal:                            false, // old by modification time, young by name
			}
			youngByTime := v7Name(t, "job/", old)
			objects[youngByTime] = false
			for name := range objects {
				if name == unkeptReal {
					continue
				}
				mod := old
				if name == youngByTime {
					mod = young
				}
				putObject(t, dir, name, mod)
			}
			for _, k := range kept {
				objects[k] = false
			}
			keepJSON := writeHandleFile(t, filepath.Join(t.TempDir(), "h0.json"), false, hs[0])
			keepBin := writeHandleFile(t, filepath.Join(t.TempDir(), "h1.bin"), true, hs[1])
			args := []string{"gc", "--base-path", dir, "--job-id", "job", "--grace", "1h", "--json", "--keep", keepJSON, keepBin}
			if dryRun {
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
			for name, del := range objects {
				if del {
					want = append(want, name)
				}
				if gone := !exists(dir, name); gone != (del && !dryRun) {
					t.Errorf("%s: deleted %v, want %v", name, gone, del && !dryRun)
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
			if rep.Referenced.Objects != 2 || rep.KeptHandles != 2 || rep.Deletable.Objects != len(want) || rep.Foreign.Objects != 2 || rep.Young.Objects != 4 {
				t.Errorf("counts %+v", rep)
			}
			if wantDeleted := len(want); dryRun && rep.Deleted.Objects != 0 || !dryRun && rep.Deleted.Objects != wantDeleted {
				t.Errorf("deleted %d objects, dry run %v", rep.Deleted.Objects, dryRun)
			}
			if rep.Deletable.Bytes != int64(len(want)*len("some bytes")) {
				t.Errorf("deletable bytes %d", rep.Deletable.Bytes)
			}
		})
	}
}

// TestGCNeverDeletesReferenced: with no grace at all, everything a kept
// handle references stays, and reads back.
func TestGCNeverDeletesReferenced(t *testing.T) {
	dir := t.TempDir()
	hs := persistHandles(t, dir, "job", 4)
	keep := writeHandleFile(t, filepath.Join(t.TempDir(), "keep.json"), false, hs[1], hs[3])
	// Every object is older than a grace of 0 by both clocks: by the time
	// in its name after a sleep, and by the store's clock (a file's
	// modification time, which the kernel takes from a coarse clock that
	// may not move within a few milliseconds) once set back.
	time.Sleep(5 * time.Millisecond)
	old := time.Now().Add(-time.Minute)
	for _, h := range hs {
		if err := os.Chtimes(objectPath(dir, h.Entries[0].Object), old, old); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI(t, "gc", "--base-path", "file://"+dir, "--job-id", "job", "--grace", "0", "--keep", keep)
	if code != exitOK || !strings.Contains(out, "deleted") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for i, h := range hs {
		if got, want := exists(dir, h.Entries[0].Object), i == 1 || i == 3; got != want {
			t.Errorf("object of handle %d: exists %v, want %v", i, got, want)
		}
	}
	if code, out, errOut := runCLI(t, "inspect", "--handle", keep, dir); code != exitOK {
		t.Errorf("kept handles do not check out: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestGCRefusesWhenReferencedMissing(t *testing.T) {
	dir := t.TempDir()
	hs := persistHandles(t, dir, "job", 2)
	old := time.Now().Add(-48 * time.Hour)
	stale := v7Name(t, "job/", old)
	putObject(t, dir, stale, old)
	keep := writeHandleFile(t, filepath.Join(t.TempDir(), "keep.json"), false, hs...)
	if err := os.Remove(objectPath(dir, hs[0].Entries[0].Object)); err != nil {
		t.Fatal(err)
	}
	// Another job's directory, empty (of a job whose directory does not
	// exist, gc says so: TestReadOnlyMissingPath).
	if err := os.Mkdir(filepath.Join(dir, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, jobID string
	}{
		{"one object missing", "job"},
		{"wrong job id: none there", "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "gc", "--base-path", dir, "--job-id", tc.jobID, "--grace", "1h", "--keep", keep)
			if code != exitFailed || !strings.Contains(errOut, "nothing deleted") || !strings.Contains(out, "missing: ") {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			if !exists(dir, stale) {
				t.Fatal("an object was deleted")
			}
			// The rows say that nothing was deleted.
			if tc.jobID == "job" && (countRows(out, "would delete (not run)") != 1 || countRows(out, "deleted") != 0) {
				t.Errorf("rows misreport:\n%s", out)
			}
			code, out, errOut = runCLI(t, "gc", "--json", "--base-path", dir, "--job-id", tc.jobID, "--grace", "1h", "--keep", keep)
			var rep gcReport
			if err := json.Unmarshal([]byte(out), &rep); code != exitFailed || err != nil || rep.DeletesRun || rep.Objects == nil {
				t.Fatalf("exit %d, %v\n%s\n%s", code, err, out, errOut)
			}
			for _, o := range rep.Objects {
				if o.Deleted {
					t.Errorf("%s reported deleted", o.Name)
				}
			}
		})
	}
}

func TestGCUsage(t *testing.T) {
	dir := t.TempDir()
	keep := writeHandleFile(t, filepath.Join(dir, "keep.json"), false, persistHandles(t, dir, "job", 1)...)
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("nonsense"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"gc", "--grace", "1h", "--keep", keep}, exitUsage, "--base-path is required"},
		{[]string{"gc", "--base-path", dir, "--keep", keep}, exitUsage, "--grace is required"},
		{[]string{"gc", "--base-path", dir, "--grace", "1h"}, exitUsage, "no handle file to keep"},
		{[]string{"gc", "--base-path", dir, "--grace", "-1h", "--keep", keep}, exitUsage, "want a duration of 0 or more"},
		{[]string{"gc", "--base-path", dir, "--grace", "soon", "--keep", keep}, exitUsage, "want a duration"},
		{[]string{"gc", "--base-path", dir, "--grace", "1h", "--keep-none", keep}, exitUsage, "contradict"},
		// A handle file that does not decode is a problem found (1), as
		// for inspect --handle; one that cannot be read, a failure to run (3).
		{[]string{"gc", "--base-path", dir, "--grace", "1h", "--keep", bad}, exitFailed, "neither a binary handle"},
		{[]string{"gc", "--base-path", dir, "--grace", "1h", "--keep", filepath.Join(dir, "none")}, exitRuntime, "no such file"},
		{[]string{"gc", "--base-path", dir, "--grace", "1h", "--keep", dir}, exitRuntime, "is a directory"},
		{[]string{"gc", "--base-path", dir, "--job-id", "../x", "--grace", "1h", "--keep-none"}, exitUsage, "--job-id"},
		{[]string{"gc", "--base-path", "nope://x", "--grace", "1h", "--keep-none"}, exitUsage, "no backend serves"},
		{[]string{"gc", "--base-path", dir, "--grace", "1h", "--keep-none", "--dry-run"}, exitOK, ""},
		{[]string{"gc", "-h"}, exitOK, "--dry-run"},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("dstl %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
}

// TestGCByCatalog: without handle files, gc keeps what the job's
// checkpoint catalog keeps, deletes the other old log and snapshot
// objects, and drops the catalog's old objects.
func TestGCByCatalog(t *testing.T) {
	dir := t.TempDir()
	b, err := local.Open(t.Context(), local.Config{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	old := time.Now().Add(-48 * time.Hour)
	stale, kept := v7Name(t, "job/", old), v7Name(t, "job/", old)
	putObject(t, dir, stale, old)
	putObject(t, dir, kept, old)
	m, err := catalog.Join(t.Context(), b, catalog.Config{JobID: "job", Instances: 1, Grace: time.Hour, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Commit(t.Context(), 1, []catalog.InstanceState{{State: []byte("s"), Objects: []string{stale}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Commit(t.Context(), 2, []catalog.InstanceState{{State: []byte("s"), Objects: []string{kept}}}); err != nil {
		t.Fatal(err)
	}
	// Checkpoint 1 is no longer retained: its commit goes, whatever its
	// age, and the log object only it named, old, too.
	part1, part2 := objname.CatalogV2CommitName("job/", 1, 1, 0), objname.CatalogV2CommitName("job/", 1, 2, 0)
	for _, name := range []string{part1, part2} {
		if err := os.Chtimes(objectPath(dir, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI(t, "gc", "--base-path", dir, "--job-id", "job", "--grace", "1h")
	if code != exitOK || !strings.Contains(out, "by the checkpoint catalog: generation 1, retained checkpoints [2]") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for name, want := range map[string]bool{stale: false, kept: true, part1: false, part2: true} {
		if exists(dir, name) != want {
			t.Errorf("%s exists %v, want %v", name, !want, want)
		}
	}
}

// TestGCByCatalogDropsWithNothingToDelete: the catalog's old objects are
// dropped also by a run that finds no log or snapshot object to delete.
func TestGCByCatalogDropsWithNothingToDelete(t *testing.T) {
	dir := t.TempDir()
	b, err := local.Open(t.Context(), local.Config{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := catalog.Join(t.Context(), b, catalog.Config{JobID: "job", Instances: 1, Grace: time.Hour, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	for n := int64(1); n <= 2; n++ {
		if _, err := m.Commit(t.Context(), n, []catalog.InstanceState{{State: []byte("s")}}); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-48 * time.Hour)
	part1, part2 := objname.CatalogV2CommitName("job/", 1, 1, 0), objname.CatalogV2CommitName("job/", 1, 2, 0)
	for _, p := range []string{part1, part2} {
		if err := os.Chtimes(objectPath(dir, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI(t, "gc", "--base-path", dir, "--job-id", "job", "--grace", "1h")
	if code != exitOK || exists(dir, part1) || !exists(dir, part2) {
		t.Fatalf("exit %d, part 1 left %v, part 2 left %v\n%s\n%s", code, exists(dir, part1), exists(dir, part2), out, errOut)
	}
}
