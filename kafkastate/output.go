package kafkastate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce produces r (its Topic set; Partition as the producer's
// partitioner decides) as output of the record being processed. In the
// transactional mode (Config.TransactionalID) it is kept until the
// checkpoint that covers the record, and produced in the Kafka
// transaction that commits that checkpoint: exactly once, as read with
// isolation read_committed. Otherwise it is produced now and flushed
// before the next checkpoint commits: at least once. Produce may only be
// called from the ProcessFunc.
func (p *Partition[S]) Produce(r *kgo.Record) {
	t := p.t
	if t == nil {
		return
	}
	s := t.s
	if s.cfg.TransactionalID != "" {
		t.out = append(t.out, pendingOutput{input: t.cur, rec: r})
		return
	}
	s.produceNow(r)
}

// produceNow produces r through the output's producer (without
// transactions); a failure is kept for outputErr.
func (s *Service[S]) produceNow(r *kgo.Record) {
	s.out.Produce(context.Background(), r, func(r *kgo.Record, err error) {
		if err != nil {
			s.outMu.Lock()
			if s.outErr == nil {
				s.outErr = fmt.Errorf("%w: producing to %s: %w", errOutput, r.Topic, err)
			}
			s.outMu.Unlock()
		}
	})
}

// outputErr returns the first failure of the output's producer (without
// transactions).
func (s *Service[S]) outputErr() error {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return s.outErr
}

// flushOutput waits until the output produced so far (without
// transactions) is in Kafka.
func (s *Service[S]) flushOutput(ctx context.Context) error {
	if s.out == nil {
		return nil
	}
	if err := s.out.Flush(ctx); err != nil {
		return fmt.Errorf("%w: flush: %w", errOutput, err)
	}
	return s.outputErr()
}

// pendingOutputOf returns the transactional output of partition p's input
// below offset: what the checkpoint at offset covers.
func (s *Service[S]) pendingOutputOf(p int32, offset int64) []*kgo.Record {
	t := s.tasks[p]
	if t == nil {
		return nil
	}
	var out []*kgo.Record
	for _, o := range t.out {
		if o.input < offset {
			// A new record for each attempt: a produced record keeps
			// the context it was produced with.
			r := o.rec
			out = append(out, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers})
		}
	}
	return out
}

// dropOutput drops partition p's transactional output of the input below
// offset: a committed transaction holds it.
func (s *Service[S]) dropOutput(p int32, offset int64) {
	if t := s.tasks[p]; t != nil {
		t.out = slices.DeleteFunc(t.out, func(o pendingOutput) bool { return o.input < offset })
	}
}

// errNotMember is the error of a commit while the client is no member of
// the group: a commit without a generation would not be fenced.
var errNotMember = errors.New("kafkastate: not a member of the group: no commit without a generation")

// commitOffsets commits the partitions' offsets to the group, each with
// the metadata meta (naming the checkpoint's record), in one OffsetCommit
// that carries the member's generation: Kafka refuses it from a member
// that is no longer in the group.
func (c *coordinator[S]) commitOffsets(ctx context.Context, offsets map[int32]int64, meta string) error {
	s := c.s
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		if req.MemberID == "" || req.Generation < 0 {
			return errNotMember
		}
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				req.Topics[i].Partitions[j].Metadata = &meta
			}
		}
		return nil
	})
	eos := map[int32]kgo.EpochOffset{}
	for p, o := range offsets {
		eos[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var failed error
	s.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{s.cfg.Topic: eos},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				failed = err
				return
			}
			var errs []error
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						errs = append(errs, fmt.Errorf("partition %d: %w", p.Partition, err))
					}
				}
			}
			failed = errors.Join(errs...)
		})
	if failed != nil {
		return fmt.Errorf("kafkastate: offset commit: %w", failed)
	}
	return nil
}

// errUnknownOutcome wraps the error of a transaction whose outcome the
// process could not learn: the process drops its partitions' state and
// restores it from the records the group's offsets name.
var errUnknownOutcome = errors.New("kafkastate: the outcome of the transaction is unknown")

// commitTransaction produces out and commits the partitions' offsets, each
// with the metadata meta, in one transaction of the process's producer.
// The offset commit (TxnOffsetCommit) carries the member's generation, so
// that Kafka refuses it from a member no longer in the group; the
// producer's epoch fences an older transaction of the producer. It
// returns nil once the transaction committed; an error when it did not;
// an error wrapping errUnknownOutcome when the process cannot tell.
func (c *coordinator[S]) commitTransaction(ctx context.Context, offsets map[int32]int64, meta string, out []*kgo.Record) error {
	s := c.s
	txcl, err := c.producer(ctx)
	if err != nil {
		return err
	}
	member, gen := s.cl.GroupMetadata()
	if member == "" || gen < 0 {
		return errNotMember
	}
	if err := txcl.BeginTransaction(); err != nil {
		c.resetProducer()
		return fmt.Errorf("kafkastate: begin a transaction: %w", err)
	}
	abort := func(err error) error {
		if aerr := txcl.EndTransaction(ctx, kgo.TryAbort); aerr != nil {
			// The next producer of the id aborts what is left.
			c.resetProducer()
			err = errors.Join(err, aerr)
		}
		return err
	}
	if err := txcl.ProduceSync(ctx, out...).FirstErr(); err != nil {
		return abort(fmt.Errorf("kafkastate: transaction: produce: %w", err))
	}
	if err := c.addOffsets(ctx, txcl, offsets, meta, member, gen); err != nil {
		return abort(fmt.Errorf("kafkastate: transaction: %w", err))
	}
	err = txcl.EndTransaction(ctx, kgo.TryCommit)
	if err == nil {
		return nil
	}
	// The outcome is unknown: a new producer of the id ends the
	// transaction (InitProducerID completes a commit under way, or aborts
	// what is open), then the group's stable offsets tell. The commit's
	// time may be over: this reads only, within a transaction timeout
	// and a commit timeout.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.txnTimeout+s.cfg.CommitTimeout)
	defer cancel()
	c.txcl = nil
	_, perr := c.producer(sctx)
	txcl.Close() // after the new one's InitProducerID: what it sent is not cut off
	if perr != nil {
		return fmt.Errorf("%w: %w (and a new producer: %w)", errUnknownOutcome, err, perr)
	}
	committed, ferr := c.committedWith(sctx, offsets, meta)
	switch {
	case ferr != nil:
		return fmt.Errorf("%w: %w (and the group's offsets: %w)", errUnknownOutcome, err, ferr)
	case committed:
		return nil
	}
	return fmt.Errorf("kafkastate: transaction: end: %w", err)
}

// addOffsets adds the group's offsets of the partitions, each with
// metadata meta, to the open transaction (AddOffsetsToTxn,
// TxnOffsetCommit), with the member's id and generation.
func (c *coordinator[S]) addOffsets(ctx context.Context, txcl *kgo.Client, offsets map[int32]int64, meta, member string, gen int32) error {
	s := c.s
	id, epoch, err := txcl.ProducerID(ctx)
	if err != nil {
		return err
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = c.txnID, id, epoch, s.cfg.Group
	aresp, err := add.RequestWith(ctx, txcl)
	if err == nil {
		err = kerr.ErrorForCode(aresp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("add offsets to the transaction: %w", err)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = c.txnID, s.cfg.Group, id, epoch
	commit.Generation, commit.MemberID = gen, member
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic, t.TopicID = s.cfg.Topic, s.topicID
	for p, o := range offsets {
		tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		tp.Partition, tp.Offset, tp.LeaderEpoch, tp.Metadata = p, o, -1, &meta
		t.Partitions = append(t.Partitions, tp)
	}
	commit.Topics = append(commit.Topics, t)
	cresp, err := commit.RequestWith(ctx, txcl)
	if err != nil {
		return fmt.Errorf("commit offsets in the transaction: %w", err)
	}
	var errs []error
	for _, t := range cresp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("partition %d: %w", p.Partition, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("commit offsets in the transaction: %w", err)
	}
	return nil
}

// producer returns the process's transactional producer, made (and its
// producer id initialised, which ends an open transaction of the id) if
// there is none.
func (c *coordinator[S]) producer(ctx context.Context) (*kgo.Client, error) {
	if c.txcl != nil {
		return c.txcl, nil
	}
	s := c.s
	txcl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...), kgo.TransactionalID(c.txnID)}, s.cfg.ClientOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkastate: transactional producer %s: %w", c.txnID, err)
	}
	if _, _, err = txcl.ProducerID(ctx); err != nil {
		txcl.Close()
		return nil, fmt.Errorf("kafkastate: transactional producer %s: %w", c.txnID, err)
	}
	c.txcl = txcl
	return txcl, nil
}

// resetProducer closes the transactional producer: the next commit makes
// another of the same id.
func (c *coordinator[S]) resetProducer() {
	if c.txcl != nil {
		c.txcl.Close()
		c.txcl = nil
	}
}

// committedWith reports whether the group's stable committed offsets of
// the partitions carry metadata meta: whether the commit that named it
// landed. They all do or none, as one transaction commits them.
func (c *coordinator[S]) committedWith(ctx context.Context, offsets map[int32]int64, meta string) (bool, error) {
	s := c.s
	parts := slices.Collect(maps.Keys(offsets))
	resp, err := fetchPositions(ctx, s.cl, s.cfg.Group, s.cfg.Topic, s.prefix, parts, true)
	if err != nil {
		return false, err
	}
	for _, at := range resp {
		if metadataOf(at.record) == meta {
			return true, nil
		}
	}
	return false, nil
}
