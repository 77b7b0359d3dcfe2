package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
)

// The job of the catalog simulation, and the time rules of its processes.
const (
	catJobID   = "job"
	catPrefix  = "job/"
	catDataDir = "job/data/"
	catGrace   = 10 * time.Minute
	// catOpSpan bounds, in simulated time, one operation of a process
	// (its calls, their delays and any stall in between), and the age of
	// an object it uploaded when a part of it names the object first: the
	// grace rests on this (an upload is committed within a few checkpoint
	// intervals). A process stalled between operations is not bounded.
	catOpSpan = catGrace / 4
	// catTick bounds the simulated time one scheduling step takes.
	catTick = catGrace / 100
	// catMaxProcs bounds the processes of a schedule (restarts and
	// rescales stop there).
	catMaxProcs = 60
	// catMaxCalls bounds the backend calls of one operation.
	catMaxCalls = 5000
)

var catEpoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// errKilled fails every call of a killed process.
var errKilled = errors.New("sim: the process was killed")

// CatalogStats says what one schedule of the catalog simulation did.
type CatalogStats struct {
	Setup     string // instances, mode, retain, key groups, steps
	Faults    string
	FaultFree bool
	Duration  time.Duration // wall time
	SimTime   time.Duration // simulated time

	Procs, Kills, Restarts, Rescales, Stalls, Delays, Jumps int
	Joins, JoinErrors, Generations, Restores, RestoredParts int
	Commits, CommitErrors, Fenced, Replaced, Refreshes      int
	// OwnPartReplaced counts commits refused with ErrReplaced where the
	// part in the catalog is the process's own, from an earlier attempt
	// whose answer was lost.
	OwnPartReplaced                        int
	Plans, PlansFenced, Dropped, Collected int
	FinalParts, FinalObjects               int // left after the final collection
	Injected                               [numFaultKinds]int
	Digest                                 uint64 // of the trace: equal runs of a seed have equal digests
	Trace                                  string // the last events (on failure)
}

func (st CatalogStats) String() string {
	return fmt.Sprintf("%s sim-time=%v %s\n  faults: %s", st.Setup, st.SimTime.Round(time.Second), st.counts(), st.Faults)
}

// counts formats the counts of the schedule.
func (st CatalogStats) counts() string {
	return fmt.Sprintf("procs=%d kills=%d restarts=%d rescales=%d stalls=%d delays=%d jumps=%d joins=%d (failed %d) generations=%d restores=%d (parts %d) commits=%d (failed %d, fenced %d, replaced %d, own part replaced %d) refreshes=%d plans=%d (fenced %d) dropped=%d collected=%d final: parts=%d objects=%d injected=%s",
		st.Procs, st.Kills, st.Restarts, st.Rescales, st.Stalls, st.Delays, st.Jumps, st.Joins, st.JoinErrors, st.Generations,
		st.Restores, st.RestoredParts, st.Commits, st.CommitErrors, st.Fenced, st.Replaced, st.OwnPartReplaced, st.Refreshes, st.Plans, st.PlansFenced,
		st.Dropped, st.Collected, st.FinalParts, st.FinalObjects, injectedString(st.Injected))
}

// catSchedule is one schedule of the catalog simulation. Its processes
// are goroutines, but one runs at a time: each backend call parks the
// caller, and the scheduler (the schedule's own goroutine) picks, from the
// seed alone, which process goes on, which starts an operation, and which
// event comes next. A schedule is therefore the same at every run.
type catSchedule struct {
	seed uint64
	opt  Options
	r    *rand.Rand

	mode     catalog.Mode
	p        int // instances of the latest rescale
	retain   int
	maxPar   int
	steps    int
	prof     faultProfile
	delayP   float64
	stallMax int     // longest stall, in steps
	storm    float64 // how often processes are killed, restarted, stalled and rescaled

	be   *backend
	cl   *backend // clean view, for the checks
	now  time.Time
	tick int

	procs   []*proc
	events  chan procEvent
	wg      sync.WaitGroup
	running *proc
	trigger int64 // the latest checkpoint triggered (aligned mode)

	t       *truth
	holders map[slotKey]*proc  // the process that joined each slot of each generation
	intents map[string]*intent // what the committer of each part meant to store

	stats  CatalogStats
	errs   []string
	trace  []string
	digest hash.Hash64
}

type slotKey struct {
	gen   int64
	index int
}

// intent is a part as its committer meant it.
type intent struct {
	name    string
	n       int64
	state   []byte
	objects []string
	proc    int
}

type procPhase uint8

const (
	phaseIdle    procPhase = iota // between operations
	phaseParked                   // at a backend call, in an operation
	phaseStopped                  // killed, or gave up
)

// proc is one simulated process: a configuration (instance Index of
// Instances) and, once joined, a member.
type proc struct {
	s      *catSchedule
	id     int
	cfg    catalog.Config
	b      *procBackend
	resume chan procCmd
	ctx    context.Context
	cancel context.CancelFunc

	// The scheduler's, while the process is not running.
	phase     procPhase
	stallTill int       // not scheduled before this step
	notBefore int       // its parked call is delayed until this step
	opStart   time.Time // when its current operation started
	call      string    // the call it is parked at
	opName    string

	// The process's own; the scheduler reads them between steps.
	killed   bool
	giveUp   bool // it learnt it must stop (ErrReplaced, ErrMismatch)
	m        *catalog.Member
	fenced   bool
	values   map[int]uint64
	objects  []string             // the data objects its state refers to
	uploaded map[string]time.Time // objects it uploaded that no part of its own named yet
	last     int64                // the latest checkpoint it tried
	retry    *intent              // a failed commit to try again
	nobj     int
	joinErr  error // of its latest Join or Rejoin
	lastList int64 // the truth's seq at its latest listing
	listTick int   // and the step
	calls    int
}

type procCmd struct {
	op   func()
	kill bool
	quit bool
}

type procEvent struct {
	p     *proc
	call  string // parked at this call
	done  bool   // the operation ended
	panic string
}

// procBackend is a process's view of the faulty backend: every call is a
// scheduling point.
type procBackend struct{ p *proc }

var _ backends.Backend = (*procBackend)(nil)

// Unwrap returns the simulated store, which needs no check of create-only
// puts (see backend.VerifyCreateOnly).
func (b *procBackend) Unwrap() backends.Backend { return b.p.s.be }

func (b *procBackend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	if err := b.p.yield("put " + name); err != nil {
		return opErr("put", name, err)
	}
	if f := b.p.s.opt.catalogTamper; f != nil {
		data := make([]byte, size)
		if _, err := body.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
			return opErr("put", name, err)
		}
		data = f(b.p.s, name, data)
		return b.p.s.be.Put(ctx, name, bytesReaderAt(data), int64(len(data)))
	}
	return b.p.s.be.Put(ctx, name, body, size)
}

func (b *procBackend) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if err := b.p.yield("get " + name); err != nil {
		return nil, opErr("get", name, err)
	}
	return b.p.s.be.Get(ctx, name, offset, length)
}

func (b *procBackend) Delete(ctx context.Context, name string) error {
	if err := b.p.yield("delete " + name); err != nil {
		return opErr("delete", name, err)
	}
	return b.p.s.be.Delete(ctx, name)
}

func (b *procBackend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	if err := b.p.yield("list " + prefix); err != nil {
		return opErr("list", prefix, err)
	}
	b.p.lastList, b.p.listTick = b.p.s.t.seq, b.p.s.tick
	return b.p.s.be.List(ctx, prefix, fn)
}

func (b *procBackend) Close() error { return nil }

// yield parks the process at a call until the scheduler lets it go on.
func (p *proc) yield(call string) error {
	if p.killed {
		return errKilled
	}
	p.s.events <- procEvent{p: p, call: call}
	cmd := <-p.resume
	if cmd.kill {
		p.killed = true
		p.cancel()
		return errKilled
	}
	p.calls++
	return nil
}

// loop runs the process's operations, one per command.
func (p *proc) loop() {
	defer p.s.wg.Done()
	for cmd := range p.resume {
		if cmd.quit {
			return
		}
		p.calls = 0
		ev := procEvent{p: p, done: true}
		func() {
			defer func() {
				if r := recover(); r != nil {
					ev.panic = fmt.Sprint(r)
				}
			}()
			cmd.op()
		}()
		p.s.events <- ev
	}
}

// RunCatalog runs the catalog simulation's schedule of seed and returns
// what it did; the error lists the invariants it broke.
func RunCatalog(seed uint64, opt Options) (CatalogStats, error) {
	if opt.Watchdog <= 0 {
		opt.Watchdog = 60 * time.Second
	}
	s := &catSchedule{seed: seed, opt: opt, digest: fnv.New64a()}
	begin := time.Now()
	if dump := watchdog(opt.Watchdog, s.run); dump != "" {
		return CatalogStats{}, fmt.Errorf("seed %d: invariant 4 (no hang): schedule still running after %v\ngoroutines:\n%s", seed, opt.Watchdog, dump)
	}
	s.stats.Duration = time.Since(begin)
	s.stats.SimTime = s.now.Sub(catEpoch)
	s.stats.Digest = s.digest.Sum64()
	if opt.Logf != nil {
		if opt.Trace {
			opt.Logf("seed %d: events:\n%s", seed, strings.Join(s.trace, "\n"))
		}
		opt.Logf("seed %d: %s", seed, s.stats)
	}
	if len(s.errs) > 0 {
		s.stats.Trace = strings.Join(s.trace, "\n")
		return s.stats, fmt.Errorf("seed %d: %s\n%s\n  last events (every one with -sim.trace):\n%s", seed, strings.Join(s.errs, "\n"), s.stats, s.stats.Trace)
	}
	return s.stats, nil
}

func (s *catSchedule) failf(format string, args ...any) {
	msg := fmt.Sprintf("step %d: %s", s.tick, fmt.Sprintf(format, args...))
	s.logf("FAIL %s", msg)
	if len(s.errs) < 10 {
		s.errs = append(s.errs, msg)
	}
}

// logf records an event in the trace (the last 300 are kept for a
// failure's report) and in the digest.
func (s *catSchedule) logf(format string, args ...any) {
	line := fmt.Sprintf("%4d %s: %s", s.tick, s.now.Sub(catEpoch).Round(time.Second), fmt.Sprintf(format, args...))
	s.digest.Write([]byte(line))
	s.digest.Write([]byte{'\n'})
	s.trace = append(s.trace, line)
	if len(s.trace) > 300 && !s.opt.Trace {
		s.trace = s.trace[len(s.trace)-300:]
	}
}

func (s *catSchedule) clock() time.Time { return s.now }

func (s *catSchedule) setup() {
	r := s.r
	s.p = 1 + r.IntN(5)
	s.mode = pick(r, catalog.Aligned, catalog.Independent)
	s.retain = 1 + r.IntN(3)
	s.maxPar = pick(r, 5, 8, 12, 30)
	s.steps = 150 + r.IntN(450)
	s.stallMax = pick(r, 10, 40, 200)
	s.storm = pick(r, 0.1, 0.3, 1)
	var prof faultProfile
	if r.IntN(4) != 0 {
		level := pick(r, 0.02, 0.08, 0.2)
		for _, k := range []faultKind{putErrBefore, putLostAnswer, deleteFail, getErr, listErr} {
			if r.IntN(3) != 0 {
				prof.p[k] = level * r.Float64()
			}
		}
		prof.maxStall = 1
		s.delayP = pick(r, 0, 0.05, 0.2)
	}
	s.prof = prof
	s.stats.FaultFree = prof.faultFree() && s.delayP == 0
	s.stats.Faults = fmt.Sprintf("%s delays=%.2f", prof, s.delayP)
	s.stats.Setup = fmt.Sprintf("instances=%d mode=%s retain=%d key-groups=%d steps=%d storm=%.1f longest-stall=%d", s.p, s.mode, s.retain, s.maxPar, s.steps, s.storm, s.stallMax)
}

func (s *catSchedule) run() {
	s.r = rand.New(rand.NewPCG(s.seed, 0xca7a10))
	s.now = catEpoch
	s.setup()
	s.t = newTruth(s)
	s.be = newBackend(s.seed, s.prof)
	s.be.nameKeys = true
	s.be.st.now = s.clock
	s.be.st.onChange = s.t.change
	s.cl = s.be.clean()
	s.events = make(chan procEvent)
	s.holders = map[slotKey]*proc{}
	s.intents = map[string]*intent{}
	s.trigger = 1
	s.logf("setup: %s; faults: %s", s.stats.Setup, s.stats.Faults)
	defer s.shutdown()

	for i := range s.p {
		s.newProc(i, s.p)
	}
	for s.tick = 0; s.tick < s.steps; s.tick++ {
		s.step()
		if len(s.errs) > 0 {
			return
		}
	}
	s.drain()
	if len(s.errs) > 0 {
		return
	}
	s.be.stopFaults()
	s.stats.Injected = s.be.st.counts
	s.checkNeeded("at the end")
	s.final()
}

// shutdown ends every process's goroutine.
func (s *catSchedule) shutdown() {
	for _, p := range s.procs {
		s.stop(p)
	}
	s.wg.Wait()
}

func (s *catSchedule) newProc(index, instances int) *proc {
	p := &proc{s: s, id: len(s.procs), resume: make(chan procCmd)}
	p.cfg = catalog.Config{JobID: catJobID, Instances: instances, Index: index, MaxParallelism: s.maxPar, Mode: s.mode,
		Retain: s.retain, Grace: catGrace, Owner: fmt.Sprintf("process-%d", p.id), Now: s.clock}
	p.b = &procBackend{p: p}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	s.procs = append(s.procs, p)
	s.stats.Procs++
	s.wg.Add(1)
	go p.loop()
	s.logf("p%d: new process, instance %d of %d", p.id, index, instances)
	return p
}

// grant lets p run until its next call or the end of its operation.
func (s *catSchedule) grant(p *proc, cmd procCmd) {
	s.running = p
	p.resume <- cmd
	ev := <-s.events
	s.running = nil
	if ev.p != p {
		panic("sim: an event of a process that was not running")
	}
	if ev.panic != "" {
		s.failf("p%d: %s panicked: %s", p.id, p.opName, ev.panic)
	}
	if ev.done {
		p.phase = phaseIdle
		if p.killed || p.giveUp {
			s.stop(p)
		}
	} else {
		p.phase = phaseParked
		p.call = ev.call
		if s.delayP > 0 && s.r.Float64() < s.delayP {
			p.notBefore = s.tick + 1 + s.r.IntN(8)
			s.stats.Delays++
		}
		if p.calls > catMaxCalls {
			s.failf("invariant 4 (no hang): p%d: %s made more than %d calls", p.id, p.opName, catMaxCalls)
		}
	}
	for _, l := range s.t.fresh {
		s.checkRecord(l)
	}
	s.t.fresh = nil
	for _, b := range s.t.bad {
		s.failf("a catalog record does not decode: %s", b)
	}
	s.t.bad = nil
}

// stop kills p, if it is in an operation, and ends its goroutine.
func (s *catSchedule) stop(p *proc) {
	if p.phase == phaseParked {
		s.grant(p, procCmd{kill: true}) // its operation ends: grant stops it
	}
	if p.phase == phaseStopped {
		return
	}
	p.phase = phaseStopped
	p.resume <- procCmd{quit: true}
}

func (s *catSchedule) live() []*proc {
	var out []*proc
	for _, p := range s.procs {
		if p.phase != phaseStopped {
			out = append(out, p)
		}
	}
	return out
}

// deadline is when p's operation must be over.
func (p *proc) deadline() time.Time { return p.opStart.Add(catOpSpan - catTick) }

// advance moves the clock by up to d, never past an operation's deadline.
func (s *catSchedule) advance(d time.Duration) {
	for _, p := range s.procs {
		if p.phase == phaseParked {
			d = min(d, max(0, p.deadline().Sub(s.now)))
		}
	}
	s.now = s.now.Add(d)
}

type action struct {
	w  float64
	fn func()
}

// step is one scheduling step: the clock moves, then one process goes on,
// starts an operation, or an event happens.
func (s *catSchedule) step() {
	s.advance(time.Duration(s.r.Int64N(int64(catTick) + 1)))
	// An operation near its deadline goes on before anything else.
	for _, p := range s.procs {
		if p.phase == phaseParked && !s.now.Add(2*catTick).Before(p.deadline()) {
			s.grant(p, procCmd{})
			return
		}
	}
	var acts []action
	for _, p := range s.procs {
		switch {
		case p.phase == phaseParked && s.tick >= p.stallTill && s.tick >= p.notBefore:
			acts = append(acts, action{12, func() { s.grant(p, procCmd{}) }})
		case p.phase == phaseIdle && s.tick >= p.stallTill:
			acts = append(acts, action{4, func() { s.startOp(p) }})
		}
	}
	if s.mode == catalog.Aligned {
		acts = append(acts, action{3, func() { s.trigger++; s.logf("trigger checkpoint %d", s.trigger) }})
	}
	acts = append(acts,
		action{0.4 * s.storm, s.killOne},
		action{0.6 * s.storm, s.stallOne},
		action{0.4, s.jump},
		action{1, func() {}}, // time passes
	)
	if len(s.procs) < catMaxProcs {
		acts = append(acts, action{0.8 * s.storm, s.restart}, action{0.2 * s.storm, s.rescale})
	}
	var total float64
	for _, a := range acts {
		total += a.w
	}
	x := s.r.Float64() * total
	for _, a := range acts {
		if x < a.w {
			a.fn()
			return
		}
		x -= a.w
	}
}

// startOp starts p's next operation.
func (s *catSchedule) startOp(p *proc) {
	var op func()
	switch {
	case p.m == nil:
		p.opName, op = "join", p.opJoin
	case p.fenced:
		p.opName, op = "rejoin", p.opRejoin
	default:
		x := s.r.IntN(100)
		planP := 10
		if p.m.Index() == 0 {
			planP = 30
		}
		switch {
		case x < planP:
			p.opName, op = "plan", p.opPlan
		case x < planP+15:
			p.opName, op = "refresh", p.opRefresh
		default:
			p.opName, op = "commit", p.opCommit
		}
	}
	p.opStart = s.now
	s.grant(p, procCmd{op: op})
}

func (s *catSchedule) killOne() {
	l := s.live()
	if len(l) == 0 {
		return
	}
	p := l[s.r.IntN(len(l))]
	s.logf("p%d: killed (%s)", p.id, p.where())
	s.stats.Kills++
	s.stop(p)
}

func (p *proc) where() string {
	if p.phase == phaseParked {
		return fmt.Sprintf("in %s at %s", p.opName, p.call)
	}
	return "between operations"
}

func (s *catSchedule) stallOne() {
	l := s.live()
	if len(l) == 0 {
		return
	}
	p := l[s.r.IntN(len(l))]
	s.stallFor(p)
}

func (s *catSchedule) stallFor(p *proc) {
	p.stallTill = s.tick + 1 + s.r.IntN(s.stallMax)
	s.stats.Stalls++
	s.logf("p%d: stalls until step %d (%s)", p.id, p.stallTill, p.where())
}

func (s *catSchedule) jump() {
	before := s.now
	s.advance(catGrace/2 + time.Duration(s.r.Int64N(int64(catGrace*3/2))))
	s.stats.Jumps++
	s.logf("time passes: %v", s.now.Sub(before))
}

// replaced decides what becomes of a process another replaces: killed,
// stalled (a zombie), or left running.
func (s *catSchedule) replaced(p *proc) {
	switch x := s.r.IntN(10); {
	case x < 5:
		s.logf("p%d: killed, replaced (%s)", p.id, p.where())
		s.stats.Kills++
		s.stop(p)
	case x < 8:
		s.stallFor(p)
	}
}

// restart starts a new process for a slot of the latest rescale.
func (s *catSchedule) restart() {
	i := s.r.IntN(s.p)
	for _, p := range s.live() {
		if p.cfg.Instances == s.p && p.cfg.Index == i {
			s.replaced(p)
		}
	}
	np := s.newProc(i, s.p)
	s.stats.Restarts++
	if s.mode == catalog.Aligned && s.r.IntN(10) == 0 {
		v := s.t.viewAt(s.t.seq)
		if g := v.gens[v.latest()]; g != nil {
			if c := v.complete(g); len(c) > 0 {
				c = c[max(0, len(c)-s.retain):]
				np.cfg.RestoreFrom = c[s.r.IntN(len(c))]
				s.logf("p%d: restores from checkpoint %d if it starts a generation", np.id, np.cfg.RestoreFrom)
			}
		}
	}
}

// rescale replaces every process by a new instance set.
func (s *catSchedule) rescale() {
	np := 1 + s.r.IntN(5)
	if np == s.p {
		np = np%5 + 1
	}
	s.logf("rescale from %d to %d instances", s.p, np)
	for _, p := range s.live() {
		s.replaced(p)
	}
	s.p = np
	for i := range np {
		s.newProc(i, np)
	}
	s.stats.Rescales++
}

// drain wakes every process and lets every operation finish.
func (s *catSchedule) drain() {
	for _, p := range s.procs {
		p.stallTill, p.notBefore = 0, 0
	}
	for range 100000 {
		var parked []*proc
		for _, p := range s.procs {
			if p.phase == phaseParked {
				parked = append(parked, p)
			}
		}
		if len(parked) == 0 {
			return
		}
		s.advance(time.Duration(s.r.Int64N(int64(catTick) + 1)))
		s.grant(parked[s.r.IntN(len(parked))], procCmd{})
	}
	s.failf("invariant 4 (no hang): operations still running after 100000 steps of the drain")
}

// runOp runs one operation of p to its end.
func (s *catSchedule) runOp(p *proc, name string, op func()) {
	p.opName, p.opStart = name, s.now
	s.grant(p, procCmd{op: op})
	for p.phase == phaseParked {
		s.grant(p, procCmd{})
	}
}

// final replaces every process by fresh ones with faults off: each must
// join and restore; then each commits a checkpoint and, past the grace,
// the leader collects: what is left must be what its plan keeps.
func (s *catSchedule) final() {
	s.tick = s.steps + 1
	for _, p := range s.live() {
		s.stop(p)
	}
	s.logf("final: %d fresh processes join, with faults off", s.p)
	var fresh []*proc
	for i := range s.p {
		fresh = append(fresh, s.newProc(i, s.p))
	}
	for _, p := range fresh {
		s.runOp(p, "join", p.opJoin)
		if p.m == nil {
			s.failf("invariant 3 (no deletion of a referenced object): final: p%d could not join, with faults off: %v", p.id, p.joinErr)
			return
		}
	}
	for _, p := range fresh {
		if p.fenced {
			s.runOp(p, "rejoin", p.opRejoin)
		}
	}
	s.trigger++
	for _, p := range fresh {
		if p.m != nil && !p.fenced {
			s.runOp(p, "commit", p.opCommit)
		}
	}
	s.now = s.now.Add(2 * catGrace)
	leader := fresh[0]
	if leader.m == nil || leader.fenced {
		return
	}
	var pl *catalog.Plan
	s.runOp(leader, "plan", func() { pl = leader.plan() })
	if pl == nil || len(s.errs) > 0 {
		return
	}
	kept := map[string]bool{}
	for _, name := range pl.Parts {
		kept[name] = true
	}
	for _, name := range s.cl.st.names() {
		ref := objname.ParseCatalog(catPrefix, name)
		switch {
		case ref.Kind == objname.CatalogPart:
			s.stats.FinalParts++
			if !kept[name] {
				s.failf("final: part %s left after the collection, not kept by the plan", name)
			}
		case strings.HasPrefix(name, catDataDir):
			s.stats.FinalObjects++
			if !pl.Keep[name] {
				s.failf("final: data object %s left after the collection, not kept by the plan", name)
			}
		}
	}
}

// opJoin joins the job.
func (p *proc) opJoin() {
	m, err := catalog.Join(p.ctx, p.b, p.cfg)
	p.joined(m, err, "join")
}

// opRejoin rejoins after the member was fenced.
func (p *proc) opRejoin() {
	m, err := p.m.Rejoin(p.ctx)
	p.joined(m, err, "rejoin")
}

// causeOf names the cause an error wraps, "" for none the simulation
// knows.
func causeOf(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{errInjected, "injected"}, {errKilled, "killed"}, {catalog.ErrFenced, "fenced"}, {catalog.ErrReplaced, "replaced"},
		{catalog.ErrMismatch, "mismatch"}, {catalog.ErrNoCheckpoint, "no-checkpoint"}, {backends.ErrNotFound, "not-found"},
		{catalog.ErrDamaged, "damaged"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	if strings.Contains(err.Error(), "generations started while this instance joined") {
		return "join-rounds"
	}
	return ""
}

func (p *proc) joined(m *catalog.Member, err error, what string) {
	s := p.s
	if p.killed {
		return
	}
	s.stats.Joins++
	p.joinErr = err
	if err != nil {
		s.stats.JoinErrors++
		cause := causeOf(err)
		s.logf("p%d: %s: %s: %v", p.id, what, cause, err)
		switch cause {
		case "replaced", "mismatch":
			if what == "join" {
				s.failf("p%d: Join failed with %v: a Join starts a generation rather", p.id, err)
			}
			p.giveUp = true
		case "no-checkpoint":
			p.cfg.RestoreFrom = 0
		case "not-found":
			s.checkNeeded(fmt.Sprintf("after p%d's %s met a missing object", p.id, what))
		case "injected", "join-rounds":
		default:
			s.failf("p%d: %s failed with an error that names no known cause: %v", p.id, what, err)
		}
		return
	}
	s.checkMember(p, m, what)
	g := m.Generation()
	p.m, p.fenced, p.last, p.retry = m, false, 0, nil
	p.cfg.RestoreFrom = 0
	if s.mode == catalog.Aligned && g.FirstCheckpoint > s.trigger {
		s.trigger = g.FirstCheckpoint
	}
}

// opCommit commits the process's part of its next checkpoint.
func (p *proc) opCommit() {
	s := p.s
	in := p.retry
	if in != nil {
		for _, o := range in.objects {
			if t, ok := p.uploaded[o]; ok && s.now.Sub(t) > catOpSpan {
				in = nil // too old to name now: commit anew
				break
			}
		}
	}
	p.retry = nil
	if in == nil {
		g := p.m.Generation()
		n := max(p.last+1, g.FirstCheckpoint)
		if s.mode == catalog.Aligned {
			n = max(s.trigger, g.FirstCheckpoint)
		}
		if n <= p.last {
			p.opRefresh()
			return
		}
		p.last = n
		r := p.m.KeyGroups()
		for range 1 + s.r.IntN(3) {
			kg := r.Start + s.r.IntN(r.End-r.Start+1)
			p.values[kg] = p.values[kg]*0x9e3779b97f4a7c15 + uint64(n)<<16 + uint64(p.id) + 1
		}
		// Objects uploaded long ago that no part of the process named yet
		// are uploaded anew: the grace covers an upload only for a while.
		if s.r.IntN(6) == 0 {
			p.objects = nil // compacted: a new base object
		}
		var objects []string
		for _, o := range p.objects {
			if t, ok := p.uploaded[o]; ok && s.now.Sub(t) > catOpSpan {
				continue
			}
			objects = append(objects, o)
		}
		name, err := p.upload()
		if err != nil {
			p.objects = objects
			s.stats.CommitErrors++
			s.logf("p%d: upload for checkpoint %d: %v", p.id, n, err)
			return
		}
		p.objects = append(objects, name)
		in = &intent{name: objname.CatalogPartName(catPrefix, g.Number, n, p.cfg.Index), n: n,
			state: encodeValues(p.values, r), objects: slices.Clone(p.objects), proc: p.id}
	}
	if o := s.intents[in.name]; o != nil && o.proc != p.id {
		s.failf("p%d and p%d both commit part %s", o.proc, p.id, in.name)
	}
	s.intents[in.name] = in
	st, err := p.m.Commit(p.ctx, in.n, in.state, in.objects, map[string]string{"process": fmt.Sprint(p.id)})
	p.committed(in, st, err)
}

// upload puts a new data object.
func (p *proc) upload() (string, error) {
	name := fmt.Sprintf("%sp%03d-%05d", catDataDir, p.id, p.nobj)
	p.nobj++
	data := dataContent(name)
	if err := p.b.Put(p.ctx, name, bytesReaderAt(data), int64(len(data))); err != nil {
		return "", err
	}
	if p.uploaded == nil {
		p.uploaded = map[string]time.Time{}
	}
	p.uploaded[name] = p.s.now
	return name, nil
}

func (p *proc) committed(in *intent, st catalog.Status, err error) {
	s := p.s
	if p.killed {
		return
	}
	g := p.m.Generation()
	switch {
	case err == nil:
		s.stats.Commits++
		s.logf("p%d: committed %s, complete %d", p.id, in.name, st.Complete)
		s.checkStored(p, in)
		s.checkStatus(p, st.Complete, "Commit")
		for _, o := range in.objects {
			delete(p.uploaded, o)
		}
	case errors.Is(err, catalog.ErrFenced):
		s.stats.Fenced++
		s.logf("p%d: commit %s: %v", p.id, in.name, err)
		s.checkFenced(p, "Commit")
		p.fenced = true
	case errors.Is(err, catalog.ErrReplaced):
		s.stats.Replaced++
		if l := s.t.now(in.name); l != nil && l.part != nil && l.createdBy == p.id {
			// The part is the process's own, stored by an earlier attempt
			// whose answer was lost and could not be read back.
			s.stats.OwnPartReplaced++
			s.failf("p%d: Commit of %s failed with ErrReplaced (\"another process committed this instance's part\"), though the part is its own, stored at step %d by an attempt that failed: %v",
				p.id, in.name, l.createdTick, err)
		} else {
			s.logf("p%d: commit %s: %v", p.id, in.name, err)
			if h := s.holders[slotKey{g.Number, p.cfg.Index}]; h != p {
				s.failf("p%d: commit %s: ErrReplaced, though no other process holds the slot: %v", p.id, in.name, err)
			}
		}
		p.giveUp = true
	default:
		s.stats.CommitErrors++
		cause := causeOf(err)
		s.logf("p%d: commit %s: %s: %v", p.id, in.name, cause, err)
		if cause != "injected" && cause != "not-found" {
			s.failf("p%d: commit %s failed with an error that names no known cause: %v", p.id, in.name, err)
		}
		if s.r.IntN(2) == 0 {
			p.retry = in
		}
	}
}

// opRefresh learns the member's status.
func (p *proc) opRefresh() {
	s := p.s
	st, err := p.m.Refresh(p.ctx)
	if p.killed {
		return
	}
	s.stats.Refreshes++
	switch {
	case err == nil:
		s.logf("p%d: refresh: complete %d", p.id, st.Complete)
		s.checkStatus(p, st.Complete, "Refresh")
	case errors.Is(err, catalog.ErrFenced):
		s.logf("p%d: refresh: %v", p.id, err)
		s.checkFenced(p, "Refresh")
		p.fenced = true
	default:
		s.logf("p%d: refresh: %v", p.id, err)
		if causeOf(err) != "injected" {
			s.failf("p%d: Refresh failed with an error that names no known cause: %v", p.id, err)
		}
	}
}

// opPlan plans, drops the catalog objects of the plan and collects the
// data objects it does not keep.
func (p *proc) opPlan() { p.plan() }

func (p *proc) plan() *catalog.Plan {
	s := p.s
	pl, err := p.m.Plan(p.ctx)
	if p.killed {
		return nil
	}
	s.stats.Plans++
	switch {
	case errors.Is(err, catalog.ErrFenced):
		s.stats.PlansFenced++
		s.logf("p%d: plan: %v", p.id, err)
		s.checkFenced(p, "Plan")
		p.fenced = true
		return nil
	case err != nil:
		s.logf("p%d: plan: %v", p.id, err)
		switch causeOf(err) {
		case "injected":
		case "not-found":
			s.checkNeeded(fmt.Sprintf("after p%d's Plan met a missing part", p.id))
		default:
			s.failf("p%d: Plan failed with an error that names no known cause: %v", p.id, err)
		}
		return nil
	}
	planned := s.now
	s.checkPlan(p, pl)
	n, err := p.m.DropCatalog(p.ctx, pl)
	s.stats.Dropped += n
	s.logf("p%d: plan of generation %d: retained %v, keeps parts %v (%d objects), drops %v: dropped %d (%v)",
		p.id, pl.Generation, pl.Retained, shortNames(pl.Parts), len(pl.Keep), shortNames(pl.Drop), n, err)
	if p.killed {
		return pl
	}
	// The collector: data objects the plan does not keep, older than the
	// grace when the plan was made.
	var drop []string
	err = p.b.List(p.ctx, catDataDir, func(oi backends.ObjectInfo) error {
		if (!pl.Keep[oi.Name] || s.opt.catalogCollectAll) && oi.ModTime.Before(planned.Add(-catGrace)) {
			drop = append(drop, oi.Name)
		}
		return nil
	})
	if err != nil {
		s.logf("p%d: collect: %v", p.id, err)
		return pl
	}
	collected := 0
	for _, name := range drop {
		if err := p.b.Delete(p.ctx, name); err == nil {
			collected++
		}
	}
	s.stats.Collected += collected
	s.logf("p%d: collected %d of %d data objects", p.id, collected, len(drop))
	if !p.killed {
		s.checkNeeded(fmt.Sprintf("after p%d's drop and collection", p.id))
	}
	return pl
}

func bytesReaderAt(b []byte) io.ReaderAt { return bytes.NewReader(b) }

// shortNames abbreviates catalog names for the trace: gG/part-N-I,
// gG/generation, gG/claim-I.
func shortNames(names []string) string {
	var out []string
	for _, name := range names {
		switch ref := objname.ParseCatalog(catPrefix, name); ref.Kind {
		case objname.CatalogPart:
			out = append(out, fmt.Sprintf("g%d/part-%d-%d", ref.Generation, ref.Checkpoint, ref.Instance))
		case objname.CatalogGeneration:
			out = append(out, fmt.Sprintf("g%d/generation", ref.Generation))
		case objname.CatalogClaim:
			out = append(out, fmt.Sprintf("g%d/claim-%d", ref.Generation, ref.Instance))
		default:
			out = append(out, name)
		}
	}
	return "[" + strings.Join(out, " ") + "]"
}

// restoreValues sets the process's state from the parts it restores.
func (p *proc) restoreValues(parts []*catalog.Part, r dstl.KeyGroupRange) {
	p.values = map[int]uint64{}
	p.objects = nil
	p.uploaded = nil
	for _, part := range parts {
		vals, _ := decodeValues(part.State)
		for kg, v := range vals {
			if r.Contains(kg) && part.KeyGroups.Contains(kg) {
				p.values[kg] = v
			}
		}
		for _, o := range part.Objects {
			if !slices.Contains(p.objects, o) {
				p.objects = append(p.objects, o)
			}
		}
	}
	slices.Sort(p.objects)
}
