package catalog

import (
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstltest"
)

// TestPlanCacheBounded: a member that plans after every checkpoint holds
// the parts the plan keeps, not every part it ever read.
func TestPlanCacheBounded(t *testing.T) {
	b := dstltest.NewBackend()
	now := time.Now()
	m, err := Join(t.Context(), b, Config{JobID: "job", Instances: 1, Index: 0, Grace: time.Minute,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for n := int64(1); n <= 30; n++ {
		if _, err := m.Commit(t.Context(), n, []byte("state"), []string{"job/x.dstl"}, nil); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Hour) // every plan is past the grace of the checkpoints before
		p, err := m.Plan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(m.cache) > len(p.Parts) {
			t.Fatalf("after checkpoint %d: %d parts held, the plan keeps %d", n, len(m.cache), len(p.Parts))
		}
	}
}
