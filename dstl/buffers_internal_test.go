package dstl

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"
	"unsafe"

	"github.com/dstlgo/dstl/backends/mem"
)

// TestFreeList: the value put last comes out first, and no more than the
// limit are kept.
func TestFreeList(t *testing.T) {
	f := newFreeList[int](2)
	if _, ok := f.get(); ok {
		t.Fatal("an empty list gave a value")
	}
	for _, v := range []int{1, 2, 3} {
		f.put(v) // 3 is one too many
	}
	for _, want := range []int{2, 1} {
		if v, ok := f.get(); !ok || v != want {
			t.Fatalf("get = %d, %v; want %d", v, ok, want)
		}
	}
	if v, ok := f.get(); ok {
		t.Fatalf("get = %d past the limit", v)
	}
}

// TestPooledSets: enough sets' lists for a full in-flight window of sets at
// the pre-emptive threshold, two per upload thread at least, 64 at most.
func TestPooledSets(t *testing.T) {
	for _, tc := range []struct {
		threads          int
		maxInFlight, pre int64
		want             int
	}{
		{5, 100 << 20, 5 << 20, 22},             // the defaults
		{5, 100 << 20, NoPreemptivePersist, 10}, // no pre-emptive persists
		{20, 10 << 20, 5 << 20, 40},
		{5, 10 << 30, 1 << 20, 64},
	} {
		cfg := DefaultConfig("x")
		cfg.UploadNumThreads, cfg.UploadMaxInFlight, cfg.PreemptivePersistThreshold = tc.threads, tc.maxInFlight, tc.pre
		if got := pooledSets(cfg); got != tc.want {
			t.Errorf("%+v: %d sets, want %d", tc, got, tc.want)
		}
	}
}

// TestChunkClass: the smallest pooled chunk that holds n bytes.
func TestChunkClass(t *testing.T) {
	for _, tc := range []struct{ n, class int }{
		{0, 0}, {1, 0}, {minChunk, 0}, {minChunk + 1, 1}, {2 * minChunk, 1},
		{2*minChunk + 1, 2}, {maxChunk/2 + 1, chunkClasses - 1}, {maxChunk, chunkClasses - 1},
	} {
		if got := chunkClass(tc.n); got != tc.class {
			t.Errorf("chunkClass(%d) = %d, want %d", tc.n, got, tc.class)
		}
		if size := minChunk << chunkClass(tc.n); size < tc.n {
			t.Errorf("class of %d bytes holds %d", tc.n, size)
		}
	}
}

// TestChunkPool: chunks come back by size class, up to the pool's bytes;
// sizes that are not a class are never kept.
func TestChunkPool(t *testing.T) {
	p := &chunkPool{limit: 3 * minChunk}
	a := p.get(0)
	b := p.get(1)
	if cap(a) != minChunk || cap(b) != 2*minChunk || len(a) != 0 || p.allocs != 2 {
		t.Fatalf("got chunks of %d and %d bytes, %d allocations", cap(a), cap(b), p.allocs)
	}
	p.put(append(a, 1, 2, 3))
	p.put(b)
	p.put(make([]byte, 0, minChunk)) // over the limit: dropped
	p.put(make([]byte, 0, 3*minChunk))
	p.put(make([]byte, 0, 2*maxChunk))
	if p.held != 3*minChunk {
		t.Fatalf("pool holds %d bytes, want %d", p.held, 3*minChunk)
	}
	if c := p.get(0); cap(c) != minChunk || len(c) != 0 || p.allocs != 2 {
		t.Fatalf("recycled chunk: len %d cap %d, %d allocations", len(c), cap(c), p.allocs)
	}
	if c := p.get(0); cap(c) != minChunk || p.allocs != 3 {
		t.Fatalf("empty class: cap %d, %d allocations; want a new chunk", cap(c), p.allocs)
	}
}

// TestSteadyAppendAllocatesNoChunks: once a storage's pool holds the chunks
// of uploaded sets, a writer that appends, persists, confirms and
// truncates in rounds appends into recycled chunks only.
func TestSteadyAppendAllocatesNoChunks(t *testing.T) {
	s := newStoringStorage(t, func(cfg *Config) { cfg.BatchPersistDelay = NoBatchDelay })
	ws := make([]*Writer, 4)
	for i := range ws {
		var err error
		if ws[i], err = s.NewWriter(fmt.Sprint(i), KeyGroupRange{Start: i, End: i}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	change := make([]byte, 100)
	from := make([]SequenceNumber, len(ws))
	var warm int64
	for round := 1; round <= 30; round++ {
		for i, w := range ws {
			for range 20000 + round*100 { // sets a little larger every round
				if err := w.Append(ctx, i, change); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, w := range ws { // every set rolls over before any is recycled
			w.NextSequenceNumber()
		}
		for i, w := range ws {
			from[i] = checkpointWriter(t, w, from[i], int64(round))
		}
		// The sets go back to the pool just after their futures resolve.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			s.buffers.free.mu.Lock()
			back := len(s.buffers.free.items)
			s.buffers.free.mu.Unlock()
			if back == len(ws) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d of %d sets recycled", round, back, len(ws))
			}
		}
		s.buffers.chunks.mu.Lock()
		allocs := s.buffers.chunks.allocs
		s.buffers.chunks.mu.Unlock()
		switch {
		case round == 10:
			warm = allocs
		case round > 10 && allocs != warm:
			t.Fatalf("round %d: %d chunks allocated, %d after round 10", round, allocs, warm)
		}
	}
}

// TestAppendNeverMovesAChange: a change stays where Append copied it while
// its set grows by many times its first chunk.
func TestAppendNeverMovesAChange(t *testing.T) {
	s := newStoringStorage(t, func(cfg *Config) {
		cfg.PreemptivePersistThreshold = 1 << 30 // the set grows unpersisted
		cfg.UploadMaxInFlight = 2 << 30
	})
	w, err := s.NewWriter("op", KeyGroupRange{Start: 0, End: 0})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Append(ctx, 0, []byte("first")); err != nil {
		t.Fatal(err)
	}
	where := func() *byte {
		w.mu.Lock()
		defer w.mu.Unlock()
		r := w.active.refs[0]
		return &w.active.chunks[r.chunk][:cap(w.active.chunks[r.chunk])][r.off]
	}
	at := where()
	change := make([]byte, 100)
	for range 40000 { // 4 MB: 1 000 times the first chunk
		if err := w.Append(ctx, 0, change); err != nil {
			t.Fatal(err)
		}
	}
	if now := where(); now != at {
		t.Fatalf("the first change moved in memory as its set grew")
	}
	if got := unsafe.String(at, 5); got != "first" {
		t.Fatalf("the first change reads %q", got)
	}
}

// newStoringStorage returns a storage over an in-memory backend that
// stores every put at once, with the default configuration changed by
// tune; the test's end closes it.
func newStoringStorage(t *testing.T, tune func(*Config)) *Storage {
	t.Helper()
	b, err := mem.Open(t.Context(), mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig("mem://job")
	cfg.JobID = "job"
	tune(&cfg)
	s, err := New(cfg, b, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// checkpointWriter persists w's log from from as checkpoint cp, waits for
// it, confirms it and truncates the log up to it; it returns where the next
// checkpoint starts.
func checkpointWriter(t *testing.T, w *Writer, from SequenceNumber, cp int64) SequenceNumber {
	t.Helper()
	ctx := context.Background()
	f, err := w.Persist(ctx, from, cp)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Confirm(res.From, res.To, cp); err != nil {
		t.Fatal(err)
	}
	if err := w.Truncate(res.To); err != nil {
		t.Fatal(err)
	}
	return res.To
}
