package statestore

import (
	"fmt"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// SnapshotInfo describes a snapshot object as [DescribeSnapshot] reads it,
// for tools that inspect one without restoring it.
type SnapshotInfo struct {
	// Manifest says that the object is the manifest of a disk-backed
	// snapshot (magic "DSSM"), which names the SST files that hold the
	// state; otherwise it is an in-memory snapshot (magic "DSSO"), which
	// holds each store's payload.
	Manifest bool
	// Version is the version of the object's encoding.
	Version int
	// Operator, KeyGroups and MaxParallelism are those of the operator
	// instance that wrote the snapshot.
	Operator       string
	KeyGroups      dstl.KeyGroupRange
	MaxParallelism int
	// From is the sequence number of the log from which a restore replays
	// the changes the snapshot does not hold.
	From dstl.SequenceNumber
	// Stores are the operator's stores, in the object's order.
	Stores []SnapshotStore
	// Files are the SST files of a disk-backed snapshot, oldest first;
	// none for an in-memory snapshot.
	Files []SnapshotFile
}

// SnapshotStore is one store of a snapshot.
type SnapshotStore struct {
	Name string
	Kind Kind
	// Size is the length of the store's payload in an in-memory snapshot;
	// 0 in a manifest, whose files hold every store's keys.
	Size int64
}

// SnapshotFile is one SST file that a disk-backed snapshot names.
type SnapshotFile struct {
	// Object is the file's object name, and Size its length in bytes.
	Object string
	Size   int64
	// Kind is "delta" (the keys changed since the previous
	// materialisation) or "segment" (every key of a span of keys).
	Kind string
	// Writer is the key-group range of the instance that wrote the file.
	Writer dstl.KeyGroupRange
}

// DescribeSnapshot decodes the snapshot object data, read from the object
// named name, and checks its magic, version, checksum and structure, as a
// restore does, without loading any store. An error wraps
// [ErrSnapshotFormat] and names the object.
func DescribeSnapshot(name string, data []byte) (*SnapshotInfo, error) {
	if diskstate.IsManifest(data) {
		m, err := diskstate.DecodeManifest(name, data)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSnapshotFormat, err)
		}
		// The version is the byte after the magic, one DecodeManifest reads.
		info := &SnapshotInfo{Manifest: true, Version: int(data[len("DSSM")]), Operator: m.Operator,
			KeyGroups: m.KeyGroups, MaxParallelism: m.MaxParallelism, From: m.From}
		for _, s := range m.Stores {
			info.Stores = append(info.Stores, SnapshotStore{Name: s.Name, Kind: Kind(s.Kind)})
		}
		for _, f := range m.Files {
			info.Files = append(info.Files, SnapshotFile{Object: f.Object, Size: f.Size, Kind: f.Kind.String(), Writer: f.Writer})
		}
		return info, nil
	}
	o, err := decodeSnapshotObject(name, data)
	if err != nil {
		return nil, err
	}
	info := &SnapshotInfo{Version: SnapshotObjectVersion, Operator: o.operator, KeyGroups: o.kgr, MaxParallelism: o.maxP, From: o.from}
	for _, s := range o.stores {
		info.Stores = append(info.Stores, SnapshotStore{Name: s.name, Kind: s.kind, Size: int64(len(s.payload))})
	}
	return info, nil
}
