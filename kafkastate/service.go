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

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/job"
	"github.com/dstlgo/dstl/statestore"
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
	// restored from the record its committed offset names.
	State S

	t *task[S]
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
	// EventRestored: a partition was assigned and its state restored
	// from the record its committed offset names (or, when it names none
	// and the job was checkpointed by a release before records, from the
	// partition's part of the job's first-layout catalog); Offset is the
	// offset it resumes at, Checkpoint the record's (or part's).
	EventRestored EventKind = "restored"
	// EventFirstStart: a partition was assigned with no record to
	// restore: it starts with an empty state at the group's committed
	// offset (Offset), or at the earliest offset (Offset -1: the first
	// record's).
	EventFirstStart EventKind = "first-start"
	// EventCheckpoint: a partition's checkpoint Checkpoint, at input
	// Offset, was committed.
	EventCheckpoint EventKind = "checkpoint"
	// EventCheckpointFailed: checkpoint Checkpoint failed (Err): a
	// partition's snapshot (Partition), or the process's commit
	// (Partition -1); the next one takes its changes.
	EventCheckpointFailed EventKind = "checkpoint-failed"
	// EventFenced: the process dropped every partition's state and
	// restored each from its committed record (Err says why: a commit
	// whose outcome could not be learnt, or a checkpoint that would name
	// objects the deletion rule may have deleted). Partition is -1.
	EventFenced EventKind = "fenced"
	// EventRevoked: a partition was revoked in a rebalance, after a last
	// checkpoint of the process was committed; Offset is where it was.
	EventRevoked EventKind = "revoked"
	// EventLost: a partition was lost (the member's session ended) and
	// dropped without a checkpoint; Offset is where it was.
	EventLost EventKind = "lost"
	// EventSkipped: the DeadLetterFunc took a rejected record (Offset,
	// Err).
	EventSkipped EventKind = "skipped"
	// EventCollected: the deletion rule ran (by the process that holds
	// partition 0); Err is its error, if any. Partition is -1.
	EventCollected EventKind = "collected"
)

// Event is something that happened to a partition, or to the process
// (Partition -1).
type Event struct {
	Kind EventKind
	PartitionInfo
	// Offset is the input offset the event is at (see the kinds).
	Offset int64
	// Generation is the group's generation of the member when the event
	// happened, and Checkpoint the checkpoint the event is about.
	Generation, Checkpoint int64
	// Err is the error of a failure.
	Err error
}

// Stats are a service's counters since New.
type Stats struct {
	Records            int64 // records processed (again after a restore)
	Skipped            int64 // records rejected and taken by the dead-letter function
	Checkpoints        int64 // partition checkpoints committed
	Commits            int64 // the process's commits (one record each)
	CheckpointFailures int64 // checkpoints that failed: a partition's snapshot, or the process's commit
	Restores           int64 // partition restores from a record (or from the first layout's catalog)
	Upgrades           int64 // of them, restores from the first layout's catalog (see docs/KAFKA.md, "Upgrade")
	FirstStarts        int64 // partition assignments with no record
	Fenced             int64 // times the process dropped and restored every partition
	Assigned           int64 // partitions assigned
	Revoked            int64 // partitions revoked
	Lost               int64 // partitions lost
	Collections        int64 // runs of the deletion rule
	// TransactionFailures counts the transactions that did not commit
	// (their output goes in the next checkpoint's).
	TransactionFailures int64
}

type counters struct {
	records, skipped, checkpoints, commits, checkpointFailures, restores, upgrades, firstStarts, fenced,
	assigned, revoked, lost, collections, transactionFailures atomic.Int64
}

// Service consumes a topic as a member of a consumer group and keeps the
// state of its assigned partitions, restored from and checkpointed to
// records on the object store that the group's committed offsets name.
// See the package documentation.
type Service[S any] struct {
	cfg     Config[S]
	storage *dstl.Storage
	jobID   string
	prefix  string
	log     *slog.Logger
	c       counters
	eventMu sync.Mutex // serializes the calls of OnEvent

	// crash, for tests: from now on commit nothing (the last checkpoint
	// included), as a killed process would.
	crash atomic.Bool

	// What follows is set by Run, and used by the runner's goroutine (the
	// tasks, the coordinator's Join, Rebalance and Commit).
	partitions int
	topicID    [16]byte
	cl         *kgo.Client // the group's consumer
	coord      *coordinator[S]
	tasks      map[int32]*task[S]
	buffered   int       // records fetched and not processed yet
	emptyPoll  time.Time // the last poll that returned nothing
	fetchWarn  time.Time // the last fetch error logged
	closedAt   map[int32]int64

	out    *kgo.Client // the output's producer, without transactions
	outMu  sync.Mutex
	outErr error // the first failure of the output's producer
}

// New returns a service that keeps its partitions' state in storage (one
// shared dstl Storage per process: every partition's changes are batched
// into its objects); its checkpoint records are under storage's job
// prefix.
func New[S any](storage *dstl.Storage, cfg Config[S]) (*Service[S], error) {
	if storage == nil {
		return nil, fmt.Errorf("%w: storage is nil", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	jobID := storage.Config().JobID
	return &Service[S]{
		cfg: cfg, storage: storage, jobID: jobID, prefix: objname.JobPrefix(jobID),
		log: cfg.Logger.With("topic", cfg.Topic, "group", cfg.Group),
	}, nil
}

// Stats returns the service's counters.
func (s *Service[S]) Stats() Stats {
	return Stats{
		Records: s.c.records.Load(), Skipped: s.c.skipped.Load(), Checkpoints: s.c.checkpoints.Load(),
		Commits: s.c.commits.Load(), CheckpointFailures: s.c.checkpointFailures.Load(), Restores: s.c.restores.Load(), Upgrades: s.c.upgrades.Load(),
		FirstStarts: s.c.firstStarts.Load(), Fenced: s.c.fenced.Load(), Assigned: s.c.assigned.Load(),
		Revoked: s.c.revoked.Load(), Lost: s.c.lost.Load(), Collections: s.c.collections.Load(),
		TransactionFailures: s.c.transactionFailures.Load(),
	}
}

// event calls OnEvent, one call at a time.
func (s *Service[S]) event(e Event) {
	if s.cfg.OnEvent != nil {
		s.eventMu.Lock()
		defer s.eventMu.Unlock()
		s.cfg.OnEvent(e)
	}
}

// info returns partition p's name.
func (s *Service[S]) info(p int32) PartitionInfo {
	return PartitionInfo{Topic: s.cfg.Topic, Partition: p}
}

// generation returns the member's current generation in the group.
func (s *Service[S]) generation() int64 {
	if s.cl == nil {
		return 0
	}
	_, g := s.cl.GroupMetadata()
	return int64(g)
}

// operator is the operator prefix of the partitions' checkpointers:
// partition p's is "kafka-TOPIC-p".
func (s *Service[S]) operator() string { return operatorOf(s.cfg.Topic) }

// operatorOf returns the operator prefix of the checkpointers of topic's
// partitions.
func operatorOf(topic string) string { return "kafka-" + topic }

// partitionCount returns the number of partitions of the topic and its
// id, from the brokers' metadata.
func partitionCount(ctx context.Context, cl *kgo.Client, topic string) (int, [16]byte, error) {
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
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
// (then it takes and commits a last checkpoint of its partitions, leaves
// the group and returns nil) or it cannot go on (the error: a rejected
// record's *RecordError, a record that cannot be restored, a grace too
// short for the client's timeouts, partitions added to the topic).
//
// Run runs the partitions on package job's runner (job.Run): the
// partitions are its instances, the group its coordinator.
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
	s.partitions, s.topicID = n, topicID
	s.tasks, s.closedAt, s.buffered, s.outErr = map[int32]*task[S]{}, map[int32]int64{}, 0, nil
	c := newCoordinator(s)
	s.coord = c
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(s.cfg.Topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.OnPartitionsAssigned(c.onAssigned),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onLost),
		kgo.AdjustFetchOffsetsFn(c.adjustOffsets),
	}, s.cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafkastate: client: %w", err)
	}
	s.cl = cl
	c.col = &collector{b: s.storage.Backend(), jobID: s.jobID, prefix: s.prefix, topic: s.cfg.Topic, group: s.cfg.Group,
		operator: s.operator(), partitions: s.partitions, grace: s.cfg.Grace, cl: cl, recs: c.recs}
	var txnTimeout time.Duration
	if s.cfg.TransactionalID != "" {
		txnTimeout = cl.OptValue(kgo.TransactionTimeout).(time.Duration)
		c.txnTimeout = txnTimeout
	} else if s.out, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...)}, s.cfg.ClientOptions...)...); err != nil {
		cl.Close()
		return fmt.Errorf("kafkastate: output client: %w", err)
	}
	defer func() {
		c.close()
		cl.Close()
		if s.out != nil {
			s.out.Close()
		}
		c.wait()
	}()
	if err := checkGrace(s.cfg.Grace, cl.OptValue(kgo.SessionTimeout).(time.Duration), cl.OptValue(kgo.RebalanceTimeout).(time.Duration),
		txnTimeout, s.cfg.CommitTimeout); err != nil {
		return err
	}
	jcfg := job.Config{
		Operator: s.operator(), Interval: s.cfg.CheckpointInterval, CollectInterval: s.cfg.CollectInterval,
		StopTimeout: max(s.cfg.CommitTimeout, s.cfg.CheckpointInterval), Logger: s.log, OnEvent: s.onJobEvent,
		State: statestore.Config{MaterializeInterval: s.cfg.MaterializeInterval},
	}
	err = job.Run(ctx, s.storage, c, jcfg, s.open)
	if err != nil {
		return fmt.Errorf("kafkastate: %w", err)
	}
	return nil
}

// onJobEvent passes on what the runner did, in the package's events.
func (s *Service[S]) onJobEvent(e job.Event) {
	p := int32(e.Instance)
	gen := s.generation()
	switch e.Kind {
	case job.EventRestored:
		st := s.coord.startOf(p)
		if st.restored() {
			s.c.restores.Add(1)
			if st.part != "" {
				s.c.upgrades.Add(1)
			}
			s.event(Event{Kind: EventRestored, PartitionInfo: s.info(p), Offset: st.offset, Generation: gen, Checkpoint: e.Checkpoint})
		} else {
			s.c.firstStarts.Add(1)
			s.event(Event{Kind: EventFirstStart, PartitionInfo: s.info(p), Offset: st.offset, Generation: gen})
		}
	case job.EventTakeFailed:
		s.c.checkpointFailures.Add(1)
		s.event(Event{Kind: EventCheckpointFailed, PartitionInfo: s.info(p), Generation: gen, Checkpoint: e.Checkpoint, Err: e.Err})
	case job.EventCommitFailed:
		s.c.checkpointFailures.Add(1)
		s.event(Event{Kind: EventCheckpointFailed, PartitionInfo: s.info(-1), Generation: gen, Checkpoint: e.Checkpoint, Err: e.Err})
	case job.EventFenced:
		s.c.fenced.Add(1)
		s.event(Event{Kind: EventFenced, PartitionInfo: s.info(-1), Generation: gen, Err: e.Err})
	case job.EventRevoked:
		s.c.revoked.Add(1)
		s.event(Event{Kind: EventRevoked, PartitionInfo: s.info(p), Offset: s.closedAt[p], Generation: gen})
	case job.EventLost:
		s.c.lost.Add(1)
		s.event(Event{Kind: EventLost, PartitionInfo: s.info(p), Offset: s.closedAt[p], Generation: gen})
	}
}

// errOutput wraps a failure of the output's producer (without
// transactions), which stops the service: records whose output is lost
// would be checkpointed otherwise.
var errOutput = errors.New("kafkastate: output")

// newTransactionalID returns the transactional id of this process's
// producer: the configured one and a UUID, one per start.
func (s *Service[S]) newTransactionalID() string {
	return s.cfg.TransactionalID + "-" + uuid.NewString()
}
