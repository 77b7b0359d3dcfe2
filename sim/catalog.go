package sim

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl/objname"
)

// The job of the catalog simulation, and the time rules of its processes.
const (
	catJobID  = "job"
	catPrefix = "job/"
	catGrace  = 10 * time.Minute
	// catOpSpan bounds, in simulated time, one operation of a process of
	// the first layout (its calls, their delays and any stall in between),
	// and the age of an object such a process uploaded when a part of it
	// names the object first: the first layout's grace rests on this. The
	// second layout's processes have no bound: they stall anywhere, for
	// any time.
	catOpSpan = catGrace / 4
	// catTick bounds the simulated time one scheduling step takes.
	catTick = catGrace / 100
	// catMaxProcs bounds the processes of a schedule (restarts, rescales
	// and the upgrade stop there).
	catMaxProcs = 80
	// catMaxCalls bounds the backend calls of one operation.
	catMaxCalls = 5000
	// catMaxInstances bounds the instances of a configuration.
	catMaxInstances = 8
)

var catEpoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// errKilled fails every call of a killed process.
var errKilled = errors.New("sim: the process was killed")

// CatalogStats says what one schedule of the catalog simulation did.
type CatalogStats struct {
	Setup     string // instances, processes, mode, retain, key groups, steps
	Faults    string
	FaultFree bool
	Upgrade   bool // the schedule started from a catalog of the first layout
	Damaged   int  // catalog objects the schedule damaged or removed on purpose
	Duration  time.Duration
	SimTime   time.Duration // simulated time

	Procs, OldProcs, Kills, Restarts, Rescales, Stalls, Delays, Jumps, Skews int
	Joins, JoinErrors, Generations, Restores, RestoredParts                  int
	Commits, CommitErrors, Fenced, Replaced, Refreshes, Uploads              int
	// Confirmed counts the statuses that let a member confirm a new
	// checkpoint; Completed the checkpoints that completed.
	Confirmed, Completed int
	// StalledCommits counts the commits that succeeded although their
	// process made (uploaded) them longer than the grace before; HeldFrom
	// the commits that held objects of a materialisation (HoldFrom).
	StalledCommits, HeldFrom int
	// RestoredFrom counts the generations started with RestoreFrom.
	RestoredFrom int
	// LateRestored counts the commits a new generation restored that were
	// stored after their generation's fence, before the starter listed.
	LateRestored int
	// OldCommits, OldFenced and OldJoinsRefused count the first layout's
	// processes' commits, those that failed with ErrFenced, and their
	// joins that failed after the upgrade's fence.
	OldCommits, OldFenced, OldJoinsRefused int
	Collects, CollectsFenced, Sweeps       int
	DroppedCatalog, DeletedData            int
	FinalObjects, FinalCommits             int // left after the final collection
	Injected                               [numFaultKinds]int
	// Defects counts the known defects of package catalog met (see
	// catDefect).
	Defects [numDefects]int
	Digest  uint64 // of the trace: equal runs of a seed have equal digests
	Trace   string // the last events (on failure)
}

func (st CatalogStats) String() string {
	return fmt.Sprintf("%s sim-time=%v %s\n  faults: %s", st.Setup, st.SimTime.Round(time.Second), st.counts(), st.Faults)
}

// counts formats the counts of the schedule.
func (st CatalogStats) counts() string {
	return fmt.Sprintf("procs=%d (old layout %d) kills=%d restarts=%d rescales=%d stalls=%d delays=%d jumps=%d skews=%d "+
		"joins=%d (failed %d) generations=%d restores=%d (parts %d) uploads=%d commits=%d (failed %d, fenced %d, replaced %d) refreshes=%d "+
		"confirmed=%d completed=%d stalled-commits=%d held-from=%d restored-from=%d late-restored=%d old: commits=%d fenced=%d joins-refused=%d "+
		"collects=%d (fenced %d, sweeps %d) dropped=%d deleted=%d final: commits=%d objects=%d damaged=%d injected=%s defects=%s",
		st.Procs, st.OldProcs, st.Kills, st.Restarts, st.Rescales, st.Stalls, st.Delays, st.Jumps, st.Skews,
		st.Joins, st.JoinErrors, st.Generations, st.Restores, st.RestoredParts, st.Uploads, st.Commits, st.CommitErrors, st.Fenced, st.Replaced, st.Refreshes,
		st.Confirmed, st.Completed, st.StalledCommits, st.HeldFrom, st.RestoredFrom, st.LateRestored, st.OldCommits, st.OldFenced, st.OldJoinsRefused,
		st.Collects, st.CollectsFenced, st.Sweeps, st.DroppedCatalog, st.DeletedData, st.FinalCommits, st.FinalObjects, st.Damaged, injectedString(st.Injected), defectsString(st.Defects))
}

// catDefect is a defect of package catalog that the simulation meets and
// that a failing test of that package shows. A schedule that meets one
// counts it rather than failing, and ends there when what follows from it
// would break other invariants (a checked invariant it broke before that
// fails all the same); with catStrict, it fails.
type catDefect uint8

const (
	// defectFenceCollected: the deletion rule deletes a fenced
	// generation's fence (with its record, claims and commits) once it is
	// older than the grace; a member of that generation that stalled
	// longer then finds no fence, joins it, commits and confirms as if it
	// were live (TestStalledMemberAfterItsFenceIsCollected in package catalog).
	defectFenceCollected catDefect = iota
	// defectIndependentFallback: in the independent mode, a new
	// generation restores a process's key groups from what the generation
	// before restored when another process whose instances those parts
	// also cover committed nothing, although the process confirmed a
	// later commit of its own (TestIndependentRestoreNoRollback in
	// package catalog).
	defectIndependentFallback
	// defectUnfencedDrop: the leader's Collect deletes the commits of the
	// checkpoints it no longer retains by what its latest listing
	// decided, without a read of the fence after that listing; when a
	// newer generation's starter listed before it, the commits deleted
	// may be the ones the newer generation restores
	// (TestLeaderDropsNothingANewGenerationRestores in package catalog).
	defectUnfencedDrop
	numDefects
)

var defectNames = [numDefects]string{"fence-collected", "independent-fallback", "unfenced-drop"}

// catStrict makes a schedule that meets a known defect fail (the test's
// -sim.strict).
var catStrict bool

// defect records that the schedule met a known defect: it ends the
// schedule (but for the independent mode's fallback, a rollback that
// changes nothing else), or fails it with catStrict.
func (s *catSchedule) defect(d catDefect, format string, args ...any) {
	if catStrict {
		s.failf(format, args...)
		return
	}
	if s.halted {
		return
	}
	s.stats.Defects[d]++
	if d == defectIndependentFallback {
		s.logf("DEFECT %s: %s", defectNames[d], fmt.Sprintf(format, args...))
		return
	}
	s.halted = true
	s.logf("DEFECT %s: %s (the schedule ends here)", defectNames[d], fmt.Sprintf(format, args...))
}

func defectsString(counts [numDefects]int) string {
	var out []string
	for d, n := range counts {
		if n > 0 {
			out = append(out, fmt.Sprintf("%s:%d", defectNames[d], n))
		}
	}
	return "[" + strings.Join(out, " ") + "]"
}

// over reports whether the schedule failed, or ended at a known defect.
func (s *catSchedule) over() bool { return len(s.errs) > 0 || s.halted }

// catHooks break the protocol or the simulation on purpose, for the
// tests of the checks (TestCatalogChecks).
type catHooks struct {
	// tamper replaces what a process puts.
	tamper func(s *catSchedule, name string, data []byte) []byte
	// hideFence makes every read of a fence of the second layout find
	// none, so that no member learns it is fenced.
	hideFence bool
	// hideOldFence hides the upgrade's fence record from the listings of
	// the first layout's processes.
	hideOldFence bool
	// noHold makes the leader delete, after each collection, the data
	// objects that the collection kept only because they were made for a
	// checkpoint that may still complete (collect's HoldFrom).
	noHold bool
	// collectKept makes the leader delete, after each collection, old
	// data objects that the plan keeps.
	collectKept bool
	// forge makes every schedule damage commits the deletion rule keeps
	// so that they still decode: another state, with a valid checksum.
	forge bool
}

// catConfig is one configuration of the job's processes.
type catConfig struct {
	mode      catalog.Mode
	instances int
	processes int
}

func (c catConfig) String() string {
	return fmt.Sprintf("%d instances in %d processes, %s", c.instances, c.processes, c.mode)
}

// catSchedule is one schedule of the catalog simulation. Its processes
// are goroutines, but one runs at a time: each backend call parks the
// caller, and the scheduler (the schedule's own goroutine) picks, from the
// seed alone, which process goes on, which starts an operation, and which
// event comes next. A schedule is therefore the same at every run.
type catSchedule struct {
	seed  uint64
	opt   Options
	hooks catHooks
	r     *rand.Rand

	cur      catConfig // the latest configuration of the second layout
	old      catConfig // the first layout's, in an upgrade
	retain   int
	maxPar   int
	steps    int
	sweep    time.Duration // Config.SweepInterval (0: the default)
	prof     faultProfile
	delayP   float64
	stallMax int     // longest stall, in steps
	storm    float64 // how often processes are killed, restarted, stalled and rescaled
	// The upgrade: processes of the first layout run from the start; at
	// step upgradeAt, processes of the second layout start replacing
	// them, one at a time (rolling), in the order of rolling.
	upgrade   bool
	upgradeAt int
	rolling   []int
	rolled    bool
	// damages is how many catalog objects the schedule may still damage.
	damages int
	// faultsOff: the backend injects no more faults (the final phase).
	faultsOff bool
	// halted: the schedule met a known defect (see catDefect) and ends.
	halted bool

	be   *backend
	cl   *backend // clean view, for the checks and the damage
	now  time.Time
	tick int

	procs   []*proc
	events  chan procEvent
	wg      sync.WaitGroup
	running *proc
	trigger int64 // the latest checkpoint triggered (aligned mode)

	t        *truth
	holders  map[slotKey]*proc  // the process that joined each slot of each generation
	intents  map[string]*intent // what the committer of each commit or first-layout part meant to store
	resetGen int64              // the latest generation started with RestoreFrom (a rollback asked for)
	fromOld  int64              // the first layout's generation the upgrade restored from

	stats  CatalogStats
	errs   []string
	trace  []string
	digest hash.Hash64
}

type slotKey struct {
	gen  int64
	slot int
}

// RunCatalog runs the catalog simulation's schedule of seed and returns
// what it did; the error lists the invariants it broke.
func RunCatalog(seed uint64, opt Options) (CatalogStats, error) {
	return runCatalog(seed, opt, catHooks{})
}

func runCatalog(seed uint64, opt Options, hooks catHooks) (CatalogStats, error) {
	if opt.Watchdog <= 0 {
		opt.Watchdog = 60 * time.Second
	}
	s := &catSchedule{seed: seed, opt: opt, hooks: hooks, digest: fnv.New64a()}
	begin := time.Now()
	if dump := watchdog(opt.Watchdog, s.run); dump != "" {
		return CatalogStats{}, fmt.Errorf("seed %d: no hang: schedule still running after %v\ngoroutines:\n%s", seed, opt.Watchdog, dump)
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
	if s.halted {
		s.logf("after the defect: %s", msg)
		return
	}
	s.logf("FAIL %s", msg)
	if len(s.errs) < 10 {
		s.errs = append(s.errs, msg)
	}
}

// probeNames matches the names of collections' clock probes, which are
// random: the trace shows them as one name, so that a seed's trace is the
// same at every run.
var probeNames = regexp.MustCompile(regexp.QuoteMeta(objname.ClockProbePrefix) + `[0-9a-fA-F-]{36}`)

// logf records an event in the trace (the last 400 are kept for a
// failure's report) and in the digest.
func (s *catSchedule) logf(format string, args ...any) {
	line := fmt.Sprintf("%4d %s: %s", s.tick, s.now.Sub(catEpoch).Round(time.Second), fmt.Sprintf(format, args...))
	line = probeNames.ReplaceAllString(line, objname.ClockProbePrefix+"UUID")
	s.digest.Write([]byte(line))
	s.digest.Write([]byte{'\n'})
	s.trace = append(s.trace, line)
	if len(s.trace) > 400 && !s.opt.Trace {
		s.trace = s.trace[len(s.trace)-400:]
	}
}

func (s *catSchedule) clock() time.Time { return s.now }

// randConfig draws a configuration of the second layout.
func (s *catSchedule) randConfig(mode catalog.Mode) catConfig {
	p := 1 + s.r.IntN(catMaxInstances)
	q := p
	if s.r.IntN(2) == 0 {
		q = 1 + s.r.IntN(p)
	}
	return catConfig{mode: mode, instances: p, processes: q}
}

func (s *catSchedule) setup() {
	r := s.r
	s.maxPar = pick(r, 8, 12, 30)
	mode := pick(r, catalog.Aligned, catalog.Independent)
	s.cur = s.randConfig(mode)
	s.retain = 1 + r.IntN(3)
	s.steps = 150 + r.IntN(450)
	s.stallMax = pick(r, 10, 40, 200)
	s.storm = pick(r, 0.1, 0.3, 1)
	s.sweep = pick(r, 0, time.Minute, catGrace/2)
	if r.IntN(4) == 0 {
		s.upgrade = true
		s.old = catConfig{mode: mode, instances: 1 + r.IntN(5)}
		s.old.processes = s.old.instances
		s.upgradeAt = s.steps/8 + r.IntN(s.steps/3)
		if r.IntN(3) != 0 {
			s.cur = catConfig{mode: mode, instances: s.old.instances, processes: s.old.instances}
		}
	}
	if r.IntN(10) == 0 {
		s.damages = 1 + r.IntN(2)
	}
	if s.hooks.forge {
		s.damages = 3
	}
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
	s.stats.Upgrade = s.upgrade
	s.stats.Faults = fmt.Sprintf("%s delays=%.2f", prof, s.delayP)
	up := "none"
	if s.upgrade {
		up = fmt.Sprintf("from %d instances of the first layout at step %d", s.old.instances, s.upgradeAt)
	}
	s.stats.Setup = fmt.Sprintf("%s retain=%d key-groups=%d steps=%d storm=%.1f longest-stall=%d sweep-interval=%v upgrade=%s damages=%d",
		s.cur, s.retain, s.maxPar, s.steps, s.storm, s.stallMax, s.sweep, up, s.damages)
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

	if s.upgrade {
		for i := range s.old.instances {
			s.newOldProc(i, s.old)
		}
	} else {
		for p := range s.cur.processes {
			s.newProc(p, s.cur)
		}
	}
	for s.tick = 0; s.tick < s.steps; s.tick++ {
		s.step()
		if s.over() {
			return
		}
	}
	s.drain()
	if s.over() {
		return
	}
	s.be.stopFaults()
	s.faultsOff = true
	s.stats.Injected = s.be.st.counts
	s.checkNeeded("at the end")
	if !s.over() {
		s.final()
	}
}

// shutdown ends every process's goroutine.
func (s *catSchedule) shutdown() {
	for _, p := range s.procs {
		s.stop(p)
	}
	s.wg.Wait()
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
			s.failf("no hang: p%d: %s made more than %d calls", p.id, p.opName, catMaxCalls)
		}
	}
	s.settle()
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

// advance moves the clock by up to d, never past the deadline of an
// operation of a first-layout process.
func (s *catSchedule) advance(d time.Duration) {
	for _, p := range s.procs {
		if p.phase == phaseParked && p.old {
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
	// An operation of the first layout near its deadline goes on before
	// anything else.
	for _, p := range s.procs {
		if p.phase == phaseParked && p.old && !s.now.Add(2*catTick).Before(p.deadline()) {
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
	acts = append(acts,
		action{1.5, func() { s.trigger++; s.logf("trigger checkpoint %d", s.trigger) }},
		action{0.4 * s.storm, s.killOne},
		action{0.6 * s.storm, s.stallOne},
		action{0.3 * s.storm, s.stallCommitter},
		action{0.4, s.jump},
		action{0.2, s.skewOne},
		action{1, func() {}}, // time passes
	)
	if s.damages > 0 {
		acts = append(acts, action{0.05, s.damage})
	}
	if s.upgrade && !s.rolled && s.tick >= s.upgradeAt {
		acts = append(acts, action{2, s.rollOne})
	}
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

func (s *catSchedule) stallOne() {
	l := s.live()
	if len(l) == 0 {
		return
	}
	s.stallFor(l[s.r.IntN(len(l))], 1+s.r.IntN(s.stallMax))
}

// stallCommitter stalls a process of the second layout that is in the
// middle of a commit (its objects uploaded, its commit not yet stored)
// for long, usually past the grace, while the others go on and collect.
func (s *catSchedule) stallCommitter() {
	var in []*proc
	for _, p := range s.live() {
		if !p.old && p.phase == phaseParked && (p.opName == "commit" || p.opName == "upload") {
			in = append(in, p)
		}
	}
	if len(in) == 0 {
		return
	}
	s.stallFor(in[s.r.IntN(len(in))], 20+s.r.IntN(2*s.stallMax+1))
}

func (s *catSchedule) stallFor(p *proc, steps int) {
	p.stallTill = s.tick + steps
	s.stats.Stalls++
	s.logf("p%d: stalls until step %d (%s)", p.id, p.stallTill, p.where())
}

func (s *catSchedule) jump() {
	before := s.now
	s.advance(catGrace/2 + time.Duration(s.r.Int64N(int64(catGrace*3/2))))
	s.stats.Jumps++
	s.logf("time passes: %v", s.now.Sub(before))
}

// skewOne moves a process's clock away from the store's, by up to a
// tenth of the grace either way.
func (s *catSchedule) skewOne() {
	l := s.live()
	if len(l) == 0 {
		return
	}
	p := l[s.r.IntN(len(l))]
	p.skew = time.Duration(s.r.Int64N(int64(catGrace/5)+1)) - catGrace/10
	s.stats.Skews++
	s.logf("p%d: its clock is off by %v", p.id, p.skew)
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
		s.stallFor(p, 1+s.r.IntN(s.stallMax))
	}
}

// restart starts a new process for a slot of the latest configuration:
// of the first layout before the upgrade (and sometimes while it rolls:
// an old release's process restarting), of the second otherwise.
func (s *catSchedule) restart() {
	if s.upgrade && (s.tick < s.upgradeAt || !s.rolled && s.r.IntN(3) == 0) {
		i := s.r.IntN(s.old.instances)
		for _, p := range s.live() {
			if p.old && p.cfg1.Instances == s.old.instances && p.cfg1.Index == i {
				s.replaced(p)
			}
		}
		s.newOldProc(i, s.old)
		s.stats.Restarts++
		return
	}
	if s.upgrade && s.tick < s.upgradeAt {
		return
	}
	slot := s.r.IntN(s.cur.processes)
	for _, p := range s.live() {
		if !p.old && p.conf == s.cur && p.cfg.Process == slot {
			s.replaced(p)
		}
	}
	np := s.newProc(slot, s.cur)
	s.stats.Restarts++
	if s.cur.mode == catalog.Aligned && s.r.IntN(8) == 0 {
		if live := s.t.live(); live != 0 {
			g := s.t.gen2(live)
			choices := []int64{}
			if c := s.t.everComplete(live); len(c) > 0 {
				choices = append(choices, c[max(0, len(c)-s.retain):]...)
			}
			if g != nil && g.RestoredCheckpoint > 0 {
				choices = append(choices, g.RestoredCheckpoint)
			}
			if s.r.IntN(4) == 0 {
				choices = append(choices, s.trigger) // usually not retained
			}
			if len(choices) > 0 {
				np.cfg.RestoreFrom = choices[s.r.IntN(len(choices))]
				s.logf("p%d: restores from checkpoint %d if it starts a generation", np.id, np.cfg.RestoreFrom)
			}
		}
	}
}

// rescale replaces every process by those of another configuration (of
// the first layout before the upgrade).
func (s *catSchedule) rescale() {
	if s.upgrade && s.tick < s.upgradeAt {
		n := 1 + s.r.IntN(5)
		if n == s.old.instances {
			n = n%5 + 1
		}
		s.logf("rescale of the first layout from %d to %d instances", s.old.instances, n)
		for _, p := range s.live() {
			s.replaced(p)
		}
		s.old = catConfig{mode: s.old.mode, instances: n, processes: n}
		for i := range n {
			s.newOldProc(i, s.old)
		}
		s.stats.Rescales++
		return
	}
	mode := s.cur.mode
	if s.r.IntN(10) == 0 {
		mode = pick(s.r, catalog.Aligned, catalog.Independent)
	}
	next := s.randConfig(mode)
	for next == s.cur {
		next = s.randConfig(mode)
	}
	s.logf("rescale from %s to %s", s.cur, next)
	for _, p := range s.live() {
		if !p.old {
			s.replaced(p)
		}
	}
	s.cur = next
	if s.upgrade && !s.rolled {
		// The rolling upgrade goes on with the new configuration.
		s.rolling = nil
		for p := range next.processes {
			s.rolling = append(s.rolling, p)
		}
		return
	}
	for p := range next.processes {
		s.newProc(p, next)
	}
	s.stats.Rescales++
}

// rollOne starts the next process of the second layout in a rolling
// upgrade, replacing one of the first layout's.
func (s *catSchedule) rollOne() {
	if s.rolling == nil {
		s.rolling = s.r.Perm(s.cur.processes)
		s.logf("rolling upgrade to %s starts", s.cur)
	}
	slot := s.rolling[0]
	s.rolling = s.rolling[1:]
	var old []*proc
	for _, p := range s.live() {
		if p.old {
			old = append(old, p)
		}
	}
	if len(old) > 0 {
		s.replaced(old[s.r.IntN(len(old))])
	}
	s.newProc(slot, s.cur)
	if len(s.rolling) == 0 {
		s.rolled = true
		s.logf("rolling upgrade: every process of the second layout started")
	}
}

// damage damages a catalog object on purpose: its bytes (a bit flipped,
// truncated, or another record's), or, for a commit or a first-layout
// part, the whole object. What follows must be errors that name it,
// never a wrong restore.
func (s *catSchedule) damage() {
	names, _ := s.t.neededNow(s.retain)
	if live := s.t.live(); live != 0 {
		names = append(names, objname.CatalogV2GenerationName(catPrefix, live))
	}
	if s.hooks.forge {
		names = slices.DeleteFunc(names, func(name string) bool { c, _ := classify(name); return c != classCommit2 })
	} else if len(names) == 0 || s.r.IntN(3) == 0 {
		names = nil
		for _, name := range s.cl.st.names() {
			switch c, _ := classify(name); c {
			case classGen2, classCommit2, classGen1, classPart1:
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return
	}
	name := names[s.r.IntN(len(names))]
	l := s.t.now(name)
	if l == nil || s.t.damaged[name] || len(l.data) == 0 {
		return
	}
	s.damages--
	s.stats.Damaged++
	s.t.damaged[name] = true
	if s.t.firstDamage == 0 {
		s.t.firstDamage = s.t.seq + 1
	}
	ctx := context.Background()
	if err := s.cl.Delete(ctx, name); err != nil {
		s.failf("damage: delete %s: %v", name, err)
		return
	}
	data := append([]byte(nil), l.data...)
	how := "removed"
	switch c := l.class; {
	case s.hooks.forge && l.commit != nil:
		forged := *l.commit
		forged.Parts = slices.Clone(forged.Parts)
		forged.Parts[0].State = append(slices.Clone(forged.Parts[0].State), " 0=1"...)
		data = encodeRecord(2, 'M', &forged)
		how = "forged, with another state"
	case (c == classCommit2 || c == classPart1) && s.r.IntN(3) == 0:
	case s.r.IntN(3) == 0:
		data = data[:s.r.IntN(len(data))]
		how = "truncated"
	case s.r.IntN(2) == 0:
		i := s.r.IntN(len(data))
		data[i] ^= 1 << s.r.IntN(8)
		how = fmt.Sprintf("a bit flipped at byte %d", i)
	default:
		data = encodeRecord(2, 'F', fenceRec{Next: 1, Owner: "damage"})
		how = "replaced by a fence's record"
	}
	if how != "removed" {
		if err := s.cl.Put(ctx, name, bytesReaderAt(data), int64(len(data))); err != nil {
			s.failf("damage: put %s: %v", name, err)
			return
		}
	}
	s.logf("damage: %s: %s", shortName(name), how)
	s.settle()
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
	s.failf("no hang: operations still running after 100000 steps of the drain")
}

// runOp runs one operation of p to its end.
func (s *catSchedule) runOp(p *proc, name string, op func()) {
	p.opName, p.opStart = name, s.now
	p.beginOp()
	s.grant(p, procCmd{op: op})
	for p.phase == phaseParked {
		s.grant(p, procCmd{})
	}
}

// final replaces every process by fresh ones of the latest configuration,
// with faults off: each must join and restore (unless the schedule damaged
// what they restore: then the error must name it); then every process
// commits Retain+1 checkpoints, the leader last, and each must learn the
// checkpoint before; then, past the grace, the leader collects: what is
// left must be what its plan keeps or holds.
func (s *catSchedule) final() {
	s.tick = s.steps + 1
	for _, p := range s.live() {
		s.stop(p)
	}
	s.logf("final: %d fresh processes of %s join, with faults off", s.cur.processes, s.cur)
	var fresh []*proc
	for i := range s.cur.processes {
		fresh = append(fresh, s.newProc(i, s.cur))
	}
	for round := 0; round < 4; round++ {
		for _, p := range fresh {
			switch {
			case p.m == nil:
				s.runOp(p, "join", p.opJoin)
			case p.m.Generation().Number != s.t.live() || p.fenced:
				s.runOp(p, "rejoin", p.opRejoin)
				if p.m == nil || p.giveUp {
					p.giveUp, p.m = false, nil
					s.runOp(p, "join", p.opJoin)
				}
			}
			if s.over() {
				return
			}
			if p.m == nil {
				s.finalJoinFailed(p)
				return
			}
		}
	}
	live := s.t.live()
	for _, p := range fresh {
		if p.m == nil || p.m.Generation().Number != live {
			s.failf("final: p%d is not a member of the live generation %d after 4 rounds of joins", p.id, live)
			return
		}
	}
	order := append(append([]*proc(nil), fresh[1:]...), fresh[0])
	var prev int64
	for range s.retain + 1 {
		s.trigger = max(s.trigger+1, fresh[0].m.Generation().FirstCheckpoint, fresh[0].last+1)
		for _, p := range order {
			p.retry = nil
			s.runOp(p, "commit", p.opCommit)
			n := p.last
			switch {
			case p.fenced || p.lastOK != n:
				s.failf("final: p%d could not commit checkpoint %d, with faults off (%v)", p.id, n, p.lastErr)
				return
			case p.m.Generation().Mode == catalog.Independent && p.lastStatus != n:
				s.failf("final: p%d's commit of %d in the independent mode says checkpoint %d is complete", p.id, n, p.lastStatus)
			case p.m.Generation().Mode == catalog.Aligned && prev != 0 && p.lastStatus < prev:
				s.failf("final: p%d's commit of %d says checkpoint %d is complete; every process committed %d before, the leader last", p.id, n, p.lastStatus, prev)
			}
		}
		prev = s.trigger
	}
	s.now = s.now.Add(2*catGrace + s.sweepInterval())
	leader := fresh[0]
	var pl *catalog.Plan
	s.runOp(leader, "collect", func() { pl = leader.collect() })
	if s.over() {
		return
	}
	switch {
	case s.t.firstDamage != 0:
		s.logf("final: the schedule damaged the catalog: what is left is not checked (%v)", leader.lastErr)
	case pl == nil || leader.lastErr != nil:
		s.failf("final: the leader's collection, with faults off and past the grace: %v", leader.lastErr)
	default:
		s.checkLeftovers(pl)
	}
}

// sweepInterval is the members' Config.SweepInterval with its default.
func (s *catSchedule) sweepInterval() time.Duration {
	if s.sweep == 0 {
		return max(catGrace/4, time.Minute)
	}
	return s.sweep
}

// newID returns a UUIDv7 of time t whose random bits come from the
// schedule's generator, so that the names of a seed's objects are the
// same at every run.
func (s *catSchedule) newID(t time.Time) uuid.UUID {
	var id uuid.UUID
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	a, b := s.r.Uint64(), s.r.Uint64()
	for i := range 5 {
		id[6+i] = byte(a >> (8 * i))
	}
	for i := range 5 {
		id[11+i] = byte(b >> (8 * i))
	}
	id[6] = id[6]&0x0f | 0x70
	id[8] = id[8]&0x3f | 0x80
	return id
}

// shortName abbreviates an object name for the trace.
func shortName(name string) string {
	class, ref := classify(name)
	switch class {
	case classGen2:
		return fmt.Sprintf("gen/%d", ref.Generation)
	case classFence2:
		return fmt.Sprintf("%d/fence", ref.Generation)
	case classClaim2:
		return fmt.Sprintf("%d/claim-%d", ref.Generation, ref.Process)
	case classCommit2:
		return fmt.Sprintf("%d/%d/%d", ref.Generation, ref.Checkpoint, ref.Process)
	case classGen1:
		return fmt.Sprintf("v1:g%d/generation", ref.Generation)
	case classClaim1:
		return fmt.Sprintf("v1:g%d/claim-%d", ref.Generation, ref.Instance)
	case classPart1:
		return fmt.Sprintf("v1:g%d/part-%d-%d", ref.Generation, ref.Checkpoint, ref.Instance)
	case classData:
		n := objname.Parse(catPrefix, name)
		return fmt.Sprintf("%s.c%d", n.ID.String()[24:], n.Checkpoint)
	case classProbe:
		return "clock-probe"
	}
	return strings.TrimPrefix(name, catPrefix)
}

func shortNames(names []string) string {
	var out []string
	for _, name := range names {
		out = append(out, shortName(name))
	}
	return "[" + strings.Join(out, " ") + "]"
}
