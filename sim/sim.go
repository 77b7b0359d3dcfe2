package sim

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dstlgo/dstl/dstl"
)

// Options tune how a schedule is run and judged.
type Options struct {
	// Watchdog bounds one schedule; past it the schedule fails with a dump
	// of every goroutine. Zero means 60 s.
	Watchdog time.Duration
	// Logf, when set, receives a summary of the schedule.
	Logf func(format string, args ...any)
	// Trace, with Logf, passes every event of a schedule of the catalog
	// simulation to Logf too.
	Trace bool

	// beforeFinalReads, when set, runs after every writer and the storage
	// closed and before the handles are read back at the end (tests of the
	// checks themselves).
	beforeFinalReads func(*schedule)
	// stateSkipModel, when above 0, makes the state simulation's model
	// miss every stateSkipModel-th write of the write steps (tests of the
	// checks).
	stateSkipModel int
	// stateBeforeObjects, when set, runs before the state simulation
	// checks the snapshot objects left at the end (tests of the checks).
	stateBeforeObjects func(s *stateSchedule)
}

// Stats says what one schedule did.
type Stats struct {
	Config        string
	Duration      time.Duration
	Faults        string
	FaultFree     bool
	Abrupt        bool
	Writers       int
	Appends       int
	Persists      int
	PersistErrors int
	Verified      int // returned handles read back while running
	Unverifiable  int // returned handles whose objects the engine may have released before they were seen
	Confirmed     int // confirmed handles read back at the end
	Pending       int // handles of checkpoints pending when their writer closed, read back at the end
	Resets        int
	Truncates     int
	Objects       int // objects left at the end
	Explained     int // of them, left by an injected fault
	Injected      [numFaultKinds]int
	// Plan lists each writer's steps, one letter each (see stepLetters),
	// then how it ended: W waited for every persist, C closed,
	// T truncated and closed, O left open, x stopped by a closed writer.
	Plan string
}

func (st Stats) String() string {
	return fmt.Sprintf("writers=%d appends=%d persists=%d (failed %d) verified=%d (unverifiable %d) confirmed=%d pending=%d resets=%d truncates=%d abrupt=%v objects-left=%d (by faults %d) injected=%s\n  config: %s\n  faults: %s\n  plan: %s",
		st.Writers, st.Appends, st.Persists, st.PersistErrors, st.Verified, st.Unverifiable, st.Confirmed, st.Pending, st.Resets, st.Truncates, st.Abrupt,
		st.Objects, st.Explained, injectedString(st.Injected), st.Config, st.Faults, st.Plan)
}

const storageID = "sim"

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// schedule is one simulated run.
type schedule struct {
	seed uint64
	opt  Options
	cfg  dstl.Config
	prof faultProfile
	be   *backend
	cl   *backend // clean view, for the checks
	st   *dstl.Storage

	// closeMu orders the checks of returned handles (read-locked) with the
	// abrupt close of the storage (write-locked), which may release their
	// objects.
	closeMu sync.RWMutex
	abrupt  atomic.Bool

	recorder[Stats]

	writers []*simWriter
}

// recorder holds what a schedule counts (stats, of type S) and the
// invariants it found broken (errs), under mu.
type recorder[S fmt.Stringer] struct {
	mu    sync.Mutex
	stats S
	errs  []string
}

// failf records a broken invariant; the first 20 are kept.
func (r *recorder[S]) failf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 20 {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	}
}

// count updates the stats with f.
func (r *recorder[S]) count(f func(*S)) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}

// watch runs the schedule run of seed under the watchdog of d (60 s when
// d is not positive) and returns the stats, with an error that reports a
// hang or lists the broken invariants. After a run that ended, it calls
// ended (which may log) with how long the run took.
func (r *recorder[S]) watch(seed uint64, d time.Duration, run func(), ended func(time.Duration)) (S, error) {
	if d <= 0 {
		d = 60 * time.Second
	}
	begin := time.Now()
	if dump := watchdog(d, run); dump != "" {
		r.mu.Lock()
		st := r.stats
		r.mu.Unlock()
		return st, fmt.Errorf("seed %d: schedule still running after %v (hang)\n%s\ngoroutines:\n%s", seed, d, st, dump)
	}
	ended(time.Since(begin))
	if len(r.errs) > 0 {
		return r.stats, fmt.Errorf("seed %d: %s\n%s", seed, strings.Join(r.errs, "\n"), r.stats)
	}
	return r.stats, nil
}

// Run runs the schedule of seed and returns what it did; the error lists
// the invariants it broke.
func Run(seed uint64, opt Options) (Stats, error) {
	s := &schedule{seed: seed, opt: opt}
	return s.watch(seed, opt.Watchdog, s.run, func(d time.Duration) {
		s.stats.Duration = d
		if opt.Logf != nil {
			opt.Logf("seed %d: %s", seed, s.stats)
		}
	})
}

// watchdog runs f and waits up to d for it; past d, it returns a dump of
// every goroutine (f goes on running).
func watchdog(d time.Duration, f func()) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return ""
	case <-t.C:
		buf := make([]byte, 8<<20)
		return string(buf[:runtime.Stack(buf, true)])
	}
}

// pick returns one of the values at random.
func pick[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

func (s *schedule) setup(r *rand.Rand) {
	cfg := dstl.DefaultConfig("sim://")
	cfg.JobID = pick(r, "", "job", "a/b")
	cfg.CompressionEnabled = r.IntN(2) == 0
	// From a stream of its own, so that the other draws of a seed stay
	// what they were before there was a second format version.
	cfg.FormatVersion = 1 + rand.New(rand.NewPCG(s.seed, 0xf0a7)).IntN(2)
	cfg.PreemptivePersistThreshold = pick[int64](r, dstl.NoPreemptivePersist, dstl.NoPreemptivePersist, dstl.NoPreemptivePersist, int64(1+r.IntN(64)), int64(256+r.IntN(8<<10)), int64(256+r.IntN(8<<10)), int64(256+r.IntN(8<<10)), int64(256+r.IntN(8<<10)))
	cfg.BatchPersistDelay = pick[time.Duration](r, dstl.NoBatchDelay, time.Duration(r.IntN(1500))*time.Microsecond)
	cfg.BatchPersistSizeThreshold = pick[int64](r, 1, int64(1+r.IntN(4<<10)), 10<<20)
	cfg.UploadBufferSize = pick[int64](r, 1, 512, 1<<20)
	cfg.UploadNumThreads = 1 + r.IntN(4)
	cfg.DiscardNumThreads = 1 + r.IntN(2)
	cfg.UploadMaxInFlight = pick[int64](r, 1, int64(1+r.IntN(512)), int64(1+r.IntN(64<<10)), 100<<20)
	cfg.RetryPolicy = pick(r, dstl.RetryFixed, dstl.RetryFixed, dstl.RetryFixed, dstl.RetryNone)
	cfg.UploadTimeout = time.Duration(500+r.IntN(15000)) * time.Microsecond
	cfg.UploadMaxAttempts = 1 + r.IntN(4)
	cfg.UploadNextAttemptDelay = cmp.Or(time.Duration(r.IntN(3000))*time.Microsecond, dstl.NoAttemptDelay)
	cfg.CacheIdleTimeout = time.Minute
	s.cfg = cfg

	var prof faultProfile
	if r.IntN(4) != 0 {
		level := pick(r, 0.02, 0.08, 0.2)
		for k := faultKind(1); k <= deleteFail; k++ { // the engine's faults: it reads no object it did not write
			if r.IntN(3) != 0 {
				prof.p[k] = level * r.Float64()
			}
		}
		prof.maxStall = time.Duration(1+r.IntN(20)) * time.Millisecond
	}
	s.prof = prof
	s.stats.FaultFree = prof.faultFree()
	s.stats.Faults = prof.String()
	s.stats.Config = fmt.Sprintf("format=%d compression=%v preemptive=%d batch-delay=%v batch-size=%d buffer=%d threads=%d discard-threads=%d max-in-flight=%d retry=%s timeout=%v attempts=%d next-attempt-delay=%v job=%q",
		cfg.FormatVersion, cfg.CompressionEnabled, cfg.PreemptivePersistThreshold, cfg.BatchPersistDelay, cfg.BatchPersistSizeThreshold, cfg.UploadBufferSize,
		cfg.UploadNumThreads, cfg.DiscardNumThreads, cfg.UploadMaxInFlight, cfg.RetryPolicy, cfg.UploadTimeout, cfg.UploadMaxAttempts,
		cfg.UploadNextAttemptDelay, cfg.JobID)
}

func (s *schedule) run() {
	r := rand.New(rand.NewPCG(s.seed, 0x5eed))
	s.setup(r)
	s.be = newBackend(s.seed, s.prof)
	s.cl = s.be.clean()
	st, err := dstl.New(s.cfg, s.be, dstl.WithStorageID(storageID), dstl.WithLogger(discardLogger))
	if err != nil {
		s.failf("new storage: %v", err)
		return
	}
	s.st = st

	nw := 1 + r.IntN(4)
	s.stats.Writers = nw
	for i := range nw {
		w, err := s.newWriter(i, r)
		if err != nil {
			s.failf("new writer %d: %v", i, err)
			st.Close()
			return
		}
		s.writers = append(s.writers, w)
		s.be.registerLog(w.w.LogID(), i)
	}
	abruptAfter := time.Duration(-1)
	if r.IntN(4) == 0 {
		abruptAfter = time.Duration(r.IntN(15000)) * time.Microsecond
	}

	var wg sync.WaitGroup
	for _, w := range s.writers {
		wg.Go(w.program)
	}
	if abruptAfter >= 0 {
		wg.Go(func() {
			time.Sleep(abruptAfter)
			s.closeMu.Lock()
			s.abrupt.Store(true)
			if err := st.Close(); err != nil {
				s.failf("abrupt close of the storage: %v", err)
			}
			s.closeMu.Unlock()
		})
	}
	wg.Wait()
	s.stats.Abrupt = s.abrupt.Load()
	var plans []string
	for _, w := range s.writers {
		plans = append(plans, string(w.plan))
	}
	s.stats.Plan = strings.Join(plans, " ")
	if !s.abrupt.Load() {
		s.abrupt.Store(true) // from now on, every writer is closed
		if err := st.Close(); err != nil {
			s.failf("close of the storage: %v", err)
		}
	}
	if n := st.InFlight(); n != 0 {
		s.failf("%d bytes still counted in flight after the storage closed", n)
	}
	// Every persist is resolved now that the storage is closed.
	for _, w := range s.writers {
		w.epoch++
		for _, rc := range w.recs {
			select {
			case <-rc.f.Done():
			default:
				s.failf("writer %d: persist of checkpoint %d [%d, %d) still unresolved after the storage closed", w.idx, rc.cp, rc.from.sqn, rc.to.sqn)
				continue
			}
			if !rc.observed {
				w.observe(rc)
			}
		}
	}
	s.be.f.Wait()
	s.be.stopFaults()
	s.be.st.mu.Lock()
	s.stats.Injected = s.be.st.counts
	s.be.st.mu.Unlock()
	if s.opt.beforeFinalReads != nil {
		s.opt.beforeFinalReads(s)
	}
	s.checkAtEnd()
	s.checkLeftovers()
}

// checkAtEnd reads every confirmed handle, and every handle of a checkpoint
// pending when its writer closed, back through a fresh storage over the
// backend's contents.
func (s *schedule) checkAtEnd() {
	st, err := dstl.New(s.cfg, s.cl, dstl.WithStorageID(storageID), dstl.WithLogger(discardLogger))
	if err != nil {
		s.failf("new storage for the final reads: %v", err)
		return
	}
	defer func() {
		if err := st.Close(); err != nil {
			s.failf("close of the storage of the final reads: %v", err)
		}
	}()
	for _, w := range s.writers {
		rd, err := st.NewReader(w.kgr)
		if err != nil {
			s.failf("writer %d: new reader: %v", w.idx, err)
			return
		}
		var check []*rec
		check = append(check, w.confirmed...)
		for _, rc := range w.recs {
			if rc.pendingAtClose() {
				check = append(check, rc)
			}
		}
		for i, rc := range check {
			w.rng = w.newRand(tagCheck, i)
			what := "confirmed, at the end"
			if !rc.confirmed {
				what = "pending when the writer closed, at the end"
			}
			w.verify(rc, rd, w.kgr, what)
			if w.rng.IntN(2) == 0 { // rescaled: a reader of part of the range
				a := w.kgr.Start + w.rng.IntN(w.kgr.End-w.kgr.Start+1)
				b := w.kgr.Start + w.rng.IntN(w.kgr.End-w.kgr.Start+1)
				sub := dstl.KeyGroupRange{Start: min(a, b), End: max(a, b)}
				if w.rng.IntN(2) == 0 && len(w.appenders[0]) > 0 { // one that holds changes
					kg := w.appenders[0][w.rng.IntN(len(w.appenders[0]))]
					sub = dstl.KeyGroupRange{Start: min(sub.Start, kg), End: max(sub.End, kg)}
				}
				srd, err := st.NewReader(sub)
				if err != nil {
					s.failf("writer %d: new reader of %v: %v", w.idx, sub, err)
					return
				}
				w.verify(rc, srd, sub, fmt.Sprintf("%s, read for key groups %v", what, sub))
			}
			if rc.confirmed {
				s.stats.Confirmed++
			} else {
				s.stats.Pending++
			}
		}
	}
}

// checkLeftovers lists the objects left and fails on any that no confirmed
// or pending handle refers to and no injected fault explains.
func (s *schedule) checkLeftovers() {
	owned := map[string]string{}
	late := map[string]string{}
	for _, w := range s.writers {
		for _, rc := range w.recs {
			if rc.err != nil || !rc.observed {
				continue
			}
			why := ""
			switch {
			case rc.confirmed:
				why = fmt.Sprintf("confirmed checkpoint %d of writer %d", rc.cp, w.idx)
			case rc.pendingAtClose():
				why = fmt.Sprintf("checkpoint %d of writer %d, pending when the writer closed", rc.cp, w.idx)
			case (!rc.reset || rc.resetAfterClose) && rc.lateRisk:
				for _, e := range rc.res.Remote.Entries {
					late[e.Object] = fmt.Sprintf("checkpoint %d of writer %d, resolved after checkpoint %d was confirmed", rc.cp, w.idx, rc.supersededBy)
				}
			}
			if why != "" {
				for _, e := range rc.res.Remote.Entries {
					owned[e.Object] = why
				}
			}
		}
	}
	names := s.be.st.names()
	s.stats.Objects = len(names)
	explained := s.be.explained()
	for _, name := range names {
		if _, ok := owned[name]; ok {
			continue
		}
		if explained[name] {
			s.stats.Explained++
			continue
		}
		extra := ""
		if why, ok := late[name]; ok {
			extra = " (a result that arrived late: " + why + ")"
		}
		extra += s.whoRefers(name)
		s.failf("object %s left behind: no confirmed or pending handle refers to it and no injected fault explains it%s", name, extra)
	}
}

// whoRefers describes the persists whose handles refer to the object.
func (s *schedule) whoRefers(name string) string {
	var b strings.Builder
	for _, w := range s.writers {
		for _, rc := range w.recs {
			for _, e := range rc.res.Remote.Entries {
				if e.Object == name {
					fmt.Fprintf(&b, "\n    writer %d checkpoint %d [%d, %d) set %d: err=%v reset=%v (after close %v) confirmed=%v superseded-by=%d (after close %v) late-risk=%v",
						w.idx, rc.cp, rc.from.sqn, rc.to.sqn, e.SequenceNumber, rc.err, rc.reset, rc.resetAfterClose, rc.confirmed, rc.supersededBy, rc.supersededAfterClose, rc.lateRisk)
					break
				}
			}
		}
	}
	if b.Len() == 0 {
		return "; no handle refers to it"
	}
	return "; handles referring to it:" + b.String()
}

// boundary is a point between change sets: every change appended before it
// has a lower sequence number than sqn, every change after a higher or
// equal one. pos holds, per key group, the number of changes appended
// before it.
type boundary struct {
	sqn dstl.SequenceNumber
	pos map[int]int
}

// rec is one persist.
type rec struct {
	cp       int64
	from, to *boundary
	f        *dstl.Future
	epoch    int // the writer's epoch at the persist

	observed bool
	res      dstl.PersistResult
	err      error
	verified bool

	reset, confirmed bool
	// afterClose: the reset or the newer confirm came after the storage
	// closed the writer, when it did not release anything any more.
	resetAfterClose, supersededAfterClose bool
	superseded                            bool  // a newer checkpoint was confirmed
	supersededBy                          int64 // the first one
	lateRisk                              bool  // it was not resolved yet when the newer one was confirmed
}

// pendingAtClose reports whether rc's checkpoint was pending when its
// writer closed: its persist succeeded, and it was neither confirmed nor
// aborted nor subsumed by a newer confirmed checkpoint while the writer was
// open. The engine keeps such a checkpoint's objects for its owner.
func (rc *rec) pendingAtClose() bool {
	return rc.observed && rc.err == nil && !rc.confirmed &&
		(!rc.reset || rc.resetAfterClose) && (!rc.superseded || rc.supersededAfterClose)
}

// Streams of a writer's random generators: each step, the end of the
// program and each final check draws from a generator of its own, derived
// from (seed, writer, stream, index), so that a step that draws more or
// less (as the persists resolved so far allow) does not shift the
// decisions of the next ones.
const (
	tagProgram = 1 << 60 // the number of steps
	tagStep    = 2 << 60
	tagEnd     = 3 << 60
	tagCheck   = 4 << 60
)

// newRand returns the writer's generator of stream tag, index i.
func (w *simWriter) newRand(tag uint64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(w.s.seed, tag|uint64(w.idx+1)<<32|uint64(i)))
}

// stepLetters names the steps in Stats.Plan.
const stepLetters = "anpwcrts"

// simWriter is one writer's program and the model of its log.
type simWriter struct {
	s   *schedule
	idx int
	rng *rand.Rand // the generator of the current step (see newRand)
	w   *dstl.Writer
	kgr dstl.KeyGroupRange
	// appenders lists the key groups of each appender; the first also
	// appends the metadata. log holds each key group's changes in append
	// order; each list is written by one appender only.
	appenders [][]int
	log       map[int]*[]string
	bounds    []*boundary
	lowest    *boundary // the truncation point
	epoch     int       // grows at each truncation or close: objects may go
	cp        int64
	lastConf  int64
	recs      []*rec
	confirmed []*rec
	step      int
	stopped   bool
	plan      []byte
}

func (s *schedule) newWriter(i int, r *rand.Rand) (*simWriter, error) {
	var kgr dstl.KeyGroupRange
	switch r.IntN(4) {
	case 0:
		kgr = dstl.KeyGroupRange{Start: 0, End: dstl.MaxKeyGroup}
	case 1:
		start := r.IntN(dstl.MaxKeyGroup + 1)
		kgr = dstl.KeyGroupRange{Start: start, End: min(dstl.MaxKeyGroup, start+r.IntN(64))}
	default:
		start := r.IntN(dstl.MaxKeyGroup + 1)
		kgr = dstl.KeyGroupRange{Start: start, End: min(dstl.MaxKeyGroup, start+r.IntN(dstl.MaxKeyGroup+1))}
	}
	w, err := s.st.NewWriter(fmt.Sprint("op", i), kgr)
	if err != nil {
		return nil, err
	}
	sw := &simWriter{s: s, idx: i, w: w, kgr: kgr, log: map[int]*[]string{}}
	// Key groups in use: the range's ends and a few inside.
	kgs := []int{kgr.Start, kgr.End}
	for range r.IntN(6) {
		kgs = append(kgs, kgr.Start+r.IntN(kgr.End-kgr.Start+1))
	}
	slices.Sort(kgs)
	kgs = slices.Compact(kgs)
	na := min(1+r.IntN(3), len(kgs))
	sw.appenders = make([][]int, na)
	for j, kg := range kgs {
		sw.appenders[j%na] = append(sw.appenders[j%na], kg)
	}
	sw.log[dstl.MetaKeyGroup] = new([]string)
	for _, kg := range kgs {
		sw.log[kg] = new([]string)
	}
	b0 := sw.snapshot(0)
	sw.bounds = []*boundary{b0}
	sw.lowest = b0
	return sw, nil
}

func (w *simWriter) failf(format string, args ...any) {
	w.s.failf("writer %d %v step %d: %s", w.idx, w.kgr, w.step, fmt.Sprintf(format, args...))
}

func (w *simWriter) snapshot(sqn dstl.SequenceNumber) *boundary {
	b := &boundary{sqn: sqn, pos: make(map[int]int, len(w.log))}
	for kg, l := range w.log {
		b.pos[kg] = len(*l)
	}
	return b
}

// mark records the boundary sqn, which the writer just returned.
func (w *simWriter) mark(sqn dstl.SequenceNumber) *boundary {
	b := w.snapshot(sqn)
	last := w.bounds[len(w.bounds)-1]
	switch {
	case sqn < last.sqn:
		w.failf("sequence number went back from %d to %d", last.sqn, sqn)
	case sqn == last.sqn && !w.s.abrupt.Load(): // a closed writer dropped its active set
		for kg, n := range b.pos {
			if last.pos[kg] != n {
				w.failf("sequence number %d did not change although key group %d got %d changes", sqn, kg, n-last.pos[kg])
				break
			}
		}
		return last
	}
	w.bounds = append(w.bounds, b)
	return b
}

// closedErr reports whether err says the writer or the storage is closed.
func closedErr(err error) bool { return errors.Is(err, dstl.ErrClosed) }

func (w *simWriter) program() {
	ctx := context.Background()
	w.rng = w.newRand(tagProgram, 0)
	steps := 4 + w.rng.IntN(30)
	for w.step = 0; w.step < steps && !w.stopped; w.step++ {
		w.poll()
		w.rng = w.newRand(tagStep, w.step)
		x := w.rng.IntN(100)
		sleep := time.Duration(w.rng.IntN(2000)) * time.Microsecond // drawn always, like x
		var kind int
		switch {
		case x < 35:
			w.appendPhase(ctx)
		case x < 42:
			kind = 1
			w.mark(w.w.NextSequenceNumber())
		case x < 62:
			kind = 2
			w.persist(ctx)
		case x < 70:
			kind = 3
			w.waitOne(ctx)
		case x < 82:
			kind = 4
			w.confirm()
		case x < 88:
			kind = 5
			w.reset()
		case x < 94:
			kind = 6
			w.truncate()
		default:
			kind = 7
			time.Sleep(sleep)
		}
		w.plan = append(w.plan, stepLetters[kind])
	}
	if w.stopped {
		w.plan = append(w.plan, 'x')
	}
	w.rng = w.newRand(tagEnd, 0)
	waitAll, end := w.rng.IntN(2) == 0, w.rng.IntN(4)
	if waitAll {
		w.plan = append(w.plan, 'W')
		for _, rc := range w.recs {
			if !rc.observed {
				w.wait(ctx, rc)
			}
		}
	}
	switch end {
	case 0, 1:
		w.plan = append(w.plan, 'C')
		if err := w.w.Close(); err != nil {
			w.failf("close: %v", err)
		}
		w.epoch++
	case 2:
		w.plan = append(w.plan, 'T')
		from := w.pickBoundary()
		if err := w.w.TruncateAndClose(from.sqn); err != nil {
			w.failf("truncate and close from %d: %v", from.sqn, err)
		}
		w.epoch++
	default:
		// left open: the storage's Close closes it
		w.plan = append(w.plan, 'O')
		return
	}
	for _, rc := range w.recs {
		if !rc.observed {
			w.wait(ctx, rc)
		}
	}
}

// pickBoundary returns a boundary at or past the truncation point.
func (w *simWriter) pickBoundary() *boundary {
	i := sort.Search(len(w.bounds), func(i int) bool { return w.bounds[i].sqn >= w.lowest.sqn })
	cands := w.bounds[i:]
	if w.rng.IntN(3) == 0 {
		return cands[len(cands)-1]
	}
	return cands[w.rng.IntN(len(cands))]
}

func (w *simWriter) appendPhase(ctx context.Context) {
	var wg sync.WaitGroup
	var appended atomic.Int64
	var closed atomic.Bool
	for a, kgs := range w.appenders {
		r := rand.New(rand.NewPCG(w.s.seed, uint64(w.idx+1)<<32|uint64(w.step)<<8|uint64(a)))
		n := r.IntN(11)
		wg.Go(func() {
			for j := range n {
				kg := kgs[r.IntN(len(kgs))]
				if a == 0 && r.IntN(8) == 0 {
					kg = dstl.MetaKeyGroup
				}
				var data []byte
				switch x := r.IntN(100); {
				case x < 12:
					data = []byte{}
				case x < 14:
					data = make([]byte, 4<<10+r.IntN(60<<10))
					copy(data, fmt.Sprintf("w%d.a%d.s%d.%d.large", w.idx, a, w.step, j))
					for i := 40; i < len(data); i += 97 {
						data[i] = byte(i*31 + j)
					}
				default:
					data = fmt.Appendf(nil, "w%d.a%d.s%d.%d%s", w.idx, a, w.step, j, strings.Repeat("x", r.IntN(40)))
				}
				var err error
				if kg == dstl.MetaKeyGroup {
					err = w.w.AppendMeta(ctx, data)
				} else {
					err = w.w.Append(ctx, kg, data)
				}
				if err != nil {
					if !closedErr(err) {
						w.failf("append %d bytes to key group %d: %v", len(data), kg, err)
					}
					closed.Store(true)
					return
				}
				l := w.log[kg]
				*l = append(*l, string(data))
				appended.Add(1)
			}
		})
	}
	wg.Wait()
	w.s.count(func(st *Stats) { st.Appends += int(appended.Load()) })
	if closed.Load() {
		w.stopped = true
	}
}

func (w *simWriter) persist(ctx context.Context) {
	from := w.pickBoundary()
	w.cp++
	f, err := w.w.Persist(ctx, from.sqn, w.cp)
	if err != nil {
		if !closedErr(err) {
			w.failf("persist checkpoint %d from %d: %v", w.cp, from.sqn, err)
		}
		w.stopped = true
		return
	}
	to := w.mark(w.w.NextSequenceNumber())
	rc := &rec{cp: w.cp, from: from, to: to, f: f, epoch: w.epoch}
	w.recs = append(w.recs, rc)
	w.s.count(func(st *Stats) { st.Persists++ })
	if w.rng.IntN(3) == 0 {
		w.wait(ctx, rc)
	}
}

// wait waits for the persist's result and looks at it.
func (w *simWriter) wait(ctx context.Context, rc *rec) {
	rc.f.Wait(ctx) // the watchdog catches a result that never comes
	w.observe(rc)
}

func (w *simWriter) waitOne(ctx context.Context) {
	var open []*rec
	for _, rc := range w.recs {
		if !rc.observed {
			open = append(open, rc)
		}
	}
	if len(open) > 0 {
		w.wait(ctx, open[w.rng.IntN(len(open))])
	}
}

// poll looks at every persist resolved meanwhile.
func (w *simWriter) poll() {
	for _, rc := range w.recs {
		if !rc.observed {
			select {
			case <-rc.f.Done():
				w.observe(rc)
			default:
			}
		}
	}
}

// observe records a resolved persist's result and checks its handle if its
// objects are certain to exist.
func (w *simWriter) observe(rc *rec) {
	res, err := rc.f.Result()
	if errors.Is(err, dstl.ErrNotDone) {
		return
	}
	rc.observed, rc.res, rc.err = true, res, err
	if err != nil {
		w.s.count(func(st *Stats) { st.PersistErrors++ })
		switch {
		case errors.Is(err, errInjected), errors.Is(err, dstl.ErrClosed), errors.Is(err, dstl.ErrTruncated),
			errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		default:
			w.failf("persist of checkpoint %d [%d, %d) failed with an error that names no cause (injected fault, ErrClosed, ErrTruncated, a deadline): %v",
				rc.cp, rc.from.sqn, rc.to.sqn, err)
		}
		return
	}
	if res.From != rc.from.sqn || res.To != rc.to.sqn {
		w.failf("persist of checkpoint %d from %d resolved to [%d, %d), want [%d, %d)", rc.cp, rc.from.sqn, res.From, res.To, rc.from.sqn, rc.to.sqn)
	}
	if res.Local != nil {
		w.failf("persist of checkpoint %d without local recovery returned a Local handle: %+v", rc.cp, *res.Local)
	}
	w.s.closeMu.RLock()
	defer w.s.closeMu.RUnlock()
	safe := (rc.epoch == w.epoch && !w.s.abrupt.Load()) || (!rc.reset && !rc.superseded)
	if !safe {
		w.s.count(func(st *Stats) { st.Unverifiable++ })
		return
	}
	rd, err := dstl.NewReader(w.s.cl, w.kgr, dstl.ReaderOptions{CacheIdleTimeout: time.Minute})
	if err != nil {
		w.failf("new reader: %v", err)
		return
	}
	defer rd.Close()
	w.verify(rc, rd, w.kgr, "returned")
	w.s.count(func(st *Stats) { st.Verified++ })
}

func (w *simWriter) confirm() {
	var cands []*rec
	for _, rc := range w.recs {
		if rc.observed && rc.err == nil && !rc.reset && !rc.confirmed && rc.cp > w.lastConf {
			cands = append(cands, rc)
		}
	}
	if len(cands) == 0 {
		return
	}
	rc := cands[w.rng.IntN(len(cands))]
	if w.rng.IntN(2) == 0 {
		rc = cands[len(cands)-1]
	}
	var notDone []*rec
	for _, o := range w.recs {
		if o.cp < rc.cp && !o.superseded {
			select {
			case <-o.f.Done():
			default:
				notDone = append(notDone, o)
			}
		}
	}
	w.s.closeMu.RLock()
	defer w.s.closeMu.RUnlock()
	afterClose := w.s.abrupt.Load()
	w.w.Confirm(rc.res.From, rc.res.To, rc.cp)
	rc.confirmed = true
	w.lastConf = rc.cp
	w.confirmed = append(w.confirmed, rc)
	for _, o := range notDone {
		o.lateRisk = true
	}
	for _, o := range w.recs {
		if o.cp < rc.cp && !o.superseded {
			o.superseded, o.supersededBy, o.supersededAfterClose = true, rc.cp, afterClose
		}
	}
}

func (w *simWriter) reset() {
	var cands []*rec
	for _, rc := range w.recs {
		if !rc.reset && !rc.confirmed {
			cands = append(cands, rc)
		}
	}
	if len(cands) == 0 {
		return
	}
	rc := cands[w.rng.IntN(len(cands))]
	w.s.closeMu.RLock()
	defer w.s.closeMu.RUnlock()
	rc.resetAfterClose = w.s.abrupt.Load()
	w.w.Reset(rc.from.sqn, rc.to.sqn, rc.cp)
	rc.reset = true
	w.s.count(func(st *Stats) { st.Resets++ })
}

func (w *simWriter) truncate() {
	to := w.pickBoundary()
	if len(w.confirmed) > 0 && w.rng.IntN(2) == 0 {
		if c := w.confirmed[len(w.confirmed)-1].to; c.sqn >= w.lowest.sqn {
			to = c
		}
	}
	if err := w.w.Truncate(to.sqn); err != nil {
		if !closedErr(err) {
			w.failf("truncate to %d: %v", to.sqn, err)
		}
		return
	}
	w.lowest = to
	w.epoch++
	w.s.count(func(st *Stats) { st.Truncates++ })
}

// verify checks a handle of rc: binary round trip, then every change read
// back against the model.
func (w *simWriter) verify(rc *rec, rd *dstl.Reader, groups dstl.KeyGroupRange, what string) {
	h := rc.res.Remote
	enc, err := h.MarshalBinary()
	if err != nil {
		w.failf("%s handle of checkpoint %d: marshal: %v", what, rc.cp, err)
		return
	}
	var h2 dstl.Handle
	if err := h2.UnmarshalBinary(enc); err != nil {
		w.failf("%s handle of checkpoint %d: unmarshal: %v", what, rc.cp, err)
		return
	}
	if enc2, err := h2.MarshalBinary(); err != nil || !bytes.Equal(enc, enc2) {
		w.failf("%s handle of checkpoint %d: the binary encoding does not round-trip (err %v)", what, rc.cp, err)
	}
	if h2.LogID != w.w.LogID() || h2.KeyGroups != w.kgr || h2.StorageID != storageID || len(h2.Entries) != len(h.Entries) {
		w.failf("%s handle of checkpoint %d: decoded log %s range %v storage %q entries %d, want %s %v %q %d",
			what, rc.cp, h2.LogID, h2.KeyGroups, h2.StorageID, len(h2.Entries), w.w.LogID(), w.kgr, storageID, len(h.Entries))
		return
	}
	if js, err := h.MarshalJSON(); err != nil {
		w.failf("%s handle of checkpoint %d: marshal JSON: %v", what, rc.cp, err)
	} else {
		var h3 dstl.Handle
		if err := h3.UnmarshalJSON(js); err != nil {
			w.failf("%s handle of checkpoint %d: unmarshal JSON: %v", what, rc.cp, err)
		} else if enc3, err := h3.MarshalBinary(); err != nil || !bytes.Equal(enc, enc3) {
			w.failf("%s handle of checkpoint %d: the JSON encoding does not round-trip (err %v)", what, rc.cp, err)
		}
	}
	for i, e := range h2.Entries {
		if e != h.Entries[i] {
			w.failf("%s handle of checkpoint %d: entry %d decoded as %+v, want %+v", what, rc.cp, i, e, h.Entries[i])
			return
		}
		if e.SequenceNumber < rc.from.sqn || e.SequenceNumber >= rc.to.sqn {
			w.failf("%s handle of checkpoint %d [%d, %d): entry %d has change set %d", what, rc.cp, rc.from.sqn, rc.to.sqn, i, e.SequenceNumber)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := map[int][]string{}
	var prevSQN dstl.SequenceNumber
	prevKG := dstl.MetaKeyGroup - 1
	first := true
	for c, err := range rd.Changes(ctx, h2) {
		if err != nil {
			w.failf("%s handle of checkpoint %d [%d, %d): read: %v", what, rc.cp, rc.from.sqn, rc.to.sqn, err)
			return
		}
		if c.SequenceNumber < rc.from.sqn || c.SequenceNumber >= rc.to.sqn {
			w.failf("%s handle of checkpoint %d [%d, %d): a change of set %d", what, rc.cp, rc.from.sqn, rc.to.sqn, c.SequenceNumber)
			return
		}
		if c.KeyGroup != dstl.MetaKeyGroup && !groups.Contains(c.KeyGroup) {
			w.failf("%s handle of checkpoint %d: a change of key group %d outside %v", what, rc.cp, c.KeyGroup, groups)
			return
		}
		if !first && (c.SequenceNumber < prevSQN || c.SequenceNumber == prevSQN && c.KeyGroup < prevKG) {
			w.failf("%s handle of checkpoint %d: (set %d, key group %d) yielded after (set %d, key group %d)", what, rc.cp, c.SequenceNumber, c.KeyGroup, prevSQN, prevKG)
			return
		}
		first, prevSQN, prevKG = false, c.SequenceNumber, c.KeyGroup
		got[c.KeyGroup] = append(got[c.KeyGroup], string(c.Data))
	}
	for kg := range got {
		if _, ok := w.log[kg]; !ok {
			w.failf("%s handle of checkpoint %d: %d changes of key group %d, where none was appended", what, rc.cp, len(got[kg]), kg)
		}
	}
	for kg, l := range w.log {
		if kg != dstl.MetaKeyGroup && !groups.Contains(kg) {
			continue
		}
		want := (*l)[rc.from.pos[kg]:rc.to.pos[kg]]
		if slices.Equal(got[kg], want) {
			continue
		}
		w.failf("%s handle of checkpoint %d [%d, %d): key group %d read back %d changes, want %d\n  got  %s\n  want %s",
			what, rc.cp, rc.from.sqn, rc.to.sqn, kg, len(got[kg]), len(want), brief(got[kg]), brief(want))
	}
	rc.verified = true
}

// brief formats changes for a message: short ones whole, long ones cut.
func brief(cs []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, c := range cs {
		if i > 0 {
			b.WriteString(", ")
		}
		if i == 12 {
			fmt.Fprintf(&b, "... %d more", len(cs)-i)
			break
		}
		if len(c) > 24 {
			fmt.Fprintf(&b, "%q...(%d bytes)", c[:24], len(c))
		} else {
			fmt.Fprintf(&b, "%q", c)
		}
	}
	b.WriteByte(']')
	return b.String()
}
