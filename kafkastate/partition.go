package kafkastate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/statestore"
)

// Metadata keys of a partition's catalog part.
const (
	metaTopic     = "topic"
	metaPartition = "partition"
	metaOffset    = "offset" // the next offset to process
)

// errStalled ends a membership whose next part would name objects that the
// deletion rule may have deleted: the partition joins again, starting a new
// generation.
var errStalled = errors.New("kafkastate: stalled past half the grace")

// partState is an assigned partition: its catalog member, its stores and
// where its input is. It is used under the service's lock.
type partState[S any] struct {
	s          *Service[S]
	part       Partition[S]
	member     *catalog.Member // nil: released (replaced)
	releasedAt time.Time       // when it was released
	cp         *statestore.Checkpointer

	next            int64 // next offset to process; -1: none yet (first start)
	useKafkaOffset  bool  // first start of the job: start at the group's committed offset
	committedOffset int64 // offset of the latest committed checkpoint; -1: none
	kafkaOffset     int64 // offset committed to the group
	nextCP          int64 // number of the next checkpoint
	notified        int64 // latest checkpoint confirmed
	unconfirmed     []int64
	committed       map[string]bool // objects the latest committed (or restored) part names

	// output
	current       int64       // offset of the record being processed; -1 between records
	out           outputs     // pending output (transactional mode)
	outSeq        uint64      // key of the next pending output record
	outErr        error       // a failure to keep output
	suppressBelow int64       // output of records before it is in a committed transaction
	txcl          *kgo.Client // the partition's transactional producer
	unsettled     *unsettled  // a transaction whose outcome is unknown
}

func newPartState[S any](s *Service[S], p int32) *partState[S] {
	ps := &partState[S]{s: s, current: -1, suppressBelow: -1}
	ps.part = Partition[S]{PartitionInfo: PartitionInfo{Topic: s.cfg.Topic, Partition: p}, ps: ps}
	return ps
}

// errOutput wraps a failure of the output's producer, which stops the
// service: records whose output is lost are checkpointed otherwise.
var errOutput = errors.New("kafkastate: output")

func (ps *partState[S]) generation() int64 {
	if ps.member == nil {
		return 0
	}
	return ps.member.Generation().Number
}

// close releases the partition's stores.
func (ps *partState[S]) close() {
	if ps.cp != nil {
		if err := ps.cp.Close(); err != nil {
			ps.s.log.Info("kafkastate: closing a partition's checkpointer", "partition", ps.part.Partition, "err", err)
		}
		ps.cp = nil
	}
	if ps.txcl != nil {
		ps.txcl.Close()
		ps.txcl = nil
	}
	ps.member = nil
}

// catalogConfig is partition p's catalog configuration: instance p of
// the job's partitions, whose key group is p, in the independent mode.
func (s *Service[S]) catalogConfig(p int32) catalog.Config {
	return catalog.Config{
		JobID: s.jobID, Instances: s.partitions, Index: int(p), MaxParallelism: s.partitions,
		Mode: catalog.Independent, Grace: s.cfg.Grace, Owner: s.owner,
	}
}

// operator is the statestore operator of partition p.
func (s *Service[S]) operator(p int32) string {
	return fmt.Sprintf("kafka-%s-%d", s.cfg.Topic, p)
}

// join makes the process partition p's member of the job's catalog, with
// retries, and restores its state.
func (s *Service[S]) join(ctx context.Context, ps *partState[S]) error {
	var err error
	wait := 100 * time.Millisecond
	for range s.cfg.JoinAttempts {
		var m *catalog.Member
		if m, err = catalog.Join(ctx, s.storage.Backend(), s.catalogConfig(ps.part.Partition)); err == nil {
			if err = s.restore(ctx, ps, m); err == nil {
				return nil
			}
		}
		if errors.Is(err, catalog.ErrMismatch) || ctx.Err() != nil {
			break
		}
		s.log.Warn("kafkastate: joining the catalog", "partition", ps.part.Partition, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait *= 2
	}
	return fmt.Errorf("kafkastate: partition %s: join: %w", ps.part.PartitionInfo, err)
}

// rejoin makes a fenced partition a member of the latest generation (or,
// stalled, of a new one) and restores its state again; a partition whose
// slot another process holds is released.
func (s *Service[S]) rejoin(ctx context.Context, ps *partState[S], stalled bool) error {
	s.c.fenced.Add(1)
	old := ps.member
	s.event(Event{Kind: EventFenced, PartitionInfo: ps.part.PartitionInfo, Offset: ps.next, Generation: old.Generation().Number})
	ps.close()
	if stalled {
		return s.join(ctx, ps)
	}
	m, err := old.Rejoin(ctx)
	switch {
	case errors.Is(err, catalog.ErrReplaced):
		s.release(ps, err)
		return nil // released until Kafka assigns it again
	case err != nil:
		// Starting over as a new member restores all the same.
		return s.join(ctx, ps)
	}
	if err := s.restore(ctx, ps, m); err != nil {
		return s.join(ctx, ps)
	}
	return nil
}

// release releases a partition that another process holds (its slot in
// the catalog, or its output's producer): its stores are closed and it
// processes nothing until Kafka assigns it again, or until the group
// shows it still assigned here (see checkpointAll).
func (s *Service[S]) release(ps *partState[S], why error) {
	s.event(Event{Kind: EventReplaced, PartitionInfo: ps.part.PartitionInfo, Offset: ps.next, Generation: ps.generation(), Err: why})
	s.log.Info("kafkastate: partition released: another process holds it", "partition", ps.part.Partition, "err", why)
	ps.close()
	ps.releasedAt = time.Now()
}

// restore makes the partition's stores and restores them from the part
// the member's generation restores, if any.
func (s *Service[S]) restore(ctx context.Context, ps *partState[S], m *catalog.Member) error {
	p := ps.part.Partition
	parts := m.Restore()
	if len(parts) > 1 {
		return fmt.Errorf("kafkastate: partition %s: %d parts to restore from, want at most 1", ps.part.PartitionInfo, len(parts))
	}
	cp, err := statestore.NewCheckpointer(s.storage, statestore.Config{
		Operator: s.operator(p), KeyGroups: partitionKeyGroups, MaxParallelism: 1,
		MaterializeInterval: s.cfg.MaterializeInterval, Logger: s.log, KeepSnapshots: true,
	})
	if err != nil {
		return fmt.Errorf("kafkastate: partition %s: checkpointer: %w", ps.part.PartitionInfo, err)
	}
	st, stores, err := s.cfg.NewState(ps.part.PartitionInfo, cp.Log())
	var out outputs
	if err == nil && s.cfg.TransactionalID != "" {
		if out, err = newOutputStore(cp); err == nil {
			stores = append(stores, out)
		}
	}
	if err == nil {
		err = cp.Register(stores...)
	}
	if err != nil {
		cp.Close()
		return fmt.Errorf("kafkastate: partition %s: state: %w", ps.part.PartitionInfo, err)
	}
	g := m.Generation()
	next, restored := int64(-1), int64(0)
	var handles []*statestore.CheckpointHandle
	committed := map[string]bool{}
	for _, part := range parts {
		h := new(statestore.CheckpointHandle)
		if err := h.UnmarshalBinary(part.State); err != nil {
			cp.Close()
			return fmt.Errorf("kafkastate: part %s: %w", part.Name, err)
		}
		if next, err = partOffset(part, s.cfg.Topic, p); err != nil {
			cp.Close()
			return err
		}
		handles = append(handles, h)
		restored = part.Checkpoint
		for _, o := range part.Objects {
			committed[o] = true
		}
	}
	info := statestore.CheckpointInfo{OperatorID: s.cfg.Topic, TaskID: int(p), CheckpointID: restored, LastCompletedCheckpointID: restored}
	if err := cp.InitializeState(ctx, info, handles...); err != nil {
		cp.Close()
		return fmt.Errorf("kafkastate: partition %s: restore: %w", ps.part.PartitionInfo, err)
	}
	ps.member, ps.cp, ps.part.State, ps.out, ps.outSeq, ps.outErr, ps.unsettled = m, cp, st, out, 0, nil, nil
	if out != nil {
		for k := range out.All() {
			ps.outSeq = k + 1
		}
	}
	ps.next, ps.committedOffset, ps.kafkaOffset = next, next, -1
	ps.nextCP, ps.notified, ps.unconfirmed, ps.committed = g.FirstCheckpoint, restored, nil, committed
	// The group's committed offset is taken only on the job's first
	// start: in generation 1, no process held the partition before, so
	// offsets committed to the group are another consumer's. Later, they
	// may be ahead of the checkpoint restored (a part committed after the
	// listing of the generation's start is not restored).
	ps.useKafkaOffset = len(parts) == 0 && g.Number == 1
	if s.cfg.TransactionalID != "" && !s.loadOnly {
		if err := s.startOutput(ctx, ps); err != nil {
			ps.close()
			return err
		}
	}
	if len(parts) > 0 {
		s.c.restores.Add(1)
		s.event(Event{Kind: EventRestored, PartitionInfo: ps.part.PartitionInfo, Offset: next, Generation: g.Number, Checkpoint: restored})
	} else {
		s.c.firstStarts.Add(1)
		off := int64(0)
		if ps.useKafkaOffset {
			off = -1
		}
		s.event(Event{Kind: EventFirstStart, PartitionInfo: ps.part.PartitionInfo, Offset: off, Generation: g.Number})
	}
	return nil
}

// partOffset returns the input offset a part holds, checking that it is
// the partition's.
func partOffset(part *catalog.Part, topic string, p int32) (int64, error) {
	if t := part.Metadata[metaTopic]; t != topic {
		return 0, fmt.Errorf("kafkastate: part %s: topic %q, want %q", part.Name, t, topic)
	}
	if v := part.Metadata[metaPartition]; v != strconv.Itoa(int(p)) {
		return 0, fmt.Errorf("kafkastate: part %s: partition %q, want %d", part.Name, v, p)
	}
	v := part.Metadata[metaOffset]
	off, err := strconv.ParseInt(v, 10, 64)
	if err != nil || off < 0 {
		return 0, fmt.Errorf("kafkastate: part %s: offset %q", part.Name, v)
	}
	return off, nil
}

// checkpointOne takes and commits a checkpoint of the partition when its
// next offset moved since its last one (records processed, or the group's
// committed offset taken on the job's first start). It returns
// catalog.ErrFenced or errStalled for a member that must join again; other
// errors are counted and reported, and the next interval tries again.
func (s *Service[S]) checkpointOne(ctx context.Context, ps *partState[S]) (err error) {
	if ps.member == nil || ps.next < 0 {
		return nil
	}
	if ps.outErr != nil {
		// The state holds changes of the record whose output was not kept,
		// while the offset is before it: a checkpoint would count it twice.
		return fmt.Errorf("kafkastate: partition %s: not checkpointed after a failure to keep output: %w", ps.part.PartitionInfo, ps.outErr)
	}
	if ps.next == ps.committedOffset && (ps.out == nil || (ps.out.Len() == 0 && ps.unsettled == nil)) {
		// Nothing new since the last checkpoint. (Output that its
		// transaction failed to produce is tried again after a checkpoint
		// of the same offset: its commit shows that no newer generation
		// took the partition, before the producer is made again.)
		return nil
	}
	if s.out != nil {
		// The output of the records checkpointed is in Kafka before the
		// checkpoint commits.
		if err := s.out.Flush(ctx); err != nil {
			return fmt.Errorf("%w: flush: %w", errOutput, err)
		}
		s.outMu.Lock()
		err := s.outErr
		s.outMu.Unlock()
		if err != nil {
			return fmt.Errorf("%w: %w", errOutput, err)
		}
	}
	n, offset := ps.nextCP, ps.next
	ps.nextCP++
	defer func() {
		if err != nil && !errors.Is(err, catalog.ErrFenced) && !errors.Is(err, errStalled) && !errors.Is(err, errProducerFenced) {
			s.c.checkpointFailures.Add(1)
			s.event(Event{Kind: EventCheckpointFailed, PartitionInfo: ps.part.PartitionInfo, Offset: offset,
				Generation: ps.generation(), Checkpoint: n, Err: err})
			s.log.Warn("kafkastate: checkpoint", "partition", ps.part.Partition, "checkpoint", n, "err", err)
		}
	}()
	h, err := ps.cp.SnapshotState(ctx, statestore.CheckpointInfo{OperatorID: s.cfg.Topic, TaskID: int(ps.part.Partition),
		CheckpointID: n, LastCompletedCheckpointID: ps.notified})
	if err != nil {
		return fmt.Errorf("kafkastate: partition %s: snapshot of checkpoint %d: %w", ps.part.PartitionInfo, n, err)
	}
	objects := h.Objects()
	if stale := s.stale(ps, objects, time.Now()); len(stale) > 0 {
		// Not committed, so nothing refers to the checkpoint: aborting it
		// is safe; the state may need objects that are gone, so it is
		// restored again.
		_ = ps.cp.NotifyCheckpointAborted(ctx, n)
		return fmt.Errorf("%w: partition %s: checkpoint %d names %q", errStalled, ps.part.PartitionInfo, n, stale)
	}
	state, err := h.MarshalBinary()
	if err != nil {
		return fmt.Errorf("kafkastate: partition %s: encoding checkpoint %d: %w", ps.part.PartitionInfo, n, err)
	}
	meta := map[string]string{
		metaTopic: s.cfg.Topic, metaPartition: strconv.Itoa(int(ps.part.Partition)),
		metaOffset: strconv.FormatInt(offset, 10),
	}
	st, err := ps.member.Commit(ctx, n, state, objects, meta)
	if errors.Is(err, catalog.ErrFenced) {
		// The part may or may not be restored by the newer generation: it
		// is neither confirmed nor aborted.
		return err
	}
	if err != nil {
		// The part may have been written (a lost answer): it is then
		// restorable, so the checkpoint is not aborted either.
		return fmt.Errorf("kafkastate: partition %s: commit of checkpoint %d: %w", ps.part.PartitionInfo, n, err)
	}
	ps.committedOffset = offset
	ps.committed = map[string]bool{}
	for _, o := range objects {
		ps.committed[o] = true
	}
	ps.unconfirmed = append(ps.unconfirmed, n)
	for len(ps.unconfirmed) > 0 && ps.unconfirmed[0] <= st.Complete {
		if err := ps.cp.NotifyCheckpointComplete(ctx, ps.unconfirmed[0]); err != nil {
			return fmt.Errorf("kafkastate: partition %s: confirming checkpoint %d: %w", ps.part.PartitionInfo, ps.unconfirmed[0], err)
		}
		ps.notified = ps.unconfirmed[0]
		ps.unconfirmed = ps.unconfirmed[1:]
	}
	s.c.checkpoints.Add(1)
	s.event(Event{Kind: EventCheckpoint, PartitionInfo: ps.part.PartitionInfo, Offset: offset, Generation: ps.generation(), Checkpoint: n})
	if s.cfg.TransactionalID != "" {
		// The checkpoint holds the pending output: a transaction produces
		// it now; one that fails is tried again after the next checkpoint
		// (or by the next owner's restore).
		if err := s.transact(ctx, ps, offset); err != nil {
			s.c.transactionFailures.Add(1)
			s.log.Warn("kafkastate: output transaction", "partition", ps.part.Partition, "checkpoint", n, "err", err)
			if errors.Is(err, errProducerFenced) {
				return err
			}
		}
	}
	return nil
}

// stale returns the objects that no committed part named and whose names
// are more than half the grace old: the deletion rule may have deleted
// them, since no part kept them.
func (s *Service[S]) stale(ps *partState[S], objects []string, now time.Time) []string {
	prefix := objname.JobPrefix(s.jobID)
	var stale []string
	for _, obj := range objects {
		if t := objname.Parse(prefix, obj).Time(); !ps.committed[obj] && !t.IsZero() && now.Sub(t) > s.cfg.Grace/2 {
			stale = append(stale, obj)
		}
	}
	return stale
}
