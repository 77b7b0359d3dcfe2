package catalog_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// TestInspect: the listing has every generation, live or fenced, with its
// record, fence, claims and checkpoints, each checkpoint's state and
// retention, and the commits of the checkpoints asked for; a damaged
// object is an error of the listing that names it, and no stop.
func TestInspect(t *testing.T) {
	b := dstltest.NewBackend()
	ms := joinAll(t, b, 2, 0)
	for n := int64(1); n <= 2; n++ {
		commit(t, ms[1], n)
		commit(t, ms[0], n)
	}
	commit(t, ms[0], 3)
	re := join(t, b, cfg(2, 1)) // generation 2, restoring 2
	commit(t, re, 4)
	put(t, b, "job/_catalog/v2/notes")

	l, err := catalog.Inspect(t.Context(), b, "job", catalog.InspectOptions{Claims: true,
		Commits: func(g, n int64) bool { return g == 1 && n == 2 }})
	if err != nil {
		t.Fatal(err)
	}
	if l.Live != 2 || len(l.Generations) != 2 || !slices.Equal(l.Other, []string{"job/_catalog/v2/notes"}) || l.FirstLayout != 0 {
		t.Fatalf("listing: live %d, %d generations, other %v", l.Live, len(l.Generations), l.Other)
	}
	g1, g2 := l.Generation(1), l.Generation(2)
	if g1.Live || !g2.Live || g1.Fence.Name == "" || g2.Fence.Name != "" || g1.Record == nil || g2.Record.RestoredCheckpoint != 2 {
		t.Fatalf("generations: %+v\n%+v", g1, g2)
	}
	if len(g1.Claims) != 2 || g1.Claims[1].Owner == "" || g1.Claims[1].Process != 1 {
		t.Fatalf("claims of generation 1: %+v", g1.Claims)
	}
	states := map[int64]catalog.CheckpointState{}
	for _, c := range g1.Checkpoints {
		states[c.Number] = c.State
	}
	if states[1] != catalog.Complete || states[2] != catalog.Complete || states[3] != catalog.NeverComplete {
		t.Fatalf("states of generation 1: %v", states)
	}
	if c := l.Checkpoint(2, 4); c == nil || c.State != catalog.Pending || len(c.Commits) != 1 || !c.Commits[0].Kept {
		t.Fatalf("checkpoint 4: %+v", c)
	}
	two := l.Checkpoint(1, 2)
	if len(two.Commits) != 2 || len(two.Commits[1].Parts) != 1 || string(two.Commits[1].Parts[0].State) != "g1-i1-n2" || !two.Commits[0].Kept {
		t.Fatalf("checkpoint 2 of generation 1: %+v", two)
	}
	if l.Checkpoint(1, 1).Commits[0].Parts != nil {
		t.Fatal("checkpoint 1's commits were read")
	}
	// Generation 2 has no complete checkpoint: what it restored is kept.
	if len(l.Retention.Retained) != 0 || !slices.Contains(l.Retention.Commits, objname.CatalogV2CommitName("job/", 1, 2, 0)) || len(l.Retention.Missing) != 0 {
		t.Fatalf("retention %+v", l.Retention)
	}

	// Damage: a flipped byte in a commit; the listing goes on.
	name := objname.CatalogV2CommitName("job/", 1, 2, 1)
	data, _ := b.ObjectBytes(name)
	data[len(data)-1] ^= 1
	b.SetObjectBytes(name, data)
	l, err = catalog.Inspect(t.Context(), b, "job", catalog.InspectOptions{Commits: func(int64, int64) bool { return true }})
	if !errors.Is(err, catalog.ErrDamaged) || !containsName(err, name) || l == nil {
		t.Fatalf("Inspect of a damaged commit: %v", err)
	}
	if c := l.Checkpoint(1, 2).Commits[1]; !errors.Is(c.Err, catalog.ErrDamaged) {
		t.Fatalf("the damaged commit's error: %v", c.Err)
	}
	// A restored commit lost is missing.
	if err := b.Delete(t.Context(), objname.CatalogV2CommitName("job/", 1, 2, 0)); err != nil {
		t.Fatal(err)
	}
	l, _ = catalog.Inspect(t.Context(), b, "job", catalog.InspectOptions{})
	if !slices.Equal(l.Retention.Missing, []string{objname.CatalogV2CommitName("job/", 1, 2, 0)}) {
		t.Fatalf("missing %v", l.Retention.Missing)
	}
	var _ backends.Backend = b
}
