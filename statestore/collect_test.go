package statestore_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
)

// jobObjects returns the names of the objects under the job "job".
func jobObjects(t testing.TB, b backends.Backend) []string {
	t.Helper()
	var names []string
	if err := b.List(context.Background(), "job/", func(oi backends.ObjectInfo) error {
		names = append(names, oi.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return names
}

// referenced returns the objects the handles refer to, sorted.
func referenced(hs ...*statestore.CheckpointHandle) []string {
	set := map[string]bool{}
	for _, h := range hs {
		for _, o := range h.Objects() {
			set[o] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// collectNow runs a collection and fails the test on its error.
func collectNow(t testing.TB, o *operator) *collect.Report {
	t.Helper()
	rep, err := o.cp.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestCollectRetains: a checkpointer alone on its storage's job keeps,
// after each collection, exactly the objects of its last Retain
// completed checkpoints (with no grace), in memory and on disk; its
// checkpoints restore.
func TestCollectRetains(t *testing.T) {
	for _, disk := range []bool{false, true} {
		for _, retain := range []int{0, 3} {
			t.Run(map[bool]string{false: "memory", true: "disk"}[disk]+map[int]string{0: ", default retain", 3: ", retain 3"}[retain], func(t *testing.T) {
				ctx := context.Background()
				b := dstltest.NewBackend()
				cfg := statestore.Config{Retain: retain, Grace: statestore.NoGrace, CollectInterval: -1}
				if disk {
					cfg.Dir = t.TempDir()
				}
				o := newOperator(t, newStorage(t, b), "op-0", allGroups, cfg)
				w := newWorkload(3)
				k := max(retain, statestore.DefaultRetain)
				var hs []*statestore.CheckpointHandle
				for id := int64(1); id <= 9; id++ {
					w.run(t, o, 60)
					if id%3 == 0 {
						if err := o.cp.Materialize(ctx); err != nil {
							t.Fatal(err)
						}
					}
					hs = append(hs, checkpoint(t, o, id))
					collectNow(t, o)
					want := referenced(hs[max(0, len(hs)-k):]...)
					if got := jobObjects(t, b); !slices.Equal(got, want) {
						t.Fatalf("after checkpoint %d: objects\n%q\nwant those of the last %d checkpoints\n%q", id, got, k, want)
					}
				}
				st := o.cp.Stats()
				if st.Collections != 9 || st.CollectFailures != 0 || st.CollectedObjects == 0 {
					t.Errorf("stats %+v", st)
				}
				// The retained checkpoints restore: the latest to the
				// state it took, the oldest at all.
				rcfg := func() statestore.Config {
					c := statestore.Config{KeepSnapshots: true}
					if disk {
						c.Dir = t.TempDir()
					}
					return c
				}
				want := dump(t, o)
				w.run(t, o, 10)
				r := newOperator(t, newStorage(t, b), "op-0", allGroups, rcfg())
				restore(t, r, hs[len(hs)-1])
				diff(t, want, dump(t, r))
				if k > 1 {
					restore(t, newOperator(t, newStorage(t, b), "op-0", allGroups, rcfg()), hs[len(hs)-k])
				}
			})
		}
	}
}

// TestCollectAfterCrash: what a crashed process left (the uploads and the
// snapshot of checkpoints that no kept handle names) goes once the
// restarted process's checkpoints pass the checkpoints it was made for;
// objects younger than the grace stay.
func TestCollectAfterCrash(t *testing.T) {
	ctx := context.Background()
	b := dstltest.NewBackend()
	cfg := statestore.Config{Grace: statestore.NoGrace, CollectInterval: -1}
	o := newOperator(t, newStorage(t, b), "op-0", allGroups, cfg)
	w := newWorkload(5)
	var kept *statestore.CheckpointHandle
	for id := int64(1); id <= 4; id++ {
		w.run(t, o, 50)
		kept = checkpoint(t, o, id)
	}
	want := dump(t, o)
	// Checkpoints 5 and 6 complete, but the crash comes before the program
	// kept their handles; a materialisation and another upload follow.
	for id := int64(5); id <= 6; id++ {
		w.run(t, o, 50)
		checkpoint(t, o, id)
	}
	w.run(t, o, 50)
	if err := o.cp.Materialize(ctx); err != nil {
		t.Fatal(err)
	}
	w.run(t, o, 50)
	if _, err := o.cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 7}); err != nil {
		t.Fatal(err)
	}
	crashed := jobObjects(t, b)

	r := newOperator(t, newStorage(t, b), "op-0", allGroups, cfg)
	restore(t, r, kept)
	diff(t, want, dump(t, r))
	var hs []*statestore.CheckpointHandle
	for id := int64(5); id <= 8; id++ {
		w.run(t, r, 20)
		hs = append(hs, checkpoint(t, r, id))
		rep := collectNow(t, r)
		left := 0
		for _, name := range crashed {
			if slices.Contains(jobObjects(t, b), name) && !slices.Contains(hs[len(hs)-1].Objects(), name) {
				left++
			}
		}
		// Objects made for checkpoint 7 are held until checkpoint 7
		// completes.
		if id >= 7 && left > 0 {
			t.Errorf("after checkpoint %d: %d objects of the crashed process left (%d held)", id, left, rep.Held.Objects)
		}
		if id < 7 && rep.Held.Objects == 0 {
			t.Errorf("after checkpoint %d: nothing held", id)
		}
	}
	if got, want := jobObjects(t, b), referenced(hs[len(hs)-1]); !slices.Equal(got, want) {
		t.Fatalf("objects\n%q\nwant\n%q", got, want)
	}

	// With a grace, what is young stays: here the logs the restored
	// checkpoint names, which a materialisation superseded.
	g := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{CollectInterval: -1})
	restore(t, g, hs[len(hs)-1])
	w.run(t, g, 20)
	checkpoint(t, g, 9)
	if err := g.cp.Materialize(ctx); err != nil {
		t.Fatal(err)
	}
	checkpoint(t, g, 10)
	before := len(jobObjects(t, b))
	rep := collectNow(t, g)
	if rep.Deleted.Objects != 0 || rep.Young.Objects == 0 || len(jobObjects(t, b)) != before {
		t.Errorf("with the default grace: %d deleted, %d young, %d objects left of %d", rep.Deleted.Objects, rep.Young.Objects, len(jobObjects(t, b)), before)
	}
}

// TestCollectInBackground: completed checkpoints start collections in
// the background, at most one per CollectInterval.
func TestCollectInBackground(t *testing.T) {
	b := dstltest.NewBackend()
	o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{Grace: statestore.NoGrace, CollectInterval: time.Nanosecond})
	w := newWorkload(6)
	var last *statestore.CheckpointHandle
	for id := int64(1); id <= 5; id++ {
		w.run(t, o, 50)
		last = checkpoint(t, o, id)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Equal(jobObjects(t, b), referenced(last)) {
		if time.Now().After(deadline) {
			t.Fatalf("objects %q, want %q; stats %+v", jobObjects(t, b), referenced(last), o.cp.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A long interval: one collection, after the first checkpoint.
	b2 := dstltest.NewBackend()
	o2 := newOperator(t, newStorage(t, b2), "op-0", allGroups, statestore.Config{Grace: statestore.NoGrace, CollectInterval: time.Hour})
	w.run(t, o2, 50)
	checkpoint(t, o2, 1)
	for o2.cp.Stats().Collections == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no collection after the first checkpoint")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for id := int64(2); id <= 5; id++ {
		w.run(t, o2, 50)
		checkpoint(t, o2, id)
	}
	time.Sleep(100 * time.Millisecond)
	if n := o2.cp.Stats().Collections; n != 1 {
		t.Errorf("%d collections within the interval, want 1", n)
	}
}

// TestCollectSwitch: with KeepSnapshots the checkpointer collects
// nothing; with other writers on its storage it refuses to delete log
// objects, which hold their changes too; with SharedStorage it deletes
// snapshot objects of its operator only.
func TestCollectSwitch(t *testing.T) {
	ctx := context.Background()
	t.Run("keep snapshots", func(t *testing.T) {
		b := dstltest.NewBackend()
		o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{KeepSnapshots: true, Grace: statestore.NoGrace})
		w := newWorkload(1)
		for id := int64(1); id <= 3; id++ {
			w.run(t, o, 50)
			checkpoint(t, o, id)
		}
		if _, err := o.cp.Collect(ctx); err == nil || !strings.Contains(err.Error(), "KeepSnapshots") {
			t.Fatalf("Collect = %v, want an error naming KeepSnapshots", err)
		}
		if n := len(jobObjects(t, b)); n != 3 {
			t.Errorf("%d objects, want the 3 log objects", n)
		}
	})
	lo := dstl.KeyGroupRange{Start: 0, End: maxP/2 - 1}
	hi := dstl.KeyGroupRange{Start: maxP / 2, End: maxP - 1}
	t.Run("other writers", func(t *testing.T) {
		b := dstltest.NewBackend()
		s := newStorage(t, b)
		cfg := statestore.Config{Grace: statestore.NoGrace, CollectInterval: -1}
		a := newOperator(t, s, "op-0", lo, cfg)
		c := newOperator(t, s, "op-1", hi, cfg)
		for id := int64(1); id <= 3; id++ {
			change(t, a, int(id))
			change(t, c, int(id))
			checkpoint(t, a, id)
			checkpoint(t, c, id)
		}
		before := jobObjects(t, b)
		_, err := a.cp.Collect(ctx)
		if err == nil || !strings.Contains(err.Error(), "SharedStorage") {
			t.Fatalf("Collect = %v, want an error naming SharedStorage", err)
		}
		if !slices.Equal(jobObjects(t, b), before) {
			t.Errorf("objects deleted")
		}
	})
	t.Run("shared storage", func(t *testing.T) {
		b := dstltest.NewBackend()
		s := newStorage(t, b)
		cfg := statestore.Config{Grace: statestore.NoGrace, CollectInterval: -1, SharedStorage: true}
		a := newOperator(t, s, "op-0", lo, cfg)
		c := newOperator(t, s, "op-1", hi, cfg)
		// Snapshots of op-0 that no handle names: a crashed run's.
		for i := range 2 {
			change(t, a, i)
			if err := a.cp.Materialize(ctx); err != nil {
				t.Fatal(err)
			}
		}
		stale := snapshotNames(checkpoint(t, a, 1))
		a.cp.Close()
		a = newOperator(t, s, "op-0", lo, cfg)
		var ha, hc *statestore.CheckpointHandle
		for id := int64(1); id <= 3; id++ {
			change(t, a, int(id))
			change(t, c, int(id))
			if err := a.cp.Materialize(ctx); err != nil {
				t.Fatal(err)
			}
			ha, hc = checkpoint(t, a, id), checkpoint(t, c, id)
		}
		logsBefore := 0
		for _, n := range jobObjects(t, b) {
			if strings.HasSuffix(n, ".dstl") {
				logsBefore++
			}
		}
		rep := collectNow(t, a)
		for _, n := range rep.Objects {
			if n.Deleted && !strings.HasPrefix(n.Name, "job/statestore/op-0/") {
				t.Errorf("deleted %s", n.Name)
			}
		}
		left := jobObjects(t, b)
		for _, n := range stale {
			if slices.Contains(left, n) {
				t.Errorf("stale snapshot %s left", n)
			}
		}
		logs := 0
		for _, n := range left {
			if strings.HasSuffix(n, ".dstl") {
				logs++
			}
		}
		if logs != logsBefore {
			t.Errorf("%d log objects left of %d", logs, logsBefore)
		}
		for _, n := range referenced(ha, hc) {
			if !slices.Contains(left, n) {
				t.Errorf("%s, which a checkpoint names, deleted", n)
			}
		}
	})
}

// TestCollectWaitsForUploads: a collection does not begin while a
// checkpoint's upload runs (what it refers to is not known yet); the
// background one begins once it is done.
func TestCollectWaitsForUploads(t *testing.T) {
	ctx := context.Background()
	b := dstltest.NewBackend()
	dcfg := dstl.DefaultConfig("mem://test")
	dcfg.JobID, dcfg.BatchPersistDelay = "job", dstl.NoBatchDelay
	dcfg.UploadTimeout = time.Minute // the stalled upload is not hedged
	s, err := dstl.New(dcfg, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	o := newOperator(t, s, "op-0", allGroups, statestore.Config{Grace: statestore.NoGrace, CollectInterval: -1})
	w := newWorkload(4)
	w.run(t, o, 50)
	checkpoint(t, o, 1)
	b.SetFault(dstltest.StallFirst(dstltest.OpPut))
	w.run(t, o, 50)
	done := make(chan error, 1)
	go func() {
		_, err := o.cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 2})
		done <- err
	}()
	if err := b.WaitStalled(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := o.cp.Collect(ctx); err == nil || !strings.Contains(err.Error(), "upload is running") {
		t.Errorf("Collect during an upload = %v", err)
	}
	b.SetFault(nil)
	b.ReleaseStalls()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	collectNow(t, o)
}

// TestCollectConfig: Retain and Grace reject what they do not mean.
func TestCollectConfig(t *testing.T) {
	s := newStorage(t, dstltest.NewBackend())
	for _, cfg := range []statestore.Config{{Retain: -1}, {Grace: -2 * time.Second}} {
		cfg.Operator, cfg.KeyGroups = "op", allGroups
		if cp, err := statestore.NewCheckpointer(s, cfg); err == nil {
			cp.Close()
			t.Errorf("NewCheckpointer(%+v) accepted", cfg)
		} else if errors.Is(err, statestore.ErrClosed) {
			t.Error(err)
		}
	}
}
