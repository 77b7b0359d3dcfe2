//go:build linux

package job_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/job"
	"github.com/dstlgo/dstl/statestore"
)

// The stalled process of TestStalledProcess runs as this test binary with
// these variables set.
const (
	stallDirEnv  = "DSTL_JOB_STALL_DIR"
	stallTimeEnv = "DSTL_JOB_STALL_GRACE"
)

// stallJob configures both processes of TestStalledProcess's job: 2
// instances in 2 processes, checkpoints every 100 ms, a grace of
// grace, the leader's collection every checkpoint and its sweep every
// 200 ms.
func stallJob(t testing.TB, dir string, proc int, grace time.Duration) (*dstl.Storage, catalog.Config, job.Config) {
	b, err := local.Open(context.Background(), local.Config{Root: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	dcfg := dstl.DefaultConfig(dir)
	dcfg.JobID = "stall"
	dcfg.BatchPersistDelay = time.Millisecond
	storage, err := dstl.New(dcfg, b, dstl.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	ccfg := catalog.Config{JobID: "stall", Instances: 2, Processes: 2, Process: proc, MaxParallelism: maxP, Grace: grace,
		SweepInterval: 200 * time.Millisecond, Logger: quiet}
	jcfg := job.Config{Interval: 100 * time.Millisecond, CollectInterval: 100 * time.Millisecond, Logger: quiet,
		State: statestore.Config{MaterializeInterval: 300 * time.Millisecond, MaterializeSize: -1}}
	return storage, ccfg, jcfg
}

// announcing is the stalled process's coordinator: before each commit of
// a checkpoint that is a multiple of 10 it prints "commit N" and waits a
// moment, so that the test stops it after its uploads and before its
// commit's put; after it, "committed N".
type announcing struct {
	*job.Catalog
	out *os.File
}

func (a announcing) Commit(ctx context.Context, n int64, states []catalog.InstanceState) (int64, error) {
	if n%10 != 0 {
		return a.Catalog.Commit(ctx, n, states)
	}
	fmt.Fprintf(a.out, "commit %d\n", n)
	time.Sleep(200 * time.Millisecond)
	c, err := a.Catalog.Commit(ctx, n, states)
	fmt.Fprintf(a.out, "committed %d\n", n)
	return c, err
}

// TestStalledProcessHelper is the stalled process of TestStalledProcess;
// it does nothing in a normal run.
func TestStalledProcessHelper(t *testing.T) {
	dir := os.Getenv(stallDirEnv)
	if dir == "" {
		t.Skip("run by TestStalledProcess")
	}
	grace, err := time.ParseDuration(os.Getenv(stallTimeEnv))
	if err != nil {
		t.Fatal(err)
	}
	storage, ccfg, jcfg := stallJob(t, dir, 1, grace)
	defer storage.Close()
	errs := make(chan error, 10)
	coord := announcing{job.NewCatalog(storage.Backend(), ccfg, jcfg.Interval, collect.Options{}), os.Stdout}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := job.Run(ctx, storage, coord, jcfg, openCounter(0, errs, nil)); err != nil {
		t.Fatal(err)
	}
}

// TestStalledProcess: a real process stopped (SIGSTOP) after the uploads
// of a checkpoint and before its commit, for three times the grace, while
// the leader commits and applies the deletion rule (sweeping every
// 200 ms), then continued (SIGCONT): its commit completes the checkpoint,
// and every object that any complete checkpoint names is there. The
// objects record the checkpoint they were made for, and the rule holds
// those a checkpoint that may still complete may reference, however old.
func TestStalledProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 10 s")
	}
	const grace = 1 * time.Second
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	child := exec.CommandContext(ctx, exe, "-test.run=^TestStalledProcessHelper$", "-test.v")
	child.Env = append(os.Environ(), stallDirEnv+"="+dir, stallTimeEnv+"="+grace.String())
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	child.Stderr = os.Stderr
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	childDone := make(chan error, 1)
	go func() { childDone <- child.Wait() }()
	defer func() {
		child.Process.Signal(syscall.SIGCONT)
		child.Process.Signal(syscall.SIGINT)
		child.Process.Kill()
		<-childDone
	}()
	commits, committed := make(chan int64, 1000), make(chan int64, 1000)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			ch := commits
			if rest, ok := strings.CutPrefix(line, "committed "); ok {
				line, ch = "commit "+rest, committed
			}
			if n, ok := strings.CutPrefix(line, "commit "); ok {
				if v, err := strconv.ParseInt(n, 10, 64); err == nil {
					ch <- v
				}
			}
		}
	}()

	storage, ccfg, jcfg := stallJob(t, dir, 0, grace)
	defer storage.Close()
	errs := make(chan error, 10)
	var mu sync.Mutex
	var complete []int64
	jcfg.OnEvent = func(e job.Event) {
		if e.Kind == job.EventCompleted && e.Instance == 0 {
			mu.Lock()
			complete = append(complete, e.Checkpoint)
			mu.Unlock()
		}
	}
	// At each checkpoint that completes (the leader's task is told, and
	// no collection runs meanwhile), every object its commits name is
	// there.
	checked := 0
	check := func(n int64) error {
		l, err := catalog.Inspect(context.Background(), storage.Backend(), "stall", catalog.InspectOptions{Commits: func(_, m int64) bool { return m == n }})
		if err != nil {
			return err
		}
		stored := map[string]bool{}
		if err := storage.Backend().List(context.Background(), "stall/", func(oi backends.ObjectInfo) error { stored[oi.Name] = true; return nil }); err != nil {
			return err
		}
		c := l.Checkpoint(0, n)
		if c == nil || c.State != catalog.Complete {
			return nil // a checkpoint before the latest complete one, confirmed with it, or dropped since
		}
		for _, cm := range c.Commits {
			for _, p := range cm.Parts {
				for _, o := range p.Objects {
					if !stored[o] {
						return fmt.Errorf("checkpoint %d is complete, and %s, which instance %d's part names, is gone", n, o, p.Instance)
					}
					checked++
				}
			}
		}
		return nil
	}
	open := func(ctx context.Context, in *job.Instance) (job.Task, error) {
		t, err := openCounter(0, errs, nil)(ctx, in)
		return checking{t, check}, err
	}
	leaderCtx, stopLeader := context.WithCancel(ctx)
	leaderDone := make(chan error, 1)
	go func() {
		leaderDone <- job.Run(leaderCtx, storage, job.NewCatalog(storage.Backend(), ccfg, jcfg.Interval, collect.Options{}), jcfg, open)
	}()
	completed := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		if len(complete) == 0 {
			return 0
		}
		return complete[len(complete)-1]
	}

	// Stop the process at a commit once the job completed a few
	// checkpoints (a materialisation has run, too).
	var stalled int64
	deadline := time.After(time.Minute)
	for stalled == 0 {
		select {
		case n := <-commits:
			if completed() >= 5 {
				if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				stalled = n
			}
		case err := <-leaderDone:
			t.Fatalf("the leader stopped: %v", err)
		case <-deadline:
			t.Fatal("the job completed no checkpoint")
		}
	}
	before := completed()
	time.Sleep(3 * grace) // the leader commits and sweeps meanwhile
	if err := child.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Once its commit landed, the stalled checkpoint is complete in a
	// listing (a starter's view), and pending for the deletion rule.
	for n := int64(0); n != stalled; {
		select {
		case n = <-committed:
		case <-deadline:
			t.Fatal("the stalled commit did not land")
		}
	}
	if err := check(stalled); err != nil {
		t.Fatal(err)
	}
	// The stalled commit's checkpoint, or a later one, completes.
	for completed() < stalled {
		select {
		case err := <-leaderDone:
			t.Fatalf("the leader stopped: %v", err)
		case <-deadline:
			t.Fatalf("no checkpoint completed after the stall (stalled at %d, completed %d before)", stalled, before)
		case <-time.After(10 * time.Millisecond):
		}
	}
	stopLeader()
	if err := <-leaderDone; err != nil {
		t.Fatal(err) // a check failed: the leader's Run stops with it
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	t.Logf("stalled at checkpoint %d for %v with the job at %d; %d objects of complete checkpoints checked", stalled, 3*grace, before, checked)
}

// checking is a task that checks each checkpoint told complete.
type checking struct {
	job.Task
	check func(n int64) error
}

func (c checking) Complete(ctx context.Context, n int64) error {
	if err := c.check(n); err != nil {
		return err
	}
	return c.Task.Complete(ctx, n)
}
