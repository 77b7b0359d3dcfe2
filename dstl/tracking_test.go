package dstl_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

// sharedObject makes two writers persist into one object and returns them
// with their handles.
func sharedObject(t *testing.T, b *dstltest.Backend, s *dstl.Storage) (w1, w2 *dstl.Writer, h1, h2 dstl.Handle) {
	t.Helper()
	w1 = newWriter(t, s, "a", dstl.KeyGroupRange{Start: 0, End: 0})
	w2 = newWriter(t, s, "b", dstl.KeyGroupRange{Start: 1, End: 1})
	mustAppend(t, w1, 0, "a")
	mustAppend(t, w2, 1, "b")
	var wg sync.WaitGroup
	wg.Go(func() { h1 = persist(t, w1, 0, 1) })
	wg.Go(func() { h2 = persist(t, w2, 0, 1) })
	wg.Wait()
	if h1.Entries[0].Object != h2.Entries[0].Object {
		t.Fatalf("writers did not share an object: %s vs %s", h1.Entries[0].Object, h2.Entries[0].Object)
	}
	return w1, w2, h1, h2
}

func batchingConfig() dstl.Config {
	cfg := testConfig()
	cfg.BatchPersistDelay = 200 * time.Millisecond
	return cfg
}

// settle waits until the discard pool has had its chance.
func settle(t *testing.T, b *dstltest.Backend, objects int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d objects to remain", objects), func() bool { return b.Len() == objects })
	time.Sleep(20 * time.Millisecond)
	if b.Len() != objects {
		t.Fatalf("objects = %d, want %d", b.Len(), objects)
	}
}

func TestSharedObjectDeletedWhenLastReleases(t *testing.T) {
	b := dstltest.NewBackend()
	s := newStorage(t, b, batchingConfig())
	w1, w2, _, h2 := sharedObject(t, b, s)
	obj := h2.Entries[0].Object
	w1.Reset(0, w1.NextSequenceNumber(), 1) // checkpoint 1 was aborted
	w2.Reset(0, w2.NextSequenceNumber(), 1)

	w1.Truncate(w1.NextSequenceNumber())
	time.Sleep(50 * time.Millisecond)
	if _, ok := b.ObjectBytes(obj); !ok {
		t.Fatal("object deleted while writer b still refers to it")
	}
	if got := readAll(t, b, h2, w2.KeyGroups()); !slices.Equal(got, []string{"1:b"}) {
		t.Fatalf("read back %q", got)
	}
	w2.Truncate(w2.NextSequenceNumber())
	settle(t, b, 0)
	if !slices.Contains(b.DeletedNames(), obj) {
		t.Fatalf("deleted %v, want %s", b.DeletedNames(), obj)
	}
}

func TestConfirmedObjectIsNeverDeleted(t *testing.T) {
	b := dstltest.NewBackend()
	s := newStorage(t, b, batchingConfig())
	w1, w2, h1, _ := sharedObject(t, b, s)
	w1.Confirm(0, w1.NextSequenceNumber(), 1)
	w1.Truncate(w1.NextSequenceNumber())
	w2.Truncate(w2.NextSequenceNumber())
	if err := w1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	settle(t, b, 1)
	if _, ok := b.ObjectBytes(h1.Entries[0].Object); !ok {
		t.Fatal("the confirmed checkpoint's object was deleted")
	}
}

func TestResetKeepsResultsForReuse(t *testing.T) {
	b := dstltest.NewBackend()
	s := newStorage(t, b, testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	h1 := persist(t, w, 0, 1)
	w.Reset(0, w.NextSequenceNumber(), 1)
	h2 := persist(t, w, 0, 2)
	if !slices.Equal(h1.Entries, h2.Entries) || b.Counts()[dstltest.OpPut] != 1 {
		t.Fatalf("after reset, persist uploaded again: %+v vs %+v", h1.Entries, h2.Entries)
	}
	settle(t, b, 1)
}

// TestTruncateWhileUploading: a result that arrives after its change set
// was truncated releases the object, which is then deleted.
func TestTruncateWhileUploading(t *testing.T) {
	b, w, f := slowPersist(t)
	w.Truncate(w.NextSequenceNumber())
	if _, err := f.Wait(context.Background()); err == nil {
		t.Fatal("persist of a truncated change set succeeded")
	}
	waitFor(t, "the put", func() bool { return b.Counts()[dstltest.OpPut] == 1 })
	settle(t, b, 0)
}

// TestCloseReleasesUnreported: change sets no returned handle covers are
// released on Close; those a handle covers stay for the checkpoint owner.
func TestCloseReleasesUnreported(t *testing.T) {
	b := dstltest.NewBackend()
	cfg := testConfig()
	cfg.PreemptivePersistThreshold = 1
	s := newStorage(t, b, cfg)
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "reported")
	h := persist(t, w, 0, 1)
	mustAppend(t, w, 0, "preemptive") // uploaded on its own, in no handle
	waitFor(t, "the preemptive upload", func() bool { return b.Len() == 2 })
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	settle(t, b, 1)
	if _, ok := b.ObjectBytes(h.Entries[0].Object); !ok {
		t.Fatal("an object a handle covers was deleted on close")
	}
	if err := w.Append(context.Background(), 0, []byte("x")); err == nil {
		t.Fatal("append after close succeeded")
	}
}

func TestTruncateAndClose(t *testing.T) {
	b := dstltest.NewBackend()
	s := newStorage(t, b, testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "kept")
	persist(t, w, 0, 1)
	tail := w.NextSequenceNumber()
	mustAppend(t, w, 0, "tail")
	persist(t, w, tail, 2)
	w.Reset(tail, w.NextSequenceNumber(), 2) // aborted
	if err := w.TruncateAndClose(tail); err != nil {
		t.Fatal(err)
	}
	settle(t, b, 1) // the tail's object is gone; the first stays with its handle
}

// TestNeverDeletedWhileReferenced runs writers through many checkpoints
// with random truncation and checks, after every step, that every handle
// still in use reads back.
func TestNeverDeletedWhileReferenced(t *testing.T) {
	b := dstltest.NewBackend()
	cfg := testConfig()
	cfg.BatchPersistDelay = 2 * time.Millisecond
	s := newStorage(t, b, cfg)
	const writers = 8
	type state struct {
		w    *dstl.Writer
		from dstl.SequenceNumber
		h    dstl.Handle
		want []string
	}
	st := make([]*state, writers)
	for i := range st {
		st[i] = &state{w: newWriter(t, s, fmt.Sprint(i), dstl.KeyGroupRange{Start: i, End: i})}
	}
	for cp := int64(1); cp <= 20; cp++ {
		var wg sync.WaitGroup
		for i, x := range st {
			wg.Go(func() {
				c := fmt.Sprintf("%d-%d", i, cp)
				mustAppend(t, x.w, i, c)
				x.want = append(x.want, fmt.Sprintf("%d:%s", i, c))
				x.h = persist(t, x.w, x.from, cp)
				if cp%2 == 0 {
					x.w.Confirm(x.from, x.w.NextSequenceNumber(), cp)
				}
				if cp%5 == int64(i%5) { // materialised: drop everything before now
					x.from = x.w.NextSequenceNumber()
					x.w.Truncate(x.from)
					x.want = nil
				}
			})
		}
		wg.Wait()
		for i, x := range st {
			if x.from == x.w.NextSequenceNumber() {
				continue // nothing since the truncation
			}
			if got := readAll(t, b, x.h, x.w.KeyGroups()); !slices.Equal(got, x.want) {
				t.Fatalf("checkpoint %d writer %d: read back %q, want %q", cp, i, got, x.want)
			}
		}
	}
}

// TestTruncateKeepsPendingCheckpoint: a materialisation may finish before a
// checkpoint that still needs the truncated change sets completes; their
// objects stay until the checkpoint is confirmed (then owned by its owner)
// or aborted (then deleted).
func TestTruncateKeepsPendingCheckpoint(t *testing.T) {
	for _, outcome := range []string{"confirmed", "aborted", "subsumed"} {
		t.Run(outcome, func(t *testing.T) {
			b := dstltest.NewBackend()
			s := newStorage(t, b, testConfig())
			w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
			mustAppend(t, w, 0, "x")
			h := persist(t, w, 0, 1) // checkpoint 1 is pending
			to := w.NextSequenceNumber()
			if err := w.Truncate(to); err != nil {
				t.Fatal(err)
			}
			time.Sleep(30 * time.Millisecond)
			if _, ok := b.ObjectBytes(h.Entries[0].Object); !ok {
				t.Fatal("object of a pending checkpoint deleted by Truncate")
			}
			switch outcome {
			case "confirmed":
				w.Confirm(0, to, 1)
				settle(t, b, 1)
				if got := readAll(t, b, h, w.KeyGroups()); !slices.Equal(got, []string{"0:x"}) {
					t.Fatalf("read back %q", got)
				}
			case "aborted":
				w.Reset(0, to, 1)
				settle(t, b, 0)
			case "subsumed": // checkpoint 2 completes: 1 never will
				mustAppend(t, w, 0, "y")
				from := w.NextSequenceNumber() - 1
				persist(t, w, from, 2)
				w.Confirm(from, w.NextSequenceNumber(), 2)
				settle(t, b, 1) // checkpoint 2's object only
			}
		})
	}
}

func TestRangeChecks(t *testing.T) {
	s := newStorage(t, dstltest.NewBackend(), testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "a")
	w.NextSequenceNumber()
	mustAppend(t, w, 0, "b")
	if err := w.Truncate(w.NextSequenceNumber() + 5); err == nil {
		t.Fatal("truncate past the active change set succeeded")
	}
	if err := w.Truncate(1); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Persist(context.Background(), 0, 1); err == nil || !strings.Contains(err.Error(), "truncated up to 1") {
		t.Fatalf("persist from below the truncation point = %v, want an error", err)
	}
	if err := w.Append(context.Background(), 0, make([]byte, 0)); err != nil {
		t.Fatalf("empty change: %v", err)
	}
}

// TestConfirmOnlyTakesTheCheckpointsSets: a late confirm of checkpoint 1
// over a range that reaches into checkpoint 2's sets hands over only what
// checkpoint 1's handle covered; checkpoint 2, aborted, leaves nothing.
func TestConfirmOnlyTakesTheCheckpointsSets(t *testing.T) {
	b := dstltest.NewBackend()
	s := newStorage(t, b, testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "one")
	f1, _ := w.Persist(context.Background(), 0, 1)
	r1, err := f1.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, w, 0, "two")
	from2 := w.NextSequenceNumber() - 1
	f2, _ := w.Persist(context.Background(), from2, 2)
	r2, err := f2.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r1.From != 0 || r1.To != 1 || r2.From != from2 || r2.To != from2+1 {
		t.Fatalf("ranges [%d,%d) and [%d,%d)", r1.From, r1.To, r2.From, r2.To)
	}
	w.Confirm(0, w.NextSequenceNumber(), 1) // too wide a range
	w.Reset(r2.From, r2.To, 2)
	if err := w.Truncate(w.NextSequenceNumber()); err != nil {
		t.Fatal(err)
	}
	settle(t, b, 1)
	if _, ok := b.ObjectBytes(r1.Remote.Entries[0].Object); !ok {
		t.Fatal("checkpoint 1's object was deleted")
	}
}

// TestResetBeforeUploadFinishes: a checkpoint aborted while its upload runs
// does not keep the change sets once they are truncated.
func TestResetBeforeUploadFinishes(t *testing.T) {
	b, w, f := slowPersist(t)
	w.Reset(0, w.NextSequenceNumber(), 1) // aborted while uploading
	res, err := f.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Truncate(res.To); err != nil {
		t.Fatal(err)
	}
	settle(t, b, 0)
}

// slowPersist starts checkpoint 1 of one change over a backend whose puts
// take 50 ms, and returns while the upload runs.
func slowPersist(t *testing.T) (*dstltest.Backend, *dstl.Writer, *dstl.Future) {
	t.Helper()
	b := dstltest.NewBackend()
	b.SetFault(func(op dstltest.Op, _ string) dstltest.Fault {
		if op == dstltest.OpPut {
			return dstltest.Fault{Delay: 50 * time.Millisecond}
		}
		return dstltest.Fault{}
	})
	s := newStorage(t, b, testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	f, err := w.Persist(context.Background(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return b, w, f
}

// TestLateResultOfSubsumedCheckpoint: checkpoint 1's upload ends after
// checkpoint 2 was confirmed, so checkpoint 1 can never complete; its
// change set must not stay pending for it, and once truncated (or its
// writer closed) its object is deleted.
func TestLateResultOfSubsumedCheckpoint(t *testing.T) {
	for _, end := range []string{"truncate", "close"} {
		t.Run(end, func(t *testing.T) {
			b := dstltest.NewBackend()
			b.SetFault(dstltest.StallFirst(dstltest.OpPut))
			s := newStorage(t, b, testConfig())
			w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
			mustAppend(t, w, 0, "one")
			f1, err := w.Persist(context.Background(), 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := b.WaitStalled(ctx, 1); err != nil {
				t.Fatal(err)
			}
			mustAppend(t, w, 0, "two")
			from2 := w.NextSequenceNumber() - 1
			f2, err := w.Persist(context.Background(), from2, 2)
			if err != nil {
				t.Fatal(err)
			}
			r2, err := f2.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			w.Confirm(r2.From, r2.To, 2)
			b.ReleaseStalls()
			r1, err := f1.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			switch end {
			case "truncate":
				if err := w.Truncate(r2.To); err != nil {
					t.Fatal(err)
				}
			case "close":
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
			}
			settle(t, b, 1) // checkpoint 2's object, owned
			if _, ok := b.ObjectBytes(r1.Remote.Entries[0].Object); ok {
				t.Fatal("the object of checkpoint 1, subsumed, was kept")
			}
		})
	}
}

// TestEmptyPersistHasNoLocalHandle: without local recovery, a persist with
// no change set returns no local handle, as for any other persist.
func TestEmptyPersistHasNoLocalHandle(t *testing.T) {
	s := newStorage(t, dstltest.NewBackend(), testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	f, err := w.Persist(t.Context(), w.NextSequenceNumber(), 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Remote.Empty() || res.Local != nil {
		t.Fatalf("empty persist: remote %+v, local %+v; want an empty remote handle and no local one", res.Remote, res.Local)
	}
}

// TestPersistFailedByTruncate: a persist whose change set is truncated
// while it uploads fails with an error wrapping ErrTruncated.
func TestPersistFailedByTruncate(t *testing.T) {
	_, w, f := slowPersist(t)
	if err := w.Truncate(w.NextSequenceNumber()); err != nil {
		t.Fatal(err)
	}
	_, err := f.Wait(t.Context())
	if !errors.Is(err, dstl.ErrTruncated) || !strings.Contains(err.Error(), "change set 0 was truncated") {
		t.Fatalf("persist of a truncated set = %v, want an error wrapping ErrTruncated naming change set 0", err)
	}
}

// TestImpossibleRanges: a persist from past the active change set, and a
// confirm or reset of a range that no persist can have returned, are
// errors wrapping ErrTruncated that name the values, and change nothing.
func TestImpossibleRanges(t *testing.T) {
	b := dstltest.NewBackend()
	s := newStorage(t, b, testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "a")
	res := persistResult(t, w, 0, 1) // [0, 1); the active set is 1
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"persist past the active set", func() error { _, err := w.Persist(t.Context(), 3, 2); return err },
			"persist checkpoint 2 from change set 3: past the active change set 1"},
		{"confirm past the active set", func() error { return w.Confirm(0, 5, 1) }, "confirm checkpoint 1 of log " + w.LogID().String() + ": range [0, 5) ends past the active change set 1"},
		{"confirm reversed", func() error { return w.Confirm(1, 0, 1) }, "range [1, 0) starts past its end"},
		{"reset past the active set", func() error { return w.Reset(0, 2, 1) }, "reset checkpoint 1 of log " + w.LogID().String() + ": range [0, 2) ends past the active change set 1"},
		{"reset reversed", func() error { return w.Reset(1, 0, 1) }, "range [1, 0) starts past its end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, dstl.ErrTruncated) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error wrapping ErrTruncated with %q", err, tc.want)
			}
		})
	}
	if got := w.NextSequenceNumber(); got != res.To {
		t.Fatalf("active set %d after the failed calls, want %d", got, res.To)
	}
	// The failed calls left checkpoint 1 pending: truncated, its object stays.
	if err := w.Truncate(res.To); err != nil {
		t.Fatal(err)
	}
	settle(t, b, 1)
	if err := w.Confirm(res.From, res.To, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Reset(res.To, res.To, 2); err != nil {
		t.Fatalf("reset of an empty range at the active set: %v", err)
	}
}

func persistResult(t testing.TB, w *dstl.Writer, from dstl.SequenceNumber, cp int64) dstl.PersistResult {
	t.Helper()
	f, err := w.Persist(context.Background(), from, cp)
	if err != nil {
		t.Fatalf("Persist(%d, %d): %v", from, cp, err)
	}
	res, err := f.Wait(context.Background())
	if err != nil {
		t.Fatalf("persist %d: %v", cp, err)
	}
	return res
}
