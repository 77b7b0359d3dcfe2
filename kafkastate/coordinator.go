package kafkastate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/job"
)

// coordinator is the runner's job.Coordinator and job.Rebalancer over the
// consumer group: the group assigns the partitions (its rebalances are the
// runner's changes), and a checkpoint is committed by one record put and
// one offset commit (or transaction) naming it.
//
// The rebalance callbacks run on the client's goroutines: each queues its
// change and waits until the runner applied it (a revoked partition's
// last checkpoint is committed before the callback returns, and an added
// partition is restored before the client fetches it). The other methods
// run on the runner's goroutine.
type coordinator[S any] struct {
	s          *Service[S]
	recs       *records
	col        *collector    // the deletion rule, sharing recs
	txnID      string        // the transactional producer's id, one per start
	txcl       *kgo.Client   // the transactional producer, made at the first transaction
	txnTimeout time.Duration // its transaction timeout
	joined     bool
	// v1 is what the job's first-layout catalog restores, read (and
	// fenced) at the first restore of a partition with no record.
	v1 *firstLayout

	mu       sync.Mutex // guards what follows, shared with the callbacks
	owned    map[int32]bool
	queue    []*rebalance
	closed   bool
	closedCh chan struct{}
	start    map[int32]*start // what each running partition started from

	// anchors holds, for each running partition, the record committed
	// for it (by this process, or the one it restored): see stale.
	anchors  map[int32]string
	complete int64 // the latest checkpoint committed

	collecting atomic.Bool
	collectWG  sync.WaitGroup
}

// rebalance is a change the client's callbacks report.
type rebalance struct {
	kind  string // "added", "revoked" or "lost"
	parts []int32
	done  chan struct{}
}

func newCoordinator[S any](s *Service[S]) *coordinator[S] {
	c := &coordinator[S]{s: s, recs: newRecords(s.storage.Backend(), s.prefix, s.cfg.Topic),
		owned: map[int32]bool{}, closedCh: make(chan struct{}), start: map[int32]*start{}, anchors: map[int32]string{}}
	if s.cfg.TransactionalID != "" {
		c.txnID = s.newTransactionalID()
	}
	return c
}

// queueChange queues a change of the callbacks and waits until the runner
// applied it, or the service stops.
func (c *coordinator[S]) queueChange(kind string, m map[string][]int32, apply func()) {
	parts := slices.Clone(m[c.s.cfg.Topic])
	if len(parts) == 0 {
		return
	}
	slices.Sort(parts)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	apply()
	r := &rebalance{kind: kind, parts: parts, done: make(chan struct{})}
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	select {
	case <-r.done:
	case <-c.closedCh:
	}
}

func (c *coordinator[S]) onAssigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.queueChange("added", m, func() {
		for _, p := range m[c.s.cfg.Topic] {
			c.owned[p] = true
		}
	})
}

func (c *coordinator[S]) onRevoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	// The partitions stay owned until their last checkpoint is committed.
	c.queueChange("revoked", m, func() {})
	c.mu.Lock()
	for _, p := range m[c.s.cfg.Topic] {
		delete(c.owned, p)
	}
	c.mu.Unlock()
}

func (c *coordinator[S]) onLost(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	// No commit of a lost partition: Kafka would refuse it anyway.
	c.queueChange("lost", m, func() {
		for _, p := range m[c.s.cfg.Topic] {
			delete(c.owned, p)
		}
	})
}

// close ends the waits of the callbacks: the runner applies no more
// changes.
func (c *coordinator[S]) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.closedCh)
	}
	c.resetProducer()
}

// wait waits for a deletion rule's run.
func (c *coordinator[S]) wait() { c.collectWG.Wait() }

// startOf returns what running partition p started from.
func (c *coordinator[S]) startOf(p int32) *start {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.start[p]; st != nil {
		return st
	}
	return &start{offset: -1}
}

// restore reads what the partitions start from, trying RestoreAttempts
// times but for a damaged or missing record, and returns their
// assignments.
func (c *coordinator[S]) restore(ctx context.Context, parts []int32) ([]job.Assigned, error) {
	s := c.s
	for _, p := range parts {
		if int(p) >= s.partitions {
			return nil, fmt.Errorf("kafkastate: partition %s assigned: the job has %d partitions (partitions added to the topic are not supported)", s.info(p), s.partitions)
		}
	}
	var sts map[int32]*start
	var err error
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		sts, err = starts(ctx, s.cl, c.recs, s.cfg.Group, s.cfg.Topic, parts, c.firstLayout)
		if err == nil || attempt >= s.cfg.RestoreAttempts || errors.Is(err, ErrDamaged) || ctx.Err() != nil {
			break
		}
		s.log.Warn("kafkastate: reading what partitions restore", "partitions", parts, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait *= 2
	}
	if err != nil {
		return nil, err
	}
	out := make([]job.Assigned, 0, len(parts))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range parts {
		st := sts[p]
		c.start[p] = st
		if st.record != "" {
			c.anchors[p] = st.record
		} else {
			delete(c.anchors, p)
		}
		out = append(out, assigned(p, st))
	}
	return out, nil
}

// firstLayout returns what the job's first-layout catalog restores, read
// once a run: the first read fences the processes of the releases before
// records (see readFirstLayout).
func (c *coordinator[S]) firstLayout(ctx context.Context) (*firstLayout, error) {
	if c.v1 != nil {
		return c.v1, nil
	}
	s := c.s
	fl, err := readFirstLayout(ctx, s.storage.Backend(), s.jobID, s.cfg.Topic, s.partitions, true)
	if err != nil {
		return nil, err
	}
	if len(fl.parts) > 0 {
		s.log.Info("kafkastate: the job's first-layout catalog is fenced; partitions with no record restore from it", "parts", len(fl.parts))
	}
	c.v1 = fl
	return fl, nil
}

// adjustOffsets is the client's AdjustFetchOffsetsFn: a partition that
// restores a part of the first layout resumes at the part's offset, not
// at the group's committed offset (which trailed the parts).
func (c *coordinator[S]) adjustOffsets(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := range offsets[c.s.cfg.Topic] {
		if st := c.start[p]; st != nil && st.part != "" {
			offsets[c.s.cfg.Topic][p] = kgo.NewOffset().At(st.offset)
		}
	}
	return offsets, nil
}

// Join returns the partitions the group assigns the process now, each
// restored from the record its committed offset names. At the start the
// process has none yet: they come as changes (Rebalance). After a fence
// (the runner dropped every partition), the client is moved back to the
// committed offsets.
func (c *coordinator[S]) Join(ctx context.Context) (*job.Assignment, error) {
	s := c.s
	c.mu.Lock()
	queued := c.queue
	c.queue = nil
	for _, r := range queued {
		if r.kind != "added" {
			for _, p := range r.parts {
				delete(c.owned, p)
			}
		}
	}
	parts := slices.Sorted(maps.Keys(c.owned))
	c.start, c.anchors = map[int32]*start{}, map[int32]string{}
	c.mu.Unlock()
	defer func() {
		for _, r := range queued {
			close(r.done)
		}
	}()
	as, err := c.restore(ctx, parts)
	if err != nil {
		return nil, err
	}
	if c.joined && len(parts) > 0 {
		if err := c.seek(ctx, parts); err != nil {
			return nil, err
		}
	}
	c.joined = true
	return &job.Assignment{Generation: s.generation(), Instances: as, Epoch: time.Unix(0, 0), FirstCheckpoint: 1, Unit: time.Millisecond}, nil
}

// seek moves the client's position of the partitions back to where they
// start from: their committed offsets, or the start of a partition with
// none.
func (c *coordinator[S]) seek(ctx context.Context, parts []int32) error {
	s := c.s
	at := map[int32]kgo.EpochOffset{}
	var none []int32
	for _, p := range parts {
		if off := c.startOf(p).offset; off >= 0 {
			at[p] = kgo.EpochOffset{Epoch: -1, Offset: off}
		} else {
			none = append(none, p)
		}
	}
	if len(none) > 0 {
		starts, err := kadm.NewClient(s.cl).ListStartOffsets(ctx, s.cfg.Topic)
		if err == nil {
			err = starts.Error()
		}
		if err != nil {
			return fmt.Errorf("kafkastate: the start offsets of %s: %w", s.cfg.Topic, err)
		}
		for _, p := range none {
			if o, ok := starts.Lookup(s.cfg.Topic, p); ok {
				at[p] = kgo.EpochOffset{Epoch: -1, Offset: o.Offset}
			}
		}
	}
	s.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{s.cfg.Topic: at})
	return nil
}

// Rebalance returns the next change the client's callbacks reported:
// added partitions, restored from the records their committed offsets
// name; revoked ones, which the runner checkpoints and commits before they
// go; lost ones.
func (c *coordinator[S]) Rebalance(ctx context.Context) (*job.Change, error) {
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.mu.Unlock()
		return nil, nil
	}
	r := c.queue[0]
	c.queue = c.queue[1:]
	c.mu.Unlock()
	parts := make([]int, len(r.parts))
	for i, p := range r.parts {
		parts[i] = int(p)
	}
	forget := func() {
		c.mu.Lock()
		for _, p := range r.parts {
			delete(c.anchors, p)
			delete(c.start, p)
		}
		c.mu.Unlock()
	}
	switch r.kind {
	case "lost":
		forget()
		return &job.Change{Lost: parts, Done: func() { close(r.done) }}, nil
	case "revoked":
		return &job.Change{Revoked: parts, Done: func() { forget(); close(r.done) }}, nil
	}
	as, err := c.restore(ctx, r.parts)
	if err != nil {
		close(r.done)
		return nil, err
	}
	return &job.Change{Added: as, Done: func() { close(r.done) }}, nil
}

// restoreAll wraps the error of a commit after which the process drops
// every partition's state and restores it from the group's position: it
// matches job.ErrFenced, for the runner, and err.
type restoreAll struct{ err error }

func (e restoreAll) Error() string {
	return e.err.Error() + " (every partition restores from the group's committed position)"
}

func (e restoreAll) Unwrap() []error { return []error{e.err, job.ErrFenced} }

// errStalled is the error of a checkpoint that would name objects the
// deletion rule may have deleted: the process restores every partition
// from its committed record instead.
var errStalled = errors.New("kafkastate: the checkpoint names objects made for a checkpoint more than half the grace old that no committed record keeps")

// Commit commits the process's checkpoint n: it puts one record of the
// states of its partitions (those the group still assigns it, with a
// known offset), then commits their offsets with metadata naming the
// record, in one OffsetCommit, or, with output to produce in the
// transactional mode, in the transaction that produces it.
func (c *coordinator[S]) Commit(ctx context.Context, n int64, states []catalog.InstanceState) (int64, error) {
	s := c.s
	if s.crash.Load() {
		return 0, errors.New("kafkastate: crashed (a test's)")
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CommitTimeout)
	defer cancel()
	member, gen := s.cl.GroupMetadata()
	rec := &record{Topic: s.cfg.Topic, Group: s.cfg.Group, Checkpoint: n, HoldFrom: math.MaxInt64, Member: member, Generation: gen, Created: time.Now().UTC()}
	c.mu.Lock()
	for _, st := range states {
		p := int32(st.Instance)
		off, ok := offsetOf(st.Metadata)
		if !c.owned[p] || !ok {
			continue // revoked or lost meanwhile; or nothing to commit yet
		}
		rp := recordPartition{Partition: p, Offset: off, State: st.State, Objects: st.Objects}
		if t := s.tasks[p]; t != nil && t.legacy != nil {
			rp.LegacyOutput = true
		}
		rec.Partitions = append(rec.Partitions, rp)
		rec.HoldFrom = min(rec.HoldFrom, max(st.HoldFrom, 1))
	}
	c.mu.Unlock()
	if len(rec.Partitions) == 0 {
		c.complete = n
		return n, nil
	}
	slices.SortFunc(rec.Partitions, func(a, b recordPartition) int { return int(a.Partition - b.Partition) })
	if stale := c.stale(ctx, rec, time.Now()); len(stale) > 0 {
		return 0, restoreAll{fmt.Errorf("%w: checkpoint %d names %q", errStalled, n, stale)}
	}
	if err := s.flushOutput(ctx); err != nil {
		return 0, err
	}
	name, err := objname.NewRecord(s.prefix, n)
	if err != nil {
		return 0, err
	}
	data, err := encodeRecord(rec)
	if err != nil {
		return 0, err
	}
	if err := s.storage.Backend().Put(ctx, name, bytes.NewReader(data), int64(len(data))); err != nil {
		return 0, fmt.Errorf("kafkastate: put record %q: %w", name, err)
	}
	c.recs.add(name, rec)
	offsets := map[int32]int64{}
	var out []*kgo.Record
	for _, rp := range rec.Partitions {
		offsets[rp.Partition] = rp.Offset
		out = append(out, s.pendingOutputOf(rp.Partition, rp.Offset)...)
	}
	meta := metadataOf(name)
	if len(out) > 0 {
		err = c.commitTransaction(ctx, offsets, meta, out)
		if err != nil {
			s.c.transactionFailures.Add(1)
		}
		if errors.Is(err, errUnknownOutcome) {
			// The output may be in Kafka or not: drop the state, and
			// restore it from what the group says.
			return 0, restoreAll{err}
		}
	} else {
		err = c.commitOffsets(ctx, offsets, meta)
	}
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	for p := range offsets {
		c.anchors[p] = name
	}
	anchored := map[string]bool{}
	for _, a := range c.anchors {
		anchored[a] = true
	}
	c.mu.Unlock()
	c.recs.retain(anchored, time.Now().Add(-s.cfg.Grace))
	c.complete = n
	s.c.commits.Add(1)
	for _, rp := range rec.Partitions {
		s.dropOutput(rp.Partition, rp.Offset)
		s.c.checkpoints.Add(1)
		s.event(Event{Kind: EventCheckpoint, PartitionInfo: s.info(rp.Partition), Offset: rp.Offset, Generation: int64(gen), Checkpoint: n})
	}
	return n, nil
}

// stale returns the objects of rec that the deletion rule may have
// deleted, or may delete before rec's commit lands: those that no record
// committed for the process's partitions names, that were made for a
// checkpoint below the lowest HoldFrom of those records, and that were
// made for a checkpoint more than half the grace old (an object whose
// name records no checkpoint: whose name is more than half the grace
// old). See docs/KAFKA.md, "Deletion rule".
func (c *coordinator[S]) stale(ctx context.Context, rec *record, now time.Time) []string {
	s := c.s
	kept := map[string]bool{}
	c.mu.Lock()
	anchors := slices.Collect(maps.Values(c.anchors))
	for p, st := range c.start {
		// A partition restored from the first layout and not committed
		// since: the deletion rule keeps its part's objects.
		if st.part != "" && c.anchors[p] == "" {
			for _, o := range st.state.Objects {
				kept[o] = true
			}
		}
	}
	c.mu.Unlock()
	hold := int64(math.MaxInt64)
	for _, name := range anchors {
		r, err := c.recs.read(ctx, name)
		if err != nil {
			continue // keeps nothing: its objects are judged by their age
		}
		for _, o := range r.objects() {
			kept[o] = true
		}
		hold = min(hold, r.HoldFrom)
	}
	halfGrace := now.Add(-s.cfg.Grace / 2)
	recent := checkpointOf(halfGrace)
	var stale []string
	for _, rp := range rec.Partitions {
		for _, o := range rp.Objects {
			n := objname.Parse(s.prefix, o)
			switch {
			case kept[o], n.Checkpoint >= hold:
			case n.Checkpoint > 0 && n.Checkpoint >= recent:
			case n.Checkpoint == 0 && (n.Time().IsZero() || n.Time().After(halfGrace)):
			default:
				stale = append(stale, o)
			}
		}
	}
	return stale
}

// checkpointOf returns the number of the checkpoint of time t: the
// milliseconds since the Unix epoch, plus one (job.Assignment: Epoch the
// Unix epoch, FirstCheckpoint 1, Unit a millisecond).
func checkpointOf(t time.Time) int64 { return t.UnixMilli() + 1 }

// Refresh returns the latest checkpoint committed: a commit's outcome is
// known when it returns, or settled before the next.
func (c *coordinator[S]) Refresh(context.Context) (int64, error) { return c.complete, nil }
