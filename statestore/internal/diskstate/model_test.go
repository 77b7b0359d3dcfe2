package diskstate

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dstlgo/dstl/dstl"
)

// edgeKey returns a key at an edge of a key group: the bare prefix, or the
// prefix followed by 0x00 and 0xFF bytes.
func (s *state) edgeKey() []byte {
	kg := s.kgr.Start + s.rng.IntN(s.kgr.End-s.kgr.Start+1)
	k := binary.BigEndian.AppendUint16(nil, uint16(kg))
	for range s.rng.IntN(4) {
		k = append(k, []byte{0x00, 0xFF}[s.rng.IntN(2)])
	}
	return k
}

func (s *state) randomChanges(n int) {
	keys := make([]string, 0, len(s.model))
	for k := range s.model {
		keys = append(keys, k)
	}
	for range n {
		switch r := s.rng.IntN(12); {
		case r < 4 && len(keys) > 0:
			s.set([]byte(keys[s.rng.IntN(len(keys))]), s.randomValue())
		case r < 7 && len(keys) > 0:
			s.del([]byte(keys[s.rng.IntN(len(keys))]))
		case r < 9:
			s.set(s.randomKey(), s.randomValue())
		case r < 10:
			s.set(s.edgeKey(), s.randomValue())
		case r < 11:
			s.del(s.edgeKey())
		default:
			s.del(s.randomKey())
		}
	}
}

// modelSeeds is how many seeds the model tests run: a few in the default
// test run; more with -diskstate.seeds=N (a failing seed is the subtest's
// name: -run 'TestRandomModel/^SEED$').
var modelSeeds = flag.Int("diskstate.seeds", 2, "seeds of TestRandomModel and TestRandomMerge")

// TestRandomModel is a model-based test of Materialize and Load: random changes,
// small file and manifest bounds, obsolete objects deleted at once,
// restarts that extend the restored manifest (narrower key groups too),
// every manifest loaded and compared with the model.
func TestRandomModel(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= uint64(*modelSeeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			b := testBackend(t)
			tg := testTarget(b)
			tg.maxFileSize = int64(2<<10 + rng.IntN(16<<10))
			tg.maxFiles = 4 + rng.IntN(10)
			kgr := dstl.KeyGroupRange{Start: 0, End: 7}
			s := newState(t, kgr, seed)
			s.fill(rng.IntN(1500))
			var m *Manifest
			for round := range 40 {
				switch r := rng.IntN(10); {
				case r == 0:
					// nothing
				case r == 1:
					s.db.TouchAll()
				default:
					s.randomChanges(rng.IntN(1 + len(s.model)/[]int{2, 10, 50}[rng.IntN(3)]))
				}
				next, st := s.materialize(ctx, tg, m)
				for _, o := range st.Obsolete {
					if err := b.Delete(ctx, o); err != nil {
						t.Fatalf("round %d: delete obsolete %s: %v", round, o, err)
					}
				}
				m = next
				db, _ := load(t, tg, []*Manifest{m}, []dstl.KeyGroupRange{s.kgr})
				checkState(t, db.DB, s.model, s.kgr)
				if t.Failed() {
					t.Fatalf("round %d (stats %+v, %d files)", round, st, len(m.Files))
				}
				switch rng.IntN(6) {
				case 0:
					// Restart: go on from the restored database.
					s.db = db
					s.db.TakeChanges()
				case 1:
					// Restart with fewer key groups.
					if s.kgr.End > s.kgr.Start {
						n := s.kgr
						if rng.IntN(2) == 0 {
							n.Start++
						} else {
							n.End--
						}
						ndb, _ := load(t, tg, []*Manifest{m}, []dstl.KeyGroupRange{n})
						for k := range s.model {
							if kg, _ := KeyGroupOf([]byte(k)); !n.Contains(kg) {
								delete(s.model, k)
							}
						}
						s.db, s.kgr = ndb, n
						s.db.TakeChanges()
					}
				}
			}
		})
	}
}
