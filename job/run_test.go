package job_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/job"
	"github.com/dstlgo/dstl/statestore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunRestartsAndRescales: the processes of a counting job checkpoint,
// stop, restart, are fenced by a restarted process and rejoin, and are
// rescaled (4 instances in 2 processes, then 2 instances in 1 process);
// every instance, at every restore, holds exactly the counts of the input
// up to the offsets it restored.
func TestRunRestartsAndRescales(t *testing.T) {
	b := dstltest.NewBackend()
	errs := make(chan error, 100)
	const interval = 40 * time.Millisecond
	checkErrs := func() {
		t.Helper()
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}
	completed := func(e job.Event) bool { return e.Kind == job.EventCompleted && e.Checkpoint >= 3 }

	// Generation 1: 4 instances in 2 processes.
	ps := []*process{startProcess(t, b, 4, 2, 0, interval, errs, nil), startProcess(t, b, 4, 2, 1, interval, errs, nil)}
	for _, p := range ps {
		p.waitEvent(t, "a complete checkpoint", completed)
	}
	// Process 1 restarts while process 0 runs: a new generation fences
	// process 0, which rejoins it.
	if err := ps[1].stop(t); err != nil {
		t.Fatal(err)
	}
	ps[1] = startProcess(t, b, 4, 2, 1, interval, errs, nil)
	ps[0].waitEvent(t, "the fence", func(e job.Event) bool { return e.Kind == job.EventFenced })
	ps[0].waitEvent(t, "the rejoin", func(e job.Event) bool { return e.Kind == job.EventJoined && e.Generation >= 2 })
	for _, p := range ps {
		p.waitEvent(t, "a restore", func(e job.Event) bool { return e.Kind == job.EventRestored && e.Generation >= 2 && e.Checkpoint > 0 })
		p.waitEvent(t, "a complete checkpoint", func(e job.Event) bool { return e.Kind == job.EventCompleted && e.Generation >= 2 })
	}
	for _, p := range ps {
		if err := p.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	checkErrs()

	// 2 instances in 1 process: each restores two of the 4 instances'
	// parts, and their counts merge.
	one := startProcess(t, b, 2, 1, 0, interval, errs, nil)
	one.waitEvent(t, "a restore of merged parts", func(e job.Event) bool { return e.Kind == job.EventRestored && e.Checkpoint == 0 && e.Generation >= 3 })
	one.waitEvent(t, "a complete checkpoint", func(e job.Event) bool { return e.Kind == job.EventCompleted })
	if err := one.stop(t); err != nil {
		t.Fatal(err)
	}
	// And back to 4 instances in 2 processes.
	ps = []*process{startProcess(t, b, 4, 2, 0, interval, errs, nil), startProcess(t, b, 4, 2, 1, interval, errs, nil)}
	for _, p := range ps {
		p.waitEvent(t, "a complete checkpoint", func(e job.Event) bool { return e.Kind == job.EventCompleted })
	}
	for _, p := range ps {
		if err := p.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	checkErrs()
}

// TestRunReplaced: a process whose slot another process took stops with
// the catalog's ErrReplaced.
func TestRunReplaced(t *testing.T) {
	b := dstltest.NewBackend()
	errs := make(chan error, 10)
	const interval = 30 * time.Millisecond
	first := startProcess(t, b, 1, 1, 0, interval, errs, nil)
	first.waitEvent(t, "a complete checkpoint", func(e job.Event) bool { return e.Kind == job.EventCompleted })
	second := startProcess(t, b, 1, 1, 0, interval, errs, nil)
	select {
	case err := <-first.done:
		if !errors.Is(err, catalog.ErrReplaced) {
			t.Fatalf("the replaced process: %v, want ErrReplaced", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the replaced process runs on")
	}
	second.waitEvent(t, "a complete checkpoint", func(e job.Event) bool { return e.Kind == job.EventCompleted && e.Generation == 2 })
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestRunStopCutsATakeShort: a stop that comes while the instances take
// a checkpoint (here, while the task gives its metadata) fails that
// checkpoint, which the runner reports (EventTakeFailed), and the last
// checkpoint is the next one: Metadata is asked once per checkpoint, and
// Complete is told only checkpoints that were taken. (The job runner's
// simulation found it, seed 1: the last checkpoint took the number of
// the one cut short, whose metadata the task had given, and the
// checkpoint cut short went unreported.)
func TestRunStopCutsATakeShort(t *testing.T) {
	b := dstltest.NewBackend()
	errs := make(chan error, 10)
	const interval = 200 * time.Millisecond // the stop comes within the tick of the checkpoint cut short
	ccfg := catalog.Config{JobID: "cut", Instances: 1, MaxParallelism: maxP, Grace: time.Hour, Logger: quiet}
	dcfg := dstl.DefaultConfig("memory")
	dcfg.JobID = "cut"
	storage, err := dstl.New(dcfg, b, dstl.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer storage.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var failed []int64
	var completes []int64
	open := func(ctx context.Context, in *job.Instance) (job.Task, error) {
		task, err := openCounter(0, errs, nil)(ctx, in)
		return &stopAt{Task: task, stop: cancel, completes: &completes}, err
	}
	jcfg := job.Config{Interval: interval, Logger: quiet, State: statestore.Config{MaterializeInterval: -1, MaterializeSize: -1},
		OnEvent: func(e job.Event) {
			if e.Kind == job.EventTakeFailed {
				failed = append(failed, e.Checkpoint)
			}
		}}
	if err := job.Run(ctx, storage, job.NewCatalog(b, ccfg, interval, collect.Options{}), jcfg, open); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Error(err)
	default:
	}
	if len(failed) != 1 {
		t.Fatalf("checkpoints reported failed: %v, want the one the stop cut short", failed)
	}
	for _, n := range completes {
		if n == failed[0] {
			t.Errorf("Complete(%d) of the checkpoint the stop cut short (completes %v)", n, completes)
		}
	}
}

// stopAt is a task that processes a record at every call and ends Run's
// context when the runner asks for the metadata of its first checkpoint.
type stopAt struct {
	job.Task
	stop      context.CancelFunc
	stopped   bool
	completes *[]int64
}

func (s *stopAt) Metadata(n int64) map[string]string {
	if !s.stopped {
		s.stopped = true
		s.stop()
	}
	return s.Task.Metadata(n)
}

func (s *stopAt) Complete(ctx context.Context, n int64) error {
	*s.completes = append(*s.completes, n)
	return s.Task.Complete(ctx, n)
}

// TestRunIndependent: in the independent mode every commit completes its
// process's checkpoint.
func TestRunIndependent(t *testing.T) {
	b := dstltest.NewBackend()
	errs := make(chan error, 10)
	ind := func(_ *job.Config, c *catalog.Config) { c.Mode = catalog.Independent }
	ps := []*process{startProcess(t, b, 2, 2, 0, 30*time.Millisecond, errs, ind), startProcess(t, b, 2, 2, 1, 30*time.Millisecond, errs, ind)}
	for _, p := range ps {
		p.waitEvent(t, "a complete checkpoint", func(e job.Event) bool { return e.Kind == job.EventCompleted && e.Checkpoint >= 2 })
		if err := p.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}
