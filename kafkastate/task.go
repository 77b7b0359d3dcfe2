package kafkastate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/job"
	"github.com/dstlgo/dstl/statestore"
)

// task is the runner's task of one assigned partition: it processes the
// partition's records into its state and says where its input is. It is
// used from the runner's goroutine only.
type task[S any] struct {
	s    *Service[S]
	part Partition[S]
	next int64 // the next offset to process; -1: none known yet (from the first record on)
	cur  int64 // the offset of the record being processed; -1 between records
	buf  []*kgo.Record

	// out is the output pending in the transactional mode: records
	// produced by the transaction that commits the checkpoint covering
	// their input record.
	out []pendingOutput

	// legacy is the first layout's store of pending output, registered
	// when the restored state may hold it; its output of the input below
	// settleBelow is in Kafka, the rest is pending. It is settled once,
	// before the first record or checkpoint (settleLegacy).
	legacy      *statestore.KeyValueStore[uint64, legacyOutput]
	settleBelow int64
	settled     bool
	legacyErr   error
}

// pendingOutput is an output record and the offset of the input record
// whose processing produced it.
type pendingOutput struct {
	input int64
	rec   *kgo.Record
}

// open is the runner's Open: it makes partition in.Index's state and task.
func (s *Service[S]) open(ctx context.Context, in *job.Instance) (job.Task, error) {
	p := int32(in.Index)
	start := s.coord.startOf(p)
	st, stores, err := s.cfg.NewState(s.info(p), in.Log())
	var legacy *statestore.KeyValueStore[uint64, legacyOutput]
	if err == nil && start.legacyOutput {
		if legacy, err = newLegacyOutputStore(in.Log()); err == nil {
			stores = append(stores, legacy)
		}
	}
	if err == nil {
		err = in.Register(stores...)
	}
	if err != nil {
		return nil, fmt.Errorf("kafkastate: partition %s: state: %w", s.info(p), err)
	}
	t := &task[S]{s: s, next: start.offset, cur: -1, legacy: legacy, settleBelow: start.settleBelow}
	t.part = Partition[S]{PartitionInfo: s.info(p), State: st, t: t}
	s.tasks[p] = t
	s.c.assigned.Add(1)
	return t, nil
}

// Process processes the records fetched for the partition, polling the
// client (without waiting) when there are none.
func (t *task[S]) Process(ctx context.Context) (int, error) {
	s := t.s
	if err := s.outputErr(); err != nil {
		return 0, err
	}
	if err := t.settleLegacy(); err != nil {
		return 0, err
	}
	if len(t.buf) == 0 {
		s.poll()
	}
	n := 0
	for len(t.buf) > 0 {
		if n%64 == 63 && ctx.Err() != nil {
			break // the next checkpoint is due
		}
		r := t.buf[0]
		t.buf[0] = nil
		t.buf = t.buf[1:]
		s.buffered--
		if t.next >= 0 && r.Offset < t.next {
			continue // before the restored offset
		}
		if err := t.process(ctx, r); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// process processes one record.
func (t *task[S]) process(ctx context.Context, r *kgo.Record) error {
	s := t.s
	t.cur = r.Offset
	defer func() { t.cur = -1 }()
	if perr := s.cfg.Process(ctx, r, &t.part); perr != nil {
		if s.cfg.DeadLetter == nil {
			return &RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: perr}
		}
		if err := s.cfg.DeadLetter(ctx, r, perr); err != nil {
			return &RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: fmt.Errorf("dead letter: %w (rejected: %w)", err, perr)}
		}
		s.c.skipped.Add(1)
		s.event(Event{Kind: EventSkipped, PartitionInfo: t.part.PartitionInfo, Offset: r.Offset, Generation: s.generation(), Err: perr})
	} else {
		s.c.records.Add(1)
	}
	t.next = r.Offset + 1
	return nil
}

// Metadata returns the partition's next offset: the input position a
// checkpoint taken now holds.
func (t *task[S]) Metadata(int64) map[string]string {
	if err := t.settleLegacy(); err != nil {
		t.legacyErr = err // Process returns it
	}
	if t.next < 0 {
		return nil
	}
	return map[string]string{offsetKey: strconv.FormatInt(t.next, 10)}
}

// Complete does nothing: the commit that completed the checkpoint carried
// its output already.
func (t *task[S]) Complete(context.Context, int64) error { return nil }

// Close drops the partition's records and pending output: another process
// (or this one, restored) processes them again from its committed offset.
func (t *task[S]) Close() error {
	s := t.s
	p := t.part.Partition
	if s.tasks[p] == t {
		delete(s.tasks, p)
	}
	s.closedAt[p] = t.next
	s.buffered -= len(t.buf)
	t.buf, t.out = nil, nil
	return nil
}

// poll takes, without waiting, the records the client fetched, and hands
// them to their partitions' tasks; records of a partition with no task
// are dropped (it was revoked or lost: its next owner reads them again).
// It polls at most once a millisecond while polls return nothing, and not
// while MaxPollRecords records wait.
func (s *Service[S]) poll() {
	if s.buffered >= s.cfg.MaxPollRecords || time.Since(s.emptyPoll) < time.Millisecond {
		return
	}
	fetches := s.cl.PollRecords(nil, s.cfg.MaxPollRecords-s.buffered) // a nil context: without waiting
	fetches.EachError(func(topic string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) || time.Since(s.fetchWarn) < time.Second {
			return
		}
		s.fetchWarn = time.Now()
		s.log.Warn("kafkastate: fetch", "partition", p, "err", err)
	})
	if fetches.NumRecords() == 0 {
		s.emptyPoll = time.Now()
		return
	}
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		t := s.tasks[fp.Partition]
		if fp.Topic != s.cfg.Topic || t == nil {
			return
		}
		t.buf = append(t.buf, fp.Records...)
		s.buffered += len(fp.Records)
	})
}

// newLegacyOutputStore makes the first layout's store of pending output
// on log.
func newLegacyOutputStore(log *dstl.Writer) (*statestore.KeyValueStore[uint64, legacyOutput], error) {
	return statestore.NewKeyValueStore(legacyOutputStore, log, statestore.Uint64Codec{}, statestore.JSONCodec[legacyOutput]{}, StoreOptions()...)
}

// settleLegacy settles, once, the output pending in the first layout's
// store, as the releases before records did on restore: the output of
// the input below the group's committed offset is in a committed
// transaction, and is dropped; the rest is pending again (produced with
// the first checkpoint in the transactional mode, at once otherwise).
// The store is emptied.
func (t *task[S]) settleLegacy() error {
	if t.legacyErr != nil {
		return t.legacyErr
	}
	if t.legacy == nil || t.settled {
		return nil
	}
	t.settled = true
	s := t.s
	var keys []uint64
	for k, o := range t.legacy.All() {
		keys = append(keys, k)
		if o.Input < t.settleBelow {
			continue
		}
		if s.cfg.TransactionalID != "" {
			t.out = append(t.out, pendingOutput{input: o.Input, rec: o.record()})
		} else {
			s.produceNow(o.record())
		}
	}
	for _, k := range keys {
		if err := t.legacy.Delete(k); err != nil {
			return fmt.Errorf("kafkastate: partition %s: the first layout's pending output: %w", t.part.PartitionInfo, err)
		}
	}
	if len(keys) > 0 {
		s.log.Info("kafkastate: the first layout's pending output settled", "partition", t.part.Partition, "records", len(keys), "below", t.settleBelow)
	}
	return nil
}
