package statestore_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/duplicating"
	"github.com/dstlgo/dstl/statestore"
)

func newLocalStorage(t *testing.T, b backends.Backend, dir string) *dstl.Storage {
	t.Helper()
	cfg := dstl.DefaultConfig("mem://test")
	cfg.JobID, cfg.BatchPersistDelay = "job", dstl.NoBatchDelay
	cfg.LocalRecoveryEnabled, cfg.LocalRecoveryDir = true, dir
	s, err := dstl.New(cfg, b, dstl.WithLocalRecovery(duplicating.Open))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestLocalCopiesOfSharedFilesGo: after a rescale, an instance keeps local
// copies of the files it restored that another instance wrote; once its
// own checkpoints no longer name them, it removes those copies (not the
// objects, which are not its own), and a restart from its own checkpoint
// leaves none.
func TestLocalCopiesOfSharedFilesGo(t *testing.T) {
	ctx := context.Background()
	b := dstltest.NewBackend()
	left := dstl.KeyGroupRange{Start: 0, End: 63}

	// Run 1 on machine 1.
	o := newOperator(t, newLocalStorage(t, b, t.TempDir()), "op-0-of-1", allGroups, statestore.Config{Dir: t.TempDir()})
	fillKV(t, o, 2000, 0)
	if err := o.cp.Materialize(ctx); err != nil {
		t.Fatal(err)
	}
	h1 := checkpoint(t, o, 1)
	o.cp.Close()

	// Run 2 on machine 2: rescaled; the restore keeps local copies of the
	// ancestor's files.
	local := t.TempDir()
	a := newOperator(t, newLocalStorage(t, b, local), "op-0-of-2", left, statestore.Config{Dir: t.TempDir()})
	restore(t, a, h1)
	// Rewrite the whole state: the ancestor's files leave the manifest.
	for i := range 2000 {
		k := fmt.Sprintf("big-%06d", i)
		if left.Contains(statestore.KeyGroup([]byte(k), maxP)) {
			if err := a.kv.Put(k, value200(uint64(i+7))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.cp.Materialize(ctx); err != nil {
		t.Fatal(err)
	}
	h2 := checkpoint(t, a, 2)
	for _, f := range h2.Snapshots[0].Files {
		if strings.Contains(f, "op-0-of-1") {
			t.Fatalf("the ancestor's file %s is still named", f)
		}
	}
	a.cp.Close()
	// A restart from its own checkpoint cleans the local copies it does
	// not need.
	a2 := newOperator(t, newLocalStorage(t, b, local), "op-0-of-2", left, statestore.Config{Dir: t.TempDir()})
	restore(t, a2, h2)

	var stale []string
	_ = filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "op-0-of-1") {
			stale = append(stale, p)
		}
		return nil
	})
	if len(stale) > 0 {
		t.Errorf("%d local copies of files no checkpoint of this instance names are left: %v", len(stale), stale)
	}
}
