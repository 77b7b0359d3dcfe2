package dstl_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/uploader"
)

// gatedPreparer is the default uploader whose puts, encoded ahead or not,
// wait for the gate (or for their attempt's context); it counts the
// batches it encodes ahead and releases.
type gatedPreparer struct {
	*uploader.Backend
	gate     chan struct{}
	started  chan struct{} // a token per put that began waiting
	prepares atomic.Int64
	releases atomic.Int64

	mu    sync.Mutex
	kinds []string // "slot" or "ahead", per put as it began waiting
}

func (g *gatedPreparer) wait(ctx context.Context, kind string) error {
	g.mu.Lock()
	g.kinds = append(g.kinds, kind)
	g.mu.Unlock()
	g.started <- struct{}{}
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedPreparer) Upload(ctx context.Context, tasks []*uploader.Task) (*uploader.Output, error) {
	if err := g.wait(ctx, "slot"); err != nil {
		return nil, err
	}
	return g.Backend.Upload(ctx, tasks)
}

func (g *gatedPreparer) Prepare(ctx context.Context, tasks []*uploader.Task) (uploader.Prepared, error) {
	p, err := g.Backend.Prepare(ctx, tasks)
	if err != nil {
		return nil, err
	}
	g.prepares.Add(1)
	return gatedPrepared{p, g}, nil
}

type gatedPrepared struct {
	uploader.Prepared
	g *gatedPreparer
}

func (p gatedPrepared) Upload(ctx context.Context) (*uploader.Output, error) {
	if err := p.g.wait(ctx, "ahead"); err != nil {
		return nil, err
	}
	return p.Prepared.Upload(ctx)
}

func (p gatedPrepared) Release() {
	p.g.releases.Add(1)
	p.Prepared.Release()
}

// newGatedStorage returns a storage of one upload thread, without a
// batching window, whose uploader is a gatedPreparer over an in-memory
// backend; a batch of threshold bytes is full.
func newGatedStorage(t *testing.T, threshold int64) (*dstl.Storage, *dstltest.Backend, *gatedPreparer) {
	t.Helper()
	b := dstltest.NewBackend()
	cfg := testConfig()
	cfg.UploadNumThreads = 1
	cfg.BatchPersistDelay = dstl.NoBatchDelay
	cfg.BatchPersistSizeThreshold = threshold
	g := &gatedPreparer{gate: make(chan struct{}), started: make(chan struct{}, 64)}
	s, err := dstl.New(cfg, b, dstl.WithStorageID("memory"), dstl.WithLogger(discardLogger),
		dstl.WithPreparingUploader(func(up uploader.Uploader) uploader.Uploader {
			g.Backend = up.(*uploader.Backend)
			return g
		}))
	if err != nil {
		t.Fatal(err)
	}
	return s, b, g
}

// persistOne appends one change to a new writer of key group i and
// persists it.
func persistOne(t *testing.T, s *dstl.Storage, i int) *dstl.Future {
	t.Helper()
	w := newWriter(t, s, fmt.Sprint("op", i), dstl.KeyGroupRange{Start: i, End: i})
	mustAppend(t, w, i, fmt.Sprint("change of writer ", i))
	f, err := w.Persist(context.Background(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFullBatchEncodedAhead: while the one upload slot puts a batch, the
// next full batch is encoded, and only that one: a third waits to be taken
// until the second has the slot. Every handle then reads back its changes,
// and every batch encoded ahead is released once its upload is over.
func TestFullBatchEncodedAhead(t *testing.T) {
	s, b, g := newGatedStorage(t, 1) // every task is a full batch
	defer s.Close()
	futures := []*dstl.Future{persistOne(t, s, 0)}
	<-g.started // the first batch is putting: the slot is taken
	futures = append(futures, persistOne(t, s, 1))
	waitFor(t, "the second batch to be encoded ahead", func() bool { return g.prepares.Load() == 1 })
	futures = append(futures, persistOne(t, s, 2))
	time.Sleep(50 * time.Millisecond)
	if n := g.prepares.Load(); n != 1 {
		t.Fatalf("%d batches encoded ahead while the one slot puts the first: want one", n)
	}
	close(g.gate)
	for i, f := range futures {
		res, err := f.Wait(context.Background())
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		want := []string{fmt.Sprintf("%d:change of writer %d", i, i)}
		if got := readAll(t, b, res.Remote, dstl.KeyGroupRange{Start: i, End: i}); !slices.Equal(got, want) {
			t.Errorf("writer %d read %q, want %q", i, got, want)
		}
	}
	waitFor(t, "every batch encoded ahead to be released", func() bool { return g.releases.Load() == g.prepares.Load() })
}

// TestBatchEncodedAheadGoesNext: the batch encoded ahead is the oldest
// one waiting, and the upload that ends first hands its slot to it,
// however many drains wait for a slot meanwhile (each would take a newer
// batch): under load they are many, and the batch ahead, perhaps holding
// what a checkpoint waits for, was starved.
func TestBatchEncodedAheadGoesNext(t *testing.T) {
	s, _, g := newGatedStorage(t, 1)
	defer s.Close()
	futures := []*dstl.Future{persistOne(t, s, 0)}
	<-g.started
	for i := 1; i < 12; i++ {
		futures = append(futures, persistOne(t, s, i))
	}
	waitFor(t, "a batch to be encoded ahead", func() bool { return g.prepares.Load() == 1 })
	time.Sleep(20 * time.Millisecond) // the other drains wait for the slot
	g.gate <- struct{}{}              // the first put ends
	<-g.started
	g.mu.Lock()
	kinds := slices.Clone(g.kinds)
	g.mu.Unlock()
	if want := []string{"slot", "ahead"}; !slices.Equal(kinds, want) {
		t.Errorf("puts began as %v: want the batch encoded ahead second", kinds)
	}
	close(g.gate)
	for i, f := range futures {
		if _, err := f.Wait(context.Background()); err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
}

// TestBatchesGrowWhileTheSlotIsBusy: with the one upload slot busy,
// persists that arrive one after the other, together less than a full
// batch, are not encoded ahead but go into one object once the slot frees.
func TestBatchesGrowWhileTheSlotIsBusy(t *testing.T) {
	s, _, g := newGatedStorage(t, 10<<20)
	defer s.Close()
	futures := []*dstl.Future{persistOne(t, s, 0)}
	<-g.started
	for i := 1; i < 4; i++ {
		futures = append(futures, persistOne(t, s, i))
		time.Sleep(20 * time.Millisecond) // the next writer checkpoints a little later
	}
	close(g.gate)
	objects := map[string]bool{}
	for i, f := range futures {
		res, err := f.Wait(context.Background())
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		for _, e := range res.Remote.Entries {
			objects[e.Object] = true
		}
	}
	if len(objects) != 2 || g.prepares.Load() != 0 {
		t.Errorf("%d objects for 4 persists, 3 of them arriving while the one slot was busy, %d batches encoded ahead: want 2 objects (the first, then the 3 batched) and none ahead",
			len(objects), g.prepares.Load())
	}
}

// TestCloseFailsTheBatchEncodedAhead: closing the storage while a batch
// waits, encoded, for the slot fails its persist with ErrClosed.
func TestCloseFailsTheBatchEncodedAhead(t *testing.T) {
	s, _, g := newGatedStorage(t, 1)
	futures := []*dstl.Future{persistOne(t, s, 0)}
	<-g.started
	futures = append(futures, persistOne(t, s, 1))
	waitFor(t, "the second batch to be encoded ahead", func() bool { return g.prepares.Load() == 1 })
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, f := range futures {
		if _, err := f.Wait(context.Background()); !errors.Is(err, dstl.ErrClosed) {
			t.Errorf("writer %d: Wait = %v, want ErrClosed", i, err)
		}
	}
}

// overridingUploader wraps the storage's default uploader by embedding it,
// and overrides Upload (to inject a fault, count, ...).
type overridingUploader struct {
	*uploader.Backend
	calls atomic.Int64
}

func (o *overridingUploader) Upload(ctx context.Context, tasks []*uploader.Task) (*uploader.Output, error) {
	o.calls.Add(1)
	return o.Backend.Upload(ctx, tasks)
}

// TestWrapperUploadIsCalled: a WithUploader wrapper that embeds the default
// uploader and overrides Upload sees every upload, even of full batches
// while every slot is busy: the Prepare it inherits is not used.
func TestWrapperUploadIsCalled(t *testing.T) {
	b := dstltest.NewBackend()
	cfg := testConfig()
	cfg.UploadNumThreads = 1
	cfg.BatchPersistSizeThreshold = 1
	o := &overridingUploader{}
	s := newStorage(t, b, cfg, dstl.WithUploader(func(up uploader.Uploader) uploader.Uploader {
		o.Backend = up.(*uploader.Backend)
		return o
	}))
	var futures []*dstl.Future
	for i := range 8 {
		futures = append(futures, persistOne(t, s, i))
	}
	objects := map[string]bool{}
	for i, f := range futures {
		res, err := f.Wait(context.Background())
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		for _, e := range res.Remote.Entries {
			objects[e.Object] = true
		}
	}
	if n := o.calls.Load(); n != int64(len(objects)) {
		t.Fatalf("the wrapper's Upload was called %d times for %d objects", n, len(objects))
	}
}
