// Package statestore gives Go stream processors state stores whose every
// change goes to the durable short-term log (package dstl), with
// checkpoints, periodic materialisation and restore: the layer a service
// would otherwise write itself on top of the log.
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
// The formats of log entries, payloads, snapshot objects and handles are
// versioned; docs/STATESTORE.md describes them byte by byte.
package statestore
