package dstl_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/dstlgo/dstl/backends/discard"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/uploader"
)

// BenchmarkAppend appends 100-byte changes over 128 key groups, with the
// default configuration: pre-emptive persists upload every 5 MiB.
func BenchmarkAppend(b *testing.B) {
	s := newStorage(b, discard.New(), dstl.DefaultConfig(discard.ID))
	w := newWriter(b, s, "op", dstl.KeyGroupRange{Start: 0, End: 127})
	change := bytes.Repeat([]byte("x"), 100)
	ctx := context.Background()
	b.SetBytes(int64(len(change)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := w.Append(ctx, i&127, change); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendAlone is BenchmarkAppend with an uploader that encodes
// and stores nothing: what the appending goroutine pays, without the
// encoding of the pre-emptive persists that runs beside it (on the other
// core of a two-core machine, sharing its caches and memory bandwidth).
func BenchmarkAppendAlone(b *testing.B) {
	for _, writers := range []int{1, 2} {
		b.Run(fmt.Sprintf("goroutines=%d", writers), func(b *testing.B) {
			s := newStorage(b, discard.New(), dstl.DefaultConfig(discard.ID),
				dstl.WithUploader(func(uploader.Uploader) uploader.Uploader { return dstltest.NoUploader{} }))
			ws := make([]*dstl.Writer, writers)
			for i := range ws {
				ws[i] = newWriter(b, s, fmt.Sprint(i), dstl.KeyGroupRange{Start: 0, End: 127})
			}
			change := bytes.Repeat([]byte("x"), 100)
			ctx := context.Background()
			b.SetBytes(int64(len(change)) * int64(writers))
			b.ReportAllocs()
			var wg sync.WaitGroup
			start := make(chan struct{})
			n := b.N
			for _, w := range ws {
				wg.Go(func() {
					<-start
					for i := range n {
						if err := w.Append(ctx, i&127, change); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.ResetTimer()
			close(start)
			wg.Wait()
		})
	}
}

// BenchmarkAppendParallel appends from one goroutine per writer.
func BenchmarkAppendParallel(b *testing.B) {
	s := newStorage(b, discard.New(), dstl.DefaultConfig(discard.ID))
	change := bytes.Repeat([]byte("x"), 100)
	var mu sync.Mutex
	n := 0
	b.SetBytes(int64(len(change)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		w := newWriter(b, s, fmt.Sprint(n), dstl.KeyGroupRange{Start: n, End: n})
		kg := n
		n++
		mu.Unlock()
		ctx := context.Background()
		for pb.Next() {
			if err := w.Append(ctx, kg, change); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkPersistLocal measures append → persist → confirm → truncate end
// to end on the local backend (fsync on), next to raw puts of objects of
// the same size: a checkpoint of each writer's 1000 changes of 100 bytes.
func BenchmarkPersistLocal(b *testing.B) {
	const changes, size = 1000, 100
	change := bytes.Repeat([]byte("x"), size)
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			lb, err := local.Open(context.Background(), local.DefaultConfig(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			defer lb.Close()
			cfg := benchConfig(dstl.DefaultConfig("local"))
			cfg.BatchPersistDelay = dstl.NoBatchDelay // a lone checkpoint need not wait for company
			if writers > 1 {
				cfg.BatchPersistDelay = dstl.DefaultConfig("").BatchPersistDelay
			}
			s := newStorage(b, lb, cfg)
			ws := make([]*dstl.Writer, writers)
			for i := range ws {
				ws[i] = newWriter(b, s, fmt.Sprint(i), dstl.KeyGroupRange{Start: 0, End: 127})
			}
			ctx := context.Background()
			b.SetBytes(int64(writers * changes * size))
			b.ReportAllocs()
			for cp := int64(1); b.Loop(); cp++ {
				var wg sync.WaitGroup
				for _, w := range ws {
					wg.Go(func() {
						for i := range changes {
							if err := w.Append(ctx, i&127, change); err != nil {
								b.Error(err)
								return
							}
						}
						from := w.NextSequenceNumber() - 1
						f, err := w.Persist(ctx, from, cp)
						if err != nil {
							b.Error(err)
							return
						}
						if _, err := f.Wait(ctx); err != nil {
							b.Error(err)
							return
						}
						to := w.NextSequenceNumber()
						w.Confirm(from, to, cp)
						w.Truncate(to)
					})
				}
				wg.Wait()
			}
		})
	}
	// The same bytes as one raw put per checkpoint, for the ratio.
	b.Run("raw-put", func(b *testing.B) {
		lb, err := local.Open(context.Background(), local.DefaultConfig(b.TempDir()))
		if err != nil {
			b.Fatal(err)
		}
		defer lb.Close()
		body := bytes.Repeat([]byte("x"), changes*size)
		ctx := context.Background()
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := lb.Put(ctx, fmt.Sprintf("raw-%d", i), bytes.NewReader(body), int64(len(body))); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCycle measures what the engine itself costs per checkpoint of
// one writer: append a set of 100-byte changes over 128 key groups, then
// persist, wait, confirm and truncate, into a backend that stores nothing
// (the objects are encoded and handed over, as to any backend), in the
// format version of -bench.format.
func BenchmarkCycle(b *testing.B) {
	for _, changes := range []int{626, 10359, 41504} { // the objects of 64 KiB, 1 MiB and 4 MiB of dstl bench (b)
		b.Run(fmt.Sprintf("changes=%d", changes), func(b *testing.B) {
			cfg := benchConfig(dstl.DefaultConfig(discard.ID))
			cfg.BatchPersistDelay = dstl.NoBatchDelay
			s := newStorage(b, discard.New(), cfg)
			w := newWriter(b, s, "op", dstl.KeyGroupRange{Start: 0, End: 127})
			change := bytes.Repeat([]byte("x"), 100)
			ctx := context.Background()
			b.SetBytes(int64(changes * len(change)))
			b.ReportAllocs()
			for cp := int64(1); b.Loop(); cp++ {
				for i := range changes {
					if err := w.Append(ctx, i&127, change); err != nil {
						b.Fatal(err)
					}
				}
				from := w.NextSequenceNumber() - 1
				f, err := w.Persist(ctx, from, cp)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Wait(ctx); err != nil {
					b.Fatal(err)
				}
				if err := w.Confirm(from, from+1, cp); err != nil {
					b.Fatal(err)
				}
				if err := w.Truncate(from + 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
