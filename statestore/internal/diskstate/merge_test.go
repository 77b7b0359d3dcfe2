package diskstate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dstlgo/dstl/dstl"
)

// TestRandomMerge: merges of several incremental manifests, each over a wider
// range than what it restores, with random disjoint ranges.
func TestRandomMerge(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= uint64(*modelSeeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			b := testBackend(t)
			tg := testTarget(b)
			tg.maxFileSize = int64(2<<10 + rng.IntN(8<<10))
			tg.maxFiles = 5 + rng.IntN(8)
			// Three instances over overlapping ranges of [0, 11].
			ranges := []dstl.KeyGroupRange{{Start: 0, End: 5}, {Start: 3, End: 8}, {Start: 6, End: 11}}
			var states []*state
			var ms []*Manifest
			for i, r := range ranges {
				s := newState(t, r, seed*10+uint64(i))
				s.fill(200 + rng.IntN(800))
				m, _ := s.materialize(ctx, tg, nil)
				for range 3 + rng.IntN(8) {
					s.randomChanges(rng.IntN(1 + len(s.model)/10))
					var st MaterializeStats
					m, st = s.materialize(ctx, tg, m)
					for _, o := range st.Obsolete {
						if err := b.Delete(ctx, o); err != nil {
							t.Fatal(err)
						}
					}
				}
				states, ms = append(states, s), append(ms, m)
			}
			// Split [0, 11] at random cut points, each part from a manifest
			// that holds it, in random manifest order.
			c1 := 1 + rng.IntN(5) // part 0: [0, c1-1] from manifest 0 (c1 <= 5... within [0,5])
			c2 := max(c1, 6) + rng.IntN(3)
			parts := []dstl.KeyGroupRange{{Start: 0, End: c1 - 1}, {Start: c1, End: c2 - 1}, {Start: c2, End: 11}}
			from := []int{0, 1, 2}
			if parts[1].Start < 3 {
				from[1] = 0
				if parts[1].End > 5 {
					parts[1].End = 5
					parts[2].Start = 6
				}
			}
			if parts[1].End > 8 {
				t.Skip("no manifest holds the middle")
			}
			order := rng.Perm(3)
			var lms []*Manifest
			var lrs []dstl.KeyGroupRange
			want := map[string][]byte{}
			for _, i := range order {
				if parts[i].Start > parts[i].End {
					continue
				}
				s := states[from[i]]
				lms, lrs = append(lms, ms[from[i]]), append(lrs, parts[i])
				for k, v := range s.model {
					if kg, _ := KeyGroupOf([]byte(k)); parts[i].Contains(kg) {
						want[k] = v
					}
				}
			}
			db, _ := load(t, tg, lms, lrs)
			checkState(t, db.DB, want, dstl.KeyGroupRange{Start: 0, End: 11})
		})
	}
}

// TestMergeStaleKeys: a wider instance's manifest extended by two narrower ones (their
// files hold stale keys of each other's key groups), merged back.
func TestMergeStaleKeys(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 9))
			b := testBackend(t)
			tg := testTarget(b)
			tg.maxFileSize = int64(2<<10 + rng.IntN(8<<10))
			wide := dstl.KeyGroupRange{Start: 0, End: 11}
			w := newState(t, wide, seed)
			w.fill(1000)
			mw, _ := w.materialize(ctx, tg, nil)
			for range 3 {
				w.randomChanges(100)
				mw, _ = w.materialize(ctx, tg, mw)
			}
			cut := 1 + rng.IntN(10)
			halves := []dstl.KeyGroupRange{{Start: 0, End: cut - 1}, {Start: cut, End: 11}}
			var ss []*state
			var ms []*Manifest
			for i, h := range halves {
				db, _ := load(t, tg, []*Manifest{mw}, []dstl.KeyGroupRange{h})
				s := &state{t: t, db: db, model: map[string][]byte{}, rng: rand.New(rand.NewPCG(seed, uint64(i))), kgr: h}
				for k, v := range w.model {
					if kg, _ := KeyGroupOf([]byte(k)); h.Contains(kg) {
						s.model[k] = v
					}
				}
				db.TakeChanges()
				m := mw
				for range 1 + rng.IntN(4) {
					s.randomChanges(1 + rng.IntN(60))
					m, _ = s.materialize(ctx, tg, m)
				}
				ss, ms = append(ss, s), append(ms, m)
			}
			want := map[string][]byte{}
			for _, s := range ss {
				for k, v := range s.model {
					want[k] = v
				}
			}
			for _, order := range [][]int{{0, 1}, {1, 0}} {
				db, _ := load(t, tg, []*Manifest{ms[order[0]], ms[order[1]]}, []dstl.KeyGroupRange{halves[order[0]], halves[order[1]]})
				checkState(t, db.DB, want, wide)
			}
		})
	}
}
