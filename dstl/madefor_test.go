package dstl_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// objectCheckpoints returns the checkpoints the log objects under prefix
// were made for, by their names, sorted.
func objectCheckpoints(t *testing.T, b backends.Backend, prefix string) []int64 {
	t.Helper()
	var out []int64
	err := b.List(t.Context(), prefix, func(oi backends.ObjectInfo) error {
		if n := objname.Parse(prefix, oi.Name); n.Kind == objname.Log {
			out = append(out, n.Checkpoint)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestObjectsRecordTheirCheckpoint: an object uploaded by a persist
// records the persist's checkpoint in its name; one uploaded before its
// persist (pre-emptively) the checkpoint after the newest one the writer
// persisted, confirmed or reset, or set with SetNextCheckpoint, and 1 for
// a writer that knows none.
func TestObjectsRecordTheirCheckpoint(t *testing.T) {
	ctx := t.Context()
	persist := func(t *testing.T, w *dstl.Writer, cp int64) dstl.PersistResult {
		t.Helper()
		f, err := w.Persist(ctx, w.InitialSequenceNumber(), cp)
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// preempt appends past the pre-emptive threshold and waits for the
	// upload it starts.
	preempt := func(t *testing.T, s *dstl.Storage, w *dstl.Writer, b backends.Backend, want int) {
		t.Helper()
		for range 3 {
			if err := w.Append(ctx, 0, make([]byte, 600)); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for len(objectCheckpoints(t, b, "job/")) < want || s.InFlight() > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no pre-emptive upload: %v", objectCheckpoints(t, b, "job/"))
			}
			time.Sleep(time.Millisecond)
		}
	}
	newStore := func(t *testing.T) (*dstl.Storage, backends.Backend) {
		b := dstltest.NewBackend()
		cfg := testConfig()
		cfg.JobID = "job"
		cfg.PreemptivePersistThreshold = 1000
		return newStorage(t, b, cfg), b
	}

	t.Run("persist", func(t *testing.T) {
		s, b := newStore(t)
		w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 3})
		if err := w.Append(ctx, 0, []byte("x")); err != nil {
			t.Fatal(err)
		}
		persist(t, w, 42)
		if got := objectCheckpoints(t, b, "job/"); !slices.Equal(got, []int64{42}) {
			t.Fatalf("objects made for %v, want [42]", got)
		}
		if n := w.NextCheckpoint(); n != 43 {
			t.Fatalf("NextCheckpoint after persisting 42 = %d, want 43", n)
		}
	})
	t.Run("fresh writer", func(t *testing.T) {
		s, b := newStore(t)
		w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 3})
		preempt(t, s, w, b, 1)
		if got := objectCheckpoints(t, b, "job/"); !slices.Equal(got, []int64{1}) {
			t.Fatalf("objects made for %v, want [1]", got)
		}
	})
	t.Run("after a persist", func(t *testing.T) {
		s, b := newStore(t)
		w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 3})
		if err := w.Append(ctx, 0, []byte("x")); err != nil {
			t.Fatal(err)
		}
		persist(t, w, 7)
		preempt(t, s, w, b, 2)
		if got := objectCheckpoints(t, b, "job/"); !slices.Equal(got, []int64{7, 8}) {
			t.Fatalf("objects made for %v, want [7 8]", got)
		}
	})
	t.Run("after a reset", func(t *testing.T) {
		s, b := newStore(t)
		w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 3})
		if err := w.Reset(w.InitialSequenceNumber(), w.NextSequenceNumber(), 11); err != nil {
			t.Fatal(err)
		}
		preempt(t, s, w, b, 1)
		if got := objectCheckpoints(t, b, "job/"); !slices.Equal(got, []int64{12}) {
			t.Fatalf("objects made for %v, want [12]", got)
		}
	})
	t.Run("set", func(t *testing.T) {
		s, b := newStore(t)
		w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 3})
		w.SetNextCheckpoint(100)
		w.SetNextCheckpoint(50) // lower: no change
		preempt(t, s, w, b, 1)
		if got := objectCheckpoints(t, b, "job/"); !slices.Equal(got, []int64{100}) {
			t.Fatalf("objects made for %v, want [100]", got)
		}
	})
	t.Run("batch", func(t *testing.T) {
		// One object holds two writers' change sets: it records the
		// higher checkpoint.
		b := dstltest.NewBackend()
		cfg := testConfig()
		cfg.JobID = "job"
		cfg.BatchPersistDelay = 200 * time.Millisecond
		s := newStorage(t, b, cfg)
		w1 := newWriter(t, s, "op1", dstl.KeyGroupRange{Start: 0, End: 3})
		w2 := newWriter(t, s, "op2", dstl.KeyGroupRange{Start: 4, End: 7})
		for _, w := range []*dstl.Writer{w1, w2} {
			if err := w.Append(ctx, w.KeyGroups().Start, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		f1, err := w1.Persist(ctx, w1.InitialSequenceNumber(), 5)
		if err != nil {
			t.Fatal(err)
		}
		f2, err := w2.Persist(ctx, w2.InitialSequenceNumber(), 9)
		if err != nil {
			t.Fatal(err)
		}
		r1, err1 := f1.Wait(ctx)
		r2, err2 := f2.Wait(context.Background())
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if r1.Remote.Entries[0].Object != r2.Remote.Entries[0].Object {
			t.Skip("the two persists were not batched into one object")
		}
		if got := objectCheckpoints(t, b, "job/"); !slices.Equal(got, []int64{9}) {
			t.Fatalf("objects made for %v, want [9]", got)
		}
	})
}
