package sim

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var (
	flagSeed    = flag.Int64("sim.seed", -1, "run only this seed (replays a failure)")
	flagSeeds   = flag.Int("sim.seeds", envInt("SIM_SEEDS", 0), "number of seeds to run from -sim.start (0: the short fixed set); env SIM_SEEDS")
	flagStart   = flag.Uint64("sim.start", uint64(envInt("SIM_START", 1)), "first seed of -sim.seeds; env SIM_START")
	flagWorkers = flag.Int("sim.workers", envInt("SIM_WORKERS", 4*runtime.GOMAXPROCS(0)), "schedules run at once (they mostly wait on timers: default 4 x GOMAXPROCS); env SIM_WORKERS")
	flagMaxFail = flag.Int("sim.maxfail", 5, "stop after this many failing seeds")
	flagTrace   = flag.Bool("sim.trace", false, "with -v and one seed, log every event of a catalog schedule")
	flagWatch   = flag.Duration("sim.watchdog", 60*time.Second, "a schedule running longer fails as a hang, with a dump of every goroutine")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// fixedSeeds is the short set `go test` runs by default (a few seconds,
// with -race too); -short runs shortSeeds.
const fixedSeeds, shortSeeds = 48, 12

// replay returns the command that reruns seeds of test, with -race when
// this binary was built with the race detector.
func replay(test, args string) string {
	race := ""
	if raceEnabled {
		race = "-race "
	}
	return fmt.Sprintf("go test %s./sim -run '^%s$' %s -v", race, test, args)
}

// seedsRun says what runSeeds ran.
type seedsRun struct {
	start      uint64
	n, workers int
	ran        int
	failed     int
	elapsed    time.Duration
}

// runSeeds runs the schedules of one simulation, by the flags: the short
// fixed set, -sim.seeds=N from -sim.start=S, or -sim.seed=X alone. run
// runs one seed (concurrently with others) and returns its duration. A
// failing seed prints its replay command; after each group of seeds no
// goroutine may be left.
// hint follows the replay command of a failing seed.
func runSeeds(t *testing.T, test, hint string, run func(seed uint64, opt Options) (time.Duration, error)) seedsRun {
	return runSeedsOf(t, test, hint, fixedSeeds, shortSeeds, run)
}

// runSeedsOf is runSeeds with the default number of seeds, and the number
// with -short, of a simulation.
func runSeedsOf(t *testing.T, test, hint string, fixed, short int, run func(seed uint64, opt Options) (time.Duration, error)) seedsRun {
	start, n := uint64(1), fixed
	if testing.Short() {
		n = short
	}
	if *flagSeeds > 0 {
		start, n = *flagStart, *flagSeeds
	}
	if *flagSeed >= 0 {
		start, n = uint64(*flagSeed), 1
	}
	workers := max(1, *flagWorkers)
	if n == 1 {
		workers = 1
	}
	opt := Options{Watchdog: *flagWatch}
	if testing.Verbose() && n <= 20 {
		opt.Logf = t.Logf
		opt.Trace = *flagTrace && n == 1
	}
	// Seeds run in groups; after each group, with no schedule running, no
	// goroutine may be left (one worker: after every schedule).
	group := workers * 64
	if workers == 1 {
		group = 1
	}
	begin := time.Now()
	var (
		mu        sync.Mutex
		failed    int
		ran       int
		durations []time.Duration
		slowest   []slow
	)
	// The race detector reports a race when it happens, naming no seed:
	// say which seeds were running then.
	groups := raceEnabled && n > 1
	if groups {
		t.Logf("race detector on, %d schedules at once: a race report (\"WARNING: DATA RACE\") names no seed; it belongs to the group of seeds announced last before it (with -sim.workers=1, a group is one seed)", workers)
	}
	var stop atomic.Bool
	for g := start; g < start+uint64(n) && !stop.Load(); g += uint64(group) {
		end := min(g+uint64(group), start+uint64(n))
		if groups {
			cmd := replay(test, fmt.Sprintf("-sim.start=%d -sim.seeds=%d -sim.workers=1", g, end-g))
			if end-g == 1 {
				cmd = replay(test, fmt.Sprintf("-sim.seed=%d", g))
			}
			fmt.Fprintf(os.Stderr, "=== seeds [%d, %d) running; replay: %s\n", g, end, cmd)
		}
		seeds := make(chan uint64)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for seed := range seeds {
					d, err := run(seed, opt)
					mu.Lock()
					if err != nil {
						failed++
						t.Errorf("%v\nreplay: %s%s", err, replay(test, fmt.Sprintf("-sim.seed=%d", seed)), hint)
						if failed >= *flagMaxFail {
							stop.Store(true)
						}
					}
					ran++
					durations = append(durations, d)
					slowest = append(slowest, slow{seed, d})
					slices.SortFunc(slowest, func(a, b slow) int { return int(b.d - a.d) })
					slowest = slowest[:min(len(slowest), 3)]
					mu.Unlock()
				}
			})
		}
		for seed := g; seed < end && !stop.Load(); seed++ {
			seeds <- seed
		}
		close(seeds)
		wg.Wait()
		if err := goleak.Find(); err != nil {
			cmd := replay(test, fmt.Sprintf("-sim.start=%d -sim.seeds=%d -sim.workers=1", g, end-g))
			if workers == 1 {
				cmd = replay(test, fmt.Sprintf("-sim.seed=%d", g))
			}
			t.Fatalf("goroutines left after the schedules of seeds [%d, %d): %v\nreplay: %s", g, end, err, cmd)
		}
	}
	slices.Sort(durations)
	if k := len(durations); k > 0 {
		t.Logf("schedule durations: median %v, 90%% %v, 99%% %v, max %v; slowest seeds %v", durations[k/2], durations[k*9/10], durations[k*99/100], durations[k-1], slowest)
	}
	return seedsRun{start: start, n: n, workers: workers, ran: ran, failed: failed, elapsed: time.Since(begin)}
}

// TestSimulation runs seeded schedules of the engine over the fault
// backend (see the package documentation). By default it runs seeds 1 to
// 48 (1 to 12 with -short); -sim.seeds=N -sim.start=S runs N seeds from S,
// -sim.seed=X one seed.
func TestSimulation(t *testing.T) {
	var (
		mu        sync.Mutex
		faultFree int
		abrupt    int
		persists  int
		verified  int
		unverif   int
		confirmed int
		pending   int
		left      int
	)
	hint := "  (add -count=20 if it does not fail at once: goroutine timing varies)"
	r := runSeeds(t, "TestSimulation", hint, func(seed uint64, opt Options) (time.Duration, error) {
		st, err := Run(seed, opt)
		mu.Lock()
		defer mu.Unlock()
		if st.FaultFree {
			faultFree++
		}
		if st.Abrupt {
			abrupt++
		}
		persists += st.Persists
		verified += st.Verified
		unverif += st.Unverifiable
		confirmed += st.Confirmed
		pending += st.Pending
		left += st.Objects
		return st.Duration, err
	})
	t.Logf("%d schedules (seeds %d..%d, %d workers) in %v: %.0f schedules/s; %d failed; %d fault-free, %d closed abruptly; %d persists, %d returned handles (and %d seen only once the engine could have released their objects) and %d confirmed handles and %d handles of checkpoints pending at close read back; %d objects left in all",
		r.ran, r.start, r.start+uint64(r.n)-1, r.workers, r.elapsed.Round(time.Millisecond), float64(r.ran)/r.elapsed.Seconds(), r.failed, faultFree, abrupt, persists, verified, unverif, confirmed, pending, left)
}

type slow struct {
	seed uint64
	d    time.Duration
}

func (s slow) String() string { return fmt.Sprintf("%d (%v)", s.seed, s.d.Round(time.Millisecond)) }
