package sim

import (
	"flag"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl/objname"
)

var flagStrict = flag.Bool("sim.strict", false, "a catalog schedule that meets a known defect of package catalog fails, rather than counting it")

// TestCatalogSimulation runs seeded schedules of the checkpoint catalog
// (package catalog) over the fault backend: processes of one or several
// instances that join, commit, learn completion, confirm, collect, are
// fenced, rejoin, are killed, restarted, stalled and rescaled, some of
// them starting from a catalog of the first layout (see the package
// documentation). The seeds are chosen as for TestSimulation: the short
// fixed set by default, -sim.seeds=N -sim.start=S, or -sim.seed=X.
func TestCatalogSimulation(t *testing.T) {
	var (
		mu        sync.Mutex
		total     CatalogStats
		faultFree int
		upgrades  int
	)
	catStrict = *flagStrict
	r := runSeeds(t, "TestCatalogSimulation", "", func(seed uint64, opt Options) (time.Duration, error) {
		st, err := RunCatalog(seed, opt)
		mu.Lock()
		defer mu.Unlock()
		total.add(st)
		if st.FaultFree {
			faultFree++
		}
		if st.Upgrade {
			upgrades++
		}
		return st.Duration, err
	})
	t.Logf("%d schedules (seeds %d..%d, %d workers) in %v: %.0f schedules/s; %d failed; %d fault-free, %d upgrades; in all: %s",
		r.ran, r.start, r.start+uint64(r.n)-1, r.workers, r.elapsed.Round(time.Millisecond), float64(r.ran)/r.elapsed.Seconds(), r.failed,
		faultFree, upgrades, total.counts())
}

// add adds the counts of o to st.
func (st *CatalogStats) add(o CatalogStats) {
	a, b := reflect.ValueOf(st).Elem(), reflect.ValueOf(o)
	for i := range a.NumField() {
		switch f := a.Field(i); f.Kind() {
		case reflect.Int:
			f.SetInt(f.Int() + b.Field(i).Int())
		case reflect.Array:
			for k := range f.Len() {
				f.Index(k).SetInt(f.Index(k).Int() + b.Field(i).Index(k).Int())
			}
		}
	}
}

// TestCatalogSameSeedSameRun: the scheduler alone decides the order of
// every call, so a seed's schedule is the same at every run, event for
// event.
func TestCatalogSameSeedSameRun(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		a, errA := RunCatalog(seed, Options{})
		b, errB := RunCatalog(seed, Options{})
		if a.Digest != b.Digest || (errA == nil) != (errB == nil) {
			t.Errorf("seed %d: two runs differ: digest %x (%v), then %x (%v)", seed, a.Digest, errA, b.Digest, errB)
		}
	}
}

// TestCatalogChecks breaks the protocol on purpose, through the
// simulation's hooks, and expects the invariant that guards it to fail
// on some seed: each check can fail.
func TestCatalogChecks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hooks catHooks
		want  string
	}{
		{
			// A new generation restores each process's latest commit,
			// complete or not.
			name:  "generations restore the latest commits",
			hooks: catHooks{tamper: tamperRecords(latestCommits)},
			want:  "invariant 1 ",
		},
		{
			// A new generation restores the complete checkpoint before the
			// latest.
			name:  "generations restore an older checkpoint",
			hooks: catHooks{tamper: tamperRecords(olderComplete)},
			want:  "invariant 2 ",
		},
		{
			// The leader deletes old data objects that the plan keeps.
			name:  "the collector ignores the plan",
			hooks: catHooks{collectKept: true},
			want:  "invariant 3 ",
		},
		{
			// The leader deletes old data objects made for checkpoints that
			// may still complete: the stalled committer's.
			name:  "the collector ignores the hold",
			hooks: catHooks{noHold: true},
			want:  "invariant 3 ",
		},
		{
			// No member ever finds a fence.
			name:  "members skip the fence",
			hooks: catHooks{hideFence: true},
			want:  "invariant 4 ",
		},
		{
			// Commits the rule keeps are replaced by others that decode.
			name:  "commits are forged",
			hooks: catHooks{forge: true},
			want:  "invariant 5 ",
		},
		{
			// The first layout's processes never see the upgrade's fence.
			name:  "old processes skip the upgrade's fence",
			hooks: catHooks{hideOldFence: true},
			want:  "invariant 6 ",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 400; seed++ {
				_, err := runCatalog(seed, Options{}, tc.hooks)
				if err != nil && strings.Contains(err.Error(), tc.want) {
					t.Logf("seed %d: %s", seed, strings.SplitN(err.Error(), "\n", 2)[0])
					return
				}
			}
			t.Fatalf("no seed up to 400 failed with %q", tc.want)
		})
	}
}

// tamperRecords returns a tamper hook that rewrites each new generation
// record of the second layout that restores a complete checkpoint of an
// aligned generation, by f (which returns nil to leave it).
func tamperRecords(f func(s *catSchedule, g, prev *catalog.Generation) []catalog.Restored) func(*catSchedule, string, []byte) []byte {
	return func(s *catSchedule, name string, data []byte) []byte {
		class, ref := classify(name)
		prev := s.t.gen2(ref.Generation - 1)
		if class != classGen2 || prev == nil || prev.Mode != catalog.Aligned {
			return data
		}
		var g catalog.Generation
		if err := decodeRecord(data, 2, 'G', &g); err != nil || g.RestoredCheckpoint == 0 {
			return data
		}
		rs := f(s, &g, prev)
		if rs == nil {
			return data
		}
		g.Restored = rs
		for _, r := range rs {
			if n := objname.ParseCatalog(catPrefix, r.Object).Checkpoint; n < g.RestoredCheckpoint {
				g.RestoredCheckpoint = n
			}
		}
		return encodeRecord(2, 'G', &g)
	}
}

// latestCommits restores each process's latest commit of prev.
func latestCommits(s *catSchedule, g, prev *catalog.Generation) []catalog.Restored {
	byN := s.t.commitsAt(prev.Number, s.t.seq)
	var out []catalog.Restored
	for p := range prev.Processes {
		n := latestOf(byN, p)
		if n == 0 {
			return nil
		}
		r := catalog.Restored{Object: objname.CatalogV2CommitName(catPrefix, prev.Number, n, p)}
		lo, hi := catalog.InstancesOf(p, prev.Processes, prev.Instances())
		r.KeyGroups = append(r.KeyGroups, prev.KeyGroups[lo:hi+1]...)
		out = append(out, r)
	}
	return out
}

// olderComplete restores the complete checkpoint of prev before the one
// the record restores.
func olderComplete(s *catSchedule, g, prev *catalog.Generation) []catalog.Restored {
	complete := completeIn(prev, s.t.commitsAt(prev.Number, s.t.seq))
	i := slices.Index(complete, g.RestoredCheckpoint)
	if i < 1 {
		return nil
	}
	var out []catalog.Restored
	for p := range prev.Processes {
		r := catalog.Restored{Object: objname.CatalogV2CommitName(catPrefix, prev.Number, complete[i-1], p)}
		lo, hi := catalog.InstancesOf(p, prev.Processes, prev.Instances())
		r.KeyGroups = append(r.KeyGroups, prev.KeyGroups[lo:hi+1]...)
		out = append(out, r)
	}
	return out
}
