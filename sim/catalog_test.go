package sim

import (
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl/objname"
)

// TestCatalogSimulation runs seeded schedules of the checkpoint catalog
// (package catalog) over the fault backend: racing processes that join,
// commit, refresh, plan and collect, are killed, restarted, stalled and
// rescaled (see the package documentation). The seeds are chosen as for
// TestSimulation: the short fixed set by default, -sim.seeds=N
// -sim.start=S, or -sim.seed=X.
func TestCatalogSimulation(t *testing.T) {
	var (
		mu        sync.Mutex
		total     CatalogStats
		faultFree int
	)
	r := runSeeds(t, "TestCatalogSimulation", "", func(seed uint64, opt Options) (time.Duration, error) {
		st, err := RunCatalog(seed, opt)
		mu.Lock()
		defer mu.Unlock()
		total.add(st)
		if st.FaultFree {
			faultFree++
		}
		return st.Duration, err
	})
	t.Logf("%d schedules (seeds %d..%d, %d workers) in %v: %.0f schedules/s; %d failed; %d fault-free; in all: %s",
		r.ran, r.start, r.start+uint64(r.n)-1, r.workers, r.elapsed.Round(time.Millisecond), float64(r.ran)/r.elapsed.Seconds(), r.failed,
		faultFree, total.counts())
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
// simulation's own hooks, and expects the invariant that guards it to
// fail on some seed.
func TestCatalogChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Options
		want string
	}{
		{
			// The collector deletes data objects that the plan keeps.
			name: "collector ignores the plan",
			opt:  Options{catalogCollectAll: true},
			want: "invariant 3 (no deletion of a referenced object): data object",
		},
		{
			// Every part stores a state other than its committer's.
			name: "parts hold other states",
			opt: Options{catalogTamper: func(_ *catSchedule, name string, data []byte) []byte {
				if objname.ParseCatalog(catPrefix, name).Kind != objname.CatalogPart {
					return data
				}
				var p catalog.Part
				if err := decodeRecord(data, 'P', &p); err != nil {
					return data
				}
				p.State = append(p.State, " 999=1"...)
				return encodeRecord('P', &p)
			}},
			want: "committed state",
		},
		{
			// A new generation restores the latest part of each instance
			// of the previous one, complete or not, committed after the
			// record or not.
			name: "generations restore the newest parts",
			opt: Options{catalogTamper: func(s *catSchedule, name string, data []byte) []byte {
				ref := objname.ParseCatalog(catPrefix, name)
				if ref.Kind != objname.CatalogGeneration || ref.Generation < 2 {
					return data
				}
				var g catalog.Generation
				if err := decodeRecord(data, 'G', &g); err != nil {
					return data
				}
				v := s.t.viewAt(s.t.seq)
				prev := v.gens[ref.Generation-1]
				if prev == nil {
					return data
				}
				var restored []string
				for i := range prev.Instances() {
					if ns := v.ownCheckpoints(prev.Number, i); len(ns) > 0 {
						restored = append(restored, v.parts[prev.Number][ns[len(ns)-1]][i].name)
					}
				}
				if len(restored) == 0 {
					return data
				}
				g.Restored = restored
				return encodeRecord('G', &g)
			}},
			want: "invariant 1 (no restore of a fenced part)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 200; seed++ {
				_, err := RunCatalog(seed, tc.opt)
				if err != nil && strings.Contains(err.Error(), tc.want) {
					return
				}
			}
			t.Fatalf("no seed up to 200 failed with %q", tc.want)
		})
	}
}
