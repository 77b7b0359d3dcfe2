package statestore_test

import (
	"context"
	"fmt"
	"io"
	"slices"
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
// while its gate is shut, and, when logGate is not nil, the Puts of log
// objects made for checkpoint logFor while logGate is shut.
type snapshotGate struct {
	backends.Backend
	gate    chan struct{}
	waiting atomic.Int32 // Puts waiting at the gate

	logGate    chan struct{}
	logFor     int64
	logWaiting atomic.Int32
}

// Unwrap returns the backend the calls go to.
func (g *snapshotGate) Unwrap() backends.Backend { return g.Backend }

func (g *snapshotGate) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	wait := func(gate chan struct{}, waiting *atomic.Int32) error {
		waiting.Add(1)
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if strings.Contains(name, objname.SnapshotDir) {
		if err := wait(g.gate, &g.waiting); err != nil {
			return err
		}
	} else if n := objname.Parse("job/", name); g.logGate != nil && n.Kind == objname.Log && n.Checkpoint == g.logFor {
		if err := wait(g.logGate, &g.logWaiting); err != nil {
			return err
		}
	}
	return g.Backend.Put(ctx, name, body, size)
}

// waitFor waits until n says that a Put waits at a gate.
func waitFor(t *testing.T, what string, n *atomic.Int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSnapshotsRecordTheirCheckpoint: the objects of a materialisation
// are made for the log's next checkpoint (after a restore, the one after
// the restored checkpoint), and HoldFrom reports that checkpoint rather
// than the log's later one while the materialisation runs and once it is
// written, until a checkpoint that names the snapshot completes, so that
// a catalog keeps its objects until a kept commit references them. A
// checkpoint taken before the snapshot was written does not name it, even
// when its upload ends after. In memory and on disk.
//
// The job simulation found it (go test ./job -run '^TestJobSimulation$'
// -job.sim.seed=6381, under load): HoldFrom was the log's next checkpoint
// as soon as the snapshot was written, a commit gave it while its handle
// named the older snapshot, and the catalog's sweep deleted the new one
// before the next commit named it.
func TestSnapshotsRecordTheirCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		disk bool
		// straddle: checkpoint 12 is taken before the snapshot is
		// written, and its upload ends after.
		straddle bool
	}{
		{"memory", false, false},
		{"disk", true, false},
		{"memory/straddling checkpoint", false, true},
		{"disk/straddling checkpoint", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			b := &snapshotGate{Backend: dstltest.NewBackend(), gate: make(chan struct{})}
			if tc.straddle {
				b.logGate, b.logFor = make(chan struct{}), 12
			}
			cfg := statestore.Config{}
			if tc.disk {
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
			waitFor(t, "the materialisation", &b.waiting)
			if _, err := o.cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 11}); err != nil {
				t.Fatal(err)
			}
			newWorkload(1).run(t, o, 10)
			took := make(chan error, 1)
			go func() {
				h, err := o.cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 12})
				if err == nil && len(h.Snapshots) > 0 {
					err = fmt.Errorf("checkpoint 12 names the snapshots %v, taken before the materialisation ended", h.Snapshots)
				}
				took <- err
			}()
			if tc.straddle {
				waitFor(t, "checkpoint 12's upload", &b.logWaiting)
			} else if err := <-took; err != nil {
				t.Fatal(err)
			}
			if h := o.cp.HoldFrom(); h != 11 {
				t.Fatalf("HoldFrom during the materialisation, after checkpoint 12 = %d, want 11", h)
			}
			close(b.gate)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if tc.straddle {
				close(b.logGate)
				if err := <-took; err != nil {
					t.Fatal(err)
				}
			}
			if h := o.cp.HoldFrom(); h != 11 {
				t.Fatalf("HoldFrom after the materialisation, before a checkpoint names its snapshot = %d, want 11", h)
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
			if h := o.cp.HoldFrom(); h != 11 {
				t.Fatalf("HoldFrom once checkpoint 13 names the snapshot = %d, want 11 until it completes", h)
			}
			if err := o.cp.NotifyCheckpointComplete(ctx, 13); err != nil {
				t.Fatal(err)
			}
			if h := o.cp.HoldFrom(); h != 14 {
				t.Fatalf("HoldFrom once checkpoint 13 completed = %d, want 14", h)
			}
		})
	}
}

// TestHoldFromCoversWhatLaterCheckpointsName: every object that a
// checkpoint names and the one before it does not is made for a
// checkpoint at or above the hold the one before it gave (HoldFrom read
// after its SnapshotState returned), when two materialisations end while
// that checkpoint uploads. On disk the second snapshot shares the files
// of the first, made for an earlier checkpoint than its own; a hold of
// the second's checkpoint alone let a catalog delete them before the
// next checkpoint's commit named them. In memory and on disk.
func TestHoldFromCoversWhatLaterCheckpointsName(t *testing.T) {
	for _, disk := range []bool{false, true} {
		name := "memory"
		if disk {
			name = "disk"
		}
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			b := &snapshotGate{Backend: dstltest.NewBackend(), gate: make(chan struct{}), logGate: make(chan struct{}), logFor: 11}
			cfg := statestore.Config{}
			if disk {
				cfg.Dir = t.TempDir()
			}
			o := newOperator(t, newStorage(t, b), "op", allGroups, cfg)
			if err := o.cp.InitializeState(ctx, statestore.CheckpointInfo{CheckpointID: 10}); err != nil {
				t.Fatal(err)
			}
			newWorkload(1).run(t, o, 200)
			first := make(chan error, 1)
			go func() { first <- o.cp.Materialize(ctx) }()
			waitFor(t, "the first materialisation", &b.waiting)
			took := make(chan *statestore.CheckpointHandle, 1)
			go func() {
				h, err := o.cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 11})
				if err != nil {
					t.Error(err)
				}
				took <- h
			}()
			waitFor(t, "checkpoint 11's upload", &b.logWaiting)
			close(b.gate)
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			newWorkload(2).run(t, o, 3)
			if err := o.cp.Materialize(ctx); err != nil {
				t.Fatal(err)
			}
			close(b.logGate)
			h11 := <-took
			if h11 == nil {
				t.Fatal("checkpoint 11 failed")
			}
			hold := o.cp.HoldFrom()
			h12, err := o.cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 12})
			if err != nil {
				t.Fatal(err)
			}
			named := h11.Objects()
			for _, obj := range h12.Objects() {
				if _, ok := slices.BinarySearch(named, obj); ok {
					continue
				}
				if n := objname.Parse("job/", obj); n.Checkpoint > 0 && n.Checkpoint < hold {
					t.Errorf("checkpoint 12 names %s, made for %d, which checkpoint 11 does not name; checkpoint 11 held from %d", obj, n.Checkpoint, hold)
				}
			}
		})
	}
}
