package duplicating_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/backends/faulty"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/conformance"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/duplicating"
	"github.com/dstlgo/dstl/uploader"
)

// TestMain fails the package's tests if a goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.DiscardHandler)

const testTimeout = 30 * time.Second

// testConfig is a storage configuration with local recovery in dir: a
// short batching window, one discard goroutine (deletes in release order),
// no hedging on a healthy backend.
func testConfig(dir string) dstl.Config {
	cfg := dstl.DefaultConfig("test")
	cfg.JobID = "job"
	cfg.BatchPersistDelay = time.Millisecond
	cfg.UploadTimeout = 10 * time.Second
	cfg.UploadNextAttemptDelay = time.Millisecond
	cfg.DiscardNumThreads = 1
	cfg.LocalRecoveryEnabled = true
	cfg.LocalRecoveryDir = dir
	return cfg
}

func openStorage(t *testing.T, cfg dstl.Config, remote backends.Backend, opts ...dstl.Option) *dstl.Storage {
	t.Helper()
	opts = append([]dstl.Option{dstl.WithStorageID("test"), dstl.WithLogger(quiet), dstl.WithLocalRecovery(duplicating.Open)}, opts...)
	s, err := dstl.New(cfg, remote, opts...)
	if err != nil {
		t.Fatalf("dstl.New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// given is the local recovery option of a storage whose component the
// test built itself.
func given(up *duplicating.Uploader) dstl.Option {
	return dstl.WithLocalRecovery(func(context.Context, uploader.LocalRecoveryParams) (uploader.LocalRecovery, error) { return up, nil })
}

// localRemote opens a local backend in a directory of the test's, to play
// the remote store.
func localRemote(t *testing.T) *local.Backend {
	t.Helper()
	b, err := local.Open(t.Context(), local.DefaultConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return c
}

func appendAll(t *testing.T, w *dstl.Writer, kg int, changes ...string) {
	t.Helper()
	for _, c := range changes {
		if err := w.Append(ctx(t), kg, []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
}

func persist(t *testing.T, w *dstl.Writer, from dstl.SequenceNumber, cp int64) dstl.PersistResult {
	t.Helper()
	f, err := w.Persist(ctx(t), from, cp)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Wait(ctx(t))
	if err != nil {
		t.Fatalf("persist checkpoint %d: %v", cp, err)
	}
	return res
}

// localFiles returns the objects in the local recovery directory (names
// relative to it), temporary files excluded.
func localFiles(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, objname.LogSuffix) {
			rel, _ := filepath.Rel(dir, p)
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// barrier returns once the storage's discard pool has done every delete
// queued before the call: it writes an object of its own, releases it and
// waits for its local copy to go (one discard goroutine deletes in order).
// Its checkpoint id is aborted, so it claims nothing that lasts.
func barrier(t *testing.T, s *dstl.Storage, dir string) {
	t.Helper()
	w, err := s.NewWriter("barrier", dstl.KeyGroupRange{Start: 0, End: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	appendAll(t, w, 0, "barrier")
	const cp = 1 << 60
	res := persist(t, w, 0, cp)
	w.Reset(res.From, res.To, cp)
	if err := w.Truncate(res.To); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, filepath.FromSlash(res.Remote.Entries[0].Object))
	for {
		if _, err := os.Stat(name); errors.Is(err, fs.ErrNotExist) {
			return
		}
		select {
		case <-ctx(t).Done():
			t.Fatalf("the barrier's local copy %s is still there", name)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// wantLocalFiles waits for the discard pool of s (see barrier) and checks
// that the local recovery directory holds exactly want.
func wantLocalFiles(t *testing.T, s *dstl.Storage, dir, step string, want ...string) {
	t.Helper()
	barrier(t, s, dir)
	slices.Sort(want)
	if got := localFiles(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after %s: local files %q, want %q", step, got, want)
	}
}

// objectsOf returns the distinct objects of a handle, in order.
func objectsOf(h dstl.Handle) []string {
	var names []string
	for _, e := range h.Entries {
		if !slices.Contains(names, e.Object) {
			names = append(names, e.Object)
		}
	}
	return names
}

// readLocal reads the pair with ReadPreferLocal and returns the changes'
// data and the report.
func readLocal(t *testing.T, s *dstl.Storage, res dstl.PersistResult) ([]string, dstl.ReadReport) {
	t.Helper()
	r, err := s.NewReader(res.Remote.KeyGroups)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	rep, err := r.ReadPreferLocal(ctx(t), res.Remote, res.Local, func(c dstl.Change) error {
		got = append(got, string(c.Data))
		return nil
	})
	if err != nil {
		t.Fatalf("ReadPreferLocal: %v", err)
	}
	return got, rep
}

// TestLocalCopyMirrorsRemote: a local handle points to byte-identical
// copies at the same offsets, and recovery reads them without a request to
// the remote backend.
func TestLocalCopyMirrorsRemote(t *testing.T) {
	dir := t.TempDir()
	remote := counting.New(localRemote(t))
	s := openStorage(t, testConfig(dir), remote)
	w, _ := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 3})
	var want []string
	for cp := int64(1); cp <= 3; cp++ {
		for i := range 5 {
			c := fmt.Sprintf("cp%d-%d", cp, i)
			appendAll(t, w, 0, c)
			want = append(want, c)
		}
		w.NextSequenceNumber()
	}
	res := persist(t, w, 0, 1)
	if res.Local == nil {
		t.Fatal("no local handle")
	}
	if len(res.Local.Entries) != len(res.Remote.Entries) {
		t.Fatalf("local handle has %d entries, remote %d", len(res.Local.Entries), len(res.Remote.Entries))
	}
	for i, le := range res.Local.Entries {
		re := res.Remote.Entries[i]
		if le.Offset != re.Offset || le.Length != re.Length || le.SequenceNumber != re.SequenceNumber {
			t.Errorf("entry %d: local %+v, remote %+v", i, le, re)
		}
	}
	for _, name := range objectsOf(res.Remote) {
		rb, err := conformance.Read(ctx(t), remote, name, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		lb, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil || string(lb) != rb {
			t.Fatalf("local copy of %s: %d bytes, %v; remote %d bytes", name, len(lb), err, len(rb))
		}
	}
	gets := remote.Stats().Gets
	got, rep := readLocal(t, s, res)
	if !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
	if rep.LocalSets != len(res.Remote.Entries) || rep.RemoteSets != 0 || len(rep.Fallbacks) != 0 || rep.LocalBytes != res.Remote.StoredSize {
		t.Errorf("report %+v, want every set local", rep)
	}
	if n := remote.Stats().Gets - gets; n != 0 {
		t.Errorf("recovery sent %d GETs to the remote backend", n)
	}
}

// TestLocalWriteFailure: a failed local write fails nothing; the result
// has no local handle, the failure is counted, and the next persist of new
// change sets has one again.
func TestLocalWriteFailure(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	remote := dstltest.NewBackend()
	localB := dstltest.NewBackend()
	localB.SetFault(dstltest.FailNth(dstltest.OpPut, 1, errors.New("disk full")))
	cfg := testConfig("unused") // the uploader below brings its own local backend
	up, err := duplicating.New(remote, localB, uploadOpts(cfg), duplicating.WithLogger(quiet), duplicating.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	s := openStorage(t, cfg, remote, given(up))
	w, _ := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 0})

	appendAll(t, w, 0, "a")
	res1 := persist(t, w, 0, 1)
	if res1.Local != nil {
		t.Fatalf("persist with a failed local write has a local handle %+v", res1.Local)
	}
	if remote.Len() != 1 || localB.Len() != 0 {
		t.Fatalf("remote holds %d objects, local %d; want 1 and 0", remote.Len(), localB.Len())
	}
	appendAll(t, w, 0, "b")
	// From 0 the first set is covered, which has no local copy.
	if res := persist(t, w, 0, 2); res.Local != nil {
		t.Fatal("a handle over a set without local copy has a local handle")
	}
	res3 := persist(t, w, res1.To, 3)
	if res3.Local == nil || localB.Len() != 1 {
		t.Fatalf("after the disk recovered: local handle %v, %d local objects", res3.Local, localB.Len())
	}
	got, rep := readLocal(t, s, res3)
	if !slices.Equal(got, []string{"b"}) || rep.LocalSets != 1 {
		t.Fatalf("read %q with %+v", got, rep)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, p := range d.DataPoints {
					counts[m.Name] += p.Value
				}
			}
		}
	}
	if counts["dstl.local.copy_failures"] != 1 || counts["dstl.local.copies"] != 1 {
		t.Errorf("metrics %v: want 1 failure and 1 copy", counts)
	}
}

// TestRemoteFailureLeavesNoLocalCopy: when the remote write fails, the
// local copy made beside it goes; the retry's copy is the only one.
func TestRemoteFailureLeavesNoLocalCopy(t *testing.T) {
	dir := t.TempDir()
	remote := dstltest.NewBackend()
	remote.SetFault(dstltest.FailNth(dstltest.OpPut, 1, errors.New("503")))
	s := openStorage(t, testConfig(dir), remote)
	w, _ := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 0})
	appendAll(t, w, 0, "a")
	res := persist(t, w, 0, 1)
	if res.Local == nil {
		t.Fatal("no local handle after the retry succeeded")
	}
	if got, want := localFiles(t, dir), objectsOf(res.Remote); !slices.Equal(got, want) {
		t.Fatalf("local files %q, want the winner's %q only", got, want)
	}
}

// TestLosingAttemptLeavesNoLocalCopy: a hedged upload whose first attempt
// stores late, after the second won: the loser's object and its local copy
// are both deleted.
func TestLosingAttemptLeavesNoLocalCopy(t *testing.T) {
	dir := t.TempDir()
	remote := dstltest.NewBackend()
	var puts atomic.Int64
	remote.SetFault(func(op dstltest.Op, _ string) dstltest.Fault {
		// The first Put stores late, ignoring its cancellation, as a
		// request already on the wire does.
		return dstltest.Fault{Stall: op == dstltest.OpPut && puts.Add(1) == 1, OnCancel: faulty.Ignore}
	})
	cfg := testConfig(dir)
	// Long enough for the second attempt to store its object on a busy
	// machine; the first stalls past it.
	cfg.UploadTimeout = 500 * time.Millisecond
	s := openStorage(t, cfg, remote)
	// Should the test fail before it releases the stalled Put, the
	// storage's Close (an earlier cleanup, run later) must not wait for
	// it forever.
	t.Cleanup(remote.ReleaseStalls)
	w, _ := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 0})
	appendAll(t, w, 0, "a")
	res := persist(t, w, 0, 1) // won by the hedged second attempt
	remote.ReleaseStalls()     // the first one stores now
	w.Confirm(res.From, res.To, 1)
	if err := s.Close(); err != nil { // waits for the loser and its discard
		t.Fatal(err)
	}
	want := objectsOf(res.Remote)
	if got := localFiles(t, dir); !slices.Equal(got, want) {
		t.Errorf("local files %q, want the winner's %q only", got, want)
	}
	var stored []string
	for _, o := range remote.Objects() {
		stored = append(stored, o.Name)
	}
	if !slices.Equal(stored, want) {
		t.Errorf("remote objects %q, want %q", stored, want)
	}
}

// TestRecoveryFallsBack: a missing and a corrupted local copy are read from
// the remote backend instead, set by set, and the changes are exact; the
// backend is asked only for the sets that fell back.
func TestRecoveryFallsBack(t *testing.T) {
	dir := t.TempDir()
	remote := counting.New(localRemote(t))
	s := openStorage(t, testConfig(dir), remote)
	w, _ := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 0})
	var want []string
	for i := range 3 { // three objects of two change sets each
		for j := range 2 {
			c := fmt.Sprintf("change-%d-%d-%s", i, j, strings.Repeat("x", 100))
			appendAll(t, w, 0, c)
			want = append(want, c)
			w.NextSequenceNumber()
		}
		persist(t, w, 0, int64(i+1))
	}
	res := persist(t, w, 0, 4)
	objs := objectsOf(*res.Local)
	if len(objs) != 3 || len(res.Local.Entries) != 6 {
		t.Fatalf("the handle has %d entries in %d objects, want 6 in 3", len(res.Local.Entries), len(objs))
	}
	// The first object's copy is missing; the second's is damaged in its
	// second change set (entry 3).
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(objs[0]))); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, filepath.FromSlash(objs[1]))
	data, err := os.ReadFile(corrupt)
	if err != nil {
		t.Fatal(err)
	}
	e := res.Local.Entries[3]
	data[e.Offset+e.Length/2] ^= 0x40
	if err := os.WriteFile(corrupt, data, 0o644); err != nil {
		t.Fatal(err)
	}

	fresh := openStorage(t, testConfig(dir), remote) // a restarted process
	before := remote.Stats()
	got, rep := readLocal(t, fresh, res)
	if !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
	if rep.LocalSets != 3 || rep.RemoteSets != 3 || len(rep.Fallbacks) != 3 {
		t.Fatalf("report %+v: want 3 sets local, 3 remote", rep)
	}
	for i, want := range []struct {
		object string
		err    error
	}{{objs[0], backends.ErrNotFound}, {objs[0], backends.ErrNotFound}, {objs[1], format.ErrChecksum}} {
		if fb := rep.Fallbacks[i]; fb.LocalObject != want.object || !errors.Is(fb.Err, want.err) {
			t.Errorf("fallback %d: %+v, want %s: %v", i, fb, want.object, want.err)
		}
	}
	en := res.Remote.Entries
	wantBytes := en[0].Length + en[1].Length + en[3].Length
	after := remote.Stats()
	if n, b := after.Gets-before.Gets, after.BytesRead-before.BytesRead; n != 2 || b != wantBytes {
		t.Errorf("%d remote GETs of %d bytes, want 2 (the missing copy's two sets together, the damaged set alone) of %d", n, b, wantBytes)
	}
	if rep.RemoteBytes != wantBytes || rep.LocalBytes != res.Remote.StoredSize-wantBytes {
		t.Errorf("report bytes %+v", rep)
	}
}

// TestReadPreferLocalRejectsForeignHandle: a local handle of another
// persist is an error, not data.
func TestReadPreferLocalRejectsForeignHandle(t *testing.T) {
	s := openStorage(t, testConfig(t.TempDir()), dstltest.NewBackend())
	w, _ := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 0})
	appendAll(t, w, 0, "a")
	res1 := persist(t, w, 0, 1)
	appendAll(t, w, 0, "b")
	res2 := persist(t, w, 0, 2)
	r, _ := s.NewReader(res1.Remote.KeyGroups)
	_, err := r.ReadPreferLocal(ctx(t), res2.Remote, res1.Local, func(dstl.Change) error { return nil })
	if !errors.Is(err, dstl.ErrInvalidHandle) {
		t.Fatalf("ReadPreferLocal with another persist's local handle: %v, want ErrInvalidHandle", err)
	}
}

// TestLocalCopyLifecycle follows the local copies of one writer through
// confirms, an abort, truncations and closes, and counts the files after
// each step: a copy goes once no live change set is in it and no pending
// or latest confirmed checkpoint's local handle points to it.
func TestLocalCopyLifecycle(t *testing.T) {
	dir := t.TempDir()
	remote := dstltest.NewBackend()
	s := openStorage(t, testConfig(dir), remote)
	cur := s // the storage checked
	w, _ := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 0})
	check := func(step string, want ...[]string) {
		t.Helper()
		wantLocalFiles(t, cur, dir, step, slices.Concat(want...)...)
	}
	newObject := func(cp int64, from dstl.SequenceNumber) (dstl.PersistResult, []string) {
		t.Helper()
		appendAll(t, w, 0, fmt.Sprint("change of checkpoint ", cp))
		res := persist(t, w, from, cp)
		if res.Local == nil {
			t.Fatalf("checkpoint %d has no local handle", cp)
		}
		objs := objectsOf(res.Remote)
		return res, objs[len(objs)-1:]
	}

	res1, a := newObject(1, 0)
	w.Confirm(res1.From, res1.To, 1)
	check("confirm 1", a)

	res2, b := newObject(2, 0)
	w.Reset(res2.From, res2.To, 2)
	check("abort 2 (its sets are live, kept for reuse)", a, b)

	res3, c := newObject(3, 0)
	w.Confirm(res3.From, res3.To, 3)
	check("confirm 3", a, b, c)

	if err := w.Truncate(res3.To); err != nil {
		t.Fatal(err)
	}
	check("truncate all (checkpoint 3 is the latest confirmed, it keeps them)", a, b, c)

	res4, d := newObject(4, res3.To)
	check("persist 4 (pending)", a, b, c, d)
	w.Confirm(res4.From, res4.To, 4)
	check("confirm 4 (ends checkpoint 3's claims)", d)

	res5, e := newObject(5, res4.From)
	w.Reset(res5.From, res5.To, 5)
	check("abort 5", d, e)
	if err := w.Truncate(res5.To); err != nil {
		t.Fatal(err)
	}
	check("truncate after abort 5 (checkpoint 4 keeps its copy)", d)

	res6, f := newObject(6, res5.To)
	if err := w.Truncate(res6.To); err != nil {
		t.Fatal(err)
	}
	check("truncate under pending checkpoint 6", d, f)

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	check("close the writer (4 is the latest confirmed, 6 pending)", d, f)

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := localFiles(t, dir), slices.Sorted(slices.Values(append(slices.Clone(d), f...))); !slices.Equal(got, want) {
		t.Fatalf("after closing the storage: local files %q, want %q for a restart", got, want)
	}

	// A restart that restores checkpoint 4 keeps its copy, deletes the
	// rest, and drops the kept one at its first confirmed checkpoint.
	if err := os.WriteFile(filepath.Join(dir, "job", ".tmp-crashed"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := openStorage(t, testConfig(dir), remote)
	cur = s2
	if _, err := os.Stat(filepath.Join(dir, "job", ".tmp-crashed")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary file of a crashed write is still there: %v", err)
	}
	got, rep := readLocal(t, s2, res4)
	if len(got) != 1 || rep.LocalSets != 1 {
		t.Fatalf("restore of checkpoint 4 read %q with %+v, want its change from the local copy", got, rep)
	}
	cr, err := s2.CleanLocalCopies(ctx(t), res4.Remote)
	if err != nil {
		t.Fatal(err)
	}
	if cr.Kept != 1 || cr.Deleted != 1 || cr.DeletedBytes <= 0 {
		t.Errorf("CleanLocalCopies = %+v, want 1 kept and 1 deleted", cr)
	}
	check("start-up cleanup", d)
	w2, _ := s2.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 0})
	appendAll(t, w2, 0, "after restart")
	res7 := persist(t, w2, 0, 7)
	w2.Confirm(res7.From, res7.To, 7)
	check("the restarted storage's first confirm", objectsOf(res7.Remote))
}

// TestCleanLocalCopiesWithoutLocalRecovery does nothing.
func TestCleanLocalCopiesWithoutLocalRecovery(t *testing.T) {
	cfg := testConfig("")
	cfg.LocalRecoveryEnabled = false
	s := openStorage(t, cfg, dstltest.NewBackend())
	if res, err := s.CleanLocalCopies(ctx(t)); err != nil || res != (dstl.CleanResult{}) {
		t.Fatalf("CleanLocalCopies = %+v, %v", res, err)
	}
}

// TestOpenErrors: a local recovery directory that cannot be one is an
// error naming it.
func TestOpenErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := dstl.New(testConfig(file), dstltest.NewBackend(), dstl.WithLogger(quiet), dstl.WithLocalRecovery(duplicating.Open))
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("dstl.New with a file as local recovery directory: %v", err)
	}
	if _, err := duplicating.New(nil, dstltest.NewBackend(), uploadOpts(testConfig("x"))); err == nil {
		t.Error("New without a remote backend: no error")
	}
}

// TestLocalRecoveryIsAnOption: local recovery is what the storage is given
// with dstl.WithLocalRecovery, turned on by the configuration; linking
// this package registers nothing.
func TestLocalRecoveryIsAnOption(t *testing.T) {
	for _, tc := range []struct {
		name      string
		enabled   bool
		option    bool
		wantErr   error // from dstl.New
		wantLocal bool  // the persist result has a local handle
	}{
		{"enabled without the option", true, false, dstl.ErrInvalidConfig, false},
		{"option without enabling", false, true, nil, false},
		{"enabled with the option", true, true, nil, true},
		{"neither", false, false, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.LocalRecoveryEnabled = tc.enabled
			opened := 0
			opts := []dstl.Option{dstl.WithLogger(quiet)}
			if tc.option {
				opts = append(opts, dstl.WithLocalRecovery(func(ctx context.Context, p uploader.LocalRecoveryParams) (uploader.LocalRecovery, error) {
					opened++
					return duplicating.Open(ctx, p)
				}))
			}
			s, err := dstl.New(cfg, dstltest.NewBackend(), opts...)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("dstl.New: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "dstl.WithLocalRecovery") || !strings.Contains(err.Error(), "local-recovery.enabled") {
					t.Errorf("the error %q names neither the option to pass nor the one that enabled local recovery", err)
				}
				return
			}
			defer s.Close()
			if want := map[bool]int{true: 1}[tc.enabled && tc.option]; opened != want {
				t.Errorf("the local recovery was opened %d times, want %d", opened, want)
			}
			w, _ := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 0})
			appendAll(t, w, 0, "a")
			if res := persist(t, w, 0, 1); (res.Local != nil) != tc.wantLocal {
				t.Errorf("local handle %+v, want one: %v", res.Local, tc.wantLocal)
			}
		})
	}
}

// TestOpenerOptions: the options of Opener reach the uploader.
func TestOpenerOptions(t *testing.T) {
	_, err := dstl.New(testConfig(t.TempDir()), dstltest.NewBackend(), dstl.WithLogger(quiet),
		dstl.WithLocalRecovery(duplicating.Opener(duplicating.WithLocalTimeout(-time.Second))))
	if err == nil || !strings.Contains(err.Error(), "local timeout") {
		t.Fatalf("dstl.New with a negative local timeout: %v", err)
	}
}

// TestEngine runs the engine's conformance suite with local recovery on,
// over the in-memory backend and over the local backend as remote store.
func TestEngine(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		conformance.TestEngine(t, func(*testing.T) backends.Backend { return dstltest.NewBackend() }, conformance.WithLocalRecovery(duplicating.Open))
	})
	t.Run("local", func(t *testing.T) {
		conformance.TestEngine(t, func(t *testing.T) backends.Backend {
			b, err := local.Open(t.Context(), local.DefaultConfig(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}, conformance.WithLocalRecovery(duplicating.Open))
	})
}

// sharedObject opens a storage with local recovery in dir whose writers a
// (key group 0) and b (key group 1) each append one change and persist it
// for checkpoint 1 in one batch, so that both sets share one object.
func sharedObject(t *testing.T, dir string) (s *dstl.Storage, a, b *dstl.Writer, ra, rb dstl.PersistResult, shared []string) {
	t.Helper()
	cfg := testConfig(dir)
	cfg.BatchPersistDelay = 200 * time.Millisecond // both persists in one batch
	s = openStorage(t, cfg, dstltest.NewBackend())
	a, _ = s.NewWriter("a", dstl.KeyGroupRange{Start: 0, End: 0})
	b, _ = s.NewWriter("b", dstl.KeyGroupRange{Start: 1, End: 1})
	appendAll(t, a, 0, "a")
	appendAll(t, b, 1, "b")
	fa, err := a.Persist(ctx(t), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := b.Persist(ctx(t), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ra, err = fa.Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if rb, err = fb.Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}
	shared = objectsOf(ra.Remote)
	if !slices.Equal(shared, objectsOf(rb.Remote)) || ra.Local == nil || rb.Local == nil {
		t.Fatalf("the writers' sets went to %q and %q (local handles %v, %v); want one shared object with local copies", shared, objectsOf(rb.Remote), ra.Local, rb.Local)
	}
	return s, a, b, ra, rb, shared
}

// TestSharedLocalCopy: the local copy of an object holding two writers'
// change sets stays while either set is live, and goes with the last.
func TestSharedLocalCopy(t *testing.T) {
	dir := t.TempDir()
	s, a, b, ra, rb, shared := sharedObject(t, dir)
	a.Reset(ra.From, ra.To, 1)
	b.Reset(rb.From, rb.To, 1)
	if err := a.Truncate(ra.To); err != nil {
		t.Fatal(err)
	}
	wantLocalFiles(t, s, dir, "one writer truncated", shared...)
	got, rep := readLocal(t, s, rb)
	if !slices.Equal(got, []string{"b"}) || rep.LocalSets != 1 {
		t.Fatalf("read %q with %+v", got, rep)
	}
	if err := b.Truncate(rb.To); err != nil {
		t.Fatal(err)
	}
	wantLocalFiles(t, s, dir, "both writers truncated")
}

// TestClaimsArePerWriter: one writer aborting a checkpoint that another
// confirmed leaves the other's copies alone; closing a writer hands its
// claims to the job, and the next confirmed checkpoint ends them.
func TestClaimsArePerWriter(t *testing.T) {
	dir := t.TempDir()
	s, a, b, ra, rb, shared := sharedObject(t, dir)
	b.Reset(rb.From, rb.To, 1)
	if err := b.Truncate(rb.To); err != nil {
		t.Fatal(err)
	}
	a.Confirm(ra.From, ra.To, 1)
	if err := a.Truncate(ra.To); err != nil {
		t.Fatal(err)
	}
	wantLocalFiles(t, s, dir, "b aborted and a confirmed and both truncated (a's confirmed copy stays)", shared...)
	got, rep := readLocal(t, s, ra)
	if !slices.Equal(got, []string{"a"}) || rep.LocalSets != 1 || len(rep.Fallbacks) != 0 {
		t.Fatalf("read %q with %+v", got, rep)
	}

	// b confirming a newer checkpoint does not end a's claim...
	appendAll(t, b, 1, "b2")
	rb2 := persist(t, b, rb.To, 2)
	b.Confirm(rb2.From, rb2.To, 2)
	barrier(t, s, dir)
	if got := localFiles(t, dir); !slices.Contains(got, shared[0]) {
		t.Fatalf("b's confirm deleted a's copy: local files %q", got)
	}
	// ...until a is closed: its claims are the job's then.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	appendAll(t, b, 1, "b3")
	rb3 := persist(t, b, rb.To, 3)
	b.Confirm(rb3.From, rb3.To, 3)
	barrier(t, s, dir)
	if got := localFiles(t, dir); slices.Contains(got, shared[0]) {
		t.Fatalf("a's copy outlived a newer checkpoint after a closed: local files %q", got)
	}
}

// TestSlowLocalDisk: a local write still running past the local timeout
// after the upload succeeded is cancelled; the upload completes without a
// local handle.
func TestSlowLocalDisk(t *testing.T) {
	remote := dstltest.NewBackend()
	localB := dstltest.NewBackend()
	localB.SetFault(func(op dstltest.Op, _ string) dstltest.Fault {
		if op == dstltest.OpPut {
			return dstltest.Fault{Stall: true}
		}
		return dstltest.Fault{}
	})
	cfg := testConfig("unused") // the uploader below brings its own local backend
	up, err := duplicating.New(remote, localB, uploadOpts(cfg), duplicating.WithLogger(quiet), duplicating.WithLocalTimeout(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	s := openStorage(t, cfg, remote, given(up))
	w, _ := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 0})
	appendAll(t, w, 0, "a")
	res := persist(t, w, 0, 1)
	if res.Local != nil || remote.Len() != 1 || localB.Len() != 0 {
		t.Fatalf("local handle %v, %d remote and %d local objects; want none, 1 and 0", res.Local, remote.Len(), localB.Len())
	}
	if _, err := duplicating.New(remote, localB, uploadOpts(cfg), duplicating.WithLocalTimeout(0)); err == nil {
		t.Error("New with a zero local timeout: no error")
	}
}

// TestBothCopiesGone: when the local copy and the object are both gone,
// the error wraps the backend's and names the local failure too.
func TestBothCopiesGone(t *testing.T) {
	dir := t.TempDir()
	remote := dstltest.NewBackend()
	s := openStorage(t, testConfig(dir), remote)
	w, _ := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 0})
	appendAll(t, w, 0, "a")
	res := persist(t, w, 0, 1)
	name := res.Remote.Entries[0].Object
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(res.Local.Entries[0].Object))); err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(ctx(t), name); err != nil {
		t.Fatal(err)
	}
	r, _ := s.NewReader(res.Remote.KeyGroups)
	_, err := r.ReadPreferLocal(ctx(t), res.Remote, res.Local, func(dstl.Change) error { return nil })
	if !errors.Is(err, backends.ErrNotFound) || !strings.Contains(err.Error(), "local copy") {
		t.Fatalf("ReadPreferLocal with both copies gone: %v; want the backend's ErrNotFound and the local failure", err)
	}
}

// TestLocalRecoveryThroughWithUploaderIsRefused: an uploader that keeps
// local copies given through dstl.WithUploader would have its copies named
// in handles and never deleted (the storage deletes copies only through the
// component of dstl.WithLocalRecovery), so the storage refuses it, with or
// without local recovery enabled.
func TestLocalRecoveryThroughWithUploaderIsRefused(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		remote := dstltest.NewBackend()
		cfg := testConfig(t.TempDir())
		cfg.LocalRecoveryEnabled = enabled
		up, err := duplicating.New(remote, dstltest.NewBackend(), uploadOpts(cfg), duplicating.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		wrap := dstl.WithUploader(func(uploader.Uploader) uploader.Uploader { return up })
		s, err := dstl.New(cfg, remote, wrap, dstl.WithLocalRecovery(duplicating.Open))
		if err == nil {
			s.Close()
			t.Fatalf("enabled=%v: a storage was opened with a local-copying uploader from WithUploader", enabled)
		}
		if !errors.Is(err, dstl.ErrInvalidConfig) || !strings.Contains(err.Error(), "WithLocalRecovery") {
			t.Fatalf("enabled=%v: err = %v, want ErrInvalidConfig naming WithLocalRecovery", enabled, err)
		}
	}
}

// uploadOpts are cfg's settings of the default uploader.
func uploadOpts(cfg dstl.Config) uploader.Options {
	return uploader.Options{JobID: cfg.JobID, Compression: cfg.CompressionEnabled,
		BufferSize: int(cfg.UploadBufferSize), Concurrency: cfg.UploadNumThreads}
}

// TestPrepareWritesBothCopies: a batch encoded ahead is written by each
// attempt to both backends, under a name of its own, and its results name
// the local copy, byte for byte the remote object.
func TestPrepareWritesBothCopies(t *testing.T) {
	remote, localB := dstltest.NewBackend(), dstltest.NewBackend()
	up, err := duplicating.New(remote, localB, uploadOpts(testConfig("x")), duplicating.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	task := &uploader.Task{LogID: [16]byte{1}, ChangeSets: []*format.ChangeSet{{LogID: [16]byte{1}, SequenceNumber: 4,
		Groups: []format.Group{{KeyGroup: 2, Changes: [][]byte{[]byte("a"), []byte("b")}}}}}}
	p, err := up.Prepare(ctx(t), []*uploader.Task{task})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	var names []string
	for range 2 {
		out, err := p.Upload(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		obj := out.Objects[0]
		res := out.Tasks[0].Results[0]
		if obj.LocalName != obj.Name || res.Object != obj.Name || res.LocalObject != obj.Name {
			t.Fatalf("object %+v, result %+v: want the local copy named as the object", obj, res)
		}
		rb, err := conformance.Read(ctx(t), remote, obj.Name, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		lb, err := conformance.Read(ctx(t), localB, obj.Name, 0, -1)
		if err != nil || lb != rb {
			t.Fatalf("local copy of %s: %d bytes, %v; remote %d bytes", obj.Name, len(lb), err, len(rb))
		}
		names = append(names, obj.Name)
	}
	if names[0] == names[1] {
		t.Fatalf("both attempts wrote %s", names[0])
	}
}

// TestReadPreferLocalReadsAhead: recovering from local copies reads the
// next change set's copy while the caller still holds the first, and the
// report counts every set read.
func TestReadPreferLocalReadsAhead(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.BatchPersistDelay = dstl.NoBatchDelay
	s := openStorage(t, cfg, localRemote(t))
	w, _ := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 3})
	var res dstl.PersistResult
	for cp := int64(1); cp <= 4; cp++ {
		appendAll(t, w, 0, fmt.Sprintf("set-%d", cp))
		res = persist(t, w, 0, cp)
	}
	if res.Local == nil || len(objectsOf(*res.Local)) != 4 {
		t.Fatalf("want the 4 sets in 4 local copies, got %+v", res.Local)
	}
	r, err := s.NewReader(res.Remote.KeyGroups)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	rep, err := r.ReadPreferLocal(ctx(t), res.Remote, res.Local, func(c dstl.Change) error {
		if len(got) == 0 {
			// Fails on a reader that reads the next copy only once
			// the caller is done with this set.
			for deadline := time.Now().Add(10 * time.Second); r.Stats().LocalRequests < 2; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					return fmt.Errorf("the caller holds the first set and the reader read %d local copies, want the next one too", r.Stats().LocalRequests)
				}
			}
		}
		got = append(got, string(c.Data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"set-1", "set-2", "set-3", "set-4"}; !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
	if rep.LocalSets != 4 || rep.RemoteSets != 0 || rep.LocalBytes != res.Remote.StoredSize {
		t.Fatalf("report %+v, want the 4 sets local", rep)
	}
}
