package sim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// stateSeeds returns the number of seeds of TestStateSimulation that `go
// test` runs by default, and with -short: fewer with the race detector,
// which slows the Pebble databases of disk-backed schedules most (8 seeds
// take about 10 s on 2 cores).
func stateSeeds() (fixed, short int) {
	if raceEnabled {
		return 8, 4
	}
	return 48, 12
}

// TestStateSimulation runs seeded schedules of the state stores'
// checkpointer, disk-backed and in memory, over the fault backend:
// concurrent writes, materialisations, checkpoints completed and aborted,
// crashes and rescales (see the package documentation). The seeds are
// chosen as for TestSimulation: the short fixed set by default,
// -sim.seeds=N -sim.start=S, or -sim.seed=X.
func TestStateSimulation(t *testing.T) {
	var (
		mu        sync.Mutex
		total     StateStats
		faultFree int
		disk      int
	)
	fixed, short := stateSeeds()
	hint := "  (add -count=20 if it does not fail at once: goroutine timing varies)"
	r := runSeedsOf(t, "TestStateSimulation", hint, fixed, short, func(seed uint64, opt Options) (time.Duration, error) {
		if raceEnabled {
			// Pebble checks its invariants under the race detector
			// (a stack trace per file an iterator opens): disk-backed
			// schedules take ten times longer, more with many key
			// groups.
			opt.Watchdog *= 5
		}
		st, err := RunState(seed, opt)
		mu.Lock()
		defer mu.Unlock()
		total.add(st)
		if st.FaultFree {
			faultFree++
		}
		if st.Disk {
			disk++
		}
		return st.Duration, err
	})
	t.Logf("%d schedules (seeds %d..%d, %d workers) in %v: %.1f schedules/s; %d failed; %d disk-backed, %d fault-free; in all: %s",
		r.ran, r.start, r.start+uint64(r.n)-1, r.workers, r.elapsed.Round(time.Millisecond), float64(r.ran)/r.elapsed.Seconds(), r.failed,
		disk, faultFree, total.counts())
}

// add adds the counts of o to st.
func (st *StateStats) add(o StateStats) {
	for _, f := range []struct{ a, b *int }{
		{&st.Writes, &o.Writes}, {&st.ConcurrentPhases, &o.ConcurrentPhases}, {&st.Materializes, &o.Materializes},
		{&st.MaterializeErrors, &o.MaterializeErrors}, {&st.Materializations, &o.Materializations},
		{&st.Checkpoints, &o.Checkpoints}, {&st.CheckpointErrors, &o.CheckpointErrors}, {&st.Completed, &o.Completed},
		{&st.Aborted, &o.Aborted}, {&st.Crashes, &o.Crashes}, {&st.Rescales, &o.Rescales}, {&st.Restores, &o.Restores},
		{&st.RestoreErrors, &o.RestoreErrors}, {&st.Verified, &o.Verified}, {&st.VerifiedMerged, &o.VerifiedMerged},
		{&st.Damaged, &o.Damaged}, {&st.DamageFailed, &o.DamageFailed}, {&st.Objects, &o.Objects}, {&st.Explained, &o.Explained},
	} {
		*f.a += *f.b
	}
	for k := range st.Injected {
		st.Injected[k] += o.Injected[k]
	}
}

// TestStateSameSeedSamePlan: a schedule's setup and steps come from its
// seed alone, whatever the faults and the goroutine timing do. (Seeds of
// short schedules: 12 and 28 with faults, 24 disk-backed; the race
// detector changes nothing to the plans, and slows them: skipped.)
func TestStateSameSeedSamePlan(t *testing.T) {
	if raceEnabled {
		t.Skip("plans do not depend on the race detector; TestStateSimulation runs with it")
	}
	plan := func(st StateStats) string {
		return fmt.Sprintf("%s plan=%s writes=%d crashes=%d rescales=%d", st.Setup, st.Plan, st.Writes, st.Crashes, st.Rescales)
	}
	for _, seed := range []uint64{12, 24, 28} {
		a, err := RunState(seed, Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := RunState(seed, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if plan(a) != plan(b) {
			t.Errorf("seed %d: two runs plan\n  %s\nand\n  %s", seed, plan(a), plan(b))
		}
	}
}

// TestStateChecks breaks the simulation on purpose and expects the check
// that guards it to fail on some seed: a model that misses writes, a
// snapshot object that the last checkpoint names deleted, an unreferenced
// one left.
func TestStateChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Options
		want string
	}{
		{"model misses writes", Options{stateSkipModel: 50}, "differ from the model"},
		{"named object deleted", Options{stateBeforeObjects: func(s *stateSchedule) {
			for _, p := range s.last.parts {
				for _, sn := range p.h.Snapshots {
					s.be.st.DeleteObject(sn.Object)
				}
			}
		}}, "names was deleted"},
		{"unreferenced object left", Options{stateBeforeObjects: func(s *stateSchedule) {
			if err := s.cl.Put(context.Background(), stSnapshots+"op-x/01a22c38-0000-7000-8000-000000000000.snap", strings.NewReader("DSSO"), 4); err != nil {
				panic(err)
			}
		}}, "left behind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Short schedules in memory, without KeepSnapshots.
			seeds := []uint64{12, 14, 28}
			for _, seed := range seeds {
				_, err := RunState(seed, tc.opt)
				if err != nil && strings.Contains(err.Error(), tc.want) {
					return
				}
			}
			t.Fatalf("no seed of %v failed with %q", seeds, tc.want)
		})
	}
}
