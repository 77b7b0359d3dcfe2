package statestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// Defaults of Config.
const (
	DefaultMaterializeSize     = 16 << 20
	DefaultMaterializeInterval = 10 * time.Minute
	// DefaultRetain is the number of completed checkpoints whose objects
	// a collecting checkpointer keeps: the latest one, as the catalog's
	// default and Flink's (state.checkpoints.num-retained). A restore
	// takes one handle, the latest the program kept, and the snapshots of
	// older checkpoints were never kept: one is what the checkpointer
	// always retained.
	DefaultRetain = 1
	// DefaultGrace is the age below which a collecting checkpointer
	// deletes no object: an hour. The checkpointer knows what its own
	// checkpoints refer to and holds what a checkpoint in progress may
	// refer to; the grace covers what it cannot know, such as an earlier
	// process of the same job that is still running after its
	// replacement started (its last uploads), while keeping the objects
	// left within a listing page for checkpoints every few seconds.
	DefaultGrace = time.Hour
	// DefaultCollectInterval is the least time between two collections
	// that completed checkpoints start.
	DefaultCollectInterval = time.Minute
)

// NoGrace is the value of Config.Grace for no grace period at all: an
// object that nothing the checkpointer keeps refers to is deleted however
// young. For tests, and for a job that no other process writes to. It is
// collect.NoGrace.
const NoGrace = collect.NoGrace

// Config configures a Checkpointer.
type Config struct {
	// Operator names the operator instance: the writer's name and a
	// segment of its snapshot objects' names ("JOB/statestore/OPERATOR/"),
	// so it must be unique in the job and a valid object-name segment
	// (no "/"). Required.
	Operator string
	// KeyGroups is the range of key groups the instance owns.
	KeyGroups dstl.KeyGroupRange
	// MaxParallelism is the number of key groups, the same in every run of
	// the job. Default DefaultMaxParallelism.
	MaxParallelism int
	// MaterializeSize: once the changes logged since the last snapshot
	// reach this many bytes, the stores are materialised. Default
	// DefaultMaterializeSize; negative: never by size.
	MaterializeSize int64
	// MaterializeInterval: once the oldest change logged since the last
	// snapshot (appended by a flush or a checkpoint, or replayed by the
	// restore) is this old, the stores are materialised. A store idle for
	// long is thus not materialised right after its next change. Default
	// DefaultMaterializeInterval (Flink's periodic materialisation
	// interval); negative: never by age.
	MaterializeInterval time.Duration
	// Logger receives the background materialisation's errors. Default
	// slog.Default().
	Logger *slog.Logger
	// KeepSnapshots is the switch between the two ways the objects that
	// checkpoints no longer need are deleted.
	//
	// Unset (the default), the checkpointer collects: it keeps the
	// objects of its last Retain completed checkpoints and, after
	// NotifyCheckpointComplete (at most once per CollectInterval), deletes
	// through package collect every log object of its storage's job and
	// every snapshot object of its operator that none of them, no pending
	// checkpoint and not the current state refers to, once older than
	// Grace and unless made for a checkpoint that may still complete (see
	// Checkpointer.Collect). Its storage's job ID (dstl.Config.JobID) is
	// then its own: no other checkpointer or writer, in this process or
	// another, writes under it, but those that share its storage and say
	// so with SharedStorage.
	//
	// Set, the job deletes the objects (for instance by the deletion rule
	// of package catalog, from the checkpoints it retains): the
	// checkpointer deletes no object on the backend, neither snapshots
	// nor logs. Set it whenever a checkpoint may complete without this
	// checkpointer learning it: with several processes committing to a
	// shared catalog, a process that a newer one replaced (a stalled one,
	// fenced) would otherwise delete a snapshot that the newer one
	// restores. Packages job and kafkastate set it. Local copies of the
	// snapshots the checkpointer no longer needs are deleted all the
	// same: they are this process's own.
	KeepSnapshots bool
	// SharedStorage says that other checkpointers restore from the same
	// dstl.Storage: InitializeState then leaves the log's local copies
	// alone, since those it does not restore may be another's, and the
	// storage's owner calls Storage.CleanLocalCopies once, with the log
	// handles of every checkpointer's restore (CheckpointHandle.LogHandles).
	// Package job does so. A collecting checkpointer (KeepSnapshots
	// unset) then deletes snapshot objects of its operator only, never
	// log objects, which hold the other checkpointers' changes too.
	// Default false: InitializeState cleans them, and a collection fails,
	// deleting nothing, while the storage has other open writers than
	// this checkpointer's. Local snapshot copies are each checkpointer's
	// own and are cleaned either way.
	SharedStorage bool
	// Retain is the number of completed checkpoints, the latest, whose
	// objects a collecting checkpointer (KeepSnapshots unset) keeps.
	// After a restore, the restored checkpoint is the only one it keeps
	// until others complete. Default DefaultRetain; negative is an error.
	Retain int
	// Grace is the age, by the storage's clock and by the time in its
	// name, below which a collecting checkpointer deletes no object
	// (collect.Options.Grace). The default is an hour ([DefaultGrace]);
	// [NoGrace] is none. Another negative value is not valid.
	Grace time.Duration
	// CollectInterval is the least time between two collections that
	// completed checkpoints start in the background: a collection lists
	// the job's objects and puts and deletes a small object that reads
	// the storage's clock. Default DefaultCollectInterval; negative: none
	// in the background, only those the program starts with
	// Checkpointer.Collect.
	CollectInterval time.Duration
	// Dir, when set, keeps the stores' entries on local disk instead of in
	// memory: the registered stores write to a Pebble database in
	// Dir/OPERATOR, the instance's working directory, which NewCheckpointer
	// empties (what an earlier run or a crash left there is not state: the
	// state is what InitializeState restores), so state may be larger than
	// memory. Materialisations are then incremental: each uploads the keys
	// changed since the previous one and a slice of the rest, and names the
	// files that still hold the state. Default "": in memory.
	Dir string
	// DirCacheSize is the size in bytes of the block cache of the
	// Pebble database of Config.Dir, one per checkpointer, which keeps
	// read blocks (index, filters, hot data) in memory; it counts towards
	// the process's memory. Default 64 MiB; at least 1 MiB is taken;
	// negative is an error (also without Dir).
	DirCacheSize int64
}

// CheckpointInfo tells a checkpoint function where it is.
type CheckpointInfo struct {
	OperatorID string // the operator
	TaskID     int    // the instance (subtask) of the operator
	// CheckpointID is the checkpoint being taken (SnapshotState) or the
	// one being restored (InitializeState; 0 on a first start).
	CheckpointID int64
	// LastCompletedCheckpointID is the last checkpoint that completed
	// (0: none).
	LastCompletedCheckpointID int64
}

// CheckpointFunction is what a processor calls to checkpoint and restore an
// operator's state (after rlink's CheckpointFunction): InitializeState once
// at start, with the handles of the checkpoint restored (none on a first
// start), and SnapshotState at every checkpoint barrier.
type CheckpointFunction interface {
	InitializeState(ctx context.Context, info CheckpointInfo, handles ...*CheckpointHandle) error
	SnapshotState(ctx context.Context, info CheckpointInfo) (*CheckpointHandle, error)
}

// CheckpointListener learns the fate of the checkpoints it took part in.
type CheckpointListener interface {
	NotifyCheckpointComplete(ctx context.Context, checkpointID int64) error
	NotifyCheckpointAborted(ctx context.Context, checkpointID int64) error
}

// Stats counts what a Checkpointer did.
type Stats struct {
	Materializations    int64 // snapshots written
	MaterializeFailures int64 // attempts that failed
	SnapshotBytes       int64 // size of the last snapshot object
	SnapshotsDeleted    int64 // snapshot objects deleted once unreferenced (none with Config.KeepSnapshots)
	// Collections counts the collections that ran (Checkpointer.Collect,
	// in the background or called), CollectFailures those of them that
	// failed, and CollectedObjects the objects they deleted.
	Collections, CollectFailures, CollectedObjects int64
	// LogBytes is the size of the changes logged since the last snapshot.
	LogBytes int64
	// LastMaterialization is what the last successful materialisation did.
	LastMaterialization MaterializeReport
	// LastRestore is what InitializeState did.
	LastRestore RestoreReport
}

// MaterializeReport says what a materialisation wrote.
type MaterializeReport struct {
	// UploadedBytes is what it put on the storage's backend: the snapshot
	// object and, for disk-backed stores, the new files.
	UploadedBytes int64
	// Files is the number of objects it put.
	Files int
	// ChangedKeys and ChangedBytes (keys and values) are what changed
	// since the previous materialisation, for disk-backed stores, whose
	// materialisations write what changed and a slice of the rest; an
	// in-memory store's materialisation writes the whole state.
	ChangedKeys  int64
	ChangedBytes int64
	Duration     time.Duration
}

// RestoreReport says what a restore read.
type RestoreReport struct {
	Snapshots      int   // snapshot objects loaded
	LocalSnapshots int   // of which from local copies
	SnapshotBytes  int64 // their size, with the files of disk-backed snapshots
	// SnapshotFiles is the number of files of disk-backed snapshots
	// loaded, and LocalSnapshotFiles those of them taken from local copies
	// (local recovery) rather than fetched.
	SnapshotFiles, LocalSnapshotFiles int
	Changes                           int64 // log changes applied (metadata included)
	// Log sums the reports of the log handles read (where each change set
	// came from).
	Log      dstl.ReadReport
	Duration time.Duration
}

// Checkpointer is the checkpoint function of an operator instance's state
// stores. It owns a writer of the storage, which the stores log to; at each
// checkpoint it flushes the stores and persists the log since the last
// materialised snapshot; in the background, once that log is large or old
// enough, it writes a snapshot of every store as one object through the
// storage's backend and truncates the log before it. A checkpoint's handle
// names the snapshot and the log since it; InitializeState loads the one
// and replays the other.
//
// By default the checkpointer deletes the objects its checkpoints no
// longer need: the snapshot objects it wrote once neither its last
// Config.Retain completed checkpoints, nor a pending one, nor the current
// state refers to them, and, through package collect, after completed
// checkpoints, every other log and snapshot object of its job that none
// of them refers to once older than Config.Grace (see Collect), which is
// how a restarted process deletes what a crashed one left. With
// Config.KeepSnapshots the job deletes them instead (a checkpoint catalog,
// package job): log objects of completed checkpoints belong to the
// checkpoint owner (see dstl.Writer.Confirm).
//
// The stores' changes and the checkpointer's calls may come from several
// goroutines; a checkpoint or a materialisation cuts every store at one
// point of the log.
type Checkpointer struct {
	storage  *dstl.Storage
	w        *dstl.Writer
	cfg      Config
	log      *slog.Logger
	prefix   string        // of snapshot objects
	localDir string        // of local snapshot copies; "" without local recovery
	disk     *diskstate.DB // with Config.Dir; nil: stores in memory

	logBytes atomic.Int64
	// firstLogged is when the oldest change since the last snapshot was
	// logged (Unix nanoseconds; 0: none).
	firstLogged atomic.Int64
	trigger     chan struct{}
	matMu       sync.Mutex // one materialisation at a time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	grace          time.Duration // of collections: Config.Grace, its default filled in (NoGrace stays, as collect takes it)
	collectTrigger chan struct{} // wakes the background collection
	collectMu      sync.Mutex    // one collection at a time

	// mu guards what follows. Lock order: mu, then the stores' locks in
	// registration order.
	mu         sync.Mutex
	closed     bool
	restoring  bool
	restoreErr error // of the last InitializeState, until one succeeds
	stores     []internalStore
	byName     map[string]internalStore
	// replayName and replayStore are the store that the last change a
	// restore replayed named (replayChange), and replayer the same store
	// if it is one; only the restore, which holds matMu, uses them.
	replayName    string
	replayStore   internalStore
	replayer      replayer
	from          dstl.SequenceNumber // first change set since the snapshot
	current       []SnapshotRef       // snapshots the state starts from
	restoredLogs  []LogRef            // logs the state also needs (after a restore)
	mergedRestore bool                // restored from several handles: materialise before the next checkpoint
	// materializing is the checkpoint the running materialisation's
	// objects are made for; 0 when none runs.
	materializing int64
	pending       map[int64]*pendingCheckpoint
	// retained are the completed checkpoints whose objects are kept, the
	// oldest first: the last Config.Retain of them when collecting, else
	// the latest; after a restore, the restored one.
	retained []*pendingCheckpoint
	// collectKeep is what the running collection keeps (nil when none
	// runs): the checkpointer's own deletions wait for its end.
	collectKeep *collect.Keep
	owned       map[string]bool // objects this checkpointer wrote (snapshots and their files)
	// sharedLocal are the objects, restored but not owned (another
	// instance's, after a rescale), of which the restore made local
	// copies: their local copies go once nothing references them.
	sharedLocal map[string]bool
	// diskManifest is the manifest of the disk-backed snapshot that the
	// current state extends: the next materialisation writes what changed
	// since it. nil: the next one writes the whole state.
	diskManifest  *diskstate.Manifest
	persisting    int
	truncateTo    dstl.SequenceNumber
	truncated     dstl.SequenceNumber
	lastCompleted int64
	// lastCollect is when the last collection began; wantCollect says
	// that a completed checkpoint asked for one that has not begun (it
	// waits for the uploads of pending checkpoints).
	lastCollect time.Time
	wantCollect bool
	stats       Stats
}

var (
	_ CheckpointFunction = (*Checkpointer)(nil)
	_ CheckpointListener = (*Checkpointer)(nil)
)

type pendingCheckpoint struct {
	id        int64
	from, to  dstl.SequenceNumber
	done      bool // the persist resolved: from, to and objects are known
	snapshots []SnapshotRef
	// objects are the objects on the backend that the checkpoint's handle
	// refers to (CheckpointHandle.Objects), once done.
	objects []string
	// outcome is what a notification said before the persist resolved:
	// SnapshotState passes it on to the log once it has from and to.
	outcome checkpointOutcome
}

type checkpointOutcome int

const (
	outcomePending checkpointOutcome = iota
	outcomeCompleted
	outcomeAborted
	outcomeSubsumed // a later checkpoint completed first
)

// NewCheckpointer opens a writer for cfg.Operator on storage and starts the
// background materialisation. Register the stores, made with the writer of
// Log, then call InitializeState.
func NewCheckpointer(storage *dstl.Storage, cfg Config) (*Checkpointer, error) {
	if cfg.MaxParallelism == 0 {
		cfg.MaxParallelism = DefaultMaxParallelism
	}
	if cfg.MaterializeSize == 0 {
		cfg.MaterializeSize = DefaultMaterializeSize
	}
	if cfg.MaterializeInterval == 0 {
		cfg.MaterializeInterval = DefaultMaterializeInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DirCacheSize == 0 {
		cfg.DirCacheSize = diskstate.DefaultCacheSize
	}
	if cfg.DirCacheSize < 0 {
		return nil, fmt.Errorf("statestore: Config.DirCacheSize %d: want 0 (the default, 64 MiB) or more", cfg.DirCacheSize)
	}
	if cfg.Retain == 0 {
		cfg.Retain = DefaultRetain
	}
	if cfg.Retain < 0 {
		return nil, fmt.Errorf("statestore: Config.Retain %d: want 0 (the default, %d) or more", cfg.Retain, DefaultRetain)
	}
	grace := cfg.Grace
	switch {
	case grace == 0:
		grace = DefaultGrace
	case grace < 0 && grace != NoGrace:
		return nil, fmt.Errorf("statestore: Config.Grace %v: want 0 (the default, %v), NoGrace or more", cfg.Grace, DefaultGrace)
	}
	if cfg.CollectInterval == 0 {
		cfg.CollectInterval = DefaultCollectInterval
	}
	if cfg.Operator == "" || strings.Contains(cfg.Operator, "/") || backends.CheckObjectName(cfg.Operator) != nil {
		return nil, fmt.Errorf("statestore: operator %q: must be a non-empty object-name segment without \"/\"", cfg.Operator)
	}
	if cfg.MaxParallelism < 1 || cfg.MaxParallelism > dstl.MaxKeyGroup+1 {
		return nil, fmt.Errorf("statestore: max parallelism %d not in [1, %d]", cfg.MaxParallelism, dstl.MaxKeyGroup+1)
	}
	if err := cfg.KeyGroups.Validate(); err != nil || cfg.KeyGroups.End >= cfg.MaxParallelism {
		return nil, fmt.Errorf("statestore: key groups %v do not fit max parallelism %d", cfg.KeyGroups, cfg.MaxParallelism)
	}
	var disk *diskstate.DB
	if cfg.Dir != "" {
		var err error
		if disk, err = diskstate.OpenCache(filepath.Join(cfg.Dir, cfg.Operator), cfg.Logger, cfg.DirCacheSize); err != nil {
			return nil, fmt.Errorf("statestore: Config.Dir: %w", err)
		}
	}
	w, err := storage.NewWriter(cfg.Operator, cfg.KeyGroups)
	if err != nil {
		if disk != nil {
			_ = disk.Close()
		}
		return nil, err
	}
	scfg := storage.Config()
	c := &Checkpointer{
		storage: storage, w: w, cfg: cfg, log: cfg.Logger, disk: disk,
		prefix:  objname.SnapshotPrefix(objname.JobPrefix(scfg.JobID), cfg.Operator),
		trigger: make(chan struct{}, 1),
		byName:  map[string]internalStore{},
		pending: map[int64]*pendingCheckpoint{},
		owned:   map[string]bool{},

		sharedLocal: map[string]bool{},

		grace:          grace,
		collectTrigger: make(chan struct{}, 1),
	}
	if scfg.LocalRecoveryEnabled {
		c.localDir = scfg.LocalRecoveryDir
	}
	c.from = w.InitialSequenceNumber()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(1)
	go c.run()
	if c.collecting() && cfg.CollectInterval > 0 {
		c.wg.Add(1)
		go c.collector()
	}
	return c, nil
}

// Log returns the writer the operator's stores log to.
func (c *Checkpointer) Log() *dstl.Writer { return c.w }

// KeyGroups returns the operator instance's key groups.
func (c *Checkpointer) KeyGroups() dstl.KeyGroupRange { return c.cfg.KeyGroups }

// MaxParallelism returns the number of key groups.
func (c *Checkpointer) MaxParallelism() int { return c.cfg.MaxParallelism }

// Register adds stores made by this package with the checkpointer's log,
// key groups and maximum parallelism, under names unique in the operator.
func (c *Checkpointer) Register(stores ...Store) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	for _, st := range stores {
		s, ok := st.(internalStore)
		switch {
		case !ok:
			return fmt.Errorf("statestore: store %q: a %T is not a store of this package", st.Name(), st)
		case s.Log() != c.w:
			return fmt.Errorf("statestore: store %q: logs to another writer than the checkpointer's", s.Name())
		case s.KeyGroups() != c.cfg.KeyGroups || s.MaxParallelism() != c.cfg.MaxParallelism:
			return fmt.Errorf("statestore: store %q: key groups %v of %d, the checkpointer's are %v of %d",
				s.Name(), s.KeyGroups(), s.MaxParallelism(), c.cfg.KeyGroups, c.cfg.MaxParallelism)
		case c.byName[s.Name()] != nil:
			return fmt.Errorf("statestore: store %q registered twice", s.Name())
		}
		if c.disk != nil {
			if err := s.attachDisk(c.disk); err != nil {
				return err
			}
		}
		b := s.base()
		b.mu.Lock()
		b.onFlush = c.logged
		b.mu.Unlock()
		c.stores = append(c.stores, s)
		c.byName[s.Name()] = s
	}
	return nil
}

// logged counts bytes appended by the stores and wakes the materialiser
// when they pass the size.
func (c *Checkpointer) logged(n int64) {
	if n > 0 {
		c.firstLogged.CompareAndSwap(0, time.Now().UnixNano())
	}
	if t := c.logBytes.Add(n); c.cfg.MaterializeSize > 0 && t >= c.cfg.MaterializeSize {
		select {
		case c.trigger <- struct{}{}:
		default:
		}
	}
}

func (c *Checkpointer) lockStores() {
	for _, s := range c.stores {
		s.base().mu.Lock()
	}
}

func (c *Checkpointer) unlockStores() {
	for _, s := range c.stores {
		s.base().mu.Unlock()
	}
}

// flushLocked flushes every store; the caller holds mu and the stores' locks.
func (c *Checkpointer) flushLocked(ctx context.Context) error {
	for _, s := range c.stores {
		if _, err := s.base().flushLocked(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Flush appends every store's buffered changes to the log. Calling it now
// and then bounds the memory the buffers take between checkpoints.
func (c *Checkpointer) Flush(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.lockStores()
	defer c.unlockStores()
	return c.flushLocked(ctx)
}

// HoldFrom returns the lowest checkpoint that the objects a later
// checkpoint of this checkpointer may reference were made for (see
// dstl.Writer.SetNextCheckpoint): the log's next checkpoint, or, when
// lower, the one the running materialisation's objects are made for, or
// the lowest one that an object of the current snapshot was made for,
// among those that the latest completed checkpoint does not name (a
// snapshot written since, with the files it shares with another such
// snapshot). A job's checkpoint catalog keeps every object made for it or
// a later checkpoint, however old, while this checkpointer's latest
// checkpoint is the instance's; give it with each checkpoint's commit,
// reading it after SnapshotState returns.
func (c *Checkpointer) HoldFrom() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holdFromLocked()
}

// holdFromLocked is HoldFrom with c.mu held.
func (c *Checkpointer) holdFromLocked() int64 {
	h := c.w.NextCheckpoint()
	if c.materializing > 0 {
		h = min(h, c.materializing)
	}
	// A snapshot written while a checkpoint uploads is named first by a
	// later checkpoint; until one that names it completes, the commits
	// hold it.
	var named []string // sorted
	if k := len(c.retained); k > 0 {
		named = c.retained[k-1].objects
	}
	prefix := objname.JobPrefix(c.storage.Config().JobID)
	hold := func(name string) {
		if _, ok := slices.BinarySearch(named, name); !ok {
			if n := objname.Parse(prefix, name).Checkpoint; n > 0 {
				h = min(h, n)
			}
		}
	}
	for _, s := range c.current {
		hold(s.Object)
		for _, f := range s.Files {
			hold(f)
		}
	}
	return h
}

// SnapshotState takes checkpoint info.CheckpointID: it flushes every store,
// persists the log since the last snapshot and waits for the upload. The
// handle names the snapshot and the log; keep it with the checkpoint and
// pass it to InitializeState after a failure. Then call
// NotifyCheckpointComplete or NotifyCheckpointAborted.
//
// The first checkpoint after a restore from several handles (a rescale that
// merged instances) materialises first, so that its handle names one
// snapshot of the merged state rather than the several restored ones.
func (c *Checkpointer) SnapshotState(ctx context.Context, info CheckpointInfo) (*CheckpointHandle, error) {
	id := info.CheckpointID
	c.mu.Lock()
	merged := c.mergedRestore && !c.closed && c.restoreErr == nil
	c.mu.Unlock()
	if merged {
		if err := c.Materialize(ctx); err != nil {
			return nil, fmt.Errorf("statestore: checkpoint %d: materialise the merged restore: %w", id, err)
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if c.restoreErr != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("statestore: checkpoint %d: %w: %v", id, ErrRestoreFailed, c.restoreErr)
	}
	if c.pending[id] != nil || id <= c.lastCompleted {
		c.mu.Unlock()
		return nil, fmt.Errorf("statestore: checkpoint %d: taken already, or not newer than completed checkpoint %d", id, c.lastCompleted)
	}
	c.lockStores()
	err := c.flushLocked(ctx)
	var fut *dstl.Future
	if err == nil {
		fut, err = c.w.Persist(ctx, c.from, id)
	}
	c.unlockStores()
	if err != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("statestore: checkpoint %d: %w", id, err)
	}
	p := &pendingCheckpoint{id: id, from: c.from, snapshots: c.current}
	c.pending[id] = p
	c.persisting++
	h := &CheckpointHandle{CheckpointID: id, Operator: c.cfg.Operator, KeyGroups: c.cfg.KeyGroups, MaxParallelism: c.cfg.MaxParallelism,
		Snapshots: append([]SnapshotRef(nil), c.current...), Logs: append([]LogRef(nil), c.restoredLogs...)}
	c.mu.Unlock()

	res, err := fut.Wait(ctx)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.persisting--
	c.truncateLocked()
	if err != nil {
		if p.outcome == outcomePending {
			delete(c.pending, id)
		}
		return nil, fmt.Errorf("statestore: checkpoint %d: %w", id, err)
	}
	h.Logs = append(h.Logs, LogRef{Remote: res.Remote, Local: res.Local})
	p.from, p.to, p.objects, p.done = res.From, res.To, h.Objects(), true
	// A collection that waited for this upload may begin.
	c.kickCollectLocked()
	// A notification that came while the upload ran is passed on now.
	if err := c.tellLog(p, p.outcome); err != nil {
		return nil, fmt.Errorf("statestore: checkpoint %d: %w", id, err)
	}
	return h, nil
}

// tellLog passes outcome, if completed or aborted, on to the log for p,
// whose upload is done (dstl.Writer.Confirm or Reset).
func (c *Checkpointer) tellLog(p *pendingCheckpoint, outcome checkpointOutcome) error {
	switch outcome {
	case outcomeCompleted:
		return c.w.Confirm(p.from, p.to, p.id)
	case outcomeAborted:
		return c.w.Reset(p.from, p.to, p.id)
	}
	return nil
}

// NotifyCheckpointComplete tells the log that the checkpoint completed
// (dstl.Writer.Confirm) and deletes the snapshot objects that no retained
// checkpoint references any more (with Config.KeepSnapshots, only their
// local copies). Older pending checkpoints are subsumed. Unless
// Config.KeepSnapshots is set, it then starts a collection in the
// background (see Collect), if none began within Config.CollectInterval.
// It may come while the checkpoint's SnapshotState still waits for its
// upload: the log learns it when the upload is done (and nothing, if the
// upload fails: the checkpoint could not have completed).
func (c *Checkpointer) NotifyCheckpointComplete(ctx context.Context, checkpointID int64) error {
	return c.notify(ctx, checkpointID, outcomeCompleted, func(p *pendingCheckpoint) {
		c.lastCompleted = checkpointID
		c.retainLocked(p)
		for id, q := range c.pending {
			if id <= checkpointID {
				if id < checkpointID {
					q.outcome = outcomeSubsumed
				}
				delete(c.pending, id)
			}
		}
		if c.collecting() && c.cfg.CollectInterval > 0 && time.Since(c.lastCollect) >= c.cfg.CollectInterval {
			c.wantCollect = true
			c.kickCollectLocked()
		}
	})
}

// NotifyCheckpointAborted tells the log that the checkpoint was aborted
// (dstl.Writer.Reset) and deletes the snapshot objects only it referenced
// (with Config.KeepSnapshots, only their local copies).
// Like NotifyCheckpointComplete, it may come while SnapshotState still
// waits for the upload.
func (c *Checkpointer) NotifyCheckpointAborted(ctx context.Context, checkpointID int64) error {
	return c.notify(ctx, checkpointID, outcomeAborted, func(*pendingCheckpoint) {
		delete(c.pending, checkpointID)
	})
}

// notify is NotifyCheckpointComplete and NotifyCheckpointAborted: it passes
// outcome on to the log if the checkpoint's upload is done (else the upload
// does when done), records it, calls settle with c.mu held, then deletes the
// snapshot objects no retained checkpoint references any more.
func (c *Checkpointer) notify(ctx context.Context, checkpointID int64, outcome checkpointOutcome, settle func(p *pendingCheckpoint)) error {
	c.mu.Lock()
	p := c.pending[checkpointID]
	if p == nil {
		c.mu.Unlock()
		return fmt.Errorf("%w: %d", ErrUnknownCheckpoint, checkpointID)
	}
	if p.done {
		if err := c.tellLog(p, outcome); err != nil {
			c.mu.Unlock()
			word := "completed"
			if outcome == outcomeAborted {
				word = "aborted"
			}
			return fmt.Errorf("statestore: checkpoint %d %s: %w", checkpointID, word, err)
		}
	}
	p.outcome = outcome
	settle(p)
	doomed := c.unreferencedLocked()
	c.mu.Unlock()
	return c.deleteSnapshots(ctx, doomed)
}

// truncateLocked truncates the log to the last snapshot's start unless a
// persist is running (which a truncation would fail): then the last one to
// finish does it.
func (c *Checkpointer) truncateLocked() {
	if c.persisting > 0 || c.truncateTo <= c.truncated {
		return
	}
	if err := c.w.Truncate(c.truncateTo); err != nil {
		c.log.Warn("statestore: truncate the log", "operator", c.cfg.Operator, "to", c.truncateTo, "err", err)
		return
	}
	c.truncated = c.truncateTo
}

// unreferenced is what nothing references any more: objects of the
// checkpointer's to delete, with their local copies, and local copies of
// other instances' objects to remove.
type unreferenced struct {
	doomed, localOnly []string
}

// unreferencedLocked removes from owned and sharedLocal, and returns, the
// objects that neither the current state, nor a retained completed
// checkpoint, nor a pending one references, nor the running collection
// keeps.
func (c *Checkpointer) unreferencedLocked() unreferenced {
	ref := map[string]bool{}
	add := func(refs []SnapshotRef) {
		for _, s := range refs {
			ref[s.Object] = true
			for _, f := range s.Files {
				ref[f] = true
			}
		}
	}
	add(c.current)
	for _, r := range c.retained {
		add(r.snapshots)
	}
	for _, p := range c.pending {
		add(p.snapshots)
	}
	var u unreferenced
	for name := range c.owned {
		if !ref[name] && !c.collectKeep.Has(name) {
			u.doomed = append(u.doomed, name)
			delete(c.owned, name)
		}
	}
	for name := range c.sharedLocal {
		if !ref[name] {
			// Not ours to delete; our local copy is.
			u.localOnly = append(u.localOnly, name)
			delete(c.sharedLocal, name)
		}
	}
	return u
}

// deleteSnapshots deletes snapshot objects that nothing references any
// more, with their local copies; with Config.KeepSnapshots only the local
// copies.
func (c *Checkpointer) deleteSnapshots(ctx context.Context, u unreferenced) error {
	for _, name := range u.localOnly {
		c.removeLocalCopy(name)
	}
	var errs []error
	for _, name := range u.doomed {
		if c.cfg.KeepSnapshots {
			c.removeLocalCopy(name)
			continue
		}
		if err := c.storage.Backend().Delete(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("statestore: delete snapshot: %w", err))
			continue
		}
		c.removeLocalCopy(name)
		c.mu.Lock()
		c.stats.SnapshotsDeleted++
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Stats returns what the checkpointer did so far.
func (c *Checkpointer) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.LogBytes = c.logBytes.Load()
	return s
}

// Close stops the background materialisation and collection (cancelling
// those that run), closes the stores and the writer. Snapshot objects
// stay: a restart needs those the last completed checkpoint names.
func (c *Checkpointer) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	stores := c.stores
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	// A materialisation or a restore that a program runs ends (its context
	// is cancelled with c.ctx) before the stores and their database close.
	c.matMu.Lock()
	defer c.matMu.Unlock()
	for _, s := range stores {
		_ = s.Close()
	}
	err := c.w.Close()
	if c.disk != nil {
		err = errors.Join(err, c.disk.Close())
	}
	return err
}
