package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/statestore"
)

// stateCheckpoint runs an operator with a key-value store on a local
// storage under dir (job "job"): it writes keys, materialises (in memory,
// or on disk), writes more and takes checkpoint 1, which it completes. It
// returns the checkpoint's handle and writes its binary encoding to a
// file, whose path it returns too.
func stateCheckpoint(t *testing.T, dir string, disk bool) (statestore.CheckpointHandle, string) {
	t.Helper()
	ctx := context.Background()
	cfg := dstl.DefaultConfig("file://" + dir)
	cfg.JobID, cfg.BatchPersistDelay = "job", dstl.NoBatchDelay
	s, err := dstl.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	scfg := statestore.Config{Operator: "op-0", KeyGroups: dstl.KeyGroupRange{Start: 0, End: 7}, MaxParallelism: 8,
		MaterializeInterval: -1, MaterializeSize: -1, KeepSnapshots: true}
	if disk {
		scfg.Dir = t.TempDir()
	}
	cp, err := statestore.NewCheckpointer(s, scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	kv, err := statestore.NewKeyValueStore("counts", cp.Log(), statestore.StringCodec{}, statestore.Int64Codec{}, statestore.WithMaxParallelism(8))
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Register(kv); err != nil {
		t.Fatal(err)
	}
	if err := cp.InitializeState(ctx, statestore.CheckpointInfo{}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if err := kv.Put(fmt.Sprintf("word-%d", i), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.Materialize(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := kv.Put(fmt.Sprintf("word-%d", i), 100); err != nil {
			t.Fatal(err)
		}
	}
	h, err := cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.NotifyCheckpointComplete(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if len(h.Snapshots) != 1 || len(h.Logs) != 1 {
		t.Fatalf("handle %+v: want a snapshot and a log", h)
	}
	return *h, writeCheckpointHandle(t, filepath.Join(t.TempDir(), "checkpoint.bin"), *h)
}

// firstLine returns the first line of s.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestInspectSnapshot: inspect describes a state store's snapshot object,
// in memory or the manifest of a disk-backed one, and calls a damaged one
// damaged.
func TestInspectSnapshot(t *testing.T) {
	for _, disk := range []bool{false, true} {
		t.Run(fmt.Sprint("disk=", disk), func(t *testing.T) {
			dir := t.TempDir()
			h, _ := stateCheckpoint(t, dir, disk)
			path := objectPath(dir, h.Snapshots[0].Object)
			code, out, errOut := runCLI(t, "inspect", path)
			want := "snapshot " + path + ": "
			if code != exitOK || !strings.HasPrefix(out, want) || !strings.HasSuffix(firstLine(out), ", OK") ||
				!strings.Contains(firstLine(out), "of operator op-0, key groups 0-7 of 8") {
				t.Fatalf("exit %d, want 0 and a first line %q...OK:\n%s%s", code, want, out, errOut)
			}
			if !strings.Contains(out, "counts") {
				t.Errorf("the store is not listed:\n%s", out)
			}
			code, out, errOut = runCLI(t, "inspect", "--json", "file://"+path)
			var rep snapshotReport
			if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil {
				t.Fatalf("exit %d, %v: %s%s", code, err, out, errOut)
			}
			if rep.Kind != "snapshot" || !rep.OK || rep.Operator != "op-0" || len(rep.Stores) != 1 || rep.Stores[0].Kind != "kv" ||
				(len(rep.Files) > 0) != disk || len(rep.Files) != len(h.Snapshots[0].Files) {
				t.Fatalf("report %+v", rep)
			}

			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)-1] ^= 1
			damaged := filepath.Join(t.TempDir(), "damaged.snap")
			os.WriteFile(damaged, data, 0o644)
			code, out, errOut = runCLI(t, "inspect", damaged)
			if code != exitFailed || !strings.HasPrefix(out, "snapshot "+damaged+": ") || !strings.HasSuffix(firstLine(out), "DAMAGED") ||
				!strings.Contains(out, "checksum") {
				t.Fatalf("damaged: exit %d:\n%s%s", code, out, errOut)
			}
		})
	}
}

// TestInspectCatalogObject: inspect describes each kind of catalog object
// and calls a damaged one damaged.
func TestInspectCatalogObject(t *testing.T) {
	dir := t.TempDir()
	buildCatalog(t, "file://"+dir)
	for _, tc := range []struct {
		name  string
		first string // what the first line says of it
		more  []string
	}{
		{objname.CatalogV2GenerationName("job/", 2), "record of generation 2 (version 2)", []string{"aligned", "0-3, 4-7, 8-11", "restored checkpoint 1"}},
		{objname.CatalogV2FenceName("job/", 1), "fence of generation 1: generation 2 starts", []string{"pod-1-restarted"}},
		{objname.CatalogV2ClaimName("job/", 2, 1), "claim of process 1 of generation 2", []string{"pod-1-restarted"}},
		{objname.CatalogV2CommitName("job/", 2, 3, 0), "commit of checkpoint 3 by process 0 of generation 2", []string{"instance 0:", "offset=30", "job/log-g2-i0-n3.dstl"}},
		// An object of the catalog's first layout.
		{"../../catalog/testdata/v1/aligned/_catalog/g00000000000000000002/part-00000000000000000005-00001",
			"part of checkpoint 5 of generation 2, instance 1 (version 1)", []string{"offset=50"}},
	} {
		path := objectPath(dir, tc.name)
		if strings.HasPrefix(tc.name, "../") {
			path = tc.name
		}
		code, out, errOut := runCLI(t, "inspect", path)
		first := firstLine(out)
		if code != exitOK || !strings.HasPrefix(first, "catalog object "+path+": ") || !strings.Contains(first, tc.first) || !strings.HasSuffix(first, ", OK") {
			t.Errorf("%s: exit %d, first line %q, want %q...OK\n%s", tc.name, code, first, tc.first, errOut)
		}
		for _, m := range tc.more {
			if !strings.Contains(out, m) {
				t.Errorf("%s: %q missing in:\n%s", tc.name, m, out)
			}
		}
	}
	part := objectPath(dir, objname.CatalogV2CommitName("job/", 2, 3, 0))
	code, out, _ := runCLI(t, "inspect", "--json", part)
	var rep catalogReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || rep.Kind != "catalog" || rep.Record != "commit" ||
		rep.Commit == nil || rep.Commit.Checkpoint != 3 || len(rep.Commit.Parts) != 1 || len(rep.Commit.Parts[0].Objects) != 2 {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}

	data, _ := os.ReadFile(part)
	data[10] ^= 1
	os.WriteFile(part, data, 0o644)
	code, out, _ = runCLI(t, "inspect", part)
	if code != exitFailed || !strings.HasSuffix(firstLine(out), "DAMAGED") || !strings.Contains(out, "checksum") {
		t.Fatalf("damaged: exit %d:\n%s", code, out)
	}
}

// TestInspectCheckpointHandle: inspect --handle shows a state store's
// checkpoint handle (as gc --keep takes it): its snapshots and log
// handles; given the base path, it checks the snapshot objects and the
// log's change sets, and reports a snapshot gone.
func TestInspectCheckpointHandle(t *testing.T) {
	dir := t.TempDir()
	h, file := stateCheckpoint(t, dir, false)
	code, out, errOut := runCLI(t, "inspect", "--handle", file)
	want := "checkpoint handle " + file + ": checkpoint 1 of operator op-0, key groups 0-7 of 8, 1 snapshot, 1 log handle"
	if code != exitOK || firstLine(out) != want || !strings.Contains(out, h.Snapshots[0].Object) || !strings.Contains(out, h.Logs[0].Remote.LogID.String()) {
		t.Fatalf("exit %d, want 0 and a first line %q:\n%s%s", code, want, out, errOut)
	}
	// A handle file given as the object to inspect shows the same, in
	// binary or in JSON.
	if code, out2, _ := runCLI(t, "inspect", file); code != exitOK || out2 != out {
		t.Errorf("inspect FILE: exit %d:\n%s\nwant:\n%s", code, out2, out)
	}
	jsonFile := writeHandleFile(t, filepath.Join(t.TempDir(), "log.json"), false, h.Logs[0].Remote)
	if code, out2, _ := runCLI(t, "inspect", jsonFile); code != exitOK || !strings.HasPrefix(out2, "handle 1 of "+jsonFile+": ") {
		t.Errorf("inspect a JSON handle file: exit %d:\n%s", code, out2)
	}

	code, out, errOut = runCLI(t, "inspect", "--json", "--handle", file, dir)
	var rep handlesReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil {
		t.Fatalf("exit %d, %v:\n%s%s", code, err, out, errOut)
	}
	if !rep.OK || len(rep.Checkpoints) != 1 || len(rep.Checkpoints[0].Snapshots) != 1 || rep.Checkpoints[0].Snapshots[0].Check == nil ||
		!rep.Checkpoints[0].Snapshots[0].Check.OK || len(rep.Handles) != 1 || rep.Handles[0].Entries[0].Check == nil {
		t.Fatalf("report %+v", rep)
	}

	os.Remove(objectPath(dir, h.Snapshots[0].Object))
	code, out, _ = runCLI(t, "inspect", "--handle", file, dir)
	if code != exitFailed || !strings.Contains(out, "problem (missing)") || !strings.Contains(out, h.Snapshots[0].Object) {
		t.Fatalf("snapshot gone: exit %d:\n%s", code, out)
	}
}
