package statestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dstlgo/dstl/collect"
)

// errCollectLater is wrapped by the error of a collection that did not
// begin because what it must keep is not known yet: a checkpoint's
// upload is running, or a restore is. The background collection begins
// once it is known.
var errCollectLater = errors.New("what to keep is not known yet; nothing deleted")

// collecting reports whether the checkpointer deletes the objects its
// checkpoints no longer need (Config.KeepSnapshots unset).
func (c *Checkpointer) collecting() bool { return !c.cfg.KeepSnapshots }

// retainLocked adds the completed checkpoint p to those retained,
// dropping the oldest beyond Config.Retain (beyond one with
// Config.KeepSnapshots, where the job retains checkpoints).
func (c *Checkpointer) retainLocked(p *pendingCheckpoint) {
	n := 1
	if c.collecting() {
		n = c.cfg.Retain
	}
	c.retained = append(c.retained, p)
	if len(c.retained) > n {
		c.retained = append([]*pendingCheckpoint(nil), c.retained[len(c.retained)-n:]...)
	}
}

// kickCollectLocked wakes the background collection if a completed
// checkpoint asked for one.
func (c *Checkpointer) kickCollectLocked() {
	if !c.wantCollect {
		return
	}
	select {
	case c.collectTrigger <- struct{}{}:
	default:
	}
}

// collector runs the collections that completed checkpoints ask for.
func (c *Checkpointer) collector() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.collectTrigger:
		}
		if _, err := c.collect(c.ctx, true); err != nil && c.ctx.Err() == nil && !errors.Is(err, errCollectLater) {
			c.log.Warn("statestore: collection failed; the next one retries", "operator", c.cfg.Operator, "err", err)
		}
	}
}

// Collect applies the deletion rule of package collect now, and returns
// its report: it deletes every log object of the storage's job (none
// with Config.SharedStorage) and every snapshot object of the operator
// (and file of a disk-backed snapshot) that is older than Config.Grace by
// both the storage's clock and the time in its name, that none of the
// last Config.Retain completed checkpoints, no pending checkpoint and not
// the current state refers to, and that was made for a checkpoint no
// later than the latest completed one (nor for the one a running
// materialisation writes for). So a restarted process deletes what a
// crashed one left: the objects of the checkpoints after the one it
// restored, once its own checkpoints pass them, and the rest once older
// than the grace.
//
// After NotifyCheckpointComplete, the checkpointer calls it in the
// background (at most once per Config.CollectInterval); a program may
// call it too, for instance before a planned stop. One collection runs at
// a time. It fails, deleting nothing, with Config.KeepSnapshots set; while
// a checkpoint's upload or a restore runs; before a checkpoint completed
// or was restored; after a failed restore (ErrRestoreFailed); and, without
// Config.SharedStorage, while the storage has other open writers than the
// checkpointer's (their changes are in the same log objects).
func (c *Checkpointer) Collect(ctx context.Context) (*collect.Report, error) {
	return c.collect(ctx, false)
}

// collect is Collect; a background collection runs only if a completed
// checkpoint still asks for one when it begins (nil report and error
// otherwise).
func (c *Checkpointer) collect(ctx context.Context, background bool) (*collect.Report, error) {
	if !c.collecting() {
		return nil, fmt.Errorf("statestore: collect: Config.KeepSnapshots is set: the job deletes the objects")
	}
	c.collectMu.Lock()
	defer c.collectMu.Unlock()
	ctx, stop := c.closing(ctx)
	defer stop()
	opts, err := c.collectOptions(background)
	if err != nil || opts.Kinds == 0 {
		return nil, err
	}
	rep, err := collect.Run(ctx, c.storage.Backend(), opts)
	c.mu.Lock()
	c.stats.Collections++
	if rep != nil {
		c.stats.CollectedObjects += int64(rep.Deleted.Objects)
	}
	if err != nil {
		c.stats.CollectFailures++
	}
	if errors.Is(err, collect.ErrMissing) && rep != nil && len(rep.Missing) > 0 && !keepsAny(c.keepLocked(), rep.Missing) {
		// The missing objects were a pending checkpoint's that a later
		// one subsumed, or an aborted one's, and the log deleted them
		// while the collection ran. Nothing the checkpointer keeps now is
		// missing: the collection deleted nothing, and the next completed
		// checkpoint asks for another.
		c.wantCollect = true
		err = fmt.Errorf("%w: %d objects that the collection kept were dropped meanwhile", errCollectLater, len(rep.Missing))
	}
	// The snapshots that the checkpointer dropped meanwhile, which the
	// collection kept, go now.
	c.collectKeep = nil
	doomed := c.unreferencedLocked()
	c.mu.Unlock()
	if derr := c.deleteSnapshots(context.WithoutCancel(ctx), doomed); derr != nil {
		c.log.Warn("statestore: delete snapshots", "operator", c.cfg.Operator, "err", derr)
	}
	if err != nil {
		return rep, fmt.Errorf("statestore: collect: %w", err)
	}
	return rep, nil
}

// keepLocked returns what the checkpointer keeps now: the objects of the
// retained checkpoints, of the pending ones, of the current state and of
// the logs it restored, and every snapshot of its operator.
func (c *Checkpointer) keepLocked() *collect.Keep {
	keep := new(collect.Keep)
	keep.AddOperator(c.cfg.Operator)
	for _, r := range c.retained {
		keep.AddObject(r.objects...)
	}
	for _, p := range c.pending {
		keep.AddObject(p.objects...)
	}
	for _, s := range c.current {
		keep.AddObject(s.Object)
		keep.AddObject(s.Files...)
	}
	for _, l := range c.restoredLogs {
		keep.AddHandle(l.Remote)
	}
	return keep
}

// collectOptions returns what a collection keeps and holds, taken from
// the checkpointer's state at one moment: the objects of the retained
// checkpoints, of the pending ones and of the current state, and every
// object made for a checkpoint after the latest completed one or for the
// running materialisation's. What a later checkpoint may refer to is
// among them: the change sets it reuses were uploaded for a checkpoint it
// follows, which the latest completed one covers, or for a later one.
//
// With background set, and no completed checkpoint asking for a
// collection, it returns options of no kinds: nothing to do.
func (c *Checkpointer) collectOptions(background bool) (collect.Options, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if background && !c.wantCollect {
		return collect.Options{}, nil
	}
	later := func(format string, args ...any) (collect.Options, error) {
		return collect.Options{}, fmt.Errorf("statestore: collect: %s: %w", fmt.Sprintf(format, args...), errCollectLater)
	}
	switch {
	case c.closed:
		return collect.Options{}, ErrClosed
	case c.restoreErr != nil:
		return collect.Options{}, fmt.Errorf("statestore: collect: %w: %v", ErrRestoreFailed, c.restoreErr)
	case c.restoring:
		return later("a restore is running")
	case len(c.retained) == 0:
		return later("no checkpoint completed or was restored yet")
	}
	for _, r := range c.retained {
		if !r.done {
			return later("completed checkpoint %d's upload is running", r.id)
		}
	}
	for id, p := range c.pending {
		if !p.done {
			return later("checkpoint %d's upload is running", id)
		}
	}
	kinds := collect.Snapshots
	if !c.cfg.SharedStorage {
		if n := c.storage.Writers(); n > 1 {
			return collect.Options{}, fmt.Errorf("statestore: collect: the storage has %d other open writers, whose changes share the log objects: set Config.SharedStorage (snapshots only) or Config.KeepSnapshots (the job deletes); nothing deleted", n-1)
		}
		kinds |= collect.Logs
	}
	keep := c.keepLocked()
	hold := c.retained[len(c.retained)-1].id + 1
	hold = min(hold, c.holdFromLocked())
	c.lastCollect, c.wantCollect = time.Now(), false
	// Until the collection ends, the checkpointer deletes none of what it
	// keeps: the collection would take it for missing (collect.ErrMissing).
	c.collectKeep = keep
	scfg := c.storage.Config()
	return collect.Options{
		JobID:    scfg.JobID,
		Grace:    c.grace,
		Keep:     keep,
		Kinds:    kinds,
		HoldFrom: max(hold, 1),
		OnEvent: func(e collect.Event) {
			if e.Kind == collect.EventProbeLeft {
				c.log.Warn("statestore: collect: the clock probe could not be deleted", "operator", c.cfg.Operator, "probe", e.Name, "err", e.Err)
			}
		},
	}, nil
}

// keepsAny reports whether keep holds one of names.
func keepsAny(keep *collect.Keep, names []string) bool {
	for _, n := range names {
		if keep.Has(n) {
			return true
		}
	}
	return false
}
