package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/internal/catalogv1"
)

type procPhase uint8

const (
	phaseIdle    procPhase = iota // between operations
	phaseParked                   // at a backend call, in an operation
	phaseStopped                  // killed, or gave up
)

// proc is one simulated process: of the second layout, process Process of
// a configuration, running its instances with one member; or of the first
// layout (old), instance Index, as a process of a release before the
// second layout.
type proc struct {
	s      *catSchedule
	id     int
	old    bool
	conf   catConfig
	cfg    catalog.Config
	cfg1   catalogv1.Config
	b      *procBackend
	resume chan procCmd
	ctx    context.Context
	cancel context.CancelFunc
	skew   time.Duration // its clock's offset from the store's

	// The scheduler's, while the process is not running.
	phase     procPhase
	stallTill int       // not scheduled before this step
	notBefore int       // its parked call is delayed until this step
	opStart   time.Time // when its current operation started
	call      string    // the call it is parked at
	opName    string

	// The process's own; the scheduler reads them between steps.
	killed bool
	giveUp bool // it learnt it must stop (ErrReplaced, ErrMismatch)
	m      *catalog.Member
	m1     *catalogv1.Member
	fenced bool
	inst   map[int]*instState
	last   int64 // the latest checkpoint it tried
	// next is the checkpoint its next uploads are made for: the one after
	// its latest commit's, or after the restored one.
	next int64
	// mat is the checkpoint the objects of its materialisation in
	// progress are made for, 0 for none.
	mat        int64
	retry      *intent // a failed commit to try again
	lastOK     int64   // its latest successful commit
	lastStatus int64   // the Status.Complete of its latest successful commit
	lastErr    error   // of its latest operation
	confirmed  int64   // the latest checkpoint it confirmed in its generation

	// What its calls saw: the seq of its latest successful listing of each
	// prefix, and of its latest read of each generation's fence, and
	// whether the read found one.
	listings map[string]int64
	fences   map[int64]fenceRead
	sawFence bool // in its current operation, a read or listing found its generation's fence
	calls    int
}

type fenceRead struct {
	seq   int64
	found bool
}

// instState is what a process keeps of one of its instances.
type instState struct {
	kgs     dstl.KeyGroupRange
	values  map[int]uint64
	objects []string // the data objects its state refers to
	ahead   []string // uploaded for a later checkpoint, named by no commit yet
	mat     []string // uploaded by the materialisation in progress
	// uploaded holds, for a first-layout process, when it uploaded each
	// object that no part of its own names yet.
	uploaded map[string]time.Time
}

// intent is a commit (or a first-layout part) as its committer meant it.
type intent struct {
	name   string
	n      int64
	parts  []catalog.InstanceState // second layout
	state  []byte                  // first layout
	object []string                // first layout
	hold   int64
	proc   int
	formed time.Time // when its objects were uploaded and it was made
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

func (s *catSchedule) newProc(slot int, conf catConfig) *proc {
	p := s.addProc()
	p.conf = conf
	p.cfg = catalog.Config{JobID: catJobID, Instances: conf.instances, Processes: conf.processes, Process: slot, MaxParallelism: s.maxPar,
		Mode: conf.mode, Retain: s.retain, Grace: catGrace, SweepInterval: s.sweep, Owner: fmt.Sprintf("process-%d", p.id), Now: p.clock,
		Logger: discardLogger}
	s.logf("p%d: new process %d of %s", p.id, slot, conf)
	return p
}

func (s *catSchedule) newOldProc(index int, conf catConfig) *proc {
	p := s.addProc()
	p.old, p.conf = true, conf
	p.cfg1 = catalogv1.Config{JobID: catJobID, Instances: conf.instances, Index: index, MaxParallelism: s.maxPar,
		Mode: catalogv1.Mode(conf.mode), Retain: s.retain, Grace: catGrace, Owner: fmt.Sprintf("process-%d", p.id), Now: p.clock}
	s.stats.OldProcs++
	s.logf("p%d: new process of the first layout, instance %d of %d (%s)", p.id, index, conf.instances, conf.mode)
	return p
}

func (s *catSchedule) addProc() *proc {
	p := &proc{s: s, id: len(s.procs), resume: make(chan procCmd), listings: map[string]int64{}, fences: map[int64]fenceRead{}}
	p.b = &procBackend{p: p}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	s.procs = append(s.procs, p)
	s.stats.Procs++
	s.wg.Add(1)
	go p.loop()
	return p
}

// clock is the process's clock: the store's, off by its skew.
func (p *proc) clock() time.Time { return p.s.now.Add(p.skew) }

// deadline is when an operation of a first-layout process must be over.
func (p *proc) deadline() time.Time { return p.opStart.Add(catOpSpan - catTick) }

func (p *proc) where() string {
	if p.phase == phaseParked {
		return fmt.Sprintf("in %s at %s", p.opName, p.call)
	}
	return "between operations"
}

// generation returns the number of the process's generation, 0 before it
// joined.
func (p *proc) generation() int64 {
	switch {
	case p.m != nil:
		return p.m.Generation().Number
	case p.m1 != nil:
		return p.m1.Generation().Number
	}
	return 0
}

func (p *proc) beginOp() {
	p.sawFence = p.fenced
	p.lastErr = nil
}

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

// procBackend is a process's view of the faulty backend: every call is a
// scheduling point.
type procBackend struct{ p *proc }

var _ backends.Backend = (*procBackend)(nil)

// Unwrap returns the simulated store, which needs no check of create-only
// puts (see backend.VerifyCreateOnly).
func (b *procBackend) Unwrap() backends.Backend { return b.p.s.be }

func catErr(op, name string, err error) error { return backends.NewError(op, "sim", name, err) }

// isProbe says whether name (or a listing's prefix) is a collection's
// clock probe. Its name is random: its calls skip the backend's faults,
// which are keyed by name, and draw theirs from the schedule's generator.
func isProbe(name string) bool { return objname.Parse(catPrefix, name).Kind == objname.ClockProbe }

// probeFault draws the fault of a call on a clock probe.
func (p *proc) probeFault(op, name string, k faultKind) error {
	s := p.s
	if !s.faultsOff && s.prof.p[k] > 0 && s.r.Float64() < s.prof.p[k] {
		s.be.st.count(k)
		return catErr(op, name, errInjected)
	}
	return nil
}

func (b *procBackend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	p := b.p
	if err := p.yield("put " + shortName(name)); err != nil {
		return catErr("put", name, err)
	}
	s := p.s
	if isProbe(name) {
		if err := p.probeFault("put", name, putErrBefore); err != nil {
			return err
		}
		return s.cl.Put(ctx, name, body, size)
	}
	if f := s.hooks.tamper; f != nil {
		data := make([]byte, size)
		if _, err := body.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
			return catErr("put", name, err)
		}
		data = f(s, name, data)
		return s.be.Put(ctx, name, bytesReaderAt(data), int64(len(data)))
	}
	return s.be.Put(ctx, name, body, size)
}

func (b *procBackend) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	p := b.p
	if err := p.yield("get " + shortName(name)); err != nil {
		return nil, catErr("get", name, err)
	}
	s := p.s
	if isProbe(name) {
		if err := p.probeFault("get", name, getErr); err != nil {
			return nil, err
		}
		return s.cl.Get(ctx, name, offset, length)
	}
	class, ref := classify(name)
	if class == classFence2 && s.hooks.hideFence {
		return nil, catErr("get", name, backends.ErrNotFound)
	}
	seq := s.t.seq
	r, err := s.be.Get(ctx, name, offset, length)
	if class == classFence2 && (err == nil || errors.Is(err, backends.ErrNotFound)) {
		p.fences[ref.Generation] = fenceRead{seq: seq, found: err == nil}
		if err == nil && ref.Generation == p.generation() {
			p.sawFence = true
		}
	}
	return r, err
}

func (b *procBackend) Delete(ctx context.Context, name string) error {
	p := b.p
	if err := p.yield("delete " + shortName(name)); err != nil {
		return catErr("delete", name, err)
	}
	if isProbe(name) {
		if err := p.probeFault("delete", name, deleteFail); err != nil {
			return err
		}
		return p.s.cl.Delete(ctx, name)
	}
	return p.s.be.Delete(ctx, name)
}

func (b *procBackend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	p := b.p
	if err := p.yield("list " + shortName(prefix)); err != nil {
		return catErr("list", prefix, err)
	}
	s := p.s
	if isProbe(prefix) {
		if err := p.probeFault("list", prefix, listErr); err != nil {
			return err
		}
		return s.cl.List(ctx, prefix, fn)
	}
	seq := s.t.seq
	err := s.be.List(ctx, prefix, func(oi backends.ObjectInfo) error {
		class, ref := classify(oi.Name)
		if p.old {
			// A process of the first layout's release does not know the
			// second layout's names: its parser took them for no catalog
			// object.
			if strings.HasPrefix(oi.Name, catPrefix+objname.CatalogV2Dir) {
				return nil
			}
			if s.hooks.hideOldFence && class == classGen1 {
				if l := s.t.now(oi.Name); l != nil && l.gen1 != nil && catalogv1.IsFence(catPrefix, l.gen1) {
					return nil
				}
			}
		}
		if class == classFence2 && !s.hooks.hideFence {
			p.fences[ref.Generation] = fenceRead{seq: seq, found: true}
			if ref.Generation == p.generation() {
				p.sawFence = true
			}
		}
		return fn(oi)
	})
	if err == nil {
		p.listings[prefix] = seq
	}
	return err
}

func (b *procBackend) Close() error { return nil }

func bytesReaderAt(b []byte) io.ReaderAt { return bytes.NewReader(b) }

// startOp starts p's next operation.
func (s *catSchedule) startOp(p *proc) {
	var op func()
	name := ""
	if p.old {
		switch {
		case p.m1 == nil:
			name, op = "join", p.opJoin1
		case p.fenced:
			name, op = "rejoin", p.opRejoin1
		default:
			x := s.r.IntN(100)
			planP := 10
			if p.cfg1.Index == 0 {
				planP = 30
			}
			switch {
			case x < planP:
				name, op = "plan", p.opPlan1
			case x < planP+15:
				name, op = "refresh", p.opRefresh1
			default:
				name, op = "commit", p.opCommit1
			}
		}
	} else {
		switch {
		case p.m == nil:
			name, op = "join", p.opJoin
		case p.fenced:
			name, op = "rejoin", p.opRejoin
		default:
			x := s.r.IntN(100)
			collectP := 3
			if p.m.Leader() {
				collectP = 25
			}
			switch {
			case x < collectP:
				name, op = "collect", func() { p.collect() }
			case x < collectP+10:
				name, op = "refresh", p.opRefresh
			case x < collectP+18:
				name, op = "upload", p.opUploadAhead
			case x < collectP+23:
				name, op = "materialise", p.opMaterialise
			default:
				name, op = "commit", p.opCommit
			}
		}
	}
	p.opName, p.opStart = name, s.now
	p.beginOp()
	s.grant(p, procCmd{op: op})
}

// causeOf names the cause an error wraps, "" for none the simulation
// knows.
func causeOf(err error) string {
	for _, c := range []struct {
		err  error
		name string
	}{
		{errInjected, "injected"}, {errKilled, "killed"},
		{catalog.ErrFenced, "fenced"}, {catalog.ErrReplaced, "replaced"}, {catalog.ErrMismatch, "mismatch"},
		{catalog.ErrNoCheckpoint, "no-checkpoint"}, {catalog.ErrDamaged, "damaged"},
		{catalogv1.ErrFenced, "fenced"}, {catalogv1.ErrReplaced, "replaced"}, {catalogv1.ErrMismatch, "mismatch"},
		{catalogv1.ErrNoCheckpoint, "no-checkpoint"}, {catalogv1.ErrDamaged, "damaged"},
		{collect.ErrMissing, "missing"}, {backends.ErrNotFound, "not-found"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	switch msg := err.Error(); {
	case strings.Contains(msg, "generations started while"):
		return "join-rounds"
	case strings.Contains(msg, "put is not listed"):
		// A collection's clock probe that another collection deleted, as
		// left behind, while its process stalled past the grace.
		return "probe-gone"
	}
	return ""
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

func (p *proc) joined(m *catalog.Member, err error, what string) {
	s := p.s
	if p.killed {
		return
	}
	s.stats.Joins++
	p.lastErr = err
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
		case "fenced":
			if what == "join" {
				s.failf("p%d: Join failed with %v: a Join finishes a fenced generation's start", p.id, err)
			}
		case "no-checkpoint":
			p.cfg.RestoreFrom = 0
		case "not-found", "damaged":
			s.checkErrorCause(p, err, what)
		case "injected", "join-rounds", "killed":
		default:
			s.failf("p%d: %s failed with an error that names no known cause: %v", p.id, what, err)
		}
		return
	}
	s.checkMember(p, m, what)
	g := m.Generation()
	p.m, p.fenced, p.last, p.retry, p.lastOK, p.confirmed, p.mat = m, false, 0, nil, 0, 0, 0
	p.cfg.RestoreFrom = 0
	p.next = g.RestoredCheckpoint + 1
	if g.Mode == catalog.Independent {
		p.next = 1
		for _, i := range m.Instances() {
			for _, part := range m.Restore(i) {
				p.next = max(p.next, part.Checkpoint+1)
			}
		}
	}
	if g.Mode == catalog.Aligned && g.FirstCheckpoint > s.trigger {
		s.trigger = g.FirstCheckpoint
	}
}

// opCommit commits the process's instances' parts of its next
// checkpoint, after uploading an object for each.
func (p *proc) opCommit() {
	s := p.s
	in := p.retry
	p.retry = nil
	if in == nil {
		if in = p.newIntent(); in == nil {
			return
		}
	}
	if o := s.intents[in.name]; o != nil && o.proc != p.id {
		s.failf("p%d and p%d both commit %s", o.proc, p.id, shortName(in.name))
	}
	s.intents[in.name] = in
	st, err := p.m.Commit(p.ctx, in.n, in.parts)
	p.committed(in, st, err)
}

// newIntent makes the process's commit of its next checkpoint: each
// instance's values change, it refers to the objects it did (or, after a
// compaction or at the end of a materialisation, others) and to a new
// object, uploaded now for that checkpoint. It returns nil when there is
// no new checkpoint to commit (then the process refreshes), or an upload
// failed.
func (p *proc) newIntent() *intent {
	s := p.s
	g := p.m.Generation()
	n := max(p.last+1, g.FirstCheckpoint)
	if g.Mode == catalog.Aligned {
		n = max(s.trigger, g.FirstCheckpoint)
	}
	if n <= p.last {
		p.opRefresh()
		return nil
	}
	p.last, p.next = n, n+1
	finish := p.mat != 0 && s.r.IntN(3) == 0
	var hold int64
	if p.mat != 0 && !finish {
		hold = p.mat
	}
	in := &intent{name: objname.CatalogV2CommitName(catPrefix, g.Number, n, p.cfg.Process), n: n, proc: p.id, formed: s.now, hold: hold}
	for _, i := range p.m.Instances() {
		st := p.inst[i]
		for range 1 + s.r.IntN(3) {
			kg := st.kgs.Start + s.r.IntN(st.kgs.End-st.kgs.Start+1)
			st.values[kg] = st.values[kg]*0x9e3779b97f4a7c15 + uint64(n)<<16 + uint64(p.id) + 1
		}
		switch {
		case finish:
			st.objects, st.mat = st.mat, nil
		case s.r.IntN(6) == 0:
			st.objects = nil // compacted: the new object is the whole state
		}
		st.objects = append(st.objects, st.ahead...)
		st.ahead = nil
		name, err := p.upload(n)
		if err != nil {
			s.stats.CommitErrors++
			p.lastErr = err
			s.logf("p%d: upload for checkpoint %d: %v", p.id, n, err)
			return nil
		}
		st.objects = append(st.objects, name)
		in.parts = append(in.parts, catalog.InstanceState{Instance: i, State: encodeValues(st.values, st.kgs), Objects: slices.Clone(st.objects),
			Metadata: map[string]string{"process": fmt.Sprint(p.id)}, HoldFrom: hold})
	}
	if finish {
		p.mat = 0
	}
	return in
}

// upload puts a new data object made for checkpoint n (0: a first-layout
// object, whose name records none).
func (p *proc) upload(n int64) (string, error) {
	s := p.s
	name, err := objname.Format(catPrefix, objname.Name{Kind: objname.Log, ID: s.newID(p.clock()), Checkpoint: n})
	if err != nil {
		return "", err
	}
	data := dataContent(name)
	s.stats.Uploads++
	if err := p.b.Put(p.ctx, name, bytesReaderAt(data), int64(len(data))); err != nil {
		return "", err
	}
	return name, nil
}

// opUploadAhead uploads an object for the process's next checkpoint
// before it commits (as a persist before its checkpoint does).
func (p *proc) opUploadAhead() {
	s := p.s
	is := p.m.Instances()
	i := is[s.r.IntN(len(is))]
	name, err := p.upload(p.next)
	if p.killed {
		return
	}
	if err != nil {
		p.lastErr = err
		s.logf("p%d: upload ahead for checkpoint %d: %v", p.id, p.next, err)
		return
	}
	p.inst[i].ahead = append(p.inst[i].ahead, name)
	s.logf("p%d: uploaded %s for instance %d", p.id, shortName(name), i)
}

// opMaterialise starts a materialisation (its objects are made for the
// next checkpoint, and its commits hold from it until it ends), or
// uploads one of its objects.
func (p *proc) opMaterialise() {
	s := p.s
	if p.mat == 0 {
		p.mat = p.next
		s.logf("p%d: starts a materialisation for checkpoint %d", p.id, p.mat)
		return
	}
	is := p.m.Instances()
	i := is[s.r.IntN(len(is))]
	name, err := p.upload(p.mat)
	if p.killed {
		return
	}
	if err != nil {
		p.lastErr = err
		s.logf("p%d: materialisation upload: %v", p.id, err)
		return
	}
	p.inst[i].mat = append(p.inst[i].mat, name)
	s.logf("p%d: materialised %s for instance %d", p.id, shortName(name), i)
}

func (p *proc) committed(in *intent, st catalog.Status, err error) {
	s := p.s
	if p.killed {
		return
	}
	p.lastErr = err
	switch {
	case err == nil:
		s.stats.Commits++
		p.lastOK, p.lastStatus = in.n, st.Complete
		stalled := s.now.Sub(in.formed)
		if stalled > catGrace {
			s.stats.StalledCommits++
		}
		if in.hold != 0 {
			s.stats.HeldFrom++
		}
		s.logf("p%d: committed %s (made %v ago, hold from %d), complete %d", p.id, shortName(in.name), stalled.Round(time.Second), in.hold, st.Complete)
		s.checkStatus(p, st.Complete, "Commit")
		s.checkStored(p, in)
	case errors.Is(err, catalog.ErrFenced):
		s.stats.Fenced++
		s.logf("p%d: commit %s: %v", p.id, shortName(in.name), err)
		s.checkFenced(p, "Commit")
		p.fenced = true
	case errors.Is(err, catalog.ErrReplaced):
		s.stats.Replaced++
		s.logf("p%d: commit %s: %v", p.id, shortName(in.name), err)
		s.checkReplaced(p, in, err)
		p.giveUp = true
	default:
		s.stats.CommitErrors++
		cause := causeOf(err)
		s.logf("p%d: commit %s: %s: %v", p.id, shortName(in.name), cause, err)
		switch cause {
		case "injected", "killed":
		case "not-found", "damaged":
			s.checkErrorCause(p, err, "Commit")
		default:
			s.failf("p%d: commit %s failed with an error that names no known cause: %v", p.id, shortName(in.name), err)
		}
		if s.r.IntN(2) == 0 {
			p.retry = in
		}
	}
}

// opRefresh learns the member's status without a commit.
func (p *proc) opRefresh() {
	s := p.s
	st, err := p.m.Refresh(p.ctx)
	if p.killed {
		return
	}
	s.stats.Refreshes++
	p.lastErr = err
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
		switch causeOf(err) {
		case "injected", "killed":
		case "not-found", "damaged":
			s.checkErrorCause(p, err, "Refresh")
		default:
			s.failf("p%d: Refresh failed with an error that names no known cause: %v", p.id, err)
		}
	}
}

// collect applies the deletion rule (a no-op but on the leader) and
// returns the plan.
func (p *proc) collect() *catalog.Plan {
	s := p.s
	pl, rep, err := p.m.Collect(p.ctx, collect.Options{Concurrency: 1, Timeout: collect.NoTimeout})
	if p.killed {
		return nil
	}
	p.lastErr = err
	s.stats.Collects++
	if !p.m.Leader() {
		if pl != nil || rep != nil || err != nil || p.calls > 0 {
			s.failf("p%d: Collect of process %d, not the leader, made %d calls: plan %v, report %v, error %v", p.id, p.cfg.Process, p.calls, pl != nil, rep != nil, err)
		}
		return nil
	}
	sweep := ""
	if rep != nil {
		s.stats.Sweeps++
		sweep = fmt.Sprintf(", swept: %d listed, %d referenced, %d held, %d young, %d deleted", rep.Listed.Objects, rep.Referenced.Objects, rep.Held.Objects, rep.Young.Objects, rep.Deleted.Objects)
	}
	switch {
	case err == nil:
		if pl != nil {
			s.logf("p%d: collect: retained %v, hold from %d, %d commits kept, dropped %s%s", p.id, pl.Retained, pl.HoldFrom, len(pl.Commits), shortNames(pl.Drop), sweep)
		} else {
			s.logf("p%d: collect: nothing due", p.id)
		}
	case errors.Is(err, catalog.ErrFenced):
		s.stats.CollectsFenced++
		s.logf("p%d: collect: %v", p.id, err)
		s.checkFenced(p, "Collect")
		p.fenced = true
	default:
		cause := causeOf(err)
		s.logf("p%d: collect: %s: %v%s", p.id, cause, err, sweep)
		switch cause {
		case "injected", "killed", "probe-gone":
		case "not-found", "damaged", "missing":
			s.checkErrorCause(p, err, "Collect")
		default:
			s.failf("p%d: Collect failed with an error that names no known cause: %v", p.id, err)
		}
	}
	if pl != nil && rep != nil && !p.killed {
		p.breakRule(pl)
	}
	s.checkNeeded(fmt.Sprintf("after p%d's collection", p.id))
	return pl
}

// breakRule deletes, for the tests of the checks, what the deletion rule
// keeps (see catHooks).
func (p *proc) breakRule(pl *catalog.Plan) {
	s := p.s
	if !s.hooks.noHold && !s.hooks.collectKept {
		return
	}
	var drop []string
	p.b.List(p.ctx, catPrefix, func(oi backends.ObjectInfo) error {
		n := objname.Parse(catPrefix, oi.Name)
		old := oi.ModTime.Before(s.now.Add(-catGrace))
		switch {
		case n.Kind != objname.Log || !old:
		case s.hooks.collectKept && pl.Keep[oi.Name]:
			drop = append(drop, oi.Name)
		case s.hooks.noHold && !pl.Keep[oi.Name] && n.Checkpoint >= pl.HoldFrom:
			drop = append(drop, oi.Name)
		}
		return nil
	})
	for _, name := range drop {
		p.b.Delete(p.ctx, name)
	}
}

// opJoin1 joins the job as a process of the first layout.
func (p *proc) opJoin1() {
	m, err := catalogv1.Join(p.ctx, p.b, p.cfg1)
	p.joined1(m, err, "join")
}

// opRejoin1 rejoins, as a process of the first layout, after it was
// fenced.
func (p *proc) opRejoin1() {
	m, err := p.m1.Rejoin(p.ctx)
	p.joined1(m, err, "rejoin")
}

func (p *proc) joined1(m *catalogv1.Member, err error, what string) {
	s := p.s
	if p.killed {
		return
	}
	s.stats.Joins++
	p.lastErr = err
	if err != nil {
		s.stats.JoinErrors++
		cause := causeOf(err)
		s.logf("p%d: first layout: %s: %s: %v", p.id, what, cause, err)
		if len(s.t.fences1) > 0 {
			s.stats.OldJoinsRefused++
			if s.r.IntN(3) == 0 {
				p.giveUp = true
			}
		}
		switch cause {
		case "replaced", "mismatch":
			p.giveUp = true
		case "injected", "killed", "not-found", "damaged", "join-rounds", "no-checkpoint":
		default:
			s.failf("p%d: the first layout's %s failed with an error that names no known cause: %v", p.id, what, err)
		}
		return
	}
	s.checkMember1(p, m, what)
	p.m1, p.fenced, p.last, p.confirmed = m, false, 0, 0
}

// opCommit1 commits the instance's part of its next checkpoint, as a
// process of the first layout: it names the objects of its state, which
// it uploads anew when it uploaded them longer ago than catOpSpan and no
// part of its own names them yet (the first layout's grace rests on
// that), and a new object.
func (p *proc) opCommit1() {
	s := p.s
	g := p.m1.Generation()
	n := max(p.last+1, g.FirstCheckpoint)
	if g.Mode == catalogv1.Aligned {
		n = max(s.trigger, g.FirstCheckpoint)
	}
	if n <= p.last {
		p.opRefresh1()
		return
	}
	p.last = n
	st := p.inst[p.cfg1.Index]
	kg := st.kgs.Start + s.r.IntN(st.kgs.End-st.kgs.Start+1)
	st.values[kg] = st.values[kg]*0x9e3779b97f4a7c15 + uint64(n)<<16 + uint64(p.id) + 1
	if s.r.IntN(6) == 0 {
		st.objects = nil
	}
	var objects []string
	for _, o := range st.objects {
		if t, ok := st.uploaded[o]; ok && s.now.Sub(t) > catOpSpan {
			continue
		}
		objects = append(objects, o)
	}
	name, err := p.upload(0)
	if err != nil {
		st.objects = objects
		s.stats.CommitErrors++
		s.logf("p%d: first layout: upload for checkpoint %d: %v", p.id, n, err)
		return
	}
	st.uploaded[name] = s.now
	st.objects = append(objects, name)
	in := &intent{name: objname.CatalogPartName(catPrefix, g.Number, n, p.cfg1.Index), n: n, state: encodeValues(st.values, st.kgs),
		object: slices.Clone(st.objects), proc: p.id, formed: s.now}
	s.intents[in.name] = in
	status, err := p.m1.Commit(p.ctx, n, in.state, in.object, map[string]string{"process": fmt.Sprint(p.id)})
	if p.killed {
		return
	}
	p.lastErr = err
	switch {
	case err == nil:
		s.stats.OldCommits++
		s.logf("p%d: first layout: committed %s, complete %d", p.id, shortName(in.name), status.Complete)
		for _, o := range in.object {
			delete(st.uploaded, o)
		}
		s.checkStatus1(p, status.Complete, "Commit")
	case errors.Is(err, catalogv1.ErrFenced):
		s.stats.OldFenced++
		s.logf("p%d: first layout: commit %s: %v", p.id, shortName(in.name), err)
		p.fenced = true
	case errors.Is(err, catalogv1.ErrReplaced):
		s.logf("p%d: first layout: commit %s: %v", p.id, shortName(in.name), err)
		p.giveUp = true
	default:
		s.logf("p%d: first layout: commit %s: %v", p.id, shortName(in.name), err)
		switch causeOf(err) {
		case "injected", "killed", "not-found", "damaged":
		default:
			s.failf("p%d: the first layout's commit failed with an error that names no known cause: %v", p.id, err)
		}
	}
}

// opRefresh1 learns the first-layout member's status.
func (p *proc) opRefresh1() {
	s := p.s
	status, err := p.m1.Refresh(p.ctx)
	if p.killed {
		return
	}
	p.lastErr = err
	switch {
	case err == nil:
		s.logf("p%d: first layout: refresh: complete %d", p.id, status.Complete)
		s.checkStatus1(p, status.Complete, "Refresh")
	case errors.Is(err, catalogv1.ErrFenced):
		s.stats.OldFenced++
		s.logf("p%d: first layout: refresh: %v", p.id, err)
		p.fenced = true
	default:
		s.logf("p%d: first layout: refresh: %v", p.id, err)
		if c := causeOf(err); c != "injected" && c != "killed" {
			s.failf("p%d: the first layout's Refresh failed with an error that names no known cause: %v", p.id, err)
		}
	}
}

// opPlan1 applies the first layout's deletion rule: the plan, its drops,
// and the collection of the first layout's data objects (whose names
// record no checkpoint: a release of the first layout knew no other)
// that the plan does not keep and that are older than the grace.
func (p *proc) opPlan1() {
	s := p.s
	pl, err := p.m1.Plan(p.ctx)
	if p.killed {
		return
	}
	p.lastErr = err
	switch {
	case errors.Is(err, catalogv1.ErrFenced):
		s.stats.OldFenced++
		s.logf("p%d: first layout: plan: %v", p.id, err)
		p.fenced = true
		return
	case err != nil:
		s.logf("p%d: first layout: plan: %v", p.id, err)
		if c := causeOf(err); c != "injected" && c != "killed" && c != "not-found" && c != "damaged" {
			s.failf("p%d: the first layout's Plan failed with an error that names no known cause: %v", p.id, err)
		}
		return
	}
	planned := s.now
	n, err := p.m1.DropCatalog(p.ctx, pl)
	s.logf("p%d: first layout: plan of generation %d: retained %v, keeps %d parts, dropped %d of %s (%v)", p.id, pl.Generation, pl.Retained, len(pl.Parts), n, shortNames(pl.Drop), err)
	if p.killed {
		return
	}
	var drop []string
	err = p.b.List(p.ctx, catPrefix, func(oi backends.ObjectInfo) error {
		if n := objname.Parse(catPrefix, oi.Name); n.Kind == objname.Log && n.Checkpoint == 0 && !pl.Keep[oi.Name] && oi.ModTime.Before(planned.Add(-catGrace)) {
			drop = append(drop, oi.Name)
		}
		return nil
	})
	if err != nil {
		return
	}
	for _, name := range drop {
		p.b.Delete(p.ctx, name)
	}
}
