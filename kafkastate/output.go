package kafkastate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/dstlgo/dstl/statestore"
)

// outputStore is the name of the store of a partition's pending output in
// the transactional mode.
const outputStore = "_kafkastate_output"

// outRecord is a record of pending output, as the output store keeps it.
type outRecord struct {
	// Input is the offset of the input record whose processing produced
	// it: a committed transaction of offset c holds the output of every
	// input record below c.
	Input     int64             `json:"input"`
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition,omitempty"`
	Key       []byte            `json:"key,omitempty"`
	Value     []byte            `json:"value,omitempty"`
	Headers   map[string][]byte `json:"headers,omitempty"`
}

func (o outRecord) record() *kgo.Record {
	r := &kgo.Record{Topic: o.Topic, Partition: o.Partition, Key: o.Key, Value: o.Value}
	for k, v := range o.Headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: v})
	}
	return r
}

// unsettled is a transaction whose outcome is unknown: it held the
// output pending then and the offset.
type unsettled struct {
	offset int64
}

// outputs is the pending output of a partition in the transactional mode.
type outputs = *statestore.KeyValueStore[uint64, outRecord]

// Produce produces r (its Topic set; Partition as the producer's
// partitioner decides) as output of the record being processed. In the
// transactional mode (Config.TransactionalID) it is kept in the
// partition's state and produced in the Kafka transaction that follows the
// checkpoint holding it: exactly once, as read with isolation
// read_committed. Otherwise it is produced now and flushed before the
// next checkpoint commits: at least once. Process must be deterministic
// for the transactional mode's guarantee: output of records read again
// after a restore is dropped when a transaction already committed it.
// Produce may only be called from the ProcessFunc.
func (p *Partition[S]) Produce(r *kgo.Record) {
	ps := p.ps
	if ps == nil {
		return
	}
	ps.produce(r)
}

func (ps *partState[S]) produce(r *kgo.Record) {
	s := ps.s
	if s.cfg.TransactionalID == "" {
		if s.out == nil {
			s.outErr = errors.New("kafkastate: no output client")
			return
		}
		s.out.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			if err != nil {
				s.outMu.Lock()
				if s.outErr == nil {
					s.outErr = fmt.Errorf("kafkastate: producing output to %s: %w", r.Topic, err)
				}
				s.outMu.Unlock()
			}
		})
		return
	}
	if ps.current < ps.suppressBelow {
		return // a committed transaction holds it already
	}
	o := outRecord{Input: ps.current, Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value}
	if len(r.Headers) > 0 {
		o.Headers = map[string][]byte{}
		for _, h := range r.Headers {
			o.Headers[h.Key] = h.Value
		}
	}
	if err := ps.out.Put(ps.outSeq, o); err != nil && ps.outErr == nil {
		ps.outErr = fmt.Errorf("kafkastate: partition %s: keeping output: %w", ps.part.PartitionInfo, err)
	}
	ps.outSeq++
}

// newOutputStore makes the store of a partition's pending output.
func newOutputStore(cp *statestore.Checkpointer) (outputs, error) {
	return statestore.NewKeyValueStore(outputStore, cp.Log(), statestore.Uint64Codec{}, statestore.JSONCodec[outRecord]{}, StoreOptions()...)
}

// transactionalID is partition p's transactional id: one producer per
// input partition, so that its next owner fences its last one.
func (s *Service[S]) transactionalID(p int32) string {
	return fmt.Sprintf("%s-%s-%d", s.cfg.TransactionalID, s.cfg.Topic, p)
}

// startOutput, in the transactional mode, makes the partition's
// transactional producer (which fences and aborts the previous owner's),
// then settles the restored pending output: the output of the input records
// below the group's committed offset is in Kafka and is dropped, the rest
// is produced now. Output of the records before the committed offset is
// dropped too as they are read again.
func (s *Service[S]) startOutput(ctx context.Context, ps *partState[S]) error {
	if err := s.startOutputClient(ctx, ps); err != nil {
		return err
	}
	return s.settleOutput(ctx, ps, ps.next)
}

// settleOutput learns the group's stable committed offset c of the
// partition: the pending output of input records below c is in a committed
// transaction (each transaction carries the output of every input record
// below its offset) and is dropped; the rest is produced now in a
// transaction with offset.
func (s *Service[S]) settleOutput(ctx context.Context, ps *partState[S], offset int64) error {
	c, err := s.committedOffset(ctx, ps)
	if err != nil {
		return err
	}
	ps.suppressBelow = c
	if offset < 0 {
		return nil
	}
	if err := ps.dropOutputBelow(c); err != nil {
		return err
	}
	return s.transact(ctx, ps, offset)
}

// stableWait bounds how long committedOffset waits for the group's
// offsets to be stable (no transaction holding them pending).
const stableWait = 30 * time.Second

// committedOffset returns the group's committed offset of the partition,
// once no transaction holds it pending (UNSTABLE_OFFSET_COMMIT is waited
// out, up to stableWait: a pending transaction ends by its commit, its
// abort, or its timeout); -1 for none.
func (s *Service[S]) committedOffset(ctx context.Context, ps *partState[S]) (int64, error) {
	deadline := time.Now().Add(stableWait)
	wait := 20 * time.Millisecond
	for {
		at, err := s.fetchCommitted(ctx, ps)
		if !errors.Is(err, kerr.UnstableOffsetCommit) || time.Now().After(deadline) {
			return at, err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

func (s *Service[S]) fetchCommitted(ctx context.Context, ps *partState[S]) (int64, error) {
	offs, err := kadm.NewClient(ps.txcl).FetchOffsets(kadm.RequireStable(ctx), s.cfg.Group)
	if err != nil {
		return 0, fmt.Errorf("kafkastate: partition %s: committed offset of group %s: %w", ps.part.PartitionInfo, s.cfg.Group, err)
	}
	o, ok := offs.Lookup(s.cfg.Topic, ps.part.Partition)
	if !ok {
		return -1, nil
	}
	if o.Err != nil {
		return 0, fmt.Errorf("kafkastate: partition %s: committed offset of group %s: %w", ps.part.PartitionInfo, s.cfg.Group, o.Err)
	}
	return o.At, nil
}

// dropOutput deletes the pending output up to key upTo.
func (ps *partState[S]) dropOutput(upTo uint64) error {
	return ps.dropOutputIf(func(k uint64, _ outRecord) bool { return k <= upTo })
}

// dropOutputBelow deletes the pending output of the input records below
// offset c, which a committed transaction holds.
func (ps *partState[S]) dropOutputBelow(c int64) error {
	return ps.dropOutputIf(func(_ uint64, o outRecord) bool { return o.Input < c })
}

func (ps *partState[S]) dropOutputIf(drop func(uint64, outRecord) bool) error {
	var keys []uint64
	for k, o := range ps.out.All() {
		if drop(k, o) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if err := ps.out.Delete(k); err != nil {
			return fmt.Errorf("kafkastate: partition %s: dropping output %d: %w", ps.part.PartitionInfo, k, err)
		}
	}
	return nil
}

// transact produces the pending output and commits the group's offset of
// the partition in one transaction; the output is dropped once it
// committed. When the outcome is unknown, the producer is made again
// (which aborts a transaction still open) and the committed offset says.
func (s *Service[S]) transact(ctx context.Context, ps *partState[S], offset int64) error {
	if ps.txcl == nil || ps.unsettled != nil {
		// An earlier transaction's outcome is unknown: settle it first.
		if err := s.startOutputClient(ctx, ps); err != nil {
			return err
		}
		if ps.unsettled != nil {
			c, err := s.committedOffset(ctx, ps)
			if err != nil {
				return err
			}
			// The output of the input below c is in Kafka, whichever
			// transaction committed it.
			if err := ps.dropOutputBelow(c); err != nil {
				return err
			}
			ps.unsettled = nil
		}
	}
	var rs []*kgo.Record
	upTo := uint64(0)
	for k, o := range ps.out.All() {
		rs = append(rs, o.record())
		upTo = k
	}
	if len(rs) == 0 {
		return nil // no output: nothing to commit (the committed offset only marks output)
	}
	err := s.transactOnce(ctx, ps, rs, offset)
	if err == nil {
		return ps.dropOutput(upTo)
	}
	if producerFenced(err) {
		// Another process made the partition's producer: it owns the
		// partition and settles the pending output from the catalog. A
		// new producer here would fence it in turn.
		return fmt.Errorf("%w: partition %s: transaction of the output up to offset %d: %w", errProducerFenced, ps.part.PartitionInfo, offset, err)
	}
	// Settle: a new producer of the same id fences the old and aborts
	// its open transaction; the committed offset tells whether it
	// committed. Unless Kafka answers, the next checkpoint settles it.
	ps.unsettled = &unsettled{offset: offset}
	if serr := s.startOutputClient(ctx, ps); serr != nil {
		return errors.Join(err, serr)
	}
	c, cerr := s.committedOffset(ctx, ps)
	if cerr != nil {
		return errors.Join(err, cerr)
	}
	ps.unsettled = nil
	if c >= offset {
		return ps.dropOutputBelow(c)
	}
	return fmt.Errorf("kafkastate: partition %s: transaction of the output up to offset %d: %w", ps.part.PartitionInfo, offset, err)
}

// errProducerFenced is the error of a transaction whose producer another
// process fenced: the partition is released, its producer not made again.
var errProducerFenced = errors.New("kafkastate: output producer fenced")

// producerFenced reports whether err says that a newer producer of the
// transactional id exists.
func producerFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// startOutputClient makes the partition's transactional producer, which
// fences the previous one of its id (aborting its open transaction).
func (s *Service[S]) startOutputClient(ctx context.Context, ps *partState[S]) error {
	if ps.txcl != nil {
		ps.txcl.Close()
		ps.txcl = nil
	}
	txcl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.TransactionalID(s.transactionalID(ps.part.Partition))}, s.cfg.ClientOptions...)...)
	if err != nil {
		return fmt.Errorf("kafkastate: partition %s: transactional producer %s: %w", ps.part.PartitionInfo, s.transactionalID(ps.part.Partition), err)
	}
	if _, _, err = txcl.ProducerID(ctx); err != nil {
		txcl.Close()
		return fmt.Errorf("kafkastate: partition %s: transactional producer %s: %w", ps.part.PartitionInfo, s.transactionalID(ps.part.Partition), err)
	}
	ps.txcl = txcl
	return nil
}

func (s *Service[S]) transactOnce(ctx context.Context, ps *partState[S], rs []*kgo.Record, offset int64) error {
	cl := ps.txcl
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	abort := func(err error) error {
		return errors.Join(err, cl.EndTransaction(ctx, kgo.TryAbort))
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return abort(fmt.Errorf("produce: %w", err))
	}
	if err := s.addOffsets(ctx, ps, offset); err != nil {
		return abort(err)
	}
	return cl.EndTransaction(ctx, kgo.TryCommit)
}

// addOffsets adds the group's offset of the partition to the open
// transaction (AddOffsetsToTxn, TxnOffsetCommit).
func (s *Service[S]) addOffsets(ctx context.Context, ps *partState[S], offset int64) error {
	cl := ps.txcl
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	tid := s.transactionalID(ps.part.Partition)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = tid, id, epoch, s.cfg.Group
	aresp, err := add.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(aresp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("add offsets to the transaction: %w", err)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = tid, s.cfg.Group, id, epoch
	commit.Generation, commit.MemberID = -1, ""
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic, t.TopicID = s.cfg.Topic, s.topicID
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = ps.part.Partition, offset, -1
	t.Partitions = append(t.Partitions, p)
	commit.Topics = append(commit.Topics, t)
	cresp, err := commit.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("commit offsets in the transaction: %w", err)
	}
	var errs []error
	for _, t := range cresp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("commit offsets in the transaction: %w", err)
	}
	return nil
}
