package dstl_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/uploader"
)

// gatedPreparer is the default uploader whose prepared objects' puts wait
// for the gate (or for their attempt's context), counting what it
// prepares and releases.
type gatedPreparer struct {
	*uploader.Backend
	gate     chan struct{}
	started  chan struct{} // a token per put that began waiting
	prepares atomic.Int64
	releases atomic.Int64
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
	p.g.started <- struct{}{}
	select {
	case <-p.g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.Prepared.Upload(ctx)
}

func (p gatedPrepared) Release() {
	p.g.releases.Add(1)
	p.Prepared.Release()
}

// newGatedStorage returns a storage of one upload thread whose uploader is
// a gatedPreparer over an in-memory backend.
func newGatedStorage(t *testing.T) (*dstl.Storage, *dstltest.Backend, *gatedPreparer) {
	t.Helper()
	b := dstltest.NewBackend()
	cfg := testConfig()
	cfg.UploadNumThreads = 1
	cfg.BatchPersistDelay = 0
	g := &gatedPreparer{gate: make(chan struct{}), started: make(chan struct{}, 16)}
	s, err := dstl.New(cfg, b, dstl.WithStorageID("memory"), dstl.WithLogger(discardLogger),
		dstl.WithUploader(func(up uploader.Uploader) uploader.Uploader {
			g.Backend = up.(*uploader.Backend)
			return g
		}))
	if err != nil {
		t.Fatal(err)
	}
	return s, b, g
}

// TestBatchEncodedAhead: while the one upload slot puts a batch, the next
// batch is encoded, and only that one: a third waits to be taken until the
// second has the slot. Every handle then reads back its changes, and every
// prepared object is released once its upload is over.
func TestBatchEncodedAhead(t *testing.T) {
	s, b, g := newGatedStorage(t)
	defer s.Close()
	ctx := context.Background()
	var futures []*dstl.Future
	for i := range 3 {
		w := newWriter(t, s, fmt.Sprint("op", i), dstl.KeyGroupRange{Start: i, End: i})
		mustAppend(t, w, i, fmt.Sprint("change of writer ", i))
		f, err := w.Persist(ctx, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
		switch i {
		case 0:
			<-g.started // the first batch is putting: the slot is taken
		case 1:
			waitFor(t, "the second batch to be encoded", func() bool { return g.prepares.Load() == 2 })
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n := g.prepares.Load(); n != 2 {
		t.Fatalf("%d batches encoded while the one slot puts the first: want the first and one ahead", n)
	}
	close(g.gate)
	for i, f := range futures {
		res, err := f.Wait(ctx)
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		want := []string{fmt.Sprintf("%d:change of writer %d", i, i)}
		if got := readAll(t, b, res.Remote, dstl.KeyGroupRange{Start: i, End: i}); !slices.Equal(got, want) {
			t.Errorf("writer %d read %q, want %q", i, got, want)
		}
	}
	if n := g.prepares.Load(); n != 3 {
		t.Errorf("%d batches encoded ahead, want 3", n)
	}
	waitFor(t, "every prepared object to be released", func() bool { return g.releases.Load() == 3 })
}

// TestCloseFailsTheBatchEncodedAhead: closing the storage while a batch
// waits, encoded, for the slot fails its persist with ErrClosed and
// releases its object.
func TestCloseFailsTheBatchEncodedAhead(t *testing.T) {
	s, _, g := newGatedStorage(t)
	ctx := context.Background()
	var futures []*dstl.Future
	for i := range 2 {
		w := newWriter(t, s, fmt.Sprint("op", i), dstl.KeyGroupRange{Start: i, End: i})
		mustAppend(t, w, i, "x")
		f, err := w.Persist(ctx, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
		if i == 0 {
			<-g.started
		}
	}
	waitFor(t, "the second batch to be encoded", func() bool { return g.prepares.Load() == 2 })
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, f := range futures {
		if _, err := f.Wait(ctx); !errors.Is(err, dstl.ErrClosed) {
			t.Errorf("writer %d: Wait = %v, want ErrClosed", i, err)
		}
	}
	if n := g.releases.Load(); n < 1 {
		t.Errorf("%d prepared objects released, want the one that waited for the slot", n)
	}
}
