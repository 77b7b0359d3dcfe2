package dstl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/local"
)

func TestSizeClass(t *testing.T) {
	prev := -1
	for _, n := range []int64{1, 1 << 16, 1<<16 + 1, 80 << 10, 1<<20 - 600, 1 << 20, 1<<20 + 1, 3 << 20, 1 << 26, 1<<26 + 1} {
		class, size := sizeClass(n)
		pooled := n > 1<<16 && n <= 1<<26
		switch {
		case pooled != (class >= 0):
			t.Fatalf("sizeClass(%d) = class %d: pooled %v, want %v", n, class, class >= 0, pooled)
		case size < n:
			t.Fatalf("sizeClass(%d) = size %d, smaller", n, size)
		case class >= 0 && (float64(size) > 1.25*float64(n)+1 || class >= len(rangePools) || class < prev):
			t.Fatalf("sizeClass(%d) = class %d, size %d (previous class %d)", n, class, size, prev)
		}
		if class >= 0 {
			prev = class
			if c2, s2 := sizeClass(size); c2 != class || s2 != size {
				t.Fatalf("sizeClass(%d) = %d, %d; of its size: %d, %d", n, class, size, c2, s2)
			}
		}
	}
}

// loadFilled returns a load function of n bytes of c.
func loadFilled(n int64, c byte) func(context.Context) (rangeData, error) {
	return func(context.Context) (rangeData, error) {
		rb := newRangeBuf(n)
		for i := range rb.b {
			rb.b[i] = c
		}
		return rangeData{data: rb.b, buf: rb}, nil
	}
}

// TestRangeCacheReferences: a range evicted from the cache while a reader
// holds it keeps its buffer, and its bytes, until the reader releases it;
// waiters of a shared fetch get a reference each, also one that gave up.
func TestRangeCacheReferences(t *testing.T) {
	const n = 600 << 10 // pooled; two do not fit under the limit
	c := newRangeCache(time.Minute, 1<<20)
	defer c.close()
	ctx := context.Background()
	a, fetched, err := c.fetch(ctx, "a", 0, n, loadFilled(n, 'a'))
	if err != nil || !fetched {
		t.Fatal(fetched, err)
	}
	if got := a.buf.refs.Load(); got != 2 {
		t.Fatalf("refs of a fetched and cached range = %d, want 2", got)
	}
	for _, obj := range []string{"b", "c", "d"} { // each evicts the one before
		d, _, err := c.fetch(ctx, obj, 0, n, loadFilled(n, obj[0]))
		if err != nil {
			t.Fatal(err)
		}
		if d.buf == a.buf {
			t.Fatalf("range %s got the buffer of a range still held", obj)
		}
		d.release()
	}
	if got := a.buf.refs.Load(); got != 1 {
		t.Fatalf("refs of an evicted range still held = %d, want 1", got)
	}
	if !bytes.Equal(a.data, bytes.Repeat([]byte("a"), n)) {
		t.Fatal("the bytes of an evicted range still held changed")
	}
	rb := a.buf
	a.release()
	if got := rb.refs.Load(); got != 0 {
		t.Fatalf("refs after the last release = %d, want 0", got)
	}

	// A shared fetch: the loader, the cache and each waiter that stayed
	// hold a reference; a waiter that gave up holds none.
	release := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	var loaded rangeData
	wg.Go(func() {
		var err error
		loaded, _, err = c.fetch(ctx, "e", 0, n, func(ctx context.Context) (rangeData, error) {
			close(started)
			<-release
			return loadFilled(n, 'e')(ctx)
		})
		if err != nil {
			t.Error(err)
		}
	})
	<-started
	var waited rangeData
	wg.Go(func() {
		var err error
		if waited, _, err = c.fetch(ctx, "e", 0, n, nil); err != nil {
			t.Error(err)
		}
	})
	gone, cancel := context.WithCancel(ctx)
	wg.Go(func() {
		if _, _, err := c.fetch(gone, "e", 0, n, nil); err == nil {
			t.Error("a waiter whose context ended got the range")
		}
	})
	for { // both waiters wait
		c.mu.Lock()
		w := c.inflight[rangeKey{"e", 0, n}].waiters
		c.mu.Unlock()
		if w == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	for { // the one whose context ended left
		c.mu.Lock()
		w := c.inflight[rangeKey{"e", 0, n}].waiters
		c.mu.Unlock()
		if w == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if loaded.buf != waited.buf || loaded.buf.refs.Load() != 3 {
		t.Fatalf("refs of a shared fetch = %d, want 3 (loader, waiter, cache)", loaded.buf.refs.Load())
	}
	loaded.release()
	waited.release()
	c.close()
	if got := loaded.buf.refs.Load(); got != 0 {
		t.Fatalf("refs after the cache closed = %d, want 0", got)
	}
}

// TestReadKeepsEvictedRange: a read whose range the cache drops in the
// middle (another read of the same reader fills the cache) still yields the
// right bytes: the read holds its range until it returns.
func TestReadKeepsEvictedRange(t *testing.T) {
	ctx := context.Background()
	lb, err := local.Open(ctx, local.Config{Root: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	cfg := DefaultConfig("local")
	cfg.BatchPersistDelay = NoBatchDelay
	s, err := New(cfg, lb, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const changes = 1000 // of 100 bytes: a 100 KiB range, pooled
	var hs []Handle
	for i := range 3 {
		w, err := s.NewWriter(fmt.Sprint(i), KeyGroupRange{Start: 0, End: 0})
		if err != nil {
			t.Fatal(err)
		}
		for j := range changes {
			if err := w.Append(ctx, 0, []byte(fmt.Sprintf("%d:%097d", i, j))); err != nil {
				t.Fatal(err)
			}
		}
		f, err := w.Persist(ctx, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, res.Remote)
	}
	r, err := NewReader(lb, KeyGroupRange{Start: 0, End: 0}, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.cache.close()
	r.cache = newRangeCache(time.Minute, 150<<10) // one range at a time
	defer r.Close()
	check := func(i int, h Handle, during func()) {
		j := 0
		err := r.Read(ctx, h, func(c Change) error {
			if want := fmt.Sprintf("%d:%097d", i, j); string(c.Data) != want {
				return fmt.Errorf("handle %d, change %d: %q, want %q", i, j, c.Data, want)
			}
			if j == 10 && during != nil {
				during()
			}
			j++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if j != changes {
			t.Fatalf("handle %d: %d changes, want %d", i, j, changes)
		}
	}
	check(0, hs[0], func() {
		check(1, hs[1], nil) // evicts the range of handle 0
		check(2, hs[2], nil) // evicts that of handle 1, whose buffer is free
	})
	if st := r.Stats(); st.Requests != 3 {
		t.Fatalf("%d requests, want 3", st.Requests)
	}
}

// TestRangeCacheCountsHeldMemory: the cache's limit counts the memory its
// ranges hold, a pooled buffer's whole size class, not the bytes asked.
func TestRangeCacheCountsHeldMemory(t *testing.T) {
	const n = 600<<10 + 1 // rounded up to a larger class
	rb := newRangeBuf(n)
	held := rb.held()
	rb.release()
	if held <= n {
		t.Fatalf("a buffer of %d bytes holds %d", n, held)
	}
	for _, tc := range []struct {
		limit  int64
		cached int64
	}{
		{held, held},
		{n, 0}, // the range fits by its bytes, not by the memory it holds
	} {
		c := newRangeCache(time.Minute, tc.limit)
		d, _, err := c.fetch(context.Background(), "a", 0, n, loadFilled(n, 'a'))
		if err != nil {
			t.Fatal(err)
		}
		d.release()
		if got := c.size(); got != tc.cached {
			t.Errorf("limit %d: %d bytes cached, want %d", tc.limit, got, tc.cached)
		}
		c.close()
	}
}
