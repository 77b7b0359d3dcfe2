package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestInspectDemoSnapshot: what "dstl demo --keep" leaves is the
// project's own files too: inspect describes each of them, the demo's
// snapshots (snapshots/operator-N-cp-M.snap) included, and exits 0.
func TestInspectDemoSnapshot(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "demo", "--keep", "--base-path", dir, "--checkpoints", "5", "--changes", "20", "--materialize-every", "2"); code != exitOK {
		t.Fatalf("demo: exit %d\n%s", code, errOut)
	}
	snaps, err := filepath.Glob(filepath.Join(dir, "demo-*", "snapshots", "*.snap"))
	if err != nil || len(snaps) == 0 {
		t.Fatalf("no demo snapshot left with --keep (%v)", err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "demo-*", "*.dstl"))
	for _, f := range append(snaps[:1], logs[:1]...) {
		code, out, errOut := runCLI(t, "inspect", f)
		if code != exitOK {
			t.Errorf("inspect %s: exit %d\n%s%s", f, code, out, errOut)
		}
	}
	code, out, _ := runCLI(t, "inspect", snaps[0])
	if want := `^demo snapshot ` + regexp.QuoteMeta(snaps[0]) + `: .*, dstl demo's own snapshot .*, the log from sequence number \d+`; code != exitOK || !regexp.MustCompile(want).MatchString(out) {
		t.Errorf("inspect %s: exit %d, %q, want a line matching %q", snaps[0], code, out, want)
	}
	// A file of that name that is no demo snapshot is still damaged.
	bad := filepath.Join(t.TempDir(), "operator-0-cp-2.snap")
	if err := os.WriteFile(bad, []byte("not a snapshot at all, nor a log object"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runCLI(t, "inspect", bad); code != exitFailed {
		t.Errorf("inspect of a damaged .snap: exit %d, want %d", code, exitFailed)
	}
}
