package catalog_test

import (
	"fmt"
	"testing"

	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstltest"
)

// BenchmarkCommit measures the catalog's requests per checkpoint per
// instance on the happy path (P instances commit every checkpoint): one
// put of the part and one listing, reported as puts/op, lists/op and
// gets/op.
func BenchmarkCommit(b *testing.B) {
	for _, p := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("instances=%d", p), func(b *testing.B) {
			cb := counting.New(dstltest.NewBackend())
			ms := make([]*catalog.Member, p)
			for i := range p {
				m, err := catalog.Join(b.Context(), cb, catalog.Config{JobID: "job", Instances: p, Index: i})
				if err != nil {
					b.Fatal(err)
				}
				ms[i] = m
			}
			before := cb.Stats()
			state := make([]byte, 256)
			objects := []string{"job/a.dstl", "job/statestore/op/b.snap"}
			n := ms[0].Generation().FirstCheckpoint
			b.ResetTimer()
			for range b.N {
				for _, m := range ms {
					if _, err := m.Commit(b.Context(), n, state, objects, nil); err != nil {
						b.Fatal(err)
					}
				}
				n++
			}
			b.StopTimer()
			s := cb.Stats()
			per := float64(b.N * p)
			b.ReportMetric(float64(s.Puts-before.Puts)/per, "puts/op")
			b.ReportMetric(float64(s.Lists-before.Lists)/per, "lists/op")
			b.ReportMetric(float64(s.Gets-before.Gets)/per, "gets/op")
		})
	}
}

// TestCommitRequests pins the happy path's cost: per checkpoint and
// instance, one put and one list, no get.
func TestCommitRequests(t *testing.T) {
	cb := counting.New(dstltest.NewBackend())
	ms := []*catalog.Member{}
	for i := range 3 {
		m, err := catalog.Join(t.Context(), cb, catalog.Config{JobID: "job", Instances: 3, Index: i})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	before := cb.Stats()
	for n := int64(1); n <= 10; n++ {
		for _, m := range ms {
			if _, err := m.Commit(t.Context(), n, []byte("s"), nil, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := cb.Stats()
	if puts, lists, gets := s.Puts-before.Puts, s.Lists-before.Lists, s.Gets-before.Gets; puts != 30 || lists != 30 || gets != 0 {
		t.Fatalf("30 commits cost %d puts, %d lists, %d gets; want 30, 30, 0", puts, lists, gets)
	}
}
