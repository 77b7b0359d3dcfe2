package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/duplicating"
	"github.com/dstlgo/dstl/statestore"
)

// stJob is the job of the state-store simulation; its snapshot objects and
// files are under stSnapshots.
const (
	stJob       = "job"
	stSnapshots = stJob + "/" + objname.SnapshotDir
)

// StateStats says what one schedule of the state-store simulation did.
type StateStats struct {
	Setup     string
	Faults    string
	FaultFree bool
	Disk      bool
	Duration  time.Duration
	// Plan lists the steps, one letter each (see stateLetters).
	Plan string

	Writes, ConcurrentPhases                          int
	Materializes, MaterializeErrors                   int // explicit ones
	Materializations                                  int // every one that succeeded, background ones included
	Checkpoints, CheckpointErrors, Completed, Aborted int
	Crashes, Rescales, Restores, RestoreErrors        int
	Verified, VerifiedMerged, Damaged, DamageFailed   int
	Objects, Explained                                int // snapshot objects and files left at the end; of them, left by a fault
	Injected                                          [numFaultKinds]int
}

func (st StateStats) String() string {
	return fmt.Sprintf("%s\n  faults: %s\n  plan: %s\n  %s", st.Setup, st.Faults, st.Plan, st.counts())
}

func (st StateStats) counts() string {
	return fmt.Sprintf("writes=%d (concurrent phases %d) materialize=%d (failed %d) materializations=%d checkpoints=%d (failed %d) completed=%d aborted=%d crashes=%d (rescales %d) restores=%d (failed %d) verified=%d (merged %d, damaged %d, of which failed as they must %d) objects-left=%d (by faults %d) injected=%s",
		st.Writes, st.ConcurrentPhases, st.Materializes, st.MaterializeErrors, st.Materializations, st.Checkpoints, st.CheckpointErrors,
		st.Completed, st.Aborted, st.Crashes, st.Rescales, st.Restores, st.RestoreErrors, st.Verified, st.VerifiedMerged, st.Damaged,
		st.DamageFailed, st.Objects, st.Explained, injectedString(st.Injected))
}

// stateLetters names the steps in StateStats.Plan: w writes, W concurrent
// writes (and materialisations), m materialise, s checkpoint, c complete,
// a abort, k crash (and restore, maybe rescaled), v compare the live
// stores with the model, z pause.
const stateLetters = "wWmscakvz"

// Streams of the state simulation's generators (see newRand).
const (
	stTagStep  = 1 << 56
	stTagWrite = 2 << 56
	stTagConc  = 3 << 56
	stTagEnd   = 4 << 56
)

// stateSchedule is one schedule of the state-store simulation.
type stateSchedule struct {
	seed uint64
	opt  Options

	disk       bool
	maxP       int
	job        dstl.KeyGroupRange // the key groups of every instance together
	matSize    int64
	matIv      time.Duration
	keep       bool
	local      bool
	winR, verR int64
	keySpace   int
	bigValues  bool
	prof       faultProfile
	scfg       dstl.Config

	be, cl *backend
	dir    string
	logger *slog.Logger

	insts    []*stInst
	machines int // machine directories made so far
	writers  int // writers registered with the backend
	verifies int

	cps    []*jobCP
	last   *jobCP // the last completed checkpoint
	nextID int64
	now    int64 // the clock of window starts and version timestamps
	// tolerated names the snapshot objects and files that may stay
	// unreferenced at the end: those on the backend when the running
	// instances started (left by the ones before, or shared after a
	// rescale), but for those that a restore of an instance's own
	// checkpoint made its own again.
	tolerated map[string]bool
	fatal     atomic.Bool
	recorder[StateStats]
	step    int      // the step running
	trace   []string // what happened: steps, puts and deletes of objects
	deleted []string // snapshot objects and files deleted through the backend
	// removed are the objects damaged removed for a while: a collection
	// that ran meanwhile finds one missing (collect.ErrMissing) and
	// deletes nothing, as it must.
	removed map[string]bool
}

// tracef records an event of the schedule.
func (s *stateSchedule) tracef(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trace = append(s.trace, fmt.Sprintf("step %d: ", s.step)+fmt.Sprintf(format, args...))
}

// history returns the events that mention name.
func (s *stateSchedule) history(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, e := range s.trace {
		if strings.Contains(e, name) {
			b.WriteString("\n    " + e)
		}
	}
	return b.String()
}

// stInst is one operator instance: a process with its storage, its
// checkpointer and stores, on a machine (its directories).
type stInst struct {
	name    string
	kgr     dstl.KeyGroupRange
	machine int
	storage *dstl.Storage
	cp      *statestore.Checkpointer
	stStores
	m    *stModel
	keys []string // keys of its key groups
}

// jobCP is one checkpoint of the job: a part per instance.
type jobCP struct {
	id       int64
	parts    []*cpPart
	wg       sync.WaitGroup // the SnapshotState calls
	notified bool           // completed, aborted, subsumed or dropped by a crash
	complete bool
}

type cpPart struct {
	in    *stInst
	name  string
	kgr   dstl.KeyGroupRange
	model *stModel // the instance's state when the checkpoint was taken
	done  atomic.Bool
	h     *statestore.CheckpointHandle
	err   error
}

// fail records an error and stops the schedule's steps.
func (s *stateSchedule) fail(format string, args ...any) {
	s.failf(format, args...)
	s.fatal.Store(true)
}

// RunState runs the schedule of seed of the state-store simulation and
// returns what it did; the error lists the invariants it broke.
func RunState(seed uint64, opt Options) (StateStats, error) {
	s := &stateSchedule{seed: seed, opt: opt}
	return s.watch(seed, opt.Watchdog, s.run, func(d time.Duration) {
		s.stats.Duration = d
		if opt.Logf != nil {
			opt.Logf("seed %d: %s", seed, s.stats)
			if opt.Trace {
				opt.Logf("trace:\n  %s", strings.Join(s.trace, "\n  "))
			}
		}
	})
}

// handleObjects describes what handles name: snapshots (with their
// number of files) and log objects.
func handleObjects(hs []*statestore.CheckpointHandle) string {
	var parts []string
	for _, h := range hs {
		var ss []string
		for _, sn := range h.Snapshots {
			ss = append(ss, fmt.Sprintf("%s (files %s)", sn.Object, strings.Join(sn.Files, " ")))
		}
		var logs []string
		for _, l := range h.Logs {
			for _, e := range l.Remote.Entries {
				logs = append(logs, fmt.Sprintf("%d@%s", e.SequenceNumber, e.Object))
			}
		}
		parts = append(parts, fmt.Sprintf("%s %v: snapshots [%s], log [%s]", h.Operator, h.KeyGroups, strings.Join(ss, ", "), strings.Join(logs, " ")))
	}
	return strings.Join(parts, "; ")
}

func (s *stateSchedule) setup(r *rand.Rand) {
	s.disk = r.IntN(2) == 0
	s.maxP = pick(r, 1, 4, 16, 128, 128, 1000, 32768)
	s.job = dstl.KeyGroupRange{Start: 0, End: s.maxP - 1}
	switch {
	case s.maxP > 2048:
		// A disk-backed store's loops and Clear take one step per key
		// group: 2048 of them at most keep a schedule short.
		start := r.IntN(s.maxP - 2048)
		s.job = dstl.KeyGroupRange{Start: start, End: start + r.IntN(2048)}
	case s.maxP > 1 && r.IntN(4) == 0: // one operator's part of a wider job
		a, b := r.IntN(s.maxP), r.IntN(s.maxP)
		s.job = dstl.KeyGroupRange{Start: min(a, b), End: max(a, b)}
	}
	s.matSize = pick(r, -1, int64(256+r.IntN(4<<10)), int64(2<<10+r.IntN(32<<10)))
	s.matIv = pick(r, -1, time.Duration(1+r.IntN(20))*time.Millisecond, time.Duration(5+r.IntN(100))*time.Millisecond)
	s.keep = r.IntN(3) == 0
	s.local = r.IntN(2) == 0
	s.winR = pick[int64](r, 5, 20, 100)
	s.verR = pick[int64](r, 0, 5, 20, 100)
	s.keySpace = pick(r, 10, 60, 200)
	s.bigValues = r.IntN(2) == 0
	s.now = int64(r.IntN(1000)) - 500

	cfg := dstl.DefaultConfig("sim://")
	cfg.JobID = stJob
	cfg.CompressionEnabled = r.IntN(2) == 0
	// From a stream of its own, so that the other draws of a seed stay
	// what they were before there was a second format version.
	cfg.FormatVersion = 1 + rand.New(rand.NewPCG(s.seed, 0xf0a7)).IntN(2)
	cfg.BatchPersistDelay = pick[time.Duration](r, dstl.NoBatchDelay, time.Duration(r.IntN(1000))*time.Microsecond)
	cfg.UploadNumThreads = 1 + r.IntN(4)
	cfg.UploadMaxInFlight = pick[int64](r, int64(1+r.IntN(64<<10)), 100<<20)
	cfg.PreemptivePersistThreshold = pick[int64](r, dstl.NoPreemptivePersist, int64(256+r.IntN(8<<10)))
	cfg.UploadTimeout = time.Duration(200+r.IntN(800)) * time.Millisecond
	cfg.UploadMaxAttempts = 1 + r.IntN(4)
	cfg.UploadNextAttemptDelay = cmp.Or(time.Duration(r.IntN(2000))*time.Microsecond, dstl.NoAttemptDelay)
	cfg.CacheIdleTimeout = time.Minute

	var prof faultProfile
	if r.IntN(4) != 0 {
		level := pick(r, 0.02, 0.08, 0.2)
		for _, k := range []faultKind{putErrBefore, putLostAnswer, putStallHonour, putStallIgnore, putStoreAfterCancel, putLateStore, deleteFail, getErr} {
			if r.IntN(3) != 0 {
				prof.p[k] = level * r.Float64()
			}
		}
		prof.maxStall = time.Duration(1+r.IntN(100)) * time.Millisecond
	}
	if prof.faultFree() && r.IntN(2) == 0 {
		// One attempt without a timeout: an upload fails only when the
		// storage closes, so a schedule may complete a checkpoint while
		// its upload runs (see completeStep).
		cfg.RetryPolicy = dstl.RetryNone
	}
	s.scfg = cfg
	s.prof = prof
	s.stats.FaultFree = prof.faultFree()
	s.stats.Faults = prof.String()
	s.stats.Disk = s.disk
	kind := "memory"
	if s.disk {
		kind = "disk"
	}
	s.stats.Setup = fmt.Sprintf("kind=%s max-parallelism=%d job-key-groups=%v materialize-size=%d materialize-interval=%v keep-snapshots=%v local-recovery=%v window-retention=%d history-retention=%d keys=%d big-values=%v format=%d compression=%v batch-delay=%v threads=%d max-in-flight=%d preemptive=%d timeout=%v attempts=%d",
		kind, s.maxP, s.job, s.matSize, s.matIv, s.keep, s.local, s.winR, s.verR, s.keySpace, s.bigValues, cfg.FormatVersion, cfg.CompressionEnabled,
		cfg.BatchPersistDelay, cfg.UploadNumThreads, cfg.UploadMaxInFlight, cfg.PreemptivePersistThreshold, cfg.UploadTimeout, cfg.UploadMaxAttempts)
}

// stepRand returns the generator of one stream and index.
func (s *stateSchedule) stepRand(tag uint64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(s.seed, tag|uint64(i)))
}

func (s *stateSchedule) run() {
	r := rand.New(rand.NewPCG(s.seed, 0x57a7e))
	s.setup(r)
	dir, err := os.MkdirTemp("", "dstl-simstate-")
	if err != nil {
		s.failf("temporary directory: %v", err)
		return
	}
	s.dir = dir
	defer os.RemoveAll(dir)
	s.logger = slog.New(&warnHandler{s: s})
	s.be = newBackend(s.seed, s.prof)
	s.be.contentKeys = true
	s.cl = s.be.clean()
	s.be.st.onChange = func(name string, data []byte, deleted bool) {
		// Called with the store's lock held: s.mu is taken after it,
		// never before.
		what := "put"
		if deleted {
			what = "deleted"
		}
		s.mu.Lock()
		s.trace = append(s.trace, fmt.Sprintf("step %d: %s %s", s.step, what, name))
		if deleted && strings.HasPrefix(name, stSnapshots) {
			s.deleted = append(s.deleted, name)
		}
		s.mu.Unlock()
	}

	ranges := s.newRanges(r)
	machines := make([]int, len(ranges))
	for i := range machines {
		machines[i] = s.newMachine()
	}
	s.start(ranges, machines)
	steps := 20 + r.IntN(40)
	var plan []byte
	for i := 0; i < steps && !s.fatal.Load(); i++ {
		s.mu.Lock()
		s.step = i
		s.mu.Unlock()
		sr := s.stepRand(stTagStep, i)
		x := sr.IntN(100)
		var kind int
		switch {
		case x < 28:
			kind = 0
			s.writeStep(sr, i)
		case x < 40:
			kind = 1
			s.concurrentStep(sr, i)
		case x < 48:
			kind = 2
			s.materializeStep(sr)
		case x < 66:
			kind = 3
			s.snapshotStep(sr)
		case x < 78:
			kind = 4
			s.completeStep(sr)
		case x < 83:
			kind = 5
			s.abortStep(sr)
		case x < 90:
			kind = 6
			s.crashStep(sr)
		case x < 95:
			kind = 7
			s.checkLive(sr, "live stores")
		default:
			kind = 8
			time.Sleep(time.Duration(sr.IntN(5000)) * time.Microsecond)
		}
		plan = append(plan, stateLetters[kind])
	}
	s.stats.Plan = string(plan)
	s.mu.Lock()
	s.step = steps
	s.mu.Unlock()
	if !s.fatal.Load() {
		s.finish(s.stepRand(stTagEnd, 0))
	}
	s.closeInstances()
	s.be.f.Wait()
	s.be.st.mu.Lock()
	s.stats.Injected = s.be.st.counts
	s.be.st.mu.Unlock()
	if !s.fatal.Load() {
		if s.opt.stateBeforeObjects != nil {
			s.opt.stateBeforeObjects(s)
		}
		s.checkObjects()
	}
}

// newRanges splits the job's key groups among one or two instances.
func (s *stateSchedule) newRanges(r *rand.Rand) []dstl.KeyGroupRange {
	if s.job.End == s.job.Start || r.IntN(2) == 0 {
		return []dstl.KeyGroupRange{s.job}
	}
	m := s.job.Start + r.IntN(s.job.End-s.job.Start)
	return []dstl.KeyGroupRange{{Start: s.job.Start, End: m}, {Start: m + 1, End: s.job.End}}
}

func (s *stateSchedule) newMachine() int {
	s.machines++
	return s.machines
}

func (s *stateSchedule) machineDir(m int) string {
	return filepath.Join(s.dir, fmt.Sprintf("machine-%d", m))
}

// opName is the operator name of the instance owning kgr: instances of
// the same key groups, before and after a crash, are the same operator
// instance.
func opName(kgr dstl.KeyGroupRange) string { return fmt.Sprintf("op-%d-%d", kgr.Start, kgr.End) }

// universeKey is the i-th key of every schedule: short, with bytes 0x00
// and 0xFF among them (which the disk-backed stores escape), the empty key
// first.
func universeKey(i int) string {
	switch {
	case i == 0:
		return ""
	case i%9 == 3:
		return fmt.Sprintf("k\x00%d", i)
	case i%9 == 5:
		return fmt.Sprintf("k%d\xff", i)
	case i%9 == 7:
		return fmt.Sprintf("k%d\x00\x01", i)
	}
	return fmt.Sprintf("k%05d", i)
}

// keysOf returns up to keySpace keys in kgr, the same for the same range.
func (s *stateSchedule) keysOf(kgr dstl.KeyGroupRange) []string {
	var keys []string
	for i := 0; i < 40000 && len(keys) < s.keySpace; i++ {
		if k := universeKey(i); kgr.Contains(statestore.KeyGroup([]byte(k), s.maxP)) {
			keys = append(keys, k)
		}
	}
	return keys
}

// open makes an instance: a storage over be, a checkpointer and its three
// stores. A live instance materialises and deletes snapshots as the
// schedule says; a verifier's neither materialises nor deletes.
func (s *stateSchedule) open(name string, kgr dstl.KeyGroupRange, dir string, be *backend, live, disk, local bool) (*stInst, error) {
	cfg := s.scfg
	if local {
		cfg.LocalRecoveryEnabled, cfg.LocalRecoveryDir = true, filepath.Join(dir, "local")
	}
	opts := []dstl.Option{dstl.WithStorageID(storageID), dstl.WithLogger(discardLogger)}
	if local {
		opts = append(opts, dstl.WithLocalRecovery(duplicating.Open))
	}
	st, err := dstl.New(cfg, be, opts...)
	if err != nil {
		return nil, fmt.Errorf("new storage: %w", err)
	}
	ccfg := statestore.Config{Operator: name, KeyGroups: kgr, MaxParallelism: s.maxP, MaterializeSize: -1, MaterializeInterval: -1,
		KeepSnapshots: true, Logger: s.logger}
	if live {
		ccfg.MaterializeSize, ccfg.MaterializeInterval, ccfg.KeepSnapshots = s.matSize, s.matIv, s.keep
	}
	if disk {
		ccfg.Dir = filepath.Join(dir, "db")
	}
	cp, err := statestore.NewCheckpointer(st, ccfg)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("new checkpointer: %w", err)
	}
	in := &stInst{name: name, kgr: kgr, storage: st, cp: cp, m: newStModel(s.winR, s.verR), keys: s.keysOf(kgr)}
	opt := statestore.WithMaxParallelism(s.maxP)
	in.kv, err = statestore.NewKeyValueStore("kv", cp.Log(), statestore.StringCodec{}, statestore.StringCodec{}, opt)
	if err == nil {
		in.win, err = statestore.NewWindowStore("win", cp.Log(), statestore.StringCodec{}, statestore.StringCodec{}, s.winR, opt)
	}
	if err == nil {
		in.ver, err = statestore.NewVersionedStore("ver", cp.Log(), statestore.StringCodec{}, statestore.StringCodec{}, s.verR, opt)
	}
	if err == nil {
		err = cp.Register(in.kv, in.win, in.ver)
	}
	if err != nil {
		in.close()
		return nil, fmt.Errorf("stores: %w", err)
	}
	return in, nil
}

// close closes the checkpointer and the storage.
func (in *stInst) close() error {
	return errors.Join(in.cp.Close(), in.storage.Close())
}

// expected reports whether err is what an injected fault, a crash or a
// deadline explains.
func expected(err error) bool {
	return errors.Is(err, errInjected) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, statestore.ErrClosed) || errors.Is(err, dstl.ErrClosed)
}

// start opens an instance for each range on its machine and restores into
// each the last completed checkpoint (none: a first start).
func (s *stateSchedule) start(ranges []dstl.KeyGroupRange, machines []int) {
	s.tolerated = map[string]bool{}
	for _, name := range s.snapshotNames() {
		s.tolerated[name] = true
	}
	var handles []*statestore.CheckpointHandle
	var parts []modelPart
	if s.last != nil {
		for _, p := range s.last.parts {
			h := s.roundTrip(p)
			if h == nil {
				return
			}
			handles = append(handles, h)
			parts = append(parts, modelPart{p.model, p.kgr})
		}
	}
	lastID := int64(0)
	if s.last != nil {
		lastID = s.last.id
	}
	for i, kgr := range ranges {
		name := opName(kgr)
		in, err := s.open(name, kgr, s.machineDir(machines[i]), s.be, true, s.disk, s.local)
		if err != nil {
			s.fail("start instance %s: %v", name, err)
			return
		}
		in.machine = machines[i]
		s.be.registerLog(in.cp.Log().LogID(), s.writers)
		s.writers++
		s.insts = append(s.insts, in)
		for attempt := 1; ; attempt++ {
			err := in.cp.InitializeState(context.Background(), statestore.CheckpointInfo{OperatorID: "op", TaskID: i, CheckpointID: lastID, LastCompletedCheckpointID: lastID}, handles...)
			if err == nil {
				break
			}
			s.count(func(st *StateStats) { st.RestoreErrors++ })
			if !errors.Is(err, errInjected) {
				s.fail("instance %s %v: restore of checkpoint %d failed with an error that no injected fault explains: %v", name, kgr, lastID, err)
				return
			}
			s.checkFailedRestore(in, fmt.Sprintf("instance %s %v: restore of checkpoint %d, attempt %d (%v)", name, kgr, lastID, attempt, err))
			if attempt == 50 {
				s.fail("instance %s %v: restore of checkpoint %d still failing after %d attempts: %v", name, kgr, lastID, attempt, err)
				return
			}
		}
		s.count(func(st *StateStats) { st.Restores++ })
		s.tracef("instance %s %v on machine %d restored checkpoint %d (%s)", name, kgr, in.machine, lastID, handleObjects(handles))
		if len(parts) > 0 {
			in.m = restoredModel(parts, kgr, s.maxP, s.winR, s.verR)
		}
		// Restoring its own checkpoint, an instance takes over the
		// snapshot objects and files that its operator wrote: it deletes
		// them once unreferenced.
		var meets []*statestore.CheckpointHandle
		for _, h := range handles {
			if _, ok := intersectKG(h.KeyGroups, kgr); ok {
				meets = append(meets, h)
			}
		}
		if len(meets) == 1 && meets[0].Operator == name && meets[0].KeyGroups == kgr {
			own := objname.SnapshotPrefix(objname.JobPrefix(stJob), name)
			for _, o := range meets[0].Objects() {
				if strings.HasPrefix(o, own) {
					delete(s.tolerated, o)
				}
			}
		}
		s.compareLive(in, fmt.Sprintf("instance %s %v just after restoring checkpoint %d", name, kgr, lastID))
	}
}

// roundTrip returns the part's handle after a binary round trip, which
// must give the same bytes again.
func (s *stateSchedule) roundTrip(p *cpPart) *statestore.CheckpointHandle {
	b, err := p.h.MarshalBinary()
	if err != nil {
		s.fail("handle of %s: marshal: %v", p.name, err)
		return nil
	}
	var h statestore.CheckpointHandle
	if err := h.UnmarshalBinary(b); err != nil {
		s.fail("handle of %s: unmarshal: %v", p.name, err)
		return nil
	}
	if b2, err := h.MarshalBinary(); err != nil || string(b2) != string(b) {
		s.failf("handle of %s: the binary encoding does not round-trip (err %v)", p.name, err)
	}
	return &h
}

// checkFailedRestore checks an instance whose restore failed: its stores
// are empty and it refuses to checkpoint and to materialise.
func (s *stateSchedule) checkFailedRestore(in *stInst, what string) {
	d, bad := in.dump()
	if !d.empty() || len(bad) > 0 {
		s.failf("%s: the stores are not empty after the failed restore: %d kv, %d windows, %d versioned keys, stream times %d and %d; %v",
			what, len(d.kv), len(d.win), len(d.ver), d.winST, d.verST, bad)
	}
	if _, err := in.cp.SnapshotState(context.Background(), statestore.CheckpointInfo{OperatorID: "op", CheckpointID: s.nextID}); !errors.Is(err, statestore.ErrRestoreFailed) {
		s.failf("%s: SnapshotState after the failed restore returned %v, want ErrRestoreFailed", what, err)
	}
	if err := in.cp.Materialize(context.Background()); !errors.Is(err, statestore.ErrRestoreFailed) {
		s.failf("%s: Materialize after the failed restore returned %v, want ErrRestoreFailed", what, err)
	}
}

// compareLive compares an instance's stores with its model.
func (s *stateSchedule) compareLive(in *stInst, what string) {
	got, bad := in.dump()
	if d := diffDumps(in.m.dump(), got); d != "" {
		s.tracef("%s: the stores differ from the model", what)
		s.failf("%s: the stores differ from the model: %s", what, d)
	}
	for _, b := range bad {
		s.failf("%s: %s", what, b)
	}
}

func (s *stateSchedule) checkLive(r *rand.Rand, what string) {
	s.waitSnapshots()
	s.checkLastStored(what)
	for _, in := range s.insts {
		s.compareLive(in, fmt.Sprintf("%s %s %v", what, in.name, in.kgr))
		for _, b := range in.checkReads(in.m, in.keys, r.IntN) {
			s.failf("%s %s %v: %s", what, in.name, in.kgr, b)
		}
	}
}

// checkLastStored checks that every object of the last completed
// checkpoint, which the job may restore at any time, is on the backend.
func (s *stateSchedule) checkLastStored(what string) {
	if s.last == nil {
		return
	}
	for _, p := range s.last.parts {
		for _, o := range p.h.Objects() {
			if !s.be.st.has(o) {
				s.failf("%s: object %s of the last completed checkpoint %d (%s) is not on the backend", what, o, s.last.id, p.name)
			}
		}
	}
}

// waitSnapshots waits for every SnapshotState under way.
func (s *stateSchedule) waitSnapshots() {
	for _, cp := range s.cps {
		cp.wg.Wait()
	}
}

// value returns a value: short, empty now and then, or a few KiB.
func (s *stateSchedule) value(r *rand.Rand, tag string) string {
	n := r.IntN(40)
	switch {
	case r.IntN(12) == 0:
		return ""
	case s.bigValues && r.IntN(10) == 0:
		n = 200 + r.IntN(3000)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return tag + string(b)
}

// floor4 rounds a time down to a multiple of 4: window starts.
func floor4(t int64) int64 {
	if t >= 0 {
		return t - t%4
	}
	return t - (4+t%4)%4
}

// wildTime advances the clock and returns a time near it, late now and
// then by up to twice the retentions (a put that may be dropped), and
// rarely jumps far ahead (everything expires).
func (s *stateSchedule) wildTime(r *rand.Rand) int64 {
	s.now += int64(r.IntN(3))
	span := 2*max(s.winR, s.verR) + 1
	switch x := r.IntN(300); {
	case x == 0:
		s.now += 3 * max(s.winR, s.verR)
	case x < 40:
		return s.now - r.Int64N(span)
	}
	return s.now - int64(r.IntN(3))
}

// newOp draws a write to one of the stores for one of keys, at time ts.
func (s *stateSchedule) newOp(r *rand.Rand, keys []string, ts int64, tag string) stOp {
	op := stOp{key: keys[r.IntN(len(keys))], ts: ts}
	switch x := r.IntN(10); {
	case x < 4:
		op.store = 'k'
		op.ts = 0
	case x < 7:
		op.store = 'w'
	default:
		op.store = 'v'
	}
	op.del = r.IntN(5) == 0
	if !op.del {
		op.val = s.value(r, tag)
	}
	return op
}

// do applies a write to the instance's stores.
func (in *stInst) do(op stOp) error {
	switch op.store {
	case 'k':
		if op.del {
			return in.kv.Delete(op.key)
		}
		return in.kv.Put(op.key, op.val)
	case 'w':
		if op.del {
			return in.win.Delete(op.key, op.ts)
		}
		return in.win.Put(op.key, op.ts, op.val)
	default:
		if op.del {
			return in.ver.Delete(op.key, op.ts)
		}
		return in.ver.Put(op.key, op.val, op.ts)
	}
}

// writeStep writes to every instance, one write at a time, at times late
// or early: puts into expired windows and past the history retention
// included.
func (s *stateSchedule) writeStep(r *rand.Rand, step int) {
	s.waitSnapshots()
	n := r.IntN(60)
	for idx, in := range s.insts {
		if len(in.keys) == 0 {
			continue
		}
		wr := s.stepRand(stTagWrite, step<<4|idx)
		for j := range n {
			ts := s.wildTime(wr)
			op := s.newOp(wr, in.keys, ts, fmt.Sprintf("s%d.%d.", step, j))
			if op.store == 'w' {
				op.ts = floor4(op.ts)
			}
			if err := in.do(op); err != nil {
				s.failf("instance %s step %d: %s: %v", in.name, step, op, err)
				continue
			}
			s.count(func(st *StateStats) { st.Writes++ })
			if k := s.opt.stateSkipModel; k > 0 && s.stats.Writes%k == 0 {
				continue
			}
			in.m.apply(op)
		}
		if wr.IntN(4) == 0 {
			if err := in.cp.Flush(context.Background()); err != nil {
				s.failf("instance %s step %d: flush: %v", in.name, step, err)
			}
		}
	}
}

// concurrentStep writes to every instance from several goroutines at once,
// each on keys of its own, while the checkpointer flushes and
// materialises. Times stay within a retention of the stream time, so that
// no write is dropped and the stores end as the writes in any order would
// leave them.
func (s *stateSchedule) concurrentStep(r *rand.Rand, step int) {
	s.waitSnapshots()
	s.count(func(st *StateStats) { st.ConcurrentPhases++ })
	var wg sync.WaitGroup
	results := make([][][]stOp, len(s.insts))
	for idx, in := range s.insts {
		if len(in.keys) == 0 {
			continue
		}
		g := min(1+r.IntN(3), len(in.keys))
		results[idx] = make([][]stOp, g)
		w0, v0 := in.m.winST, in.m.verST
		if w0 == minTime {
			w0 = s.now
		}
		if v0 == minTime {
			v0 = s.now
		}
		for gi := range g {
			gr := s.stepRand(stTagConc, step<<8|idx<<4|gi)
			var keys []string
			for j := gi; j < len(in.keys); j += g {
				keys = append(keys, in.keys[j])
			}
			n := gr.IntN(80)
			wg.Go(func() {
				for j := range n {
					op := s.newOp(gr, keys, 0, fmt.Sprintf("s%d.%d.%d.", step, gi, j))
					switch op.store {
					case 'w':
						op.ts = w0 + 4*gr.Int64N((s.winR-1)/4+1)
					case 'v':
						op.ts = v0 + gr.Int64N(s.verR+1)
					}
					if err := in.do(op); err != nil {
						s.failf("instance %s step %d writer %d: %s: %v", in.name, step, gi, op, err)
						continue
					}
					results[idx][gi] = append(results[idx][gi], op)
				}
			})
		}
		if r.IntN(2) == 0 {
			mr := s.stepRand(stTagConc, step<<8|idx<<4|15)
			wg.Go(func() {
				for range 1 + mr.IntN(3) {
					time.Sleep(time.Duration(mr.IntN(2000)) * time.Microsecond)
					if mr.IntN(3) == 0 {
						if err := in.cp.Flush(context.Background()); err != nil {
							s.failf("instance %s step %d: flush: %v", in.name, step, err)
						}
						continue
					}
					s.materialize(in, fmt.Sprintf("step %d, during writes", step))
				}
			})
		}
	}
	wg.Wait()
	for idx, in := range s.insts {
		for _, ops := range results[idx] {
			for _, op := range ops {
				in.m.apply(op)
				s.now = max(s.now, op.ts)
			}
			s.count(func(st *StateStats) { st.Writes += len(ops) })
		}
	}
}

const minTime = -1 << 63

// materialize materialises an instance now; an error must be explained.
func (s *stateSchedule) materialize(in *stInst, what string) {
	err := in.cp.Materialize(context.Background())
	s.count(func(st *StateStats) {
		st.Materializes++
		if err != nil {
			st.MaterializeErrors++
		}
	})
	if err != nil && !expected(err) {
		s.failf("instance %s %s: Materialize: %v", in.name, what, err)
	}
	s.tracef("instance %s: Materialize (%s): %v", in.name, what, err)
}

// materializeStep materialises some instances, sometimes while a
// checkpoint completes or aborts.
func (s *stateSchedule) materializeStep(r *rand.Rand) {
	var wg sync.WaitGroup
	for _, in := range s.insts {
		if len(s.insts) == 1 || r.IntN(2) == 0 {
			wg.Go(func() { s.materialize(in, "materialise step") })
		}
	}
	switch r.IntN(4) {
	case 0:
		s.completeStep(r)
	case 1:
		s.abortStep(r)
	}
	wg.Wait()
}

// snapshotStep takes a checkpoint of every instance, in the background.
func (s *stateSchedule) snapshotStep(r *rand.Rand) {
	s.nextID++
	cp := &jobCP{id: s.nextID}
	last := int64(0)
	if s.last != nil {
		last = s.last.id
	}
	for i, in := range s.insts {
		p := &cpPart{in: in, name: in.name, kgr: in.kgr, model: in.m.clone()}
		cp.parts = append(cp.parts, p)
		cp.wg.Go(func() {
			h, err := in.cp.SnapshotState(context.Background(), statestore.CheckpointInfo{OperatorID: "op", TaskID: i, CheckpointID: cp.id, LastCompletedCheckpointID: last})
			p.h, p.err = h, err
			p.done.Store(true)
			if err != nil {
				s.tracef("instance %s: checkpoint %d failed: %v", in.name, cp.id, err)
			} else {
				s.tracef("instance %s: checkpoint %d: %s", in.name, cp.id, handleObjects([]*statestore.CheckpointHandle{h}))
			}
			s.count(func(st *StateStats) {
				st.Checkpoints++
				if err != nil {
					st.CheckpointErrors++
				}
			})
			if err != nil && !expected(err) {
				s.failf("instance %s: checkpoint %d failed with an error that names no injected fault, crash or deadline: %v", in.name, cp.id, err)
			}
			if err == nil && (h.CheckpointID != cp.id || h.Operator != in.name || h.KeyGroups != in.kgr || h.MaxParallelism != s.maxP) {
				s.failf("instance %s: checkpoint %d: handle of checkpoint %d, operator %s, key groups %v of %d", in.name, cp.id, h.CheckpointID, h.Operator, h.KeyGroups, h.MaxParallelism)
			}
		})
	}
	s.cps = append(s.cps, cp)
	if r.IntN(2) == 0 {
		cp.wg.Wait()
	}
}

// pending returns the checkpoints not notified yet, newer than the last
// completed one.
func (s *stateSchedule) pending() []*jobCP {
	var out []*jobCP
	for _, cp := range s.cps {
		if !cp.notified && (s.last == nil || cp.id > s.last.id) {
			out = append(out, cp)
		}
	}
	return out
}

func failedPart(cp *jobCP) *cpPart {
	for _, p := range cp.parts {
		if p.err != nil {
			return p
		}
	}
	return nil
}

// completeStep completes a pending checkpoint whose every part succeeded
// (one that failed is aborted), then restores it to check it. A schedule
// without faults may notify while the uploads still run.
func (s *stateSchedule) completeStep(r *rand.Rand) {
	cands := s.pending()
	if len(cands) == 0 {
		return
	}
	cp := cands[r.IntN(len(cands))]
	if r.IntN(2) == 0 {
		cp = cands[len(cands)-1]
	}
	// Every older checkpoint's SnapshotState returns first: one that
	// began after this one completed would be refused as not newer.
	for _, o := range s.cps {
		if o.id < cp.id {
			o.wg.Wait()
		}
	}
	early := s.stats.FaultFree && s.scfg.RetryPolicy == dstl.RetryNone && r.IntN(3) == 0
	if !early {
		cp.wg.Wait()
		if failedPart(cp) != nil {
			s.abort(cp, false)
			return
		}
	}
	for _, p := range cp.parts {
		_, err := notify(p, func() error { return p.in.cp.NotifyCheckpointComplete(context.Background(), cp.id) })
		if err != nil && !errors.Is(err, errInjected) {
			s.failf("instance %s: NotifyCheckpointComplete(%d): %v", p.name, cp.id, err)
		}
	}
	cp.notified = true
	if early {
		cp.wg.Wait()
		if p := failedPart(cp); p != nil {
			s.failf("instance %s: checkpoint %d failed without faults: %v", p.name, cp.id, p.err)
			return
		}
	}
	cp.complete = true
	s.tracef("checkpoint %d completed (notified while uploading: %v)", cp.id, early)
	for _, o := range s.cps {
		if o.id < cp.id {
			o.notified = true // subsumed
		}
	}
	s.last = cp
	s.count(func(st *StateStats) { st.Completed++ })
	s.verify(cp, r)
}

// notify calls f, a notification of the part's checkpoint, again while it
// fails with ErrUnknownCheckpoint and SnapshotState has not returned: the
// goroutine calling it may not have begun it yet (a job notifies only
// checkpoints it took). It returns whether SnapshotState had returned
// before the last call, and that call's error.
func notify(p *cpPart, f func() error) (bool, error) {
	for {
		done := p.done.Load()
		err := f()
		if !errors.Is(err, statestore.ErrUnknownCheckpoint) || done {
			return done, err
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// abortStep aborts a pending checkpoint, maybe while its uploads run.
func (s *stateSchedule) abortStep(r *rand.Rand) {
	cands := s.pending()
	if len(cands) == 0 {
		return
	}
	s.abort(cands[r.IntN(len(cands))], r.IntN(2) == 0)
}

func (s *stateSchedule) abort(cp *jobCP, wait bool) {
	if wait {
		cp.wg.Wait()
	}
	for _, p := range cp.parts {
		done, err := notify(p, func() error { return p.in.cp.NotifyCheckpointAborted(context.Background(), cp.id) })
		if err != nil && !errors.Is(err, errInjected) && !(errors.Is(err, statestore.ErrUnknownCheckpoint) && done && p.err != nil) {
			s.failf("instance %s: NotifyCheckpointAborted(%d): %v", p.name, cp.id, err)
		}
	}
	cp.notified = true
	s.tracef("checkpoint %d aborted", cp.id)
	s.count(func(st *StateStats) { st.Aborted++ })
}

// closeInstances closes every instance (a crash: what is under way is
// cut short) and waits for the checkpoints under way. It returns the
// materialisations the instances did.
func (s *stateSchedule) closeInstances() int {
	mats := 0
	for _, in := range s.insts {
		err := in.cp.Close() // stops the background materialisation: Stats are final
		st := in.cp.Stats()
		mats += int(st.Materializations)
		s.count(func(ss *StateStats) { ss.Materializations += int(st.Materializations) })
		if err := errors.Join(err, in.storage.Close()); err != nil && !expected(err) {
			s.failf("instance %s: close: %v", in.name, err)
		}
	}
	s.insts = nil
	s.waitSnapshots()
	for _, cp := range s.cps {
		cp.notified = true
	}
	return mats
}

// crashStep closes every instance, maybe while checkpoints are under way,
// and starts new ones that restore the last completed checkpoint: on the
// same machines or new ones, with the same key groups or others.
func (s *stateSchedule) crashStep(r *rand.Rand) {
	if r.IntN(2) == 0 {
		s.waitSnapshots()
	}
	s.checkLastStored("before a crash")
	var ranges []dstl.KeyGroupRange
	var machines []int
	for _, in := range s.insts {
		ranges = append(ranges, in.kgr)
		machines = append(machines, in.machine)
	}
	s.tracef("crash")
	s.closeInstances()
	s.count(func(st *StateStats) { st.Crashes++ })
	if r.IntN(4) == 0 {
		ranges = s.newRanges(r)
		s.count(func(st *StateStats) { st.Rescales++ })
	}
	for i := range ranges {
		if i >= len(machines) {
			machines = append(machines, s.newMachine())
		} else if r.IntN(3) == 0 {
			machines[i] = s.newMachine()
		}
	}
	s.start(ranges, machines[:len(ranges)])
}

// verify restores a completed checkpoint into a fresh checkpointer (on
// disk, or of either kind when the checkpoint is of in-memory stores),
// over the backend without faults, for some key groups: those of a part,
// part of them, the whole job's (merging the parts) or any; the stores
// must hold what the model held for those key groups. Now and then an
// object the restore reads is damaged or missing first: the restore must
// fail and say why, or restore exactly all the same.
func (s *stateSchedule) verify(cp *jobCP, r *rand.Rand) {
	var handles []*statestore.CheckpointHandle
	var parts []modelPart
	for _, p := range cp.parts {
		h := s.roundTrip(p)
		if h == nil {
			return
		}
		handles = append(handles, h)
		parts = append(parts, modelPart{p.model, p.kgr})
	}
	p := cp.parts[r.IntN(len(cp.parts))]
	var rv dstl.KeyGroupRange
	switch r.IntN(6) {
	case 0, 1:
		rv = p.kgr
	case 2:
		a, b := p.kgr.Start+r.IntN(p.kgr.End-p.kgr.Start+1), p.kgr.Start+r.IntN(p.kgr.End-p.kgr.Start+1)
		rv = dstl.KeyGroupRange{Start: min(a, b), End: max(a, b)}
	case 3, 4:
		rv = s.job
	default: // any key groups near the job's
		lo, hi := max(0, s.job.Start-8), min(s.maxP-1, s.job.End+8)
		a, b := lo+r.IntN(hi-lo+1), lo+r.IntN(hi-lo+1)
		rv = dstl.KeyGroupRange{Start: min(a, b), End: max(a, b)}
	}
	disk := s.disk || r.IntN(2) == 0
	s.verifies++
	v, err := s.open("verify", rv, filepath.Join(s.dir, fmt.Sprintf("verify-%d", s.verifies)), s.cl, false, disk, false)
	if err != nil {
		s.fail("verifier: %v", err)
		return
	}
	defer func() {
		if err := v.close(); err != nil {
			s.failf("verifier: close: %v", err)
		}
	}()
	what := fmt.Sprintf("checkpoint %d restored into a fresh %s checkpointer of key groups %v", cp.id, kindName(disk), rv)
	merged := 0
	for _, h := range handles {
		if _, ok := intersectKG(h.KeyGroups, rv); ok {
			merged++
		}
	}
	s.count(func(st *StateStats) {
		st.Verified++
		if merged > 1 {
			st.VerifiedMerged++
		}
	})
	ctx := context.Background()
	info := statestore.CheckpointInfo{OperatorID: "op", CheckpointID: cp.id, LastCompletedCheckpointID: cp.id}
	if r.IntN(6) == 0 {
		if done := s.damaged(v, r, handles, rv, info, what); done {
			return
		}
	}
	if err := v.cp.InitializeState(ctx, info, handles...); err != nil {
		s.failf("%s: %v", what, err)
		return
	}
	s.compareRestored(v, restoredModel(parts, rv, s.maxP, s.winR, s.verR), r, what)
}

func kindName(disk bool) string {
	if disk {
		return "disk-backed"
	}
	return "in-memory"
}

func (s *stateSchedule) compareRestored(v *stInst, want *stModel, r *rand.Rand, what string) {
	v.m = want
	s.compareLive(v, what)
	for _, b := range v.checkReads(want, v.keys, r.IntN) {
		s.failf("%s: %s", what, b)
	}
}

// damaged damages or removes one object that the handles name, restores,
// puts the object back, and checks the outcome: a failed restore names
// the damage (ErrSnapshotFormat, ErrNotFound), leaves the stores empty
// and the checkpointer refusing to checkpoint, and a second restore
// succeeds; a restore that did not need the object restores exactly. It
// reports whether it checked the restored state.
func (s *stateSchedule) damaged(v *stInst, r *rand.Rand, handles []*statestore.CheckpointHandle, rv dstl.KeyGroupRange, info statestore.CheckpointInfo, what string) bool {
	var objs []string
	for _, h := range handles {
		if _, ok := intersectKG(h.KeyGroups, rv); ok {
			objs = append(objs, h.Objects()...)
		}
	}
	if len(objs) == 0 {
		return false
	}
	name := objs[r.IntN(len(objs))]
	st := s.be.st
	orig, ok := st.Object(name)
	if !ok {
		s.failf("%s: object %s that the handle names is not on the backend", what, name)
		return false
	}
	snapshot := strings.HasPrefix(name, stSnapshots)
	how := "removed"
	if snapshot && len(orig) > 0 && r.IntN(2) == 0 {
		bad := slices.Clone(orig)
		if r.IntN(3) == 0 {
			bad = bad[:r.IntN(len(bad))]
			how = "truncated"
		} else {
			bad[r.IntN(len(bad))] ^= byte(1 + r.IntN(255))
			how = "damaged"
		}
		st.SetObject(name, bad)
	} else {
		s.mu.Lock()
		if s.removed == nil {
			s.removed = map[string]bool{}
		}
		s.removed[name] = true
		s.mu.Unlock()
		st.DeleteObject(name)
	}
	err := v.cp.InitializeState(context.Background(), info, handles...)
	st.SetObject(name, orig)
	s.count(func(st *StateStats) { st.Damaged++ })
	what = fmt.Sprintf("%s, object %s %s", what, name, how)
	if err == nil {
		return false // the restore did not need it: checked as usual
	}
	s.count(func(st *StateStats) { st.DamageFailed++ })
	if !errors.Is(err, statestore.ErrSnapshotFormat) && !errors.Is(err, backends.ErrNotFound) {
		s.failf("%s: the restore failed with an error that names neither ErrSnapshotFormat nor ErrNotFound: %v", what, err)
	}
	if !strings.Contains(err.Error(), name) {
		s.failf("%s: the restore's error does not name the object: %v", what, err)
	}
	s.checkFailedRestore(v, what)
	return false
}

// finish ends a schedule: faults stop; every instance maybe
// materialises, then takes a checkpoint, which completes and is checked;
// then every instance materialises (which waits for a background one
// under way, and leaves none to do) and takes a last checkpoint, which
// names the instance's current snapshot.
func (s *stateSchedule) finish(r *rand.Rand) {
	s.waitSnapshots()
	s.be.stopFaults()
	s.be.f.Wait()
	if r.IntN(2) == 0 {
		s.finalMaterialize()
	}
	if !s.finalCheckpoint(r) {
		return
	}
	s.finalMaterialize()
	if !s.finalCheckpoint(r) {
		return
	}
	s.checkLive(r, "at the end")
	if s.keep {
		// The job deletes snapshots: every completed checkpoint can
		// still be restored.
		var done []*jobCP
		for _, o := range s.cps {
			if o.complete && o != s.last {
				done = append(done, o)
			}
		}
		for range min(3, len(done)) {
			s.verify(done[r.IntN(len(done))], r)
		}
	}
}

func (s *stateSchedule) finalMaterialize() {
	for _, in := range s.insts {
		if err := in.cp.Materialize(context.Background()); err != nil {
			s.failf("instance %s: Materialize at the end, without faults: %v", in.name, err)
		}
	}
}

// finalCheckpoint takes a checkpoint without faults, completes and checks
// it. Its upload may still fail: on a busy machine, slower than the upload
// timeout, or joined to an upload that began before the faults stopped;
// then the job takes another.
func (s *stateSchedule) finalCheckpoint(r *rand.Rand) bool {
	var cp *jobCP
	for attempt := 1; ; attempt++ {
		s.snapshotStep(r)
		cp = s.cps[len(s.cps)-1]
		cp.wg.Wait()
		p := failedPart(cp)
		if p == nil {
			break
		}
		if !(errors.Is(p.err, context.DeadlineExceeded) || errors.Is(p.err, errInjected)) || attempt == 5 {
			s.fail("instance %s: checkpoint %d at the end, without faults (attempt %d): %v", p.name, cp.id, attempt, p.err)
			return false
		}
		s.abort(cp, true)
	}
	for _, p := range cp.parts {
		if err := p.in.cp.NotifyCheckpointComplete(context.Background(), cp.id); err != nil {
			s.failf("instance %s: NotifyCheckpointComplete(%d) at the end, without faults: %v", p.name, cp.id, err)
		}
	}
	cp.notified, cp.complete = true, true
	s.last = cp
	s.tracef("checkpoint %d completed", cp.id)
	s.count(func(st *StateStats) { st.Completed++ })
	s.verify(cp, r)
	return true
}

// snapshotNames returns the names of the snapshot objects and files on
// the backend, sorted.
func (s *stateSchedule) snapshotNames() []string {
	var out []string
	for _, n := range s.be.st.names() {
		if strings.HasPrefix(n, stSnapshots) {
			out = append(out, n)
		}
	}
	return out
}

// checkObjects checks the snapshot objects and files left at the end:
// every one the last checkpoint names is there and, unless the job
// deletes snapshots (KeepSnapshots), nothing else is but what an injected
// fault or a crash left, or a materialisation after the last checkpoint
// wrote.
func (s *stateSchedule) checkObjects() {
	names := s.snapshotNames()
	s.stats.Objects = len(names)
	present := map[string]bool{}
	for _, n := range names {
		present[n] = true
	}
	need := map[string]string{}
	for _, cp := range s.cps {
		if !cp.complete || (!s.keep && cp != s.last) {
			continue
		}
		for _, p := range cp.parts {
			for _, o := range p.h.Objects() {
				need[o] = fmt.Sprintf("checkpoint %d of %s", cp.id, p.name)
			}
		}
	}
	for _, o := range slices.Sorted(maps.Keys(need)) {
		if strings.HasPrefix(o, stSnapshots) && !present[o] {
			s.failf("object %s that %s names was deleted%s", o, need[o], s.history(o))
		} else if !strings.HasPrefix(o, stSnapshots) {
			if !s.cl.st.has(o) {
				s.failf("log object %s that %s names was deleted%s", o, need[o], s.history(o))
			}
		}
	}
	explained := s.be.explained()
	if s.keep {
		// The checkpointers delete no snapshot object: only the files
		// of a materialisation that failed, which no handle names.
		s.mu.Lock()
		deleted := slices.Clone(s.deleted)
		s.mu.Unlock()
		for _, n := range deleted {
			if w := s.whoNamed(n); !strings.HasSuffix(w, "no checkpoint names it") {
				s.failf("snapshot object %s deleted with KeepSnapshots%s", n, w)
			}
		}
	}
	for _, n := range names {
		if _, ok := need[n]; ok {
			continue
		}
		if _, ok := explained[n]; ok {
			s.stats.Explained++
			continue
		}
		if s.keep || s.tolerated[n] {
			continue
		}
		s.failf("snapshot object %s left behind: the last checkpoint does not name it, no fault explains it, and the running instances wrote it or restored it as their own%s\n  its history:%s", n, s.whoNamed(n), s.history(n))
	}
}

// whoNamed describes the checkpoints whose handles name an object.
func (s *stateSchedule) whoNamed(name string) string {
	var b strings.Builder
	for _, cp := range s.cps {
		for _, p := range cp.parts {
			if p.h == nil {
				continue
			}
			if slices.Contains(p.h.Objects(), name) {
				fmt.Fprintf(&b, "\n    checkpoint %d of %s %v (complete %v)", cp.id, p.name, p.kgr, cp.complete)
			}
		}
	}
	if b.Len() == 0 {
		return "; no checkpoint names it"
	}
	return "; checkpoints naming it:" + b.String()
}

// missingRemoved reports whether err is a collection's refusal over an
// object that damaged removed for a while.
func (s *stateSchedule) missingRemoved(err error) bool {
	if !errors.Is(err, collect.ErrMissing) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.removed {
		if strings.Contains(err.Error(), name) {
			return true
		}
	}
	return false
}

// warnHandler receives the checkpointers' log: a warning (a background
// materialisation that failed, a deletion that failed) must carry an
// error that an injected fault, a crash or a deadline explains.
type warnHandler struct {
	s     *stateSchedule
	attrs []slog.Attr
}

func (h *warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *warnHandler) Handle(_ context.Context, rec slog.Record) error {
	var err error
	find := func(a slog.Attr) bool {
		if e, ok := a.Value.Any().(error); ok && a.Key == "err" {
			err = e
		}
		return true
	}
	for _, a := range h.attrs {
		find(a)
	}
	rec.Attrs(find)
	h.s.tracef("warning %q: %v", rec.Message, err)
	if err == nil || !expected(err) && !h.s.missingRemoved(err) {
		h.s.failf("unexpected warning %q: err=%v", rec.Message, err)
	}
	return nil
}

func (h *warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &warnHandler{s: h.s, attrs: append(slices.Clone(h.attrs), as...)}
}

func (h *warnHandler) WithGroup(string) slog.Handler { return h }
