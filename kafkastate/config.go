package kafkastate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// Defaults of Config.
const (
	DefaultCheckpointInterval  = 5 * time.Second
	DefaultMaterializeInterval = time.Minute
	DefaultGrace               = 10 * time.Minute
	DefaultCollectInterval     = time.Minute
	DefaultCommitTimeout       = 10 * time.Second
	DefaultRestoreAttempts     = 5
	DefaultMaxPollRecords      = 10000
)

// ErrConfig is wrapped by every error of Config.Validate, and by Run's
// check of the grace against the Kafka client's timeouts; the error names
// the field.
var ErrConfig = errors.New("kafkastate: bad configuration")

// NewStateFunc makes a partition's state: S (for instance a struct of
// stores) and the stores to register, each made on log with the options
// of [StoreOptions].
type NewStateFunc[S any] func(p PartitionInfo, log *dstl.Writer) (S, []statestore.Store, error)

// ProcessFunc processes one record into its partition's state. An error
// rejects the record (see Config.DeadLetter); it must be returned before
// the function changes the state, since a rejected record's changes are
// not undone.
type ProcessFunc[S any] func(ctx context.Context, rec *kgo.Record, p *Partition[S]) error

// DeadLetterFunc takes a record that ProcessFunc rejected with err. It
// returns nil to skip the record (counted in Stats.Skipped), or an error to
// stop the service.
type DeadLetterFunc func(ctx context.Context, rec *kgo.Record, err error) error

// Config configures a Service. The zero value of every optional field is
// its default.
type Config[S any] struct {
	// Brokers are the seed brokers ("host:port"). Required.
	Brokers []string
	// Topic is the input topic; its partitions are the unit of work and
	// of state. Required.
	Topic string
	// Group is the consumer group. Its committed offsets name the
	// checkpoint records the partitions restore from. Required.
	Group string
	// NewState makes a partition's state. Required.
	NewState NewStateFunc[S]
	// Process processes one record. Required.
	Process ProcessFunc[S]
	// DeadLetter, when set, takes the records that Process rejects, which
	// are then skipped; nil stops the service at the first rejected record
	// with a *RecordError naming topic, partition and offset.
	DeadLetter DeadLetterFunc
	// CheckpointInterval is the time between two checkpoints of the
	// process's partitions. Default DefaultCheckpointInterval.
	CheckpointInterval time.Duration
	// MaterializeInterval is the statestore materialisation interval of
	// each partition's stores. Default DefaultMaterializeInterval.
	MaterializeInterval time.Duration
	// Grace is the deletion rule's grace: the age, by both clocks, below
	// which no object under the job's prefix is deleted, and for which a
	// checkpoint record is kept after it is replaced. It must be at least
	// four checkpoint intervals, and at least twice the longest time a
	// commit can land after its record's put: the longest of the group's
	// session and rebalance timeouts and, with TransactionalID, the
	// transaction timeout (the Kafka client's, see ClientOptions), plus
	// CommitTimeout. Run checks it against the client's timeouts. Default
	// DefaultGrace.
	Grace time.Duration
	// CollectInterval is the time between two runs of the deletion rule,
	// by the process that holds partition 0; negative: never. Default
	// DefaultCollectInterval.
	CollectInterval time.Duration
	// CommitTimeout bounds one checkpoint's commit: the put of its record
	// and the offset commit (or transaction) that names it. A commit that
	// does not end in time fails, and is not tried again. Default
	// DefaultCommitTimeout.
	CommitTimeout time.Duration
	// MaxPollRecords bounds the records fetched from the client at once
	// and kept waiting to be processed. Default DefaultMaxPollRecords.
	MaxPollRecords int
	// RestoreAttempts is how often reading what a newly assigned
	// partition restores (the group's committed offsets, the records
	// they name) is tried before the service stops with the error.
	// Default DefaultRestoreAttempts.
	RestoreAttempts int
	// TransactionalID, when set, makes the output (Partition.Produce)
	// exactly-once: each partition's output is kept until the checkpoint
	// that covers its input, and produced in the Kafka transaction that
	// commits that checkpoint's offsets, by the process's transactional
	// producer (id TransactionalID-UUID, one per process and start).
	// Empty: output is produced at once and flushed before each
	// checkpoint, at least once.
	TransactionalID string
	// Logger receives the service's logs. Default slog.Default().
	Logger *slog.Logger
	// OnEvent, when set, is called for every Event, one call at a time:
	// never concurrently, so it needs no lock of its own for what only it
	// touches. It must return quickly.
	OnEvent func(Event)
	// ClientOptions are added to the Kafka clients' options (TLS, SASL,
	// timeouts); the service sets the group, the topic, the balancer, the
	// rebalance callbacks and the transactional id itself.
	ClientOptions []kgo.Opt
}

// withDefaults returns c with the defaults of the unset fields.
func (c Config[S]) withDefaults() Config[S] {
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.MaterializeInterval == 0 {
		c.MaterializeInterval = DefaultMaterializeInterval
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.CollectInterval == 0 {
		c.CollectInterval = DefaultCollectInterval
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = DefaultCommitTimeout
	}
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = DefaultMaxPollRecords
	}
	if c.RestoreAttempts == 0 {
		c.RestoreAttempts = DefaultRestoreAttempts
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks the configuration, with the defaults applied; the error
// wraps ErrConfig and names the field. The grace's bound by the Kafka
// client's timeouts is checked by Run.
func (c Config[S]) Validate() error {
	c = c.withDefaults()
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case len(c.Brokers) == 0:
		return bad("Brokers", "at least one broker is required")
	case c.Topic == "":
		return bad("Topic", "required")
	case c.Group == "":
		return bad("Group", "required")
	case c.NewState == nil:
		return bad("NewState", "required")
	case c.Process == nil:
		return bad("Process", "required")
	case c.CheckpointInterval < 0:
		return bad("CheckpointInterval", "%v is negative", c.CheckpointInterval)
	case c.MaterializeInterval < 0:
		return bad("MaterializeInterval", "%v is negative", c.MaterializeInterval)
	case c.CommitTimeout < 0:
		return bad("CommitTimeout", "%v is negative", c.CommitTimeout)
	case c.Grace < 4*c.CheckpointInterval:
		return bad("Grace", "%v is below four checkpoint intervals (%v)", c.Grace, 4*c.CheckpointInterval)
	case c.MaxPollRecords < 0:
		return bad("MaxPollRecords", "%d is negative", c.MaxPollRecords)
	case c.RestoreAttempts < 0:
		return bad("RestoreAttempts", "%d is negative", c.RestoreAttempts)
	}
	for i, b := range c.Brokers {
		if b == "" {
			return bad("Brokers", "broker %d is empty", i)
		}
	}
	return nil
}

// commitBound returns the longest time after its record's put at which a
// commit that Kafka accepts can land: the longest of the group's session
// and rebalance timeouts and the transaction timeout (0 without
// transactions), plus the commit timeout. See docs/KAFKA.md, "Deletion
// rule".
func commitBound(session, rebalance, txn, commit time.Duration) time.Duration {
	return max(session, rebalance, txn) + commit
}

// checkGrace checks that the grace is at least twice the commit bound.
func checkGrace(grace, session, rebalance, txn, commit time.Duration) error {
	if b := commitBound(session, rebalance, txn, commit); grace < 2*b {
		return fmt.Errorf("%w: Grace: %v is below twice the longest a commit can land after its record's put (%v: the longest of the session timeout %v, the rebalance timeout %v and the transaction timeout %v, plus CommitTimeout %v)",
			ErrConfig, grace, b, session, rebalance, txn, commit)
	}
	return nil
}

// StoreOptions returns the options every store of a partition's state is
// made with: each partition is one key group of its own (maximum
// parallelism 1), so that every key of the partition belongs to it,
// whatever partitioner the producers use.
func StoreOptions() []statestore.Option {
	return []statestore.Option{statestore.WithMaxParallelism(1), statestore.WithKeyGroups(partitionKeyGroups)}
}

// partitionKeyGroups is the key-group range of a partition's stores.
var partitionKeyGroups = dstl.KeyGroupRange{Start: 0, End: 0}
