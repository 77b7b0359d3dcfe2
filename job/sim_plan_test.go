package job_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/dstlgo/dstl/backends/faulty"
	"github.com/dstlgo/dstl/catalog"
)

// simShape is a configuration of the job: P instances in Q processes.
type simShape struct{ P, Q int }

func (s simShape) String() string { return fmt.Sprintf("%d instances in %d processes", s.P, s.Q) }

// simParams is what a seed draws: the job's configuration, the faults
// and the schedule of steps.
type simParams struct {
	mode          catalog.Mode
	retain        int
	interval      time.Duration
	grace         time.Duration
	sweep         time.Duration
	collectEvery  time.Duration
	stopTimeout   time.Duration
	idleWait      time.Duration
	matInterval   time.Duration // -1: never by age
	matSize       int64         // -1: never by size
	preemptive    int64         // the log's pre-emptive persist threshold; 0: none
	uploadTimeout time.Duration
	attempts      int
	recordEvery   time.Duration // one record of each key group's input arrives this often
	shape         simShape      // the first configuration
	errPermille   int           // requests failed, per mille, outside bursts
	delayPermille int           // requests delayed by up to 3 ms, per mille
	steps         []simStep
	final         simEnd // how the processes end before the last restart
}

// simStepKind says what a step does.
type simStepKind int

const (
	stepKill    simStepKind = iota // a process crashes: its requests fail from then on, its context ends
	stepStop                       // a process stops cleanly: its context ends (a last checkpoint)
	stepRestart                    // a new process for a slot, whether the old one runs or not
	stepStall                      // a process's requests, its loop or both block, past the grace
	stepFaults                     // a burst of failed requests of one process
	stepRescale                    // the job moves to another shape
)

// simStall says what a stall blocks.
type simStall int

const (
	stallRequests simStall = iota // every request waits (a partition)
	stallLoop                     // the runner's loop waits in a task's Process (a GC pause)
	stallBoth                     // both (SIGSTOP)
)

// simEnd says how a rescale or the end of the schedule ends the running
// processes.
type simEnd int

const (
	endStop    simEnd = iota // they stop cleanly
	endKill                  // they crash
	endOverlap               // they run on, and learn they are fenced
)

// simStep is one step of a schedule.
type simStep struct {
	at           time.Duration // since the start
	kind         simStepKind
	slot         int
	restartAfter time.Duration // for a kill or a stop: when a new process takes the slot; -1: none
	stall        simStall
	onCancel     faulty.OnCancel // what a stalled request does when its caller gives up
	dur          time.Duration   // of a stall or a burst
	permille     int             // of a burst
	shape        simShape        // of a rescale
	end          simEnd          // of a rescale
}

func (s simStep) String() string {
	switch s.kind {
	case stepKill, stepStop:
		what := map[simStepKind]string{stepKill: "kill", stepStop: "stop"}[s.kind]
		if s.restartAfter < 0 {
			return fmt.Sprintf("%s process %d", what, s.slot)
		}
		return fmt.Sprintf("%s process %d, restart it after %v", what, s.slot, s.restartAfter)
	case stepRestart:
		return fmt.Sprintf("start another process %d", s.slot)
	case stepStall:
		what := [...]string{"requests", "loop", "requests and loop"}[s.stall]
		return fmt.Sprintf("stall process %d's %s for %v (cancelled requests: %s)", s.slot, what, s.dur, onCancelName(s.onCancel))
	case stepFaults:
		return fmt.Sprintf("fail %d‰ of process %d's requests for %v", s.permille, s.slot, s.dur)
	case stepRescale:
		return fmt.Sprintf("rescale to %v (the old processes: %s)", s.shape, endName(s.end))
	}
	return "?"
}

func onCancelName(o faulty.OnCancel) string {
	return map[faulty.OnCancel]string{faulty.Abort: "abort", faulty.Ignore: "ignore", faulty.Complete: "complete", faulty.Late: "land late"}[o]
}

func endName(e simEnd) string { return [...]string{"stop", "crash", "run on"}[e] }

// simPlan draws a seed's parameters and schedule. It depends on the seed
// alone: the schedule is the same at every run, though the interleaving
// of the processes' goroutines is not.
func simPlan(seed uint64) simParams {
	r := rand.New(rand.NewPCG(seed, 0x6a6f622d73696d)) // "job-sim"
	var p simParams
	p.mode = catalog.Aligned
	if r.IntN(5) == 0 {
		p.mode = catalog.Independent
	}
	p.retain = 1 + r.IntN(3)
	p.interval = time.Duration(10+r.IntN(16)) * time.Millisecond
	p.grace = p.interval * time.Duration(2+r.IntN(5))
	p.sweep = p.grace / time.Duration(1+r.IntN(4))
	p.collectEvery = p.interval * time.Duration(1+r.IntN(2))
	p.stopTimeout = p.interval * time.Duration(1+r.IntN(3))
	p.idleWait = time.Duration(1+r.IntN(2)) * time.Millisecond
	p.matInterval, p.matSize = -1, -1
	switch r.IntN(3) {
	case 1:
		p.matInterval = p.interval * time.Duration(2+r.IntN(5))
	case 2:
		p.matSize = 2 << 10
	}
	if r.IntN(4) == 0 {
		p.preemptive = 1 << 10
	}
	p.uploadTimeout = time.Duration(50+r.IntN(251)) * time.Millisecond
	p.attempts = 2 + r.IntN(2)
	p.recordEvery = time.Duration(1+r.IntN(4)) * time.Millisecond
	p.shape = simRandomShape(r, simShape{})
	if r.IntN(4) > 0 {
		p.errPermille = r.IntN(31)
		p.delayPermille = r.IntN(200)
	}
	shape := p.shape
	at := p.interval * time.Duration(3+r.IntN(4))
	for range 4 + r.IntN(11) {
		s := simStep{at: at, slot: r.IntN(shape.Q), restartAfter: -1}
		switch k := r.IntN(20); {
		case k < 5:
			s.kind = stepKill
			if r.IntN(5) > 0 {
				s.restartAfter = p.interval * time.Duration(r.IntN(6))
			}
		case k < 7:
			s.kind = stepStop
			if r.IntN(4) > 0 {
				s.restartAfter = p.interval * time.Duration(r.IntN(6))
			}
		case k < 9:
			s.kind = stepRestart
		case k < 14:
			s.kind = stepStall
			s.stall = simStall(r.IntN(3))
			s.onCancel = []faulty.OnCancel{faulty.Abort, faulty.Abort, faulty.Ignore, faulty.Late}[r.IntN(4)]
			s.dur = p.grace/2 + time.Duration(r.Int64N(int64(3*p.grace)))
		case k < 17:
			s.kind = stepFaults
			s.permille = 50 + r.IntN(451)
			s.dur = p.interval * time.Duration(2+r.IntN(6))
		default:
			s.kind = stepRescale
			s.shape = simRandomShape(r, shape)
			s.end = simEnd(r.IntN(3))
			shape = s.shape
		}
		p.steps = append(p.steps, s)
		at += p.interval * time.Duration(2+r.IntN(7))
	}
	p.final = simEnd(r.IntN(2))
	return p
}

// simRandomShape draws a shape other than not: 1 to 6 instances in 1 to 3
// processes.
func simRandomShape(r *rand.Rand, not simShape) simShape {
	for {
		s := simShape{P: 1 + r.IntN(6)}
		s.Q = 1 + r.IntN(min(s.P, 3))
		if s != not {
			return s
		}
	}
}

// describe returns the parameters and the schedule, a line each.
func (p simParams) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s mode, retain %d, %v; checkpoints every %v, grace %v, sweep every %v, collect every %v, stop timeout %v\n",
		p.mode, p.retain, p.shape, p.interval, p.grace, p.sweep, p.collectEvery, p.stopTimeout)
	mat := "never materialise"
	switch {
	case p.matInterval > 0:
		mat = fmt.Sprintf("materialise every %v", p.matInterval)
	case p.matSize > 0:
		mat = fmt.Sprintf("materialise at %d bytes", p.matSize)
	}
	fmt.Fprintf(&b, "%s, pre-emptive persist at %d bytes (0: none), upload timeout %v, %d attempts; %d‰ of requests fail, %d‰ slow; a record every %v\n",
		mat, p.preemptive, p.uploadTimeout, p.attempts, p.errPermille, p.delayPermille, p.recordEvery)
	for _, s := range p.steps {
		fmt.Fprintf(&b, "  at %v: %v\n", s.at, s)
	}
	fmt.Fprintf(&b, "  then: the processes %s, faults end, and new ones restore and complete a checkpoint", endName(p.final))
	return b.String()
}
