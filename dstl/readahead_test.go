package dstl_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

// setsInObjects has one writer persist sets change sets, each into an
// object of its own, each of perSet changes "set-i-j" in key group 0,
// and returns the backend and the handle of them all.
func setsInObjects(t *testing.T, sets, perSet int) (*dstltest.Backend, dstl.Handle) {
	t.Helper()
	b := dstltest.NewBackend()
	cfg := testConfig()
	cfg.BatchPersistDelay = dstl.NoBatchDelay
	s := newStorage(t, b, cfg)
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	var h dstl.Handle
	for i := range sets {
		for j := range perSet {
			mustAppend(t, w, 0, fmt.Sprintf("set-%d-%d", i, j))
		}
		h = persist(t, w, 0, int64(i+1))
	}
	if len(h.Entries) != sets || b.Len() != sets {
		t.Fatalf("%d entries in %d objects, want %d in %d", len(h.Entries), b.Len(), sets, sets)
	}
	return b, h
}

// countGets counts the Gets that began on b.
func countGets(b *dstltest.Backend) *atomic.Int64 {
	var gets atomic.Int64
	b.SetFault(func(op dstltest.Op, _ string) dstltest.Fault {
		if op == dstltest.OpGet {
			gets.Add(1)
		}
		return dstltest.Fault{}
	})
	return &gets
}

// TestReadFetchesAheadOfTheCaller: while the caller still holds the first
// change set, the reader already fetches the next: a restore applies one
// set while the next is fetched and checked. A reader that fetches a set
// only when the caller is done with the last fails it.
func TestReadFetchesAheadOfTheCaller(t *testing.T) {
	b, h := setsInObjects(t, 4, 3)
	gets := countGets(b)
	r := groupZeroReader(t, b)
	n := 0
	err := r.Read(context.Background(), h, func(c dstl.Change) error {
		if n == 0 {
			// Fails on a reader that fetches the next set only
			// once the caller is done with this one.
			waitFor(t, "the Get of the second change set while the caller holds the first", func() bool { return gets.Load() >= 2 })
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 12 {
		t.Fatalf("read %d changes, want 12", n)
	}
}

// TestReadAheadKeepsTheSetHeld: a change set the caller is given stays
// whole while the reader decodes as far ahead as it may: the caller holds
// the first change of each set until the reader fetched every set it can
// ahead, then reads the set's other changes, which must still be the
// set's own.
func TestReadAheadKeepsTheSetHeld(t *testing.T) {
	const sets, perSet = 12, 5
	b, h := setsInObjects(t, sets, perSet)
	gets := countGets(b)
	r := groupZeroReader(t, b)
	var got []string
	err := r.Read(context.Background(), h, func(c dstl.Change) error {
		set := len(got) / perSet
		if len(got)%perSet == 0 {
			// One set decoded before each of those in the channel,
			// and one more waiting to be sent: the most the reader
			// holds ahead of this one.
			want := int64(min(set+1+dstl.SetsAhead+1, sets))
			waitFor(t, fmt.Sprintf("%d Gets while the caller holds set %d", want, set), func() bool { return gets.Load() >= want })
			time.Sleep(20 * time.Millisecond) // the last fetched set decoded too
		}
		got = append(got, string(c.Data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != sets*perSet {
		t.Fatalf("read %d changes, want %d", len(got), sets*perSet)
	}
	for i, g := range got {
		if want := fmt.Sprintf("set-%d-%d", i/perSet, i%perSet); g != want {
			t.Fatalf("change %d is %q, want %q: the set the caller held was overwritten", i, g, want)
		}
	}
}

// TestReadAheadStops: however a read of many change sets ends early (the
// caller stops iterating, its function fails, its context ends), it
// returns what ended it, the goroutine reading ahead has ended, and the
// bytes needed count only the sets the caller was given, not those read
// ahead.
func TestReadAheadStops(t *testing.T) {
	b, h := setsInObjects(t, 10, 3)
	fnErr := errors.New("the caller's error")
	for _, tc := range []struct {
		name string
		read func(context.Context, context.CancelFunc, *dstl.Reader) error
		want error
		sets int // given to the caller
	}{
		{"iteration stopped", func(ctx context.Context, _ context.CancelFunc, r *dstl.Reader) error {
			next, stop := iter.Pull2(r.Changes(ctx, h))
			defer stop()
			if _, err, ok := next(); !ok || err != nil {
				return fmt.Errorf("first change: ok %v, err %v", ok, err)
			}
			return nil
		}, nil, 1},
		{"function failed", func(ctx context.Context, _ context.CancelFunc, r *dstl.Reader) error {
			n := 0
			return r.Read(ctx, h, func(dstl.Change) error {
				if n++; n == 4 {
					return fnErr
				}
				return nil
			})
		}, fnErr, 2},
		{"context ended", func(ctx context.Context, cancel context.CancelFunc, r *dstl.Reader) error {
			n := 0
			return r.Read(ctx, h, func(dstl.Change) error {
				if n++; n == 4 {
					cancel()
				}
				if n > 6 {
					return fmt.Errorf("change %d read after the context ended", n)
				}
				return nil
			})
		}, context.Canceled, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			r, err := dstl.NewReader(b, dstl.KeyGroupRange{Start: 0, End: 0}, dstl.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := tc.read(ctx, cancel, r); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var want int64
			for _, e := range h.Entries[:tc.sets] {
				want += e.Length
			}
			if got := r.Stats().BytesNeeded; got != want {
				t.Fatalf("%d bytes needed, want %d: those of the %d sets given", got, want, tc.sets)
			}
		})
	}
}

// TestReadAheadDamagedSet: a damaged change set among many ends the read
// with its error after the sets before it, and none after it.
func TestReadAheadDamagedSet(t *testing.T) {
	b, h := setsInObjects(t, 8, 3)
	damaged := h.Entries[5]
	data, _ := b.ObjectBytes(damaged.Object)
	data[damaged.Offset+damaged.Length-1] ^= 0xff
	b.SetObjectBytes(damaged.Object, data)
	r := groupZeroReader(t, b)
	var got []string
	err := r.Read(context.Background(), h, func(c dstl.Change) error {
		got = append(got, string(c.Data))
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), damaged.Object) {
		t.Fatalf("err = %v, want one naming %q", err, damaged.Object)
	}
	if len(got) != 15 || got[14] != "set-4-2" {
		t.Fatalf("read %d changes before the error (last %q), want the 15 of the 5 sets before the damaged one", len(got), got[len(got)-1])
	}
}

// TestReadAheadCallerPanics: a panic or runtime.Goexit in the caller's
// function ends the read like an error does: the goroutine reading ahead
// has ended, and the reader reads the handle whole afterwards.
func TestReadAheadCallerPanics(t *testing.T) {
	b, h := setsInObjects(t, 10, 3)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r, err := dstl.NewReader(b, dstl.KeyGroupRange{Start: 0, End: 0}, dstl.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close() // before the leak check
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the caller's panic did not come up")
			}
		}()
		r.Read(context.Background(), h, func(dstl.Change) error { panic("the caller's") })
	}()
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		r.Read(context.Background(), h, func(dstl.Change) error { runtime.Goexit(); return nil })
	}()
	<-exited
	n := 0
	if err := r.Read(context.Background(), h, func(dstl.Change) error { n++; return nil }); err != nil || n != 30 {
		t.Fatalf("read after: %d changes, %v; want 30", n, err)
	}
}

// TestReadAheadStopSharedCache: a read that stops early while its read
// ahead waits for a Get cancels that Get; another reader of the storage's
// shared cache, waiting for the same range, fetches it itself, and the
// cancel starts no hold.
func TestReadAheadStopSharedCache(t *testing.T) {
	b := dstltest.NewBackend()
	cfg := testConfig()
	cfg.BatchPersistDelay = dstl.NoBatchDelay
	s := newStorage(t, b, cfg)
	kgr := dstl.KeyGroupRange{Start: 0, End: 0}
	w := newWriter(t, s, "op", kgr)
	var h dstl.Handle
	for i := range 4 {
		mustAppend(t, w, 0, fmt.Sprint("set-", i))
		h = persist(t, w, 0, int64(i+1))
	}
	stalled := h.Entries[1].Object
	var gets atomic.Int64
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op == dstltest.OpGet && name == stalled && gets.Add(1) == 1 {
			return dstltest.Fault{Stall: true} // until its context ends
		}
		return dstltest.Fault{}
	})
	first, err := s.NewReader(kgr)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.NewReader(kgr)
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("the caller stops")
	secondDone := make(chan error, 1)
	err = first.Read(context.Background(), h, func(dstl.Change) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.WaitStalled(ctx, 1); err != nil {
			return err
		}
		go func() {
			n := 0
			err := second.Read(context.Background(), h, func(dstl.Change) error { n++; return nil })
			if err == nil && n != 4 {
				err = fmt.Errorf("%d changes, want 4", n)
			}
			secondDone <- err
		}()
		time.Sleep(50 * time.Millisecond) // the second reader waits for the stalled Get
		return stop
	})
	if !errors.Is(err, stop) {
		t.Fatalf("first read: %v, want %v", err, stop)
	}
	if err := <-secondDone; err != nil {
		t.Fatalf("the second reader, after the first stopped: %v", err)
	}
	if err := first.Read(context.Background(), h, func(dstl.Change) error { return nil }); err != nil {
		t.Fatalf("the first reader again (no hold): %v", err)
	}
}

// TestReadAheadOnlyWhatIsFetched: a handle whose ranges a prefetch cached
// is read on the caller's goroutine (reading ahead would only decode, at
// the cost of a goroutine and its decoders); one with a range to fetch is
// read ahead.
func TestReadAheadOnlyWhatIsFetched(t *testing.T) {
	b, h := setsInObjects(t, 3, 2)
	r := groupZeroReader(t, b)
	part := h
	part.Entries = h.Entries[:2]
	part.StoredSize, part.LogicalSize = 0, 0
	for _, e := range part.Entries {
		part.StoredSize += e.Length
		part.LogicalSize += e.LogicalSize
	}
	for _, step := range []struct {
		prefetch dstl.Handle
		want     bool
	}{
		{dstl.Handle{}, false},
		{part, false},
		{h, true},
	} {
		if len(step.prefetch.Entries) > 0 {
			if err := r.Prefetch(context.Background(), step.prefetch); err != nil {
				t.Fatal(err)
			}
		}
		if got := r.AllCached(h); got != step.want {
			t.Fatalf("%d of %d sets prefetched: all cached = %v, want %v", len(step.prefetch.Entries), len(h.Entries), got, step.want)
		}
	}
	n := 0
	if err := r.Read(context.Background(), h, func(dstl.Change) error { n++; return nil }); err != nil || n != 6 {
		t.Fatalf("read %d changes, %v; want 6", n, err)
	}
	// Hits: the second prefetch found 2 ranges cached, the read 3.
	if st := r.Stats(); st.Requests != 3 || st.CacheHits != 5 || st.BytesNeeded != h.StoredSize {
		t.Fatalf("stats %+v, want 3 requests (the prefetches), 5 hits and the handle's %d bytes needed", st, h.StoredSize)
	}
}

// TestReadCachedOnTheCallersGoroutine: a handle whose ranges are all
// cached is decoded on the caller's goroutine: no goroutine runs beside
// the caller while it takes the changes (a read-ahead would block, with
// more sets than it buffers, until the caller takes them).
func TestReadCachedOnTheCallersGoroutine(t *testing.T) {
	sets := dstl.SetsAhead + 3
	b, h := setsInObjects(t, sets, 1)
	r := groupZeroReader(t, b)
	if err := r.Prefetch(t.Context(), h); err != nil {
		t.Fatal(err)
	}
	before, n := runtime.NumGoroutine(), 0
	if err := r.Read(t.Context(), h, func(dstl.Change) error {
		if now := runtime.NumGoroutine(); now > before {
			return fmt.Errorf("change %d: %d goroutines while the caller takes it, %d before the read: the reader reads a cached handle ahead", n, now, before)
		}
		n++
		return nil
	}); err != nil || n != sets {
		t.Fatalf("read %d changes, %v; want %d", n, err, sets)
	}
}

// groupZeroReader returns a reader of key group 0 of b (the group of
// setsInObjects), closed when the test ends.
func groupZeroReader(t *testing.T, b *dstltest.Backend) *dstl.Reader {
	t.Helper()
	r, err := dstl.NewReader(b, dstl.KeyGroupRange{Start: 0, End: 0}, dstl.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
