// Package diskstate keeps the state stores of one operator instance in a
// Pebble database on local disk, and writes and reads that database's
// snapshots on the storage's backend.
//
// # Key layout
//
// Every key of the database starts with its key group, two bytes
// big-endian, then the name of its store (one byte of length, the bytes),
// then what the store puts after it (see package statestore). A range of key
// groups is thus one range of keys ([KeyGroupSpan]): restoring a narrower
// range deletes the rest with one range deletion, and the snapshot's files
// can be split by key group.
//
// # Changes
//
// The stores [DB.Touch] every key they set or delete, so that a
// materialisation writes only what changed since the previous one
// ([DB.TakeChanges]); an operation that changes keys it cannot name (a
// Clear) calls [DB.TouchAll].
//
// # Snapshots
//
// A snapshot on the backend is a [Manifest] naming a list of SST files,
// written by this package (not Pebble's own tables, whose compactions
// would make every snapshot upload most of the state): [Materialize]
// writes a delta, the keys changed since the previous snapshot, and a
// segment, a slice of the key span rewritten whole (a range deletion over
// the slice and its live keys), the slices following each other around
// the span from one snapshot to the next. A snapshot thus uploads a few
// times the bytes changed, whatever the state's size; once segments newer
// than a file cover the span, the file is obsolete.
//
// [Load] restores a snapshot by ingesting its files in order, a later file
// shadowing an earlier one, and deleting the keys outside the key groups
// to keep; it merges several snapshots (a rescale) through temporary
// databases. Files are checked against the manifest's sizes and CRC-32C,
// and can be kept on local disk (Target.LocalDir) to restore without
// downloading them.
package diskstate
