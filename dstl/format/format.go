// Package format encodes and decodes dstl objects: a header with magic and
// version, change-set frames (each with its length, log id, sequence number,
// key-group directory, changes and CRC32C, optionally compressed on its own)
// and a footer index. See docs/FORMAT.md. The package does not depend on the
// engine, so tools (inspect, gc, the fuzzer) use it alone.
package format

// ChangeSet is one writer's changes under one sequence number.
type ChangeSet struct {
	LogID          [16]byte
	SequenceNumber uint64
	// Groups hold the changes per key group: the metadata group (key group
	// -1) first when present, then key groups in ascending order, each
	// group's changes in append order.
	Groups []Group
}

// Group is the changes of one key group, in append order.
type Group struct {
	KeyGroup int32
	Changes  [][]byte
}
