package statestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// cutDiskLocked cuts the disk-backed stores, with c.mu and the stores'
// locks held: it takes the keys changed since the last materialisation, a
// Pebble snapshot and the stores' stream times, and returns what writes
// the files of what changed (and a slice of the rest), then the snapshot
// object, the manifest naming every file that holds the state.
func (c *Checkpointer) cutDiskLocked(sqn dstl.SequenceNumber, madeFor int64) func(context.Context) (*cutResult, error) {
	changed, all := c.disk.TakeChanges()
	snap := c.disk.NewSnapshot()
	stores := make([]diskstate.StoreMeta, len(c.stores))
	for i, s := range c.stores {
		b := s.base()
		stores[i] = diskstate.StoreMeta{Name: s.Name(), Kind: string(s.Kind()), KindVersion: b.version,
			Meta: binary.AppendVarint(nil, b.streamTime)}
	}
	prev := c.diskManifest
	return func(ctx context.Context) (*cutResult, error) {
		defer snap.Close()
		res, err := c.writeDiskSnapshot(ctx, snap, prev, changed, all, sqn, stores, madeFor)
		if err != nil {
			// What changed is still to materialise.
			c.disk.Restore(changed, all)
		}
		return res, err
	}
}

// writeDiskSnapshot writes the files and the manifest of a disk-backed
// snapshot. On error nothing it wrote stays on the backend.
func (c *Checkpointer) writeDiskSnapshot(ctx context.Context, snap *pebble.Snapshot, prev *diskstate.Manifest, changed []string, all bool,
	sqn dstl.SequenceNumber, stores []diskstate.StoreMeta, madeFor int64) (*cutResult, error) {
	t := c.diskTarget(madeFor)
	files, cursor, st, err := diskstate.Materialize(ctx, t, c.disk, snap, prev, c.cfg.KeyGroups, changed, all)
	if err != nil {
		return nil, err
	}
	m := &diskstate.Manifest{Operator: c.cfg.Operator, KeyGroups: c.cfg.KeyGroups, MaxParallelism: c.cfg.MaxParallelism,
		From: sqn, Cursor: cursor, Stores: stores, Files: files}
	old := map[string]bool{}
	if prev != nil {
		for _, f := range prev.Files {
			old[f.Object] = true
		}
	}
	var written []string
	for _, f := range files {
		if !old[f.Object] {
			written = append(written, f.Object)
		}
	}
	undo := func(err error) error {
		var errs []error
		for _, name := range written {
			if derr := c.storage.Backend().Delete(context.WithoutCancel(ctx), name); derr != nil {
				errs = append(errs, derr)
			}
			c.removeLocalCopy(name)
		}
		if len(errs) > 0 {
			c.log.Warn("statestore: delete the files of a failed materialisation; gc collects them", "err", errors.Join(errs...))
		}
		return err
	}
	data, err := m.MarshalBinary()
	if err != nil {
		return nil, undo(err)
	}
	name, err := objname.NewSnapshot(objname.JobPrefix(c.storage.Config().JobID), c.cfg.Operator, madeFor)
	if err != nil {
		return nil, undo(err)
	}
	if err := c.storage.Backend().Put(ctx, name, bytes.NewReader(data), int64(len(data))); err != nil {
		return nil, undo(fmt.Errorf("put snapshot: %w", err))
	}
	if c.localDir != "" {
		if err := writeFileAtomic(c.localPath(name), data); err != nil {
			c.log.Warn("statestore: local copy of a snapshot failed; restore will read the remote one", "object", name, "err", err)
		}
	}
	return &cutResult{
		ref:   SnapshotRef{Object: name, Size: int64(len(data)), Files: m.Objects()},
		owned: append(written, name),
		report: MaterializeReport{UploadedBytes: st.UploadedBytes + int64(len(data)), Files: st.Files + 1,
			ChangedKeys: int64(st.ChangedKeys), ChangedBytes: st.ChangedBytes},
		manifest: m,
	}, nil
}

// diskTarget says where the disk-backed snapshots' files go, named as
// made for checkpoint madeFor.
func (c *Checkpointer) diskTarget(madeFor int64) diskstate.Target {
	prefix := objname.JobPrefix(c.storage.Config().JobID)
	return diskstate.Target{
		Backend:   c.storage.Backend(),
		NewObject: func() (string, error) { return objname.NewSnapshotFile(prefix, c.cfg.Operator, madeFor) },
		LocalDir:  c.localDir,
		Logger:    c.log,
	}
}
