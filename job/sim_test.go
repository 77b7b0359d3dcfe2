package job_test

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The simulation of the job runner (TestJobSimulation).
//
// A seed draws a job (the catalog's mode, retention, grace and sweep,
// the checkpoint and collection intervals, materialisation by age or
// size, pre-emptive persists, the upload timeout and attempts, a shape of
// 1 to 6 instances in 1 to 3 processes, a rate of failed and of slow
// requests) and a schedule of steps: process crashes (its requests fail
// from then on and its context ends, so that its last checkpoint fails;
// requests under way go on), clean stops, restarts after either, another
// process for a running one's slot, stalls (from half the grace to
// several graces) of a process's requests (which, when their caller gives
// up, abort, complete or land later), of its loop (a task's Process that
// heeds nothing, as in a GC pause) or of both (SIGSTOP), bursts of failed
// requests (some of them taking effect with their answer lost), and
// rescales (the old processes stop, crash or run on until fenced). A
// process that ends by itself (a fault in its join or restore; another
// took its slot) is restarted if its slot has none. Then faults end,
// every process ends, and new processes restore and complete a
// checkpoint.
//
// Each process is a goroutine running job.Run with a dstl.Storage of its
// own, over one in-memory store (backends/mem) behind a fault wrapper of
// its own (backends/faulty), with the job.Catalog coordinator. Each
// instance's task counts the words of its key groups' inputs in a
// key-value store, its records arriving at a fixed rate. The runner uses
// real time, in milliseconds: the schedule is the seed's, the
// interleavings are the machine's, and the checks hold for every one:
//
//   - exactly-once state: every restored instance's counts are those of
//     its inputs up to the offsets it restored;
//   - Complete is told, per instance and generation, in order, without
//     gaps or repeats, a prefix of the checkpoints the instance took
//     part in (those whose take did not fail), never before the restore;
//     Metadata is asked for ascending checkpoints;
//   - no rollback: no generation restores, for any key group, a
//     checkpoint or offset older than one an earlier generation's task
//     was told complete; and in the aligned mode no generation restores
//     a checkpoint older than one complete before its predecessor's
//     fence;
//   - in the store's order of changes: no checkpoint completes (the put
//     of its last commit, before its generation's successor is written,
//     above every checkpoint complete before) naming an object that is
//     gone, no generation record restores one, and no delete removes an
//     object a retained checkpoint of the live generation names (or what
//     it restored while it has fewer than Retain complete checkpoints),
//     nor the live generation's record or claims;
//   - every process's Run ends within a minute of its stop, with no
//     error but an injected fault, its crash, or the catalog's
//     ErrReplaced or ErrMismatch; with no faults, new processes complete a
//     checkpoint; no catalog object is damaged; no goroutine is left
//     (after each group of seeds, and after each seed with one worker).
var (
	simSeeds   = flag.Int("job.sim.seeds", 0, "TestJobSimulation: run this many seeds from -job.sim.start (0: the short fixed slice)")
	simStart   = flag.Uint64("job.sim.start", 1, "TestJobSimulation: the first seed of -job.sim.seeds")
	simSeed    = flag.Int64("job.sim.seed", -1, "TestJobSimulation: run this seed alone (replays a failure)")
	simWorkers = flag.Int("job.sim.workers", 4*runtime.GOMAXPROCS(0), "TestJobSimulation: seeds run at once")
	simMaxFail = flag.Int("job.sim.maxfail", 5, "TestJobSimulation: stop after this many failing seeds")
	simTrace   = flag.Bool("job.sim.trace", false, "TestJobSimulation: with -v and one seed, log the schedule, every event, and every delete with the functions that issued it")
)

// The short fixed slice of seeds that go test runs, and with -short.
const simFixedSeeds, simShortSeeds = 200, 40

// simFound are seeds that found bugs, each named by the test of its fix:
// go test runs them besides the fixed slice.
var simFound = []uint64{
	1,    // TestRunStopCutsATakeShort
	82,   // catalog's TestFencedPastTheGrace
	19,   // catalog's TestCollectAfterAFailedFenceRead
	6381, // statestore's TestSnapshotsRecordTheirCheckpoint (failed under load)
	2485, // TestRunFencedDuringRestore (failed under load)
}

// simReplay returns the command that runs seeds again.
func simReplay(args string) string {
	race := ""
	if raceEnabled {
		race = "-race "
	}
	return fmt.Sprintf("go test %s-count=1 ./job -run '^TestJobSimulation$' %s -v", race, args)
}

// TestJobSimulation runs seeded schedules of processes of one job
// through crashes, stops, stalls, request faults, restarts and rescales,
// and checks the runner's promises (see above): the short fixed slice of
// seeds, -job.sim.seeds=N from -job.sim.start=S, or -job.sim.seed=X
// alone.
func TestJobSimulation(t *testing.T) {
	start, n := uint64(1), simFixedSeeds
	if testing.Short() {
		n = simShortSeeds
	}
	found := simFound
	if *simSeeds > 0 {
		start, n, found = *simStart, *simSeeds, nil
	}
	if *simSeed >= 0 {
		start, n, found = uint64(*simSeed), 1, nil
	}
	var seeds []uint64
	for seed := start; seed < start+uint64(n); seed++ {
		seeds = append(seeds, seed)
	}
	for _, seed := range found {
		if seed >= start+uint64(n) {
			seeds = append(seeds, seed)
		}
	}
	workers := max(1, min(*simWorkers, len(seeds)))
	group := workers * 8 // seeds between two checks for goroutines left
	if workers == 1 {
		group = 1
	}
	var logf func(string, ...any)
	if n == 1 && *simTrace && testing.Verbose() {
		logf = t.Logf
	}
	ignore := goleak.IgnoreCurrent()
	begin := time.Now()
	var (
		mu      sync.Mutex
		failed  int
		ran     int
		total   simStats
		slowest struct {
			seed uint64
			d    time.Duration
		}
	)
	for len(seeds) > 0 && failed < *simMaxFail {
		batch := seeds[:min(group, len(seeds))]
		seeds = seeds[len(batch):]
		next := make(chan uint64)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for seed := range next {
					st, err := runJobSim(seed, logf)
					mu.Lock()
					ran++
					total.add(st)
					if st.Duration > slowest.d {
						slowest.seed, slowest.d = seed, st.Duration
					}
					if err != nil {
						failed++
						t.Errorf("seed %d failed:\n%v\nreplay: %s", seed, err, simReplay(fmt.Sprintf("-job.sim.seed=%d", seed)))
					}
					mu.Unlock()
				}
			})
		}
		for _, seed := range batch {
			mu.Lock()
			stop := failed >= *simMaxFail
			mu.Unlock()
			if stop {
				break
			}
			next <- seed
		}
		close(next)
		wg.Wait()
		if err := goleak.Find(ignore); err != nil {
			first, last := batch[0], batch[len(batch)-1]
			replay := simReplay(fmt.Sprintf("-job.sim.seeds=%d -job.sim.start=%d -job.sim.workers=1", last-first+1, first))
			if last-first+1 != uint64(len(batch)) {
				replay = simReplay("-job.sim.seed=S") + ", for each seed S"
			}
			t.Errorf("seeds %v left goroutines: %v\nreplay each alone: %s", batch, err, replay)
			return
		}
	}
	elapsed := time.Since(begin)
	which := fmt.Sprintf("seeds %d to %d", start, start+uint64(n)-1)
	if len(found) > 0 {
		which += fmt.Sprintf(" and those that found bugs, %v", found)
	}
	t.Logf("%d schedules (%s, %d at once) in %v: %d failed; the slowest, seed %d, took %v; in all: %v",
		ran, which, workers, elapsed.Round(time.Millisecond), failed, slowest.seed, slowest.d.Round(time.Millisecond), total)
}

// runJobSim runs the schedule of one seed and checks it. logf, when not
// nil, is told the schedule and every event.
func runJobSim(seed uint64, logf func(string, ...any)) (simStats, error) {
	w := newSimWorld(seed, logf)
	if logf != nil {
		logf("seed %d: %s", seed, w.p.describe())
	}
	w.run()
	w.check()
	w.stats.Duration = w.since()
	if len(w.failures) == 0 {
		return w.stats, nil
	}
	return w.stats, fmt.Errorf("%s\n%s", strings.Join(w.failures, "\n"), w.p.describe())
}
