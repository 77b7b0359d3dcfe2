package dstl_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl"
)

// recoveryFixture is the shape of a full recovery: writers share objects,
// one per checkpoint, each object holding one change set of every writer.
type recoveryFixture struct {
	backend *local.Backend
	handles []dstl.Handle
	objects []backends.ObjectInfo
	bytes   int64 // of all objects
	changes int   // of all handles
}

// newRecoveryFixture has writers (over key groups 0..127, split evenly)
// persist objects checkpoints of about objectSize bytes each, of
// changeSize-byte changes, on the local backend under dir.
func newRecoveryFixture(tb testing.TB, dir string, writers, objects int, objectSize int64, changeSize int) *recoveryFixture {
	tb.Helper()
	ctx := context.Background()
	lb, err := local.Open(ctx, local.Config{Root: dir, NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { lb.Close() })
	cfg := dstl.DefaultConfig("local")
	cfg.BatchPersistDelay = 200 * time.Millisecond // every writer's persist of a checkpoint in one object
	cfg.BatchPersistSizeThreshold = 64 << 20
	cfg.PreemptivePersistThreshold = dstl.NoPreemptivePersist
	s := newStorage(tb, lb, cfg)
	ws := make([]*dstl.Writer, writers)
	for i := range ws {
		ws[i] = newWriter(tb, s, fmt.Sprint(i), dstl.KeyGroupRange{Start: i * 128 / writers, End: (i+1)*128/writers - 1})
	}
	change := bytes.Repeat([]byte("c"), changeSize)
	perWriter := int(objectSize) / writers / (changeSize + 2)
	f := &recoveryFixture{backend: lb, handles: make([]dstl.Handle, writers)}
	for cp := int64(1); cp <= int64(objects); cp++ {
		var wg sync.WaitGroup
		for i, w := range ws {
			wg.Go(func() {
				kgr := w.KeyGroups()
				for j := range perWriter {
					if err := w.Append(ctx, kgr.Start+j%(kgr.End-kgr.Start+1), change); err != nil {
						tb.Error(err)
						return
					}
				}
				fut, err := w.Persist(ctx, 0, cp)
				if err != nil {
					tb.Error(err)
					return
				}
				r, err := fut.Wait(ctx)
				if err != nil {
					tb.Error(err)
					return
				}
				f.handles[i] = r.Remote
				if err := w.Confirm(r.From, r.To, cp); err != nil {
					tb.Error(err)
				}
			})
		}
		wg.Wait()
		if tb.Failed() {
			tb.FailNow()
		}
	}
	if err := lb.List(ctx, "", func(oi backends.ObjectInfo) error {
		f.objects = append(f.objects, oi)
		f.bytes += oi.Size
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	if len(f.objects) != objects {
		tb.Fatalf("%d objects, want %d (one per checkpoint)", len(f.objects), objects)
	}
	f.changes = writers * objects * perWriter
	return f
}

// recover reads every change of every handle with a new reader, as a
// restore after a crash does, and returns the reader's stats.
func (f *recoveryFixture) recover(tb testing.TB) dstl.ReadStats {
	ctx := context.Background()
	r, err := dstl.NewReader(f.backend, dstl.KeyGroupRange{Start: 0, End: 127}, dstl.ReaderOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	if err := r.Prefetch(ctx, f.handles...); err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, h := range f.handles {
		for c, err := range r.Changes(ctx, h) {
			if err != nil {
				tb.Fatal(err)
			}
			n += len(c.Data)
		}
	}
	if n == 0 {
		tb.Fatal("no changes read")
	}
	return r.Stats()
}

// BenchmarkRecovery measures a full recovery on the local backend: 16
// writers share 8 objects of 1 MiB, each holding one change set of every
// writer; a reader prefetches every handle and iterates every change. The
// throughput counts the bytes the handles need. The raw sub-benchmarks
// read the same files whole, for the ratio: with the backend's Get into a
// reused buffer, and as the CLI's bench baseline does (open the file and
// copy it to io.Discard).
func BenchmarkRecovery(b *testing.B) {
	f := newRecoveryFixture(b, b.TempDir(), 16, 8, 1<<20, 100)
	st := f.recover(b)
	if st.BytesFetched != st.BytesNeeded {
		b.Fatalf("fetched %d bytes for %d needed", st.BytesFetched, st.BytesNeeded)
	}
	b.Run("engine", func(b *testing.B) {
		b.SetBytes(st.BytesNeeded)
		b.ReportAllocs()
		for b.Loop() {
			f.recover(b)
		}
	})
	b.Run("raw-get", func(b *testing.B) {
		ctx := context.Background()
		var buf []byte
		b.SetBytes(f.bytes)
		b.ReportAllocs()
		for b.Loop() {
			for _, oi := range f.objects {
				rc, err := f.backend.Get(ctx, oi.Name, 0, -1)
				if err != nil {
					b.Fatal(err)
				}
				if int64(cap(buf)) < oi.Size {
					buf = make([]byte, oi.Size)
				}
				if _, err := io.ReadFull(rc, buf[:oi.Size]); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		}
	})
	b.Run("raw-file", func(b *testing.B) {
		b.SetBytes(f.bytes)
		b.ReportAllocs()
		for b.Loop() {
			for _, oi := range f.objects {
				fh, err := os.Open(filepath.Join(f.backend.Root(), filepath.FromSlash(oi.Name)))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, fh); err != nil {
					b.Fatal(err)
				}
				fh.Close()
			}
		}
	})
}
