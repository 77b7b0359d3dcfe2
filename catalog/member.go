package catalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
)

// Member is one process of a job in one generation: it commits its
// instances' parts of checkpoints and learns which checkpoints are
// complete. It is safe for concurrent use; its commits are serialised.
type Member struct {
	s           *store
	cfg         Config
	gen         *Generation
	first, last int             // the instances this process runs
	restore     map[int][]*Part // by instance: the restored parts whose key groups overlap its own

	mu       sync.Mutex
	fenced   bool
	previous int64 // the checkpoint of the member's latest commit, 0 for none
	before   int64 // the checkpoint of the commit before it, 0 for none
	complete int64 // the latest complete checkpoint the member knows of
	// The leader's (process 0's) view of its generation in the aligned
	// mode: decided lists the checkpoints it saw complete, ascending;
	// fenceChecked is the latest of them that it saw complete before a
	// read that found no fence; pending is its latest commit when no
	// listing after it saw the checkpoint complete (0: none); commitsOf
	// holds the commits a listing showed, by checkpoint, for the deletion
	// rule.
	decided      []int64
	fenceChecked int64
	pending      int64
	commitsOf    map[int64][]string
	// The deletion rule's state: the commits read while kept, and when
	// the last sweep ran.
	cache     map[string]*commit
	lastSweep time.Time
}

// Generation returns the member's generation.
func (m *Member) Generation() *Generation { return m.gen }

// Process returns the member's process index.
func (m *Member) Process() int { return m.cfg.Process }

// Leader reports whether the member is its generation's process 0, which
// learns which checkpoints are complete (in the aligned mode) and applies
// the deletion rule.
func (m *Member) Leader() bool { return m.cfg.Process == 0 }

// Instances returns the instances the member's process runs, ascending.
func (m *Member) Instances() []int {
	out := make([]int, 0, m.last-m.first+1)
	for i := m.first; i <= m.last; i++ {
		out = append(out, i)
	}
	return out
}

// KeyGroups returns instance i's key-group range in the member's
// generation.
func (m *Member) KeyGroups(i int) dstl.KeyGroupRange { return m.gen.KeyGroups[i] }

// Restore returns the parts that instance i restores from: those the
// generation restored whose key groups overlap the instance's, in
// key-group order (after a rescale several, never two of one key group).
// Restore from each part only the key groups of its KeyGroups, which in
// the independent mode may be fewer than its State holds. It is empty on
// a first start and for an instance the member does not run.
func (m *Member) Restore(i int) []*Part { return m.restore[i] }

// Status is what a member knows of its generation's checkpoints. Confirm
// every checkpoint the member committed up to Complete, in order (with
// dstl or statestore): the log releases what only an unconfirmed older
// checkpoint kept.
type Status struct {
	// Complete is the latest complete checkpoint the member knows of (in
	// the independent mode its own latest commit), 0 for none. It lags
	// the commits: a member learns that checkpoint N completed from the
	// leader's commit of N or of a later checkpoint.
	Complete int64
}

// InstanceState is what one instance commits at a checkpoint.
type InstanceState struct {
	// Instance is the instance's index: one the member's process runs.
	Instance int
	// State is what the instance restores from, such as a statestore
	// CheckpointHandle's encoding.
	State []byte
	// Objects names every object under the job's prefix that State
	// refers to (log and snapshot objects; statestore's
	// CheckpointHandle.Objects): the deletion rule keeps them while the
	// checkpoint is retained or pending.
	Objects []string
	// Metadata is the user's, such as input offsets.
	Metadata map[string]string
	// HoldFrom is the lowest checkpoint that objects a later checkpoint
	// of the instance may reference were made for (statestore's
	// Checkpointer.HoldFrom): the deletion rule keeps every object made
	// for it or later, however old, while this is the instance's latest
	// commit. Default the checkpoint after this one.
	HoldFrom int64
}

// Commit commits the member's instances' parts of checkpoint n (at least
// the generation's FirstCheckpoint, and above the member's previous
// commit) with one create-only put of an object that holds them all, and
// learns which checkpoints are complete and whether the member is fenced.
// parts must hold one state for each instance of the member.
//
// What it costs: one put; in the aligned mode one get of the leader's
// commit of the member's previous checkpoint (the leader instead lists
// one checkpoint's directory: one page per 1,000 processes); and one get
// of the generation's fence. Nothing else, however many instances,
// checkpoints or generations the job has.
//
// It fails with ErrFenced when the fence is there. The commit is written
// all the same: when the newer generation's starter listed the catalog
// after the put, and n was complete then, the newer generation restores
// it; otherwise no reader ever does. So ErrFenced says nothing of n's
// outcome: the member must neither confirm n nor take it as failed (and,
// say, abort a transaction the newer generation may commit on restore);
// the newer generation's restore decides.
//
// A commit of n may be retried after an error (of its put, or of what
// follows it): when the commit is there already with the same parts (the
// earlier put's answer was lost), the retry succeeds; with others, it
// fails with ErrReplaced.
func (m *Member) Commit(ctx context.Context, n int64, parts []InstanceState) (Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.newCommitLocked(n, parts)
	if err != nil {
		return Status{}, err
	}
	if m.fenced {
		m.s.metrics.outcome(ctx, m.s.metrics.commits, "fenced")
		return Status{}, fmt.Errorf("%w: generation %d", ErrFenced, m.gen.Number)
	}
	lead := m.Leader() && m.gen.Mode == Aligned
	completes := false // the leader's commit completes n
	if lead {
		if completes, err = m.decideLocked(ctx, n); err != nil {
			m.s.metrics.outcome(ctx, m.s.metrics.commits, "error")
			return Status{}, err
		}
		c.Complete = m.latestDecided()
		if completes {
			c.Complete = n
		}
	}
	if err := m.putCommitLocked(ctx, c); err != nil {
		m.s.metrics.outcome(ctx, m.s.metrics.commits, "error")
		return Status{}, err
	}
	// A retry of the latest commit (its put or its learning failed)
	// learns from the same leader's commit as the first attempt.
	if n != m.previous {
		m.before, m.previous = m.previous, n
	}
	prev := m.before
	if lead {
		if c.Complete == n {
			m.decide(n, nil)
			m.pending = 0
		} else {
			m.pending = n
		}
		m.commitsOf[n] = appendUnique(m.commitsOf[n], objname.CatalogV2CommitName(m.s.prefix, m.gen.Number, n, 0))
		m.boundLocked()
	}
	st, err := m.learnLocked(ctx, prev)
	if errors.Is(err, ErrFenced) {
		m.s.metrics.outcome(ctx, m.s.metrics.commits, "fenced")
	} else if err != nil {
		m.s.metrics.outcome(ctx, m.s.metrics.commits, "error")
	} else {
		m.s.metrics.outcome(ctx, m.s.metrics.commits, "ok")
	}
	return st, err
}

// newCommitLocked checks a commit's arguments and makes its record.
func (m *Member) newCommitLocked(n int64, parts []InstanceState) (*commit, error) {
	switch {
	case n < m.gen.FirstCheckpoint:
		return nil, fmt.Errorf("catalog: checkpoint %d is below generation %d's first, %d", n, m.gen.Number, m.gen.FirstCheckpoint)
	case n < m.previous:
		return nil, fmt.Errorf("catalog: checkpoint %d is below the member's previous commit, %d", n, m.previous)
	case len(parts) != m.last-m.first+1:
		return nil, fmt.Errorf("catalog: %d instances' parts for process %d, which runs instances %d to %d", len(parts), m.cfg.Process, m.first, m.last)
	}
	c := &commit{Generation: m.gen.Number, Checkpoint: n, Process: m.cfg.Process, Created: m.cfg.Now().UTC(), HoldFrom: math.MaxInt64}
	seen := map[int]bool{}
	for _, ps := range parts {
		switch {
		case ps.Instance < m.first || ps.Instance > m.last:
			return nil, fmt.Errorf("catalog: instance %d: process %d runs instances %d to %d", ps.Instance, m.cfg.Process, m.first, m.last)
		case seen[ps.Instance]:
			return nil, fmt.Errorf("catalog: instance %d's part given twice", ps.Instance)
		case ps.HoldFrom < 0:
			return nil, fmt.Errorf("catalog: instance %d: hold from checkpoint %d is negative", ps.Instance, ps.HoldFrom)
		case slices.Contains(ps.Objects, ""):
			return nil, fmt.Errorf("catalog: instance %d: an empty object name", ps.Instance)
		}
		seen[ps.Instance] = true
		hold := ps.HoldFrom
		if hold == 0 {
			hold = n + 1
			if n == math.MaxInt64 {
				hold = n
			}
		}
		c.HoldFrom = min(c.HoldFrom, hold)
		objects := slices.Clone(ps.Objects)
		if objects == nil {
			objects = []string{}
		}
		c.Parts = append(c.Parts, &Part{Instance: ps.Instance, KeyGroups: m.gen.KeyGroups[ps.Instance], State: ps.State,
			Metadata: ps.Metadata, Objects: objects})
	}
	slices.SortFunc(c.Parts, func(a, b *Part) int { return a.Instance - b.Instance })
	return c, nil
}

// putCommitLocked puts the commit, create-only; a commit of the name
// already there with the same parts is this member's own (an earlier
// attempt whose answer was lost).
func (m *Member) putCommitLocked(ctx context.Context, c *commit) error {
	data, err := encode(kindCommit, c)
	if err != nil {
		return err
	}
	name := objname.CatalogV2CommitName(m.s.prefix, m.gen.Number, c.Checkpoint, m.cfg.Process)
	ok, err := m.s.put(ctx, name, data)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	// Only this member, the holder of the process's claim in the
	// generation, writes its commits: the commit is an earlier attempt of
	// this one whose answer (and read-back) failed, or a commit of n with
	// other parts.
	old, err := m.s.commit(ctx, name, m.gen)
	if err != nil {
		return err
	}
	if !sameCommit(old, c) {
		return fmt.Errorf("%w: commit %q exists, of other parts: checkpoint %d was committed before", ErrReplaced, name, c.Checkpoint)
	}
	c.Complete = max(c.Complete, old.Complete)
	return nil
}

// decideLocked is the aligned-mode leader's listing before its commit of
// n: of its latest commit's checkpoint when no listing saw that one
// complete yet, or else of n's, whose commits of the other processes may
// all be there already (completes reports it: the leader's own commit
// then completes n). One listing of one checkpoint's directory, at most
// one page per 1,000 processes; none when the job has one process.
func (m *Member) decideLocked(ctx context.Context, n int64) (completes bool, err error) {
	if m.gen.Processes == 1 {
		return true, nil
	}
	target := n
	if m.pending != 0 {
		target = m.pending
	}
	seen := make([]bool, m.gen.Processes)
	var names []string
	err = m.s.list(ctx, objname.CatalogV2CheckpointDir(m.s.prefix, m.gen.Number, target), func(oi backends.ObjectInfo) {
		ref := objname.ParseCatalog(m.s.prefix, oi.Name)
		if ref.Kind == objname.CatalogCommit && ref.Generation == m.gen.Number && ref.Checkpoint == target && ref.Process < m.gen.Processes {
			seen[ref.Process] = true
			names = append(names, oi.Name)
		}
	})
	if err != nil {
		return false, err
	}
	for _, name := range names {
		m.commitsOf[target] = appendUnique(m.commitsOf[target], name)
	}
	if target == n {
		seen[0] = true // the commit this listing precedes
	}
	all := !slices.Contains(seen, false)
	if target != n {
		// The latest commit's checkpoint is decided: complete, or never
		// (the leader has moved on; a commit of it after this listing
		// may complete it in a starter's listing, which may then restore
		// it, but the leader never tells it complete).
		m.pending = 0
		if all {
			m.decide(target, nil)
		}
		return false, nil
	}
	return all, nil
}

// maxRemembered bounds the checkpoints whose commits the leader remembers
// for the deletion rule (and the complete ones it remembers) when no
// collection trims them: the oldest are forgotten, and a sweep deletes
// their commits.
const maxRemembered = 1024

// boundLocked forgets the oldest remembered checkpoints past
// maxRemembered.
func (m *Member) boundLocked() {
	if len(m.decided) > maxRemembered {
		m.decided = slices.Clone(m.decided[len(m.decided)-maxRemembered:])
	}
	if len(m.commitsOf) > maxRemembered {
		ns := slices.Sorted(maps.Keys(m.commitsOf))
		for _, n := range ns[:len(ns)-maxRemembered] {
			delete(m.commitsOf, n)
		}
	}
}

// decide records checkpoint n as complete.
func (m *Member) decide(n int64, _ []string) {
	if len(m.decided) == 0 || m.decided[len(m.decided)-1] < n {
		m.decided = append(m.decided, n)
	}
	m.complete = max(m.complete, n)
}

func (m *Member) latestDecided() int64 {
	if len(m.decided) == 0 {
		return 0
	}
	return m.decided[len(m.decided)-1]
}

func appendUnique(names []string, name string) []string {
	if slices.Contains(names, name) {
		return names
	}
	return append(names, name)
}

// learnLocked learns, after a commit, which checkpoints are complete and
// whether the member is fenced: a member of the aligned mode but the
// leader reads the leader's commit of the member's previous checkpoint
// prev, which tells the latest complete checkpoint the leader knew of;
// then every member reads the fence. The fence is read last: a member
// that finds none confirms only checkpoints that completed before that
// read, which a newer generation's starter, who writes the fence before
// it lists, therefore sees complete.
func (m *Member) learnLocked(ctx context.Context, prev int64) (Status, error) {
	if m.gen.Mode == Aligned && !m.Leader() && prev > 0 {
		name := objname.CatalogV2CommitName(m.s.prefix, m.gen.Number, prev, 0)
		c, err := m.s.commit(ctx, name, m.gen)
		switch {
		case errors.Is(err, backends.ErrNotFound):
			// The leader did not commit prev (yet): no news.
		case err != nil:
			return Status{}, err
		default:
			m.complete = max(m.complete, c.Complete)
		}
	}
	fenced, err := m.s.exists(ctx, objname.CatalogV2FenceName(m.s.prefix, m.gen.Number))
	if err != nil {
		return Status{}, err
	}
	if fenced {
		m.fenced = true
		m.s.metrics.fenced.Add(ctx, 1)
		return Status{}, fmt.Errorf("%w: generation %d is fenced: generation %d is starting", ErrFenced, m.gen.Number, m.gen.Number+1)
	}
	m.fenceChecked = m.latestDecided()
	if m.gen.Mode == Independent {
		m.complete = m.previous
	}
	return Status{Complete: m.complete}, nil
}

// Refresh learns once more, without a commit, which checkpoints are
// complete (for a member's last checkpoint, before it stops): the leader
// lists the directory of its latest commit's checkpoint when no listing
// saw it complete yet; another member reads the leader's commit of its
// latest checkpoint; then every member reads the fence. It fails with
// ErrFenced when the fence is there.
func (m *Member) Refresh(ctx context.Context) (Status, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fenced {
		return Status{}, fmt.Errorf("%w: generation %d", ErrFenced, m.gen.Number)
	}
	if m.Leader() && m.gen.Mode == Aligned && m.pending != 0 {
		if _, err := m.decideLocked(ctx, math.MaxInt64); err != nil {
			return Status{}, err
		}
	}
	return m.learnLocked(ctx, m.previous)
}

// isFenced reports whether the member learnt it is fenced.
func (m *Member) isFenced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fenced
}
