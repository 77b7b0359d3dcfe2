package catalog_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// collectJob is a job on a store whose clock the test moves, its
// members' clocks the store's.
type collectJob struct {
	t  *testing.T
	b  *clockBackend
	ms []*catalog.Member
}

func newCollectJob(t *testing.T, p int, change func(*catalog.Config)) *collectJob {
	j := &collectJob{t: t, b: newClockBackend()}
	for i := range p {
		j.ms = append(j.ms, join(t, j.b, j.cfg(p, i, change)))
	}
	return j
}

func (j *collectJob) cfg(p, i int, change func(*catalog.Config)) catalog.Config {
	c := cfg(p, i)
	c.Now = j.b.Now
	if change != nil {
		change(&c)
	}
	return c
}

// upload stores a log object made for checkpoint n (0: a name that
// records none) and returns its name.
func (j *collectJob) upload(n int64) string {
	j.t.Helper()
	name, err := objname.NewLog("job/", n)
	if err != nil {
		j.t.Fatal(err)
	}
	put(j.t, j.b, name)
	return name
}

// commit uploads an object made for n for each instance of m and commits
// the instance's part of n referring to it (and to extra, for the first
// instance); it returns the objects.
func (j *collectJob) commit(m *catalog.Member, n int64, extra ...string) []string {
	j.t.Helper()
	var ps []catalog.InstanceState
	var objects []string
	for k, i := range m.Instances() {
		o := j.upload(n)
		objects = append(objects, o)
		refs := []string{o}
		if k == 0 {
			refs = append(refs, extra...)
		}
		ps = append(ps, catalog.InstanceState{Instance: i, State: stateOf(m.Generation().Number, i, n), Objects: refs})
	}
	if _, err := m.Commit(j.t.Context(), n, ps); err != nil {
		j.t.Fatalf("commit %d of process %d: %v", n, m.Process(), err)
	}
	return objects
}

// round commits n on every member, the leader last, and returns the
// objects.
func (j *collectJob) round(n int64) []string {
	var out []string
	for i := len(j.ms) - 1; i >= 0; i-- {
		out = append(out, j.commit(j.ms[i], n)...)
	}
	return out
}

func (j *collectJob) collect(m *catalog.Member, dryRun bool) (*catalog.Plan, *collect.Report) {
	j.t.Helper()
	p, rep, err := m.Collect(j.t.Context(), collect.Options{DryRun: dryRun})
	if err != nil {
		j.t.Fatalf("Collect: %v", err)
	}
	return p, rep
}

func (j *collectJob) exists(name string) bool {
	_, ok := j.b.ObjectBytes(name)
	return ok
}

// TestCollect: the deletion rule deletes the log and snapshot objects
// that no kept checkpoint refers to once older than the grace, and the
// commits of the checkpoints it no longer retains; it keeps the retained
// and pending checkpoints' objects, an object made for a checkpoint that
// may still complete however old, and a young one.
func TestCollect(t *testing.T) {
	j := newCollectJob(t, 2, nil)
	var objs [4][]string
	for n := int64(1); n <= 3; n++ {
		objs[n] = j.round(n)
	}
	pendingObj := j.upload(4) // process 1 uploaded for 4, and has not committed yet
	oldStyle := j.upload(0)   // a name that records no checkpoint
	j.b.Advance(2 * time.Hour)
	young := j.upload(2) // an unreferenced object younger than the grace
	plan, rep := j.collect(j.ms[0], false)
	if !slices.Equal(plan.Retained, []int64{3}) || plan.HoldFrom != 4 {
		t.Fatalf("plan: retained %v, hold from %d", plan.Retained, plan.HoldFrom)
	}
	for n := int64(1); n <= 3; n++ {
		for _, o := range objs[n] {
			if j.exists(o) != (n == 3) {
				t.Errorf("object %s of checkpoint %d: stored %v", o, n, j.exists(o))
			}
		}
		for p := range 2 {
			name := objname.CatalogV2CommitName("job/", 1, n, p)
			if j.exists(name) != (n == 3) {
				t.Errorf("commit %s: stored %v", name, j.exists(name))
			}
		}
	}
	if !j.exists(pendingObj) || !j.exists(young) || j.exists(oldStyle) {
		t.Errorf("pending %v, young %v, old with no checkpoint %v; want true, true, false", j.exists(pendingObj), j.exists(young), j.exists(oldStyle))
	}
	if rep.Held.Objects != 1 || rep.Deleted.Objects != 5 {
		t.Errorf("report: held %+v, deleted %+v", rep.Held, rep.Deleted)
	}
	// Process 1 commits 4 with the held object: the checkpoint completes
	// with every object there.
	j.commit(j.ms[1], 4, pendingObj)
	j.commit(j.ms[0], 4)
	if !j.exists(pendingObj) {
		t.Fatal("the held object is gone")
	}
	// A collection before the sweep interval deletes the commits of 3
	// (no longer retained) and sweeps nothing.
	plan, rep = j.collect(j.ms[0], false)
	if rep != nil || len(plan.Drop) != 2 || j.exists(objname.CatalogV2CommitName("job/", 1, 3, 0)) {
		t.Fatalf("collection before the sweep interval: plan %+v, report %v", plan, rep)
	}
	// Non-leaders collect nothing.
	if p, r, err := j.ms[1].Collect(t.Context(), collect.Options{}); p != nil || r != nil || err != nil {
		t.Fatalf("a non-leader's Collect: %v, %v, %v", p, r, err)
	}
}

// TestCollectHolds: a process's latest commit that holds an earlier
// checkpoint (its materialisation runs: statestore's HoldFrom) keeps the
// objects made for it or later, however old and unreferenced.
func TestCollectHolds(t *testing.T) {
	j := newCollectJob(t, 1, nil)
	j.round(1)
	snapshotFile := j.upload(2) // a materialisation that started for 2
	m := j.ms[0]
	for _, n := range []int64{2, 3} {
		o := j.upload(n)
		if _, err := m.Commit(t.Context(), n, []catalog.InstanceState{{Instance: 0, State: []byte("s"), Objects: []string{o}, HoldFrom: 2}}); err != nil {
			t.Fatal(err)
		}
	}
	j.b.Advance(2 * time.Hour)
	plan, _ := j.collect(m, false)
	if plan.HoldFrom != 2 || !j.exists(snapshotFile) {
		t.Fatalf("hold from %d; the materialisation's file stored %v", plan.HoldFrom, j.exists(snapshotFile))
	}
}

// TestCollectRestored: what a generation restored is kept until it has
// Retain complete checkpoints of its own; the catalog objects of the
// fenced generation are deleted once older than the grace, but those it
// restores while needed and its fence, which stays.
func TestCollectRestored(t *testing.T) {
	j := newCollectJob(t, 2, nil)
	old := j.round(1)
	j.round(2)
	// Process 1 restarts: generation 2 restores 2.
	re := join(t, j.b, j.cfg(2, 1, nil))
	leader, err := j.ms[0].Rejoin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	j.ms = []*catalog.Member{leader, re}
	j.b.Advance(2 * time.Hour)
	plan, _ := j.collect(leader, false)
	restoredCommit := objname.CatalogV2CommitName("job/", 1, 2, 0)
	if !slices.Contains(plan.Commits, restoredCommit) || !j.exists(restoredCommit) {
		t.Fatalf("the restored commit is not kept: %v", plan.Commits)
	}
	for _, o := range old {
		if j.exists(o) {
			t.Errorf("checkpoint 1's object %s is kept", o)
		}
	}
	for _, name := range []string{objname.CatalogV2ClaimName("job/", 1, 0), objname.CatalogV2GenerationName("job/", 1)} {
		if j.exists(name) {
			t.Errorf("generation 1's %s is kept", name)
		}
	}
	if !j.exists(objname.CatalogV2FenceName("job/", 1)) {
		t.Error("generation 1's fence is deleted")
	}
	// Generation 2 completes a checkpoint: the restored commits go too,
	// at the next sweep.
	j.round(3)
	j.b.Advance(2 * time.Hour)
	j.collect(leader, false)
	if j.exists(restoredCommit) {
		t.Fatal("the restored commit is kept after the generation completed its own")
	}
	if n := names(t, j.b, objname.CatalogV2GenerationDir("job/", 1)); !slices.Equal(n, []string{objname.CatalogV2FenceName("job/", 1)}) {
		t.Fatalf("generation 1's objects left: %v, want its fence alone", n)
	}
}

// TestFencedPastTheGrace: a member that stalls past the grace while a
// newer generation starts, commits and sweeps (deleting the fenced
// generation's claim and record) wakes fenced all the same: the fence
// stays, so its commit fails with ErrFenced rather than complete its
// checkpoint, and its collection deletes nothing of the live generation.
// (The job runner's simulation found it, seed 82: the sweep deleted the
// fence too, and the woken leader of a job of one process confirmed its
// commits and swept the live generation's snapshot away.)
func TestFencedPastTheGrace(t *testing.T) {
	j := newCollectJob(t, 1, nil)
	j.round(1)
	j.round(2)
	zombie := j.ms[0]
	live := join(t, j.b, j.cfg(1, 0, nil)) // its slot is held: generation 2
	j.ms = []*catalog.Member{live}
	j.commit(live, 3)
	objs := j.commit(live, 4) // retained
	j.b.Advance(2 * time.Hour)
	j.collect(live, false)
	if j.exists(objname.CatalogV2GenerationName("job/", 1)) {
		t.Fatal("the sweep kept generation 1's record")
	}
	if !j.exists(objname.CatalogV2FenceName("job/", 1)) {
		t.Error("the sweep deleted generation 1's fence")
	}
	// The stalled member wakes.
	ps := []catalog.InstanceState{{Instance: 0, State: stateOf(1, 0, 5), Objects: []string{j.upload(5)}}}
	if st, err := zombie.Commit(t.Context(), 5, ps); !errors.Is(err, catalog.ErrFenced) {
		t.Errorf("the woken member's commit: complete %d, %v; want ErrFenced", st.Complete, err)
	}
	if _, _, err := zombie.Collect(t.Context(), collect.Options{}); !errors.Is(err, catalog.ErrFenced) {
		t.Errorf("the woken member's collection: %v; want ErrFenced", err)
	}
	for _, o := range objs {
		if !j.exists(o) {
			t.Errorf("the live generation's %s is gone", o)
		}
	}
}

// TestCollectAfterAFailedFenceRead: a leader whose commit completed its
// checkpoint, and whose read of the fence after it failed, does not drop
// the commits of the checkpoint before it at its next collection: a newer
// generation may have started before that commit, and restore them. (The
// job runner's simulation found it, seed 19: a process restarted while
// the leader's reads of the fence failed; the new generation restored
// checkpoint 8, whose commit the leader, which had completed 9, deleted.)
func TestCollectAfterAFailedFenceRead(t *testing.T) {
	b := &failingGets{Backend: dstltest.NewBackend()}
	c := cfg(1, 0)
	leader := join(t, b, c)
	commit(t, leader, 1)
	commit(t, leader, 2)
	if got := restored(join(t, b, c)); !slices.Equal(got, []string{string(stateOf(1, 0, 2))}) { // a restart: generation 2
		t.Fatalf("generation 2 restores %q, want checkpoint 2", got)
	}
	fence := objname.CatalogV2FenceName("job/", 1)
	b.fail.Store(&fence)
	if _, err := leader.Commit(t.Context(), 3, parts(leader, 3)); err == nil || errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("a commit whose read of the fence failed: %v, want that error", err)
	}
	b.fail.Store(nil)
	if _, _, err := leader.Collect(t.Context(), collect.Options{}); !errors.Is(err, catalog.ErrFenced) {
		t.Errorf("the fenced leader's collection: %v, want ErrFenced", err)
	}
	if restoredCommit := objname.CatalogV2CommitName("job/", 1, 2, 0); !has(names(t, b, "job/"), restoredCommit) {
		t.Fatalf("%s, which generation 2 restores, is gone", restoredCommit)
	}
	if dropped := objname.CatalogV2CommitName("job/", 1, 1, 0); has(names(t, b, "job/"), dropped) {
		t.Errorf("%s, which checkpoint 2 superseded before a read of the fence, is kept", dropped)
	}
}

// failingGets fails the gets of one name, while it is set.
type failingGets struct {
	*dstltest.Backend
	fail atomic.Pointer[string]
}

// Unwrap returns the backend the calls go to.
func (f *failingGets) Unwrap() backends.Backend { return f.Backend }

var errGetFailed = errors.New("injected: the get failed")

func (f *failingGets) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if p := f.fail.Load(); p != nil && *p == name {
		return nil, errGetFailed
	}
	return f.Backend.Get(ctx, name, offset, length)
}

// TestCollectFenced: a fenced member collects nothing (ErrFenced), and
// neither does one whose sweep lists the fence.
func TestCollectFenced(t *testing.T) {
	j := newCollectJob(t, 2, nil)
	objs := j.round(1)
	j.round(2)
	j.b.Advance(2 * time.Hour)
	join(t, j.b, j.cfg(2, 1, nil)) // fences generation 1
	if _, _, err := j.ms[0].Collect(t.Context(), collect.Options{}); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("Collect of a fenced member: %v", err)
	}
	for _, o := range objs {
		if !j.exists(o) {
			t.Fatalf("a fenced member's collection deleted %s", o)
		}
	}
}

// TestCollectDryRun: a dry run deletes nothing, not even catalog objects,
// and says what it would.
func TestCollectDryRun(t *testing.T) {
	j := newCollectJob(t, 2, nil)
	objs := j.round(1)
	j.round(2)
	j.b.Advance(2 * time.Hour)
	before := names(t, j.b, "")
	plan, rep := j.collect(j.ms[0], true)
	if after := names(t, j.b, ""); !slices.Equal(before, after) {
		t.Fatalf("a dry run changed the store:\n%v\n%v", before, after)
	}
	if len(plan.Drop) != 2 || rep.Deletable.Objects != len(objs) {
		t.Fatalf("dry run: drop %v, deletable %+v", plan.Drop, rep.Deletable)
	}
}

// TestCollectJob: a collection from outside the job is the leader's
// sweep.
func TestCollectJob(t *testing.T) {
	j := newCollectJob(t, 2, nil)
	objs := j.round(1)
	kept := j.round(2)
	j.b.Advance(2 * time.Hour)
	plan, rep, err := catalog.CollectJob(t.Context(), j.b, catalog.PlanOptions{}, collect.Options{JobID: "job", Grace: time.Hour, Now: j.b.Now})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.Retained, []int64{2}) || rep.Deleted.Objects != len(objs) {
		t.Fatalf("plan %+v, deleted %+v", plan, rep.Deleted)
	}
	for _, o := range kept {
		if !j.exists(o) {
			t.Fatalf("kept object %s deleted", o)
		}
	}
	if p, r, err := catalog.CollectJob(t.Context(), j.b, catalog.PlanOptions{}, collect.Options{JobID: "no-such-job"}); p != nil || r != nil || err != nil {
		t.Fatalf("a job with no catalog: %v, %v, %v", p, r, err)
	}
}

// TestStalledCommitter: a process that uploaded objects for checkpoint N
// and stalls past the grace before its commit, while the leader collects,
// finds them there when it commits: an object made for a checkpoint that
// may still complete is kept however old. An object whose name records no
// checkpoint (as every object was named before) would be deleted, and the
// checkpoint complete without it: that was the first layout's caveat.
func TestStalledCommitter(t *testing.T) {
	for _, madeFor := range []bool{true, false} {
		j := newCollectJob(t, 2, nil)
		j.round(1)
		j.round(2)
		var n int64
		if madeFor {
			n = 3
		}
		uploaded := j.upload(n) // process 1's upload for 3; then it stalls
		j.commit(j.ms[0], 3)
		for range 3 {
			j.b.Advance(time.Hour)
			j.collect(j.ms[0], false)
		}
		j.commit(j.ms[1], 3, uploaded)
		j.commit(j.ms[0], 4) // the leader lists 3 complete
		if st, err := j.ms[0].Refresh(t.Context()); err != nil || st.Complete != 3 {
			t.Fatalf("status %+v, %v", st, err)
		}
		if j.exists(uploaded) != madeFor {
			t.Fatalf("made for 3: %v; the stalled process's object stored %v", madeFor, j.exists(uploaded))
		}
	}
}

var _ backends.Backend = (*clockBackend)(nil)
