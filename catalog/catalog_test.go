package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

func cfg(p, i int) catalog.Config {
	return catalog.Config{JobID: "job", Instances: p, Index: i, MaxParallelism: 12, Grace: time.Hour}
}

func join(t *testing.T, b backends.Backend, c catalog.Config) *catalog.Member {
	t.Helper()
	m, err := catalog.Join(t.Context(), b, c)
	if err != nil {
		t.Fatalf("Join(%d of %d): %v", c.Index, c.Instances, err)
	}
	return m
}

// commit commits member m's part of n, its state naming the member and n.
func commit(t *testing.T, m *catalog.Member, n int64) catalog.Status {
	t.Helper()
	st, err := m.Commit(t.Context(), n, fmt.Appendf(nil, "g%d-i%d-n%d", m.Generation().Number, m.Index(), n),
		[]string{fmt.Sprintf("job/obj-g%d-i%d-n%d", m.Generation().Number, m.Index(), n)}, map[string]string{"offset": fmt.Sprint(n * 10)})
	if err != nil {
		t.Fatalf("Commit(%d) of instance %d: %v", n, m.Index(), err)
	}
	return st
}

func states(parts []*catalog.Part) []string {
	var out []string
	for _, p := range parts {
		out = append(out, string(p.State))
	}
	return out
}

// TestAlignedCheckpointsAndRestart: the instances of a first generation
// restore nothing; a checkpoint is complete once every instance committed
// its part; a restarted instance starts a generation that restores the
// latest complete checkpoint and fences the others, which rejoin it.
func TestAlignedCheckpointsAndRestart(t *testing.T) {
	b := dstltest.NewBackend()
	ms := []*catalog.Member{join(t, b, cfg(3, 0)), join(t, b, cfg(3, 1)), join(t, b, cfg(3, 2))}
	for _, m := range ms {
		if m.Generation().Number != 1 || len(m.Restore()) != 0 || m.Generation().FirstCheckpoint != 1 {
			t.Fatalf("first start: generation %+v, restore %v", m.Generation(), m.Restore())
		}
	}
	if st := commit(t, ms[0], 1); st.Complete != 0 {
		t.Fatalf("checkpoint 1 complete after one part: %+v", st)
	}
	commit(t, ms[1], 1)
	if st := commit(t, ms[2], 1); st.Complete != 1 {
		t.Fatalf("status after every part of 1: %+v", st)
	}
	commit(t, ms[0], 2) // 2 never completes: instance 1 is restarted

	restarted := join(t, b, cfg(3, 1))
	g := restarted.Generation()
	if g.Number != 2 || g.RestoredCheckpoint != 1 || g.FirstCheckpoint != 3 {
		t.Fatalf("restart: generation %+v", g)
	}
	if got := states(restarted.Restore()); !slices.Equal(got, []string{"g1-i1-n1"}) {
		t.Fatalf("instance 1 restores %v", got)
	}
	if _, err := ms[0].Commit(t.Context(), 3, nil, nil, nil); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("commit of a fenced member = %v, want ErrFenced", err)
	}
	if _, err := ms[2].Refresh(t.Context()); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("refresh of a fenced member = %v, want ErrFenced", err)
	}
	m0, err := ms[0].Rejoin(t.Context())
	if err != nil || m0.Generation().Number != 2 || !slices.Equal(states(m0.Restore()), []string{"g1-i0-n1"}) {
		t.Fatalf("Rejoin = %v, %v", m0, err)
	}
	if p := m0.Restore()[0]; p.Metadata["offset"] != "10" {
		t.Fatalf("restored metadata %v", p.Metadata)
	}
}

// TestFencedPartsAreNeverRestored: a member that commits after a newer
// generation started (a stalled process waking up) completes a checkpoint
// of its own generation in the catalog, but no later generation restores
// it.
func TestFencedPartsAreNeverRestored(t *testing.T) {
	b := dstltest.NewBackend()
	a, z := join(t, b, cfg(2, 0)), join(t, b, cfg(2, 1))
	commit(t, a, 1)
	commit(t, z, 1)
	commit(t, a, 2)
	// Instance 0 restarts while instance 1 (z) is stopped: generation 2
	// restores checkpoint 1.
	a2 := join(t, b, cfg(2, 0))
	// z wakes up and completes checkpoint 2 of generation 1.
	if _, err := z.Commit(t.Context(), 2, []byte("zombie"), nil, nil); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("zombie commit = %v, want ErrFenced", err)
	}
	if a2.Generation().RestoredCheckpoint != 1 {
		t.Fatalf("generation 2 restores %d", a2.Generation().RestoredCheckpoint)
	}
	// A third generation, started while generation 2 completed nothing,
	// restores what generation 2 restored: never the zombie's checkpoint 2.
	a3 := join(t, b, cfg(2, 0))
	if g := a3.Generation(); g.Number != 3 || g.RestoredCheckpoint != 1 || slices.Contains(states(a3.Restore()), "zombie") {
		t.Fatalf("generation 3 restores checkpoint %d: %v", g.RestoredCheckpoint, states(a3.Restore()))
	}
}

// TestRescale: a generation of another instance count restores, in each
// instance, the parts whose key groups overlap its own.
func TestRescale(t *testing.T) {
	b := dstltest.NewBackend()
	var ms []*catalog.Member
	for i := range 3 {
		ms = append(ms, join(t, b, cfg(3, i)))
	}
	for _, m := range ms {
		commit(t, m, 1)
	}
	// 3 → 2: key groups [0,3] [4,7] [8,11] → [0,5] [6,11].
	down := []*catalog.Member{join(t, b, cfg(2, 0)), join(t, b, cfg(2, 1))}
	if got := states(down[0].Restore()); !slices.Equal(got, []string{"g1-i0-n1", "g1-i1-n1"}) {
		t.Fatalf("instance 0 of 2 restores %v", got)
	}
	if got := states(down[1].Restore()); !slices.Equal(got, []string{"g1-i1-n1", "g1-i2-n1"}) {
		t.Fatalf("instance 1 of 2 restores %v", got)
	}
	n := down[0].Generation().FirstCheckpoint
	commit(t, down[0], n)
	commit(t, down[1], n)
	// 2 → 4.
	up := join(t, b, cfg(4, 3))
	if got := states(up.Restore()); !slices.Equal(got, []string{fmt.Sprintf("g2-i1-n%d", n)}) || up.KeyGroups() != (dstl.KeyGroupRange{Start: 9, End: 11}) {
		t.Fatalf("instance 3 of 4 (%v) restores %v", up.KeyGroups(), got)
	}
	// A member of the old instance count cannot rejoin.
	if _, err := down[0].Rejoin(t.Context()); !errors.Is(err, catalog.ErrMismatch) {
		t.Fatalf("Rejoin after the rescale = %v, want ErrMismatch", err)
	}
}

// TestTwoProcessesOneSlot: a second process for a held slot starts a new
// generation (it replaces the first, as a restarted pod does); the first,
// fenced, cannot rejoin: its slot is held.
func TestTwoProcessesOneSlot(t *testing.T) {
	b := dstltest.NewBackend()
	first := join(t, b, cfg(1, 0))
	second := join(t, b, cfg(1, 0))
	if second.Generation().Number != 2 {
		t.Fatalf("second process in generation %d", second.Generation().Number)
	}
	if _, err := first.Commit(t.Context(), 1, nil, nil, nil); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("first's commit = %v, want ErrFenced", err)
	}
	if _, err := first.Rejoin(t.Context()); !errors.Is(err, catalog.ErrReplaced) {
		t.Fatalf("first's Rejoin = %v, want ErrReplaced", err)
	}
}

// TestConcurrentJoins: instances starting at once on an empty catalog end
// up in one generation, each in its own slot.
func TestConcurrentJoins(t *testing.T) {
	for round := range 20 {
		b := dstltest.NewBackend()
		const p = 5
		ms := make([]*catalog.Member, p)
		var wg sync.WaitGroup
		errs := make([]error, p)
		for i := range p {
			wg.Go(func() { ms[i], errs[i] = catalog.Join(context.Background(), b, cfg(p, i)) })
		}
		wg.Wait()
		for i := range p {
			if errs[i] != nil {
				t.Fatalf("round %d: join %d: %v", round, i, errs[i])
			}
			if g := ms[i].Generation().Number; g != 1 {
				t.Fatalf("round %d: instance %d in generation %d", round, i, g)
			}
		}
	}
}

// TestLostAnswers: a put whose answer is lost after the object was stored
// is this put's, for the generation record, the claim and the part.
func TestLostAnswers(t *testing.T) {
	for _, nth := range []int{1, 2, 3} { // the generation, the claim, the part
		t.Run(fmt.Sprint(nth), func(t *testing.T) {
			b := &lossy{Backend: dstltest.NewBackend(), nth: int64(nth)}
			m := join(t, b, cfg(1, 0))
			if m.Generation().Number != 1 {
				t.Fatalf("generation %d after a lost answer", m.Generation().Number)
			}
			if st := commit(t, m, 1); st.Complete != 1 {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

// TestDamagedObjects: a damaged generation record or part is an error that
// names it, never a wrong restore.
func TestDamagedObjects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		object func() string
	}{
		{"generation", func() string { return objname.CatalogGenerationName("job/", 1) }},
		{"part", func() string { return objname.CatalogPartName("job/", 1, 1, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			m := join(t, b, cfg(1, 0))
			commit(t, m, 1)
			name := tc.object()
			data, ok := b.ObjectBytes(name)
			if !ok {
				t.Fatalf("no object %q", name)
			}
			data[len(data)/2] ^= 0xff
			if err := b.Delete(t.Context(), name); err != nil {
				t.Fatal(err)
			}
			if err := b.Put(t.Context(), name, bytesReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			_, err := catalog.Join(t.Context(), b, cfg(1, 0))
			if !errors.Is(err, catalog.ErrDamaged) || !containsName(err, name) {
				t.Fatalf("Join over a damaged %s = %v, want ErrDamaged naming %q", tc.name, err, name)
			}
		})
	}
}

// TestIndependentMode: each instance's latest part is its checkpoint; a
// restart restores every instance's latest part.
func TestIndependentMode(t *testing.T) {
	b := dstltest.NewBackend()
	ind := func(p, i int) catalog.Config { c := cfg(p, i); c.Mode = catalog.Independent; return c }
	a, c := join(t, b, ind(2, 0)), join(t, b, ind(2, 1))
	if st := commit(t, a, 1); st.Complete != 1 {
		t.Fatalf("independent status %+v", st)
	}
	commit(t, a, 2)
	commit(t, c, 1)
	r := join(t, b, ind(1, 0))
	if got := states(r.Restore()); !slices.Equal(got, []string{"g1-i0-n2", "g1-i1-n1"}) {
		t.Fatalf("restore %v", got)
	}
}

// TestRestoreFrom: a generation restores a retained older checkpoint by
// number; an unknown number is refused.
func TestRestoreFrom(t *testing.T) {
	b := dstltest.NewBackend()
	c := cfg(1, 0)
	c.Retain = 2
	m := join(t, b, c)
	commit(t, m, 1)
	commit(t, m, 2)
	c.RestoreFrom = 1
	r := join(t, b, c)
	if got := states(r.Restore()); !slices.Equal(got, []string{"g1-i0-n1"}) {
		t.Fatalf("restore %v", got)
	}
	c.RestoreFrom = 7
	if _, err := catalog.Join(t.Context(), b, c); !errors.Is(err, catalog.ErrNoCheckpoint) {
		t.Fatalf("RestoreFrom 7 = %v, want ErrNoCheckpoint", err)
	}
}

// TestPlan: the deletion rule keeps the objects of the retained
// checkpoint, of pending parts and of the restored parts while needed,
// and, for the grace, of the checkpoints they superseded; it drops only
// old catalog objects that nothing keeps.
func TestPlan(t *testing.T) {
	b := dstltest.NewBackend()
	now := time.Now()
	clock := func() time.Time { return now }
	c0, c1 := cfg(2, 0), cfg(2, 1)
	c0.Now, c1.Now = clock, clock
	c0.Grace, c1.Grace = time.Minute, time.Minute
	a, z := join(t, b, c0), join(t, b, c1)
	for n := int64(1); n <= 3; n++ {
		commit(t, a, n)
		commit(t, z, n)
	}
	commit(t, a, 4) // pending
	kept := func(p *catalog.Plan) []string {
		var got []string
		for o := range p.Keep {
			got = append(got, o)
		}
		slices.Sort(got)
		return got
	}
	p, err := a.Plan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Checkpoints 1 and 2 were superseded within the grace: a generation
	// started from a listing of that time may restore them.
	want := []string{"job/obj-g1-i0-n1", "job/obj-g1-i0-n2", "job/obj-g1-i0-n3", "job/obj-g1-i0-n4",
		"job/obj-g1-i1-n1", "job/obj-g1-i1-n2", "job/obj-g1-i1-n3"}
	if got := kept(p); !slices.Equal(got, want) || !slices.Equal(p.Retained, []int64{3}) || len(p.Drop) != 0 {
		t.Fatalf("plan within the grace: keep %v, retained %v, drop %v; want keep %v, retained [3], nothing old enough to drop", got, p.Retained, p.Drop, want)
	}
	now = now.Add(2 * time.Minute) // past the grace
	p, err = a.Plan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"job/obj-g1-i0-n3", "job/obj-g1-i0-n4", "job/obj-g1-i1-n3"}
	if got := kept(p); !slices.Equal(got, want) || !slices.Equal(p.Retained, []int64{3}) {
		t.Fatalf("plan past the grace: keep %v, retained %v; want keep %v, retained [3]", got, p.Retained, want)
	}
	if len(p.Drop) != 4 { // the parts of checkpoints 1 and 2
		t.Fatalf("drop %v, want the 4 parts of checkpoints 1 and 2", p.Drop)
	}
	if n, err := a.DropCatalog(t.Context(), p); n != 4 || err != nil {
		t.Fatalf("DropCatalog = %d, %v", n, err)
	}
	// A restart keeps the restored parts until its generation completes a
	// checkpoint of its own.
	r := join(t, b, c0)
	p, err = r.Plan(t.Context())
	if err != nil || !p.Keep["job/obj-g1-i0-n3"] || !p.Keep["job/obj-g1-i1-n3"] {
		t.Fatalf("plan after the restart: %+v, %v", p, err)
	}
	// The fenced member plans nothing.
	if _, err := z.Plan(t.Context()); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("a fenced member's Plan = %v, want ErrFenced", err)
	}
}

// TestCollect: the deletion rule deletes the log and snapshot objects that
// no kept part refers to once past the grace, keeps the referenced ones,
// and drops the catalog's old parts; a fenced member deletes nothing.
func TestCollect(t *testing.T) {
	b := dstltest.NewBackend()
	c := cfg(1, 0)
	c.Grace = time.Millisecond
	put := func(name string) {
		if err := b.Put(t.Context(), name, bytesReader([]byte("x")), 1); err != nil {
			t.Fatal(err)
		}
	}
	newLog := func() string {
		name, err := objname.NewLog("job/", 0)
		if err != nil {
			t.Fatal(err)
		}
		put(name)
		return name
	}
	snap, err := objname.NewSnapshot("job/", "op-0", 0)
	if err != nil {
		t.Fatal(err)
	}
	put(snap)
	old1, old2, kept := newLog(), newLog(), newLog()
	m := join(t, b, c)
	if _, err := m.Commit(t.Context(), 1, nil, []string{old1, snap}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Commit(t.Context(), 2, nil, []string{kept, snap}, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // past the grace by both clocks
	p, rep, err := m.Collect(t.Context(), collect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{old1: false, old2: false, kept: true, snap: true,
		objname.CatalogPartName("job/", 1, 1, 0): false, objname.CatalogPartName("job/", 1, 2, 0): true} {
		if _, ok := b.ObjectBytes(name); ok != want {
			t.Errorf("%s exists %v after the collection, want %v (plan %+v, report %d deleted)", name, ok, want, p, rep.Deleted.Objects)
		}
	}
	// A second process for the slot fences m: m's collection deletes nothing.
	join(t, b, c)
	before := len(b.Objects())
	if _, _, err := m.Collect(t.Context(), collect.Options{}); !errors.Is(err, catalog.ErrFenced) || len(b.Objects()) != before {
		t.Fatalf("a fenced member's Collect = %v, %d objects left of %d", err, len(b.Objects()), before)
	}
}

// TestPlanJob: a plan made from outside the job is the live member's.
func TestPlanJob(t *testing.T) {
	b := dstltest.NewBackend()
	if p, err := catalog.PlanJob(t.Context(), b, "job", catalog.PlanOptions{}); p != nil || err != nil {
		t.Fatalf("PlanJob of a job without a catalog = %+v, %v", p, err)
	}
	a, z := join(t, b, cfg(2, 0)), join(t, b, cfg(2, 1))
	for n := int64(1); n <= 2; n++ {
		commit(t, a, n)
		commit(t, z, n)
	}
	commit(t, a, 3)
	want, err := a.Plan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, err := catalog.PlanJob(t.Context(), b, "job", catalog.PlanOptions{Grace: time.Hour})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("PlanJob = %+v, %v; want %+v", got, err, want)
	}
}

// TestCollectWhileStarting: a collection that runs between a starter's
// listing and its put of the new generation's record (checkpoints
// completing in between, so that what the starter restores is no longer
// retained) keeps what the starter restores: the parts and the objects
// they refer to, however old those objects are.
func TestCollectWhileStarting(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode catalog.Mode
		// restarts before the race: the generation the starter restores
		// from is the last of them.
		restarts int
		// commits in the race, the live member's
		commits int
		want    int64 // the checkpoint the starter restores (aligned)
	}{
		{"aligned, latest complete superseded", catalog.Aligned, 0, 1, 1},
		{"independent, latest part superseded", catalog.Independent, 0, 1, 0},
		{"aligned, restored parts no longer needed", catalog.Aligned, 1, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := dstltest.NewBackend()
			c := cfg(1, 0)
			c.Mode, c.Grace = tc.mode, 200*time.Millisecond
			snapshot := func() string {
				name, err := objname.NewSnapshot("job/", "op-0", 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := mem.Put(t.Context(), name, bytesReader([]byte("x")), 1); err != nil {
					t.Fatal(err)
				}
				return name
			}
			m := join(t, mem, c)
			n := int64(1)
			if _, err := m.Commit(t.Context(), n, []byte("n1"), []string{snapshot()}, nil); err != nil {
				t.Fatal(err)
			}
			for range tc.restarts {
				m = join(t, mem, c)
			}
			time.Sleep(300 * time.Millisecond) // the catalog and the snapshot are past the grace
			b := &hooked{Backend: mem, name: objname.CatalogGenerationName("job/", m.Generation().Number+1), before: func() {
				// The starter listed the catalog. Now the live member
				// commits, and collects.
				for range tc.commits {
					n++
					if _, err := m.Commit(t.Context(), n, fmt.Appendf(nil, "n%d", n), []string{snapshot()}, nil); err != nil {
						t.Fatal(err)
					}
				}
				if _, _, err := m.Collect(t.Context(), collect.Options{}); err != nil {
					t.Fatal(err)
				}
			}}
			r, err := catalog.Join(t.Context(), b, c) // a restart
			if err != nil {
				t.Fatalf("Join of the restarted instance: %v", err)
			}
			if g := r.Generation(); g.Number != m.Generation().Number+1 || g.RestoredCheckpoint != tc.want || !slices.Equal(states(r.Restore()), []string{"n1"}) {
				t.Fatalf("the restart's generation %+v restores %v, want checkpoint 1", g, states(r.Restore()))
			}
			for _, p := range r.Restore() {
				for _, o := range p.Objects {
					if _, ok := mem.ObjectBytes(o); !ok {
						t.Errorf("restored part %s refers to %s, deleted by the collection", p.Name, o)
					}
				}
			}
		})
	}
}

// TestRestoreFromNotRetained: a restore by number takes only a retained
// checkpoint (or the restored one while it is kept): a complete checkpoint
// still listed in the catalog but no longer retained may have lost its
// objects to the deletion rule, as here where the collection deleted them
// but failed to drop the catalog's parts.
func TestRestoreFromNotRetained(t *testing.T) {
	for _, tc := range []struct {
		name     string
		restarts int // before the checkpoints of the live generation
	}{
		{"complete, superseded", 0},
		{"restored, no longer needed", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			c := cfg(1, 0)
			c.Grace = 50 * time.Millisecond
			snapshot := func() string {
				name, err := objname.NewSnapshot("job/", "op-0", 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Put(t.Context(), name, bytesReader([]byte("x")), 1); err != nil {
					t.Fatal(err)
				}
				return name
			}
			m := join(t, b, c)
			first := snapshot()
			if _, err := m.Commit(t.Context(), 1, nil, []string{first}, nil); err != nil {
				t.Fatal(err)
			}
			for range tc.restarts {
				m = join(t, b, c)
			}
			for range 2 {
				n := m.Generation().FirstCheckpoint
				if st, err := m.Refresh(t.Context()); err == nil && st.Complete > 0 {
					n = st.Complete + 1
				}
				if _, err := m.Commit(t.Context(), n, nil, []string{snapshot()}, nil); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(100 * time.Millisecond) // past the grace
			b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
				if op == dstltest.OpDelete && strings.Contains(name, objname.CatalogDir) {
					return dstltest.Fault{Err: errors.New("service unavailable")}
				}
				return dstltest.Fault{}
			})
			if _, _, err := m.Collect(t.Context(), collect.Options{}); err == nil {
				t.Fatal("the collection dropped the catalog's parts despite the fault")
			}
			b.SetFault(nil)
			if _, ok := b.ObjectBytes(first); ok {
				t.Fatalf("checkpoint 1's snapshot %s was not collected", first)
			}
			c.RestoreFrom = 1
			r, err := catalog.Join(t.Context(), b, c)
			if !errors.Is(err, catalog.ErrNoCheckpoint) {
				var restored []string
				if r != nil {
					for _, p := range r.Restore() {
						restored = append(restored, p.Objects...)
					}
				}
				t.Fatalf("Join restoring checkpoint 1 = %v (restoring %v, deleted); want ErrNoCheckpoint", err, restored)
			}
		})
	}
}

// TestIndependentRestoreDisjoint: in the independent mode, when an
// instance of a rescaled generation committed no part, a restart restores
// what that generation restored for its key groups; no key group is then
// restored from two parts (an older state over a newer one): the instances
// whose key groups those restored parts also cover restore them too.
func TestIndependentRestoreDisjoint(t *testing.T) {
	b := dstltest.NewBackend()
	ind := func(p, i int) catalog.Config { c := cfg(p, i); c.Mode = catalog.Independent; return c }
	commit(t, join(t, b, ind(1, 0)), 1) // key groups [0, 11]
	// Rescaled to 2: [0, 5] and [6, 11]; instance 0 commits, 1 does not.
	a := join(t, b, ind(2, 0))
	join(t, b, ind(2, 1))
	commit(t, a, a.Generation().FirstCheckpoint)
	// Instance 1 restarts.
	r := join(t, b, ind(2, 1))
	restored := r.Generation().Restored
	var parts []*catalog.Part
	for _, m := range []*catalog.Member{rejoin(t, a), r} {
		parts = append(parts, m.Restore()...)
		for i, p := range m.Restore() {
			for _, q := range m.Restore()[:i] {
				if p.KeyGroups.Start <= q.KeyGroups.End && q.KeyGroups.Start <= p.KeyGroups.End {
					t.Fatalf("instance %d restores %s %v and %s %v, which overlap (generation restores %v)",
						m.Index(), q.Name, q.KeyGroups, p.Name, p.KeyGroups, restored)
				}
			}
		}
	}
	if got := states(r.Restore()); !slices.Equal(got, []string{"g1-i0-n1"}) {
		t.Fatalf("instance 1 restores %v, want g1-i0-n1", got)
	}
}

// TestFencedCommitMayBeRestored: a commit that fails with ErrFenced wrote
// its part; when a newer generation started from a listing that saw it,
// that generation restores it. So ErrFenced leaves the checkpoint's
// outcome to the newer generation: the member must not take it as failed
// (and abort what it would confirm).
func TestFencedCommitMayBeRestored(t *testing.T) {
	mem := dstltest.NewBackend()
	var restart *catalog.Member
	b := &hooked{Backend: mem, name: objname.CatalogPartName("job/", 1, 1, 1), op: dstltest.OpList, before: func() {
		restart = join(t, mem, cfg(2, 0)) // instance 0 restarts between z's put and its listing
	}}
	a := join(t, mem, cfg(2, 0))
	z := join(t, b, cfg(2, 1))
	commit(t, a, 1)
	if _, err := z.Commit(t.Context(), 1, []byte("z1"), nil, nil); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("z's commit = %v, want ErrFenced", err)
	}
	if g := restart.Generation(); g.Number != 2 || g.RestoredCheckpoint != 1 {
		t.Fatalf("the restart's generation %+v, want 2 restoring checkpoint 1", g)
	}
	z2 := rejoin(t, z)
	if got := states(z2.Restore()); !slices.Equal(got, []string{"z1"}) {
		t.Fatalf("instance 1 restores %v, want the part of the commit that failed with ErrFenced", got)
	}
}

// TestMalformedCatalog: objects a member never writes under a generation
// neither block it nor make it write a record it cannot read back: each
// is an error that names it, where it matters.
func TestMalformedCatalog(t *testing.T) {
	t.Run("part of an instance beyond the generation's", func(t *testing.T) {
		b := dstltest.NewBackend()
		stray := objname.CatalogPartName("job/", 1, 1, 3)
		m := join(t, b, cfg(1, 0))
		b.SetObjectBytes(stray, []byte("x"))
		if st := commit(t, m, 1); st.Complete != 1 {
			t.Fatalf("status %+v: checkpoint 1, committed by the generation's only instance, is not complete", st)
		}
		if _, err := m.Plan(t.Context()); !errors.Is(err, catalog.ErrDamaged) || !containsName(err, stray) {
			t.Fatalf("Plan = %v, want ErrDamaged naming %s", err, stray)
		}
		r := join(t, b, cfg(1, 0))
		if got := states(r.Restore()); !slices.Equal(got, []string{"g1-i0-n1"}) {
			t.Fatalf("restart restores %v", got)
		}
	})
	t.Run("checkpoint number with no successor", func(t *testing.T) {
		b := dstltest.NewBackend()
		stray := objname.CatalogPartName("job/", 1, math.MaxInt64, 0) // of a checkpoint not complete
		for i := range 2 {
			commit(t, join(t, b, cfg(2, i)), 1)
		}
		b.SetObjectBytes(stray, []byte("x"))
		_, err := catalog.Join(t.Context(), b, cfg(2, 0))
		if !errors.Is(err, catalog.ErrDamaged) || !containsName(err, stray) {
			t.Fatalf("Join = %v, want ErrDamaged naming %s", err, stray)
		}
		if _, ok := b.ObjectBytes(objname.CatalogGenerationName("job/", 2)); ok {
			t.Fatal("generation 2 was started with a first checkpoint past the largest number")
		}
	})
}

// TestCommitRetryAfterLostAnswer: when a part's put loses its answer and
// the read-back fails too, Commit fails; the member's retry of the same
// commit then finds its own part, and succeeds.
func TestCommitRetryAfterLostAnswer(t *testing.T) {
	mem := dstltest.NewBackend()
	b := &lossy{Backend: mem, nth: 3} // the generation, the claim, the part
	m := join(t, b, cfg(1, 0))
	part := objname.CatalogPartName("job/", 1, 1, 0)
	mem.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op == dstltest.OpGet && name == part {
			return dstltest.Fault{Err: errors.New("service unavailable")}
		}
		return dstltest.Fault{}
	})
	if _, err := m.Commit(t.Context(), 1, []byte("s"), []string{"job/a.dstl"}, nil); err == nil {
		t.Fatal("Commit succeeded with its answer lost and its read-back failing")
	}
	mem.SetFault(nil)
	st, err := m.Commit(t.Context(), 1, []byte("s"), []string{"job/a.dstl"}, nil)
	if err != nil || st.Complete != 1 {
		t.Fatalf("the retried Commit = %+v, %v; want checkpoint 1 complete", st, err)
	}
	if _, err := m.Commit(t.Context(), 1, []byte("other"), nil, nil); !errors.Is(err, catalog.ErrReplaced) {
		t.Fatalf("Commit of another part of 1 = %v, want ErrReplaced", err)
	}
}

// TestJoinWhileRecordDropped: when, between a joiner's listing and its
// read of the latest generation's record, a newer generation started and
// a collection dropped that record, the joiner lists again and joins.
func TestJoinWhileRecordDropped(t *testing.T) {
	mem := dstltest.NewBackend()
	join(t, mem, cfg(1, 0))
	first := objname.CatalogGenerationName("job/", 1)
	b := &hooked{Backend: mem, op: dstltest.OpGet, name: first, before: func() {
		join(t, mem, cfg(1, 0)) // generation 2
		if err := mem.Delete(t.Context(), first); err != nil {
			t.Fatal(err)
		}
	}}
	m, err := catalog.Join(t.Context(), b, cfg(1, 0))
	if err != nil {
		t.Fatalf("Join = %v", err)
	}
	if g := m.Generation().Number; g != 3 {
		t.Fatalf("joined generation %d, want 3 (the slot of 2 is held)", g)
	}
}

// TestCollectDryRun: a dry run deletes nothing, not even the catalog's
// old parts; a real one drops them even when no log or snapshot object is
// to be deleted.
func TestCollectDryRun(t *testing.T) {
	b := dstltest.NewBackend()
	c := cfg(1, 0)
	c.Grace = time.Millisecond
	m := join(t, b, c)
	for n := int64(1); n <= 2; n++ {
		if _, err := m.Commit(t.Context(), n, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond) // past the grace
	old := objname.CatalogPartName("job/", 1, 1, 0)
	p, _, err := m.Collect(t.Context(), collect.Options{DryRun: true})
	if err != nil || !slices.Contains(p.Drop, old) {
		t.Fatalf("dry run: plan %+v, %v; want %s to drop", p, err, old)
	}
	if _, ok := b.ObjectBytes(old); !ok {
		t.Fatalf("a dry run deleted %s", old)
	}
	if _, _, err := m.Collect(t.Context(), collect.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.ObjectBytes(old); ok {
		t.Fatalf("a collection with no other object to delete kept %s", old)
	}
}

// TestIndependentRestartAfterRestoredDropped: once every instance of an
// independent generation committed its parts, the parts it restored are
// dropped, and a later restart does not need them.
func TestIndependentRestartAfterRestoredDropped(t *testing.T) {
	b := dstltest.NewBackend()
	now := time.Now()
	ind := func(i int) catalog.Config {
		c := cfg(2, i)
		c.Mode, c.Grace, c.Now = catalog.Independent, time.Minute, func() time.Time { return now }
		return c
	}
	a, z := join(t, b, ind(0)), join(t, b, ind(1))
	commit(t, a, 1)
	commit(t, z, 1)
	a2 := join(t, b, ind(0)) // generation 2 restores generation 1's parts
	z2, err := z.Rejoin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n := a2.Generation().FirstCheckpoint
	commit(t, a2, n)
	commit(t, z2, n)
	now = now.Add(time.Hour) // past the grace of everything
	p, err := a2.Plan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a2.DropCatalog(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.ObjectBytes(objname.CatalogPartName("job/", 1, 1, 0)); ok {
		t.Fatal("generation 1's part was not dropped")
	}
	r := join(t, b, ind(0))
	if got := states(r.Restore()); !slices.Equal(got, []string{fmt.Sprintf("g2-i0-n%d", n)}) {
		t.Fatalf("restart restores %v", got)
	}
}

// TestPlanAfterRestoredDropped: once an aligned generation completed
// Retain checkpoints of its own, the parts it restored are not needed; a
// plan made after older checkpoints were dropped does not want them back.
func TestPlanAfterRestoredDropped(t *testing.T) {
	b := dstltest.NewBackend()
	now := time.Now()
	c := cfg(1, 0)
	c.Grace, c.Now = time.Minute, func() time.Time { return now }
	m := join(t, b, c)
	commit(t, m, 1)
	r := join(t, b, c) // generation 2 restores checkpoint 1
	n := r.Generation().FirstCheckpoint
	commit(t, r, n)
	commit(t, r, n+1)
	for range 2 {
		now = now.Add(time.Hour)
		p, err := r.Plan(t.Context())
		if err != nil {
			t.Fatalf("plan: %v", err)
		}
		if slices.Contains(p.Parts, objname.CatalogPartName("job/", 1, 1, 0)) {
			t.Fatalf("the restored part is kept: %v", p.Parts)
		}
		if _, err := r.DropCatalog(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJoinStalledPastAFence: a join that stalls between its listing and
// its claim, while a newer generation starts and the old claim is dropped,
// does not end as a member of the fenced generation.
func TestJoinStalledPastAFence(t *testing.T) {
	mem := dstltest.NewBackend()
	first := join(t, mem, cfg(1, 0))
	claim := objname.CatalogClaimName("job/", 1, 0)
	if err := mem.Delete(t.Context(), claim); err != nil { // first's claim, dropped as a fenced generation's would be
		t.Fatal(err)
	}
	h := &hooked{Backend: mem, name: claim, before: func() {
		// While the joiner stalls before its claim: a restart starts
		// generation 2.
		if err := mem.Put(t.Context(), claim, bytesReader([]byte("taken")), 5); err != nil {
			t.Error(err)
		}
		join(t, mem, cfg(1, 0))
		if err := mem.Delete(t.Context(), claim); err != nil {
			t.Error(err)
		}
	}}
	m := join(t, h, cfg(1, 0))
	if g := m.Generation().Number; g < 2 {
		t.Fatalf("the stalled join is a member of generation %d, fenced", g)
	}
	_ = first
}
