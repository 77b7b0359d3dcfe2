package statestore_test

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
)

// snapshotGate holds the Puts of snapshot objects and snapshot files
// while its gate is shut.
type snapshotGate struct {
	backends.Backend
	gate    chan struct{}
	waiting atomic.Int32 // Puts waiting at the gate
}

// Unwrap returns the backend the calls go to.
func (g *snapshotGate) Unwrap() backends.Backend { return g.Backend }

func (g *snapshotGate) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	if strings.Contains(name, objname.SnapshotDir) {
		g.waiting.Add(1)
		select {
		case <-g.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Backend.Put(ctx, name, body, size)
}

// TestSnapshotsRecordTheirCheckpoint: the objects of a materialisation
// are made for the log's next checkpoint (after a restore, the one after
// the restored checkpoint), and while it runs HoldFrom reports that
// checkpoint rather than the log's later one, so that a catalog keeps them
// until a checkpoint references them; once the snapshot is written,
// HoldFrom is the log's next checkpoint again. In memory and on disk.
func TestSnapshotsRecordTheirCheckpoint(t *testing.T) {
	for _, disk := range []bool{false, true} {
		name := "memory"
		if disk {
			name = "disk"
		}
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			b := &snapshotGate{Backend: dstltest.NewBackend(), gate: make(chan struct{})}
			cfg := statestore.Config{}
			if disk {
				cfg.Dir = t.TempDir()
			}
			o := newOperator(t, newStorage(t, b), "op", allGroups, cfg)
			if err := o.cp.InitializeState(ctx, statestore.CheckpointInfo{CheckpointID: 10}); err != nil {
				t.Fatal(err)
			}
			if h := o.cp.HoldFrom(); h != 11 {
				t.Fatalf("HoldFrom after restoring 10 = %d, want 11", h)
			}
			newWorkload(1).run(t, o, 200)
			done := make(chan error, 1)
			go func() { done <- o.cp.Materialize(ctx) }()
			// While the snapshot's Puts wait, checkpoints 11 and 12 are
			// taken; the snapshot's objects are made for 11.
			deadline := time.Now().Add(10 * time.Second)
			for b.waiting.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the materialisation did not start")
				}
				time.Sleep(time.Millisecond)
			}
			for _, n := range []int64{11, 12} {
				if _, err := o.cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: n}); err != nil {
					t.Fatal(err)
				}
			}
			if h := o.cp.HoldFrom(); h != 11 {
				t.Fatalf("HoldFrom during the materialisation, after checkpoint 12 = %d, want 11", h)
			}
			close(b.gate)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if h := o.cp.HoldFrom(); h != 13 {
				t.Fatalf("HoldFrom after the materialisation = %d, want 13", h)
			}
			h, err := o.cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 13})
			if err != nil {
				t.Fatal(err)
			}
			snapshots := 0
			for _, obj := range h.Objects() {
				n := objname.Parse("job/", obj)
				if n.Kind != objname.Snapshot && n.Kind != objname.SnapshotFile {
					continue
				}
				snapshots++
				if n.Checkpoint != 11 {
					t.Errorf("%s (%s) made for %d, want 11", obj, n.Kind, n.Checkpoint)
				}
			}
			if snapshots == 0 {
				t.Fatalf("checkpoint 13 names no snapshot: %v", h.Objects())
			}
		})
	}
}
