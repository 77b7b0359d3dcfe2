package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// listTree returns every path under dir, relative to it.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		paths = append(paths, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// TestReadOnlyMissingPath: the commands that only read (checkpoints,
// inspect, gc --dry-run) and gc itself create no directory: on a local
// base path that does not exist, or, for gc, whose clock probe would
// create it, a job's directory in it, they say so and exit 3.
func TestReadOnlyMissingPath(t *testing.T) {
	dir := t.TempDir()
	persistHandles(t, dir, "job", 1)
	handle := writeHandleFile(t, filepath.Join(t.TempDir(), "h.json"), false, persistHandles(t, t.TempDir(), "job", 1)...)
	before := listTree(t, dir)
	nope := filepath.Join(dir, "nope")
	for _, tc := range []struct {
		name    string
		args    []string
		missing string // the path the first line says does not exist
	}{
		{"checkpoints", []string{"checkpoints", "--base-path", nope}, nope},
		{"checkpoints, file URL", []string{"checkpoints", "--base-path", "file://" + nope}, nope},
		{"inspect", []string{"inspect", "file://" + nope + "/x.dstl"}, nope},
		{"inspect --handle", []string{"inspect", "--handle", handle, nope}, nope},
		{"gc --dry-run", []string{"gc", "--dry-run", "--grace", "1h", "--keep-none", "--base-path", nope}, nope},
		{"gc --dry-run, job", []string{"gc", "--dry-run", "--grace", "1h", "--keep-none", "--base-path", dir, "--job-id", "nope"}, nope},
		{"gc, job", []string{"gc", "--grace", "1h", "--keep-none", "--base-path", dir, "--job-id", "nope"}, nope},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			first := firstLine(errOut)
			if code != exitRuntime || !strings.HasPrefix(first, "dstl "+tc.args[0]+": "+tc.missing+" does not exist") {
				t.Errorf("exit %d, first line %q; want exit 3 and %q\n%s", code, first, tc.missing+" does not exist", out)
			}
			if after := listTree(t, dir); !slices.Equal(after, before) {
				t.Errorf("the base path changed: %q, was %q", after, before)
			}
		})
	}
	// A dry run of a job that is there leaves it as it was: its clock
	// probe is deleted.
	if code, out, errOut := runCLI(t, "gc", "--dry-run", "--grace", "0s", "--keep-none", "--base-path", dir, "--job-id", "job"); code != exitOK ||
		!strings.Contains(out, "would delete (dry run)") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	if after := listTree(t, dir); !slices.Equal(after, before) {
		t.Errorf("the dry run changed the base path: %q, was %q", after, before)
	}
}
