package job_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dstlgo/dstl/backends/faulty"
	"github.com/dstlgo/dstl/backends/mem"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/job"
	"github.com/dstlgo/dstl/statestore"
)

// The simulation's job and its errors.
const simJob = "sim"

var (
	errInjected = errors.New("injected fault")
	errKilled   = errors.New("injected fault: the process crashed")
)

// Bounds of a schedule's waits: a process that does not stop within
// simStopWait after its context ended hangs; a job whose new processes
// complete no checkpoint within simProgressWait, with no faults, is stuck.
const (
	simStopWait     = time.Minute
	simProgressWait = time.Minute
)

// simStats counts what a schedule did.
type simStats struct {
	Processes, Kills, Stops, Stalls, Bursts, Rescales    int
	Restores, Completes, Fenced, TakeFailed, Generations int
	Commits, Completions, DataDeletes, CommitDeletes     int
	Narrowed                                             int // parts restored for fewer key groups than their metadata names (the independent mode)
	Duration                                             time.Duration
}

func (s *simStats) add(o simStats) {
	s.Processes += o.Processes
	s.Kills += o.Kills
	s.Stops += o.Stops
	s.Stalls += o.Stalls
	s.Bursts += o.Bursts
	s.Rescales += o.Rescales
	s.Restores += o.Restores
	s.Completes += o.Completes
	s.Fenced += o.Fenced
	s.TakeFailed += o.TakeFailed
	s.Generations += o.Generations
	s.Commits += o.Commits
	s.Completions += o.Completions
	s.DataDeletes += o.DataDeletes
	s.CommitDeletes += o.CommitDeletes
	s.Narrowed += o.Narrowed
	s.Duration += o.Duration
}

func (s simStats) String() string {
	return fmt.Sprintf("%d processes (%d crashed, %d stopped, %d stalled, %d request bursts), %d rescales, %d generations; "+
		"%d restores, %d commits, %d checkpoints complete, %d confirmations, %d takes failed, %d fences met; %d data objects and %d commits deleted; "+
		"%d parts restored for fewer key groups than they hold",
		s.Processes, s.Kills, s.Stops, s.Stalls, s.Bursts, s.Rescales, s.Generations,
		s.Restores, s.Commits, s.Completions, s.Completes, s.TakeFailed, s.Fenced, s.DataDeletes, s.CommitDeletes, s.Narrowed)
}

// simChange is one change of the store, in the store's order.
type simChange struct {
	key     string
	data    []byte
	deleted bool
	at      time.Duration
}

// simWorld is one schedule: the shared store, the processes, what they
// did and what went wrong.
type simWorld struct {
	seed  uint64
	p     simParams
	store *mem.Store
	begin time.Time
	logf  func(string, ...any) // nil: quiet

	mu       sync.Mutex
	history  []simChange
	failures []string
	incs     []*simInc
	exited   []*simInc
	exitNote chan struct{}
	stats    simStats
	calm     atomic.Bool // the schedule ended: no more faults
}

// failf records a failure of the schedule.
func (w *simWorld) failf(format string, args ...any) {
	msg := fmt.Sprintf("at %v: ", w.since().Round(time.Millisecond)) + fmt.Sprintf(format, args...)
	w.mu.Lock()
	w.failures = append(w.failures, msg)
	w.mu.Unlock()
	w.tracef("FAIL: %s", msg)
}

func (w *simWorld) since() time.Duration { return time.Since(w.begin) }

// tracef logs what happens, with -job.sim.trace.
func (w *simWorld) tracef(format string, args ...any) {
	if w.logf != nil {
		w.logf("%8v "+format, append([]any{w.since().Round(100 * time.Microsecond)}, args...)...)
	}
}

// Who ended a process's run.
const (
	byNone int32 = iota
	byKill
	byStop
)

// simInc is one process: one run of job.Run, with a storage of its own
// over the shared store, behind a fault wrapper of its own.
type simInc struct {
	w     *simWorld
	id    int
	shape simShape
	slot  int

	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's, once done

	by          atomic.Int32 // byKill, byStop
	dead        atomic.Bool  // every request fails
	ioStall     atomic.Int64 // requests wait until then (Unix nanoseconds)
	loopStall   atomic.Int64 // the loop waits until then
	onCancel    atomic.Int32 // a stalled request whose caller gives up: a faulty.OnCancel
	errPermille atomic.Int32
	completed   atomic.Int64 // confirmations

	rngMu sync.Mutex
	rng   *rand.Rand
	fb    *faulty.Backend

	// Run's goroutine's, read once done.
	tasks   []*simTask
	current map[int]*simTask         // instance -> task, of the generation being restored
	failed  map[int64]map[int64]bool // generation -> checkpoints whose take failed
}

func (inc *simInc) String() string {
	return fmt.Sprintf("p%d (process %d of %v)", inc.id, inc.slot, inc.shape)
}

func (inc *simInc) running() bool {
	select {
	case <-inc.done:
		return false
	default:
		return inc.by.Load() == byNone
	}
}

// newSimWorld makes a schedule's world, recording the store's changes.
func newSimWorld(seed uint64, logf func(string, ...any)) *simWorld {
	w := &simWorld{seed: seed, p: simPlan(seed), store: mem.NewStore(), logf: logf, exitNote: make(chan struct{}, 1)}
	w.begin = time.Now()
	w.store.OnChange(func(key string, data []byte, deleted bool) {
		if deleted {
			w.tracef("store: %s deleted", key)
		} else if strings.Contains(key, "_catalog") {
			w.tracef("store: %s put", key)
		}
		w.mu.Lock()
		w.history = append(w.history, simChange{key: key, data: data, deleted: deleted, at: time.Since(w.begin)})
		w.mu.Unlock()
	})
	return w
}

// start starts a process for slot of shape.
func (w *simWorld) start(shape simShape, slot int) *simInc {
	w.mu.Lock()
	inc := &simInc{w: w, id: len(w.incs), shape: shape, slot: slot, done: make(chan struct{}),
		current: map[int]*simTask{}, failed: map[int64]map[int64]bool{}}
	w.incs = append(w.incs, inc)
	w.stats.Processes++
	w.mu.Unlock()
	inc.rng = rand.New(rand.NewPCG(w.seed, uint64(inc.id)))
	inc.errPermille.Store(int32(w.p.errPermille))
	w.tracef("%v starts", inc)

	mb, err := mem.Open(context.Background(), mem.Config{Store: w.store})
	if err != nil {
		panic(err) // a zero Config on a store does not fail
	}
	inc.fb = faulty.New(mb, inc.fault)
	dcfg := dstl.DefaultConfig("memory")
	dcfg.JobID = simJob
	dcfg.BatchPersistDelay = time.Millisecond
	dcfg.UploadTimeout = w.p.uploadTimeout
	dcfg.UploadMaxAttempts = w.p.attempts
	dcfg.UploadNextAttemptDelay = 5 * time.Millisecond
	dcfg.PreemptivePersistThreshold = w.p.preemptive
	storage, err := dstl.New(dcfg, inc.fb, dstl.WithLogger(quiet))
	if err != nil {
		panic(err)
	}
	ccfg := catalog.Config{JobID: simJob, Instances: shape.P, Processes: shape.Q, Process: slot, MaxParallelism: maxP,
		Mode: w.p.mode, Retain: w.p.retain, Grace: w.p.grace, SweepInterval: w.p.sweep, Owner: fmt.Sprintf("p%d", inc.id), Logger: quiet}
	jcfg := job.Config{Interval: w.p.interval, CollectInterval: w.p.collectEvery, StopTimeout: w.p.stopTimeout, IdleWait: w.p.idleWait,
		Logger: quiet, OnEvent: inc.event, State: statestore.Config{MaterializeInterval: w.p.matInterval, MaterializeSize: w.p.matSize}}
	ctx, cancel := context.WithCancel(context.Background())
	inc.cancel = cancel
	coord := job.NewCatalog(inc.fb, ccfg, w.p.interval, collect.Options{})
	go func() {
		err := job.Run(ctx, storage, coord, jcfg, inc.open)
		storage.Close()
		inc.fb.Close()
		cancel()
		inc.err = err
		close(inc.done)
		w.mu.Lock()
		w.exited = append(w.exited, inc)
		w.mu.Unlock()
		select {
		case w.exitNote <- struct{}{}:
		default:
		}
	}()
	return inc
}

// fault is the fault of one of the process's requests.
func (inc *simInc) fault(c faulty.Call) faulty.Fault {
	if inc.w.logf != nil && c.Op == faulty.OpDelete {
		inc.w.tracef("%v deletes %s (%s)", inc, c.Name, deleter())
	}
	if inc.dead.Load() {
		return faulty.Fault{Err: errKilled}
	}
	if inc.w.calm.Load() {
		return faulty.Fault{}
	}
	var ft faulty.Fault
	if until, now := inc.ioStall.Load(), time.Now().UnixNano(); until > now {
		ft.Delay = time.Duration(until - now)
		ft.OnCancel = faulty.OnCancel(inc.onCancel.Load())
		ft.LateBy = inc.w.p.interval
	}
	inc.rngMu.Lock()
	fail := inc.rng.IntN(1000) < int(inc.errPermille.Load())
	lost := inc.rng.IntN(3) == 0
	slow := inc.rng.IntN(1000) < inc.w.p.delayPermille
	delay := time.Duration(inc.rng.Int64N(int64(3 * time.Millisecond)))
	inc.rngMu.Unlock()
	if slow {
		ft.Delay += delay
	}
	if fail {
		ft.Err, ft.Lost = errInjected, lost
	}
	return ft
}

// kill crashes the process: every request fails from now on (those under
// way go on), and its context ends, so that its last checkpoint fails.
func (inc *simInc) kill() {
	inc.by.Store(byKill)
	inc.dead.Store(true)
	inc.cancel()
	inc.w.tracef("%v crashes", inc)
}

// stop stops the process cleanly: its context ends.
func (inc *simInc) stop() {
	inc.by.Store(byStop)
	inc.cancel()
	inc.w.tracef("%v stops", inc)
}

// event records what the runner tells.
func (inc *simInc) event(e job.Event) {
	w := inc.w
	if e.Kind != job.EventCollected {
		if e.Err != nil {
			w.tracef("%v: %s generation %d instance %d checkpoint %d: %v", inc, e.Kind, e.Generation, e.Instance, e.Checkpoint, e.Err)
		} else {
			w.tracef("%v: %s generation %d instance %d checkpoint %d", inc, e.Kind, e.Generation, e.Instance, e.Checkpoint)
		}
	}
	switch e.Kind {
	case job.EventRestored:
		t := inc.current[e.Instance]
		if t == nil || t.in.Generation != e.Generation {
			w.failf("%v restored instance %d of generation %d, which it did not open", inc, e.Instance, e.Generation)
			return
		}
		delete(inc.current, e.Instance)
		w.count(func(st *simStats) { st.Restores++ })
		t.checkRestored()
	case job.EventTakeFailed:
		if inc.failed[e.Generation] == nil {
			inc.failed[e.Generation] = map[int64]bool{}
		}
		inc.failed[e.Generation][e.Checkpoint] = true
		w.count(func(st *simStats) { st.TakeFailed++ })
	case job.EventFenced:
		w.count(func(st *simStats) { st.Fenced++ })
	case job.EventCompleted:
		inc.completed.Add(1)
	}
}

// open is the process's job.Open: a task that counts the words of its
// key groups' inputs.
func (inc *simInc) open(ctx context.Context, in *job.Instance) (job.Task, error) {
	counts, err := statestore.NewKeyValueStore("counts", in.Log(), statestore.StringCodec{}, statestore.Int64Codec{},
		statestore.WithKeyGroups(in.KeyGroups), statestore.WithMaxParallelism(in.MaxParallelism))
	if err != nil {
		return nil, err
	}
	if err := in.Register(counts); err != nil {
		return nil, err
	}
	t := &simTask{inc: inc, in: in, counts: counts, offsets: map[int]int64{}, restoredCp: map[int]int64{}, restoredGen: map[int]int64{},
		metas: map[int64]map[int]int64{}, opened: time.Now()}
	for kg := in.KeyGroups.Start; kg <= in.KeyGroups.End; kg++ {
		t.offsets[kg] = 0
	}
	for i, meta := range in.Restored {
		kgs := in.RestoredKeyGroups[i]
		if meta[offsetKey(kgs.Start-1)] != "" || meta[offsetKey(kgs.End+1)] != "" {
			inc.w.count(func(st *simStats) { st.Narrowed++ })
		}
		cp, err := strconv.ParseInt(meta["checkpoint"], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("restored metadata %v: %w", meta, err)
		}
		gen, err := strconv.ParseInt(meta["generation"], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("restored metadata %v: %w", meta, err)
		}
		for kg := max(in.KeyGroups.Start, kgs.Start); kg <= min(in.KeyGroups.End, kgs.End); kg++ {
			if v, ok := meta[offsetKey(kg)]; ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("restored metadata %v: %w", meta, err)
				}
				t.offsets[kg], t.restoredCp[kg], t.restoredGen[kg] = n, cp, gen
			}
		}
	}
	t.base = maps.Clone(t.offsets)
	inc.tasks = append(inc.tasks, t)
	inc.current[in.Index] = t
	return t, nil
}

// simTask counts the words of its key groups' inputs, whose records
// arrive one every recordEvery per key group, and records what the
// runner asks of it.
type simTask struct {
	inc         *simInc
	in          *job.Instance
	counts      *statestore.KeyValueStore[string, int64]
	offsets     map[int]int64 // key group -> the next record to read
	base        map[int]int64 // the restored offsets
	restoredCp  map[int]int64 // key group -> the checkpoint its part was of
	restoredGen map[int]int64 // key group -> the generation its part was of
	opened      time.Time
	restored    bool

	taken     []int64                 // the checkpoints Metadata was asked for
	metas     map[int64]map[int]int64 // checkpoint -> offsets
	completes []int64                 // the checkpoints Complete was told
}

func (t *simTask) String() string {
	return fmt.Sprintf("instance %d %v of generation %d in %v", t.in.Index, t.in.KeyGroups, t.in.Generation, t.inc)
}

// checkRestored checks, once the runner restored the instance, that its
// counts are those of its inputs up to the offsets it restored.
func (t *simTask) checkRestored() {
	t.restored = true
	want := expected(t.base)
	got := map[string]int64{}
	for w, n := range t.counts.All() {
		got[w] = n
	}
	if !maps.Equal(got, want) {
		t.inc.w.failf("exactly-once state: %v restored counts %v, want %v (the counts of its input up to offsets %v, of checkpoints %v)",
			t, got, want, t.base, t.restoredCp)
	}
}

func (t *simTask) Process(ctx context.Context) (int, error) {
	if until, now := t.inc.loopStall.Load(), time.Now().UnixNano(); until > now {
		time.Sleep(time.Duration(until - now)) // a pause heeds nothing
	}
	avail := int64(time.Since(t.opened) / t.inc.w.p.recordEvery)
	n := 0
	for kg := t.in.KeyGroups.Start; kg <= t.in.KeyGroups.End; kg++ {
		for k := 0; k < 4 && t.offsets[kg] < t.base[kg]+avail; k++ {
			w := word(kg, t.offsets[kg])
			v, _, err := t.counts.Get(w)
			if err != nil {
				return n, err
			}
			if err := t.counts.Put(w, v+1); err != nil {
				return n, err
			}
			t.offsets[kg]++
			n++
		}
	}
	return n, nil
}

func (t *simTask) Metadata(n int64) map[string]string {
	if k := len(t.taken); k > 0 && n <= t.taken[k-1] {
		t.inc.w.failf("%v: Metadata of checkpoint %d after that of %d", t, n, t.taken[k-1])
	}
	t.taken = append(t.taken, n)
	t.metas[n] = maps.Clone(t.offsets)
	meta := map[string]string{"checkpoint": strconv.FormatInt(n, 10), "generation": strconv.FormatInt(t.in.Generation, 10)}
	for kg, o := range t.offsets {
		meta[offsetKey(kg)] = strconv.FormatInt(o, 10)
	}
	return meta
}

func (t *simTask) Complete(ctx context.Context, n int64) error {
	if k := len(t.completes); k > 0 && n <= t.completes[k-1] {
		t.inc.w.failf("%v: Complete(%d) after Complete(%d)", t, n, t.completes[k-1])
	}
	t.completes = append(t.completes, n)
	return nil
}

// simQueued is a step of the schedule, or one that a step or an exit
// made: a restart, or the end of a burst.
type simQueued struct {
	at       time.Duration
	step     *simStep
	restart  bool // of slot of shape
	shape    simShape
	slot     int
	burstEnd *simInc
}

// run runs the schedule, then ends every process, starts new ones with
// no faults, waits for them to complete a checkpoint and stops them.
func (w *simWorld) run() {
	cur := w.p.shape
	var queue []simQueued
	for i := range w.p.steps {
		queue = append(queue, simQueued{at: w.p.steps[i].at, step: &w.p.steps[i]})
	}
	for slot := range cur.Q {
		w.start(cur, slot)
	}
	rng := rand.New(rand.NewPCG(w.seed, 0x72657374617274)) // restarts after exits
	for len(queue) > 0 {
		slices.SortStableFunc(queue, func(a, b simQueued) int { return int(a.at - b.at) })
		if d := queue[0].at - w.since(); d > 0 {
			timer := time.NewTimer(d)
			select {
			case <-timer.C:
			case <-w.exitNote:
				timer.Stop()
				for _, inc := range w.takeExited() {
					// A process that ended by itself (a fault in its join or
					// restore, or another process took its slot) is
					// restarted if its slot has no process.
					if inc.by.Load() == byNone && inc.shape == cur && w.newest(cur, inc.slot) == nil {
						queue = append(queue, simQueued{at: w.since() + w.p.interval*time.Duration(1+rng.IntN(3)), restart: true, shape: cur, slot: inc.slot})
					}
				}
				continue
			}
		}
		q := queue[0]
		queue = queue[1:]
		switch {
		case q.restart:
			if q.shape == cur && w.newest(cur, q.slot) == nil {
				w.start(cur, q.slot)
			}
		case q.burstEnd != nil:
			q.burstEnd.errPermille.Store(int32(w.p.errPermille))
		default:
			queue = append(queue, w.apply(q.step, &cur)...)
		}
	}

	// The end: no more faults; the processes end; new ones restore and
	// complete a checkpoint, and stop.
	w.tracef("the schedule ends: %v", cur)
	w.calm.Store(true)
	w.mu.Lock()
	incs := slices.Clone(w.incs)
	w.mu.Unlock()
	for _, inc := range incs {
		inc.errPermille.Store(0)
		inc.ioStall.Store(0)
		inc.loopStall.Store(0)
		if inc.running() {
			if w.p.final == endKill {
				inc.kill()
			} else {
				inc.stop()
			}
		}
	}
	w.waitAll()
	var fresh []*simInc
	for slot := range cur.Q {
		fresh = append(fresh, w.start(cur, slot))
	}
	deadline := time.Now().Add(simProgressWait)
	for _, inc := range fresh {
		for inc.completed.Load() == 0 && time.Now().Before(deadline) && inc.running() {
			time.Sleep(5 * time.Millisecond)
		}
		if inc.completed.Load() == 0 {
			if !inc.running() {
				w.failf("progress: with no faults, %v ended before it completed a checkpoint: %v", inc, inc.err)
			} else {
				w.failf("progress: with no faults, %v completed no checkpoint within %v", inc, simProgressWait)
			}
			break
		}
	}
	for _, inc := range fresh {
		if inc.running() {
			inc.stop()
		}
	}
	w.waitAll()
	w.takeExited()
}

// apply applies a step, and returns what it makes happen later.
func (w *simWorld) apply(s *simStep, cur *simShape) []simQueued {
	w.tracef("step: %v", s)
	var later []simQueued
	inc := w.newest(*cur, s.slot)
	switch s.kind {
	case stepKill, stepStop:
		if inc == nil {
			break
		}
		if s.kind == stepKill {
			w.count(func(st *simStats) { st.Kills++ })
			inc.kill()
		} else {
			w.count(func(st *simStats) { st.Stops++ })
			inc.stop()
		}
		if s.restartAfter >= 0 {
			later = append(later, simQueued{at: w.since() + s.restartAfter, restart: true, shape: *cur, slot: s.slot})
		}
	case stepRestart:
		w.start(*cur, s.slot)
	case stepStall:
		if inc == nil {
			break
		}
		w.count(func(st *simStats) { st.Stalls++ })
		until := time.Now().Add(s.dur).UnixNano()
		if s.stall != stallLoop {
			inc.onCancel.Store(int32(s.onCancel))
			inc.ioStall.Store(until)
		}
		if s.stall != stallRequests {
			inc.loopStall.Store(until)
		}
	case stepFaults:
		if inc == nil {
			break
		}
		w.count(func(st *simStats) { st.Bursts++ })
		inc.errPermille.Store(int32(s.permille))
		later = append(later, simQueued{at: w.since() + s.dur, burstEnd: inc})
	case stepRescale:
		w.count(func(st *simStats) { st.Rescales++ })
		w.mu.Lock()
		incs := slices.Clone(w.incs)
		w.mu.Unlock()
		for _, inc := range incs {
			if !inc.running() {
				continue
			}
			switch s.end {
			case endStop:
				inc.stop()
			case endKill:
				inc.kill()
			}
		}
		*cur = s.shape
		for slot := range cur.Q {
			w.start(*cur, slot)
		}
	}
	return later
}

func (w *simWorld) count(f func(*simStats)) {
	w.mu.Lock()
	f(&w.stats)
	w.mu.Unlock()
}

// newest returns the newest process of slot of shape that runs and that
// the schedule has not ended, or nil.
func (w *simWorld) newest(shape simShape, slot int) *simInc {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.incs) - 1; i >= 0; i-- {
		if inc := w.incs[i]; inc.shape == shape && inc.slot == slot && inc.running() {
			return inc
		}
	}
	return nil
}

// takeExited returns the processes that ended since the last call, after
// checking how they ended.
func (w *simWorld) takeExited() []*simInc {
	w.mu.Lock()
	out := w.exited
	w.exited = nil
	w.mu.Unlock()
	for _, inc := range out {
		w.checkExit(inc)
	}
	return out
}

// checkExit checks the error a process's Run returned: none, an injected
// fault, its crash, or the catalog saying that another process took its
// slot or that the job has another shape.
func (w *simWorld) checkExit(inc *simInc) {
	err := inc.err
	w.tracef("%v ended: %v", inc, err)
	switch {
	case err == nil:
	case errors.Is(err, errKilled) && inc.by.Load() == byKill:
	case errors.Is(err, errInjected), errors.Is(err, catalog.ErrReplaced), errors.Is(err, catalog.ErrMismatch):
	default:
		w.failf("%v ended with an error that is no injected fault's: %v", inc, err)
	}
}

// waitAll waits for every process to end (those still running must have
// been ended), and fails the schedule for those that hang.
func (w *simWorld) waitAll() {
	w.mu.Lock()
	incs := slices.Clone(w.incs)
	w.mu.Unlock()
	deadline := time.After(simStopWait)
	for _, inc := range incs {
		select {
		case <-inc.done:
		case <-deadline:
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			w.failf("hang: %v did not end within %v of its stop; goroutines:\n%s", inc, simStopWait, buf)
			return
		}
	}
	w.takeExited()
}

// deleter names the functions of the project that issued a delete, the
// innermost first, for the trace: which deletion took an object.
func deleter() string {
	pcs := make([]uintptr, 40)
	n := runtime.Callers(2, pcs)
	fr := runtime.CallersFrames(pcs[:n])
	var out []string
	for {
		f, more := fr.Next()
		if strings.Contains(f.Function, "dstlgo/dstl/") && !strings.Contains(f.Function, "faulty.") && !strings.Contains(f.Function, "job_test.") {
			out = append(out, f.Function[strings.LastIndex(f.Function, "/")+1:])
		}
		if !more || len(out) >= 4 {
			break
		}
	}
	return strings.Join(out, " < ")
}
