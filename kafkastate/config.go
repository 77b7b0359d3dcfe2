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
	DefaultJoinAttempts        = 5
	DefaultMaxPollRecords      = 10000
)

// ErrConfig is wrapped by every error of Config.Validate; the error names
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

// Config configures a Service. The zero values of the optional fields take
// the defaults of this package.
type Config[S any] struct {
	// Brokers are the seed brokers ("host:port"). Required.
	Brokers []string
	// Topic is the input topic; its partitions are the unit of work and
	// of state. Required.
	Topic string
	// Group is the consumer group. Required.
	Group string
	// NewState makes a partition's state. Required.
	NewState NewStateFunc[S]
	// Process processes one record. Required.
	Process ProcessFunc[S]
	// DeadLetter, when set, takes the records that Process rejects, which
	// are then skipped; nil stops the service at the first rejected record
	// with a *RecordError naming topic, partition and offset.
	DeadLetter DeadLetterFunc
	// CheckpointInterval is the time between two checkpoints of every
	// partition. Default DefaultCheckpointInterval.
	CheckpointInterval time.Duration
	// MaterializeInterval is the statestore materialisation interval of
	// each partition's stores. Default DefaultMaterializeInterval.
	MaterializeInterval time.Duration
	// Grace is the catalog's grace (catalog.Config.Grace): the age before
	// an object no retained checkpoint names is deleted. It must be at
	// least four checkpoint intervals. Default DefaultGrace.
	Grace time.Duration
	// CollectInterval is the time between two runs of the catalog's
	// deletion rule, by the process that owns partition 0; negative: never.
	// Default DefaultCollectInterval.
	CollectInterval time.Duration
	// MaxPollRecords bounds the records processed between two looks at
	// the checkpoint clock (and two chances of a rebalance). Default
	// DefaultMaxPollRecords.
	MaxPollRecords int
	// JoinAttempts is how often joining the catalog for a partition is
	// tried before the service stops with the error. Default
	// DefaultJoinAttempts.
	JoinAttempts int
	// TransactionalID, when set, makes the output (Partition.Produce)
	// exactly-once: each partition's output is kept in its state and
	// produced, after the checkpoint that holds it, in a Kafka
	// transaction that also commits the partition's offset to the group,
	// by a transactional producer of id TransactionalID-TOPIC-PARTITION;
	// the group's committed offsets then mark which output Kafka has.
	// Empty: output is produced at once and flushed before each
	// checkpoint, at least once.
	TransactionalID string
	// Logger receives the service's logs. Default slog.Default().
	Logger *slog.Logger
	// OnEvent, when set, is called for every Event, from the service's
	// goroutines (the polling one, the Kafka client's rebalance callbacks,
	// the checkpoints'), one call at a time: never concurrently, so it
	// needs no lock of its own for what only it touches. It must return
	// quickly.
	OnEvent func(Event)
	// ClientOptions are added to the Kafka clients' options (TLS, SASL,
	// timeouts); the service sets the group, the topic, the balancer and
	// the rebalance callbacks itself.
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
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = DefaultMaxPollRecords
	}
	if c.JoinAttempts == 0 {
		c.JoinAttempts = DefaultJoinAttempts
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks the configuration, with the defaults applied; the error
// wraps ErrConfig and names the field.
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
	case c.Grace < 4*c.CheckpointInterval:
		return bad("Grace", "%v is below four checkpoint intervals (%v)", c.Grace, 4*c.CheckpointInterval)
	case c.MaxPollRecords < 0:
		return bad("MaxPollRecords", "%d is negative", c.MaxPollRecords)
	case c.JoinAttempts < 0:
		return bad("JoinAttempts", "%d is negative", c.JoinAttempts)
	}
	for i, b := range c.Brokers {
		if b == "" {
			return bad("Brokers", "broker %d is empty", i)
		}
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
