package job_test

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/job"
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
