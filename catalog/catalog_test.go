package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// TestAlignedCheckpointsAndRestart: the processes of a first generation
// restore nothing; a checkpoint is complete once every process committed;
// the leader learns it from a listing of the checkpoint's directory and
// tells the others through its commits; a restarted process starts a
// generation that restores the latest complete checkpoint and fences the
// others, which rejoin it.
func TestAlignedCheckpointsAndRestart(t *testing.T) {
	b := dstltest.NewBackend()
	ms := joinAll(t, b, 3, 0)
	for _, m := range ms {
		if m.Generation().Number != 1 || len(restored(m)) != 0 || m.Generation().FirstCheckpoint != 1 || m.Leader() != (m.Process() == 0) {
			t.Fatalf("first start: generation %+v, restore %v", m.Generation(), restored(m))
		}
	}
	// The leader commits last: its listing of checkpoint 1's directory
	// sees the others' commits, and its own commit completes 1.
	if st := commit(t, ms[1], 1); st.Complete != 0 {
		t.Fatalf("checkpoint 1 complete after one commit: %+v", st)
	}
	commit(t, ms[2], 1)
	if st := commit(t, ms[0], 1); st.Complete != 1 {
		t.Fatalf("the leader's status after every commit of 1: %+v", st)
	}
	// The others learn it from the leader's commit of their previous
	// checkpoint, at their next commit.
	for _, m := range ms[1:] {
		if st := commit(t, m, 2); st.Complete != 1 {
			t.Fatalf("process %d's status at its commit of 2: %+v", m.Process(), st)
		}
	}
	// The leader commits 2 first this time: it cannot know 2 complete
	// yet, and learns it at its next commit (or Refresh).
	if st := commit(t, ms[0], 2); st.Complete != 2 {
		t.Fatalf("the leader's status after every commit of 2: %+v", st)
	}
	commit(t, ms[0], 3) // 3 never completes: process 1 is restarted
	if st, err := ms[0].Refresh(t.Context()); err != nil || st.Complete != 2 {
		t.Fatalf("Refresh: %+v, %v", st, err)
	}

	restarted := join(t, b, cfg(3, 1))
	g := restarted.Generation()
	if g.Number != 2 || g.RestoredCheckpoint != 2 || g.FirstCheckpoint != 4 {
		t.Fatalf("restart: generation %+v", g)
	}
	if got := restored(restarted); !slices.Equal(got, []string{"g1-i1-n2"}) {
		t.Fatalf("restarted process restores %v", got)
	}
	for _, m := range []*catalog.Member{ms[0], ms[2]} {
		if _, err := m.Commit(t.Context(), 4, parts(m, 4)); !errors.Is(err, catalog.ErrFenced) {
			t.Fatalf("commit of a fenced member: %v, want ErrFenced", err)
		}
		if _, err := m.Commit(t.Context(), 5, parts(m, 5)); !errors.Is(err, catalog.ErrFenced) {
			t.Fatalf("second commit of a fenced member: %v", err)
		}
		re, err := m.Rejoin(t.Context())
		if err != nil {
			t.Fatalf("Rejoin of process %d: %v", m.Process(), err)
		}
		if re.Generation().Number != 2 || len(restored(re)) != 1 {
			t.Fatalf("rejoined: generation %d, restore %v", re.Generation().Number, restored(re))
		}
	}
}

// TestProcessesOfManyInstances: a process runs several instances and
// commits their parts of a checkpoint in one object; a restart restores
// each instance's part, and a rescale of the instances or of the
// processes starts a generation whose instances restore the parts that
// overlap their key groups.
func TestProcessesOfManyInstances(t *testing.T) {
	b := dstltest.NewBackend()
	ms := joinAll(t, b, 8, 2)
	if got := ms[1].Instances(); !slices.Equal(got, []int{4, 5, 6, 7}) {
		t.Fatalf("process 1 runs %v", got)
	}
	commitAll(t, ms, 1)
	commits := names(t, b, objname.CatalogV2CheckpointDir("job/", 1, 1))
	if len(commits) != 2 {
		t.Fatalf("checkpoint 1 of 8 instances in 2 processes: %d objects %v, want 2", len(commits), commits)
	}
	if _, err := ms[0].Commit(t.Context(), 2, parts(ms[0], 2)[:3]); err == nil {
		t.Fatal("a commit of 3 of the process's 4 instances succeeded")
	}
	bad := parts(ms[0], 2)
	bad[0].Instance = 5
	if _, err := ms[0].Commit(t.Context(), 2, bad); err == nil {
		t.Fatal("a commit of another process's instance succeeded")
	}

	// A restart of process 1: the same layout, each instance restores its
	// own part.
	re := join(t, b, cfgQ(8, 2, 1))
	if g := re.Generation(); g.Number != 2 || g.RestoredCheckpoint != 1 || len(g.Restored) != 2 {
		t.Fatalf("restart: %+v", g)
	}
	for _, i := range re.Instances() {
		if got := re.Restore(i); len(got) != 1 || string(got[0].State) != string(stateOf(1, i, 1)) || got[0].Instance != i {
			t.Fatalf("instance %d restores %+v", i, got)
		}
	}
	ms = []*catalog.Member{join(t, b, cfgQ(8, 2, 0)), re}
	commitAll(t, ms, 2)
	commit(t, ms[0], 3) // the leader learns 2 complete

	// 8 instances in 4 processes: the same instances, another layout.
	four := join(t, b, cfgQ(8, 4, 3))
	if g := four.Generation(); g.Number != 3 || g.RestoredCheckpoint != 2 || g.Processes != 4 {
		t.Fatalf("8 instances in 4 processes: %+v", g)
	}
	if got := restored(four); !slices.Equal(got, []string{"g2-i6-n2", "g2-i7-n2"}) {
		t.Fatalf("process 3 of 4 restores %v", got)
	}
	// 3 instances in 3 processes: each restores the parts over its key
	// groups (12 key groups: 0-3, 4-7, 8-11 over 8 instances' 0-1, 2-3, ...).
	three := join(t, b, cfgQ(3, 3, 1))
	if got := restored(three); !slices.Equal(got, []string{"g2-i2-n2", "g2-i3-n2", "g2-i4-n2"}) {
		t.Fatalf("instance 1 of 3 restores %v", got)
	}
}

// TestFencedCommitsAreNeverRestored: a member that commits after a newer
// generation started writes a commit that no reader restores, and learns
// that it is fenced.
func TestFencedCommitsAreNeverRestored(t *testing.T) {
	b := dstltest.NewBackend()
	ms := joinAll(t, b, 2, 0)
	commit(t, ms[1], 1)
	commit(t, ms[0], 1)
	join(t, b, cfg(2, 1)) // restarts process 1: generation 2, restoring 1
	// The zombie commits 2 and 3 in generation 1, and the leader 2.
	if _, err := ms[1].Commit(t.Context(), 2, parts(ms[1], 2)); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("zombie commit: %v", err)
	}
	if _, err := ms[0].Commit(t.Context(), 2, parts(ms[0], 2)); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("leader's commit after the fence: %v", err)
	}
	// Generation 3 (process 1 restarts again) restores what generation 2 restored:
	// 1, although generation 1 now has a complete checkpoint 2.
	g3 := join(t, b, cfg(2, 1))
	if g := g3.Generation(); g.Number != 3 || g.RestoredCheckpoint != 1 {
		t.Fatalf("generation 3: %+v", g)
	}
	if got := restored(g3); !slices.Equal(got, []string{"g1-i1-n1"}) {
		t.Fatalf("restores %v", got)
	}
}

// TestTwoProcessesOneSlot: a second process for a held slot starts a new
// generation; the first, fenced, cannot rejoin (ErrReplaced) and stops:
// no ping-pong.
func TestTwoProcessesOneSlot(t *testing.T) {
	b := dstltest.NewBackend()
	first := join(t, b, cfg(1, 0))
	commit(t, first, 1)
	second := join(t, b, cfg(1, 0))
	if second.Generation().Number != 2 {
		t.Fatalf("second process joined generation %d", second.Generation().Number)
	}
	if _, err := first.Commit(t.Context(), 2, parts(first, 2)); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("first after the second started: %v", err)
	}
	if _, err := first.Rejoin(t.Context()); !errors.Is(err, catalog.ErrReplaced) {
		t.Fatalf("Rejoin of the replaced process: %v, want ErrReplaced", err)
	}
	if st := commit(t, second, 2); st.Complete != 2 {
		t.Fatalf("the second process's status: %+v", st)
	}
}

// TestConcurrentJoins: processes starting at once on an empty catalog end
// in one generation, each in its slot.
func TestConcurrentJoins(t *testing.T) {
	b := dstltest.NewBackend()
	const p = 8
	ms := make([]*catalog.Member, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for i := range p {
		wg.Go(func() { ms[i], errs[i] = catalog.Join(context.Background(), b, cfg(p, i)) })
	}
	wg.Wait()
	for i := range p {
		if errs[i] != nil {
			t.Fatalf("process %d: %v", i, errs[i])
		}
	}
	g := ms[p-1].Generation().Number
	for _, m := range ms {
		if _, err := m.Refresh(t.Context()); err != nil && m.Generation().Number == g {
			t.Fatalf("process %d of the latest generation: %v", m.Process(), err)
		}
	}
}

// TestLostAnswers: a put whose answer is lost after the object was stored
// is this process's own by the read-back: the claim, the fence, the
// record and the commit each go on as if answered.
func TestLostAnswers(t *testing.T) {
	for nth := int64(1); nth <= 6; nth++ {
		t.Run(fmt.Sprint(nth), func(t *testing.T) {
			mem := dstltest.NewBackend()
			ms := joinAll(t, mem, 2, 0)
			commitAll(t, ms, 1)
			l := &lossy{Backend: mem, nth: nth}
			// A restart (fence, record, claim) and a commit, each put's
			// answer lost in turn.
			m := join(t, l, cfg(2, 1))
			if m.Generation().Number != 2 {
				t.Fatalf("generation %d", m.Generation().Number)
			}
			commit(t, m, 2)
			if st, err := m.Commit(t.Context(), 3, parts(m, 3)); err != nil {
				t.Fatalf("commit 3: %+v, %v", st, err)
			}
		})
	}
}

// TestCommitRetryAfterLostAnswer: when a commit's put loses its answer and
// the read-back fails too, the retry finds the commit there with the same
// parts and succeeds; a retry with other parts fails with ErrReplaced.
func TestCommitRetryAfterLostAnswer(t *testing.T) {
	mem := dstltest.NewBackend()
	lost := &unreadable{Backend: mem}
	ms := joinAll(t, lost, 2, 0)
	m := ms[1]
	lost.set(objname.CatalogV2CommitName("job/", 1, 1, 1))
	if _, err := m.Commit(t.Context(), 1, parts(m, 1)); err == nil {
		t.Fatal("a commit whose put and read-back failed succeeded")
	}
	lost.set("")
	if _, err := m.Commit(t.Context(), 1, parts(m, 1)); err != nil {
		t.Fatalf("retry with the same parts: %v", err)
	}
	lost.set(objname.CatalogV2CommitName("job/", 1, 2, 1))
	if _, err := m.Commit(t.Context(), 2, parts(m, 2)); err == nil {
		t.Fatal("a commit whose put and read-back failed succeeded")
	}
	lost.set("")
	other := parts(m, 2)
	other[0].State = []byte("another state")
	if _, err := m.Commit(t.Context(), 2, other); !errors.Is(err, catalog.ErrReplaced) {
		t.Fatalf("retry with other parts: %v, want ErrReplaced", err)
	}
}

// TestCommitRetryAfterFailedLearning: a commit whose put landed and whose
// read of the fence failed is retried, and the retry learns.
func TestCommitRetryAfterFailedLearning(t *testing.T) {
	mem := dstltest.NewBackend()
	lost := &unreadable{Backend: mem}
	ms := joinAll(t, lost, 2, 0)
	commit(t, ms[1], 1)
	commit(t, ms[0], 1)
	lost.readOnly = true
	lost.set(objname.CatalogV2FenceName("job/", 1))
	if _, err := ms[1].Commit(t.Context(), 2, parts(ms[1], 2)); err == nil {
		t.Fatal("a commit whose read of the fence failed succeeded")
	}
	lost.set("")
	st, err := ms[1].Commit(t.Context(), 2, parts(ms[1], 2))
	if err != nil || st.Complete != 1 {
		t.Fatalf("the retry: %+v, %v; want checkpoint 1 complete", st, err)
	}
}

// unreadable stores a put of its name but fails it, and fails the reads
// of that name, as when a connection breaks after the service stored the
// object and the read-back fails too.
type unreadable struct {
	backends.Backend
	mu       sync.Mutex
	name     string
	readOnly bool // fail the reads of the name only, not its puts
}

// Unwrap returns the backend the calls go to.
func (u *unreadable) Unwrap() backends.Backend { return u.Backend }

func (u *unreadable) set(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.name = name
}

func (u *unreadable) is(name string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return name != "" && name == u.name
}

func (u *unreadable) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	err := u.Backend.Put(ctx, name, body, size)
	if err == nil && u.is(name) && !u.readOnly {
		return errLost
	}
	return err
}

func (u *unreadable) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if u.is(name) {
		return nil, errLost
	}
	return u.Backend.Get(ctx, name, offset, length)
}

// TestDamagedObjects: a damaged generation record or commit is an error
// that names it (ErrDamaged), never a wrong restore.
func TestDamagedObjects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		object func() string
	}{
		{"record", func() string { return objname.CatalogV2GenerationName("job/", 1) }},
		{"commit", func() string { return objname.CatalogV2CommitName("job/", 1, 1, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			ms := joinAll(t, b, 2, 0)
			commitAll(t, ms, 1)
			name := tc.object()
			data, ok := b.ObjectBytes(name)
			if !ok {
				t.Fatalf("no object %s", name)
			}
			data[len(data)/2] ^= 1
			b.SetObjectBytes(name, data)
			_, err := catalog.Join(t.Context(), b, cfg(2, 1))
			if !errors.Is(err, catalog.ErrDamaged) || !containsName(err, name) {
				t.Fatalf("Join: %v, want ErrDamaged naming %s", err, name)
			}
		})
	}
}

// TestIndependentMode: each process's latest commit is its checkpoint; a
// restart restores every process's latest commit, and, for a process that
// committed nothing, what the generation restored.
func TestIndependentMode(t *testing.T) {
	b := dstltest.NewBackend()
	c := func(i int) catalog.Config { c := cfg(3, i); c.Mode = catalog.Independent; return c }
	ms := []*catalog.Member{join(t, b, c(0)), join(t, b, c(1)), join(t, b, c(2))}
	if st := commit(t, ms[0], 1); st.Complete != 1 {
		t.Fatalf("status %+v", st)
	}
	commit(t, ms[0], 2)
	commit(t, ms[1], 1)
	re := join(t, b, c(2))
	g := re.Generation()
	if g.Number != 2 || g.FirstCheckpoint != 3 || g.RestoredCheckpoint != 0 {
		t.Fatalf("generation %+v", g)
	}
	rs := []string{}
	for _, r := range g.Restored {
		rs = append(rs, r.Object)
	}
	want := []string{objname.CatalogV2CommitName("job/", 1, 2, 0), objname.CatalogV2CommitName("job/", 1, 1, 1)}
	if !slices.Equal(rs, want) {
		t.Fatalf("restored %v, want %v", rs, want)
	}
	if len(restored(re)) != 0 {
		t.Fatalf("process 2 restores %v", restored(re))
	}
}

// TestIndependentRestoreDisjoint: in the independent mode, when an
// instance that committed nothing falls back to what its generation
// restored and that part also covers another instance's key groups, it
// restores the part for its own key groups only, and the other instance
// its own commit: no key group is restored from two parts.
func TestIndependentRestoreDisjoint(t *testing.T) {
	b := dstltest.NewBackend()
	ind := func(c catalog.Config) catalog.Config { c.Mode = catalog.Independent; return c }
	one := join(t, b, ind(cfg(1, 0)))
	commit(t, one, 1)
	// 2 instances restore the one part; instance 0 commits, 1 does not.
	two := []*catalog.Member{join(t, b, ind(cfg(2, 0))), join(t, b, ind(cfg(2, 1)))}
	commit(t, two[0], 2)
	// A restart: instance 1 falls back to generation 1's part, for its
	// own key groups.
	re := join(t, b, ind(cfg(2, 1)))
	var got []string
	for _, r := range re.Generation().Restored {
		got = append(got, fmt.Sprintf("%s %v", r.Object, r.KeyGroups))
	}
	want := []string{
		fmt.Sprintf("%s %v", objname.CatalogV2CommitName("job/", 2, 2, 0), []dstl.KeyGroupRange{catalog.RangeOf(0, 2, 12)}),
		fmt.Sprintf("%s %v", objname.CatalogV2CommitName("job/", 1, 1, 0), []dstl.KeyGroupRange{catalog.RangeOf(1, 2, 12)}),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
	if got := restored(re); !slices.Equal(got, []string{"g1-i0-n1"}) {
		t.Fatalf("instance 1 restores %v", got)
	}
	if p := re.Restore(1)[0]; p.KeyGroups != catalog.RangeOf(1, 2, 12) {
		t.Fatalf("instance 1 restores its part for key groups %v, want %v", p.KeyGroups, catalog.RangeOf(1, 2, 12))
	}
	// A scale-in merges both: one instance restores the commit for key
	// groups [0, 5] and generation 1's part for [6, 11].
	merged := join(t, b, ind(cfg(1, 0)))
	var kgs []dstl.KeyGroupRange
	for _, p := range merged.Restore(0) {
		kgs = append(kgs, p.KeyGroups)
	}
	if want := []dstl.KeyGroupRange{catalog.RangeOf(0, 2, 12), catalog.RangeOf(1, 2, 12)}; !slices.Equal(restored(merged), []string{"g2-i0-n2", "g1-i0-n1"}) || !slices.Equal(kgs, want) {
		t.Fatalf("the merged instance restores %v for key groups %v, want [g2-i0-n2 g1-i0-n1] for %v", restored(merged), kgs, want)
	}
}

// TestRestoreFrom: a generation restores a retained older checkpoint by
// number; a checkpoint that is not retained fails with ErrNoCheckpoint.
func TestRestoreFrom(t *testing.T) {
	b := dstltest.NewBackend()
	c := func(i int) catalog.Config { c := cfg(2, i); c.Retain = 2; return c }
	ms := []*catalog.Member{join(t, b, c(0)), join(t, b, c(1))}
	for n := int64(1); n <= 3; n++ {
		commit(t, ms[1], n)
		commit(t, ms[0], n)
	}
	for _, tc := range []struct {
		from int64
		ok   bool
	}{{1, false}, {2, true}, {3, true}, {4, false}} {
		rc := c(1)
		rc.RestoreFrom = tc.from
		m, err := catalog.Join(t.Context(), b, rc)
		if !tc.ok {
			if !errors.Is(err, catalog.ErrNoCheckpoint) {
				t.Fatalf("restore from %d: %v, want ErrNoCheckpoint", tc.from, err)
			}
			continue
		}
		if err != nil || m.Generation().RestoredCheckpoint != tc.from {
			t.Fatalf("restore from %d: %v", tc.from, err)
		}
		if got := restored(m); !slices.Equal(got, []string{fmt.Sprintf("g1-i1-n%d", tc.from)}) {
			t.Fatalf("restore from %d restores %v", tc.from, got)
		}
		break // the next generation restores from this one
	}
}

// TestMalformedNames: objects a member never writes under a generation's
// directory (a commit of a process the generation does not have, a name
// of no known form) change nothing.
func TestMalformedNames(t *testing.T) {
	b := dstltest.NewBackend()
	ms := joinAll(t, b, 2, 0)
	put(t, b, objname.CatalogV2CommitName("job/", 1, 1, 7))
	put(t, b, "job/_catalog/v2/00000000000000000001/notes")
	commit(t, ms[1], 1)
	if st := commit(t, ms[0], 1); st.Complete != 1 {
		t.Fatalf("status %+v", st)
	}
	re := join(t, b, cfg(2, 1))
	if re.Generation().RestoredCheckpoint != 1 {
		t.Fatalf("generation %+v", re.Generation())
	}
}

// TestCheckpointNumbers: a commit below the generation's first
// checkpoint, or below the member's previous one, is refused; the
// previous one again is a retry; a checkpoint with no successor cannot
// start a generation after it.
func TestCheckpointNumbers(t *testing.T) {
	b := dstltest.NewBackend()
	m := join(t, b, cfg(1, 0))
	if _, err := m.Commit(t.Context(), 0, parts(m, 0)); err == nil {
		t.Fatal("commit of checkpoint 0 succeeded")
	}
	commit(t, m, 5)
	if _, err := m.Commit(t.Context(), 4, parts(m, 4)); err == nil {
		t.Fatal("a commit of 4 after 5 succeeded")
	}
	// A retry of 5 (as after an error) succeeds with the same parts, and
	// fails with others.
	if _, err := m.Commit(t.Context(), 5, parts(m, 5)); err != nil {
		t.Fatalf("a retry of 5: %v", err)
	}
	other := parts(m, 5)
	other[0].State = []byte("other")
	if _, err := m.Commit(t.Context(), 5, other); !errors.Is(err, catalog.ErrReplaced) {
		t.Fatalf("a retry of 5 with other parts: %v, want ErrReplaced", err)
	}
	commit(t, m, math.MaxInt64)
	if _, err := catalog.Join(t.Context(), b, cfg(1, 0)); !errors.Is(err, catalog.ErrDamaged) {
		t.Fatalf("a start after checkpoint MaxInt64: %v, want ErrDamaged", err)
	}
}

// TestConfig: what a configuration may not be.
func TestConfig(t *testing.T) {
	b := dstltest.NewBackend()
	for _, tc := range []struct {
		name   string
		change func(*catalog.Config)
		want   string
	}{
		{"no job", func(c *catalog.Config) { c.JobID = "" }, "job id"},
		{"no instances", func(c *catalog.Config) { c.Instances = 0 }, "instances 0"},
		{"more processes than instances", func(c *catalog.Config) { c.Processes = 3 }, "processes 3"},
		{"process out of range", func(c *catalog.Config) { c.Process = 2 }, "process 2"},
		{"max parallelism below instances", func(c *catalog.Config) { c.MaxParallelism = 1 }, "max parallelism 1"},
		{"mode", func(c *catalog.Config) { c.Mode = "x" }, `mode "x"`},
		{"negative retain", func(c *catalog.Config) { c.Retain = -1 }, "retain -1"},
		{"negative grace", func(c *catalog.Config) { c.Grace = -5 }, "grace"},
		{"key groups", func(c *catalog.Config) { c.KeyGroups = []dstl.KeyGroupRange{{Start: 0, End: 5}, {Start: 5, End: 11}} }, "overlap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg(2, 0)
			tc.change(&c)
			if _, err := catalog.Join(t.Context(), b, c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Join: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if n := len(names(t, b, "")); n != 0 {
		t.Fatalf("refused configurations wrote %d objects", n)
	}
}

// TestInstancesOf: processes split the instances evenly, and ProcessOf
// finds each instance's process.
func TestInstancesOf(t *testing.T) {
	for _, tc := range []struct{ p, q int }{{1, 1}, {8, 2}, {8, 3}, {1024, 8}, {7, 7}, {100, 33}} {
		next := 0
		for proc := range tc.q {
			lo, hi := catalog.InstancesOf(proc, tc.q, tc.p)
			if lo != next || hi < lo {
				t.Fatalf("%d instances in %d processes: process %d runs %d to %d, want from %d", tc.p, tc.q, proc, lo, hi, next)
			}
			for i := lo; i <= hi; i++ {
				if got := catalog.ProcessOf(i, tc.q, tc.p); got != proc {
					t.Fatalf("%d instances in %d processes: ProcessOf(%d) = %d, want %d", tc.p, tc.q, i, got, proc)
				}
			}
			next = hi + 1
		}
		if next != tc.p {
			t.Fatalf("%d instances in %d processes: %d run", tc.p, tc.q, next)
		}
	}
}

// TestJoinStalledPastAFence: a join that stalls between its check of the
// fence and its claim, while a newer generation starts, joins the newer
// one.
func TestJoinStalledPastAFence(t *testing.T) {
	mem := dstltest.NewBackend()
	ms := joinAll(t, mem, 2, 0)
	commitAll(t, ms, 1)
	var h *hooked
	h = &hooked{Backend: mem, op: "put", match: func(n string) bool { return n == objname.CatalogV2ClaimName("job/", 2, 0) },
		before: func() {
			// Process 1 restarts twice while process 0 claims its slot
			// of generation 2: generation 3 starts.
			join(t, mem, cfg(2, 1))
		}}
	join(t, mem, cfg(2, 1)) // generation 2
	m, err := catalog.Join(t.Context(), h, cfg(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	if m.Generation().Number != 3 {
		t.Fatalf("joined generation %d, want 3", m.Generation().Number)
	}
}

// TestRejoinFinishesNoStart: a fenced member whose generation's successor
// is not written yet (its starter stopped after the fence) gets ErrFenced
// from Rejoin; a Join finishes the start.
func TestRejoinFinishesNoStart(t *testing.T) {
	mem := dstltest.NewBackend()
	ms := joinAll(t, mem, 2, 0)
	commitAll(t, ms, 1)
	// A starter that writes the fence and stops before the record.
	stopped := &failing{Backend: mem, name: objname.CatalogV2GenerationName("job/", 2)}
	if _, err := catalog.Join(t.Context(), stopped, cfg(2, 1)); err == nil {
		t.Fatal("the stopped start succeeded")
	}
	if _, err := ms[0].Commit(t.Context(), 2, parts(ms[0], 2)); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("commit after the fence: %v", err)
	}
	if _, err := ms[0].Rejoin(t.Context()); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("Rejoin before the successor is written: %v, want ErrFenced", err)
	}
	m := join(t, mem, cfg(2, 1))
	if g := m.Generation(); g.Number != 2 || g.RestoredCheckpoint != 1 {
		t.Fatalf("the finished start: %+v", g)
	}
	if _, err := ms[0].Rejoin(t.Context()); err != nil {
		t.Fatalf("Rejoin after the start: %v", err)
	}
}

// failing fails every put of one name.
type failing struct {
	backends.Backend
	name string
}

// Unwrap returns the backend the calls go to.
func (f *failing) Unwrap() backends.Backend { return f.Backend }

func (f *failing) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	if name == f.name {
		return errLost
	}
	return f.Backend.Put(ctx, name, body, size)
}
