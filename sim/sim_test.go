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

// replay returns the command that reruns seeds, with -race when this binary
// was built with the race detector.
func replay(args string) string {
	race := ""
	if raceEnabled {
		race = "-race "
	}
	return fmt.Sprintf("go test %s./sim -run TestSimulation %s -v", race, args)
}

// TestSimulation runs seeded schedules of the engine over the fault
// backend (see the package documentation). By default it runs seeds 1 to
// 48 (1 to 12 with -short); -sim.seeds=N -sim.start=S runs N seeds from S,
// -sim.seed=X one seed.
func TestSimulation(t *testing.T) {
	start, n := uint64(1), fixedSeeds
	if testing.Short() {
		n = shortSeeds
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
		faultFree int
		abrupt    int
		ran       int
		persists  int
		verified  int
		unverif   int
		confirmed int
		pending   int
		left      int
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
			cmd := replay(fmt.Sprintf("-sim.start=%d -sim.seeds=%d -sim.workers=1", g, end-g))
			if end-g == 1 {
				cmd = replay(fmt.Sprintf("-sim.seed=%d", g))
			}
			fmt.Fprintf(os.Stderr, "=== seeds [%d, %d) running; replay: %s\n", g, end, cmd)
		}
		seeds := make(chan uint64)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for seed := range seeds {
					st, err := Run(seed, opt)
					mu.Lock()
					if err != nil {
						failed++
						t.Errorf("%v\nreplay: %s  (add -count=20 if it does not fail at once: goroutine timing varies)", err, replay(fmt.Sprintf("-sim.seed=%d", seed)))
						if failed >= *flagMaxFail {
							stop.Store(true)
						}
					}
					if st.FaultFree {
						faultFree++
					}
					if st.Abrupt {
						abrupt++
					}
					ran++
					durations = append(durations, st.Duration)
					slowest = append(slowest, slow{seed, st.Duration})
					slices.SortFunc(slowest, func(a, b slow) int { return int(b.d - a.d) })
					slowest = slowest[:min(len(slowest), 3)]
					persists += st.Persists
					verified += st.Verified
					unverif += st.Unverifiable
					confirmed += st.Confirmed
					pending += st.Pending
					left += st.Objects
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
			cmd := replay(fmt.Sprintf("-sim.start=%d -sim.seeds=%d -sim.workers=1", g, end-g))
			if workers == 1 {
				cmd = replay(fmt.Sprintf("-sim.seed=%d", g))
			}
			t.Fatalf("goroutines left after the schedules of seeds [%d, %d): %v\nreplay: %s", g, end, err, cmd)
		}
	}
	d := time.Since(begin)
	slices.Sort(durations)
	if k := len(durations); k > 0 {
		t.Logf("schedule durations: median %v, 90%% %v, 99%% %v, max %v; slowest seeds %v", durations[k/2], durations[k*9/10], durations[k*99/100], durations[k-1], slowest)
	}
	t.Logf("%d schedules (seeds %d..%d, %d workers) in %v: %.0f schedules/s; %d failed; %d fault-free, %d closed abruptly; %d persists, %d returned handles (and %d seen only once the engine could have released their objects) and %d confirmed handles and %d handles of checkpoints pending at close read back; %d objects left in all",
		ran, start, start+uint64(n)-1, workers, d.Round(time.Millisecond), float64(ran)/d.Seconds(), failed, faultFree, abrupt, persists, verified, unverif, confirmed, pending, left)
}

type slow struct {
	seed uint64
	d    time.Duration
}

func (s slow) String() string { return fmt.Sprintf("%d (%v)", s.seed, s.d.Round(time.Millisecond)) }
