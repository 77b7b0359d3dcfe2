package kafkastate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
)

// PartitionInfo names an input partition.
type PartitionInfo struct {
	Topic     string
	Partition int32
}

// String returns "TOPIC/PARTITION".
func (p PartitionInfo) String() string { return fmt.Sprintf("%s/%d", p.Topic, p.Partition) }

// Partition is an input partition as ProcessFunc sees it: its name and its
// state.
type Partition[S any] struct {
	PartitionInfo
	// State is the partition's state, made by Config.NewState and
	// restored from the partition's latest checkpoint.
	State S

	ps *partState[S]
}

// RecordError is the error of a record that ProcessFunc rejected while no
// DeadLetterFunc was set, or that the DeadLetterFunc did not take.
type RecordError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

// Error names the record and says why it was rejected.
func (e *RecordError) Error() string {
	return fmt.Sprintf("kafkastate: record %s/%d at offset %d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

// Unwrap returns the rejection's error.
func (e *RecordError) Unwrap() error { return e.Err }

// EventKind says what an Event reports.
type EventKind string

// The kinds of events.
const (
	// EventRestored: a partition was assigned (or rejoined after a fence)
	// and its state restored from a checkpoint; Offset is the offset it
	// resumes at, Checkpoint the restored one.
	EventRestored EventKind = "restored"
	// EventFirstStart: a partition was assigned with no checkpoint to
	// restore; Offset is -1 when it starts at Kafka's committed offset.
	EventFirstStart EventKind = "first-start"
	// EventCheckpoint: a partition committed checkpoint Checkpoint, with
	// input Offset.
	EventCheckpoint EventKind = "checkpoint"
	// EventCheckpointFailed: a partition's checkpoint failed (Err); the
	// next interval tries again.
	EventCheckpointFailed EventKind = "checkpoint-failed"
	// EventFenced: a newer generation of the catalog fenced the partition's
	// member; it rejoins and restores.
	EventFenced EventKind = "fenced"
	// EventRevoked: a partition was revoked, after its last checkpoint.
	EventRevoked EventKind = "revoked"
	// EventLost: a partition was lost (the member left the group) and
	// released without a checkpoint.
	EventLost EventKind = "lost"
	// EventReplaced: another process holds the partition (in the
	// catalog, or it fenced the partition's output producer; Err says
	// which): it is released until Kafka assigns it again.
	EventReplaced EventKind = "replaced"
	// EventSkipped: the DeadLetterFunc took a rejected record (Offset,
	// Err).
	EventSkipped EventKind = "skipped"
)

// Event is something that happened to a partition.
type Event struct {
	Kind EventKind
	PartitionInfo
	// Offset is the input offset the event is at (see the kinds).
	Offset int64
	// Generation is the catalog generation of the partition's member, and
	// Checkpoint the checkpoint the event is about.
	Generation, Checkpoint int64
	// Err is the error of a failure.
	Err error
}

// Stats are a service's counters since New.
type Stats struct {
	Records            int64 // records processed (again after a restore)
	Skipped            int64 // records rejected and taken by the dead-letter function
	Checkpoints        int64 // partition checkpoints committed
	CheckpointFailures int64 // partition checkpoints that failed
	Restores           int64 // partition restores from a checkpoint
	FirstStarts        int64 // partition assignments with no checkpoint
	Fenced             int64 // partition members fenced
	Assigned           int64 // partitions assigned
	Revoked            int64 // partitions revoked
	Lost               int64 // partitions lost
	// TransactionFailures counts output transactions that failed (tried
	// again after the next checkpoint).
	TransactionFailures int64
}

type counters struct {
	records, skipped, checkpoints, checkpointFailures, restores, firstStarts, fenced,
	assigned, revoked, lost, transactionFailures atomic.Int64
}

// Service consumes a topic as a member of a consumer group and keeps the
// state of its assigned partitions, restored from and checkpointed to the
// job's catalog on the object store. See the package documentation.
type Service[S any] struct {
	cfg     Config[S]
	storage *dstl.Storage
	jobID   string
	owner   string
	log     *slog.Logger
	c       counters
	eventMu sync.Mutex // serializes the calls of OnEvent

	// crash, for tests: on the end of Run, release nothing and checkpoint
	// nothing, as a killed process would.
	crash atomic.Bool

	mu         sync.Mutex // guards what follows, taken by the polling goroutine and the callbacks
	partitions int
	topicID    [16]byte
	parts      map[int32]*partState[S]
	fatal      error
	collecting sync.WaitGroup
	collectOn  atomic.Bool
	loadOnly   bool // Load: no Kafka

	out    *kgo.Client // the output's producer, without transactions
	outMu  sync.Mutex
	outErr error // the first failure of the output's producer
}

// New returns a service that keeps its partitions' state in storage (one
// shared dstl Storage per process: every partition's changes are batched
// into its objects); the job's catalog is under storage's job prefix.
func New[S any](storage *dstl.Storage, cfg Config[S]) (*Service[S], error) {
	if storage == nil {
		return nil, fmt.Errorf("%w: storage is nil", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Service[S]{
		cfg: cfg, storage: storage, jobID: storage.Config().JobID, owner: uuid.NewString(),
		log: cfg.Logger.With("topic", cfg.Topic, "group", cfg.Group),
	}, nil
}

// Stats returns the service's counters.
func (s *Service[S]) Stats() Stats {
	return Stats{
		Records: s.c.records.Load(), Skipped: s.c.skipped.Load(), Checkpoints: s.c.checkpoints.Load(),
		CheckpointFailures: s.c.checkpointFailures.Load(), Restores: s.c.restores.Load(),
		FirstStarts: s.c.firstStarts.Load(), Fenced: s.c.fenced.Load(), Assigned: s.c.assigned.Load(),
		Revoked: s.c.revoked.Load(), Lost: s.c.lost.Load(), TransactionFailures: s.c.transactionFailures.Load(),
	}
}

// event calls OnEvent, one call at a time: events are reported by the
// polling goroutine, the client's rebalance callbacks and the checkpoints'
// goroutines.
func (s *Service[S]) event(e Event) {
	if s.cfg.OnEvent != nil {
		s.eventMu.Lock()
		defer s.eventMu.Unlock()
		s.cfg.OnEvent(e)
	}
}

// partitionCount returns the number of partitions of the topic and its
// id, from the brokers' metadata.
func partitionCount(ctx context.Context, cl *kgo.Client, topic string) (int, [16]byte, error) {
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return 0, [16]byte{}, fmt.Errorf("kafkastate: metadata of topic %q: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	switch {
	case !ok:
		return 0, [16]byte{}, fmt.Errorf("kafkastate: topic %q: not in the brokers' metadata", topic)
	case td.Err != nil:
		return 0, [16]byte{}, fmt.Errorf("kafkastate: topic %q: %w", topic, td.Err)
	case len(td.Partitions) == 0:
		return 0, [16]byte{}, fmt.Errorf("kafkastate: topic %q: no partitions", topic)
	}
	return len(td.Partitions), td.ID, nil
}

// Run joins the consumer group and processes the topic until ctx ends
// (then it checkpoints and releases its partitions, leaves the group and
// returns nil) or it cannot go on (the error: a rejected record's
// *RecordError, a catalog it cannot join, or a catalog whose generation
// has another partition count, catalog.ErrMismatch).
func (s *Service[S]) Run(ctx context.Context) (err error) {
	// The partition count first, with a client of no group: the group's
	// client may be assigned partitions before any call returns.
	mdcl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...)}, s.cfg.ClientOptions...)...)
	if err != nil {
		return fmt.Errorf("kafkastate: client: %w", err)
	}
	n, topicID, err := partitionCount(ctx, mdcl, s.cfg.Topic)
	mdcl.Close()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.parts = map[int32]*partState[S]{}
	s.fatal = nil
	s.partitions, s.topicID = n, topicID
	s.mu.Unlock()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(s.cfg.Topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			s.assigned(ctx, m[s.cfg.Topic])
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			s.revoked(ctx, cl, m[s.cfg.Topic], false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			s.revoked(ctx, cl, m[s.cfg.Topic], true)
		}),
		kgo.AdjustFetchOffsetsFn(s.adjustOffsets),
	}, s.cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafkastate: client: %w", err)
	}
	if s.cfg.TransactionalID == "" {
		if s.out, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...)}, s.cfg.ClientOptions...)...); err != nil {
			cl.Close()
			return fmt.Errorf("kafkastate: output client: %w", err)
		}
	}
	defer func() {
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		s.mu.Lock()
		for p, ps := range s.parts {
			if !s.crash.Load() {
				if ps.member != nil {
					s.checkpointOne(stop, ps)
				}
				s.commitKafka(stop, cl, []*partState[S]{ps})
			}
			ps.close()
			delete(s.parts, p)
		}
		s.mu.Unlock()
		cl.Close()
		if s.out != nil {
			s.out.Close()
		}
		s.collecting.Wait()
	}()
	return s.loop(ctx, cl)
}

// loop polls and processes records, and checkpoints every interval.
func (s *Service[S]) loop(ctx context.Context, cl *kgo.Client) error {
	next := time.Now().Add(s.cfg.CheckpointInterval)
	nextCollect := time.Now().Add(s.cfg.CollectInterval)
	for {
		if ctx.Err() != nil {
			return nil
		}
		pctx, cancel := context.WithDeadline(ctx, next)
		fetches := cl.PollRecords(pctx, s.cfg.MaxPollRecords)
		cancel()
		err := s.handle(ctx, cl, fetches)
		if err == nil && !time.Now().Before(next) {
			err = s.checkpointAll(ctx, cl)
			next = time.Now().Add(s.cfg.CheckpointInterval)
		}
		if err == nil && s.cfg.CollectInterval > 0 && !time.Now().Before(nextCollect) {
			s.maybeCollect(ctx)
			nextCollect = time.Now().Add(s.cfg.CollectInterval)
		}
		cl.AllowRebalance()
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped: whatever failed was cut short by it
			}
			return err
		}
	}
}

// handle processes a poll's records.
func (s *Service[S]) handle(ctx context.Context, cl *kgo.Client, fetches kgo.Fetches) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal != nil {
		return s.fatal
	}
	failed := false
	fetches.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
			s.log.Warn("kafkastate: fetch", "partition", p, "err", err)
			failed = true
		}
	})
	if failed && fetches.NumRecords() == 0 {
		// The client retries by itself; do not spin on its errors.
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		s.mu.Lock()
	}
	var err error
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if err != nil || fp.Topic != s.cfg.Topic {
			return
		}
		ps := s.parts[fp.Partition]
		for _, r := range fp.Records {
			if ps == nil || ps.member == nil || err != nil {
				return // released: what was buffered is not ours
			}
			if ps.next >= 0 && r.Offset < ps.next {
				continue // before the restored offset
			}
			err = s.process(ctx, ps, r)
		}
	})
	return err
}

// process processes one record into its partition's state.
func (s *Service[S]) process(ctx context.Context, ps *partState[S], r *kgo.Record) error {
	ps.current = r.Offset
	defer func() { ps.current = -1 }()
	if perr := s.cfg.Process(ctx, r, &ps.part); perr != nil {
		if s.cfg.DeadLetter == nil {
			return &RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: perr}
		}
		if err := s.cfg.DeadLetter(ctx, r, perr); err != nil {
			return &RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: fmt.Errorf("dead letter: %w (rejected: %w)", err, perr)}
		}
		s.c.skipped.Add(1)
		s.event(Event{Kind: EventSkipped, PartitionInfo: ps.part.PartitionInfo, Offset: r.Offset, Generation: ps.generation(), Err: perr})
	} else {
		s.c.records.Add(1)
	}
	if ps.outErr != nil {
		return ps.outErr
	}
	ps.next = r.Offset + 1
	return nil
}

// checkpointAll checkpoints every partition at once (their changes share
// the storage's uploads), handles the fenced ones, and commits the
// checkpoints' offsets to the group.
func (s *Service[S]) checkpointAll(ctx context.Context, cl *kgo.Client) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var g errgroup.Group
	results := map[int32]error{}
	var rmu sync.Mutex
	var retry []*partState[S]
	for p, ps := range s.parts {
		if ps.member == nil {
			// Released because another process held it (in the catalog,
			// or its output's producer), while the client still has it:
			// after a while, if the group's current assignment gives it to
			// this member (the other is then a process the group has
			// dropped), take it back, which fences the other.
			if time.Since(ps.releasedAt) > 3*s.cfg.CheckpointInterval {
				retry = append(retry, ps)
			}
			continue
		}
		g.Go(func() error {
			err := s.checkpointOne(ctx, ps)
			rmu.Lock()
			results[p] = err
			rmu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	var done []*partState[S]
	seek := map[string]map[int32]kgo.EpochOffset{}
	for p, err := range results {
		ps := s.parts[p]
		switch {
		case errors.Is(err, errOutput):
			return err
		case err == nil:
			done = append(done, ps)
		case errors.Is(err, errProducerFenced):
			s.release(ps, err)
		case errors.Is(err, catalog.ErrFenced), errors.Is(err, errStalled):
			if rerr := s.rejoin(ctx, ps, errors.Is(err, errStalled)); rerr != nil {
				return rerr
			}
			setSeek(seek, s.cfg.Topic, ps)
		}
	}
	if len(retry) > 0 {
		owned, err := s.assignedHere(ctx, cl)
		if err != nil {
			s.log.Info("kafkastate: the group's assignment of released partitions", "err", err)
		}
		for _, ps := range retry {
			if !owned[ps.part.Partition] {
				ps.releasedAt = time.Now() // looked at again later
				continue
			}
			if err := s.join(ctx, ps); err != nil {
				return err
			}
			setSeek(seek, s.cfg.Topic, ps)
		}
	}
	if len(seek) > 0 {
		cl.SetOffsets(seek)
	}
	s.commitKafka(ctx, cl, done)
	return nil
}

// assignedHere returns the partitions of the topic that the group's
// current assignment gives to this member, as the group's coordinator
// describes it.
func (s *Service[S]) assignedHere(ctx context.Context, cl *kgo.Client) (map[int32]bool, error) {
	member, _ := cl.GroupMetadata()
	if member == "" {
		return nil, fmt.Errorf("kafkastate: not a member of group %s", s.cfg.Group)
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.CheckpointInterval+5*time.Second)
	defer cancel()
	groups, err := kadm.NewClient(cl).DescribeGroups(dctx, s.cfg.Group)
	if err != nil {
		return nil, fmt.Errorf("kafkastate: describing group %s: %w", s.cfg.Group, err)
	}
	g, ok := groups[s.cfg.Group]
	if !ok || g.Err != nil {
		return nil, fmt.Errorf("kafkastate: describing group %s: %w", s.cfg.Group, g.Err)
	}
	owned := map[int32]bool{}
	for _, m := range g.Members {
		if m.MemberID != member {
			continue
		}
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			return nil, fmt.Errorf("kafkastate: group %s: member %s has no consumer assignment", s.cfg.Group, member)
		}
		for _, t := range a.Topics {
			if t.Topic == s.cfg.Topic {
				for _, p := range t.Partitions {
					owned[p] = true
				}
			}
		}
	}
	return owned, nil
}

// setSeek adds to seek the offset a partition restored as a member
// resumes at.
func setSeek[S any](seek map[string]map[int32]kgo.EpochOffset, topic string, ps *partState[S]) {
	if ps.member == nil {
		return
	}
	if ps.next < 0 {
		ps.next = 0 // no checkpoint: from the start (the reset offset if gone)
	}
	if seek[topic] == nil {
		seek[topic] = map[int32]kgo.EpochOffset{}
	}
	seek[topic][ps.part.Partition] = kgo.EpochOffset{Epoch: -1, Offset: ps.next}
}

// commitKafka commits the partitions' checkpointed offsets to the
// consumer group, for the group's tools (lag); the service itself resumes
// from its checkpoints.
func (s *Service[S]) commitKafka(ctx context.Context, cl *kgo.Client, parts []*partState[S]) {
	if s.cfg.TransactionalID != "" {
		return // the transactions commit them, to mark the output Kafka has
	}
	offsets := map[int32]kgo.EpochOffset{}
	for _, ps := range parts {
		if ps.committedOffset >= 0 && ps.committedOffset > ps.kafkaOffset {
			offsets[ps.part.Partition] = kgo.EpochOffset{Epoch: -1, Offset: ps.committedOffset}
		}
	}
	if len(offsets) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CheckpointInterval+5*time.Second)
	defer cancel()
	var failed error
	cl.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{s.cfg.Topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				failed = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 && failed == nil {
						failed = fmt.Errorf("partition %d: error code %d", p.Partition, p.ErrorCode)
					}
				}
			}
		})
	if failed != nil {
		s.log.Info("kafkastate: committing offsets to the group (for its tools only)", "err", failed)
		return
	}
	for _, ps := range parts {
		if o, ok := offsets[ps.part.Partition]; ok {
			ps.kafkaOffset = o.Offset
		}
	}
}

// maybeCollect starts a run of the catalog's deletion rule, by the member
// of partition 0, unless one is running.
func (s *Service[S]) maybeCollect(ctx context.Context) {
	ps := s.parts[0]
	if ps == nil || ps.member == nil || !s.collectOn.CompareAndSwap(false, true) {
		return
	}
	m := ps.member
	s.collecting.Add(1)
	go func() {
		defer s.collecting.Done()
		defer s.collectOn.Store(false)
		_, _, err := m.Collect(ctx, collect.Options{})
		if err != nil && !errors.Is(err, catalog.ErrFenced) && ctx.Err() == nil {
			s.log.Warn("kafkastate: deletion rule", "err", err)
		}
	}()
}

// adjustOffsets starts each newly assigned partition at its restored
// checkpoint's offset. A partition starting at the group's committed
// offset (the job's first start) takes it as its next offset, so that its
// next checkpoint (the next interval's, or its revocation's) keeps it even
// if no record follows: a later generation, which starts a partition with
// no checkpoint at the earliest offset, does not read the replaced
// consumer's records again.
func (s *Service[S]) adjustOffsets(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, o := range offsets[s.cfg.Topic] {
		ps := s.parts[p]
		if ps == nil || ps.member == nil {
			continue
		}
		switch {
		case ps.next >= 0:
			offsets[s.cfg.Topic][p] = kgo.NewOffset().At(ps.next).WithEpoch(-1)
		case !ps.useKafkaOffset:
			offsets[s.cfg.Topic][p] = kgo.NewOffset().AtStart()
		default:
			if eo := o.EpochOffset(); eo.Offset >= 0 {
				ps.next = eo.Offset // the group's committed offset
			}
		}
	}
	return offsets, nil
}

// assigned restores the state of newly assigned partitions.
func (s *Service[S]) assigned(ctx context.Context, partitions []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range partitions {
		s.c.assigned.Add(1)
		if int(p) >= s.partitions {
			if s.fatal == nil {
				s.fatal = fmt.Errorf("kafkastate: partition %s assigned: the job has %d partitions (partitions added to the topic are not supported)",
					PartitionInfo{s.cfg.Topic, p}, s.partitions)
			}
			continue
		}
		if old := s.parts[p]; old != nil {
			old.close()
		}
		ps := newPartState(s, p)
		s.parts[p] = ps
		if err := s.join(ctx, ps); err != nil && s.fatal == nil && ctx.Err() == nil {
			s.fatal = err
		}
	}
}

// revoked checkpoints (unless lost) and releases partitions.
func (s *Service[S]) revoked(ctx context.Context, cl *kgo.Client, partitions []int32, lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range partitions {
		ps := s.parts[p]
		if ps == nil {
			continue
		}
		kind := EventRevoked
		if lost {
			kind = EventLost
			s.c.lost.Add(1)
		} else {
			s.c.revoked.Add(1)
			if ps.member != nil && ctx.Err() == nil && !s.crash.Load() {
				if err := s.checkpointOne(ctx, ps); err != nil {
					s.log.Info("kafkastate: checkpoint of a revoked partition", "partition", p, "err", err)
				} else {
					s.commitKafka(ctx, cl, []*partState[S]{ps})
				}
			}
		}
		s.event(Event{Kind: kind, PartitionInfo: ps.part.PartitionInfo, Offset: ps.next, Generation: ps.generation()})
		ps.close()
		delete(s.parts, p)
	}
}
