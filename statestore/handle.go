package statestore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/dstlgo/dstl/dstl"
)

// CheckpointHandleVersion is the newest version of the encoding that
// CheckpointHandle.MarshalBinary writes: 2 for a handle whose snapshots name
// files (disk-backed stores), 1 otherwise, so that the handles of
// in-memory stores stay readable by builds that read version 1 only.
// UnmarshalBinary reads both and rejects others.
const CheckpointHandleVersion = 2

const handleMagic = "DSCP"

// CheckpointHandle is what a checkpoint keeps of an operator's state stores:
// the materialised snapshots to load and the log handles to replay after
// them, in order. A handle usually names one snapshot (none before the first
// materialisation) and one log handle; after a restore, until the next
// materialisation, it also names the restored snapshots and logs.
type CheckpointHandle struct {
	// CheckpointID is the checkpoint the handle belongs to.
	CheckpointID int64
	// Operator is the operator instance that wrote it.
	Operator string
	// KeyGroups is that instance's key-group range, and MaxParallelism
	// the number of key groups.
	KeyGroups      dstl.KeyGroupRange
	MaxParallelism int
	// Snapshots are the snapshot objects to load, in order.
	Snapshots []SnapshotRef
	// Logs are the log handles to replay after the snapshots, in order.
	Logs []LogRef
}

// SnapshotRef names one snapshot object on the storage's backend.
type SnapshotRef struct {
	Object string
	Size   int64
	// Files are the objects that a disk-backed snapshot (Config.Dir)
	// names beside its own: its SST files, which later snapshots, of this
	// instance or of the instances that restore it, share. None for an
	// in-memory store's snapshot.
	Files []string
}

// LogRef is a log handle and, with local recovery, the handle of the local
// copies of the same change sets.
type LogRef struct {
	Remote dstl.Handle
	Local  *dstl.Handle
}

// LogHandles returns the handles of the handle's logs, remote and local,
// in order: what [dstl.Storage.CleanLocalCopies] keeps for a restore of
// the handle.
func (h CheckpointHandle) LogHandles() []dstl.Handle {
	var out []dstl.Handle
	for _, l := range h.Logs {
		out = append(out, l.Remote)
		if l.Local != nil {
			out = append(out, *l.Local)
		}
	}
	return out
}

// Objects returns the names of the objects on the storage's backend that
// the handle refers to, each once, sorted: its snapshot objects, the files
// they name (SnapshotRef.Files) and the objects of its log handles'
// entries. Local copies (LogRef.Local) are not
// on the backend and are not named. A job that deletes objects itself
// (Config.KeepSnapshots, package catalog's deletion rule) keeps these
// while it may restore the checkpoint.
func (h CheckpointHandle) Objects() []string {
	seen := map[string]bool{}
	var names []string
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	for _, s := range h.Snapshots {
		add(s.Object)
		for _, f := range s.Files {
			add(f)
		}
	}
	for _, l := range h.Logs {
		for _, e := range l.Remote.Entries {
			add(e.Object)
		}
	}
	slices.Sort(names)
	return names
}

// MarshalBinary encodes the handle; integers are varints, unsigned unless
// said otherwise:
//
//	magic "DSCP", version 1 byte (2 if a snapshot names files, else 1),
//	checkpoint id (signed), operator (length, bytes),
//	key groups start, end, max parallelism,
//	snapshots: count, then per snapshot: object (length, bytes), size,
//	and in version 2 its files: count, then each (length, bytes),
//	logs: count, then per log: remote handle (length, dstl.Handle binary
//	encoding), a byte 0 or 1, and with 1 the local handle (length, bytes),
//	CRC32C (Castagnoli) of everything before it, 4 bytes little-endian.
func (h CheckpointHandle) MarshalBinary() ([]byte, error) {
	version := byte(1)
	for _, s := range h.Snapshots {
		if len(s.Files) > 0 {
			version = 2
		}
	}
	b := append([]byte(handleMagic), version)
	b = binary.AppendVarint(b, h.CheckpointID)
	b = appendString(b, h.Operator)
	b = binary.AppendUvarint(b, uint64(h.KeyGroups.Start))
	b = binary.AppendUvarint(b, uint64(h.KeyGroups.End))
	b = binary.AppendUvarint(b, uint64(h.MaxParallelism))
	b = binary.AppendUvarint(b, uint64(len(h.Snapshots)))
	for _, s := range h.Snapshots {
		b = appendString(b, s.Object)
		b = binary.AppendUvarint(b, uint64(s.Size))
		if version == 2 {
			b = binary.AppendUvarint(b, uint64(len(s.Files)))
			for _, f := range s.Files {
				b = appendString(b, f)
			}
		}
	}
	b = binary.AppendUvarint(b, uint64(len(h.Logs)))
	for i, l := range h.Logs {
		r, err := l.Remote.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("%w: log %d: %w", ErrInvalidCheckpointHandle, i, err)
		}
		b = appendBytes(b, r)
		if l.Local == nil {
			b = append(b, 0)
			continue
		}
		lb, err := l.Local.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("%w: local log %d: %w", ErrInvalidCheckpointHandle, i, err)
		}
		b = append(b, 1)
		b = appendBytes(b, lb)
	}
	return finishChecksum(b), nil
}

// UnmarshalBinary decodes what MarshalBinary wrote. Bad magic, another
// version, a checksum mismatch, truncation and trailing bytes are errors
// wrapping ErrInvalidCheckpointHandle; on error h is unchanged.
func (h *CheckpointHandle) UnmarshalBinary(data []byte) error {
	if len(data) < len(handleMagic)+1+4 || string(data[:len(handleMagic)]) != handleMagic {
		return fmt.Errorf("%w: bad magic", ErrInvalidCheckpointHandle)
	}
	version := data[len(handleMagic)]
	if version != 1 && version != 2 {
		return fmt.Errorf("%w: version %d, this build reads versions 1 and 2", ErrInvalidCheckpointHandle, version)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return fmt.Errorf("%w: checksum mismatch", ErrInvalidCheckpointHandle)
	}
	d := decoder{b: body[len(handleMagic)+1:]}
	var n CheckpointHandle
	n.CheckpointID = d.varint()
	n.Operator = string(d.bytes())
	n.KeyGroups.Start, n.KeyGroups.End = int(d.uvarint()), int(d.uvarint())
	n.MaxParallelism = int(d.uvarint())
	for range d.count() {
		s := SnapshotRef{Object: string(d.bytes()), Size: int64(d.uvarint())}
		if version == 2 {
			for range d.count() {
				s.Files = append(s.Files, string(d.bytes()))
			}
		}
		n.Snapshots = append(n.Snapshots, s)
	}
	for range d.count() {
		var l LogRef
		rb := d.bytes()
		if d.err == nil {
			if err := l.Remote.UnmarshalBinary(rb); err != nil {
				return fmt.Errorf("%w: %w", ErrInvalidCheckpointHandle, err)
			}
		}
		switch f := d.byte(); {
		case f > 1:
			d.fail(fmt.Errorf("bad local flag %d", f))
		case f == 1:
			lb := d.bytes()
			if d.err == nil {
				l.Local = new(dstl.Handle)
				if err := l.Local.UnmarshalBinary(lb); err != nil {
					return fmt.Errorf("%w: local: %w", ErrInvalidCheckpointHandle, err)
				}
			}
		}
		n.Logs = append(n.Logs, l)
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Errorf("trailing bytes"))
	}
	if d.err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidCheckpointHandle, d.err)
	}
	if err := n.KeyGroups.Validate(); err != nil || n.MaxParallelism < 1 || n.KeyGroups.End >= n.MaxParallelism {
		return fmt.Errorf("%w: key groups %v with max parallelism %d", ErrInvalidCheckpointHandle, n.KeyGroups, n.MaxParallelism)
	}
	*h = n
	return nil
}
