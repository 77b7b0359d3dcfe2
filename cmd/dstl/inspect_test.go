package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstl/format"
)

func TestInspectObject(t *testing.T) {
	dir := t.TempDir()
	hs := persistHandles(t, dir, "job", 1)
	name := hs[0].Entries[0].Object
	path := objectPath(dir, name)

	code, out, errOut := runCLI(t, "inspect", "--json", path)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var rep objectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Index != "ok" || len(rep.ChangeSets) != 1 {
		t.Fatalf("report %+v", rep)
	}
	cs := rep.ChangeSets[0]
	if cs.LogID != hs[0].LogID.String() || cs.SQN == nil || *cs.SQN != uint64(hs[0].Entries[0].SequenceNumber) ||
		cs.Changes != 51 || cs.KeyGroups != "meta, 0-3" || cs.Checksum != "ok" || cs.Length != hs[0].Entries[0].Length {
		t.Fatalf("change set %+v, handle %+v", cs, hs[0])
	}

	if rep.Version != 1 || cs.Version != 1 {
		t.Fatalf("format version %d, change set's %d; want 1", rep.Version, cs.Version)
	}

	// The same object by URL, as a table for people.
	code, out, errOut = runCLI(t, "inspect", "file://"+path)
	if code != exitOK || !strings.Contains(out, "OK") || !strings.Contains(out, hs[0].LogID.String()) || !strings.Contains(out, "format version 1,") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestInspectObjectVersion2: an object of format version 2 is reported as
// such, its change sets as those of version 1 are.
func TestInspectObjectVersion2(t *testing.T) {
	dir := t.TempDir()
	hs := persistHandlesVersion(t, dir, "job", 1, format.Version2)
	path := objectPath(dir, hs[0].Entries[0].Object)
	code, out, errOut := runCLI(t, "inspect", "--json", path)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var rep objectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Version != 2 || len(rep.ChangeSets) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if cs := rep.ChangeSets[0]; cs.Version != 2 || cs.Changes != 51 || cs.KeyGroups != "meta, 0-3" {
		t.Fatalf("change set %+v", cs)
	}
	code, out, errOut = runCLI(t, "inspect", path)
	if code != exitOK || !strings.Contains(out, "format version 2,") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestInspectDamagedObject(t *testing.T) {
	dir := t.TempDir()
	hs := persistHandles(t, dir, "job", 1)
	good, err := os.ReadFile(objectPath(dir, hs[0].Entries[0].Object))
	if err != nil {
		t.Fatal(err)
	}
	frame := hs[0].Entries[0]
	crcAt := frame.Offset + frame.Length - format.FrameCRCSize
	indexAt := int64(len(good)) - format.TrailerSize - format.IndexEntrySize
	flip := func(off int64) func([]byte) []byte {
		return func(b []byte) []byte { b[off] ^= 0x40; return b }
	}
	for _, tc := range []struct {
		name     string
		damage   func([]byte) []byte
		kind     string // of the first problem
		offset   int64  // of the first problem; -1: any
		frameBad bool   // the change set itself is damaged
	}{
		{"payload bit flipped", flip(frame.Offset + frame.Length - 10), "checksum", crcAt, true},
		{"frame length damaged", flip(frame.Offset + 1), "corrupt", -1, true},
		{"index bit flipped", flip(indexAt + 30), "checksum", int64(len(good)) - 8, false},
		{"truncated in the index", func(b []byte) []byte { return b[:len(b)-7] }, "corrupt", -1, false},
		{"truncated in the frame", func(b []byte) []byte { return b[:frame.Offset+frame.Length/2] }, "corrupt", -1, false},
		{"bad magic", flip(1), "corrupt", 0, false},
		{"unknown version", func(b []byte) []byte { b[4] = 9; return b }, "version", 4, false},
		{"empty", func([]byte) []byte { return nil }, "corrupt", -1, false},
		{"not an object", func([]byte) []byte { return []byte(strings.Repeat("garbage ", 40)) }, "corrupt", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "damaged.dstl")
			if err := os.WriteFile(path, tc.damage(bytes.Clone(good)), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runCLI(t, "inspect", "--json", path)
			if code != exitFailed {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, exitFailed, out, errOut)
			}
			var rep objectReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if rep.OK || len(rep.Problems) == 0 {
				t.Fatalf("no problem reported: %+v", rep)
			}
			p := rep.Problems[0]
			if p.Kind != tc.kind || (tc.offset >= 0 && p.Offset != tc.offset) || !strings.Contains(p.Error, path) {
				t.Errorf("first problem %+v, want kind %s at offset %d, naming %s", p, tc.kind, tc.offset, path)
			}
			bad := false
			for _, cs := range rep.ChangeSets {
				bad = bad || !cs.OK
			}
			if bad != tc.frameBad {
				t.Errorf("a change set reported damaged: %v, want %v (%+v)", bad, tc.frameBad, rep.ChangeSets)
			}
			// The table for people says so too.
			code, out, _ = runCLI(t, "inspect", path)
			if code != exitFailed || !strings.Contains(out, "DAMAGED") || !strings.Contains(out, "problem ("+tc.kind+")") {
				t.Errorf("text report, exit %d:\n%s", code, out)
			}
		})
	}
}

func TestInspectHandle(t *testing.T) {
	dir := t.TempDir()
	hs := persistHandles(t, dir, "job", 2)
	both := writeHandleFile(t, filepath.Join(t.TempDir(), "handles.json"), false, hs...)
	bin := writeHandleFile(t, filepath.Join(t.TempDir(), "handle.bin"), true, hs[1])

	code, out, errOut := runCLI(t, "inspect", "--handle", both)
	if code != exitOK || !strings.Contains(out, hs[0].Entries[0].Object) || !strings.Contains(out, hs[1].LogID.String()) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "inspect", "--json", "--handle", bin, dir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var rep handlesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Handles) != 1 || rep.Handles[0].Entries[0].Check == nil || !rep.Handles[0].Entries[0].Check.OK {
		t.Fatalf("report %+v", rep)
	}

	// Damage one object, delete the other: both are reported.
	damaged := objectPath(dir, hs[0].Entries[0].Object)
	b, _ := os.ReadFile(damaged)
	b[hs[0].Entries[0].Offset+20] ^= 1
	if err := os.WriteFile(damaged, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(objectPath(dir, hs[1].Entries[0].Object)); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "inspect", "--json", "--handle", both, "file://"+dir)
	if code != exitFailed {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	rep = handlesReport{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 2 || rep.Problems[0].Kind != "checksum" || rep.Problems[1].Kind != "missing" {
		t.Fatalf("problems %+v", rep.Problems)
	}
}

func TestInspectUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version": 1}`), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"inspect"}, exitUsage, "want one OBJECT-URL or FILE"},
		{[]string{"inspect", "a", "b"}, exitUsage, "want one OBJECT-URL or FILE"},
		{[]string{"inspect", filepath.Join(dir, "nope.dstl")}, exitRuntime, "no such file"},
		{[]string{"inspect", "file://" + dir + "/"}, exitUsage, "names no object"},
		{[]string{"inspect", "nope://bucket/x.dstl"}, exitUsage, "no backend serves"},
		{[]string{"inspect", "file://" + dir + "/missing.dstl"}, exitRuntime, "not found"},
		{[]string{"inspect", "--handle", bad}, exitFailed, "missing field"},
		{[]string{"inspect", "--handle", filepath.Join(dir, "none")}, exitRuntime, "no such file"},
		{[]string{"inspect", "--handle", bad, "a", "b"}, exitUsage, "at most one BASE-PATH"},
		{[]string{"inspect", "--storage", "s3", filepath.Join(dir, "x")}, exitUsage, "--storage is for object URLs"},
		{[]string{"inspect", "--help"}, exitOK, "Usage: dstl inspect"},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("dstl %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
}
