package diskstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dstlgo/dstl/backends"
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
