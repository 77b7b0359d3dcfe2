package dstl_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/uploader"
)

// TestChaos runs writers through checkpoints against a backend that fails,
// delays (past the hedging timeout) and stalls puts at random, and checks
// that no change is lost or duplicated: every confirmed handle reads back
// exactly the changes appended since its start, in order per key group,
// also from a fresh reader after the storage is closed.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runChaos(t, seed) })
	}
}

func runChaos(t *testing.T, seed uint64) {
	b := dstltest.NewBackend()
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0))
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op != dstltest.OpPut {
			return dstltest.Fault{}
		}
		mu.Lock()
		defer mu.Unlock()
		switch p := rng.Float64(); {
		case p < 0.15:
			return dstltest.Fault{Err: errInjected}
		case p < 0.25:
			return dstltest.Fault{Delay: time.Duration(rng.IntN(60)) * time.Millisecond}
		case p < 0.30:
			return dstltest.Fault{Stall: true} // ended by a winning hedge's cancellation
		}
		return dstltest.Fault{}
	})
	cfg := testConfig()
	cfg.BatchPersistDelay = 3 * time.Millisecond
	cfg.UploadTimeout = 25 * time.Millisecond
	cfg.UploadNextAttemptDelay = 2 * time.Millisecond
	cfg.PreemptivePersistThreshold = 2 << 10
	cfg.CompressionEnabled = seed%2 == 0
	cfg.FormatVersion = 1 + int(seed/2%2)
	late := dstl.WithUploader(func(u uploader.Uploader) uploader.Uploader {
		return &stubbornUploader{Uploader: u, rng: rand.New(rand.NewPCG(seed, 1))}
	})
	s, err := dstl.New(cfg, b, dstl.WithStorageID("memory"), dstl.WithLogger(discardLogger), late)
	if err != nil {
		t.Fatal(err)
	}

	const writers, keyGroups = 12, 48
	type confirmed struct {
		h    dstl.Handle
		want map[int][]string // key group -> changes, in order
	}
	type writerState struct {
		w        *dstl.Writer
		from     dstl.SequenceNumber
		since    map[int][]string // changes since from
		last     *confirmed
		failures int
	}
	ws := make([]*writerState, writers)
	for i := range ws {
		kgr := dstl.KeyGroupRange{Start: i * keyGroups / writers, End: (i+1)*keyGroups/writers - 1}
		ws[i] = &writerState{w: newWriter(t, s, fmt.Sprint(i), kgr), since: map[int][]string{}}
	}
	ctx := context.Background()
	for cp := int64(1); cp <= 25; cp++ {
		var wg sync.WaitGroup
		for i, x := range ws {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(seed, uint64(cp*100+int64(i))))
				kgr := x.w.KeyGroups()
				for j := range 20 + r.IntN(60) {
					kg := kgr.Start + r.IntN(kgr.End-kgr.Start+1)
					c := fmt.Sprintf("w%d-cp%d-%d-%s", i, cp, j, string(make([]byte, r.IntN(200))))
					if r.IntN(15) == 0 {
						kg = dstl.MetaKeyGroup
						if err := x.w.AppendMeta(ctx, []byte(c)); err != nil {
							t.Error(err)
							return
						}
					} else if err := x.w.Append(ctx, kg, []byte(c)); err != nil {
						t.Error(err)
						return
					}
					x.since[kg] = append(x.since[kg], c)
				}
				f, err := x.w.Persist(ctx, x.from, cp)
				if err != nil {
					t.Error(err)
					return
				}
				res, err := f.Wait(ctx)
				to := x.w.NextSequenceNumber()
				if err != nil { // every attempt failed: abort; the next checkpoint carries the changes
					x.failures++
					x.w.Reset(x.from, to, cp)
					return
				}
				if r.IntN(4) == 0 {
					x.w.Reset(x.from, to, cp) // aborted elsewhere
					return
				}
				x.w.Confirm(x.from, to, cp)
				want := map[int][]string{}
				for kg, cs := range x.since {
					want[kg] = slices.Clone(cs)
				}
				x.last = &confirmed{h: res.Remote, want: want}
				if r.IntN(3) == 0 { // materialised: the log restarts here
					x.w.Truncate(to)
					x.from = to
					clear(x.since)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b.SetFault(nil)
	checked := 0
	for i, x := range ws {
		if x.last == nil {
			continue
		}
		r, err := dstl.NewReader(b, x.w.KeyGroups(), dstl.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[int][]string{}
		for c, err := range r.Changes(ctx, x.last.h) {
			if err != nil {
				t.Fatalf("writer %d: %v", i, err)
			}
			got[c.KeyGroup] = append(got[c.KeyGroup], string(c.Data))
		}
		r.Close()
		for kg := range x.last.want {
			if !slices.Equal(got[kg], x.last.want[kg]) {
				t.Fatalf("writer %d key group %d: read back %d changes, want %d\n got %.200q\nwant %.200q",
					i, kg, len(got[kg]), len(x.last.want[kg]), got[kg], x.last.want[kg])
			}
		}
		for kg := range got {
			if _, ok := x.last.want[kg]; !ok {
				t.Fatalf("writer %d: unexpected key group %d", i, kg)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no checkpoint was confirmed")
	}
	c := b.Counts()
	t.Logf("seed %d: %d writers checked, %d puts, %d deletes, %d objects left", seed, checked, c[dstltest.OpPut], c[dstltest.OpDelete], b.Len())
}

// stubbornUploader makes some attempts ignore cancellation: they finish
// late and store their object after another attempt has won, so the
// storage must discard it.
type stubbornUploader struct {
	uploader.Uploader
	mu  sync.Mutex
	rng *rand.Rand
}

func (u *stubbornUploader) Upload(ctx context.Context, tasks []*uploader.Task) (*uploader.Output, error) {
	u.mu.Lock()
	stubborn := u.rng.IntN(10) == 0
	u.mu.Unlock()
	if stubborn {
		time.Sleep(40 * time.Millisecond) // past the hedging timeout
		// Ignore cancellation, within reason: a stall still ends.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 300*time.Millisecond)
		defer cancel()
		return u.Uploader.Upload(ctx, tasks)
	}
	return u.Uploader.Upload(ctx, tasks)
}
