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

// failingGet fails the reads of one object while armed, as a store that
// does not answer them.
type failingGet struct {
	backends.Backend
	name  string
	armed atomic.Bool
}

// Unwrap returns the backend the calls go to.
func (f *failingGet) Unwrap() backends.Backend { return f.Backend }

var errNoAnswer = errors.New("the store did not answer")

func (f *failingGet) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if name == f.name && f.armed.Load() {
		return nil, errNoAnswer
	}
	return f.Backend.Get(ctx, name, offset, length)
}

// TestStalledMemberAfterItsFenceIsCollected: a member of a fenced
// generation that stalls for longer than the grace must still learn, at
// its next commit, that it is fenced, and delete nothing. The deletion
// rule deletes a fenced generation's catalog objects once they are older
// than the grace, its fence among them; the stalled member then finds no
// fence, commits, is told its checkpoint is complete (a single process
// completes each checkpoint), and its collection deletes an object that
// the live generation's checkpoint refers to.
func TestStalledMemberAfterItsFenceIsCollected(t *testing.T) {
	ctx := t.Context()
	j := newCollectJob(t, 1, nil)
	stalled := j.ms[0]
	base := j.round(1)[0] // the state's base object, made for checkpoint 1
	// The process is stalled; a new one takes its slot and starts
	// generation 2, which restores checkpoint 1 and refers to its base.
	live := join(t, j.b, j.cfg(1, 0, nil))
	j.commit(live, 2, base)
	j.b.Advance(2 * time.Hour)
	j.commit(live, 3, base)
	j.collect(live, false) // generation 1's catalog objects are older than the grace: deleted
	// The stalled process wakes up.
	o := j.upload(2)
	st, err := stalled.Commit(ctx, 2, []catalog.InstanceState{{Instance: 0, State: []byte("stale"), Objects: []string{o}}})
	if !errors.Is(err, catalog.ErrFenced) {
		t.Errorf("the stalled member of generation 1 committed checkpoint 2 after generation 2 started: status %+v, error %v; want ErrFenced", st, err)
	}
	j.b.Advance(2 * time.Hour)
	if _, _, err := stalled.Collect(ctx, collect.Options{}); !errors.Is(err, catalog.ErrFenced) {
		t.Errorf("the stalled member's collection: %v; want ErrFenced", err)
	}
	if !j.exists(base) {
		t.Errorf("the object %s that generation 2's checkpoint 3 refers to was deleted by the stalled member of generation 1", base)
	}
}

// TestLeaderDropsNothingANewGenerationRestores: the leader deletes the
// commits of the checkpoints it no longer retains from what its listings
// told it, at every Collect, without reading the fence. When the listing
// that completed checkpoint 2 came after a new generation's starter
// listed (so that the new generation restores checkpoint 1), and the
// leader's read of the fence after it failed, the leader's next Collect
// deletes the commits of checkpoint 1, which the new generation restores:
// none of its processes can join.
func TestLeaderDropsNothingANewGenerationRestores(t *testing.T) {
	ctx := t.Context()
	mem := dstltest.NewBackend()
	fg := &failingGet{Backend: mem, name: objname.CatalogV2FenceName("job/", 1)}
	leader := join(t, fg, cfg(2, 0))
	other := join(t, mem, cfg(2, 1))
	commit(t, other, 1)
	if st := commit(t, leader, 1); st.Complete != 1 {
		t.Fatalf("checkpoint 1: status %+v", st)
	}
	commit(t, other, 2)
	// A restart of process 1 starts generation 2: its listing, after the
	// fence, shows checkpoint 1 complete and 2 not.
	re := join(t, mem, cfg(2, 1))
	if got := re.Generation().RestoredCheckpoint; got != 1 {
		t.Fatalf("generation 2 restores checkpoint %d, want 1", got)
	}
	// The leader's commit of 2 completes 2 in its listing; its read of
	// the fence then fails.
	fg.armed.Store(true)
	if _, err := leader.Commit(ctx, 2, parts(leader, 2)); err == nil || errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("the leader's commit of 2 with its read of the fence failing: %v", err)
	}
	fg.armed.Store(false)
	leader.Collect(ctx, collect.Options{})
	for p := range 2 {
		if name := objname.CatalogV2CommitName("job/", 1, 1, p); !slices.Contains(names(t, mem, "job/_catalog/"), name) {
			t.Errorf("the commit %s, which generation 2 restores, was deleted by generation 1's leader", name)
		}
	}
	if _, err := catalog.Join(ctx, mem, cfg(2, 0)); err != nil {
		t.Errorf("process 0 cannot join generation 2: %v", err)
	}
}

// TestIndependentRestoreNoRollback: in the independent mode a member
// confirms its own latest commit; a later generation must not restore
// its key groups from an older checkpoint. After a rescale, process 0
// commits (and confirms) checkpoint 2 while process 1 commits nothing;
// the restart of process 1 falls back, for process 1's key groups, to the
// part generation 2 restored, which also covers process 0's, so process
// 0's key groups are restored from checkpoint 1 too: the confirmed
// checkpoint 2 is rolled back. (TestIndependentRestoreDisjoint asserts
// that choice.)
func TestIndependentRestoreNoRollback(t *testing.T) {
	b := dstltest.NewBackend()
	ind := func(c catalog.Config) catalog.Config { c.Mode = catalog.Independent; return c }
	one := join(t, b, ind(cfg(1, 0)))
	commit(t, one, 1)
	two := []*catalog.Member{join(t, b, ind(cfg(2, 0))), join(t, b, ind(cfg(2, 1)))}
	if st := commit(t, two[0], 2); st.Complete != 2 {
		t.Fatalf("process 0's commit of 2: status %+v", st)
	}
	re := join(t, b, ind(cfg(2, 1)))
	own := catalog.RangeOf(0, 2, 12)
	for _, r := range re.Generation().Restored {
		for _, kg := range r.KeyGroups {
			if kg.Start <= own.End && own.Start <= kg.End {
				if n := objname.ParseCatalog("job/", r.Object).Checkpoint; n < 2 {
					t.Errorf("generation %d restores process 0's key groups %v from checkpoint %d (%s); process 0 confirmed checkpoint 2",
						re.Generation().Number, own, n, r.Object)
				}
			}
		}
	}
}
