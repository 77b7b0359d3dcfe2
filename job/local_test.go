package job_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/duplicating"
	"github.com/dstlgo/dstl/job"
	"github.com/dstlgo/dstl/statestore"
)

// TestRunLocalRecoveryOfSeveralInstances: a process that runs two
// instances with local recovery stops after a checkpoint, and a new
// process (a new storage on the same local recovery directory) restores
// it: each instance reads its change sets from the local copies, none
// from the store (the copies are there: the first stop left them). The
// instances take turns writing, so that their change sets are in objects of
// their own: instance 1 writes until checkpoint 2 completes, instance 0
// from checkpoint 3 on, and neither restore names the other's objects.
func TestRunLocalRecoveryOfSeveralInstances(t *testing.T) {
	dir := t.TempDir()
	const interval = 50 * time.Millisecond
	runOnce := func(wantRestore bool) map[int]statestore.RestoreReport {
		t.Helper()
		cfg := dstl.DefaultConfig(filepath.Join(dir, "store"))
		cfg.JobID = "local"
		cfg.BatchPersistDelay = time.Millisecond
		cfg.LocalRecoveryEnabled, cfg.LocalRecoveryDir = true, filepath.Join(dir, "local")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		storage, err := dstl.Open(ctx, cfg, dstl.WithLogger(quiet), dstl.WithLocalRecovery(duplicating.Open))
		if err != nil {
			t.Fatal(err)
		}
		defer storage.Close()
		errs := make(chan error, 10)
		counters := openCounter(200, errs, nil)
		cps := map[int]*statestore.Checkpointer{}
		reports := map[int]statestore.RestoreReport{}
		completed := map[int]int64{}
		done := make(chan struct{})
		var phase atomic.Int64 // the last checkpoint that completed
		open := func(ctx context.Context, in *job.Instance) (job.Task, error) {
			cps[in.Index] = in.Checkpointer
			task, err := counters(ctx, in)
			if err != nil {
				return nil, err
			}
			if in.Index == 1 {
				return turns{task, func() bool { return phase.Load() < 2 }}, nil
			}
			return turns{task, func() bool { return phase.Load() >= 3 }}, nil
		}
		jcfg := job.Config{Interval: interval, Logger: quiet, State: statestore.Config{MaterializeInterval: -1, MaterializeSize: -1},
			OnEvent: func(e job.Event) {
				switch e.Kind {
				case job.EventRestored:
					reports[e.Instance] = cps[e.Instance].Stats().LastRestore
				case job.EventCompleted:
					completed[e.Instance] = e.Checkpoint
					phase.Store(max(phase.Load(), e.Checkpoint))
					if len(completed) == 2 && completed[0] >= 5 && completed[1] >= 5 {
						select {
						case <-done:
						default:
							close(done)
						}
					}
				}
			}}
		coord := job.NewCatalog(storage.Backend(), catalog.Config{JobID: "local", Instances: 2, Processes: 1, MaxParallelism: maxP,
			Grace: time.Hour, Logger: quiet}, interval, collect.Options{})
		ran := make(chan error, 1)
		go func() { ran <- job.Run(ctx, storage, coord, jcfg, open) }()
		select {
		case <-done:
		case err := <-ran:
			t.Fatalf("Run ended: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("no checkpoint 5 complete")
		}
		cancel()
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		return reports
	}
	runOnce(false)
	for i, r := range runOnce(true) {
		t.Logf("instance %d restored %d change sets from local copies, %d from the store", i, r.Log.LocalSets, r.Log.RemoteSets)
		if r.Log.LocalSets+r.Log.RemoteSets == 0 {
			t.Errorf("instance %d restored no change set", i)
		}
		if r.Log.RemoteSets > 0 {
			t.Errorf("instance %d read %d change sets from the store (%d locally): its local copies are gone (fallbacks %v)",
				i, r.Log.RemoteSets, r.Log.LocalSets, r.Log.Fallbacks)
		}
	}
}

// turns is a task that processes only while its turn says so.
type turns struct {
	job.Task
	turn func() bool
}

func (t turns) Process(ctx context.Context) (int, error) {
	if !t.turn() {
		return 0, nil
	}
	return t.Task.Process(ctx)
}
