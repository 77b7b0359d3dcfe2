package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// Defaults of [Config].
const (
	// DefaultInterval is the time between two checkpoints.
	DefaultInterval = 10 * time.Second
	// DefaultIdleWait is how long the runner waits when no task had input.
	DefaultIdleWait = 10 * time.Millisecond
)

// ErrFenced is wrapped by a Coordinator's error when a newer generation
// of the job (or a rebalance) took this process's instances: the runner
// drops them and joins again. catalog.ErrFenced is one.
var ErrFenced = catalog.ErrFenced

// Config configures [Run]. The zero value of every field is its default.
type Config struct {
	// Operator names the instances' state: instance i's checkpointer is
	// operator "OPERATOR-i" (a segment of its snapshot objects' names).
	// Default "job".
	Operator string
	// Interval is the time between two checkpoints. Default
	// DefaultInterval.
	Interval time.Duration
	// CollectInterval is the time between two applications of the
	// deletion rule by the process that applies it (the coordinator
	// says which). Default five intervals; negative: never.
	CollectInterval time.Duration
	// StopTimeout bounds the last checkpoint, its commit and the
	// confirmations when Run's context ends. Default one interval.
	StopTimeout time.Duration
	// IdleWait is how long the runner waits when no task had input.
	// Default DefaultIdleWait.
	IdleWait time.Duration
	// State configures every instance's checkpointer; Operator, KeyGroups
	// and MaxParallelism are the runner's, and KeepSnapshots is always
	// set (the coordinator's deletion rule deletes snapshots).
	State statestore.Config
	// Logger receives the runner's logs. Default slog.Default().
	Logger *slog.Logger
	// OnEvent, when set, is told what the runner does (see [Event]), from
	// Run's goroutine, one call at a time. It must return quickly.
	OnEvent func(Event)
}

func (c Config) withDefaults() (Config, error) {
	if c.Operator == "" {
		c.Operator = "job"
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.CollectInterval == 0 {
		c.CollectInterval = 5 * c.Interval
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = c.Interval
	}
	if c.IdleWait == 0 {
		c.IdleWait = DefaultIdleWait
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Interval < 0:
		return c, fmt.Errorf("job: interval %v is negative", c.Interval)
	case c.StopTimeout < 0 || c.IdleWait < 0:
		return c, fmt.Errorf("job: stop timeout %v, idle wait %v: want 0 (the default) or more", c.StopTimeout, c.IdleWait)
	}
	return c, nil
}

// Instance is one instance of the job that this process runs, as [Open]
// sees it.
type Instance struct {
	// Index is the instance's index in its generation.
	Index int
	// KeyGroups is the instance's key-group range, and MaxParallelism the
	// job's number of key groups.
	KeyGroups      dstl.KeyGroupRange
	MaxParallelism int
	// Generation is the generation (or group epoch) the instance runs in.
	Generation int64
	// Restored holds the metadata of each part the instance restores
	// (its input positions), in key-group order: one part after a
	// restart, several after a rescale that merged instances, none on a
	// first start.
	Restored []map[string]string
	// RestoredKeyGroups holds, for each of Restored, the key groups the
	// instance restores from that part: take from Restored[i] only the
	// positions of these key groups' input. In the independent mode a
	// part may be restored for fewer key groups than its metadata names
	// (see catalog.Restored), and a later part names them too.
	RestoredKeyGroups []dstl.KeyGroupRange
	// Checkpointer is the instance's checkpointer: make the state stores
	// on its log (Checkpointer.Log) and Register them. The runner
	// restores them after Open returns.
	Checkpointer *statestore.Checkpointer
}

// Log returns the writer the instance's state stores log to.
func (in *Instance) Log() *dstl.Writer { return in.Checkpointer.Log() }

// Register registers the instance's state stores with its checkpointer.
func (in *Instance) Register(stores ...statestore.Store) error {
	return in.Checkpointer.Register(stores...)
}

// Task is the user's processing of one instance.
type Task interface {
	// Process processes some of the instance's input, a bounded batch,
	// and returns how many records it processed; 0 when none was ready
	// (then the runner waits IdleWait, unless another task had input).
	// It should not block for long: checkpoints are taken between calls.
	// ctx ends at the runner's next checkpoint. An error stops Run.
	Process(ctx context.Context) (int, error)
	// Metadata returns what checkpoint n, taken now, stores beside the
	// state: the input position after every record processed so far
	// (keys of its own, one per input partition). Restored hands it back.
	// A sink may also start a transaction for n here, which Complete(n)
	// then commits.
	Metadata(checkpoint int64) map[string]string
	// Complete is called, in order, for each checkpoint of the instance
	// that completed, after its state stores were told: publish what the
	// checkpoint covers (commit a sink's transaction). An error stops
	// Run.
	Complete(ctx context.Context, checkpoint int64) error
}

// Open makes the task of an instance: it makes the instance's state
// stores on in's log, registers them, reads the input position from
// in.Restored, and returns the task. It is called once per instance per
// generation; the stores are closed with the instance.
type Open func(ctx context.Context, in *Instance) (Task, error)

// Event is something the runner did, for logs and tests.
type Event struct {
	// Kind says what.
	Kind EventKind
	// Generation is the generation (or group epoch) it happened in.
	Generation int64
	// Instance is the instance, or -1 for the process as a whole.
	Instance int
	// Checkpoint is the checkpoint, where one is concerned; for
	// EventRestored the restored one (0 on a first start).
	Checkpoint int64
	// Err is the error, for EventFenced, EventCommitFailed and
	// EventTakeFailed.
	Err error
}

// EventKind says what an Event is.
type EventKind string

// The kinds of events.
const (
	EventJoined       EventKind = "joined"        // the process joined a generation
	EventRestored     EventKind = "restored"      // an instance restored its state
	EventCommitted    EventKind = "committed"     // the process committed a checkpoint
	EventCommitFailed EventKind = "commit-failed" // a commit failed (the checkpoint stays pending)
	EventTakeFailed   EventKind = "take-failed"   // an instance's snapshot failed, or the stop cut it short: the checkpoint was aborted, the next takes its changes
	EventCompleted    EventKind = "completed"     // an instance's checkpoint completed and was confirmed
	EventFenced       EventKind = "fenced"        // the process was fenced: it drops its instances and joins again
	EventCollected    EventKind = "collected"     // the deletion rule ran
	EventStopped      EventKind = "stopped"       // Run ended
	EventRevoked      EventKind = "revoked"       // an instance was revoked (see Rebalancer): it took part in a last checkpoint and closed
	EventLost         EventKind = "lost"          // an instance was lost (see Rebalancer): it closed without a checkpoint
)

// Coordinator assigns a process its instances and commits their
// checkpoints: [NewCatalog] over a job's checkpoint catalog, or
// kafkastate's over a Kafka consumer group. A coordinator whose instances
// move between processes without a new generation implements
// [Rebalancer] too.
type Coordinator interface {
	// Join joins the job and returns what this process runs: at the
	// start, and again after a commit failed with ErrFenced (then it
	// rejoins). An error stops Run.
	Join(ctx context.Context) (*Assignment, error)
	// Commit commits the process's checkpoint n, one state per instance
	// in the assignment's order, and returns the latest checkpoint it
	// knows complete: the runner confirms each instance's pending
	// checkpoints up to it. An error that wraps ErrFenced makes the runner
	// drop its instances and Join again; another leaves n pending (its
	// outcome is learnt from a later commit).
	Commit(ctx context.Context, n int64, states []catalog.InstanceState) (complete int64, err error)
	// Refresh learns, without a commit, the latest checkpoint complete:
	// for the last checkpoint, when Run stops.
	Refresh(ctx context.Context) (complete int64, err error)
	// Collect applies the deletion rule, when this process applies it
	// (it does nothing otherwise).
	Collect(ctx context.Context) error
}

// Assignment is what a process runs in one generation.
type Assignment struct {
	// Generation is the generation (or group epoch).
	Generation int64
	// Instances are the instances the process runs, with what each
	// restores.
	Instances []Assigned
	// Epoch and FirstCheckpoint number the checkpoints: the one taken at
	// time t is FirstCheckpoint + (t - Epoch) / Interval, so that the
	// processes of a generation, whose clocks agree, take the same
	// checkpoints.
	Epoch           time.Time
	FirstCheckpoint int64
	// CommitDelay is how long after taking a checkpoint the process
	// commits it: the catalog's leader commits half an interval late, so
	// that its commit finds the others' and completes the checkpoint.
	CommitDelay time.Duration
	// Unit is the time one checkpoint number stands for: the checkpoint
	// taken at time t is numbered FirstCheckpoint + (t - Epoch) / Unit,
	// while checkpoints are still taken every interval. Zero: the
	// runner's interval, so that consecutive checkpoints have consecutive
	// numbers. A coordinator whose processes checkpoint at intervals of
	// their own numbers by the clock (kafkastate: milliseconds since the
	// Unix epoch), so that the numbers of all processes compare.
	Unit time.Duration
}

// Rebalancer is implemented by a [Coordinator] whose instances move
// between the processes of one generation without a new generation, as
// the partitions of a Kafka consumer group do in a rebalance. Between two
// steps of its loop (never while a task processes), the runner calls
// Rebalance and applies the change it returns:
//
//   - Lost instances close without a checkpoint (another process may run
//     them already); what they took since their last complete checkpoint
//     is dropped.
//   - If an instance is revoked, the runner commits the checkpoints it
//     took and has not committed yet, takes one more checkpoint of every
//     instance and commits it at once; then the revoked instances close.
//     Their state up to that point is committed before they go, whatever
//     the commit's outcome.
//   - Added instances open and restore, as at a Join.
//
// The other instances keep running: nothing is restored again. Then the
// runner calls the change's Done. An error of Rebalance that wraps
// [ErrFenced] makes the runner drop every instance and Join again; any
// other stops Run.
type Rebalancer interface {
	// Rebalance returns the change of the process's instances since the
	// last call (or the last Join), or nil when there is none. It is
	// called between every two steps of the runner, so it must return at
	// once when there is no change.
	Rebalance(ctx context.Context) (*Change, error)
}

// Change is a change of the instances a process runs, within one
// generation (see [Rebalancer]).
type Change struct {
	// Revoked are the instances that take part in one more checkpoint,
	// committed at once, and then close.
	Revoked []int
	// Lost are the instances that close without a checkpoint.
	Lost []int
	// Added are the instances that open and restore. An added instance
	// that runs already is closed (as lost) and opened again.
	Added []Assigned
	// Done, when set, is called once the change is applied, also when
	// applying it failed.
	Done func()
}

// Assigned is one instance of an Assignment.
type Assigned struct {
	// Index is the instance's index; KeyGroups its key-group range;
	// MaxParallelism the job's number of key groups.
	Index          int
	KeyGroups      dstl.KeyGroupRange
	MaxParallelism int
	// Restore are the parts the instance restores, in key-group order:
	// each part's State a statestore.CheckpointHandle's encoding, of
	// which the instance restores the key groups of the part's KeyGroups
	// (all it holds, or fewer in the catalog's independent mode).
	Restore []*catalog.Part
	// Restored is the checkpoint they belong to (0: none, or several).
	Restored int64
}

// numberAt returns the checkpoint number of time t.
func (a *Assignment) numberAt(t time.Time, interval time.Duration) int64 {
	unit := a.Unit
	if unit <= 0 {
		unit = interval
	}
	k := int64(0)
	if d := t.Sub(a.Epoch); d > 0 {
		k = int64(d / unit)
	}
	if a.FirstCheckpoint > math.MaxInt64-k {
		return math.MaxInt64
	}
	return a.FirstCheckpoint + k
}

// tickAt returns the time of the latest checkpoint at or before t (the
// epoch, before it).
func (a *Assignment) tickAt(t time.Time, interval time.Duration) time.Time {
	d := t.Sub(a.Epoch)
	if d < 0 {
		return a.Epoch
	}
	return a.Epoch.Add(d / interval * interval)
}

// tickAfter returns the time of the first checkpoint after t.
func (a *Assignment) tickAfter(t time.Time, interval time.Duration) time.Time {
	d := t.Sub(a.Epoch)
	if d < 0 {
		return a.Epoch
	}
	return a.Epoch.Add((d/interval + 1) * interval)
}

// errStop ends a generation's loop: Run's context ended.
var errStop = errors.New("job: stop")
