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
package diskstate
