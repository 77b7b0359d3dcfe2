// Package format encodes and decodes dstl objects. An object is a header
// with magic and version, change-set frames, and a footer index, as
// docs/FORMAT.md describes. The package does not depend on the engine, so
// tools such as an object inspector, a garbage collector and the fuzzer
// use it alone.
//
// Each frame holds one change set with its length, log id, sequence
// number, key-group directory, changes and CRC32C, and is optionally
// compressed on its own.
package format

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// ChangeSet is one writer's changes under one sequence number, given in
// one of two forms: by key group (Groups) or in the order they were
// appended (Appended, or AppendedFrom). Both are stored alike: a frame
// holds the changes by key group. A change set has one form or the other,
// not both; one with neither is empty. [ChangeSet.ByGroup] gives the
// groups of either.
type ChangeSet struct {
	LogID          [16]byte
	SequenceNumber uint64
	// Groups hold the changes per key group: the metadata group (key group
	// -1) first when present, then key groups in ascending order, each
	// group's changes in append order. A decoder gives this form.
	Groups []Group
	// Appended holds the changes in the order they were appended, each
	// with its key group (the metadata group, -1, or a key group of 0 or
	// more): each key group's changes are stored in this order. An
	// encoder reads them in this order, which for a writer's arena is the
	// order of memory, and places each in its group as it goes, rather
	// than gathering each group's changes from all over the arena.
	Appended []KeyedChange
	// AppendedFrom, instead of Appended, gives the changes in append order
	// through a reader, a batch at a time: an encoder reads a few hundred
	// changes into a buffer of its own, passes over them, and reads the
	// next, rather than taking a list of all the changes that someone
	// built (and wrote to memory) first.
	AppendedFrom ChangeReader
}

// ChangeReader gives the changes of a change set in append order, a batch
// at a time (see [ChangeSet.AppendedFrom]).
type ChangeReader interface {
	// Len returns the number of changes.
	Len() int
	// ReadChanges fills dst with the changes from the i-th on (the first
	// is 0) and returns how many it filled: fewer than len(dst) only at
	// the end. Reading from the same i again gives the same changes: an
	// encoder reads them twice, and rejects a change set whose second
	// read gives another number of changes or other counts or sizes per
	// key group.
	ReadChanges(i int, dst []KeyedChange) int
}

// appendedBatch returns the changes of an append-order change set from
// the i-th on: all of Appended (from i), or those AppendedFrom fills buf
// with. It is empty at the end.
func (cs *ChangeSet) appendedBatch(i int, buf []KeyedChange) []KeyedChange {
	if cs.AppendedFrom == nil {
		return cs.Appended[min(i, len(cs.Appended)):]
	}
	return buf[:cs.AppendedFrom.ReadChanges(i, buf)]
}

// appendOrder reports whether the change set is given in append order.
func (cs *ChangeSet) appendOrder() bool { return len(cs.Appended) > 0 || cs.AppendedFrom != nil }

// appendedBatchSize is the changes an encoder reads from a ChangeReader
// at a time: 8 KiB of KeyedChange, which stays in the CPU's first-level
// cache while the encoder passes over them.
const appendedBatchSize = 256

// Group is the changes of one key group, in append order.
type Group struct {
	KeyGroup int32
	Changes  [][]byte
}

// KeyedChange is one change of [ChangeSet.Appended]: its key group and
// its bytes.
type KeyedChange struct {
	KeyGroup int32
	Data     []byte
}

// ByGroup returns the change set's changes by key group: its Groups, or
// the groups that its Appended changes make, in ascending order of key
// group, each in append order (a new slice, whose changes alias
// Appended's bytes, or those AppendedFrom gives). It does not validate the
// key groups.
func (cs *ChangeSet) ByGroup() []Group {
	if !cs.appendOrder() {
		return cs.Groups
	}
	var sorted []KeyedChange
	if cs.AppendedFrom == nil {
		sorted = slices.Clone(cs.Appended)
	} else {
		buf := make([]KeyedChange, appendedBatchSize)
		for b := cs.appendedBatch(0, buf); len(b) > 0; b = cs.appendedBatch(len(sorted), buf) {
			sorted = append(sorted, b...)
		}
	}
	slices.SortStableFunc(sorted, func(a, b KeyedChange) int { return cmp.Compare(a.KeyGroup, b.KeyGroup) })
	changes := make([][]byte, len(sorted))
	var groups []Group
	for i, c := range sorted {
		changes[i] = c.Data
		if n := len(groups); n == 0 || groups[n-1].KeyGroup != c.KeyGroup {
			groups = append(groups, Group{KeyGroup: c.KeyGroup, Changes: changes[i : i+1 : i+1]})
		} else {
			g := &groups[n-1]
			g.Changes = changes[i-len(g.Changes) : i+1 : i+1]
		}
	}
	return groups
}

// Layout constants of the format. See docs/FORMAT.md.
const (
	// Magic opens every object.
	Magic = "DSTL"
	// FooterMagic closes every object that was completely written.
	FooterMagic = "LTSD"
	// Version1 is the first format version: a frame holds its changes by
	// key group. Every release reads and writes it.
	Version1 = 1
	// Version2 is the second format version: a frame holds its changes
	// in the order they were appended, each with its group, so that an
	// encoder writes them in one pass, in order, and a Put of the object
	// can start before the object is complete. This package reads both
	// versions; releases before it read only version 1.
	Version2 = 2
	// Version is the format version an [Encoder] writes unless
	// [EncoderOptions.Version] says otherwise.
	Version = Version1

	// HeaderSize is the size of the object header: magic, version, flags
	// and two reserved bytes.
	HeaderSize = 8
	// FrameHeaderSize is the fixed part of a frame before its key-group
	// directory.
	FrameHeaderSize = 40
	// DirEntrySize is the size of one key-group directory entry of
	// format version 1.
	DirEntrySize = 16
	// DirEntrySizeV2 is the size of one key-group directory entry of
	// format version 2.
	DirEntrySizeV2 = 12
	// FrameCRCSize is the size of the CRC32C that ends every frame.
	FrameCRCSize = 4
	// MinFrameSize is the size of a frame with no groups.
	MinFrameSize = FrameHeaderSize + FrameCRCSize
	// MaxFrameSize bounds the stored size of one frame.
	MaxFrameSize = 1<<31 - 1
	// MaxPayloadSize bounds the uncompressed payload of one frame (changes
	// plus their length prefixes, and in version 2 their groups' tags).
	// Decoders reject larger declared lengths before allocating anything.
	MaxPayloadSize = 1 << 30

	// IndexEntrySize is the size of one footer index entry.
	IndexEntrySize = 36
	// TrailerSize is the size of the fixed footer trailer that ends every
	// object: entry count, index offset, index CRC32C and FooterMagic.
	TrailerSize = 20
	// MinObjectSize is the size of an object with no frames.
	MinObjectSize = HeaderSize + TrailerSize

	// MetaKeyGroup is the key group of metadata changes; it sorts before
	// every other key group.
	MetaKeyGroup = -1
)

// Codec identifies how a frame's payload is stored.
type Codec uint8

const (
	// CodecNone stores the payload as is.
	CodecNone Codec = 0
	// CodecZstd stores the payload as one or more Zstandard frames.
	CodecZstd Codec = 1
)

// String returns the codec's name.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecZstd:
		return "zstd"
	default:
		return fmt.Sprintf("codec(%d)", uint8(c))
	}
}

// FrameInfo describes a frame just written by [Encoder.WriteChangeSet].
type FrameInfo struct {
	// Offset and Length locate the frame in the stored object, so that a
	// reader can fetch exactly [Offset, Offset+Length) with a ranged read.
	Offset, Length int64
	// LogicalSize is the sum of the lengths of the frame's changes.
	LogicalSize int64
}

// IndexEntry is one entry of an object's footer index: where one frame is
// and which change set it holds.
type IndexEntry struct {
	Offset, Length int64
	LogID          [16]byte
	SequenceNumber uint64
}

// FrameHeader is a frame's header and key-group directory, as read by
// [ReadFrameHeader] without decompressing the payload.
type FrameHeader struct {
	// Version is the frame's format version: [Version1] or [Version2].
	Version        int
	LogID          [16]byte
	SequenceNumber uint64
	Codec          Codec
	// LogicalSize is the uncompressed payload size: the changes and their
	// length prefixes.
	LogicalSize int64
	// StoredSize is the payload size as stored in the frame (compressed
	// when Codec is CodecZstd). The frame adds FrameHeaderSize,
	// DirEntrySize per group and FrameCRCSize to it.
	StoredSize int64
	Groups     []GroupInfo
}

// GroupInfo is one key-group directory entry.
type GroupInfo struct {
	KeyGroup int32
	// Count is the number of changes in the group.
	Count int
	// Size is the group's share of the uncompressed payload: its changes
	// and their length prefixes.
	Size int64
}

// Sentinel errors. Every decoding failure is an [*Error] that wraps one of
// ErrCorrupt, ErrChecksum or ErrVersion; test for them with [errors.Is].
var (
	// ErrCorrupt reports a structurally invalid or truncated object or frame.
	ErrCorrupt = errors.New("corrupt data")
	// ErrChecksum reports a CRC32C mismatch: the bytes changed after they
	// were written.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrVersion reports an object written in a format version, or with
	// feature flags, that this package does not know.
	ErrVersion = errors.New("unsupported format version")

	// ErrInvalidChangeSet is returned by [Encoder.WriteChangeSet] for a
	// change set that cannot be encoded: groups out of order, duplicate or
	// invalid key groups, or sizes over the format's limits.
	ErrInvalidChangeSet = errors.New("invalid change set")
	// ErrClosed is returned by an [Encoder] used after Close.
	ErrClosed = errors.New("encoder closed")
)

// Error is a decoding failure. It names the object and the absolute byte
// offset in the object where the problem was found.
type Error struct {
	// Object is the object's name as given to the decoding function.
	Object string
	// Offset is the absolute offset in the object of the field or region
	// found invalid.
	Offset int64
	// Err is ErrCorrupt, ErrChecksum or ErrVersion.
	Err error
	// Detail says what was wrong.
	Detail string
}

// Error returns a message naming the object, the offset and the problem.
func (e *Error) Error() string {
	s := fmt.Sprintf("dstl/format: object %q at offset %d: %v", e.Object, e.Offset, e.Err)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the sentinel error.
func (e *Error) Unwrap() error { return e.Err }

func errorf(object string, offset int64, sentinel error, format string, args ...any) *Error {
	return &Error{Object: object, Offset: offset, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}
