package catalog_test

import (
	"fmt"
	"testing"

	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstltest"
)

// TestCommitRequests pins the happy path's cost of a commit, whatever the
// job's size and history: a member that is not the leader sends one put
// and two gets (the leader's commit of its previous checkpoint, the
// fence); the leader one put, one listing of one checkpoint's directory
// and one get (the fence); a job of one process one put and one get.
func TestCommitRequests(t *testing.T) {
	for _, tc := range []struct {
		instances, processes int
		mode                 catalog.Mode
	}{
		{1, 1, catalog.Aligned},
		{3, 3, catalog.Aligned},
		{12, 4, catalog.Aligned},
		{3, 3, catalog.Independent},
	} {
		t.Run(fmt.Sprintf("%d-in-%d-%s", tc.instances, tc.processes, tc.mode), func(t *testing.T) {
			mem := dstltest.NewBackend()
			var ms []*catalog.Member
			var cs []*counting.Backend
			for p := range tc.processes {
				c := counting.New(mem)
				conf := cfgQ(tc.instances, tc.processes, p)
				conf.Mode = tc.mode
				ms = append(ms, join(t, c, conf))
				cs = append(cs, c)
			}
			before := make([]counting.Stats, len(cs))
			for i, c := range cs {
				before[i] = c.Stats()
			}
			const checkpoints = 20
			for n := int64(1); n <= checkpoints; n++ {
				for i := len(ms) - 1; i >= 0; i-- { // the leader last
					st := commit(t, ms[i], n)
					if tc.mode == catalog.Aligned && n > 2 && st.Complete < n-1 {
						t.Fatalf("process %d at %d knows %d complete", i, n, st.Complete)
					}
				}
			}
			for i, c := range cs {
				s := c.Stats()
				puts, gets, lists := s.Puts-before[i].Puts, s.Gets-before[i].Gets, s.Lists-before[i].Lists
				wantPuts, wantGets, wantLists := int64(checkpoints), int64(2*checkpoints), int64(0)
				switch {
				case tc.mode == catalog.Independent:
					wantGets = checkpoints
				case tc.processes == 1:
					wantGets = checkpoints
				case i == 0:
					wantGets, wantLists = checkpoints, checkpoints
				default:
					wantGets = 2*checkpoints - 1 // no leader's commit before the first
				}
				if puts != wantPuts || gets != wantGets || lists != wantLists || s.Deletes != before[i].Deletes {
					t.Errorf("process %d: %d commits cost %d puts, %d gets, %d lists, %d deletes; want %d, %d, %d, 0",
						i, checkpoints, puts, gets, lists, s.Deletes-before[i].Deletes, wantPuts, wantGets, wantLists)
				}
			}
		})
	}
}

// BenchmarkCommit measures the catalog's requests per checkpoint per
// instance on the happy path (every process commits every checkpoint, the
// leader last), reported as puts/op, gets/op and lists/op.
func BenchmarkCommit(b *testing.B) {
	for _, p := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("processes=%d", p), func(b *testing.B) {
			cb := counting.New(dstltest.NewBackend())
			ms := make([]*catalog.Member, p)
			for i := range p {
				c := catalog.Config{JobID: "job", Instances: p, Process: i, Logger: quiet}
				m, err := catalog.Join(b.Context(), cb, c)
				if err != nil {
					b.Fatal(err)
				}
				ms[i] = m
			}
			before := cb.Stats()
			n := ms[0].Generation().FirstCheckpoint
			b.ResetTimer()
			for range b.N {
				for i := len(ms) - 1; i >= 0; i-- {
					m := ms[i]
					ps := []catalog.InstanceState{{Instance: m.Instances()[0], State: make([]byte, 256),
						Objects: []string{"job/a.dstl", "job/statestore/op/b.snap"}}}
					if _, err := m.Commit(b.Context(), n, ps); err != nil {
						b.Fatal(err)
					}
				}
				n++
			}
			b.StopTimer()
			s := cb.Stats()
			per := float64(b.N * p)
			b.ReportMetric(float64(s.Puts-before.Puts)/per, "puts/op")
			b.ReportMetric(float64(s.Gets-before.Gets)/per, "gets/op")
			b.ReportMetric(float64(s.Lists-before.Lists)/per, "lists/op")
		})
	}
}
