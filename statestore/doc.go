// Package statestore keeps a stream processor's state in stores whose
// every change goes to the durable short-term log of package dstl. A
// Checkpointer takes checkpoints, materialises the stores in the
// background, and restores them. It is the layer a service would otherwise
// write itself on top of the log.
//
// # Stores
//
// A Store has the lifecycle of a Kafka Streams state store: a name, the log
// (a *dstl.Writer) it appends to, a buffer of changes that Flush appends,
// ApplyChange to apply a change read back from the log without logging it,
// logging that is off during restore, Clear, and Snapshot / RestoreSnapshot
// of the whole store as one payload carrying its kind and format version.
// Three stores, generic over key and value with a Codec for each:
//
//   - KeyValueStore: Put, Get, Delete (logged as a tombstone), Range and
//     PrefixScan in the order of the keys' encodings;
//   - WindowStore: values per key per window start, with retention, Fetch by
//     key and time range;
//   - VersionedStore: values per key at timestamps, GetAsOf, history
//     retention; its log entries carry their timestamps.
//
// Each key belongs to a key group, KeyGroup(encoded key, max parallelism)
// (MurmurHash3 of the encoding modulo the maximum parallelism, stable across
// processes and versions), and its changes are appended to that key group,
// so a restore into another key-group range takes exactly the keys it owns.
//
// # Checkpoints
//
// A Checkpointer owns an operator instance's writer and its registered
// stores. It is a CheckpointFunction: InitializeState at start (restore,
// with no handle on a first start) and SnapshotState at a checkpoint
// barrier, which returns a CheckpointHandle naming the last materialised
// snapshot and the log handle since it; and a CheckpointListener:
// NotifyCheckpointComplete and NotifyCheckpointAborted reach the log as
// Confirm and Reset. In the background, once the log since the last
// snapshot passes a size or an age, it materialises: it writes every
// store's snapshot as one object through the storage's backend and
// truncates the log before it.
//
// # Who deletes what
//
// Config.KeepSnapshots is the switch: unset (the default), the
// checkpointer deletes what its checkpoints no longer need; set, the job
// does (package catalog's deletion rule, packages job and kafkastate,
// which set it).
//
//   - A checkpointer alone on its storage's job (no catalog, no job
//     runner: the default) keeps the objects of its last Config.Retain
//     completed checkpoints (default 1). After NotifyCheckpointComplete, at
//     most once per Config.CollectInterval, it applies the deletion rule
//     of package collect in the background (Checkpointer.Collect): it
//     deletes every log object of the job (JOB/UUIDv7.cN.dstl) and every
//     snapshot object of its operator (JOB/statestore/OPERATOR/) that none
//     of those checkpoints, no pending checkpoint and not the current
//     state refers to, once older than Config.Grace (default an hour) by
//     both the storage's clock and the time in its name, and unless made
//     for a checkpoint after the latest completed one. So no object
//     accumulates, and a restarted process (a new storage, a restore of
//     the last handle the program kept) deletes what a crashed one left,
//     and nothing the restored checkpoint refers to. The job's prefix is
//     then the checkpointer's own: no other checkpointer or writer writes
//     under the same job ID (dstl.Config.JobID), unless
//     Config.SharedStorage says so. With Config.SharedStorage it deletes
//     snapshot objects of its operator only; without it, a collection
//     while the storage has other open writers fails, deleting nothing.
//   - Snapshot objects it wrote (and the files of disk-backed snapshots,
//     UUIDv7.sst beside them): the Checkpointer deletes them as soon as
//     neither its current state, nor a retained completed checkpoint, nor
//     a pending one references them; a restart takes as its own what an
//     instance of its name and key groups wrote. What other instances
//     wrote (restored after a rescale) is shared by the new instances and
//     deleted by none of them: the job deletes it once no retained
//     checkpoint handle names it (CheckpointHandle.Objects). With
//     Config.KeepSnapshots the checkpointer deletes none (only the local
//     copies it no longer needs) and the job deletes them all: needed when
//     the job's processes commit to a shared catalog (package catalog),
//     where a fenced process must delete nothing that a newer generation
//     may restore.
//   - Log objects (JOB/UUIDv7.cN.dstl) not covered by a completed
//     checkpoint: the storage deletes them once truncated or aborted.
//   - Log objects of completed checkpoints belong to the job
//     (dstl.Writer.Confirm): the checkpointer's collection, or, with
//     Config.KeepSnapshots, the job, which deletes those that no retained
//     checkpoint's handle names (CheckpointHandle.Objects names a handle's
//     snapshot and log objects).
//   - What a crash leaves behind, where no checkpointer collects: `dstl gc
//     --base-path URL --job-id ID --grace DUR --keep HANDLE-FILES...`,
//     which deletes the job's log objects older than the grace that no
//     kept handle references; given checkpoint handles
//     (CheckpointHandle.MarshalBinary), it keeps the snapshots and logs
//     they name and deletes the other old snapshot objects of their
//     operators too (JOB/statestore/OPERATOR/ of each handle's Operator; it
//     deletes no snapshot of another operator, and given only log
//     handles, none). Keep the handles of every checkpoint that may still
//     be restored.
//
// # Rescaling
//
// Several handles restore an operator whose key groups were those of
// several old instances. Each handle restores only the key groups that are
// its own (its snapshots and logs may hold others, restored from a wider
// instance before it materialised); and the first checkpoint after such a
// merge materialises first, so that no handle names the restored state of
// several instances. Window and versioned stores then take as stream
// time the largest of the old instances': a merged window store may expire
// windows that the slower instance still held, and a merged versioned store
// may drop versions its history retention no longer reaches.
//
// The formats of log entries, payloads, snapshot objects and handles are
// versioned; docs/STATESTORE.md describes them byte by byte.
package statestore
