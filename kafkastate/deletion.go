package kafkastate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl/objname"
)

// Collect starts a run of the deletion rule, in the background, if this
// process holds partition 0 and no run is under way (see collectOnce).
func (c *coordinator[S]) Collect(ctx context.Context) error {
	c.mu.Lock()
	holds := c.owned[0] && !c.closed
	c.mu.Unlock()
	if !holds || !c.collecting.CompareAndSwap(false, true) {
		return nil
	}
	c.collectWG.Add(1)
	go func() {
		defer c.collectWG.Done()
		defer c.collecting.Store(false)
		s := c.s
		rep, err := c.collectOnce(ctx)
		s.c.collections.Add(1)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("kafkastate: deletion rule", "err", err)
		}
		if rep != nil {
			s.log.Debug("kafkastate: deletion rule", "listed", rep.Listed.Objects, "deleted", rep.Deleted.Objects, "held", rep.Held.Objects, "young", rep.Young.Objects)
		}
		s.event(Event{Kind: EventCollected, PartitionInfo: s.info(-1), Generation: s.generation(), Err: err})
	}()
	return nil
}

// collectOnce applies the deletion rule once, through collect.Run:
//
//  1. it lists the records (PREFIX/_records/), before
//  2. one offset fetch for the group gives the committed records;
//  3. it keeps the committed records, every record younger than the
//     grace (by its name's time or its modification time), and every
//     object they refer to, reading each record once (they are cached by
//     name);
//  4. it holds every object made for a checkpoint at or above the lowest
//     HoldFrom of those records, and at or above the checkpoint of the
//     time one grace before the listing;
//  5. collect.Run deletes the rest of the logs, the partitions' snapshots
//     and the records, once older than the grace by both clocks.
//
// A record it cannot read makes it delete nothing.
func (c *coordinator[S]) collectOnce(ctx context.Context) (*collect.Report, error) {
	s := c.s
	b := s.storage.Backend()
	listedAt := time.Now()
	listed := map[string]bool{}
	var young []string
	err := b.List(ctx, objname.RecordPrefix(s.prefix), func(oi backends.ObjectInfo) error {
		n := objname.Parse(s.prefix, oi.Name)
		if n.Kind != objname.Record {
			return nil
		}
		listed[oi.Name] = true
		if listedAt.Sub(n.Time()) <= s.cfg.Grace || oi.ModTime.IsZero() || listedAt.Sub(oi.ModTime) <= s.cfg.Grace {
			young = append(young, oi.Name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kafkastate: listing the records: %w", err)
	}
	c.recs.forget(listed, listedAt)
	pos, err := fetchPositions(ctx, s.cl, s.cfg.Group, s.cfg.Topic, s.prefix, nil, false)
	if err != nil {
		return nil, err
	}
	keep := new(collect.Keep)
	// The checkpoint of the time one grace before the listing: objects
	// made for it or later are held (see docs/KAFKA.md).
	hold := checkpointOf(listedAt.Add(-s.cfg.Grace))
	add := func(name string) error {
		r, err := c.recs.read(ctx, name)
		if err != nil {
			return err
		}
		keep.AddObject(name)
		keep.AddObject(r.objects()...)
		hold = min(hold, r.HoldFrom)
		return nil
	}
	for _, at := range pos {
		if at.record == "" {
			continue
		}
		if err := add(at.record); err != nil {
			return nil, fmt.Errorf("kafkastate: a committed record: %w", err)
		}
	}
	for _, name := range young {
		if err := add(name); err != nil && !errors.Is(err, backends.ErrNotFound) {
			return nil, fmt.Errorf("kafkastate: a young record: %w", err)
		}
	}
	for p := range s.partitions {
		keep.AddOperator(fmt.Sprintf("%s-%d", s.operator(), p))
	}
	return collect.Run(ctx, b, collect.Options{JobID: s.jobID, Grace: s.cfg.Grace, Keep: keep,
		Kinds: collect.Logs | collect.Snapshots | collect.Records, HoldFrom: max(hold, 1), Timeout: s.cfg.CommitTimeout})
}
