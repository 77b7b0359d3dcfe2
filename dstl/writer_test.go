package dstl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// testConfig is a configuration that keeps tests fast: a short batching
// window and short retry delays.
func testConfig() dstl.Config {
	cfg := dstl.DefaultConfig("memory")
	cfg.BatchPersistDelay = time.Millisecond
	cfg.UploadTimeout = 5 * time.Second
	cfg.UploadNextAttemptDelay = 5 * time.Millisecond
	return cfg
}

func newStorage(t testing.TB, b backends.Backend, cfg dstl.Config, opts ...dstl.Option) *dstl.Storage {
	t.Helper()
	quiet := dstl.WithLogger(discardLogger)
	s, err := dstl.New(cfg, b, append([]dstl.Option{dstl.WithStorageID("memory"), quiet}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func newWriter(t testing.TB, s *dstl.Storage, name string, kgr dstl.KeyGroupRange) *dstl.Writer {
	t.Helper()
	w, err := s.NewWriter(name, kgr)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	return w
}

func mustAppend(t testing.TB, w *dstl.Writer, kg int, data string) {
	t.Helper()
	if err := w.Append(context.Background(), kg, []byte(data)); err != nil {
		t.Fatalf("Append(%d, %q): %v", kg, data, err)
	}
}

func persist(t testing.TB, w *dstl.Writer, from dstl.SequenceNumber, cp int64) dstl.Handle {
	t.Helper()
	f, err := w.Persist(context.Background(), from, cp)
	if err != nil {
		t.Fatalf("Persist(%d, %d): %v", from, cp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := f.Wait(ctx)
	if err != nil {
		t.Fatalf("persist %d: %v", cp, err)
	}
	return res.Remote
}

// readAll reads a handle back with a fresh reader over b, as a recovering
// process would, and returns the changes as "kg:data" strings.
func readAll(t testing.TB, b backends.Backend, h dstl.Handle, kgr dstl.KeyGroupRange) []string {
	t.Helper()
	r, err := dstl.NewReader(b, kgr, dstl.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for c, err := range r.Changes(context.Background(), h) {
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		got = append(got, fmt.Sprintf("%d:%s", c.KeyGroup, c.Data))
	}
	return got
}

func TestSequenceNumbers(t *testing.T) {
	s := newStorage(t, dstltest.NewBackend(), testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 9})
	if got := w.InitialSequenceNumber(); got != 0 {
		t.Fatalf("initial = %d, want 0", got)
	}
	if got := w.NextSequenceNumber(); got != 0 {
		t.Fatalf("next on an empty set = %d, want 0 (no rollover)", got)
	}
	mustAppend(t, w, 1, "a")
	if got := w.NextSequenceNumber(); got != 1 {
		t.Fatalf("next after append = %d, want 1", got)
	}
	if got := w.NextSequenceNumber(); got != 1 {
		t.Fatalf("next again = %d, want 1 (no rollover of an empty set)", got)
	}
	if err := w.AppendMeta(context.Background(), []byte("m")); err != nil {
		t.Fatal(err)
	}
	if got := w.NextSequenceNumber(); got != 2 {
		t.Fatalf("next after meta = %d, want 2", got)
	}
}

func TestAppendOutsideRange(t *testing.T) {
	s := newStorage(t, dstltest.NewBackend(), testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 10, End: 19})
	for _, kg := range []int{-2, 9, 20, dstl.MaxKeyGroup + 1} {
		err := w.Append(context.Background(), kg, []byte("x"))
		if err == nil || !bytes.Contains([]byte(err.Error()), fmt.Appendf(nil, "key group %d", kg)) {
			t.Errorf("Append(%d) = %v, want an error naming the key group", kg, err)
		}
	}
}

func TestPersistAndReadBack(t *testing.T) {
	for _, tc := range []struct {
		compress bool
		version  int
	}{{false, 1}, {true, 1}, {false, 2}, {true, 2}} {
		compress := tc.compress
		t.Run(fmt.Sprintf("compression=%v/version=%d", compress, tc.version), func(t *testing.T) {
			b := dstltest.NewBackend()
			cfg := testConfig()
			cfg.CompressionEnabled = compress
			cfg.FormatVersion = tc.version
			s := newStorage(t, b, cfg)
			kgr := dstl.KeyGroupRange{Start: 0, End: 3}
			w := newWriter(t, s, "op", kgr)
			mustAppend(t, w, 2, "a1")
			mustAppend(t, w, 0, "b1")
			mustAppend(t, w, 2, "a2")
			if err := w.AppendMeta(context.Background(), []byte("meta1")); err != nil {
				t.Fatal(err)
			}
			sqn := w.NextSequenceNumber()
			mustAppend(t, w, 3, "c1")
			mustAppend(t, w, 0, "b2")
			h := persist(t, w, 0, 1)
			if len(h.Entries) != 2 || h.Entries[0].SequenceNumber != 0 || h.Entries[1].SequenceNumber != sqn {
				t.Fatalf("handle entries = %+v, want change sets 0 and %d", h.Entries, sqn)
			}
			if h.StorageID != "memory" || h.LogID != w.LogID() || h.KeyGroups != kgr {
				t.Fatalf("handle = %+v", h)
			}
			if h.LogicalSize != 2+2+2+5+2+2 {
				t.Errorf("logical size = %d, want 15", h.LogicalSize)
			}
			if h.IncrementalSize != h.StoredSize || h.StoredSize <= 0 {
				t.Errorf("stored %d, incremental %d: want equal and positive for a first persist", h.StoredSize, h.IncrementalSize)
			}
			want := []string{"-1:meta1", "0:b1", "2:a1", "2:a2", "0:b2", "3:c1"}
			if got := readAll(t, b, h, kgr); !slices.Equal(got, want) {
				t.Fatalf("read back %q, want %q", got, want)
			}
			// A reader of half the range (after rescaling) skips the rest.
			if got := readAll(t, b, h, dstl.KeyGroupRange{Start: 2, End: 3}); !slices.Equal(got, []string{"-1:meta1", "2:a1", "2:a2", "3:c1"}) {
				t.Fatalf("read back [2,3] = %q", got)
			}
		})
	}
}

// TestGroupingByKeyGroup covers both ways of grouping a change set: the
// counting sort over a small range and the comparison sort over a range
// much larger than the set, with metadata, ranges not starting at 0, and
// interleaved appends.
func TestGroupingByKeyGroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kgr   dstl.KeyGroupRange
		kgs   []int
		empty func(i int) bool // change i is empty; nil: none is
	}{
		{"small range from 10", dstl.KeyGroupRange{Start: 10, End: 13}, []int{13, 10, -1, 12, 10, 13, -1}, nil},
		{"whole range, few changes", dstl.KeyGroupRange{Start: 0, End: dstl.MaxKeyGroup}, []int{30000, 5, -1, 30000, 7, 5}, nil},
		{"large range from 100", dstl.KeyGroupRange{Start: 100, End: 20000}, []int{19999, -1, 100, 19999, 5000, 100}, nil},
		// Zero-length changes share their arena offset with the next
		// change; enough changes for the comparison sort to be a real one.
		{"wide range, empty changes", dstl.KeyGroupRange{Start: 10922, End: 16383}, wideRangeKeyGroups(), emptyEvery(3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			s := newStorage(t, b, testConfig())
			w := newWriter(t, s, "op", tc.kgr)
			byKG := map[int][]string{}
			for i, kg := range tc.kgs {
				c := fmt.Sprint("#", i)
				if tc.empty != nil && tc.empty(i) {
					c = ""
				}
				if kg == dstl.MetaKeyGroup {
					if err := w.AppendMeta(context.Background(), []byte(c)); err != nil {
						t.Fatal(err)
					}
				} else {
					mustAppend(t, w, kg, c)
				}
				byKG[kg] = append(byKG[kg], fmt.Sprintf("%d:%s", kg, c))
			}
			var want []string
			for _, kg := range slices.Sorted(maps.Keys(byKG)) {
				want = append(want, byKG[kg]...)
			}
			h := persist(t, w, 0, 1)
			if got := readAll(t, b, h, tc.kgr); !slices.Equal(got, want) {
				t.Fatalf("read back %q, want %q", got, want)
			}
		})
	}
}

// wideRangeKeyGroups appends metadata and a few key groups of
// [10922, 16383] in a fixed pseudo-random order, 1000 changes in all (the
// range is still over 4 × 1000 + 1024 wide).
func wideRangeKeyGroups() []int {
	groups := []int{dstl.MetaKeyGroup, 10922, 13000, 16383}
	rng := rand.New(rand.NewPCG(11, 6))
	kgs := make([]int, 1000)
	for i := range kgs {
		kgs[i] = groups[rng.IntN(len(groups))]
	}
	return kgs
}

func emptyEvery(n int) func(int) bool { return func(i int) bool { return i%n == 1 } }

func TestPersistReusesUploadedSets(t *testing.T) {
	b := dstltest.NewBackend()
	s := newStorage(t, b, testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	h1 := persist(t, w, 0, 1)
	puts := b.Counts()[dstltest.OpPut]
	h2 := persist(t, w, 0, 2) // nothing new: reuse
	if got := b.Counts()[dstltest.OpPut]; got != puts {
		t.Fatalf("second persist put %d objects, want none", got-puts)
	}
	if !slices.Equal(h1.Entries, h2.Entries) {
		t.Fatalf("entries differ: %+v vs %+v", h1.Entries, h2.Entries)
	}
	if h2.IncrementalSize != 0 {
		t.Errorf("incremental size of a reused persist = %d, want 0", h2.IncrementalSize)
	}
	mustAppend(t, w, 0, "y")
	h3 := persist(t, w, 0, 3)
	if len(h3.Entries) != 2 || h3.IncrementalSize != h3.Entries[1].Length {
		t.Fatalf("h3 = %+v, want two entries, incremental = the new one", h3)
	}
	// from past everything: an empty handle, at once.
	if h := persist(t, w, w.NextSequenceNumber(), 4); !h.Empty() {
		t.Fatalf("persist from the active set = %+v, want empty", h)
	}
}

func TestPreemptivePersist(t *testing.T) {
	b := dstltest.NewBackend()
	cfg := testConfig()
	cfg.PreemptivePersistThreshold = 100
	s := newStorage(t, b, cfg)
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	chunk := string(bytes.Repeat([]byte("p"), 60))
	mustAppend(t, w, 0, chunk)
	if b.Len() != 0 {
		t.Fatalf("uploaded below the threshold")
	}
	mustAppend(t, w, 0, chunk) // 120 bytes: past the threshold
	waitFor(t, "a preemptive upload", func() bool { return b.Len() == 1 })
	mustAppend(t, w, 0, "tail")
	h := persist(t, w, 0, 1)
	if len(h.Entries) != 2 {
		t.Fatalf("entries = %d, want 2 (preemptive + tail)", len(h.Entries))
	}
	if got := b.Counts()[dstltest.OpPut]; got != 2 {
		t.Fatalf("puts = %d, want 2: the checkpoint only uploads what came after the preemptive persist", got)
	}
	if got := readAll(t, b, h, w.KeyGroups()); !slices.Equal(got, []string{"0:" + chunk, "0:" + chunk, "0:tail"}) {
		t.Fatalf("read back %q", got)
	}
}

// TestBatchingManyWriters: 64 writers persisting at once produce one object
// per batching window, not one per writer.
func TestBatchingManyWriters(t *testing.T) {
	b := dstltest.NewBackend()
	cfg := testConfig()
	cfg.BatchPersistDelay = 300 * time.Millisecond
	s := newStorage(t, b, cfg)
	const writers = 64
	ws := make([]*dstl.Writer, writers)
	for i := range ws {
		ws[i] = newWriter(t, s, fmt.Sprintf("op-%d", i), dstl.KeyGroupRange{Start: i, End: i})
		mustAppend(t, ws[i], i, fmt.Sprintf("change-%d", i))
	}
	handles := make([]dstl.Handle, writers)
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() { handles[i] = persist(t, w, 0, 1) })
	}
	wg.Wait()
	if got := b.Counts()[dstltest.OpPut]; got != 1 {
		t.Fatalf("64 writers persisting at once wrote %d objects, want 1", got)
	}
	for i, h := range handles {
		if got := readAll(t, b, h, ws[i].KeyGroups()); !slices.Equal(got, []string{fmt.Sprintf("%d:change-%d", i, i)}) {
			t.Fatalf("writer %d read back %q", i, got)
		}
	}
}

func TestBatchSizeThresholdFlushesEarly(t *testing.T) {
	b := dstltest.NewBackend()
	cfg := testConfig()
	cfg.BatchPersistDelay = time.Hour
	cfg.BatchPersistSizeThreshold = 10
	s := newStorage(t, b, cfg)
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "0123456789ab")
	persist(t, w, 0, 1) // would wait an hour without the size threshold
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

var errInjected = errors.New("injected failure")

var discardLogger = slog.New(slog.DiscardHandler)

// TestOpenStorageByURL opens a whole storage from a config, as a user does.
func TestOpenStorageByURL(t *testing.T) {
	cfg, err := dstl.ParseConfig(map[string]string{
		"state.changelog.dstl.dfs.base-path":           "file://" + t.TempDir(),
		"state.changelog.dstl.dfs.batch.persist-delay": "1 ms",
		"job-id": "job-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := dstl.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.ID() != "local" {
		t.Fatalf("storage id = %q", s.ID())
	}
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	h := persist(t, w, 0, 1)
	if objname.Parse("job-1/", h.Entries[0].Object).Kind != objname.Log {
		t.Fatalf("object %q is no log object name under the job's prefix", h.Entries[0].Object)
	}
	if got := readAll(t, s.Backend(), h, w.KeyGroups()); len(got) != 1 || got[0] != "0:x" {
		t.Fatalf("read back %q", got)
	}
}

// TestChangesAcrossChunks: changes of sizes around the arena's chunk sizes
// (4 KiB to 1 MiB, and larger than a chunk) come back whole and in order,
// whatever chunk each landed in, in sets that start with a recycled arena
// and in sets that do not.
func TestChangesAcrossChunks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int
	}{
		{"small", []int{0, 1, 100, 4095, 4096, 4097}},
		{"around a full chunk", []int{1 << 20, 1<<20 - 1, 1<<20 + 1, 3, 0}},
		{"larger than a chunk", []int{3 << 20, 10, 2<<20 + 7, 0, 1 << 20}},
		{"doubling chunks", []int{5000, 9000, 17000, 33000, 65000, 130000, 260000, 520000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			cfg := testConfig()
			cfg.PreemptivePersistThreshold = 1 << 30 // sets end where the test says
			cfg.UploadMaxInFlight = 2 << 30
			s := newStorage(t, b, cfg)
			kgr := dstl.KeyGroupRange{Start: 0, End: 2}
			w := newWriter(t, s, "op", kgr)
			ctx := context.Background()
			var want []string
			var from dstl.SequenceNumber
			for set := range 4 {
				// Within a set, changes are read back by key group.
				byGroup := make([][]string, 3)
				for i, n := range tc.sizes {
					for rep := range 3 {
						kg := (i + rep) % 3
						c := make([]byte, n)
						for j := range c {
							c[j] = byte(set*31 + i*7 + rep*3 + j)
						}
						if err := w.Append(ctx, kg, c); err != nil {
							t.Fatal(err)
						}
						byGroup[kg] = append(byGroup[kg], fmt.Sprintf("%d:%s", kg, c))
					}
				}
				for _, g := range byGroup {
					want = append(want, g...)
				}
				w.NextSequenceNumber()
				if set%2 == 1 { // recycle the arenas of the sets so far
					f, err := w.Persist(ctx, from, int64(set))
					if err != nil {
						t.Fatal(err)
					}
					res, err := f.Wait(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if got := readAll(t, b, res.Remote, kgr); !slices.Equal(got, want) {
						for i := range min(len(got), len(want)) {
							if got[i] != want[i] {
								t.Fatalf("set %d: change %d of %d read back differs: got %.40q..., want %.40q...", set, i, len(want), got[i], want[i])
							}
						}
						t.Fatalf("set %d: read back %d changes, want %d", set, len(got), len(want))
					}
					if err := w.Confirm(res.From, res.To, int64(set)); err != nil {
						t.Fatal(err)
					}
					if err := w.Truncate(res.To); err != nil {
						t.Fatal(err)
					}
					from, want = res.To, nil
				}
			}
		})
	}
}

// TestStorageWriters: Writers counts the writers opened and not closed.
func TestStorageWriters(t *testing.T) {
	s := newStorage(t, dstltest.NewBackend(), testConfig())
	kgr := dstl.KeyGroupRange{Start: 0, End: 7}
	a, b := newWriter(t, s, "a", kgr), newWriter(t, s, "b", kgr)
	if n := s.Writers(); n != 2 {
		t.Fatalf("Writers = %d after opening 2", n)
	}
	a.Close()
	a.Close()
	if n := s.Writers(); n != 1 {
		t.Fatalf("Writers = %d after closing 1 of 2", n)
	}
	b.Close()
	if n := s.Writers(); n != 0 {
		t.Fatalf("Writers = %d after closing both", n)
	}
}
