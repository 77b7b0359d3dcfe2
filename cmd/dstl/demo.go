package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/duplicating"
)

// demoOptions size a demo run.
type demoOptions struct {
	basePath       string
	storage        string
	keep           bool
	writers        int
	recoverWriters int
	keyGroups      int
	keysPerGroup   int
	checkpoints    int
	changes        int
	changeSize     int
	abortEvery     int
	materialize    int
	compression    bool
	localRecovery  bool
	localDir       string
	seed           uint64
	verbose        bool
	log            *slog.Logger // the storage's; warnings only with verbose
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := demoOptions{}
	fs := newFlagSet("demo", "[flags]", `Runs writers through checkpoints (some aborted, some confirmed), materialises and
truncates, then crashes, recovers from the last confirmed checkpoint and verifies
that the rebuilt state equals the expected state. Exits 1 if it does not.`, stderr)
	fs.StringVar(&o.basePath, "base-path", "", "where objects go: a URL (file:///...) or a local path; each run writes under a prefix of its own (default: a new temporary directory, removed afterwards)")
	fs.StringVar(&o.storage, "storage", "", "backend identifier (default: chosen by the base path's URL scheme)")
	fs.BoolVar(&o.keep, "keep", false, "keep what the run wrote: its objects (under a prefix of their own, which the report names) and the temporary directories")
	fs.IntVar(&o.writers, "writers", 8, "operator instances (writers), each owning a share of the key groups")
	fs.IntVar(&o.recoverWriters, "recover-writers", 0, "writers after the crash (rescaling); 0 means the same as --writers")
	fs.IntVar(&o.keyGroups, "key-groups", 128, "key groups (maximum parallelism)")
	fs.IntVar(&o.keysPerGroup, "keys", 32, "distinct keys per key group")
	fs.IntVar(&o.checkpoints, "checkpoints", 20, "checkpoints to take before the crash")
	fs.IntVar(&o.changes, "changes", 500, "changes each writer appends per checkpoint")
	fs.IntVar(&o.changeSize, "change-size", 100, "bytes per change")
	fs.IntVar(&o.abortEvery, "abort-every", 4, "abort every Nth checkpoint (0: never)")
	fs.IntVar(&o.materialize, "materialize-every", 5, "materialise the state every N checkpoints and truncate the log (0: never)")
	fs.BoolVar(&o.compression, "compression", false, "compress change sets")
	fs.BoolVar(&o.localRecovery, "local-recovery", false, "mirror every object to a local directory and recover from the local copies (local recovery)")
	fs.StringVar(&o.localDir, "local-dir", "", "directory of the local copies with --local-recovery (default: a new temporary directory, removed afterwards unless --keep)")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed")
	fs.BoolVar(&o.verbose, "verbose", false, "log the storage's warnings (failed upload attempts, ...) on stderr; without it, only the error that ends the demo is printed")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if o.recoverWriters == 0 {
		o.recoverWriters = o.writers
	}
	level := slog.LevelError
	if o.verbose {
		level = slog.LevelDebug
	}
	o.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if msg := o.check(); msg != "" {
		fmt.Fprintf(stderr, "dstl demo: %s\n", msg)
		return exitUsage
	}
	// A temporary directory for the base path and the local directory
	// not given, removed at the end unless kept.
	for _, t := range []struct {
		dir     *string
		pattern string
		need    bool
	}{
		{&o.basePath, "dstl-demo-", o.basePath == ""},
		{&o.localDir, "dstl-demo-local-", o.localRecovery && o.localDir == ""},
	} {
		if !t.need {
			continue
		}
		dir, err := os.MkdirTemp("", t.pattern)
		if err != nil {
			printFailure(stderr, "dstl demo: ", err)
			return exitRuntime
		}
		if !o.keep {
			defer os.RemoveAll(dir)
		}
		*t.dir = dir
	}
	report, err := demo(ctx, o, stdout)
	if err != nil {
		printFailure(stderr, "dstl demo: ", err)
		switch {
		case errors.Is(err, errVerification):
			return exitFailed
		case errors.Is(err, backends.ErrUnknownBackend), errors.Is(err, dstl.ErrInvalidConfig):
			return exitUsage
		}
		return exitRuntime
	}
	report.print(stdout)
	return exitOK
}

var errVerification = errors.New("verification failed")

// check returns what is wrong with the options, naming the flag, or "".
func (o demoOptions) check() string {
	switch {
	case o.writers < 1:
		return "--writers must be at least 1"
	case o.recoverWriters < 1:
		return "--recover-writers must be at least 1 (0 means as many as --writers)"
	case o.keyGroups < 1 || o.keyGroups > dstl.MaxKeyGroup+1:
		return fmt.Sprintf("--key-groups must be between 1 and %d", dstl.MaxKeyGroup+1)
	case o.keyGroups < o.writers:
		return fmt.Sprintf("--key-groups (%d) must be at least --writers (%d): every writer owns one or more", o.keyGroups, o.writers)
	case o.keyGroups < o.recoverWriters:
		return fmt.Sprintf("--key-groups (%d) must be at least --recover-writers (%d)", o.keyGroups, o.recoverWriters)
	case o.keysPerGroup < 1:
		return "--keys must be at least 1"
	case o.checkpoints < 1:
		return "--checkpoints must be at least 1"
	case o.changes < 0, o.changeSize < 0:
		return "--changes and --change-size may not be negative"
	case o.abortEvery < 0 || o.abortEvery == 1:
		return "--abort-every must be 0 (never) or at least 2: some checkpoint must complete"
	case o.materialize < 0:
		return "--materialize-every may not be negative"
	}
	return ""
}

// state is a writer's keyed state: key group -> key -> value.
type state map[int]map[string][]byte

func (s state) apply(kg int, change []byte) error {
	op, rest := change[0], change[1:]
	klen, n := binary.Uvarint(rest)
	if n <= 0 || uint64(len(rest)-n) < klen {
		return fmt.Errorf("malformed change in key group %d", kg)
	}
	key, value := string(rest[n:n+int(klen)]), rest[n+int(klen):]
	switch op {
	case 'S':
		if s[kg] == nil {
			s[kg] = map[string][]byte{}
		}
		s[kg][key] = bytes.Clone(value)
	case 'D':
		delete(s[kg], key)
	default:
		return fmt.Errorf("unknown operation %q in key group %d", op, kg)
	}
	return nil
}

func (s state) clone() state {
	c := make(state, len(s))
	for kg, m := range s {
		c[kg] = maps.Clone(m)
	}
	return c
}

// snapshot is a materialised state, written as its own object.
type snapshot struct {
	State state
	From  dstl.SequenceNumber // the log continues from here
}

// checkpoint is what a checkpoint keeps per writer: the last snapshot and
// the log handle since it.
type checkpoint struct {
	id        int64
	snapshots []string // object names, per writer ("" when none)
	handles   [][]byte // encoded handles, per writer
	locals    [][]byte // encoded local handles, per writer (nil when none)
	ranges    [][2]dstl.SequenceNumber
	expected  []state
}

type demoWriter struct {
	w        *dstl.Writer
	kgr      dstl.KeyGroupRange
	st       state
	from     dstl.SequenceNumber // first change set since the last materialisation
	snapshot string
	rng      *rand.Rand
	appended int64 // logical bytes
}

type demoReport struct {
	basePath                 string
	writers, recovered       int
	changes, logical, stored int64
	snapshotBytes            int64
	confirmed, aborted       int
	materialisations         int
	objects, objectBytes     int64 // left once the storages closed
	named                    int   // of which the last confirmed checkpoint names
	prefix                   string
	kept                     bool  // the objects stay (--keep)
	removed                  int64 // objects the demo deleted at its end
	requests                 counting.Stats
	persistP50, persistP99   time.Duration
	recoveryTime             time.Duration
	recoveryRead             dstl.ReadStats
	localRecovery            bool
	local                    dstl.ReadReport // where recovery took the change sets from
	cleaned                  dstl.CleanResult
	keys                     int
	lastCheckpoint           int64
	elapsed                  time.Duration
}

func demo(ctx context.Context, o demoOptions, progress io.Writer) (rep *demoReport, err error) {
	start := time.Now()
	cfg := dstl.DefaultConfig(o.basePath)
	cfg.Storage = o.storage
	run, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	cfg.JobID = "demo-" + run.String() // a prefix of its own: runs never collide
	cfg.CompressionEnabled = o.compression
	cfg.LocalRecoveryEnabled = o.localRecovery
	cfg.LocalRecoveryDir = o.localDir
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	backend, id, err := backends.Open(ctx, cfg.Storage, cfg.BasePath)
	if err != nil {
		return nil, err
	}
	counting := counting.New(backend)
	defer counting.Close()
	prefix := objname.JobPrefix(cfg.JobID)
	if !o.keep {
		// What the run made goes at its end, whatever its outcome (after
		// the storages close: their deferred Closes run first).
		defer func() {
			if err != nil && counting.Stats().BytesPut == 0 {
				return // nothing was stored
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			n, rerr := removeAll(rctx, backend, prefix)
			if rerr == nil {
				removeEmptyDirs(backend, prefix)
			}
			if rep != nil {
				rep.removed = n
			}
			if rerr != nil {
				err = errors.Join(err, fmt.Errorf("deleting what the demo wrote under %s: %w", prefix, rerr))
			}
		}()
	}
	log := o.log
	if log == nil {
		log = slog.Default()
	}
	storage, err := dstl.New(cfg, counting, dstl.WithStorageID(id), dstl.WithLogger(log), dstl.WithLocalRecovery(duplicating.Open))
	if err != nil {
		return nil, err
	}
	defer storage.Close()
	rep = &demoReport{basePath: o.basePath, writers: o.writers, recovered: o.recoverWriters, localRecovery: o.localRecovery, prefix: prefix, kept: o.keep}
	fmt.Fprintf(progress, "dstl demo: %d writers, %d key groups, %d checkpoints of %d changes x %d bytes per writer, on %s (%s)\n",
		o.writers, o.keyGroups, o.checkpoints, o.changes, o.changeSize, id, o.basePath)

	ws := make([]*demoWriter, o.writers)
	for i := range ws {
		kgr := splitRange(o.keyGroups, o.writers, i)
		w, err := storage.NewWriter(fmt.Sprintf("operator-%d", i), kgr)
		if err != nil {
			return nil, err
		}
		ws[i] = &demoWriter{w: w, kgr: kgr, st: state{}, rng: rand.New(rand.NewPCG(o.seed, uint64(i)))}
		if err := w.AppendMeta(ctx, []byte(fmt.Sprintf("state-descriptor:v1:operator-%d", i))); err != nil {
			return nil, err
		}
	}

	var last *checkpoint
	var latencies []time.Duration
	var mu sync.Mutex
	for cp := int64(1); cp <= int64(o.checkpoints); cp++ {
		// Process: every writer appends its changes.
		err := forEach(ws, func(i int, dw *demoWriter) error {
			for range o.changes {
				kg, change := dw.nextChange(o)
				if err := dw.w.Append(ctx, kg, change); err != nil {
					return err
				}
				if err := dw.st.apply(kg, change); err != nil {
					return err
				}
				dw.appended += int64(len(change))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		rep.changes += int64(o.changes * o.writers)

		// Checkpoint barrier: every writer persists from its last materialisation.
		c := &checkpoint{id: cp, snapshots: make([]string, len(ws)), handles: make([][]byte, len(ws)), locals: make([][]byte, len(ws)), ranges: make([][2]dstl.SequenceNumber, len(ws)), expected: make([]state, len(ws))}
		err = forEach(ws, func(i int, dw *demoWriter) error {
			t0 := time.Now()
			f, err := dw.w.Persist(ctx, dw.from, cp)
			if err != nil {
				return err
			}
			res, err := f.Wait(ctx)
			if err != nil {
				return err
			}
			mu.Lock()
			latencies = append(latencies, time.Since(t0))
			mu.Unlock()
			// A checkpoint keeps the handle's bytes, as a real one would.
			b, err := res.Remote.MarshalBinary()
			if err != nil {
				return err
			}
			c.handles[i], c.ranges[i], c.snapshots[i], c.expected[i] = b, [2]dstl.SequenceNumber{res.From, res.To}, dw.snapshot, dw.st.clone()
			if res.Local != nil {
				if c.locals[i], err = res.Local.MarshalBinary(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d: %w", cp, err)
		}

		if o.abortEvery > 0 && cp%int64(o.abortEvery) == 0 {
			for i, dw := range ws {
				if err := dw.w.Reset(c.ranges[i][0], c.ranges[i][1], cp); err != nil {
					return nil, fmt.Errorf("checkpoint %d aborted: %w", cp, err)
				}
			}
			rep.aborted++
		} else {
			for i, dw := range ws {
				if err := dw.w.Confirm(c.ranges[i][0], c.ranges[i][1], cp); err != nil {
					return nil, fmt.Errorf("checkpoint %d completed: %w", cp, err)
				}
			}
			rep.confirmed++
			last = c
		}

		// Materialisation: snapshot the state, then truncate the log before it.
		// A real job truncates once a checkpoint with the new snapshot is
		// confirmed; the next confirmed checkpoint here persists from the new
		// snapshot, so truncating the older changes is safe now only if the
		// last confirmed checkpoint does not need them: keep them until then.
		if o.materialize > 0 && cp%int64(o.materialize) == 0 {
			err := forEach(ws, func(i int, dw *demoWriter) error {
				from := dw.w.NextSequenceNumber()
				name := fmt.Sprintf("%ssnapshots/operator-%d-cp-%d.snap", objname.JobPrefix(cfg.JobID), i, cp)
				n, err := putSnapshot(ctx, counting, name, snapshot{State: dw.st, From: from})
				if err != nil {
					return err
				}
				mu.Lock()
				rep.snapshotBytes += n
				mu.Unlock()
				dw.from, dw.snapshot = from, name
				return nil
			})
			if err != nil {
				return nil, err
			}
			rep.materialisations++
		}
		// Truncate what no retained checkpoint needs: everything before the
		// snapshot the last confirmed checkpoint starts from.
		if last != nil && last.id == cp {
			for i, dw := range ws {
				if err := dw.w.Truncate(last.ranges[i][0]); err != nil {
					return nil, err
				}
			}
		}
	}
	if last == nil {
		return nil, fmt.Errorf("no checkpoint was confirmed (checkpoints %d, abort every %d)", o.checkpoints, o.abortEvery)
	}
	rep.lastCheckpoint = last.id
	rep.persistP50, rep.persistP99 = percentile(latencies, 50), percentile(latencies, 99)

	// Crash: the process goes away, without closing anything; nothing of it
	// survives but the storage (and the local copies). The first storage
	// is only closed once the demo ends, so that no goroutine outlives it.

	// Recover, perhaps with another parallelism, from the last confirmed
	// checkpoint, with a fresh storage.
	t0 := time.Now()
	storage2, err := dstl.New(cfg, counting, dstl.WithStorageID(id), dstl.WithLogger(log), dstl.WithLocalRecovery(duplicating.Open))
	if err != nil {
		return nil, err
	}
	defer storage2.Close()
	if o.localRecovery {
		// A restart on the same machine: drop what the crashed run left
		// that the checkpoint being restored does not need.
		keep := make([]dstl.Handle, len(last.handles))
		for i, b := range last.handles {
			if err := keep[i].UnmarshalBinary(b); err != nil {
				return nil, fmt.Errorf("handle of writer %d: %w", i, err)
			}
		}
		if rep.cleaned, err = storage2.CleanLocalCopies(ctx, keep...); err != nil {
			return nil, err
		}
	}
	expected := state{}
	for _, st := range last.expected {
		for kg, m := range st {
			expected[kg] = m
		}
	}
	recovered := state{}
	for j := range o.recoverWriters {
		kgr := splitRange(o.keyGroups, o.recoverWriters, j)
		st, err := recoverRange(ctx, storage2, counting, kgr, last, rep)
		if err != nil {
			return nil, fmt.Errorf("recover key groups %v: %w", kgr, err)
		}
		for kg, m := range st {
			if !kgr.Contains(kg) {
				return nil, fmt.Errorf("%w: recovery of %v yielded key group %d", errVerification, kgr, kg)
			}
			recovered[kg] = m
		}
	}
	rep.recoveryTime = time.Since(t0)
	if err := compareStates(expected, recovered); err != nil {
		return nil, fmt.Errorf("%w: state recovered from checkpoint %d differs: %v", errVerification, last.id, err)
	}
	for _, m := range expected {
		rep.keys += len(m)
	}

	// The end of both processes: closing, each storage deletes what it
	// released (a real job deletes the rest as it drops checkpoints).
	if err := errors.Join(storage.Close(), storage2.Close()); err != nil {
		return nil, err
	}
	err = counting.List(ctx, prefix, func(oi backends.ObjectInfo) error {
		rep.objects++
		rep.objectBytes += oi.Size
		return nil
	})
	if err != nil {
		return nil, err
	}
	named := map[string]bool{}
	for i, b := range last.handles {
		var h dstl.Handle
		if err := h.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("handle of writer %d: %w", i, err)
		}
		for _, e := range h.Entries {
			named[e.Object] = true
		}
		if last.snapshots[i] != "" {
			named[last.snapshots[i]] = true
		}
	}
	rep.named = len(named)
	rep.requests = counting.Stats()
	for _, dw := range ws {
		rep.logical += dw.appended
	}
	rep.stored = rep.requests.BytesPut - rep.snapshotBytes
	rep.elapsed = time.Since(start)
	return rep, nil
}

// recoverRange rebuilds the state of key groups kgr: for every old writer
// whose range overlaps, load its snapshot, then replay its log handle.
func recoverRange(ctx context.Context, s *dstl.Storage, b backends.Backend, kgr dstl.KeyGroupRange, c *checkpoint, rep *demoReport) (state, error) {
	r, err := s.NewReader(kgr)
	if err != nil {
		return nil, err
	}
	all := make([]dstl.Handle, len(c.handles))
	locals := make([]*dstl.Handle, len(c.handles))
	var handles []dstl.Handle // to prefetch: those read from the backend
	for i, b := range c.handles {
		if err := all[i].UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("handle of writer %d: %w", i, err)
		}
		if c.locals[i] != nil {
			locals[i] = new(dstl.Handle)
			if err := locals[i].UnmarshalBinary(c.locals[i]); err != nil {
				return nil, fmt.Errorf("local handle of writer %d: %w", i, err)
			}
		}
		if h := all[i]; h.KeyGroups.Start <= kgr.End && kgr.Start <= h.KeyGroups.End && locals[i] == nil {
			handles = append(handles, h)
		}
	}
	if err := r.Prefetch(ctx, handles...); err != nil {
		return nil, err
	}
	st := state{}
	for i, h := range all {
		if h.KeyGroups.Start > kgr.End || kgr.Start > h.KeyGroups.End {
			continue
		}
		if c.snapshots[i] != "" {
			snap, err := getSnapshot(ctx, b, c.snapshots[i])
			if err != nil {
				return nil, err
			}
			for kg, m := range snap.State {
				if kgr.Contains(kg) {
					st[kg] = m
				}
			}
		}
		readRep, err := r.ReadPreferLocal(ctx, h, locals[i], func(ch dstl.Change) error {
			if ch.KeyGroup == dstl.MetaKeyGroup {
				return nil // the state descriptor: nothing to rebuild
			}
			return st.apply(ch.KeyGroup, ch.Data)
		})
		if err != nil {
			return nil, err
		}
		rep.local.LocalSets += readRep.LocalSets
		rep.local.RemoteSets += readRep.RemoteSets
		rep.local.LocalBytes += readRep.LocalBytes
		rep.local.RemoteBytes += readRep.RemoteBytes
		rep.local.Fallbacks = append(rep.local.Fallbacks, readRep.Fallbacks...)
	}
	rs := r.Stats()
	rep.recoveryRead.Requests += rs.Requests
	rep.recoveryRead.BytesFetched += rs.BytesFetched
	rep.recoveryRead.BytesNeeded += rs.BytesNeeded
	rep.recoveryRead.CacheHits += rs.CacheHits
	return st, nil
}

func (dw *demoWriter) nextChange(o demoOptions) (int, []byte) {
	kg := dw.kgr.Start + dw.rng.IntN(dw.kgr.End-dw.kgr.Start+1)
	key := fmt.Sprintf("key-%d-%d", kg, dw.rng.IntN(o.keysPerGroup))
	op := byte('S')
	if dw.rng.IntN(10) == 0 {
		op = 'D'
	}
	change := make([]byte, 0, max(o.changeSize, 1+binary.MaxVarintLen64+len(key)))
	change = append(change, op)
	change = binary.AppendUvarint(change, uint64(len(key)))
	change = append(change, key...)
	if op == 'S' {
		for len(change) < o.changeSize {
			change = append(change, byte('a'+dw.rng.IntN(26)))
		}
	}
	return kg, change
}

// splitRange gives writer i of n its share of key groups [0, total).
func splitRange(total, n, i int) dstl.KeyGroupRange {
	return dstl.KeyGroupRange{Start: i * total / n, End: (i+1)*total/n - 1}
}

func forEach(ws []*demoWriter, fn func(int, *demoWriter) error) error {
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, dw := range ws {
		wg.Go(func() { errs[i] = fn(i, dw) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// removeAll deletes every object under prefix, a few at a time, and
// returns how many it deleted.
func removeAll(ctx context.Context, b backends.Backend, prefix string) (int64, error) {
	var names []string
	if err := b.List(ctx, prefix, func(oi backends.ObjectInfo) error {
		names = append(names, oi.Name)
		return nil
	}); err != nil {
		return 0, err
	}
	var deleted atomic.Int64
	var g errgroup.Group
	g.SetLimit(8)
	for _, name := range names {
		g.Go(func() error {
			if err := b.Delete(ctx, name); err != nil {
				return err
			}
			deleted.Add(1)
			return nil
		})
	}
	err := g.Wait()
	return deleted.Load(), err
}

// removeEmptyDirs removes the directories under prefix, and prefix's own,
// that a local backend made for the objects the run wrote under it, once
// they are empty: the prefix is the run's own, so they are the run's too.
// Directories that still hold something stay, as does any of another
// backend.
func removeEmptyDirs(b backends.Backend, prefix string) {
	var root *os.Root
	var at driver.Root // its Prefix: the bucket's key prefix, if any
	if a, ok := b.(interface{ As(any) bool }); !ok || !a.As(&root) || !a.As(&at) {
		return
	}
	dir := path.Clean(at.Prefix + prefix)
	var dirs []string
	_ = fs.WalkDir(root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	// Deepest first: a directory is empty once those under it are gone.
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = root.Remove(filepath.FromSlash(dirs[i]))
	}
}

func putSnapshot(ctx context.Context, b backends.Backend, name string, s snapshot) (int64, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(s); err != nil {
		return 0, err
	}
	return int64(buf.Len()), b.Put(ctx, name, bytes.NewReader(buf.Bytes()), int64(buf.Len()))
}

func getSnapshot(ctx context.Context, b backends.Backend, name string) (*snapshot, error) {
	rc, err := b.Get(ctx, name, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var s snapshot
	if err := gob.NewDecoder(rc).Decode(&s); err != nil {
		return nil, fmt.Errorf("decode snapshot %s: %w", name, err)
	}
	return &s, nil
}

func compareStates(want, got state) error {
	for kg := range want {
		if len(want[kg]) == 0 && len(got[kg]) == 0 {
			continue
		}
		if len(want[kg]) != len(got[kg]) {
			return fmt.Errorf("key group %d: %d keys, want %d", kg, len(got[kg]), len(want[kg]))
		}
		for k, v := range want[kg] {
			if g, ok := got[kg][k]; !ok || !bytes.Equal(g, v) {
				return fmt.Errorf("key group %d key %q: got %q (present %v), want %q", kg, k, g, ok, v)
			}
		}
	}
	for kg := range got {
		if len(got[kg]) > 0 && len(want[kg]) == 0 {
			return fmt.Errorf("key group %d: %d unexpected keys", kg, len(got[kg]))
		}
	}
	return nil
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

func (r *demoReport) print(w io.Writer) {
	mib := func(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
	fmt.Fprintf(w, "checkpoints:        %d confirmed, %d aborted, %d materialisations\n", r.confirmed, r.aborted, r.materialisations)
	fmt.Fprintf(w, "changes:            %d appended by %d %s\n", r.changes, r.writers, plural(r.writers, "writer"))
	fmt.Fprintf(w, "bytes:              %s of changes appended, %s of change-set objects stored (%s of snapshots)\n", mib(r.logical), mib(r.stored), mib(r.snapshotBytes))
	fmt.Fprintf(w, "objects left:       %d (%s) once the storages closed, snapshots included, %d of them named by checkpoint %d; ",
		r.objects, mib(r.objectBytes), r.named, r.lastCheckpoint)
	if r.kept {
		fmt.Fprintf(w, "kept under %s (--keep)\n", r.prefix)
	} else {
		fmt.Fprintf(w, "%d deleted at the end (--keep keeps them)\n", r.removed)
	}
	fmt.Fprintf(w, "requests:           %d put, %d get, %d delete, %d list\n", r.requests.Puts, r.requests.Gets, r.requests.Deletes, r.requests.Lists)
	fmt.Fprintf(w, "persist latency:    p50 %v, p99 %v\n", r.persistP50.Round(time.Microsecond), r.persistP99.Round(time.Microsecond))
	fmt.Fprintf(w, "recovery:           checkpoint %d into %d %s in %v: %d ranged reads fetched %s for %s of change sets (%d served from the cache)\n",
		r.lastCheckpoint, r.recovered, plural(r.recovered, "writer"), r.recoveryTime.Round(time.Microsecond), r.recoveryRead.Requests,
		mib(r.recoveryRead.BytesFetched), mib(r.recoveryRead.BytesNeeded), r.recoveryRead.CacheHits)
	if r.localRecovery {
		fmt.Fprintf(w, "local recovery:     %d change sets (%s) read from local copies, %d (%s) from the backend, %d fallbacks; start-up cleanup kept %d local copies, deleted %d (%s)\n",
			r.local.LocalSets, mib(r.local.LocalBytes), r.local.RemoteSets, mib(r.local.RemoteBytes), len(r.local.Fallbacks),
			r.cleaned.Kept, r.cleaned.Deleted, mib(r.cleaned.DeletedBytes))
	}
	fmt.Fprintf(w, "verification:       OK, %d keys equal the state at checkpoint %d\n", r.keys, r.lastCheckpoint)
	fmt.Fprintf(w, "elapsed:            %v\n", r.elapsed.Round(time.Millisecond))
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
