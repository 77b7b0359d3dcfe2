package statestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// InitializeState restores the stores from the handles of the checkpoint
// being restored; with no handle (a first start) it does nothing but clean
// up. Several handles restore a rescaled operator: those of every old
// instance whose key groups overlap this one's.
//
// For each handle in turn it loads the snapshots, then replays the log
// handles, metadata first, with logging off, keeping only the keys of the
// key groups that are both the handle's and this instance's (a handle's
// snapshots and logs may hold other key groups, restored from a wider
// instance: those are another handle's, or no longer this job's); then it
// turns logging on. A handle that shares no key group with this instance
// is ignored. Nothing is written to the
// log. The stores are wiped first. With local recovery, snapshots and change
// sets are read from local copies where they are whole, and the local copies
// that no handle names are deleted (the log's only if Config.SharedStorage
// is false). Register every store first.
//
// If the restore fails once it began loading (a snapshot or a change set
// missing, damaged or unreadable), the stores are wiped and logging stays
// off: they hold no committed state, and what the operator would do with
// them would be lost. SnapshotState and Materialize then fail with
// ErrRestoreFailed. The operator must not process records; it may call
// InitializeState again (for instance once the storage is reachable), or
// fail over. A handle rejected before loading (ErrInvalidCheckpointHandle)
// changes nothing.
func (c *Checkpointer) InitializeState(ctx context.Context, info CheckpointInfo, handles ...*CheckpointHandle) (err error) {
	var hs []*CheckpointHandle
	var ranges []dstl.KeyGroupRange // what each handle restores: its key groups that are also ours
	for _, h := range handles {
		if h == nil {
			continue
		}
		r, ok := intersect(h.KeyGroups, c.cfg.KeyGroups)
		if !ok {
			continue // none of our key groups: nothing to restore from it
		}
		hs, ranges = append(hs, h), append(ranges, r)
	}
	keepLocal := map[string]bool{}
	var keepLogs []dstl.Handle
	restored := info.CheckpointID
	for _, h := range hs {
		if h.MaxParallelism != c.cfg.MaxParallelism {
			return fmt.Errorf("%w: checkpoint %d of operator %q has max parallelism %d, this one %d",
				ErrInvalidCheckpointHandle, h.CheckpointID, h.Operator, h.MaxParallelism, c.cfg.MaxParallelism)
		}
		restored = max(restored, h.CheckpointID)
		for _, s := range h.Snapshots {
			keepLocal[s.Object] = true
			for _, f := range s.Files {
				keepLocal[f] = true
			}
		}
		keepLogs = append(keepLogs, h.LogHandles()...)
	}
	// What the log uploads from now on is for a checkpoint after the
	// restored one (see dstl.Writer.SetNextCheckpoint).
	if restored > 0 && restored < math.MaxInt64 {
		c.w.SetNextCheckpoint(restored + 1)
	}
	// One restore or materialisation at a time, and Close waits for it.
	c.matMu.Lock()
	defer c.matMu.Unlock()
	ctx, stop := c.closing(ctx)
	defer stop()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.restoring = true
	stores := c.stores
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.restoring = false
		c.mu.Unlock()
	}()

	c.cleanLocalSnapshots(keepLocal)
	if !c.cfg.SharedStorage {
		if _, err := c.storage.CleanLocalCopies(ctx, keepLogs...); err != nil {
			c.log.Warn("statestore: clean local copies", "err", err)
		}
	}
	if len(hs) == 0 {
		return nil
	}

	start := time.Now()
	var rep RestoreReport
	c.replayName, c.replayStore, c.replayer = "", nil, nil
	defer func() { c.replayName, c.replayStore, c.replayer = "", nil, nil }()
	for _, s := range stores {
		s.Clear()
		s.SetLogging(false)
	}
	if err := c.wipeDisk(); err != nil {
		return err
	}
	defer func() {
		if err == nil {
			return
		}
		// Half-loaded stores are no state at all: empty them, keep
		// logging off, refuse checkpoints until a restore succeeds.
		for _, s := range stores {
			s.Clear()
		}
		if werr := c.wipeDisk(); werr != nil {
			c.log.Warn("statestore: wipe the disk after a failed restore", "err", werr)
		}
		c.mu.Lock()
		c.restoreErr = err
		c.mu.Unlock()
	}()
	reuse, own, err := c.loadSnapshots(ctx, hs, ranges, &rep)
	if err != nil {
		return err
	}
	apply := func(ch dstl.Change) error { return c.replayChange(ch, &rep) }
	var logs []LogRef
	for i, h := range hs {
		// A handle's logs may hold changes of other key groups than its
		// own (logs it restored from a wider instance): those are another
		// handle's to restore, and older than its.
		r, err := c.storage.NewReader(ranges[i])
		if err != nil {
			return err
		}
		for _, l := range h.Logs {
			if l.Remote.Empty() {
				continue
			}
			lr, err := r.ReadPreferLocal(ctx, l.Remote, l.Local, apply)
			rep.Log.LocalSets += lr.LocalSets
			rep.Log.RemoteSets += lr.RemoteSets
			rep.Log.LocalBytes += lr.LocalBytes
			rep.Log.RemoteBytes += lr.RemoteBytes
			rep.Log.Fallbacks = append(rep.Log.Fallbacks, lr.Fallbacks...)
			if err != nil {
				return fmt.Errorf("statestore: restore checkpoint %d: log of %s: %w", h.CheckpointID, l.Remote.LogID, err)
			}
			logs = append(logs, l)
		}
	}
	if err := endReplay(stores); err != nil {
		return err
	}
	for _, s := range stores {
		s.SetLogging(true)
	}
	rep.Duration = time.Since(start)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.current = nil
	var objects []string
	for _, h := range hs {
		c.current = append(c.current, h.Snapshots...)
		c.lastCompleted = max(c.lastCompleted, h.CheckpointID)
		objects = append(objects, h.Objects()...)
	}
	c.lastCompleted = max(c.lastCompleted, info.LastCompletedCheckpointID)
	// The restored checkpoint is the one retained until others complete.
	slices.Sort(objects)
	c.retained = []*pendingCheckpoint{{id: restored, done: true, outcome: outcomeCompleted,
		snapshots: c.current, objects: slices.Compact(objects)}}
	c.restoredLogs = logs
	// The restored snapshots and logs of several handles hold the same
	// key groups in different states: a handle naming them all would not
	// say which to take for which key group. The next checkpoint
	// materialises first.
	c.mergedRestore = len(hs) > 1
	// What an instance of this name and these key groups wrote is ours to
	// delete once unreferenced (a restart's); what other instances wrote
	// is shared after a rescale, and the job deletes it.
	for _, o := range own {
		c.owned[o] = true
	}
	if c.localDir != "" {
		owned := map[string]bool{}
		for _, o := range own {
			owned[o] = true
		}
		for _, h := range hs {
			for _, s := range h.Snapshots {
				for _, name := range append([]string{s.Object}, s.Files...) {
					if !owned[name] {
						c.sharedLocal[name] = true
					}
				}
			}
		}
	}
	if c.disk != nil {
		// The next materialisation extends the restored manifest if it
		// holds exactly this instance's key groups (and maybe more);
		// otherwise it writes the whole state.
		c.diskManifest = reuse
		if reuse == nil {
			c.disk.TouchAll()
		}
	}
	c.from = c.w.NextSequenceNumber()
	c.logBytes.Store(0)
	// The replayed log is due for a snapshot like changes logged now.
	c.firstLogged.Store(0)
	if len(logs) > 0 {
		c.firstLogged.Store(time.Now().UnixNano())
	}
	c.stats.LastRestore = rep
	c.restoreErr = nil
	return nil
}

// replayChange applies a change read back from the log to the store it
// names: a descriptor is checked against the registered store, a data or
// stream-time change is applied without logging.
func (c *Checkpointer) replayChange(ch dstl.Change, rep *RestoreReport) error {
	if err := c.replayEntry(ch, rep); err != nil {
		return fmt.Errorf("change set %d: %w", ch.SequenceNumber, err)
	}
	return nil
}

// replayEntry is replayChange but for naming the change set in errors.
func (c *Checkpointer) replayEntry(ch dstl.Change, rep *RestoreReport) error {
	rep.Changes++
	var e entry
	if !decodeData(ch.Data, ch.KeyGroup, &e) {
		var err error
		if e, err = decodeEntry(ch.Data, ch.KeyGroup); err != nil {
			return err
		}
	}
	s := c.replayStore
	if s == nil || string(e.name) != c.replayName {
		// The log names the same store change after change: it is
		// looked up when the name changes.
		if s = c.byName[string(e.name)]; s == nil {
			return fmt.Errorf("%w: %q in the log", ErrUnknownStore, e.name)
		}
		r, _ := s.(replayer)
		c.replayName, c.replayStore, c.replayer = string(e.name), s, r
	}
	if e.typ == typeDescr {
		if e.kind != s.Kind() || e.kindVersion != s.base().version {
			return fmt.Errorf("%w: the log's store %q is a %q store of version %d, the registered one a %q store of version %d",
				ErrLogFormat, e.name, e.kind, e.kindVersion, s.Kind(), s.base().version)
		}
		return nil
	}
	if c.replayer != nil {
		return c.replayer.replayChange(e.change) // which checks the key group
	}
	if e.change.KeyGroup != dstl.MetaKeyGroup {
		if _, err := s.base().loggedKeyGroup(e.change.Key, e.change.KeyGroup); err != nil {
			return err
		}
	}
	return s.ApplyChange(e.change)
}

// replayer is a store that applies the changes a restore replays in bulk:
// replayChange takes each change in the log's order, as ApplyChange does,
// and endReplay, after the last, makes the store hold what they say.
type replayer interface {
	replayChange(c Change) error
	endReplay() error
}

// endReplay ends the replay of the stores that are replayers.
func endReplay(stores []internalStore) error {
	for _, s := range stores {
		if r, ok := s.(replayer); ok {
			if err := r.endReplay(); err != nil {
				return fmt.Errorf("statestore: restore: store %q: %w", s.Name(), err)
			}
		}
	}
	return nil
}

// loadSnapshots loads the snapshots of the handles into the registered
// stores, each keeping the key groups of its handle's range. Disk-backed
// snapshots (manifests) are ingested first, all at once, then the
// in-memory ones are loaded. It returns the manifest that the next
// materialisation may extend: the only one, when one handle holding all of
// this instance's key groups restored it; and the objects loaded that an
// instance of this name and these key groups wrote (its own, not shared).
func (c *Checkpointer) loadSnapshots(ctx context.Context, hs []*CheckpointHandle, ranges []dstl.KeyGroupRange, rep *RestoreReport) (reuse *diskstate.Manifest, own []string, err error) {
	type payloads struct {
		obj *snapshotObject
		ref SnapshotRef
		kgr dstl.KeyGroupRange
		id  int64
	}
	var objs []payloads
	var ms []*diskstate.Manifest
	var mranges []dstl.KeyGroupRange
	for i, h := range hs {
		for _, ref := range h.Snapshots {
			obj, m, err := c.readSnapshot(ctx, ref, rep)
			if err != nil {
				return nil, nil, fmt.Errorf("statestore: restore checkpoint %d: %w", h.CheckpointID, err)
			}
			if obj != nil && obj.operator == c.cfg.Operator && obj.kgr == c.cfg.KeyGroups {
				own = append(own, ref.Object)
			}
			if m != nil {
				if m.Operator == c.cfg.Operator && m.KeyGroups == c.cfg.KeyGroups {
					own = append(own, ref.Object)
				}
				for _, f := range m.Files {
					if f.Writer == c.cfg.KeyGroups && strings.HasPrefix(f.Object, c.prefix) {
						own = append(own, f.Object)
					}
				}
			}
			if obj != nil && c.disk == nil {
				// In memory: load it now, so that one object at a
				// time is held.
				if err := c.loadPayloads(ref, obj, ranges[i], rep); err != nil {
					return nil, nil, fmt.Errorf("statestore: restore checkpoint %d: %w", h.CheckpointID, err)
				}
				continue
			}
			if obj != nil {
				// On disk: after the manifests' files are ingested
				// (which clears what is outside their key groups).
				objs = append(objs, payloads{obj, ref, ranges[i], h.CheckpointID})
				continue
			}
			if len(h.Snapshots) > 1 {
				return nil, nil, fmt.Errorf("statestore: restore checkpoint %d: %w: disk-backed snapshot %s is one of %d snapshots of a handle",
					h.CheckpointID, ErrSnapshotFormat, ref.Object, len(h.Snapshots))
			}
			if m.MaxParallelism != c.cfg.MaxParallelism {
				return nil, nil, fmt.Errorf("statestore: restore checkpoint %d: %w: object %s has max parallelism %d, this operator %d",
					h.CheckpointID, ErrSnapshotFormat, ref.Object, m.MaxParallelism, c.cfg.MaxParallelism)
			}
			r, ok := intersect(ranges[i], m.KeyGroups)
			if !ok {
				continue
			}
			ms, mranges = append(ms, m), append(mranges, r)
			if len(hs) == 1 && contains(h.KeyGroups, c.cfg.KeyGroups) && contains(m.KeyGroups, c.cfg.KeyGroups) {
				reuse = m
			}
		}
	}
	if len(ms) > 0 {
		st, err := diskstate.Load(ctx, c.diskTarget(0), c.disk, ms, mranges)
		rep.Snapshots += len(ms)
		rep.LocalSnapshotFiles += st.LocalFiles
		rep.SnapshotFiles += st.Files
		rep.SnapshotBytes += st.FetchedBytes + st.LocalBytes
		if errors.Is(err, diskstate.ErrFormat) {
			return nil, nil, fmt.Errorf("statestore: restore: %w: %w", ErrSnapshotFormat, err)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("statestore: restore: %w", err)
		}
		for _, m := range ms {
			if err := c.loadStoreMeta(m); err != nil {
				return nil, nil, fmt.Errorf("statestore: restore: %w", err)
			}
		}
	}
	for _, p := range objs {
		if err := c.loadPayloads(p.ref, p.obj, p.kgr, rep); err != nil {
			return nil, nil, fmt.Errorf("statestore: restore checkpoint %d: %w", p.id, err)
		}
	}
	if c.disk != nil {
		// What was loaded is in the snapshots already: not a change.
		c.disk.TakeChanges()
	}
	return reuse, own, nil
}

// loadStoreMeta checks that a manifest's stores are the registered ones
// and raises their stream times to the manifest's.
func (c *Checkpointer) loadStoreMeta(m *diskstate.Manifest) error {
	for _, sm := range m.Stores {
		s := c.byName[sm.Name]
		if s == nil {
			return fmt.Errorf("%w: %q in the manifest of operator %s", ErrUnknownStore, sm.Name, m.Operator)
		}
		if Kind(sm.Kind) != s.Kind() || sm.KindVersion != s.base().version {
			return fmt.Errorf("%w: the manifest's store %q is a %q store of version %d, the registered one a %q store of version %d",
				ErrSnapshotFormat, sm.Name, sm.Kind, sm.KindVersion, s.Kind(), s.base().version)
		}
		st, n := binary.Varint(sm.Meta)
		if n <= 0 || n != len(sm.Meta) {
			return fmt.Errorf("%w: store %q: bad stream time in the manifest of operator %s", ErrSnapshotFormat, sm.Name, m.Operator)
		}
		if err := s.restoreStreamTime(st); err != nil {
			return err
		}
	}
	return nil
}

// readSnapshot reads a snapshot object, from its local copy if there is a
// whole one, and decodes it: an in-memory snapshot object, or the manifest
// of a disk-backed one.
func (c *Checkpointer) readSnapshot(ctx context.Context, ref SnapshotRef, rep *RestoreReport) (*snapshotObject, *diskstate.Manifest, error) {
	decode := func(data []byte) (*snapshotObject, *diskstate.Manifest, error) {
		if diskstate.IsManifest(data) {
			if c.disk == nil {
				return nil, nil, fmt.Errorf("%w: object %s is a disk-backed snapshot (Config.Dir); this checkpointer keeps its stores in memory",
					ErrSnapshotFormat, ref.Object)
			}
			m, err := diskstate.DecodeManifest(ref.Object, data)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %w", ErrSnapshotFormat, err)
			}
			return nil, m, nil
		}
		obj, err := decodeSnapshotObject(ref.Object, data)
		return obj, nil, err
	}
	if c.localDir != "" {
		if data, err := os.ReadFile(c.localPath(ref.Object)); err == nil {
			obj, m, err := decode(data)
			if err == nil {
				rep.LocalSnapshots++
				return obj, m, nil
			}
			c.log.Warn("statestore: local copy of a snapshot is damaged; reading the remote one", "object", ref.Object, "err", err)
		}
	}
	rc, err := c.storage.Backend().Get(ctx, ref.Object, 0, -1)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot %s: %w", ref.Object, err)
	}
	return decode(data)
}

// loadPayloads loads an in-memory snapshot object's payloads into the
// registered stores, keeping the keys of kgr.
func (c *Checkpointer) loadPayloads(ref SnapshotRef, obj *snapshotObject, kgr dstl.KeyGroupRange, rep *RestoreReport) error {
	if obj.maxP != c.cfg.MaxParallelism {
		return fmt.Errorf("%w: object %s has max parallelism %d, this operator %d", ErrSnapshotFormat, ref.Object, obj.maxP, c.cfg.MaxParallelism)
	}
	rep.Snapshots++
	rep.SnapshotBytes += ref.Size
	for _, p := range obj.stores {
		s := c.byName[p.name]
		if s == nil {
			return fmt.Errorf("%w: %q in snapshot %s", ErrUnknownStore, p.name, ref.Object)
		}
		if err := s.restorePayload(p.payload, kgr, false); err != nil {
			return fmt.Errorf("snapshot %s: %w", ref.Object, err)
		}
	}
	return nil
}

// wipeDisk empties the database of disk-backed stores, keys of stores no
// longer registered included.
func (c *Checkpointer) wipeDisk() error {
	if c.disk == nil {
		return nil
	}
	if err := c.disk.Wipe(); err != nil {
		return fmt.Errorf("statestore: restore: %w", err)
	}
	return nil
}

// contains reports whether a holds every key group of b.
func contains(a, b dstl.KeyGroupRange) bool { return a.Start <= b.Start && b.End <= a.End }

// intersect returns the key groups of both a and b, and false when they
// have none in common.
func intersect(a, b dstl.KeyGroupRange) (dstl.KeyGroupRange, bool) {
	r := dstl.KeyGroupRange{Start: max(a.Start, b.Start), End: min(a.End, b.End)}
	return r, r.Start <= r.End
}
