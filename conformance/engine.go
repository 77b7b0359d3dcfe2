package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/uploader"
)

// TestEngine runs the DSTL over backends from open: writers append,
// persist, confirm, abort and truncate through checkpoints on a storage
// over the backend, and the suite checks what a recovering process reads
// back, what the storage deletes and what it keeps, and that damaged
// objects are errors, never data. Each case runs as a subtest on a backend
// of its own. See the package documentation for what the cases check and
// assume.
func TestEngine(t *testing.T, open Harness, opts ...Option) {
	runCases(t, open, []suiteCase{
		{"ManyWriters", (*suite).testManyWriters},
		{"Rescaling", (*suite).testRescaling},
		{"FormatVersion2", (*suite).testFormatVersion2},
		{"LargeObjects", (*suite).testLargeObjects},
		{"ReleasedObjectsDeleted", (*suite).testReleasedObjectsDeleted},
		{"SharedObjectKeptWhileReferenced", (*suite).testSharedObjectKept},
		{"ConfirmedObjectSurvives", (*suite).testConfirmedObjectSurvives},
		{"FlippedByte", (*suite).testFlippedByte},
		{"TruncatedObject", (*suite).testTruncatedObject},
	}, opts...)
}

// engineStorageID is the storage identifier the suite's storages write into
// handles, and check when reading them.
const engineStorageID = "conformance"

// engineTimeout bounds each case: every call of the engine, and every wait
// for an upload or a deletion, ends by then.
const engineTimeout = 60 * time.Second

// quietLogger drops the engine's logs.
var quietLogger = slog.New(slog.DiscardHandler)

// engineConfig is the storage configuration of the cases: a short batching
// window and retry delay, and no hedging of uploads on a healthy backend.
// One discard goroutine deletes released objects in release order, which
// [engineCase.barrier] relies on.
func engineConfig() dstl.Config {
	cfg := dstl.DefaultConfig("conformance")
	cfg.BatchPersistDelay = 5 * time.Millisecond
	cfg.UploadTimeout = 20 * time.Second
	cfg.UploadNextAttemptDelay = 10 * time.Millisecond
	cfg.DiscardNumThreads = 1
	return cfg
}

// engineCase is one case of [TestEngine]: a fresh backend, a bounded
// context and the configuration of its storages.
type engineCase struct {
	t   *testing.T
	b   backends.Backend
	ctx context.Context
	cfg dstl.Config
	// localRecovery opens the storages' local recovery; nil without.
	localRecovery uploader.OpenLocalRecovery
}

// engine opens a fresh backend for a case whose storages use cfg (with
// local recovery in a directory of the case's under [WithLocalRecovery]).
func (s *suite) engine(t *testing.T, cfg dstl.Config) *engineCase {
	t.Helper()
	if s.localRecovery != nil {
		cfg.LocalRecoveryEnabled = true
		cfg.LocalRecoveryDir = t.TempDir()
	}
	b := s.backend(t)
	ctx, cancel := context.WithTimeout(t.Context(), engineTimeout)
	t.Cleanup(cancel)
	return &engineCase{t: t, b: b, ctx: ctx, cfg: cfg, localRecovery: s.localRecovery}
}

// storage opens a storage over the case's backend. It is closed at the end
// of the test, before the backend; closing it earlier is fine.
func (e *engineCase) storage() *dstl.Storage {
	e.t.Helper()
	st, err := dstl.New(e.cfg, e.b, dstl.WithStorageID(engineStorageID), dstl.WithLogger(quietLogger), dstl.WithLocalRecovery(e.localRecovery))
	if err != nil {
		e.t.Fatalf("dstl.New: %v", err)
	}
	e.t.Cleanup(func() {
		if err := st.Close(); err != nil {
			e.t.Errorf("storage Close: %v", err)
		}
	})
	return st
}

// closeStorage closes st, which lets its discard pool delete everything
// released.
func (e *engineCase) closeStorage(st *dstl.Storage) {
	e.t.Helper()
	if err := st.Close(); err != nil {
		e.t.Fatalf("storage Close: %v", err)
	}
}

// writer opens a writer of st.
func (e *engineCase) writer(st *dstl.Storage, operator string, kgr dstl.KeyGroupRange) *dstl.Writer {
	e.t.Helper()
	w, err := st.NewWriter(operator, kgr)
	if err != nil {
		e.t.Fatalf("NewWriter(%q, %v): %v", operator, kgr, err)
	}
	return w
}

// appendChanges appends each change to key group kg, or as metadata when
// kg is [dstl.MetaKeyGroup].
func appendChanges(ctx context.Context, w *dstl.Writer, kg int, changes ...string) error {
	for _, c := range changes {
		var err error
		if kg == dstl.MetaKeyGroup {
			err = w.AppendMeta(ctx, []byte(c))
		} else {
			err = w.Append(ctx, kg, []byte(c))
		}
		if err != nil {
			return fmt.Errorf("append %q to key group %d: %w", c, kg, err)
		}
	}
	return nil
}

// persist persists w's change sets from from on for checkpoint cp and
// waits for the result. It does not fail the test, so that writers'
// goroutines may call it.
func persist(ctx context.Context, w *dstl.Writer, from dstl.SequenceNumber, cp int64) (dstl.PersistResult, error) {
	f, err := w.Persist(ctx, from, cp)
	if err != nil {
		return dstl.PersistResult{}, err
	}
	res, err := f.Wait(ctx)
	if err != nil {
		return res, fmt.Errorf("persist checkpoint %d from %d: %w", cp, from, err)
	}
	if res.From != from || res.Remote.Empty() {
		return res, fmt.Errorf("persist checkpoint %d from %d: result covers [%d, %d) with %d entries", cp, from, res.From, res.To, len(res.Remote.Entries))
	}
	return res, nil
}

// mustPersist is [persist], failing the test on an error.
func (e *engineCase) mustPersist(w *dstl.Writer, from dstl.SequenceNumber, cp int64) dstl.PersistResult {
	e.t.Helper()
	res, err := persist(e.ctx, w, from, cp)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// readChanges reads h with a reader of kgr on st and returns the changes
// yielded (their data copied) and the error that ended the reading.
func (e *engineCase) readChanges(st *dstl.Storage, kgr dstl.KeyGroupRange, h dstl.Handle) ([]dstl.Change, error) {
	return e.readPreferLocal(st, kgr, h, nil)
}

// readPreferLocal is [engineCase.readChanges] with the local handle of the
// same persist, read by [dstl.Reader.ReadPreferLocal] when not nil.
func (e *engineCase) readPreferLocal(st *dstl.Storage, kgr dstl.KeyGroupRange, h dstl.Handle, local *dstl.Handle) ([]dstl.Change, error) {
	e.t.Helper()
	r, err := st.NewReader(kgr)
	if err != nil {
		e.t.Fatalf("NewReader(%v): %v", kgr, err)
	}
	var got []dstl.Change
	collect := func(c dstl.Change) error {
		c.Data = bytes.Clone(c.Data)
		got = append(got, c)
		return nil
	}
	if local == nil {
		return got, r.Read(e.ctx, h, collect)
	}
	rep, err := r.ReadPreferLocal(e.ctx, h, local, collect)
	switch {
	case err != nil:
	case len(rep.Fallbacks) > 0:
		// The copies of a writer's last confirmed checkpoint must stay.
		err = fmt.Errorf("ReadPreferLocal fell back to the backend for %d change sets, the first because %v", len(rep.Fallbacks), rep.Fallbacks[0].Err)
	case rep.LocalSets != len(h.Entries) || rep.RemoteSets != 0:
		err = fmt.Errorf("ReadPreferLocal reports %d change sets read locally and %d remotely, the handle has %d", rep.LocalSets, rep.RemoteSets, len(h.Entries))
	}
	return got, err
}

// checkRead reads h with a reader of kgr on st and checks that it yields
// exactly the changes of want (by key group, [dstl.MetaKeyGroup] for
// metadata) that a reader of kgr gets: all metadata and the key groups in
// kgr, each group's changes in append order; within a change set, metadata
// first and key groups ascending; change sets in order.
func (e *engineCase) checkRead(st *dstl.Storage, kgr dstl.KeyGroupRange, h dstl.Handle, want map[int][]string) {
	e.t.Helper()
	e.checkReadPreferLocal(st, kgr, h, nil, want)
}

// checkReadPreferLocal is [engineCase.checkRead] with the local handle of
// the same persist, when not nil, read by [dstl.Reader.ReadPreferLocal].
func (e *engineCase) checkReadPreferLocal(st *dstl.Storage, kgr dstl.KeyGroupRange, h dstl.Handle, local *dstl.Handle, want map[int][]string) {
	e.t.Helper()
	changes, err := e.readPreferLocal(st, kgr, h, local)
	if err != nil {
		e.t.Fatalf("read the handle of log %s with a reader of %v: %v", h.LogID, kgr, err)
	}
	sqns := map[dstl.SequenceNumber]bool{}
	for _, en := range h.Entries {
		sqns[en.SequenceNumber] = true
	}
	got := map[int][]string{}
	for i, c := range changes {
		if c.KeyGroup != dstl.MetaKeyGroup && !kgr.Contains(c.KeyGroup) {
			e.t.Fatalf("log %s: a reader of %v yielded a change of key group %d", h.LogID, kgr, c.KeyGroup)
		}
		if !sqns[c.SequenceNumber] {
			e.t.Fatalf("log %s: change of change set %d, which the handle does not cover", h.LogID, c.SequenceNumber)
		}
		if i > 0 {
			p := changes[i-1]
			if c.SequenceNumber < p.SequenceNumber || c.SequenceNumber == p.SequenceNumber && c.KeyGroup < p.KeyGroup {
				e.t.Fatalf("log %s: key group %d of change set %d yielded after key group %d of change set %d",
					h.LogID, c.KeyGroup, c.SequenceNumber, p.KeyGroup, p.SequenceNumber)
			}
		}
		got[c.KeyGroup] = append(got[c.KeyGroup], string(c.Data))
	}
	for _, kg := range slices.Sorted(maps.Keys(want)) {
		if kg != dstl.MetaKeyGroup && !kgr.Contains(kg) {
			continue
		}
		if !slices.Equal(got[kg], want[kg]) {
			e.t.Fatalf("log %s, reader of %v, key group %d: read back %d changes, want %d\n got %.300q\nwant %.300q",
				h.LogID, kgr, kg, len(got[kg]), len(want[kg]), got[kg], want[kg])
		}
	}
	for kg := range got {
		if _, ok := want[kg]; !ok {
			e.t.Fatalf("log %s, reader of %v: read back key group %d, which had no change", h.LogID, kgr, kg)
		}
	}
}

// objects returns the names of the objects on the backend.
func (e *engineCase) objects() []string {
	e.t.Helper()
	return list(e.t, e.b, "")
}

// checkStored checks that the object can be read whole.
func (e *engineCase) checkStored(name, why string) {
	e.t.Helper()
	if _, err := Read(e.ctx, e.b, name, 0, -1); err != nil {
		e.t.Fatalf("%s: object %s: %v", why, name, err)
	}
}

// waitGone waits, for a bounded time, until the discard pool has deleted
// the object: Get fails with [backends.ErrNotFound] and List does not report
// it.
func (e *engineCase) waitGone(name, why string) {
	e.t.Helper()
	for {
		_, err := Read(e.ctx, e.b, name, 0, -1)
		if errors.Is(err, backends.ErrNotFound) && !slices.Contains(e.objects(), name) {
			return
		}
		if err != nil && !errors.Is(err, backends.ErrNotFound) {
			e.t.Fatalf("Get(%q): %v", name, err)
		}
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("%s: object %s still stored after %v", why, name, engineTimeout)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// barrier returns once the discard pool of st has deleted every object
// released before the call: it releases an object of its own (persisted,
// aborted, truncated) and waits until it is gone. The pool of
// [engineConfig] deletes in release order. No other upload may be under
// way, so that the object holds the barrier's change set alone.
func (e *engineCase) barrier(st *dstl.Storage) {
	e.t.Helper()
	w := e.writer(st, "barrier", dstl.KeyGroupRange{Start: 0, End: 0})
	defer w.Close()
	if err := appendChanges(e.ctx, w, 0, "barrier"); err != nil {
		e.t.Fatal(err)
	}
	res := e.mustPersist(w, 0, 1)
	if err := w.Reset(res.From, res.To, 1); err != nil {
		e.t.Fatal(err)
	}
	if err := w.Truncate(res.To); err != nil {
		e.t.Fatal(err)
	}
	e.waitGone(res.Remote.Entries[0].Object, "barrier")
}

// logState is what the suite expects of one writer's log.
type logState struct {
	w     *dstl.Writer
	from  dstl.SequenceNumber // the truncation point: persists start here
	since map[int][]string    // changes appended since from, by key group

	last     *dstl.PersistResult // of the last confirmed checkpoint
	lastWant map[int][]string    // what it holds
	owned    map[string]bool     // objects of every confirmed handle
}

// runCheckpoints opens writers over disjoint ranges that split
// [0, keyGroups) and runs them, concurrently, through checkpoints
// 1..checkpoints. At each one, a writer appends changes (some metadata),
// persists from its truncation point and then, by turns: aborts the
// checkpoint; confirms it; confirms it and truncates (materialised);
// truncates while it is pending and then confirms it; truncates while it is
// pending and then aborts it. Every checkpoint ends confirmed or aborted.
func (e *engineCase) runCheckpoints(st *dstl.Storage, writers, keyGroups, checkpoints int) []*logState {
	e.t.Helper()
	logs := make([]*logState, writers)
	for i := range logs {
		kgr := share(i, writers, keyGroups)
		logs[i] = &logState{w: e.writer(st, fmt.Sprint("op-", i), kgr), since: map[int][]string{}, owned: map[string]bool{}}
	}
	for cp := 1; cp <= checkpoints; cp++ {
		var wg sync.WaitGroup
		for i, l := range logs {
			wg.Go(func() {
				if err := l.checkpoint(e.ctx, i, cp); err != nil {
					e.t.Errorf("writer %d, checkpoint %d: %v", i, cp, err)
				}
			})
		}
		wg.Wait()
		if e.t.Failed() {
			e.t.FailNow()
		}
	}
	for i, l := range logs {
		if l.last == nil {
			e.t.Fatalf("writer %d confirmed no checkpoint", i)
		}
	}
	return logs
}

// checkpoint runs checkpoint cp of writer i (see runCheckpoints).
func (l *logState) checkpoint(ctx context.Context, i, cp int) error {
	rng := rand.New(rand.NewPCG(uint64(i), uint64(cp)))
	kgr := l.w.KeyGroups()
	for j := range 10 + rng.IntN(30) {
		kg := kgr.Start + rng.IntN(kgr.End-kgr.Start+1)
		if rng.IntN(8) == 0 {
			kg = dstl.MetaKeyGroup
		}
		// Varied sizes, some empty, compressible.
		c := fmt.Sprintf("w%d-cp%d-%d-", i, cp, j) + strings.Repeat("x", rng.IntN(300))
		if rng.IntN(20) == 0 {
			c = ""
		}
		if err := appendChanges(ctx, l.w, kg, c); err != nil {
			return err
		}
		l.since[kg] = append(l.since[kg], c)
	}
	if rng.IntN(3) == 0 {
		l.w.NextSequenceNumber() // a change set of its own
		if err := appendChanges(ctx, l.w, kgr.End, fmt.Sprintf("w%d-cp%d-last", i, cp)); err != nil {
			return err
		}
		l.since[kgr.End] = append(l.since[kgr.End], fmt.Sprintf("w%d-cp%d-last", i, cp))
	}
	res, err := persist(ctx, l.w, l.from, int64(cp))
	if err != nil {
		return err
	}
	id, want := int64(cp), cloneChanges(l.since)
	confirm := func() error {
		if err := l.w.Confirm(res.From, res.To, id); err != nil {
			return err
		}
		l.last, l.lastWant = &res, want
		for _, en := range res.Remote.Entries {
			l.owned[en.Object] = true
		}
		return nil
	}
	truncate := func() error {
		if err := l.w.Truncate(res.To); err != nil {
			return err
		}
		l.from = res.To
		clear(l.since)
		return nil
	}
	switch (i + cp) % 5 {
	case 0:
		return l.w.Reset(res.From, res.To, id)
	case 1:
		return confirm()
	case 2:
		if err := confirm(); err != nil {
			return err
		}
		return truncate()
	case 3:
		if err := truncate(); err != nil {
			return err
		}
		return confirm()
	default:
		if err := truncate(); err != nil {
			return err
		}
		return l.w.Reset(res.From, res.To, id)
	}
}

func cloneChanges(m map[int][]string) map[int][]string {
	out := make(map[int][]string, len(m))
	for kg, cs := range m {
		out[kg] = slices.Clone(cs)
	}
	return out
}

// share returns the i-th of n ranges that split [0, keyGroups).
func share(i, n, keyGroups int) dstl.KeyGroupRange {
	return dstl.KeyGroupRange{Start: i * keyGroups / n, End: (i+1)*keyGroups/n - 1}
}

// checkRescaled reads the last confirmed handles of logs, whose writers'
// ranges split [0, keyGroups), back in a fresh storage, rescaled: for each
// parallelism, each reader of a share of the key groups reads every
// handle whose writer's range overlaps its own.
func (e *engineCase) checkRescaled(logs []*logState, keyGroups int, parallelisms ...int) {
	e.t.Helper()
	fresh := e.storage()
	for _, parallelism := range parallelisms {
		for i := range parallelism {
			kgr := share(i, parallelism, keyGroups)
			for _, l := range logs {
				w := l.w.KeyGroups()
				if kgr.Start <= w.End && w.Start <= kgr.End {
					e.checkRead(fresh, kgr, e.roundTrip(l.last.Remote), l.lastWant)
				}
			}
		}
	}
}

// roundTrip returns h encoded with MarshalBinary and decoded with
// UnmarshalBinary, as a checkpoint keeps it.
func (e *engineCase) roundTrip(h dstl.Handle) dstl.Handle {
	e.t.Helper()
	data, err := h.MarshalBinary()
	if err != nil {
		e.t.Fatalf("MarshalBinary: %v", err)
	}
	var out dstl.Handle
	if err := out.UnmarshalBinary(data); err != nil {
		e.t.Fatalf("UnmarshalBinary: %v", err)
	}
	return out
}

// testManyWriters: 16 writers run through checkpoints; after the storage is
// closed, the objects left are exactly those of confirmed handles, and a
// fresh storage reads each writer's last confirmed handle back.
func (s *suite) testManyWriters(t *testing.T) {
	e := s.engine(t, engineConfig())
	st := e.storage()
	logs := e.runCheckpoints(st, 16, 128, 8)
	e.closeStorage(st)

	owned := map[string]bool{}
	writersOf := map[string]int{} // confirmed objects: writers with change sets in them
	for _, l := range logs {
		maps.Copy(owned, l.owned)
		for obj := range l.owned {
			writersOf[obj]++
		}
	}
	t.Logf("%d confirmed objects, holding change sets of up to %d writers", len(owned), slices.Max(slices.Collect(maps.Values(writersOf))))
	if got, want := e.objects(), slices.Sorted(maps.Keys(owned)); !slices.Equal(got, want) {
		t.Fatalf("after Close, objects %q are stored; want those of the confirmed checkpoints, %q", got, want)
	}

	fresh := e.storage()
	for _, l := range logs {
		e.checkRead(fresh, l.w.KeyGroups(), e.roundTrip(l.last.Remote), l.lastWant)
		if e.cfg.LocalRecoveryEnabled {
			if l.last.Local == nil {
				t.Fatalf("log %s: local recovery is on, but the last confirmed persist result has no local handle", l.w.LogID())
			}
			local := e.roundTrip(*l.last.Local)
			e.checkReadPreferLocal(fresh, l.w.KeyGroups(), e.roundTrip(l.last.Remote), &local, l.lastWant)
		}
	}
}

// testRescaling: readers of other key-group ranges than the writers' get
// exactly their key groups (and all metadata) from each handle: half a
// writer's range, and ranges across two writers'.
func (s *suite) testRescaling(t *testing.T) {
	cfg := engineConfig()
	cfg.CompressionEnabled = true
	e := s.engine(t, cfg)
	st := e.storage()
	const keyGroups = 32
	logs := e.runCheckpoints(st, 4, keyGroups, 5)
	e.closeStorage(st)
	e.checkRescaled(logs, keyGroups, 8, 2, 3)
}

// testLargeObjects: in each format version, a checkpoint of 6 MiB of
// changes (over 32 key groups, metadata among them), whose object the
// upload puts while it encodes it (in parts, where the backend's part
// size is below it), and of 300 KiB (one request), reads back exactly.
func (s *suite) testLargeObjects(t *testing.T) {
	for _, version := range []int{1, 2} {
		for _, size := range []int{6 << 20, 300 << 10} {
			cfg := engineConfig()
			cfg.FormatVersion = version
			cfg.PreemptivePersistThreshold = dstl.NoPreemptivePersist // one change set, one object
			e := s.engine(t, cfg)
			st := e.storage()
			kgr := dstl.KeyGroupRange{Start: 0, End: 31}
			w := e.writer(st, "large", kgr)
			want := map[int][]string{}
			change := make([]byte, 100)
			for i := range size / len(change) {
				kg := i % 32
				if i%5000 == 0 {
					kg = dstl.MetaKeyGroup
				}
				for j := range change {
					change[j] = byte(i*7 + j)
				}
				if err := appendChanges(e.ctx, w, kg, string(change)); err != nil {
					t.Fatal(err)
				}
				want[kg] = append(want[kg], string(change))
			}
			res := e.mustPersist(w, 0, 1)
			if err := w.Confirm(res.From, res.To, 1); err != nil {
				t.Fatal(err)
			}
			e.closeStorage(st)
			e.checkRead(e.storage(), kgr, e.roundTrip(res.Remote), want)
		}
	}
}

// testFormatVersion2: writers of a storage that writes format version 2
// (whose uploads put each object while they encode it) store objects of
// that version, which a fresh storage reads back, whole and rescaled.
func (s *suite) testFormatVersion2(t *testing.T) {
	cfg := engineConfig()
	cfg.FormatVersion = 2
	e := s.engine(t, cfg)
	st := e.storage()
	const keyGroups = 64
	logs := e.runCheckpoints(st, 6, keyGroups, 5)
	e.closeStorage(st)
	objects := e.objects()
	if len(objects) == 0 {
		t.Fatal("no object stored")
	}
	for _, name := range objects {
		h, err := Read(e.ctx, e.b, name, 0, format.HeaderSize)
		if err != nil || len(h) != format.HeaderSize || h[4] != format.Version2 {
			t.Fatalf("object %s begins %x (%v): want a header of format version 2", name, h, err)
		}
	}
	e.checkRescaled(logs, keyGroups, 1, 4, 3)
}

// testReleasedObjectsDeleted: an aborted checkpoint's object goes once its
// change sets are truncated; truncated while the checkpoint is pending, it
// stays until the checkpoint is aborted.
func (s *suite) testReleasedObjectsDeleted(t *testing.T) {
	e := s.engine(t, engineConfig())
	st := e.storage()
	w := e.writer(st, "op", dstl.KeyGroupRange{Start: 0, End: 9})

	if err := appendChanges(e.ctx, w, 3, "a", "b"); err != nil {
		t.Fatal(err)
	}
	res := e.mustPersist(w, 0, 1)
	obj := res.Remote.Entries[0].Object
	if err := w.Reset(res.From, res.To, 1); err != nil {
		t.Fatal(err)
	}
	e.barrier(st)
	e.checkStored(obj, "aborted but not truncated (kept for reuse)")
	if err := w.Truncate(res.To); err != nil {
		t.Fatal(err)
	}
	e.waitGone(obj, "aborted and truncated")

	if err := appendChanges(e.ctx, w, dstl.MetaKeyGroup, "m"); err != nil {
		t.Fatal(err)
	}
	if err := appendChanges(e.ctx, w, 9, "c"); err != nil {
		t.Fatal(err)
	}
	res = e.mustPersist(w, res.To, 2)
	obj = res.Remote.Entries[0].Object
	if err := w.Truncate(res.To); err != nil {
		t.Fatal(err)
	}
	e.barrier(st)
	e.checkStored(obj, "truncated while its checkpoint is pending")
	e.checkRead(st, w.KeyGroups(), res.Remote, map[int][]string{dstl.MetaKeyGroup: {"m"}, 9: {"c"}})
	if err := w.Reset(res.From, res.To, 2); err != nil {
		t.Fatal(err)
	}
	e.waitGone(obj, "truncated, then its checkpoint aborted")
	if got := e.objects(); len(got) != 0 {
		t.Fatalf("objects left: %q", got)
	}
}

// sharedCase is a case in which two writers share one object.
type sharedCase struct {
	*engineCase
	st     *dstl.Storage
	w1, w2 *dstl.Writer
	r1, r2 dstl.PersistResult // of checkpoint 1, pending
	obj    string             // the object both results point to
}

// shared opens a fresh backend and a storage over it, and has two writers
// persist checkpoint 1 within one batching window, so that their change
// sets go into one object.
func (s *suite) shared(t *testing.T) *sharedCase {
	t.Helper()
	cfg := engineConfig()
	cfg.BatchPersistDelay = 100 * time.Millisecond // both persists below fall in it
	x := &sharedCase{engineCase: s.engine(t, cfg)}
	x.st = x.storage()
	x.w1 = x.writer(x.st, "one", dstl.KeyGroupRange{Start: 0, End: 3})
	x.w2 = x.writer(x.st, "two", dstl.KeyGroupRange{Start: 4, End: 7})
	if err := errors.Join(appendChanges(x.ctx, x.w1, 1, "one-a", "one-b"), appendChanges(x.ctx, x.w2, 6, "two-a")); err != nil {
		t.Fatal(err)
	}
	f1, err1 := x.w1.Persist(x.ctx, 0, 1)
	f2, err2 := x.w2.Persist(x.ctx, 0, 1)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	var err error
	if x.r1, err = f1.Wait(x.ctx); err != nil {
		t.Fatal(err)
	}
	if x.r2, err = f2.Wait(x.ctx); err != nil {
		t.Fatal(err)
	}
	x.obj = x.r1.Remote.Entries[0].Object
	if o2 := x.r2.Remote.Entries[0].Object; o2 != x.obj {
		t.Fatalf("two persists within one batching window of %v went to two objects, %s and %s", cfg.BatchPersistDelay, x.obj, o2)
	}
	return x
}

// testSharedObjectKept: an object two writers share stays while one of them
// still refers to it, and goes with the last reference.
func (s *suite) testSharedObjectKept(t *testing.T) {
	x := s.shared(t)
	if err := x.w1.Reset(x.r1.From, x.r1.To, 1); err != nil {
		t.Fatal(err)
	}
	if err := x.w2.Reset(x.r2.From, x.r2.To, 1); err != nil {
		t.Fatal(err)
	}
	if err := x.w1.Truncate(x.r1.To); err != nil {
		t.Fatal(err)
	}
	x.barrier(x.st)
	x.checkStored(x.obj, "released by one of the two writers that share it")
	x.checkRead(x.st, x.w2.KeyGroups(), x.r2.Remote, map[int][]string{6: {"two-a"}})
	if err := x.w2.Truncate(x.r2.To); err != nil {
		t.Fatal(err)
	}
	x.waitGone(x.obj, "released by both writers that share it")
}

// testConfirmedObjectSurvives: an object with a confirmed change set stays
// after every change set in it is truncated, its writers closed and the
// storage closed, and reads back from a fresh storage.
func (s *suite) testConfirmedObjectSurvives(t *testing.T) {
	x := s.shared(t)
	if err := x.w1.Confirm(x.r1.From, x.r1.To, 1); err != nil {
		t.Fatal(err)
	}
	if err := x.w2.Reset(x.r2.From, x.r2.To, 1); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(x.w1.Truncate(x.r1.To), x.w2.Truncate(x.r2.To), x.w1.Close(), x.w2.Close()); err != nil {
		t.Fatal(err)
	}
	x.closeStorage(x.st)
	if got := x.objects(); !slices.Equal(got, []string{x.obj}) {
		t.Fatalf("after Close, objects %q are stored; want the confirmed %s", got, x.obj)
	}
	fresh := x.storage()
	x.checkRead(fresh, x.w1.KeyGroups(), x.roundTrip(x.r1.Remote), map[int][]string{1: {"one-a", "one-b"}})
	x.checkRead(fresh, x.w2.KeyGroups(), x.roundTrip(x.r2.Remote), map[int][]string{6: {"two-a"}})
}

// damaged persists a confirmed handle of three change sets in one object,
// closes the storage, rewrites the object as damage returns it (given the
// object and the first change set's entry), and returns the error of
// reading the handle from a fresh storage, and the object's name. No change
// may be yielded: the first change set is damaged.
func (e *engineCase) damaged(damage func(data []byte, first dstl.HandleEntry) []byte) (obj string, err error) {
	e.t.Helper()
	st := e.storage()
	w := e.writer(st, "op", dstl.KeyGroupRange{Start: 0, End: 7})
	for i := range 3 {
		if err := appendChanges(e.ctx, w, dstl.MetaKeyGroup, fmt.Sprint("meta-", i)); err != nil {
			e.t.Fatal(err)
		}
		for kg := range 8 {
			if err := appendChanges(e.ctx, w, kg, fmt.Sprintf("change-%d-%d", i, kg), strings.Repeat("z", 40)); err != nil {
				e.t.Fatal(err)
			}
		}
		w.NextSequenceNumber()
	}
	res := e.mustPersist(w, 0, 1)
	if err := w.Confirm(res.From, res.To, 1); err != nil {
		e.t.Fatal(err)
	}
	h := res.Remote
	obj = h.Entries[0].Object
	if len(h.Entries) != 3 || h.Entries[2].Object != obj {
		e.t.Fatalf("the handle has entries %+v, want three in one object", h.Entries)
	}
	e.closeStorage(st)

	data, err := Read(e.ctx, e.b, obj, 0, -1)
	if err != nil {
		e.t.Fatal(err)
	}
	bad := damage([]byte(data), h.Entries[0])
	if err := e.b.Delete(e.ctx, obj); err != nil {
		e.t.Fatal(err)
	}
	if err := e.b.Put(e.ctx, obj, bytes.NewReader(bad), int64(len(bad))); err != nil {
		e.t.Fatal(err)
	}

	changes, err := e.readChanges(e.storage(), w.KeyGroups(), e.roundTrip(h))
	if len(changes) != 0 {
		e.t.Errorf("a damaged change set yielded %d changes, the first %q", len(changes), changes[0].Data)
	}
	if err == nil {
		e.t.Fatal("reading a damaged object succeeded")
	}
	if !strings.Contains(err.Error(), obj) {
		e.t.Errorf("error %q does not name the object %s", err, obj)
	}
	return obj, err
}

// testFlippedByte: a byte flipped inside a change set's frame is a checksum
// error naming the object.
func (s *suite) testFlippedByte(t *testing.T) {
	e := s.engine(t, engineConfig())
	obj, err := e.damaged(func(data []byte, first dstl.HandleEntry) []byte {
		data[first.Offset+first.Length/2] ^= 0x20
		return data
	})
	if !errors.Is(err, format.ErrChecksum) {
		t.Fatalf("error %v, want one wrapping %v", err, format.ErrChecksum)
	}
	if fe, ok := errors.AsType[*format.Error](err); !ok || fe.Object != obj {
		t.Fatalf("error %v does not hold a *format.Error of object %s", err, obj)
	}
}

// testTruncatedObject: an object cut inside a change set's frame is a
// corruption error naming the object.
func (s *suite) testTruncatedObject(t *testing.T) {
	e := s.engine(t, engineConfig())
	_, err := e.damaged(func(data []byte, first dstl.HandleEntry) []byte {
		return data[:first.Offset+first.Length/2]
	})
	if !errors.Is(err, format.ErrCorrupt) {
		t.Fatalf("error %v, want one wrapping %v", err, format.ErrCorrupt)
	}
}
