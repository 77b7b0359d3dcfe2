package main

import (
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/dstl"
)

// newBenchEnv returns the environment of "dstl bench" on a local backend
// (fsync on) in a temporary directory, for profiling its phases with
// go test -bench -cpuprofile.
func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	ctx := context.Background()
	cfg := dstl.DefaultConfig(b.TempDir())
	cfg.JobID = "bench"
	backend, id, err := backends.Open(ctx, "", cfg.BasePath)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := newRawStore(backend, cfg.BasePath)
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{cfg: cfg, backend: counting.New(backend), raw: raw, id: id, prefix: "bench/",
		changes: newChangeSource(100, 1<<20)}
	e.o = benchOptions{rounds: 1, roundTime: time.Second, changeSize: 100, recoveryWriters: 16, recoveryObjects: 8, recoveryObject: 1 << 20}
	b.Cleanup(func() { e.backend.Close() })
	return e
}

// BenchmarkRecoveryRead reads back what 16 writers wrote into 8 shared
// objects of 1 MiB (phase (d) of dstl bench), each time with a new reader,
// beside whole gets of the same objects with the plain file API.
func BenchmarkRecoveryRead(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	s, err := e.newStorage(e.cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var handles []dstl.Handle
	for i := range e.o.recoveryWriters {
		w, err := s.NewWriter(fmt.Sprint(i), splitRange(128, e.o.recoveryWriters, i))
		if err != nil {
			b.Fatal(err)
		}
		for j := range 640 * e.o.recoveryObjects {
			w.Append(ctx, w.KeyGroups().Start+j%8, e.changes.change())
			if j%640 == 639 {
				w.NextSequenceNumber()
			}
		}
		f, err := w.Persist(ctx, 0, 1)
		if err != nil {
			b.Fatal(err)
		}
		r, err := f.Wait(ctx)
		if err != nil {
			b.Fatal(err)
		}
		handles = append(handles, r.Remote)
	}
	var objects []backends.ObjectInfo
	var total int64
	e.backend.List(ctx, e.prefix, func(oi backends.ObjectInfo) error {
		objects = append(objects, oi)
		total += oi.Size
		return nil
	})
	b.Run("dstl", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			r, _ := dstl.NewReader(e.backend, dstl.KeyGroupRange{Start: 0, End: 127}, time.Minute)
			if err := r.Prefetch(ctx, handles...); err != nil {
				b.Fatal(err)
			}
			for _, h := range handles {
				for _, err := range r.Changes(ctx, h) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			r.Close()
		}
	})
	b.Run("raw", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			for _, oi := range objects {
				if _, err := e.raw.get(ctx, oi.Name); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkUpload is phase (b) of dstl bench for objects of 1 MiB: one
// writer's append -> persist -> confirm, beside raw writes and fsyncs.
func BenchmarkUpload(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	cfg := e.cfg
	cfg.BatchPersistDelay = 0
	s, err := e.newStorage(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w, err := s.NewWriter("w", dstl.KeyGroupRange{Start: 0, End: 127})
	if err != nil {
		b.Fatal(err)
	}
	const n = 10359 // about 1 MiB of changes
	b.Run("dstl", func(b *testing.B) {
		b.SetBytes(n * 100)
		b.ReportAllocs()
		for cp := int64(1); b.Loop(); cp++ {
			if _, err := persistChanges(ctx, w, n, func(i int) int { return i & 127 }, e.changes, cp); err != nil {
				b.Fatal(err)
			}
		}
	})
	body := randomBytes(1<<20, 3)
	b.Run("raw", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := e.raw.put(ctx, fmt.Sprintf("bench/raw-%d", i), body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestChangeSource: changes are random, the same from run to run, and no
// two changes of an object's worth are alike, so that compression finds
// nothing to gain.
func TestChangeSource(t *testing.T) {
	for _, tc := range []struct {
		size      int
		maxObject int64
	}{
		{100, 64 << 10},
		{100, 1 << 20},
		{1000, 256 << 10},
	} {
		a, b := newChangeSource(tc.size, tc.maxObject), newChangeSource(tc.size, tc.maxObject)
		seen := map[string]bool{}
		var object []byte
		for range int(tc.maxObject) / tc.size {
			c := a.change()
			if len(c) != tc.size || !slices.Equal(c, b.change()) {
				t.Fatalf("size %d: change of %d bytes, or not the same in two sources", tc.size, len(c))
			}
			if seen[string(c)] {
				t.Fatalf("size %d: a change repeats within %d bytes", tc.size, tc.maxObject)
			}
			seen[string(c)] = true
			object = append(object, c...)
		}
		var z bytes.Buffer
		zw, _ := flate.NewWriter(&z, flate.BestCompression)
		zw.Write(object)
		zw.Close()
		if ratio := float64(z.Len()) / float64(len(object)); ratio < 0.99 {
			t.Errorf("size %d: an object's changes compress to %.3f", tc.size, ratio)
		}
	}
}

// TestRawLocal: the local baseline puts a durable file (fsync on or off),
// reads it back, and removes the prefix's directory once it is empty.
func TestRawLocal(t *testing.T) {
	for _, fsync := range []bool{true, false} {
		root := t.TempDir()
		r := rawLocal{root: root, sync: fsync}
		put, _ := r.describe()
		if fsync != strings.Contains(put, "fsync its directory") {
			t.Errorf("fsync %v: put described as %q", fsync, put)
		}
		body := randomBytes(3000, 1)
		if err := r.put(t.Context(), "p/x.bin", body); err != nil {
			t.Fatal(err)
		}
		if err := r.put(t.Context(), "p/x.bin", body); err == nil {
			t.Error("a second put of a name replaced the file")
		}
		if n, err := r.get(t.Context(), "p/x.bin"); n != 3000 || err != nil {
			t.Errorf("get: %d, %v", n, err)
		}
		if err := r.removePrefix("p/"); err == nil {
			t.Error("removed a directory that holds a file")
		}
		if err := r.delete(t.Context(), "p/x.bin"); err != nil {
			t.Fatal(err)
		}
		if err := r.removePrefix("p/"); err != nil {
			t.Error(err)
		}
		if entries, _ := os.ReadDir(root); len(entries) != 0 {
			t.Errorf("left %v", entries)
		}
	}
}

// sink keeps what the measured operations allocate on the heap.
var sink []*[64]byte

func TestMeasureOps(t *testing.T) {
	const d = 20 * time.Millisecond
	boom := errors.New("boom")
	tests := []struct {
		name       string
		ops        func(n int) error
		wantAllocs int64
		minNsPerOp float64
		wantErr    error
	}{
		{"no allocation", func(n int) error {
			x := 0
			for i := range n {
				x += i
			}
			_ = x
			return nil
		}, 0, 0, nil},
		{"one allocation a call", func(n int) error {
			sink = make([]*[64]byte, 0, n) // one more per run: rounded away
			for range n {
				sink = append(sink, new([64]byte))
			}
			return nil
		}, 1, 0, nil},
		{"a millisecond a call", func(n int) error {
			for range n {
				time.Sleep(time.Millisecond)
			}
			return nil
		}, 0, 1e6, nil},
		{"failing once n grows", func(n int) error {
			if n > 1 {
				return boom
			}
			time.Sleep(time.Millisecond)
			return nil
		}, 0, 0, boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := measureOps(d, tt.ops)
			sink = nil
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if took := time.Duration(m.nsPerOp * float64(m.n)); took < d {
				t.Errorf("the run counted took %v (%d calls of %.0f ns), less than %v", took, m.n, m.nsPerOp, d)
			}
			if m.nsPerOp < tt.minNsPerOp {
				t.Errorf("%.0f ns/op, want at least %.0f", m.nsPerOp, tt.minNsPerOp)
			}
			if m.allocsPerOp != tt.wantAllocs {
				t.Errorf("%d allocs/op over %d calls, want %d", m.allocsPerOp, m.n, tt.wantAllocs)
			}
		})
	}
}

// TestBenchAppend runs the append benchmark once, through a storage over
// the discarding backend.
func TestBenchAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a second")
	}
	r, err := benchAppend(t.Context(), 100, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Runs) != 1 || r.NsPerOp <= 0 || r.NsPerOp != r.MinNsPerOp || r.ChangeSize != 100 {
		t.Fatalf("benchAppend = %+v", r)
	}
}
