package statestore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// run materialises in the background when the log since the last snapshot
// is large or old enough.
func (c *Checkpointer) run() {
	defer c.wg.Done()
	every := time.Second
	if iv := c.cfg.MaterializeInterval; iv > 0 && iv/4 < every {
		every = max(iv/4, time.Millisecond)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		case <-c.trigger:
		}
		if !c.due() {
			continue
		}
		if err := c.Materialize(c.ctx); err != nil && c.ctx.Err() == nil {
			c.log.Warn("statestore: materialisation failed; the log keeps growing until one succeeds",
				"operator", c.cfg.Operator, "err", err)
		}
	}
}

func (c *Checkpointer) due() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.restoring || c.restoreErr != nil {
		return false
	}
	n := c.logBytes.Load()
	if c.cfg.MaterializeSize > 0 && n >= c.cfg.MaterializeSize {
		return true
	}
	first := c.firstLogged.Load()
	return c.cfg.MaterializeInterval > 0 && first != 0 &&
		time.Since(time.Unix(0, first)) >= c.cfg.MaterializeInterval
}

// Materialize writes a snapshot of every store now, as one object through
// the storage's backend, and truncates the log before it. It does nothing
// when nothing changed since the last snapshot (a restore from several
// handles counts as a change). The stores are cut at one
// point of the log, under their locks, into copy-on-write views; encoding
// and upload run without the locks. The background materialisation calls
// it; a program may too (for instance before a planned stop).
func (c *Checkpointer) Materialize(ctx context.Context) error {
	c.matMu.Lock()
	defer c.matMu.Unlock()
	ctx, stop := c.closing(ctx)
	defer stop()

	c.mu.Lock()
	if c.closed || c.restoring || c.restoreErr != nil {
		err := c.restoreErr
		c.mu.Unlock()
		switch {
		case c.closed:
			return ErrClosed
		case err != nil:
			return fmt.Errorf("statestore: materialise: %w: %v", ErrRestoreFailed, err)
		}
		return nil
	}
	c.lockStores()
	if err := c.flushLocked(ctx); err != nil {
		c.unlockStores()
		c.stats.MaterializeFailures++
		c.mu.Unlock()
		return fmt.Errorf("statestore: materialise: %w", err)
	}
	cut := c.logBytes.Load()
	if cut == 0 && len(c.restoredLogs) == 0 && !c.mergedRestore {
		c.unlockStores()
		c.mu.Unlock()
		return nil
	}
	// The changes before the cut go into the snapshot; the age of those
	// after it counts from their own first one.
	first := c.firstLogged.Swap(0)
	sqn := c.w.NextSequenceNumber()
	// The snapshot's objects are made for the log's next checkpoint: the
	// first that may reference them. Until they are referenced,
	// HoldFrom reports it.
	madeFor := c.w.NextCheckpoint()
	c.materializing = madeFor
	var write func(context.Context) (*cutResult, error)
	if c.disk != nil {
		write = c.cutDiskLocked(sqn, madeFor)
	} else {
		write = c.cutMemoryLocked(sqn, madeFor)
	}
	for _, s := range c.stores {
		s.base().describe = true // the log after the cut starts with descriptors again
	}
	c.unlockStores()
	c.mu.Unlock()

	start := time.Now()
	res, err := write(ctx)
	c.mu.Lock()
	c.materializing = 0
	if err != nil {
		// The changes before the cut are still to materialise: their
		// age stands.
		for first != 0 {
			cur := c.firstLogged.Load()
			if (cur != 0 && cur <= first) || c.firstLogged.CompareAndSwap(cur, first) {
				break
			}
		}
		c.stats.MaterializeFailures++
		c.mu.Unlock()
		return fmt.Errorf("statestore: materialise: %w", err)
	}
	c.logBytes.Add(-cut)
	for _, o := range res.owned {
		c.owned[o] = true
	}
	if res.manifest != nil {
		c.diskManifest = res.manifest
	}
	c.current = []SnapshotRef{res.ref}
	c.restoredLogs, c.mergedRestore = nil, false
	c.from = sqn
	c.stats.Materializations++
	c.stats.SnapshotBytes = res.ref.Size
	res.report.Duration = time.Since(start)
	c.stats.LastMaterialization = res.report
	if sqn > c.truncateTo {
		c.truncateTo = sqn
	}
	c.truncateLocked()
	doomed := c.unreferencedLocked()
	c.mu.Unlock()
	// The snapshot is written: the deletions of what it superseded are
	// done even if Close cancelled ctx meanwhile.
	return c.deleteSnapshots(context.WithoutCancel(ctx), doomed)
}

// closing returns ctx, also cancelled once Close begins, and its cancel.
func (c *Checkpointer) closing(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(c.ctx, cancel)
	return ctx, func() { unhook(); cancel() }
}

// cutResult is what a materialisation wrote: the snapshot to name, the
// objects it wrote (the checkpointer's to delete once unreferenced), what
// it did, and for a disk-backed snapshot its manifest.
type cutResult struct {
	ref      SnapshotRef
	owned    []string
	report   MaterializeReport
	manifest *diskstate.Manifest
}

// cutMemoryLocked cuts the in-memory stores into copy-on-write views, with
// c.mu and the stores' locks held, and returns what writes them as one
// snapshot object.
func (c *Checkpointer) cutMemoryLocked(sqn dstl.SequenceNumber, madeFor int64) func(context.Context) (*cutResult, error) {
	obj := &snapshotObject{operator: c.cfg.Operator, kgr: c.cfg.KeyGroups, maxP: c.cfg.MaxParallelism, from: sqn}
	encs := make([]func() ([]byte, error), len(c.stores))
	for i, s := range c.stores {
		encs[i] = s.captureLocked()
		obj.stores = append(obj.stores, storePayload{name: s.Name(), kind: s.Kind()})
	}
	return func(ctx context.Context) (*cutResult, error) {
		name, size, err := c.writeSnapshot(ctx, obj, encs, madeFor)
		if err != nil {
			return nil, err
		}
		return &cutResult{ref: SnapshotRef{Object: name, Size: size}, owned: []string{name},
			report: MaterializeReport{UploadedBytes: size, Files: 1}}, nil
	}
}

// writeSnapshot encodes the stores, puts the object and, with local
// recovery, writes a local copy.
func (c *Checkpointer) writeSnapshot(ctx context.Context, obj *snapshotObject, encs []func() ([]byte, error), madeFor int64) (string, int64, error) {
	for i, enc := range encs {
		p, err := enc()
		if err != nil {
			return "", 0, err
		}
		obj.stores[i].payload = p
	}
	data := obj.encode()
	name, err := objname.NewSnapshot(objname.JobPrefix(c.storage.Config().JobID), c.cfg.Operator, madeFor)
	if err != nil {
		return "", 0, err
	}
	if err := c.storage.Backend().Put(ctx, name, bytes.NewReader(data), int64(len(data))); err != nil {
		return "", 0, fmt.Errorf("put snapshot: %w", err)
	}
	if c.localDir != "" {
		if err := writeFileAtomic(c.localPath(name), data); err != nil {
			c.log.Warn("statestore: local copy of a snapshot failed; restore will read the remote one",
				"object", name, "err", err)
		}
	}
	return name, int64(len(data)), nil
}

func (c *Checkpointer) localPath(name string) string {
	return filepath.Join(c.localDir, filepath.FromSlash(name))
}

func (c *Checkpointer) removeLocalCopy(name string) {
	if c.localDir != "" {
		if err := os.Remove(c.localPath(name)); err != nil && !os.IsNotExist(err) {
			c.log.Warn("statestore: delete the local copy of a snapshot", "object", name, "err", err)
		}
	}
}

// cleanLocalSnapshots deletes the operator's local snapshot copies that
// keep does not name: what an earlier run left behind.
func (c *Checkpointer) cleanLocalSnapshots(keep map[string]bool) {
	if c.localDir == "" {
		return
	}
	dir := c.localPath(c.prefix)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := c.prefix + e.Name()
		if !e.Type().IsRegular() || keep[name] {
			continue
		}
		if strings.HasSuffix(name, objname.SnapshotSuffix) || strings.HasSuffix(name, objname.SnapshotFileSuffix) || strings.Contains(e.Name(), ".tmp") {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// writeFileAtomic writes data to path through a synced temporary file and a
// rename, so the file is whole or absent.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}
