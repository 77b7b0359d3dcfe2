package job_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/job"
)

// restoreGate holds the Gets of the job's data objects (not of its
// catalog) until its gate opens, and remembers the first name held.
type restoreGate struct {
	backends.Backend
	gate chan struct{}
	mu   sync.Mutex
	held string
}

// Unwrap returns the backend the calls go to.
func (g *restoreGate) Unwrap() backends.Backend { return g.Backend }

func (g *restoreGate) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if !strings.Contains(name, "_catalog") {
		g.mu.Lock()
		if g.held == "" {
			g.held = name
		}
		g.mu.Unlock()
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Backend.Get(ctx, name, offset, length)
}

func (g *restoreGate) heldName() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// TestRunFencedDuringRestore: a process whose restore finds an object
// gone because a newer generation started meanwhile (and its deletion
// rule removed what only the older generation restored) learns that it
// is fenced and joins again, which ends it with the catalog's
// ErrReplaced when another process took its slot, rather than with the
// missing object's error. The job runner's simulation found it (go test
// ./job -run '^TestJobSimulation$' -job.sim.seed=2485, under load).
func TestRunFencedDuringRestore(t *testing.T) {
	b := dstltest.NewBackend()
	errs := make(chan error, 10)
	const interval = 30 * time.Millisecond
	first := startProcess(t, b, 1, 1, 0, interval, errs, nil)
	first.waitEvent(t, "a complete checkpoint", func(e job.Event) bool { return e.Kind == job.EventCompleted })
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	// The second process joins generation 2 and waits in its restore.
	gated := &restoreGate{Backend: b, gate: make(chan struct{})}
	second := startProcess(t, gated, 1, 1, 0, interval, errs, nil)
	second.waitEvent(t, "the second process's join", func(e job.Event) bool { return e.Kind == job.EventJoined })
	deadline := time.Now().Add(30 * time.Second)
	for gated.heldName() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the second process's restore read nothing")
		}
		time.Sleep(time.Millisecond)
	}
	// A third takes its slot in generation 3; then what generation 2
	// restores is deleted, as generation 3's deletion rule may do once
	// it needs it no more.
	third := startProcess(t, b, 1, 1, 0, interval, errs, nil)
	third.waitEvent(t, "the third process's join", func(e job.Event) bool { return e.Kind == job.EventJoined && e.Generation == 3 })
	if err := third.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(t.Context(), gated.heldName()); err != nil {
		t.Fatal(err)
	}
	close(gated.gate)
	select {
	case err := <-second.done:
		if !errors.Is(err, catalog.ErrReplaced) {
			t.Fatalf("the second process ended with %v, want ErrReplaced", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second process runs on")
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}
