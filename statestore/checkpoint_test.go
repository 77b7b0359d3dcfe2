package statestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/duplicating"
	"github.com/dstlgo/dstl/statestore"
)

// scenario runs a workload through checkpoints 1..3 (2 aborted), with or
// without materialisations in between, and returns the handle and the state
// of the last completed checkpoint. Changes after it must not survive.
func scenario(t *testing.T, o *operator, materialize bool) (*statestore.CheckpointHandle, state) {
	t.Helper()
	ctx := context.Background()
	w := newWorkload(1)
	w.run(t, o, 400)
	checkpoint(t, o, 1)
	w.run(t, o, 300)
	if materialize {
		if err := o.cp.Materialize(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 2}); err != nil {
		t.Fatal(err)
	}
	if err := o.cp.NotifyCheckpointAborted(ctx, 2); err != nil {
		t.Fatal(err)
	}
	w.run(t, o, 300)
	if materialize {
		if err := o.cp.Materialize(ctx); err != nil {
			t.Fatal(err)
		}
		w.run(t, o, 100)
	}
	h := checkpoint(t, o, 3)
	want := dump(t, o)
	w.run(t, o, 200) // lost in the crash
	return h, want
}

func TestRestoreEqualsCheckpoint(t *testing.T) {
	for _, materialize := range []bool{false, true} {
		t.Run(fmt.Sprintf("materialize=%v", materialize), func(t *testing.T) {
			b := dstltest.NewBackend()
			o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
			h, want := scenario(t, o, materialize)
			if got := len(h.Snapshots); materialize != (got == 1) {
				t.Fatalf("handle names %d snapshots", got)
			}
			if len(want.kv) == 0 || len(want.win) < 2 || len(want.ver) < 2 {
				t.Fatalf("workload left too little state: %d, %d, %d", len(want.kv), len(want.win), len(want.ver))
			}
			o.cp.Close() // the crash

			r := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
			restore(t, r, h)
			diff(t, want, dump(t, r))
			if !r.kv.Logging() || !r.win.Logging() || !r.ver.Logging() {
				t.Error("logging is off after restore")
			}

			// Restoring the restored operator's next checkpoint, taken
			// before any materialisation, gives the same state again
			// (the handle names the restored snapshot and log too).
			newWorkload(9).run(t, r, 100)
			h2 := checkpoint(t, r, 4)
			want2 := dump(t, r)
			r.cp.Close()
			r2 := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
			restore(t, r2, h2)
			diff(t, want2, dump(t, r2))
		})
	}
}

func TestRestoreRescaledHalves(t *testing.T) {
	for _, materialize := range []bool{false, true} {
		t.Run(fmt.Sprintf("materialize=%v", materialize), func(t *testing.T) {
			b := dstltest.NewBackend()
			o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
			h, want := scenario(t, o, materialize)
			o.cp.Close()

			storage := newStorage(t, b)
			lo := dstl.KeyGroupRange{Start: 0, End: maxP/2 - 1}
			hi := dstl.KeyGroupRange{Start: maxP / 2, End: maxP - 1}
			a := newOperator(t, storage, "op-0", lo, statestore.Config{})
			c := newOperator(t, storage, "op-1", hi, statestore.Config{})
			restore(t, a, h)
			restore(t, c, h)
			da, dc := dump(t, a), dump(t, c)
			for k := range da.kv {
				if g := statestore.KeyGroup([]byte(k), maxP); !lo.Contains(g) {
					t.Errorf("key %q of key group %d restored into %v", k, g, lo)
				}
			}
			for k := range dc.kv {
				if g := statestore.KeyGroup([]byte(k), maxP); !hi.Contains(g) {
					t.Errorf("key %q of key group %d restored into %v", k, g, hi)
				}
			}
			if len(da.kv) == 0 || len(dc.kv) == 0 {
				t.Fatalf("a half is empty: %d and %d keys", len(da.kv), len(dc.kv))
			}
			diff(t, want, union(da, dc))

			// And back: both halves' checkpoints restore one operator.
			ha, hc := checkpoint(t, a, 4), checkpoint(t, c, 4)
			whole := newOperator(t, storage, "op-0", allGroups, statestore.Config{})
			restore(t, whole, ha, hc)
			diff(t, want, dump(t, whole))
		})
	}
}

// change overwrites or deletes, in the key-value store, two thirds of the
// workload's keys that are in the operator's key groups (which two thirds
// depends on the seed).
func change(t *testing.T, o *operator, seed int) {
	t.Helper()
	kgr := o.cp.KeyGroups()
	for i := range 150 {
		key := fmt.Sprintf("key-%03d", i)
		if i%3 == seed%3 || !kgr.Contains(statestore.KeyGroup([]byte(key), maxP)) {
			continue
		}
		var err error
		if (i+seed)%5 == 0 {
			err = o.kv.Delete(key)
		} else {
			err = o.kv.Put(key, fmt.Sprintf("s%d-%d", seed, i))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRestoreMergesChangedHalves: halves restored from one handle change
// their keys, then checkpoint before any materialisation (each handle names
// the restored log, which holds both halves' key groups); restoring both
// handles gives each half's state, not the restored log's older values for
// the other half's keys; and the merged operator's next checkpoint, again
// before any materialisation of its own, restores alone to its state.
// Without the restore keeping each handle to its own key groups, the
// second handle's replay of the shared log overwrote the first half's
// newer values; without the materialisation of a merged restore, the
// merged operator's handle named both restored lineages, with the same
// effect.
func TestRestoreMergesChangedHalves(t *testing.T) {
	for _, materialize := range []bool{false, true} {
		t.Run(fmt.Sprintf("materialize=%v", materialize), func(t *testing.T) {
			b := dstltest.NewBackend()
			o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
			h, _ := scenario(t, o, materialize)
			o.cp.Close()

			storage := newStorage(t, b)
			lo := dstl.KeyGroupRange{Start: 0, End: maxP/2 - 1}
			hi := dstl.KeyGroupRange{Start: maxP / 2, End: maxP - 1}
			a := newOperator(t, storage, "op-a", lo, statestore.Config{})
			c := newOperator(t, storage, "op-c", hi, statestore.Config{})
			restore(t, a, h)
			restore(t, c, h)
			change(t, a, 1)
			change(t, c, 2)
			ha, hc := checkpoint(t, a, 4), checkpoint(t, c, 4)
			if len(ha.Logs) < 2 || len(hc.Logs) < 2 {
				t.Fatalf("the halves' handles name %d and %d logs: the restored one should still be there", len(ha.Logs), len(hc.Logs))
			}
			want := union(dump(t, a), dump(t, c))

			whole := newOperator(t, storage, "op-w", allGroups, statestore.Config{})
			restore(t, whole, ha, hc)
			diff(t, want, dump(t, whole))

			change(t, whole, 3)
			hw := checkpoint(t, whole, 5)
			if len(hw.Snapshots) != 1 || len(hw.Logs) != 1 {
				t.Errorf("the merged operator's handle names %d snapshots and %d logs, want its own snapshot and log", len(hw.Snapshots), len(hw.Logs))
			}
			want = dump(t, whole)
			again := newOperator(t, storage, "op-x", allGroups, statestore.Config{})
			restore(t, again, hw)
			diff(t, want, dump(t, again))
		})
	}
}

func TestTombstonesStayDeleted(t *testing.T) {
	ctx := context.Background()
	for _, materialize := range []bool{false, true} {
		t.Run(fmt.Sprintf("materialize=%v", materialize), func(t *testing.T) {
			b := dstltest.NewBackend()
			o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
			for i := range 50 {
				k := fmt.Sprintf("k%02d", i)
				if err := o.kv.Put(k, "v"); err != nil {
					t.Fatal(err)
				}
				if err := o.win.Put(k, 0, 1); err != nil {
					t.Fatal(err)
				}
				if err := o.ver.Put(k, "v", 1); err != nil {
					t.Fatal(err)
				}
			}
			checkpoint(t, o, 1)
			if materialize {
				if err := o.cp.Materialize(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 50; i += 2 {
				k := fmt.Sprintf("k%02d", i)
				if err := o.kv.Delete(k); err != nil {
					t.Fatal(err)
				}
				if err := o.win.Delete(k, 0); err != nil {
					t.Fatal(err)
				}
				if err := o.ver.Delete(k, 2); err != nil {
					t.Fatal(err)
				}
			}
			if materialize {
				if err := o.cp.Materialize(ctx); err != nil {
					t.Fatal(err)
				}
			}
			h := checkpoint(t, o, 2)
			o.cp.Close()
			r := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
			restore(t, r, h)
			for i := range 50 {
				k := fmt.Sprintf("k%02d", i)
				_, okKV, _ := r.kv.Get(k)
				_, okWin, _ := r.win.Get(k, 0)
				_, _, okVer, _ := r.ver.Get(k)
				_, _, okThen, _ := r.ver.GetAsOf(k, 1)
				if deleted := i%2 == 0; okKV == deleted || okWin == deleted || okVer == deleted || !okThen {
					t.Errorf("%s (deleted %v): kv %v, window %v, versioned %v, versioned as of 1 %v", k, deleted, okKV, okWin, okVer, okThen)
				}
			}
		})
	}
}

// TestRestoreNeverWritesToLog checks that a restore appends nothing, puts
// no object and leaves no change buffered.
func TestRestoreNeverWritesToLog(t *testing.T) {
	for _, materialize := range []bool{false, true} {
		t.Run(fmt.Sprintf("materialize=%v", materialize), func(t *testing.T) {
			b := dstltest.NewBackend()
			o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
			h, _ := scenario(t, o, materialize)
			o.cp.Close()

			r := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
			puts := b.Counts()[dstltest.OpPut]
			restore(t, r, h)
			if got := b.Counts()[dstltest.OpPut]; got != puts {
				t.Errorf("restore put %d objects", got-puts)
			}
			for _, s := range []statestore.Store{r.kv, r.win, r.ver} {
				if c := s.TakeChanges(); len(c) != 0 {
					t.Errorf("store %s buffered %d changes during restore", s.Name(), len(c))
				}
			}
			if sqn := r.cp.Log().NextSequenceNumber(); sqn != r.cp.Log().InitialSequenceNumber() {
				t.Errorf("the log holds a change set after restore (active sequence number %d)", sqn)
			}
			if got := r.cp.Stats().LogBytes; got != 0 {
				t.Errorf("restore logged %d bytes", got)
			}
		})
	}
}

func TestBackgroundMaterialization(t *testing.T) {
	b := dstltest.NewBackend()
	storage := newStorage(t, b)
	o := newOperator(t, storage, "op-0", allGroups, statestore.Config{MaterializeSize: 4 << 10, MaterializeInterval: 20 * time.Millisecond})
	w := newWorkload(3)
	var last *statestore.CheckpointHandle
	for id := int64(1); id <= 20; id++ {
		w.run(t, o, 100)
		last = checkpoint(t, o, id)
		time.Sleep(5 * time.Millisecond)
	}
	deadline := time.Now().Add(5 * time.Second)
	for o.cp.Stats().Materializations < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	st := o.cp.Stats()
	if st.Materializations < 2 {
		t.Fatalf("%d materialisations", st.Materializations)
	}
	w.run(t, o, 100)
	last = checkpoint(t, o, 21)
	want := dump(t, o)
	if len(last.Snapshots) != 1 {
		t.Fatalf("the last checkpoint names %d snapshots", len(last.Snapshots))
	}
	// Old snapshots are deleted: at most the confirmed one and the current one remain.
	snaps := 0
	for _, obj := range b.Objects() {
		if strings.HasSuffix(obj.Name, objname.SnapshotSuffix) {
			snaps++
		}
	}
	if snaps < 1 || snaps > 2 || st.SnapshotsDeleted == 0 {
		t.Errorf("%d snapshot objects on the backend after %d materialisations, %d deleted", snaps, st.Materializations, st.SnapshotsDeleted)
	}
	if _, ok := b.ObjectBytes(last.Snapshots[0].Object); !ok {
		t.Fatal("the last completed checkpoint's snapshot was deleted")
	}
	o.cp.Close()
	r := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
	restore(t, r, last)
	diff(t, want, dump(t, r))
}

func TestLocalRecovery(t *testing.T) {
	for _, disk := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "disk"}[disk], func(t *testing.T) { testLocalRecovery(t, disk) })
	}
}

func testLocalRecovery(t *testing.T, disk bool) {
	b := dstltest.NewBackend()
	dir := t.TempDir()
	open := func() *dstl.Storage { return newLocalStorage(t, b, dir) }
	var scfg statestore.Config
	if disk {
		scfg.Dir = t.TempDir()
	}
	s1 := open()
	o := newOperator(t, s1, "op-0", allGroups, scfg)
	h, want := scenario(t, o, true)
	if h.Logs[len(h.Logs)-1].Local == nil {
		t.Fatal("no local log handle with local recovery")
	}
	if disk && len(h.Snapshots[0].Files) == 0 {
		t.Fatalf("disk-backed snapshot %+v names no files", h.Snapshots)
	}
	o.cp.Close()
	s1.Close()
	r := newOperator(t, open(), "op-0", allGroups, scfg)
	gets := b.Counts()[dstltest.OpGet]
	restore(t, r, h)
	diff(t, want, dump(t, r))
	rep := r.cp.Stats().LastRestore
	if rep.LocalSnapshots != 1 || rep.Log.LocalSets == 0 || rep.Log.RemoteSets != 0 {
		t.Errorf("restore report %+v: want the snapshot and every change set read locally", rep)
	}
	if disk && (rep.SnapshotFiles != len(h.Snapshots[0].Files) || rep.LocalSnapshotFiles != rep.SnapshotFiles) {
		t.Errorf("restore report %+v: want the %d files of the snapshot taken from their local copies", rep, len(h.Snapshots[0].Files))
	}
	if got := b.Counts()[dstltest.OpGet] - gets; got != 0 {
		t.Errorf("%d remote reads", got)
	}
}

func TestCheckpointErrors(t *testing.T) {
	ctx := context.Background()
	b := dstltest.NewBackend()
	storage := newStorage(t, b)
	o := newOperator(t, storage, "op-0", allGroups, statestore.Config{})
	if err := o.cp.NotifyCheckpointComplete(ctx, 7); !errors.Is(err, statestore.ErrUnknownCheckpoint) {
		t.Errorf("completing an unknown checkpoint: %v", err)
	}
	h := checkpoint(t, o, 1)
	if _, err := o.cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 1}); err == nil {
		t.Error("checkpoint 1 taken twice")
	}
	other := newOperator(t, storage, "op-x", allGroups, statestore.Config{})
	h.MaxParallelism = 256
	if err := other.cp.InitializeState(ctx, statestore.CheckpointInfo{}, h); !errors.Is(err, statestore.ErrInvalidCheckpointHandle) {
		t.Errorf("restoring another max parallelism: %v", err)
	}
	// A store that is not registered but in the snapshot.
	if err := o.kv.Put("a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := o.cp.Materialize(ctx); err != nil {
		t.Fatal(err)
	}
	h = checkpoint(t, o, 2)
	cp, err := statestore.NewCheckpointer(storage, statestore.Config{Operator: "op-y", KeyGroups: allGroups, MaterializeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if err := cp.InitializeState(ctx, statestore.CheckpointInfo{}, h); !errors.Is(err, statestore.ErrUnknownStore) {
		t.Errorf("restoring a snapshot of unregistered stores: %v", err)
	}
	kv, _ := statestore.NewKeyValueStore("kv", nil, statestore.StringCodec{}, statestore.StringCodec{})
	if err := cp.Register(kv); err == nil {
		t.Error("registered a store of another log")
	}
}

// TestNotifyBeforeSnapshotStateReturns: a checkpoint's completion (or
// abort) may reach the checkpointer while its SnapshotState still waits for
// the upload; the log learns it (Confirm, Reset) once the upload is done.
// A confirmed checkpoint's log objects outlive the truncation of the log;
// an aborted one's are deleted with it.
func TestNotifyBeforeSnapshotStateReturns(t *testing.T) {
	for _, abort := range []bool{false, true} {
		t.Run(map[bool]string{false: "complete", true: "abort"}[abort], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b := dstltest.NewBackend()
			o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
			newWorkload(5).run(t, o, 200)
			want := dump(t, o)
			b.SetFault(dstltest.StallFirst(dstltest.OpPut))
			type result struct {
				h   *statestore.CheckpointHandle
				err error
			}
			done := make(chan result, 1)
			go func() {
				h, err := o.cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 1})
				done <- result{h, err}
			}()
			if err := b.WaitStalled(ctx, 1); err != nil {
				t.Fatal(err)
			}
			notify := o.cp.NotifyCheckpointComplete
			if abort {
				notify = o.cp.NotifyCheckpointAborted
			}
			if err := notify(ctx, 1); err != nil {
				t.Fatalf("notified while the upload runs: %v", err)
			}
			b.SetFault(nil)
			b.ReleaseStalls()
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			var objects []string
			for _, e := range r.h.Logs[len(r.h.Logs)-1].Remote.Entries {
				objects = append(objects, e.Object)
			}
			if len(objects) == 0 {
				t.Fatal("the handle names no log object")
			}
			// A snapshot truncates the log before it: what no confirmed
			// checkpoint holds is deleted.
			if err := o.cp.Materialize(ctx); err != nil {
				t.Fatal(err)
			}
			deleted := func() int {
				n := 0
				for _, obj := range objects {
					if _, ok := b.ObjectBytes(obj); !ok {
						n++
					}
				}
				return n
			}
			if abort {
				deadline := time.Now().Add(5 * time.Second)
				for deleted() < len(objects) && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				if n := deleted(); n < len(objects) {
					t.Fatalf("%d of the aborted checkpoint's %d log objects left", len(objects)-n, len(objects))
				}
				return
			}
			time.Sleep(100 * time.Millisecond) // time for a wrong deletion
			if n := deleted(); n > 0 {
				t.Fatalf("%d of the completed checkpoint's %d log objects deleted", n, len(objects))
			}
			o.cp.Close()
			r2 := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
			restore(t, r2, r.h)
			diff(t, want, dump(t, r2))
		})
	}
}

// TestFailedRestore: a restore that fails part way leaves the stores empty,
// with logging off, and the checkpointer refuses to checkpoint or
// materialise (ErrRestoreFailed) until a restore succeeds.
func TestFailedRestore(t *testing.T) {
	ctx := context.Background()
	b := dstltest.NewBackend()
	o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
	h, want := scenario(t, o, true)
	o.cp.Close()
	if len(h.Snapshots) == 0 || len(h.Logs) == 0 {
		t.Fatalf("handle %+v: want a snapshot and a log", h)
	}
	// The log after the snapshot cannot be read: the snapshot loads, the
	// replay fails.
	logObj := h.Logs[len(h.Logs)-1].Remote.Entries[0].Object
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op == dstltest.OpGet && name == logObj {
			return dstltest.Fault{Err: errors.New("unreachable")}
		}
		return dstltest.Fault{}
	})

	r := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
	if err := r.kv.Put("before", "restore"); err != nil {
		t.Fatal(err)
	}
	if err := r.cp.InitializeState(ctx, statestore.CheckpointInfo{CheckpointID: 3}, h); err == nil {
		t.Fatal("restored from a damaged log")
	}
	for _, s := range []interface {
		statestore.Store
		Len() int
	}{r.kv, r.win, r.ver} {
		if s.Len() != 0 || s.Logging() {
			t.Errorf("store %s after a failed restore: %d entries, logging %v; want empty, off", s.Name(), s.Len(), s.Logging())
		}
	}
	if _, err := r.cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 4}); !errors.Is(err, statestore.ErrRestoreFailed) {
		t.Errorf("SnapshotState after a failed restore: %v", err)
	}
	if err := r.cp.Materialize(ctx); !errors.Is(err, statestore.ErrRestoreFailed) {
		t.Errorf("Materialize after a failed restore: %v", err)
	}
	// Once the restore succeeds, all is as usual.
	b.SetFault(nil)
	restore(t, r, h)
	diff(t, want, dump(t, r))
	if !r.kv.Logging() {
		t.Error("logging off after a successful restore")
	}
	checkpoint(t, r, 4)
}

// TestMaterializeIntervalCountsFromTheFirstChange: the interval is the age
// of the oldest change logged since the last snapshot, not the time since
// the last snapshot: a store idle for longer than the interval does not
// materialise on the next tick after a single change.
func TestMaterializeIntervalCountsFromTheFirstChange(t *testing.T) {
	ctx := context.Background()
	const interval = 200 * time.Millisecond
	o := newOperator(t, newStorage(t, dstltest.NewBackend()), "op-0", allGroups, statestore.Config{MaterializeInterval: interval})
	time.Sleep(2 * interval) // idle
	if err := o.kv.Put("a", "1"); err != nil {
		t.Fatal(err)
	}
	if err := o.cp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	logged := time.Now()
	time.Sleep(interval / 2)
	if n := o.cp.Stats().Materializations; n != 0 {
		t.Fatalf("materialised %v after the first change, the interval is %v", time.Since(logged), interval)
	}
	for o.cp.Stats().Materializations == 0 && time.Since(logged) < 5*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	if n := o.cp.Stats().Materializations; n != 1 {
		t.Fatalf("%d materialisations %v after the change", n, time.Since(logged))
	}
	// Nothing changed since: no more snapshots.
	time.Sleep(2 * interval)
	if n := o.cp.Stats().Materializations; n != 1 {
		t.Errorf("%d materialisations without a change", n)
	}
}

// TestKeepSnapshots: by default the checkpointer deletes the snapshot
// objects that a completed checkpoint superseded; with KeepSnapshots it
// deletes none (a job deletes them, e.g. by its catalog's deletion rule),
// but still deletes the local copies it no longer needs.
func TestKeepSnapshots(t *testing.T) {
	for _, tc := range []struct {
		name        string
		keep        bool
		wantDeleted bool
	}{
		{"checkpointer deletes", false, true},
		{"job deletes", true, false},
	} {
		for _, disk := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: ", memory", true: ", disk"}[disk], func(t *testing.T) { testKeepSnapshots(t, tc.keep, tc.wantDeleted, disk) })
		}
	}
}

func testKeepSnapshots(t *testing.T, keep, wantDeleted, disk bool) {
	ctx := context.Background()
	b := dstltest.NewBackend()
	dir := t.TempDir()
	cfg := dstl.DefaultConfig("mem://test")
	cfg.JobID, cfg.BatchPersistDelay = "job", dstl.NoBatchDelay
	cfg.LocalRecoveryEnabled, cfg.LocalRecoveryDir = true, dir
	s, err := dstl.New(cfg, b, dstl.WithLocalRecovery(duplicating.Open))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	scfg := statestore.Config{KeepSnapshots: keep}
	if disk {
		scfg.Dir = t.TempDir()
	}
	o := newOperator(t, s, "op-0", allGroups, scfg)
	w := newWorkload(4)
	var written []string // every snapshot object and file, oldest first
	var last *statestore.CheckpointHandle
	for id := int64(1); id <= 6; id++ {
		w.run(t, o, 100)
		if err := o.cp.Materialize(ctx); err != nil {
			t.Fatal(err)
		}
		w.run(t, o, 50)
		last = checkpoint(t, o, id)
		for _, n := range snapshotNames(last) {
			if !slices.Contains(written, n) {
				written = append(written, n)
			}
		}
	}
	kept := snapshotNames(last)
	superseded := 0
	for i, name := range written {
		_, remote := b.ObjectBytes(name)
		_, lerr := os.Stat(filepath.Join(dir, filepath.FromSlash(name)))
		local := lerr == nil
		named := slices.Contains(kept, name)
		if !named {
			superseded++
		}
		if wantRemote := named || !wantDeleted; remote != wantRemote {
			t.Errorf("object %d of %d (%s) on the backend: %v, want %v", i+1, len(written), name, remote, wantRemote)
		}
		if local != named {
			t.Errorf("local copy of object %d of %d (%s): %v, want %v", i+1, len(written), name, local, named)
		}
	}
	if superseded == 0 {
		t.Fatalf("no object superseded among %q", written)
	}
	if got := o.cp.Stats().SnapshotsDeleted; (got > 0) != wantDeleted {
		t.Errorf("Stats.SnapshotsDeleted = %d", got)
	}
}

// TestOwnRestoreKeepsSharedSnapshots: after a split, both halves restore
// the whole operator's snapshot, and their checkpoints name it (before
// their first materialisation), or, on disk, their manifests go on naming
// its files. A half that then restarts from its own checkpoint must not
// take the shared objects for its own: the other half's next checkpoint
// still names them. It used to, and deleted them once its own snapshots
// no longer named them: the other half's checkpoint restored no more
// (ErrNotFound). The lower half has the whole operator's name (an
// operator instance keeps its name across a rescale).
func TestOwnRestoreKeepsSharedSnapshots(t *testing.T) {
	ctx := context.Background()
	for _, disk := range []bool{false, true} {
		for _, materialize := range []bool{false, true} {
			t.Run(fmt.Sprintf("disk=%v/materialize=%v", disk, materialize), func(t *testing.T) {
				cfg := func() statestore.Config {
					if disk {
						return statestore.Config{Dir: t.TempDir()}
					}
					return statestore.Config{}
				}
				b := dstltest.NewBackend()
				w := newOperator(t, newStorage(t, b), "op-0", allGroups, cfg())
				newWorkload(1).run(t, w, 400)
				if err := w.cp.Materialize(ctx); err != nil {
					t.Fatal(err)
				}
				h1 := checkpoint(t, w, 1)
				shared := snapshotNames(h1)
				w.cp.Close()

				lo := dstl.KeyGroupRange{Start: 0, End: maxP/2 - 1}
				hi := dstl.KeyGroupRange{Start: maxP / 2, End: maxP - 1}
				a := newOperator(t, newStorage(t, b), "op-0", lo, cfg())
				c := newOperator(t, newStorage(t, b), "op-1", hi, cfg())
				restore(t, a, h1)
				restore(t, c, h1)
				if materialize {
					change(t, a, 1)
					if err := a.cp.Materialize(ctx); err != nil {
						t.Fatal(err)
					}
				}
				ha := checkpoint(t, a, 2)
				checkpoint(t, c, 2)
				a.cp.Close()

				// The lower half restarts from its own checkpoint, and
				// changes and materialises until its snapshots name none
				// of the shared objects.
				a2 := newOperator(t, newStorage(t, b), "op-0", lo, cfg())
				restore(t, a2, ha)
				for round := range 4 {
					change(t, a2, round)
					for i := range 400 { // on disk, enough changed bytes to sweep the whole span
						if k := fmt.Sprintf("big-%03d", i); lo.Contains(statestore.KeyGroup([]byte(k), maxP)) {
							if err := a2.kv.Put(k, value200(uint64(round*1000+i))); err != nil {
								t.Fatal(err)
							}
						}
					}
					if err := a2.cp.Materialize(ctx); err != nil {
						t.Fatal(err)
					}
				}
				ha3 := checkpoint(t, a2, 3)
				for _, o := range snapshotNames(ha3) {
					if slices.Contains(shared, o) {
						t.Fatalf("the lower half's checkpoint 3 still names %s of the whole operator's snapshot", o)
					}
				}
				want := dump(t, c)
				hc := checkpoint(t, c, 3)
				if !slices.Equal(snapshotNames(hc), shared) {
					t.Fatalf("the upper half's checkpoint names %q, want the whole operator's snapshot %q", snapshotNames(hc), shared)
				}
				for _, o := range shared {
					if _, ok := b.ObjectBytes(o); !ok {
						t.Errorf("%s, which the upper half's checkpoint names, was deleted", o)
					}
				}
				r := newOperator(t, newStorage(t, b), "op-2", hi, cfg())
				restore(t, r, hc)
				diff(t, want, dump(t, r))
			})
		}
	}
}
