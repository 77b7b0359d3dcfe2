package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// Run runs the instances that coord assigns this process, with the state
// stores and tasks that open makes, until ctx ends: then it takes a last
// checkpoint of every instance, commits it, learns once more which
// checkpoints are complete, confirms them, closes the instances and
// returns nil. It returns earlier with the first error it cannot handle:
// of open, of a task, of a coordinator's Join (another process replaced
// this one, say), or of a restore.
//
// storage is the process's log storage, shared by every instance: their
// changes are uploaded together, one object per upload round.
func Run(ctx context.Context, storage *dstl.Storage, coord Coordinator, cfg Config, open Open) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if storage == nil || coord == nil || open == nil {
		return errors.New("job: Run needs a storage, a coordinator and an Open function")
	}
	r := &runner{storage: storage, coord: coord, cfg: cfg, open: open}
	for {
		a, err := coord.Join(ctx)
		if err != nil {
			if ctx.Err() != nil {
				r.event(Event{Kind: EventStopped, Instance: -1})
				return nil
			}
			return fmt.Errorf("job: join: %w", err)
		}
		r.event(Event{Kind: EventJoined, Generation: a.Generation, Instance: -1})
		err = r.runGeneration(ctx, a)
		switch {
		case errors.Is(err, errStop):
			r.event(Event{Kind: EventStopped, Generation: a.Generation, Instance: -1})
			return nil
		case errors.Is(err, ErrFenced):
			r.event(Event{Kind: EventFenced, Generation: a.Generation, Instance: -1, Err: err})
			cfg.Logger.Info("job: fenced; joining again", "generation", a.Generation, "err", err)
			continue
		default:
			return err
		}
	}
}

// runner runs one process's instances.
type runner struct {
	storage *dstl.Storage
	coord   Coordinator
	cfg     Config
	open    Open
}

func (r *runner) event(e Event) {
	if r.cfg.OnEvent != nil {
		r.cfg.OnEvent(e)
	}
}

// instance is one running instance.
type instance struct {
	in       *Instance
	cp       *statestore.Checkpointer
	task     Task
	operator string
	first    int64 // the first checkpoint it takes part in: it was opened after the earlier ones were taken
}

// taken is a checkpoint taken and not committed yet.
type taken struct {
	n      int64
	at     time.Time // when to commit it
	states []catalog.InstanceState
}

// generation is the state of one generation's loop.
type generation struct {
	a         *Assignment
	instances []*instance
	last      int64   // the latest checkpoint taken, or above every one restored
	shift     int64   // added to the assignment's numbers, to keep them above every checkpoint restored
	pending   []int64 // checkpoints committed (or whose commit's outcome is unknown), not confirmed
	queued    []taken
}

// number returns the number of the checkpoint of time t.
func (g *generation) number(t time.Time, interval time.Duration) int64 {
	n := g.a.numberAt(t, interval)
	if n > math.MaxInt64-g.shift {
		return math.MaxInt64
	}
	return n + g.shift
}

// above makes every checkpoint taken from now on numbered above restored,
// a checkpoint an instance restored: numbers from the assignment's clock
// move up when they are not above it (a restore of another process's
// checkpoint, whose clock runs ahead).
func (g *generation) above(restored int64, now time.Time, interval time.Duration) {
	g.last = max(g.last, restored)
	if n := g.number(now, interval); n < restored {
		g.shift += restored - n
	}
}

// remove removes instance index from the running ones, and its states from
// the checkpoints queued, and returns it (nil if it does not run).
func (g *generation) remove(index int) *instance {
	k := slices.IndexFunc(g.instances, func(in *instance) bool { return in.in.Index == index })
	if k < 0 {
		return nil
	}
	in := g.instances[k]
	g.instances = slices.Delete(g.instances, k, k+1)
	for i := range g.queued {
		g.queued[i].states = slices.DeleteFunc(g.queued[i].states, func(st catalog.InstanceState) bool { return st.Instance == index })
	}
	return in
}

// insert adds a running instance, in the order of the indexes.
func (g *generation) insert(in *instance) {
	k, _ := slices.BinarySearchFunc(g.instances, in.in.Index, func(x *instance, index int) int { return x.in.Index - index })
	g.instances = slices.Insert(g.instances, k, in)
}

// runGeneration runs the assignment's instances until ctx ends (errStop
// after the last checkpoint), the coordinator fences the process
// (ErrFenced) or an error.
func (r *runner) runGeneration(ctx context.Context, a *Assignment) (err error) {
	g := &generation{a: a}
	defer func() {
		for _, in := range g.instances {
			if cerr := in.close(); cerr != nil && err == nil && !errors.Is(cerr, statestore.ErrClosed) {
				err = cerr
			}
		}
	}()
	// The instances share the storage: its local copies that none of
	// them restores are cleaned once, before any restores (see
	// statestore.Config.SharedStorage).
	var keep []dstl.Handle
	for _, as := range a.Instances {
		hs, err := restoreHandles(as)
		if err != nil {
			return err
		}
		for _, h := range hs {
			keep = append(keep, h.LogHandles()...)
		}
	}
	if _, err := r.storage.CleanLocalCopies(ctx, keep...); err != nil {
		r.cfg.Logger.Warn("job: clean local copies", "err", err)
	}
	for _, as := range a.Instances {
		in, err := r.openInstance(ctx, g, as)
		if err != nil {
			if ctx.Err() == nil {
				err = r.fencedRestore(ctx, err)
			}
			if ctx.Err() != nil {
				return errStop
			}
			return err
		}
		g.instances = append(g.instances, in)
	}
	rb, _ := r.coord.(Rebalancer)
	interval := r.cfg.Interval
	next := a.tickAfter(time.Now(), interval)
	lastCollect := time.Now()
	for {
		if ctx.Err() != nil {
			return r.stop(ctx, g)
		}
		if rb != nil {
			c, err := rb.Rebalance(ctx)
			switch {
			case err != nil && ctx.Err() != nil:
				continue // stopped: the last checkpoint
			case err != nil:
				return err
			case c != nil:
				if err := r.rebalance(ctx, g, c); err != nil {
					return err
				}
				continue
			}
		}
		now := time.Now()
		if len(g.queued) > 0 && !now.Before(g.queued[0].at) {
			t := g.queued[0]
			g.queued = g.queued[1:]
			if err := r.commit(ctx, g, t); err != nil {
				return err
			}
			continue
		}
		if !now.Before(next) {
			// The number of the tick, not of the moment the loop sees it:
			// the processes of a job number it alike.
			if n := g.number(a.tickAt(now, interval), interval); n > g.last {
				if err := r.take(ctx, g, n, now); err != nil {
					return err
				}
			}
			next = a.tickAfter(now, interval)
			continue
		}
		nextCollect := lastCollect.Add(r.cfg.CollectInterval)
		if r.cfg.CollectInterval > 0 && !now.Before(nextCollect) {
			lastCollect = now
			if err := r.coord.Collect(ctx); err != nil {
				if errors.Is(err, ErrFenced) {
					return err
				}
				if ctx.Err() == nil {
					r.cfg.Logger.Warn("job: deletion rule", "err", err)
				}
			} else {
				r.event(Event{Kind: EventCollected, Generation: a.Generation, Instance: -1})
			}
			continue
		}
		deadline := next
		if len(g.queued) > 0 && g.queued[0].at.Before(deadline) {
			deadline = g.queued[0].at
		}
		if r.cfg.CollectInterval > 0 && nextCollect.Before(deadline) {
			deadline = nextCollect
		}
		busy, err := r.process(ctx, g, deadline)
		if err != nil {
			return err
		}
		if !busy {
			wait := min(r.cfg.IdleWait, time.Until(deadline))
			if wait > 0 {
				timer := time.NewTimer(wait)
				select {
				case <-ctx.Done():
				case <-timer.C:
				}
				timer.Stop()
			}
		}
	}
}

// process calls every task's Process once, with a context that ends at
// deadline, and reports whether one had input.
func (r *runner) process(ctx context.Context, g *generation, deadline time.Time) (bool, error) {
	pctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	busy := false
	for _, in := range g.instances {
		k, err := in.task.Process(pctx)
		if err != nil {
			if ctx.Err() != nil || pctx.Err() != nil && errors.Is(err, pctx.Err()) {
				return busy, nil
			}
			return busy, fmt.Errorf("job: instance %d: process: %w", in.in.Index, err)
		}
		busy = busy || k > 0
	}
	return busy, nil
}

// take takes checkpoint n of every instance and queues its commit. Every
// task's metadata is read first, then the instances' snapshots are taken
// at once, so that the storage uploads their logs together (one object
// for all of them, rather than one each).
func (r *runner) take(ctx context.Context, g *generation, n int64, now time.Time) error {
	metas := make([]map[string]string, len(g.instances))
	for i, in := range g.instances {
		metas[i] = in.task.Metadata(n)
	}
	states := make([]catalog.InstanceState, len(g.instances))
	errs := make([]error, len(g.instances))
	var wg sync.WaitGroup
	for i, in := range g.instances {
		wg.Go(func() { states[i], errs[i] = in.snapshot(ctx, n, metas[i]) })
	}
	wg.Wait()
	if k := slices.IndexFunc(errs, func(err error) bool { return err != nil }); k >= 0 {
		// The checkpoint fails: what the others took is aborted, and the
		// next one uploads again what did not go up.
		for i, done := range g.instances {
			if errs[i] != nil {
				continue
			}
			if aerr := done.cp.NotifyCheckpointAborted(ctx, n); aerr != nil && ctx.Err() == nil {
				r.cfg.Logger.Warn("job: abort a failed checkpoint", "instance", done.in.Index, "checkpoint", n, "err", aerr)
			}
		}
		// Its number is used up, also when the stop cut the take short:
		// the tasks gave their metadata for n, so the last checkpoint is
		// numbered above it.
		g.last = n
		if ctx.Err() == nil {
			r.cfg.Logger.Warn("job: checkpoint failed; the next one takes its changes", "instance", g.instances[k].in.Index, "checkpoint", n, "err", errs[k])
		}
		r.event(Event{Kind: EventTakeFailed, Generation: g.a.Generation, Instance: g.instances[k].in.Index, Checkpoint: n, Err: errs[k]})
		return nil
	}
	g.last = n
	at := now
	if g.a.CommitDelay > 0 {
		at = now.Add(g.a.CommitDelay)
	}
	g.queued = append(g.queued, taken{n: n, at: at, states: states})
	return nil
}

// commit commits a taken checkpoint and confirms what completed.
func (r *runner) commit(ctx context.Context, g *generation, t taken) error {
	complete, err := r.coord.Commit(ctx, t.n, t.states)
	switch {
	case errors.Is(err, ErrFenced):
		return err
	case err != nil:
		// The outcome is unknown (the commit may be in the catalog):
		// the checkpoint stays pending, neither confirmed nor aborted,
		// until a later commit says what completed.
		g.pending = append(g.pending, t.n)
		if ctx.Err() == nil {
			r.cfg.Logger.Warn("job: commit failed; the checkpoint stays pending", "checkpoint", t.n, "err", err)
		}
		r.event(Event{Kind: EventCommitFailed, Generation: g.a.Generation, Instance: -1, Checkpoint: t.n, Err: err})
		return nil
	}
	g.pending = append(g.pending, t.n)
	r.event(Event{Kind: EventCommitted, Generation: g.a.Generation, Instance: -1, Checkpoint: t.n})
	return r.confirm(ctx, g, complete)
}

// confirm confirms, in order, every pending checkpoint up to complete:
// the instances' state stores, then their tasks.
func (r *runner) confirm(ctx context.Context, g *generation, complete int64) error {
	k := 0
	for k < len(g.pending) && g.pending[k] <= complete {
		k++
	}
	for _, n := range g.pending[:k] {
		for _, in := range g.instances {
			if n < in.first {
				continue // taken before the instance was added
			}
			if err := in.cp.NotifyCheckpointComplete(ctx, n); err != nil {
				return fmt.Errorf("job: instance %d: checkpoint %d complete: %w", in.in.Index, n, err)
			}
			if err := in.task.Complete(ctx, n); err != nil {
				return fmt.Errorf("job: instance %d: checkpoint %d complete: %w", in.in.Index, n, err)
			}
			r.event(Event{Kind: EventCompleted, Generation: g.a.Generation, Instance: in.in.Index, Checkpoint: n})
		}
	}
	g.pending = slices.Delete(g.pending, 0, k)
	return nil
}

// flush commits every checkpoint queued, in order, now.
func (r *runner) flush(ctx context.Context, g *generation) error {
	for len(g.queued) > 0 {
		t := g.queued[0]
		g.queued = g.queued[1:]
		if err := r.commit(ctx, g, t); err != nil {
			return err
		}
	}
	return nil
}

// rebalance applies a Rebalancer's change (see there).
func (r *runner) rebalance(ctx context.Context, g *generation, c *Change) error {
	if c.Done != nil {
		defer c.Done()
	}
	gen := g.a.Generation
	for _, i := range c.Lost {
		if in := g.remove(i); in != nil {
			r.closeInstance(in)
			r.event(Event{Kind: EventLost, Generation: gen, Instance: i})
		}
	}
	var revoked []int
	for _, i := range c.Revoked {
		if slices.ContainsFunc(g.instances, func(in *instance) bool { return in.in.Index == i }) {
			revoked = append(revoked, i)
		}
	}
	if len(revoked) > 0 {
		// What the revoked instances did is committed before they go:
		// what is queued, then one more checkpoint of every instance.
		if err := r.flush(ctx, g); err != nil {
			return err
		}
		now := time.Now()
		if err := r.take(ctx, g, max(g.number(now, r.cfg.Interval), g.last+1), now); err != nil {
			return err
		}
		if err := r.flush(ctx, g); err != nil {
			return err
		}
		for _, i := range revoked {
			r.closeInstance(g.remove(i))
			r.event(Event{Kind: EventRevoked, Generation: gen, Instance: i})
		}
	}
	for _, as := range c.Added {
		if old := g.remove(as.Index); old != nil {
			r.closeInstance(old)
			r.event(Event{Kind: EventLost, Generation: gen, Instance: as.Index})
		}
		in, err := r.openInstance(ctx, g, as)
		if err != nil {
			if ctx.Err() != nil {
				return errStop
			}
			return err
		}
		g.insert(in)
	}
	return nil
}

// closeInstance closes an instance that leaves the process, logging what
// fails.
func (r *runner) closeInstance(in *instance) {
	if err := in.close(); err != nil && !errors.Is(err, statestore.ErrClosed) {
		r.cfg.Logger.Warn("job: close an instance", "instance", in.in.Index, "err", err)
	}
}

// stop takes a last checkpoint, commits it with what is queued, learns
// once more what completed, and confirms it, within StopTimeout.
func (r *runner) stop(ctx context.Context, g *generation) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.StopTimeout)
	defer cancel()
	if n := max(g.number(time.Now(), r.cfg.Interval), g.last+1); len(g.instances) > 0 {
		if err := r.take(sctx, g, n, time.Now()); err != nil {
			return err
		}
	}
	for _, t := range g.queued {
		if err := r.commit(sctx, g, t); err != nil {
			if errors.Is(err, ErrFenced) {
				return errStop
			}
			return err
		}
	}
	g.queued = nil
	if len(g.pending) > 0 {
		complete, err := r.coord.Refresh(sctx)
		if err == nil {
			if err := r.confirm(sctx, g, complete); err != nil {
				return err
			}
		} else if !errors.Is(err, ErrFenced) {
			r.cfg.Logger.Warn("job: last refresh", "err", err)
		}
	}
	return errStop
}

// openInstance opens an assigned instance: its checkpointer, the user's
// task, and the restore of its state. The checkpoints taken from then on
// are numbered above the one it restores.
func (r *runner) openInstance(ctx context.Context, g *generation, as Assigned) (*instance, error) {
	a := g.a
	sc := r.cfg.State
	sc.Operator = fmt.Sprintf("%s-%d", r.cfg.Operator, as.Index)
	sc.KeyGroups, sc.MaxParallelism, sc.KeepSnapshots, sc.SharedStorage = as.KeyGroups, as.MaxParallelism, true, true
	if sc.Logger == nil {
		sc.Logger = r.cfg.Logger
	}
	cp, err := statestore.NewCheckpointer(r.storage, sc)
	if err != nil {
		return nil, fmt.Errorf("job: instance %d: %w", as.Index, err)
	}
	in := &Instance{Index: as.Index, KeyGroups: as.KeyGroups, MaxParallelism: as.MaxParallelism, Generation: a.Generation, Checkpointer: cp}
	handles, err := restoreHandles(as)
	if err != nil {
		cp.Close()
		return nil, err
	}
	restored := as.Restored
	for i, p := range as.Restore {
		in.Restored = append(in.Restored, p.Metadata)
		in.RestoredKeyGroups = append(in.RestoredKeyGroups, handles[i].KeyGroups)
		restored = max(restored, handles[i].CheckpointID)
	}
	task, err := r.open(ctx, in)
	if err != nil {
		cp.Close()
		return nil, fmt.Errorf("job: instance %d: open: %w", as.Index, err)
	}
	inst := &instance{in: in, cp: cp, task: task, operator: sc.Operator}
	// What the log uploads from now on is for the next checkpoint this
	// process takes (or a later one), above the restored one.
	now := time.Now()
	g.above(restored, now, r.cfg.Interval)
	inst.first = g.last + 1
	cp.Log().SetNextCheckpoint(max(a.FirstCheckpoint, inst.first, g.number(now, r.cfg.Interval)))
	info := statestore.CheckpointInfo{OperatorID: sc.Operator, TaskID: as.Index, CheckpointID: as.Restored}
	if err := cp.InitializeState(ctx, info, handles...); err != nil {
		inst.close()
		return nil, fmt.Errorf("job: instance %d: restore: %w", as.Index, err)
	}
	r.event(Event{Kind: EventRestored, Generation: a.Generation, Instance: as.Index, Checkpoint: as.Restored})
	return inst, nil
}

// fencedRestore returns the error of a restore that found an object gone,
// joined with ErrFenced when the coordinator says that a newer generation
// started: its deletion rule may delete what only this generation
// restores, and the runner joins again. Otherwise, or when the
// coordinator cannot tell, the object is missing: the error says so.
func (r *runner) fencedRestore(ctx context.Context, err error) error {
	if !errors.Is(err, backends.ErrNotFound) {
		return err
	}
	_, ferr := r.coord.Refresh(ctx)
	switch {
	case errors.Is(ferr, ErrFenced):
		return fmt.Errorf("%w, and the restore found an object gone: %w", ferr, err)
	case ferr != nil:
		return errors.Join(err, fmt.Errorf("job: learning whether a newer generation started: %w", ferr))
	}
	return err
}

// restoreHandles decodes the state handles an assigned instance restores,
// one per part of as.Restore, each narrowed to its part's key groups
// where they are fewer than the handle holds (the catalog's independent
// mode restores a part for some of its key groups).
func restoreHandles(as Assigned) ([]*statestore.CheckpointHandle, error) {
	handles := make([]*statestore.CheckpointHandle, 0, len(as.Restore))
	for _, p := range as.Restore {
		h := new(statestore.CheckpointHandle)
		if err := h.UnmarshalBinary(p.State); err != nil {
			return nil, fmt.Errorf("job: instance %d: the state of %s: %w", as.Index, p.Name, err)
		}
		if kg := p.KeyGroups; kg != h.KeyGroups && h.KeyGroups.Start <= kg.Start && kg.End <= h.KeyGroups.End {
			h.KeyGroups = kg
		}
		handles = append(handles, h)
	}
	return handles, nil
}

// snapshot takes checkpoint n of the instance's state, whose task gave
// meta at the same point of its input.
func (in *instance) snapshot(ctx context.Context, n int64, meta map[string]string) (catalog.InstanceState, error) {
	h, err := in.cp.SnapshotState(ctx, statestore.CheckpointInfo{OperatorID: in.operator, TaskID: in.in.Index, CheckpointID: n})
	if err != nil {
		return catalog.InstanceState{}, err
	}
	state, err := h.MarshalBinary()
	if err != nil {
		return catalog.InstanceState{}, err
	}
	return catalog.InstanceState{Instance: in.in.Index, State: state, Objects: h.Objects(), Metadata: meta, HoldFrom: in.cp.HoldFrom()}, nil
}

// close closes the task (if it is an io.Closer) and the checkpointer,
// which closes the stores.
func (in *instance) close() error {
	var errs []error
	if c, ok := in.task.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	errs = append(errs, in.cp.Close())
	return errors.Join(errs...)
}
