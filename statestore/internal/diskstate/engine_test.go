package diskstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testBackend opens a local backend in a new directory.
func testBackend(t *testing.T) *local.Backend {
	t.Helper()
	b, err := local.Open(context.Background(), local.Config{Root: t.TempDir(), CreateRoot: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// testTarget returns a target over b whose objects are "state/NNNNNN.sst".
func testTarget(b backends.Backend) Target {
	var n atomic.Int64
	return Target{
		Backend:   b,
		NewObject: func() (string, error) { return fmt.Sprintf("state/%06d.sst", n.Add(1)), nil },
		Logger:    quiet,
	}
}

func openTestDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "w"), quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// state is a database with a model of what it holds.
type state struct {
	t     *testing.T
	db    *DB
	model map[string][]byte
	rng   *rand.Rand
	kgr   dstl.KeyGroupRange
}

func newState(t *testing.T, kgr dstl.KeyGroupRange, seed uint64) *state {
	return &state{t: t, db: openTestDB(t), model: map[string][]byte{}, rng: rand.New(rand.NewPCG(seed, 1)), kgr: kgr}
}

func (s *state) randomKey() []byte {
	kg := s.kgr.Start + s.rng.IntN(s.kgr.End-s.kgr.Start+1)
	k := AppendStorePrefix(nil, kg, []string{"counts", "windows"}[s.rng.IntN(2)])
	return fmt.Appendf(k, "key-%08x", s.rng.Uint32())
}

func (s *state) randomValue() []byte {
	v := make([]byte, 40+s.rng.IntN(120))
	for i := range v {
		v[i] = byte(s.rng.Uint32())
	}
	return v
}

func (s *state) set(k, v []byte) {
	if err := s.db.Set(k, v, pebble.NoSync); err != nil {
		s.t.Fatal(err)
	}
	s.db.Touch(k)
	s.model[string(k)] = v
}

func (s *state) del(k []byte) {
	if err := s.db.Delete(k, pebble.NoSync); err != nil {
		s.t.Fatal(err)
	}
	s.db.Touch(k)
	delete(s.model, string(k))
}

// fill adds n random keys.
func (s *state) fill(n int) {
	for range n {
		s.set(s.randomKey(), s.randomValue())
	}
}

// change changes about frac of the keys: new values, deletions, new keys,
// and deletions of keys that do not exist.
func (s *state) change(frac float64) {
	keys := make([]string, 0, len(s.model))
	for k := range s.model {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	n := int(frac * float64(len(keys)))
	for range n {
		switch r := s.rng.IntN(10); {
		case r < 6:
			s.set([]byte(keys[s.rng.IntN(len(keys))]), s.randomValue())
		case r < 8:
			s.del([]byte(keys[s.rng.IntN(len(keys))]))
		case r < 9:
			s.set(s.randomKey(), s.randomValue())
		default:
			s.del(s.randomKey())
		}
	}
}

// materialize runs one materialisation after prev and returns the new
// manifest.
func (s *state) materialize(ctx context.Context, tg Target, prev *Manifest) (*Manifest, MaterializeStats) {
	s.t.Helper()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	changed, all := s.db.TakeChanges()
	files, cursor, st, err := Materialize(ctx, tg, s.db, snap, prev, s.kgr, changed, all)
	if err != nil {
		s.t.Fatal(err)
	}
	m := &Manifest{Operator: "op", KeyGroups: s.kgr, MaxParallelism: 64, Cursor: cursor, Files: files}
	if prev != nil {
		m.From = prev.From + 1
	}
	return m, st
}

// dump returns every key and value of db.
func dump(t *testing.T, db *pebble.DB) map[string][]byte {
	t.Helper()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[string][]byte{}
	for valid := it.First(); valid; valid = it.Next() {
		out[string(it.Key())] = slices.Clone(it.Value())
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkState compares db with the keys of want in the key groups of r.
func checkState(t *testing.T, db *pebble.DB, want map[string][]byte, rs ...dstl.KeyGroupRange) {
	t.Helper()
	in := func(k string) bool {
		kg, _ := KeyGroupOf([]byte(k))
		for _, r := range rs {
			if r.Contains(kg) {
				return true
			}
		}
		return false
	}
	got := dump(t, db)
	n := 0
	for k, v := range want {
		if !in(k) {
			continue
		}
		n++
		if g, ok := got[k]; !ok {
			t.Errorf("key %x missing", k)
		} else if !bytes.Equal(g, v) {
			t.Errorf("key %x: value %x, want %x", k, g, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok || !in(k) {
			t.Errorf("key %x should not be there", k)
		}
	}
	if len(got) != n {
		t.Errorf("%d keys, want %d", len(got), n)
	}
}

// load restores ms into a new database.
func load(t *testing.T, tg Target, ms []*Manifest, rs []dstl.KeyGroupRange) (*DB, LoadStats) {
	t.Helper()
	db := openTestDB(t)
	st, err := Load(context.Background(), tg, db, ms, rs)
	if err != nil {
		t.Fatal(err)
	}
	return db, st
}

// listObjects returns the objects of b.
func listObjects(t *testing.T, b backends.Backend) []string {
	t.Helper()
	var out []string
	if err := b.List(context.Background(), "", func(o backends.ObjectInfo) error {
		out = append(out, o.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// dirFiles returns the regular files under dir.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	kgr := dstl.KeyGroupRange{Start: 3, End: 12}
	s := newState(t, kgr, 1)
	b := testBackend(t)
	tg := testTarget(b)
	s.fill(20000)

	m, st := s.materialize(ctx, tg, nil)
	if !st.Full || st.DeltaFiles != 0 || st.SegmentFiles == 0 {
		t.Fatalf("first materialisation: %+v, want a full one of segments", st)
	}
	checkObjects := func(m *Manifest) {
		t.Helper()
		if got, want := listObjects(t, b), m.Objects(); !slices.Equal(got, want) {
			t.Fatalf("backend holds %v, manifest names %v", got, want)
		}
	}
	checkObjects(m)
	db, _ := load(t, tg, []*Manifest{m}, []dstl.KeyGroupRange{kgr})
	checkState(t, db.DB, s.model, kgr)

	maxFiles := 0
	for round := 1; round <= 30; round++ {
		frac := 0.01
		if round%5 == 0 {
			frac = 0.10
		}
		s.change(frac)
		next, st := s.materialize(ctx, tg, m)
		if st.Full {
			t.Fatalf("round %d: a full materialisation", round)
		}
		if st.UploadedBytes > 3*st.ChangedBytes {
			t.Errorf("round %d: uploaded %d bytes for %d changed bytes (%d keys): more than 3 times", round, st.UploadedBytes, st.ChangedBytes, st.ChangedKeys)
		}
		if st.SegmentFiles == 0 || st.DeltaFiles == 0 {
			t.Errorf("round %d: %d segment and %d delta files, want some of each", round, st.SegmentFiles, st.DeltaFiles)
		}
		t.Logf("round %d: %d keys changed, %d bytes; delta %d, segments %d bytes; %d files, %d obsolete",
			round, st.ChangedKeys, st.ChangedBytes, st.DeltaBytes, st.SegmentBytes, len(next.Files), len(st.Obsolete))
		// The obsolete objects are no longer named; deleting them breaks
		// nothing.
		for _, o := range st.Obsolete {
			if slices.Contains(next.Objects(), o) {
				t.Fatalf("round %d: obsolete %s still named", round, o)
			}
			if !slices.Contains(m.Objects(), o) {
				t.Fatalf("round %d: obsolete %s was not named before", round, o)
			}
			if err := b.Delete(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		checkObjects(next)
		if lo, hi := KeyGroupSpan(kgr); !bytes.Equal(next.Cursor, clampCursor(next.Cursor, lo, hi)) {
			t.Errorf("round %d: cursor %x outside the span", round, next.Cursor)
		}
		maxFiles = max(maxFiles, len(next.Files))
		m = next
		if round%6 == 0 || round == 29 {
			db, _ := load(t, tg, []*Manifest{m}, []dstl.KeyGroupRange{kgr})
			checkState(t, db.DB, s.model, kgr)
		}
	}
	// With 1 % of the keys changed, a sweep of twice that covers the state
	// in about 50 rounds: the manifest holds the files of those.
	if maxFiles > 2*50+10 {
		t.Errorf("manifest grew to %d files", maxFiles)
	}
}

// An ingested SST's own range deletion deletes the older keys of its span,
// not its own point keys.
func TestIngestOwnRangeDeletion(t *testing.T) {
	db := openTestDB(t)
	for _, k := range []string{"a", "b", "c"} {
		if err := db.Set([]byte(k), []byte("old"), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil { // older keys in a table...
		t.Fatal(err)
	}
	if err := db.Set([]byte("e"), []byte("old"), pebble.NoSync); err != nil { // ...and in the memtable
		t.Fatal(err)
	}
	if err := db.Set([]byte("z"), []byte("old"), pebble.NoSync); err != nil { // outside the span
		t.Fatal(err)
	}
	tw, err := newTableWriter(db.TempDir(), db.TableFormat(), func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"b", "d"} {
		if err := tw.set([]byte(k), []byte("new")); err != nil {
			t.Fatal(err)
		}
	}
	f, err := tw.finish(Segment, []byte("a"), []byte("f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Ingest(context.Background(), []string{f.path}); err != nil {
		t.Fatal(err)
	}
	got := dump(t, db.DB)
	want := map[string][]byte{"b": []byte("new"), "d": []byte("new"), "z": []byte("old")}
	if len(got) != len(want) {
		t.Errorf("database holds %q, want %q", got, want)
	}
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			t.Errorf("key %s = %q, want %q", k, got[k], v)
		}
	}
}

// Restoring a narrower range keeps only its keys; merging two manifests
// takes from each only its range, though its files hold keys of the other.
func TestLoadNarrowerAndMerge(t *testing.T) {
	ctx := context.Background()
	b := testBackend(t)
	tg := testTarget(b)
	build := func(kgr dstl.KeyGroupRange, seed uint64) (*state, *Manifest) {
		s := newState(t, kgr, seed)
		s.fill(3000)
		m, _ := s.materialize(ctx, tg, nil)
		for range 3 {
			s.change(0.05)
			m, _ = s.materialize(ctx, tg, m)
		}
		return s, m
	}
	a, ma := build(dstl.KeyGroupRange{Start: 0, End: 11}, 2)
	bs, mb := build(dstl.KeyGroupRange{Start: 6, End: 15}, 3)

	narrow := dstl.KeyGroupRange{Start: 2, End: 5}
	db, _ := load(t, tg, []*Manifest{ma}, []dstl.KeyGroupRange{narrow})
	checkState(t, db.DB, a.model, narrow)

	// The narrower instance goes on from the old manifest, incrementally.
	n := &state{t: t, db: db, model: map[string][]byte{}, rng: rand.New(rand.NewPCG(9, 9)), kgr: narrow}
	for k, v := range a.model {
		if kg, _ := KeyGroupOf([]byte(k)); narrow.Contains(kg) {
			n.model[k] = v
		}
	}
	mn := *ma
	mn.KeyGroups = narrow
	m, st := n.materialize(ctx, tg, &mn)
	if st.Full || st.Files != 0 {
		t.Errorf("nothing changed: %+v, want no file", st)
	}
	n.change(0.1)
	m, st = n.materialize(ctx, tg, m)
	if st.Full || st.DeltaFiles == 0 {
		t.Errorf("after changes: %+v, want an incremental materialisation", st)
	}
	db2, _ := load(t, tg, []*Manifest{m}, []dstl.KeyGroupRange{narrow})
	checkState(t, db2.DB, n.model, narrow)

	left, right := dstl.KeyGroupRange{Start: 0, End: 7}, dstl.KeyGroupRange{Start: 8, End: 15}
	merged, st2 := load(t, tg, []*Manifest{ma, mb}, []dstl.KeyGroupRange{left, right})
	if want := len(ma.Files) + len(mb.Files); st2.Files != want {
		t.Errorf("loaded %d files, want %d", st2.Files, want)
	}
	want := map[string][]byte{}
	for k, v := range a.model {
		if kg, _ := KeyGroupOf([]byte(k)); left.Contains(kg) {
			want[k] = v
		}
	}
	for k, v := range bs.model {
		if kg, _ := KeyGroupOf([]byte(k)); right.Contains(kg) {
			want[k] = v
		}
	}
	checkState(t, merged.DB, want, left, right)
	if entries, err := os.ReadDir(merged.TempDir()); err != nil || len(entries) != 0 {
		t.Errorf("temporary directory holds %v (%v) after the merge", entries, err)
	}

	// The merged state materialises in full and restores the same.
	all := dstl.KeyGroupRange{Start: 0, End: 15}
	ms := &state{t: t, db: merged, model: want, kgr: all}
	m3, st3 := ms.materialize(ctx, tg, nil)
	if !st3.Full {
		t.Errorf("%+v, want a full materialisation", st3)
	}
	db3, _ := load(t, tg, []*Manifest{m3}, []dstl.KeyGroupRange{all})
	checkState(t, db3.DB, want, all)

	for _, bad := range [][]dstl.KeyGroupRange{
		{left, {Start: 7, End: 15}}, // overlapping
		{left, {Start: 5, End: 15}}, // not within mb's key groups
	} {
		if _, err := Load(ctx, tg, openTestDB(t), []*Manifest{ma, mb}, bad); err == nil {
			t.Errorf("Load of ranges %v: no error", bad)
		}
	}
	if _, err := Load(ctx, tg, merged, []*Manifest{ma}, []dstl.KeyGroupRange{left}); err == nil {
		t.Error("Load into a database that is not empty: no error")
	}
}

// objectPath returns where the local backend keeps object.
func objectPath(b *local.Backend, object string) string {
	return filepath.Join(b.Root(), filepath.FromSlash(object))
}

func flipByte(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadDamagedOrMissing(t *testing.T) {
	ctx := context.Background()
	kgr := dstl.KeyGroupRange{Start: 0, End: 3}
	b := testBackend(t)
	tg := testTarget(b)
	s := newState(t, kgr, 4)
	s.fill(2000)
	m, _ := s.materialize(ctx, tg, nil)
	s.change(0.05)
	m, _ = s.materialize(ctx, tg, m)
	if len(m.Files) < 3 {
		t.Fatalf("%d files, want at least 3", len(m.Files))
	}

	damaged := m.Files[1].Object
	flipByte(t, objectPath(b, damaged))
	_, err := Load(ctx, tg, openTestDB(t), []*Manifest{m}, []dstl.KeyGroupRange{kgr})
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), damaged) {
		t.Errorf("Load with %s damaged: %v, want an error wrapping ErrFormat naming it", damaged, err)
	}
	flipByte(t, objectPath(b, damaged)) // repaired

	// A file of another size.
	m2 := *m
	m2.Files = slices.Clone(m.Files)
	m2.Files[0].Size++
	_, err = Load(ctx, tg, openTestDB(t), []*Manifest{&m2}, []dstl.KeyGroupRange{kgr})
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), m.Files[0].Object) {
		t.Errorf("Load with a wrong size: %v, want an error wrapping ErrFormat naming %s", err, m.Files[0].Object)
	}

	missing := m.Files[2].Object
	if err := b.Delete(ctx, missing); err != nil {
		t.Fatal(err)
	}
	db := openTestDB(t)
	_, err = Load(ctx, tg, db, []*Manifest{m}, []dstl.KeyGroupRange{kgr})
	if !errors.Is(err, backends.ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load with %s missing: %v, want an error wrapping ErrNotFound naming it", missing, err)
	}
	if files := dirFiles(t, db.TempDir()); len(files) != 0 {
		t.Errorf("failed Load left %v", files)
	}
}

func TestLoadLocalCopies(t *testing.T) {
	ctx := context.Background()
	kgr := dstl.KeyGroupRange{Start: 0, End: 7}
	b := counting.New(testBackend(t))
	tg := testTarget(b)
	tg.LocalDir = filepath.Join(t.TempDir(), "local")
	s := newState(t, kgr, 5)
	s.fill(3000)
	m, _ := s.materialize(ctx, tg, nil)
	for range 4 {
		s.change(0.03)
		next, st := s.materialize(ctx, tg, m)
		for _, o := range st.Obsolete {
			if err := os.Remove(tg.localPath(o)); err != nil {
				t.Fatal(err)
			}
		}
		m = next
	}
	// A local copy of every file of the manifest, and of no other.
	var want []string
	for _, o := range m.Objects() {
		want = append(want, tg.localPath(o))
	}
	slices.Sort(want)
	if got := dirFiles(t, tg.LocalDir); !slices.Equal(got, want) {
		t.Fatalf("local copies %v, want %v", got, want)
	}

	before := b.Stats()
	db, st := load(t, tg, []*Manifest{m}, []dstl.KeyGroupRange{kgr})
	checkState(t, db.DB, s.model, kgr)
	if gets := b.Stats().Gets - before.Gets; gets != 0 {
		t.Errorf("%d backend reads with intact local copies, want 0", gets)
	}
	if st.LocalFiles != len(m.Files) || st.Files != len(m.Files) || st.FetchedBytes != 0 || st.LocalBytes == 0 {
		t.Errorf("stats %+v, want all %d files local", st, len(m.Files))
	}

	damaged, missing := m.Files[0], m.Files[len(m.Files)-1]
	flipByte(t, tg.localPath(damaged.Object))
	if err := os.Remove(tg.localPath(missing.Object)); err != nil {
		t.Fatal(err)
	}
	before = b.Stats()
	db, st = load(t, tg, []*Manifest{m}, []dstl.KeyGroupRange{kgr})
	checkState(t, db.DB, s.model, kgr)
	if gets := b.Stats().Gets - before.Gets; gets != 2 {
		t.Errorf("%d backend reads, want 2 (a damaged and a missing local copy)", gets)
	}
	if st.LocalFiles != len(m.Files)-2 || st.FetchedBytes != damaged.Size+missing.Size {
		t.Errorf("stats %+v, want %d local files and %d bytes fetched", st, len(m.Files)-2, damaged.Size+missing.Size)
	}
	// The fetched files are the new local copies.
	for _, f := range []File{damaged, missing} {
		if err := checkFile(tg.localPath(f.Object), f); err != nil {
			t.Errorf("local copy of %s: %v", f.Object, err)
		}
	}
}

// failPut fails the failAt-th Put.
type failPut struct {
	backends.Backend
	n, failAt atomic.Int32
}

var errInjected = errors.New("injected failure")

func (f *failPut) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	if f.n.Add(1) == f.failAt.Load() {
		return errInjected
	}
	return f.Backend.Put(ctx, name, body, size)
}

func TestMaterializeFailureCleansUp(t *testing.T) {
	ctx := context.Background()
	kgr := dstl.KeyGroupRange{Start: 0, End: 7}
	for _, tc := range []struct {
		name        string
		incremental bool
		parallelism int
	}{
		{"full", false, 1},
		{"incremental", true, 1},
		{"full/parallel", false, 4},
		{"incremental/parallel", true, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cb := counting.New(testBackend(t))
			fb := &failPut{Backend: cb}
			tg := testTarget(fb)
			tg.LocalDir = filepath.Join(t.TempDir(), "local")
			tg.maxFileSize = 32 << 10 // several files
			tg.Parallelism = tc.parallelism
			s := newState(t, kgr, 6)
			s.fill(3000)
			var prev *Manifest
			if tc.incremental {
				prev, _ = s.materialize(ctx, tg, nil)
				s.change(0.05)
			}
			objects, copies := listObjects(t, fb), dirFiles(t, tg.LocalDir)

			fb.n.Store(0)
			fb.failAt.Store(2)
			snap := s.db.NewSnapshot()
			defer snap.Close()
			changed, all := s.db.TakeChanges()
			_, _, _, err := Materialize(ctx, tg, s.db, snap, prev, kgr, changed, all)
			if !errors.Is(err, errInjected) {
				t.Fatalf("Materialize: %v, want the injected failure", err)
			}
			// One at a time, the first Put succeeds before the second
			// fails; in parallel, it may be cancelled.
			if d := cb.Stats().Deletes; tc.parallelism == 1 && d < 1 {
				t.Errorf("%d deletions, want the first Put's object deleted", d)
			}
			if got := listObjects(t, fb); !slices.Equal(got, objects) {
				t.Errorf("after the failure the backend holds %v, want %v", got, objects)
			}
			if got := dirFiles(t, tg.LocalDir); !slices.Equal(got, copies) {
				t.Errorf("after the failure the local copies are %v, want %v", got, copies)
			}
			if files := dirFiles(t, s.db.TempDir()); len(files) != 0 {
				t.Errorf("after the failure the temporary directory holds %v", files)
			}
		})
	}
}

// checkSegments checks that the segments among files have disjoint
// ascending spans that cover [lo, hi) exactly.
func checkSegments(t *testing.T, files []File, lo, hi []byte) {
	t.Helper()
	at := lo
	for _, f := range files {
		if f.Kind != Segment {
			continue
		}
		if !bytes.Equal(f.Lo, at) {
			t.Fatalf("segment %s starts at %x, want %x", f.Object, f.Lo, at)
		}
		at = f.Hi
	}
	if !bytes.Equal(at, hi) {
		t.Fatalf("segments end at %x, want %x", at, hi)
	}
}

func TestSplitFiles(t *testing.T) {
	ctx := context.Background()
	kgr := dstl.KeyGroupRange{Start: 1, End: 6}
	lo, hi := KeyGroupSpan(kgr)
	tg := testTarget(testBackend(t))
	const limit = 32 << 10
	tg.maxFileSize = limit
	s := newState(t, kgr, 7)
	s.fill(5000)
	m, st := s.materialize(ctx, tg, nil)
	if st.SegmentFiles < 10 || st.SegmentFiles != len(m.Files) {
		t.Fatalf("full materialisation: %+v, want more than 10 segments of %d bytes at most", st, limit)
	}
	checkSegments(t, m.Files, lo, hi)
	for _, f := range m.Files {
		if f.Size > limit+limit/4 {
			t.Errorf("segment %s of %d bytes, limit %d", f.Object, f.Size, limit)
		}
	}
	s.change(0.2)
	m, st = s.materialize(ctx, tg, m)
	if st.DeltaFiles < 3 || st.Full {
		t.Fatalf("incremental materialisation: %+v, want several delta files", st)
	}
	db, _ := load(t, tg, []*Manifest{m}, []dstl.KeyGroupRange{kgr})
	checkState(t, db.DB, s.model, kgr)
}

// Changes too small for the sweep to cover the state within MaxFiles
// files make a full materialisation, about every MaxFiles/2 rounds.
func TestMaxFiles(t *testing.T) {
	ctx := context.Background()
	kgr := dstl.KeyGroupRange{Start: 0, End: 3}
	lo, hi := KeyGroupSpan(kgr)
	tg := testTarget(testBackend(t))
	tg.maxFiles = 12
	s := newState(t, kgr, 8)
	s.fill(5000)
	m, _ := s.materialize(ctx, tg, nil)
	var fulls []int
	for round := 1; round <= 25; round++ {
		s.change(0.01)
		next, st := s.materialize(ctx, tg, m)
		if len(next.Files) > tg.maxFiles {
			t.Fatalf("round %d: %d files, more than %d", round, len(next.Files), tg.maxFiles)
		}
		if st.Full {
			fulls = append(fulls, round)
			if st.DeltaFiles != 0 || len(next.Files) != st.SegmentFiles || len(st.Obsolete) != len(m.Files) || !bytes.Equal(next.Cursor, lo) {
				t.Errorf("round %d: full materialisation %+v with %d files, want segments alone", round, st, len(next.Files))
			}
			checkSegments(t, next.Files, lo, hi)
		}
		m = next
		if st.Full || round == 25 {
			db, _ := load(t, tg, []*Manifest{m}, []dstl.KeyGroupRange{kgr})
			checkState(t, db.DB, s.model, kgr)
		}
	}
	// A full one every tg.maxFiles/2 rounds, no more often.
	if len(fulls) < 2 {
		t.Errorf("full materialisations in rounds %v, want 2 at least", fulls)
	}
	for i := 1; i < len(fulls); i++ {
		if fulls[i]-fulls[i-1] < tg.maxFiles/2 {
			t.Errorf("full materialisations in rounds %v: closer than %d rounds", fulls, tg.maxFiles/2)
		}
	}
}

// A small state: the sweep wraps, and covers the whole span in one
// materialisation; an empty span gets a segment of its range deletion.
func TestSmallStateWraps(t *testing.T) {
	ctx := context.Background()
	kgr := dstl.KeyGroupRange{Start: 2, End: 9}
	lo, hi := KeyGroupSpan(kgr)
	tg := testTarget(testBackend(t))
	s := newState(t, kgr, 10)
	m, st := s.materialize(ctx, tg, nil)
	if len(m.Files) != 1 || m.Files[0].Kind != Segment || !st.Full {
		t.Fatalf("empty state: files %+v, want one segment", m.Files)
	}
	checkSegments(t, m.Files, lo, hi)
	db, _ := load(t, tg, []*Manifest{m}, []dstl.KeyGroupRange{kgr})
	checkState(t, db.DB, s.model, kgr)

	// The changes are small against a file's own overhead: no bound on
	// the bytes uploaded here.
	s.fill(300)
	wrapped := false
	for round := 1; round <= 12; round++ {
		switch {
		case round == 7:
			// Every key changes: the segments cover the span, the delta
			// is not needed.
			for k := range s.model {
				s.set([]byte(k), s.randomValue())
			}
		case round > 1:
			s.change([]float64{0.02, 0.3}[round%2])
		}
		prev := m
		m, st = s.materialize(ctx, tg, prev)
		if st.Full {
			t.Fatalf("round %d: full materialisation", round)
		}
		if round == 7 {
			if st.DeltaFiles != 0 || len(st.Obsolete) != len(prev.Files) || len(m.Files) != st.SegmentFiles {
				t.Errorf("round %d: %+v, files %+v, want the new segments alone", round, st, m.Files)
			}
			checkSegments(t, slices.SortedFunc(slices.Values(m.Files), func(a, b File) int { return bytes.Compare(a.Lo, b.Lo) }), lo, hi)
		}
		segs := 0
		for _, f := range m.Files[len(m.Files)-st.Files:] {
			if f.Kind == Segment {
				segs++
			}
		}
		if segs == 2 {
			wrapped = true
		}
		db, _ := load(t, tg, []*Manifest{m}, []dstl.KeyGroupRange{kgr})
		checkState(t, db.DB, s.model, kgr)
	}
	if !wrapped {
		t.Error("the sweep never wrapped")
	}
}

// The delta reads the changed keys (sorted) with one iterator moving
// forward, which finds most of them in the blocks it holds, rather than a
// point read of each, which looks every key's index and data blocks up in
// the block cache again (a third of the CPU time of a state larger than
// memory written at full speed).
func TestDeltaReadsInKeyOrder(t *testing.T) {
	ctx := context.Background()
	kgr := dstl.KeyGroupRange{Start: 0, End: 3}
	s := newState(t, kgr, 9)
	s.fill(20000)
	tg := testTarget(testBackend(t))
	m, _ := s.materialize(ctx, tg, nil)
	// The keys into a table, and a fifth of them changed without being
	// written again: the delta reads them from the table.
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(s.model))
	for i, k := range keys {
		if i%5 == 0 {
			s.db.Touch([]byte(k))
		}
	}
	before := s.db.Metrics().BlockCache
	next, st := s.materialize(ctx, tg, m)
	after := s.db.Metrics().BlockCache
	lookups := after.Hits + after.Misses - before.Hits - before.Misses
	if st.Full || st.DeltaFiles == 0 || st.ChangedKeys != (len(keys)+4)/5 {
		t.Fatalf("materialisation %+v, want an incremental one with a delta of %d keys", st, (len(keys)+4)/5)
	}
	t.Logf("%d block cache lookups for %d changed keys and %d bytes of segments", lookups, st.ChangedKeys, st.SegmentBytes)
	// A point read of each key makes about four lookups a key; the
	// iterator, a few hundred in all, or under the race detector (where
	// Pebble turns its seek-using-next off for some iterators at random)
	// about two a key.
	if lookups > 3*int64(st.ChangedKeys) {
		t.Errorf("%d block cache lookups for %d changed keys: the delta reads each key on its own", lookups, st.ChangedKeys)
	}
	db, _ := load(t, tg, []*Manifest{next}, []dstl.KeyGroupRange{kgr})
	checkState(t, db.DB, s.model, kgr)
}
