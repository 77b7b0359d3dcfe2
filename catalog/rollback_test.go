package catalog_test

import (
	"errors"
	"testing"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/internal/catalogv1"
)

// TestNoRollbackPastAConfirmedCheckpoint: a generation never restores a
// checkpoint older than one a member confirmed. The schedule: a process
// restarts and starts a generation; between its listing of the catalog
// and its put of the new record, the leader completes checkpoint 2.
//
// In the first layout the leader's listing then showed 2 complete and no
// newer generation, so it confirmed 2 (and committed, say, a sink's
// transaction), while the new generation, from the older listing,
// restored 1: the confirmed effects were replayed. This test shows it of
// the first layout's code, kept in internal/catalogv1.
//
// In the second layout the starter writes the generation's fence before
// it lists, and a member confirms only after it read no fence: the
// leader's commit of 2 fails with ErrFenced, and it confirms nothing the
// new generation does not restore.
func TestNoRollbackPastAConfirmedCheckpoint(t *testing.T) {
	t.Run("first layout", func(t *testing.T) {
		mem := dstltest.NewBackend()
		c := func(i int) catalogv1.Config {
			return catalogv1.Config{JobID: "job", Instances: 2, Index: i, MaxParallelism: 12}
		}
		var ms []*catalogv1.Member
		for i := range 2 {
			m, err := catalogv1.Join(t.Context(), mem, c(i))
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		for _, m := range ms {
			if _, err := m.Commit(t.Context(), 1, []byte("1"), nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := ms[1].Commit(t.Context(), 2, []byte("2"), nil, nil); err != nil {
			t.Fatal(err)
		}
		var confirmed int64
		h := &hooked{Backend: mem, op: "put", match: func(n string) bool { return n == objname.CatalogGenerationName("job/", 2) },
			before: func() {
				st, err := ms[0].Commit(t.Context(), 2, []byte("2"), nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				confirmed = st.Complete
			}}
		re, err := catalogv1.Join(t.Context(), h, c(1))
		if err != nil {
			t.Fatal(err)
		}
		if confirmed != 2 || re.Generation().RestoredCheckpoint != 1 {
			t.Fatalf("the first layout: confirmed %d, restored %d; the schedule no longer shows its caveat", confirmed, re.Generation().RestoredCheckpoint)
		}
	})
	t.Run("second layout", func(t *testing.T) {
		mem := dstltest.NewBackend()
		ms := joinAll(t, mem, 2, 0)
		commit(t, ms[1], 1)
		commit(t, ms[0], 1)
		commit(t, ms[1], 2)
		var confirmed int64
		var commitErr error
		h := &hooked{Backend: mem, op: "put", match: func(n string) bool { return n == objname.CatalogV2GenerationName("job/", 2) },
			before: func() {
				var st catalog.Status
				st, commitErr = ms[0].Commit(t.Context(), 2, parts(ms[0], 2))
				confirmed = st.Complete
			}}
		re, err := catalog.Join(t.Context(), h, cfg(2, 1))
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(commitErr, catalog.ErrFenced) || confirmed != 0 {
			t.Fatalf("the leader's commit of 2 after the fence: status %d, %v; want ErrFenced", confirmed, commitErr)
		}
		if got := re.Generation().RestoredCheckpoint; got != 1 {
			t.Fatalf("restored %d, want 1 (the starter listed before 2 completed)", got)
		}
	})
	t.Run("second layout, confirmed before the fence", func(t *testing.T) {
		// The leader confirms 2 just before the starter's fence: the
		// starter's listing, after the fence, sees 2 complete.
		mem := dstltest.NewBackend()
		ms := joinAll(t, mem, 2, 0)
		commit(t, ms[1], 1)
		commit(t, ms[0], 1)
		commit(t, ms[1], 2)
		var confirmed int64
		h := &hooked{Backend: mem, op: "put", match: func(n string) bool { return n == objname.CatalogV2FenceName("job/", 1) },
			before: func() { confirmed = commit(t, ms[0], 2).Complete }}
		re, err := catalog.Join(t.Context(), h, cfg(2, 1))
		if err != nil {
			t.Fatal(err)
		}
		if confirmed != 2 || re.Generation().RestoredCheckpoint != 2 {
			t.Fatalf("confirmed %d, restored %d; want 2 and 2", confirmed, re.Generation().RestoredCheckpoint)
		}
	})
}
