package statestore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
)

// readObject reads a whole object of b.
func readObject(t *testing.T, b backends.Backend, name string) []byte {
	t.Helper()
	rc, err := b.Get(context.Background(), name, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDescribeSnapshot: DescribeSnapshot reads the snapshot objects that
// checkpointers write, of stores in memory and on disk, without restoring
// them, and calls a damaged one damaged.
func TestDescribeSnapshot(t *testing.T) {
	kgr := allGroups
	for _, disk := range []bool{false, true} {
		name := map[bool]string{false: "in memory", true: "on disk"}[disk]
		t.Run(name, func(t *testing.T) {
			b := dstltest.NewBackend()
			var cfg statestore.Config
			if disk {
				cfg.Dir = t.TempDir()
			}
			o := newOperator(t, newStorage(t, b), "op-3", kgr, cfg)
			if err := o.cp.InitializeState(context.Background(), statestore.CheckpointInfo{OperatorID: "op"}); err != nil {
				t.Fatal(err)
			}
			w := newWorkload(1)
			w.run(t, o, 300)
			if err := o.cp.Materialize(context.Background()); err != nil {
				t.Fatal(err)
			}
			h := checkpoint(t, o, 1)
			if len(h.Snapshots) != 1 {
				t.Fatalf("handle %+v: want one snapshot", h)
			}
			ref := h.Snapshots[0]
			data := readObject(t, b, ref.Object)
			info, err := statestore.DescribeSnapshot(ref.Object, data)
			if err != nil {
				t.Fatal(err)
			}
			if info.Manifest != disk || info.Version != 1 || info.Operator != "op-3" || info.KeyGroups != kgr || info.MaxParallelism != maxP {
				t.Fatalf("info %+v", info)
			}
			var stores []string
			for _, s := range info.Stores {
				stores = append(stores, s.Name+":"+string(s.Kind))
				if !disk && s.Size == 0 {
					t.Errorf("store %+v: no payload", s)
				}
			}
			if got := strings.Join(stores, " "); got != "kv:kv win:window ver:versioned" {
				t.Errorf("stores %s", got)
			}
			if disk {
				if len(info.Files) != len(ref.Files) || len(info.Files) == 0 {
					t.Fatalf("files %+v, the handle names %q", info.Files, ref.Files)
				}
				for i, f := range info.Files {
					if f.Object != ref.Files[i] || f.Size <= 0 || (f.Kind != "delta" && f.Kind != "segment") {
						t.Errorf("file %+v, the handle names %q", f, ref.Files[i])
					}
				}
			} else if len(info.Files) != 0 {
				t.Errorf("an in-memory snapshot names files: %+v", info.Files)
			}

			damaged := bytes.Clone(data)
			damaged[len(damaged)/2] ^= 1
			if _, err := statestore.DescribeSnapshot(ref.Object, damaged); !errors.Is(err, statestore.ErrSnapshotFormat) || !strings.Contains(err.Error(), ref.Object) {
				t.Errorf("a damaged snapshot: %v, want an error wrapping ErrSnapshotFormat naming %s", err, ref.Object)
			}
		})
	}
	if _, err := statestore.DescribeSnapshot("x.snap", []byte("DSTL not a snapshot")); !errors.Is(err, statestore.ErrSnapshotFormat) {
		t.Errorf("a log object: %v, want ErrSnapshotFormat", err)
	}
}
