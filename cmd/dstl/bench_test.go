package main

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/internal/benchreport"
)

// newBenchEnv returns the environment of "dstl bench" on a local backend
// (fsync on) in a temporary directory, for profiling its phases with
// go test -bench -cpuprofile, and for testing them.
func newBenchEnv(b testing.TB) *benchEnv {
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

// objectNames returns the names of the objects under prefix in e's
// backend.
func objectNames(t testing.TB, e *benchEnv, prefix string) []string {
	t.Helper()
	var names []string
	if err := e.backend.List(t.Context(), prefix, func(oi backends.ObjectInfo) error {
		names = append(names, oi.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return names
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
			r, _ := dstl.NewReader(e.backend, dstl.KeyGroupRange{Start: 0, End: 127}, dstl.ReaderOptions{})
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
	cfg.BatchPersistDelay = dstl.NoBatchDelay
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

// TestBenchSustained runs a short round of (f) with two and three writers:
// the checkpoints are confirmed, the engine's bytes are all stored, the
// ratio is the engine's over the backend's Put (whose puts, and only they
// and the engine's, go through the backend) and the SDK ratio over the
// SDK's, and nothing is left under the prefix, neither the engine's
// objects nor the baselines'.
func TestBenchSustained(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a second")
	}
	e := newBenchEnv(t)
	e.o.roundTime = time.Hour // not the round time of (f)
	e.o.sustainedTime = 300 * time.Millisecond
	e.o.sustainedWarmup = 120 * time.Millisecond
	e.o.checkpointEvery = 50 * time.Millisecond
	ctx := t.Context()
	left := func() []string { return objectNames(t, e, e.prefix) }
	for _, n := range []int{2, 3} {
		before, start := e.backend.Stats(), time.Now()
		r, err := e.sustainedEngine(ctx, n, func(float64) {})
		if err != nil {
			t.Fatalf("%d writers: %v", n, err)
		}
		after := e.backend.Stats()
		if len(r.latencies) == 0 || r.elapsed < e.o.sustainedTime || r.logical <= 0 || r.puts <= 0 {
			t.Errorf("%d writers: round %+v", n, r)
		}
		// Every confirmed byte was stored in the round, with framing:
		// the changes are random, nothing compresses. The window is a
		// part of the round.
		if r.logical > after.BytesPut-before.BytesPut || r.bytesPut >= after.BytesPut-before.BytesPut || r.elapsed > time.Since(start)-e.o.sustainedWarmup {
			t.Errorf("%d writers: %d bytes confirmed, %d stored in the round, %d in all", n, r.logical, r.bytesPut, after.BytesPut-before.BytesPut)
		}
		if names := left(); len(names) != 0 {
			t.Errorf("%d writers: the engine's round left %v", n, names)
		}

		before = e.backend.Stats()
		row, err := e.sustained(ctx, n)
		if err != nil {
			t.Fatalf("%d writers: %v", n, err)
		}
		// The engine may put a little more after its rounds end (persists
		// in flight), never less.
		if puts := e.backend.Stats().Puts - before.Puts; row.BackendPuts < e.cfg.UploadNumThreads || puts < row.Objects+int64(row.BackendPuts) {
			t.Errorf("%d writers: %d puts through the backend; want the engine's %d and the baseline's %d at least", n, puts, row.Objects, row.BackendPuts)
		}
		if row.Writers != n || row.Checkpoints < 1 || row.CheckpointsPerSec <= 0 || row.Objects <= 0 || row.ObjectsPerSec <= 0 ||
			row.ObjectSize <= 0 || row.EngineBPS <= 0 || row.RawBPS <= 0 || row.RawPuts < e.cfg.UploadNumThreads ||
			row.BackendBPS <= 0 || row.BackendPuts < e.cfg.UploadNumThreads || len(row.BackendRounds) != 1 ||
			len(row.EngineRounds) != 1 || len(row.RawRounds) != 1 || row.PersistSamples != row.Checkpoints || row.PersistP50Ms <= 0 ||
			row.PersistP99Ms < row.PersistP50Ms {
			t.Errorf("%d writers: row %+v", n, row)
		}
		if row.Ratio != row.EngineBPS/row.BackendBPS || row.SDKRatio != row.EngineBPS/row.RawBPS {
			t.Errorf("%d writers: ratio %v, SDK ratio %v; engine %v / backend %v, / raw %v", n, row.Ratio, row.SDKRatio, row.EngineBPS, row.BackendBPS, row.RawBPS)
		}
		if names := left(); len(names) != 0 {
			t.Errorf("%d writers: left %v", n, names)
		}
	}
}

// TestRawParallelPut: the SDK's parallel put puts objects of the size
// asked, at least one a thread, and deletes them all.
func TestRawParallelPut(t *testing.T) {
	e := newBenchEnv(t)
	ctx := t.Context()
	before := e.backend.Stats()
	bps, puts, err := e.rawParallelPut(ctx, "raw", 3000, 3, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if puts < 3 || bps <= 0 {
		t.Errorf("%d puts, %v bytes/s", puts, bps)
	}
	if s := e.backend.Stats(); s.Puts != before.Puts {
		t.Errorf("the SDK's puts went through the backend: %d puts", s.Puts-before.Puts)
	}
	if left := objectNames(t, e, ""); len(left) != 0 {
		t.Errorf("left %v", left)
	}
}

// TestBackendParallelPut: the backend's parallel Put, the baseline of
// (f), goes through the backend (the Put the engine stores with), puts
// objects of the size asked, at least one a thread, and deletes them all.
func TestBackendParallelPut(t *testing.T) {
	e := newBenchEnv(t)
	ctx := t.Context()
	before := e.backend.Stats()
	bps, puts, err := e.parallelPut(ctx, "backend", 3000, 3, 20*time.Millisecond, e.backendPutter())
	if err != nil {
		t.Fatal(err)
	}
	s := e.backend.Stats()
	if puts < 3 || bps <= 0 || s.Puts-before.Puts != int64(puts) || s.BytesPut-before.BytesPut != int64(puts)*3000 {
		t.Errorf("%d puts, %v bytes/s; the backend saw %d puts of %d bytes", puts, bps, s.Puts-before.Puts, s.BytesPut-before.BytesPut)
	}
	if left := objectNames(t, e, ""); len(left) != 0 {
		t.Errorf("left %v", left)
	}
}

// TestRawParallelPutKeeps: the SDK's parallel put keeps its objects until
// the round is over, as the engine keeps its own, but on a backend in
// memory, where it deletes each after its put.
func TestRawParallelPutKeeps(t *testing.T) {
	for _, tc := range []struct {
		basePath string
		keeps    bool
	}{
		{"", true}, // the local disk of newBenchEnv
		{"mem://bench", false},
	} {
		e := newBenchEnv(t)
		if tc.basePath != "" {
			e.o.basePath = tc.basePath
		}
		raw := e.raw
		var rec *recordingRaw
		// Two goroutines must put at least twice each for a delete to
		// come between puts; a busy machine may need a longer run.
		for _, d := range []time.Duration{20 * time.Millisecond, 200 * time.Millisecond, 2 * time.Second} {
			rec = &recordingRaw{rawStore: raw}
			e.raw = rec
			_, puts, err := e.rawParallelPut(t.Context(), "raw", 3000, 2, d)
			if err != nil || puts < 2 {
				t.Fatalf("%q: %d puts, %v", tc.basePath, puts, err)
			}
			if puts >= 4 {
				break
			}
		}
		lastPut, firstDelete := -1, -1
		for i, op := range rec.ops {
			if op == "put" {
				lastPut = i
			} else if firstDelete < 0 {
				firstDelete = i
			}
		}
		if keeps := firstDelete > lastPut; keeps != tc.keeps {
			t.Errorf("%q: operations %v: kept until the end %v, want %v", tc.basePath, rec.ops, keeps, tc.keeps)
		}
	}
}

// recordingRaw records the puts and deletes of a raw store, in order.
type recordingRaw struct {
	rawStore
	mu  sync.Mutex
	ops []string
}

func (r *recordingRaw) put(ctx context.Context, name string, body []byte) error {
	r.mu.Lock()
	r.ops = append(r.ops, "put")
	r.mu.Unlock()
	return r.rawStore.put(ctx, name, body)
}

func (r *recordingRaw) delete(ctx context.Context, name string) error {
	r.mu.Lock()
	r.ops = append(r.ops, "delete")
	r.mu.Unlock()
	return r.rawStore.delete(ctx, name)
}

// TestBenchTargets: the thresholds of the design's targets, and the
// recovery read's that depends on the backend.
func TestBenchTargets(t *testing.T) {
	base := func() benchReport {
		return benchReport{benchreport.Report{
			Backend:   "local",
			Append:    &appendResult{NsPerOp: 25, Speedup: 1.9},
			Upload:    []uploadResult{{ObjectSize: 1 << 20, Ratio: 1.05}},
			Batching:  batchingResult{Rows: []batchRow{{Writers: 1, ObjectsPerSec: 10}, {Writers: 256, ObjectsPerSec: 12}}},
			Recovery:  recoveryResult{FetchedPerNeed: 1, Ratio: 0.95},
			Sustained: &sustainedResult{Rows: []sustainedRow{{Writers: 16, Ratio: 0.97}, {Writers: 64, Ratio: 0.96}}},
		}}
	}
	tests := []struct {
		name   string
		change func(*benchReport)
		target string // the target whose outcome changes, "" for none
		met    bool
		value  string // the target's value as printed, when not ""
	}{
		{"all met", func(*benchReport) {}, "", true, ""},
		{"append at 30 ns", func(r *benchReport) { r.Append.NsPerOp = 30 }, "append", true, "30.0 ns/op, 0 allocs/op"},
		{"append past 30 ns", func(r *benchReport) { r.Append.NsPerOp = 30.1 }, "append", false, ""},
		{"append allocates", func(r *benchReport) { r.Append.AllocsPerOp = 1 }, "append", false, "25.0 ns/op, 1 allocs/op"},
		{"two writers at x1.8", func(r *benchReport) { r.Append.Speedup = 1.8 }, "append, two writers", true, "x1.80 the changes/s of one"},
		{"two writers at x1.5", func(r *benchReport) { r.Append.Speedup = 1.5 }, "append, two writers", false, ""},
		{"local upload at 1.25", func(r *benchReport) { r.Upload[0].Ratio = 1.25 }, "upload 1.00 MiB", true, "persist -> confirm 1.25 times the backend's Put"},
		{"local upload past 1.25", func(r *benchReport) { r.Upload[0].Ratio = 1.26 }, "upload 1.00 MiB", false, ""},
		{"s3 upload at 1.10", func(r *benchReport) { r.Backend, r.Recovery.Ratio, r.Upload[0].Ratio = "s3", 0.95, 1.10 }, "upload 1.00 MiB", true, ""},
		{"gcs upload past 1.10", func(r *benchReport) { r.Backend, r.Recovery.Ratio, r.Upload[0].Ratio = "gcs", 0.95, 1.11 }, "upload 1.00 MiB", false, ""},
		{"upload not measured", func(r *benchReport) { r.Upload[0].Ratio = 0 }, "upload 1.00 MiB", false, ""},
		{"compressed upload not a target", func(r *benchReport) {
			r.UploadCompressed = []uploadResult{{ObjectSize: 1 << 20, Ratio: 3, Compression: true}}
		}, "", true, ""},
		{"batching x1.5", func(r *benchReport) { r.Batching.Rows[1].ObjectsPerSec = 15 }, "batching 1 -> 256 writers", true, ""},
		{"batching grows", func(r *benchReport) { r.Batching.Rows[1].ObjectsPerSec = 16 }, "batching 1 -> 256 writers", false, ""},
		{"fetched 1.004", func(r *benchReport) { r.Recovery.FetchedPerNeed = 1.004 }, "recovery fetched/needed", true, "1.004"},
		{"fetched 1.006", func(r *benchReport) { r.Recovery.FetchedPerNeed = 1.006 }, "recovery fetched/needed", false, "1.006"},
		{"local read 0.6", func(r *benchReport) { r.Recovery.Ratio = 0.6 }, "recovery read", true, ""},
		{"local read 0.49", func(r *benchReport) { r.Recovery.Ratio = 0.49 }, "recovery read", false, ""},
		{"s3 read 0.6", func(r *benchReport) { r.Backend, r.Recovery.Ratio = "s3", 0.6 }, "recovery read", false, ""},
		{"gcs read 0.89", func(r *benchReport) { r.Backend, r.Recovery.Ratio = "gcs", 0.89 }, "recovery read", false, ""},
		{"azure read 0.9", func(r *benchReport) { r.Backend, r.Recovery.Ratio = "azure", 0.9 }, "recovery read", true, ""},
		{"sustained 0.95", func(r *benchReport) { r.Sustained.Rows[1].Ratio = 0.95 }, "sustained logging, 64 writers", true, ""},
		{"sustained below 0.95", func(r *benchReport) { r.Sustained.Rows[1].Ratio = 0.5 }, "sustained logging, 64 writers", false,
			"0.50 of the backend's parallel Put"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base()
			tt.change(&r)
			ts := r.targets()
			if len(ts) != 8 {
				t.Fatalf("%d targets: %+v", len(ts), ts)
			}
			found := tt.target == ""
			for _, tr := range ts {
				want := true
				if tr.Name == tt.target {
					found, want = true, tt.met
					if tt.value != "" && tr.Value != tt.value {
						t.Errorf("%s: value %q, want %q", tr.Name, tr.Value, tt.value)
					}
				}
				if tr.Met != want {
					t.Errorf("%s: %q against %q: met %v, want %v", tr.Name, tr.Value, tr.Target, tr.Met, want)
				}
			}
			if !found {
				t.Errorf("no target %q in %+v", tt.target, ts)
			}
		})
	}
	// Without (a) and (f), their targets are not there.
	r := base()
	r.Append, r.Sustained = nil, nil
	if ts := r.targets(); len(ts) != 4 || slices.ContainsFunc(ts, func(tr targetResult) bool {
		return strings.HasPrefix(tr.Name, "append") || strings.HasPrefix(tr.Name, "sustained")
	}) {
		t.Errorf("targets without (a) and (f): %+v", ts)
	}
	// Azurite has no recovery read target: the row stays, marked, and
	// neither counts nor fails --check; Azure itself keeps the target.
	r = base()
	r.Backend, r.BasePath, r.Recovery.Ratio = "azure", "azblob://c/bench?endpoint=http://127.0.0.1:1/devstoreaccount1&account=devstoreaccount1", 0.3
	ts := r.targets()
	i := slices.IndexFunc(ts, func(tr targetResult) bool { return tr.Name == "recovery read" })
	if len(ts) != 8 || i < 0 || !ts[i].None || ts[i].Met || !strings.Contains(ts[i].Target, "Azurite") {
		t.Errorf("targets on Azurite: %+v", ts)
	}
	r.Targets = ts
	var out strings.Builder
	r.print(&out)
	if !strings.Contains(out.String(), "the emulator's limit") || !strings.Contains(out.String(), "7 of 7 targets met") {
		t.Errorf("report on Azurite:\n%s", out.String())
	}
	r.BasePath = "azblob://c/bench?account=mine"
	if ts := r.targets(); slices.ContainsFunc(ts, func(tr targetResult) bool { return tr.Name == "recovery read" && (tr.None || tr.Met) }) {
		t.Errorf("targets on Azure: %+v", ts)
	}
	// A bucket in memory has no recovery read target, however slow.
	r = base()
	r.Backend, r.BasePath, r.Recovery.Ratio = "gocloud", "mem://bench/run", 0.05
	if ts := r.targets(); len(ts) != 7 || slices.ContainsFunc(ts, func(tr targetResult) bool { return tr.Name == "recovery read" }) {
		t.Errorf("targets on mem://: %+v", ts)
	}
}

// TestBenchReportJSON: a report's JSON has the keys of package
// benchreport at its top level (the chart tool reads them there), the
// machine's among them.
func TestBenchReportJSON(t *testing.T) {
	rep := benchReport{benchreport.Report{Machine: benchreport.Machine(describeMachine()), Backend: "local"}}
	data, err := json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"machine", "backend", "upload", "batching", "recovery", "targets"} {
		if _, ok := top[k]; !ok {
			t.Errorf("no key %q in %s", k, data)
		}
	}
	var back benchreport.Report
	if err := json.Unmarshal(data, &back); err != nil || back.Backend != "local" || back.Machine.Cores < 1 {
		t.Errorf("decoded %+v, %v", back, err)
	}
}

// TestBenchReportMoved: "dstl bench report" says where the charts are
// drawn now.
func TestBenchReportMoved(t *testing.T) {
	code, _, errOut := runCLI(t, "bench", "report", "--in", "x.json", "--out", "charts")
	if code != exitUsage || !strings.Contains(errOut, "bench/report") || !strings.Contains(errOut, "make bench-report") {
		t.Errorf("exit %d, %q", code, errOut)
	}
}

// TestBenchAppend: (a) measures the appender alone, with the encoding
// beside it, and two writers at once, and the speedup is their ratio.
func TestBenchAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 3 s")
	}
	a, err := benchAppend(t.Context(), 100, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.NsPerOp <= 0 || a.EncodedNsPerOp <= 0 || a.TwoWritersNsPerOp <= 0 || len(a.Runs) != 1 || a.NsPerOp != a.MinNsPerOp || a.ChangeSize != 100 {
		t.Fatalf("%+v", a)
	}
	if a.Speedup != a.NsPerOp/a.TwoWritersNsPerOp {
		t.Errorf("speedup %v, want %v / %v", a.Speedup, a.NsPerOp, a.TwoWritersNsPerOp)
	}
	if a.AllocsPerOp != 0 {
		t.Errorf("%d allocations per append", a.AllocsPerOp)
	}
}

// TestPersistChangesCoversSplitSets: a set of changes past the pre-emptive
// threshold is split into several; the handle covers them all.
func TestPersistChangesCoversSplitSets(t *testing.T) {
	e := newBenchEnv(t)
	cfg := e.cfg
	cfg.PreemptivePersistThreshold = 1 << 10
	s, err := e.newStorage(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w, err := s.NewWriter("split", dstl.KeyGroupRange{Start: 0, End: 127})
	if err != nil {
		t.Fatal(err)
	}
	for cp := int64(1); cp <= 2; cp++ {
		c, err := persistChanges(t.Context(), w, 100, func(i int) int { return i & 127 }, e.changes, cp)
		if err != nil {
			t.Fatal(err)
		}
		if c.appended <= 0 || c.persisted <= 0 || c.confirmed < c.persisted {
			t.Errorf("checkpoint %d: appends %v, persist %v, persist to confirm %v", cp, c.appended, c.persisted, c.confirmed)
		}
		if covered := c.handle.LogicalSize; covered != 100*100 {
			t.Errorf("checkpoint %d: the handle covers %d bytes of 10000", cp, covered)
		}
	}
}

// TestBenchUpload runs a short (b) at 64 KiB, compression off and on:
// the engine, the backend's Put and the SDK's put take turns, one set and
// one put each, so all sides have as many samples as there are sets; the
// ratio is the median of the sets' persist -> confirm over the Put's, and
// lies between the smallest and the largest of them; the Put is the
// backend's (its puts are counted by the backend: the engine's and the
// baseline's); and nothing is left under the prefix, neither the
// engine's objects nor the baselines'.
func TestBenchUpload(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a second")
	}
	for _, compression := range []bool{false, true} {
		e := newBenchEnv(t)
		e.o.rounds = 2
		e.o.roundTime = 200 * time.Millisecond
		ctx := t.Context()
		seen := &storedAtPut{Backend: e.backend.Unwrap(), prefix: e.prefix}
		e.backend = counting.New(seen)
		u, err := e.upload(ctx, 64<<10, compression)
		if err != nil {
			t.Fatal(err)
		}
		if u.Pairs < 2 || u.PersistSamples != u.Pairs || u.RawPutSamples != u.Pairs || u.BackendPutSamples != u.Pairs {
			t.Errorf("compression %v: sets %d, persist samples %d, backend Put samples %d, SDK put samples %d: want as many, at least 2",
				compression, u.Pairs, u.PersistSamples, u.BackendPutSamples, u.RawPutSamples)
		}
		if len(u.PipelinedRounds) != 2 || u.Compression != compression || u.FormatVersion != 1 {
			t.Errorf("compression %v: %+v", compression, u)
		}
		if u.Ratio <= 0 || u.SDKRatio <= 0 || u.ObjectSize < 60<<10 || u.ObjectSize > 70<<10 || u.BackendPutBPS <= 0 || u.PipelinedRatio <= 0 {
			t.Errorf("compression %v: result %+v", compression, u)
		}
		if u.PersistConfirmP50Ms < u.PersistP50Ms || u.BackendPutP50Ms <= 0 || u.RawPutP50Ms <= 0 || u.AppendP50Ms <= 0 {
			t.Errorf("compression %v: persist -> confirm %.3f ms, persist %.3f ms, backend Put %.3f ms, SDK put %.3f ms, appends %.3f ms",
				compression, u.PersistConfirmP50Ms, u.PersistP50Ms, u.BackendPutP50Ms, u.RawPutP50Ms, u.AppendP50Ms)
		}
		// Every set's baseline is a Put of the backend's, as the engine's
		// are: counted among the backend's puts, with the warm-up's and
		// the pipelined writer's.
		order := seen.order()
		if n := strings.Count(strings.Join(order, " "), "backend"); n != u.Pairs {
			t.Errorf("compression %v: %d Puts of the baseline through the backend for %d sets", compression, n, u.Pairs)
		}
		if names := objectNames(t, e, e.prefix); len(names) != 0 {
			t.Errorf("compression %v: left under the prefix: %v", compression, names)
		}
	}
}

// TestUploadRatio: a set's ratio is its persist -> confirm time over the
// put's time.
func TestUploadRatio(t *testing.T) {
	for _, tc := range []struct {
		persistConfirm, put time.Duration
		ratio               float64
	}{
		{4 * time.Millisecond, 4 * time.Millisecond, 1},
		{11 * time.Millisecond, 10 * time.Millisecond, 1.1},
		{3 * time.Millisecond, 6 * time.Millisecond, 0.5},
	} {
		if ratio := uploadRatio(tc.persistConfirm, tc.put); math.Abs(ratio-tc.ratio) > 1e-9 {
			t.Errorf("%+v: ratio %v", tc, ratio)
		}
	}
}

// TestBenchUploadDeletesEachPair: in (b), both sides' objects are deleted
// after each pair, untimed, so that every timed put finds the store as
// the last one did (no object of an earlier pair left, bar the warm-up's),
// rather than the engine's objects piling up while the SDK side deletes
// its own beside the engine's next set.
func TestBenchUploadDeletesEachPair(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a second")
	}
	e := newBenchEnv(t)
	e.o.rounds = 1
	e.o.roundTime = 300 * time.Millisecond
	seen := &storedAtPut{Backend: e.backend.Unwrap(), prefix: e.prefix}
	e.backend = counting.New(seen)
	e.raw = &rawOrder{rawStore: e.raw, seen: seen}
	u, err := e.upload(t.Context(), 64<<10, false)
	if err != nil {
		t.Fatal(err)
	}
	if u.Pairs < 6 {
		t.Skipf("only %d sets: too few to tell", u.Pairs)
	}
	// The warm-up's two puts, then three per set: the engine's, the
	// backend's Put's and the SDK's, the first of them rotating, each
	// finding no object in the store but those of the set's sides before
	// it (the warm-up's are deleted).
	const warmUp = 2
	order, found := seen.order(), seen.found()
	if len(order) < warmUp+3*u.Pairs {
		t.Fatalf("%d puts for %d sets", len(order), u.Pairs)
	}
	sides := []string{"engine", "backend", "sdk"}
	for i := range u.Pairs {
		want := []string{sides[i%3], sides[(i+1)%3], sides[(i+2)%3]}
		if got := order[warmUp+3*i : warmUp+3*i+3]; !slices.Equal(got, want) {
			t.Fatalf("set %d put %q, want %q (the first sets' puts: %q)", i, got, want, order[warmUp:min(len(order), warmUp+9)])
		}
	}
	// found has the engine's and the backend's Puts, in turn (not the
	// SDK's).
	k := warmUp
	for i := range u.Pairs {
		before := 0
		for j := range 3 {
			if side := sides[(i+j)%3]; side != "sdk" {
				if found[k] > before {
					t.Fatalf("set %d: the %s's put found %d objects in the store, want at most the %d of the set's sides before it", i, side, found[k], before)
				}
				k++
			}
			before++
		}
	}
}

// rawOrder records the SDK side's puts among the engine's puts that seen
// records.
type rawOrder struct {
	rawStore
	seen *storedAtPut
}

func (r *rawOrder) put(ctx context.Context, name string, body []byte) error {
	r.seen.mu.Lock()
	r.seen.puts = append(r.seen.puts, "sdk")
	r.seen.mu.Unlock()
	return r.rawStore.put(ctx, name, body)
}

// storedAtPut records, for each Put in turn, how many objects under prefix
// the store held.
type storedAtPut struct {
	backends.Backend
	prefix string
	mu     sync.Mutex
	counts []int
	puts   []string // "engine" or "backend" (the baseline of (b)) for each Put, in turn, and "sdk" for each raw put (rawOrder)
}

func (b *storedAtPut) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	n := 0
	if err := b.List(ctx, b.prefix, func(backends.ObjectInfo) error { n++; return nil }); err != nil {
		return err
	}
	side := "engine"
	if strings.Contains(name, "/put-") {
		side = "backend" // the baseline of (b)
	}
	b.mu.Lock()
	b.counts = append(b.counts, n)
	b.puts = append(b.puts, side)
	b.mu.Unlock()
	return b.Backend.Put(ctx, name, body, size)
}

func (b *storedAtPut) order() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.puts)
}

func (b *storedAtPut) found() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.counts)
}
