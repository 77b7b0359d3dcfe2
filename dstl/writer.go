package dstl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/uploader"
)

// Writer appends the changes of one operator instance, which owns a range
// of key groups, and persists them. It is safe for concurrent use.
//
// Changes are grouped into change sets by sequence number. The active set
// takes appends; [Writer.NextSequenceNumber] closes it (only if it holds
// changes) and returns the number of the new active set. [Writer.Persist]
// uploads every closed set from a sequence number on, reusing sets that are
// uploaded already.
//
// A failed upload is not sticky: the change sets it carried are kept and the
// next Persist uploads them again.
type Writer struct {
	storage  *Storage
	logID    LogID
	operator string
	groups   KeyGroupRange
	log      *slog.Logger
	// over is the scheduler's flag that uploads are at their in-flight
	// limit, and threshold the pre-emptive persist threshold (MaxInt64
	// when off): what Append reads on every call, kept at hand.
	over      *atomic.Bool
	threshold int64
	// tagRoom is what a change may take in a frame besides its bytes and
	// length prefix: with format version 2, its group's tag, at most
	// three bytes (a change set of key groups within [MetaKeyGroup,
	// MaxKeyGroup] has at most 32769 groups).
	tagRoom int64

	mu     sync.Mutex
	closed bool
	active *changeSet     // takes appends; its number is activeSQN
	sets   []*changeSet   // closed sets, ascending, none below lowest
	lowest SequenceNumber // sets below were truncated
	// retained holds truncated sets that a returned handle of a checkpoint
	// still pending (neither confirmed nor aborted) covers: their objects
	// stay until that checkpoint is confirmed (and owned by its owner) or
	// aborted.
	retained    []*changeSet
	unpersisted int64 // bytes appended since the last persist
	waiters     []*persistWaiter
	// latestConfirmed is the newest checkpoint confirmed: handles of
	// older ones get no local handle (their copies may be gone).
	latestConfirmed int64
	// nextCheckpoint is the checkpoint an upload before the next persist
	// is made for (see uploader.Task.Checkpoint): one past the newest
	// checkpoint the writer persisted, confirmed or reset, or what
	// SetNextCheckpoint set; 1 at first.
	nextCheckpoint int64
}

// changeSet is one sequence number's changes. Appends go to an arena of
// chunks plus an index (refs), so that appending allocates nothing once
// the storage's pool holds recycled chunks, and never moves a change.
type changeSet struct {
	sqn SequenceNumber
	// chunks are the arena: changes, each in one chunk, in append order.
	// Only tail, the last chunk, has its length kept: the changes of the
	// others are found by their refs, within the chunks' capacity.
	chunks [][]byte
	tail   []byte
	refs   []changeRef
	// firstChunk sizes the set's first chunk: what the writer's previous
	// set held.
	firstChunk int
	size       int64 // logical bytes
	framed     int64 // bytes of the frame payload, at most: changes with their length prefixes (and tags)

	state     setState
	task      *uploadTask     // the upload in progress, if any
	result    uploader.Result // where it was stored, once uploaded
	owner     *uploadTask     // the last task that carried it: only it recycles the buffers
	reported  bool            // included in a handle returned by Persist
	confirmed bool            // a checkpoint with it completed
	// pending are the checkpoints whose returned handles cover the set and
	// that were neither confirmed nor aborted yet.
	pending   map[int64]struct{}
	truncated bool
}

// changeRef locates one change in its set's arena: its chunk, and its
// offset there. A set holds at most a frame's payload
// ([format.MaxPayloadSize], 1 GiB), so 32-bit numbers do.
type changeRef struct {
	kg    int32
	n     uint32
	off   uint32
	chunk uint32
}

type setState uint8

const (
	setNotUploaded setState = iota // closed, waiting for a persist
	setUploading
	setUploaded
)

// persistWaiter is a pending Persist: it resolves when every set it
// captured is uploaded, and fails when one of them fails or is truncated.
type persistWaiter struct {
	from, to   SequenceNumber
	checkpoint int64
	aborted    bool // Reset came before the upload finished
	sets       []*changeSet
	future     *Future
}

func newWriter(s *Storage, operator string, groups KeyGroupRange) *Writer {
	w := &Writer{
		storage:  s,
		logID:    NewLogID(),
		operator: operator,
		groups:   groups,
		active:   &changeSet{},
		over:     &s.sched.over,

		threshold: s.cfg.PreemptivePersistThreshold,

		latestConfirmed: math.MinInt64,
		nextCheckpoint:  1,
	}
	if s.cfg.FormatVersion == format.Version2 {
		w.tagRoom = maxTagSize
	}
	if w.threshold <= 0 {
		w.threshold = math.MaxInt64
	}
	w.log = s.log.With("operator", operator, "log", w.logID.String())
	return w
}

// LogID returns the id of the writer's log.
func (w *Writer) LogID() LogID { return w.logID }

// KeyGroups returns the writer's key-group range.
func (w *Writer) KeyGroups() KeyGroupRange { return w.groups }

// InitialSequenceNumber returns the number of the first change set, 0.
func (w *Writer) InitialSequenceNumber() SequenceNumber { return 0 }

// Append adds a change to key group kg. The bytes are copied. While the
// storage is over its in-flight limit, Append waits for capacity until ctx
// ends; an error means the change was not appended. Past the
// preemptive-persist threshold the writer starts an upload on its own,
// which waits for capacity the same way (with the change appended; if ctx
// ends first, a later append or persist uploads it).
func (w *Writer) Append(ctx context.Context, kg int, change []byte) error {
	if !w.groups.Contains(kg) {
		return fmt.Errorf("dstl: append: key group %d is outside the writer's range %v: %w", kg, w.groups, ErrKeyGroup)
	}
	return w.append(ctx, int32(kg), change)
}

// AppendMeta adds a metadata change. Readers yield metadata before the
// changes of any key group.
func (w *Writer) AppendMeta(ctx context.Context, change []byte) error {
	return w.append(ctx, MetaKeyGroup, change)
}

func (w *Writer) append(ctx context.Context, kg int32, change []byte) error {
	if len(change) > MaxChangeSize {
		return fmt.Errorf("dstl: append: change of %d bytes exceeds the limit of %d bytes: %w", len(change), MaxChangeSize, ErrTooLarge)
	}
	if w.over.Load() {
		// Hold the caller before the change is taken, so that an error
		// always means "not appended".
		if err := w.storage.sched.waitAvailable(ctx); err != nil {
			return fmt.Errorf("dstl: append: %w", err)
		}
	}
	n := int64(len(change))
	framed := n + 1 + w.tagRoom // the length prefix: one byte up to 127
	if n > 127 {
		framed = framedSize(len(change)) + w.tagRoom
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("dstl: append: writer %w", ErrClosed)
	}
	cs := w.active
	if cs.framed+framed > format.MaxPayloadSize {
		w.rolloverLocked() // a change set must fit in one frame
		cs = w.active
	}
	cs.framed += framed
	off := len(cs.tail)
	end := off + len(change)
	if end > cap(cs.tail) || len(cs.chunks) == 0 {
		w.storage.buffers.grow(cs, len(change))
		off, end = 0, len(change)
	}
	cs.tail = cs.tail[:end]
	copy(cs.tail[off:], change)
	cs.refs = append(cs.refs, changeRef{kg: kg, n: uint32(n), off: uint32(off), chunk: uint32(len(cs.chunks) - 1)})
	cs.size += n
	w.unpersisted += n
	due := w.unpersisted >= w.threshold
	w.mu.Unlock()
	if due {
		w.persistPreemptively(ctx)
	}
	return nil
}

// MaxChangeSize is the largest change Append takes: a change set, framed,
// must fit in one frame of the object format.
const MaxChangeSize = format.MaxPayloadSize - binary.MaxVarintLen64

// maxTagSize bounds the tag of a change's group in a frame of format
// version 2: the varint of an index below 32769 (MaxKeyGroup+2 groups,
// metadata included) takes at most three bytes.
const maxTagSize = 3

// framedSize is the bytes a change of n bytes takes in a frame's payload.
func framedSize(n int) int64 { return int64(n + uvarintLen(uint64(n))) }

// NextSequenceNumber closes the active change set, if it holds changes, and
// returns the number of the active set. Callers use it to mark checkpoint
// boundaries.
func (w *Writer) NextSequenceNumber() SequenceNumber {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rolloverLocked()
	return w.active.sqn
}

func (w *Writer) rolloverLocked() {
	if len(w.active.refs) == 0 {
		return
	}
	closed := w.active
	w.sets = append(w.sets, closed)
	w.active = &changeSet{sqn: closed.sqn + 1}
	w.storage.buffers.get(w.active, closed, w.storage.cfg.PreemptivePersistThreshold)
}

// Persist captures every change set with a sequence number of at least from
// (closing the active one) and uploads those not uploaded yet; sets already
// uploaded are reused. The capture happens now; the upload runs in the
// background and the returned [Future] resolves to a handle covering
// [from, active). Persist waits for upload capacity while the storage is
// over its in-flight limit, until ctx ends.
//
// checkpointID names the checkpoint the handle is for: pass the same id to
// [Writer.Confirm] when the checkpoint completes or to [Writer.Reset] when
// it is aborted. Until then, the change sets the handle covers keep their
// objects even if they are truncated. Ids grow with time: confirming a
// checkpoint ends every older one still pending, and a handle that
// resolves after a checkpoint as new as its own was confirmed keeps
// nothing.
//
// from may not be below the truncation point ([Writer.Truncate]) nor past
// the active change set; either is an error wrapping [ErrTruncated]. A
// persist whose change sets are truncated before they are uploaded fails
// with an error wrapping ErrTruncated too.
func (w *Writer) Persist(ctx context.Context, from SequenceNumber, checkpointID int64) (*Future, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, fmt.Errorf("dstl: persist checkpoint %d: writer %w", checkpointID, ErrClosed)
	}
	if from < w.lowest {
		w.mu.Unlock()
		return nil, fmt.Errorf("dstl: persist checkpoint %d from change set %d: the log of %s was truncated up to %d: %w",
			checkpointID, from, w.logID, w.lowest, ErrTruncated)
	}
	if from > w.active.sqn {
		w.mu.Unlock()
		return nil, fmt.Errorf("dstl: persist checkpoint %d from change set %d: past the active change set %d of log %s: %w",
			checkpointID, from, w.active.sqn, w.logID, ErrTruncated)
	}
	w.rolloverLocked()
	waiter := &persistWaiter{from: from, to: w.active.sqn, checkpoint: checkpointID, future: newFuture()}
	var pending []*changeSet
	for _, cs := range w.sets {
		if cs.sqn < from {
			continue
		}
		waiter.sets = append(waiter.sets, cs)
		if cs.state == setNotUploaded {
			pending = append(pending, cs)
		}
	}
	task := w.newTaskLocked(pending, checkpointID)
	w.seeCheckpointLocked(checkpointID)
	w.unpersisted = 0
	if !w.tryResolveLocked(waiter) {
		w.waiters = append(w.waiters, waiter)
	}
	w.mu.Unlock()
	w.log.Debug("dstl: persist", "checkpoint", checkpointID, "from", from, "to", waiter.to, "upload", len(pending), "reuse", len(waiter.sets)-len(pending))
	if task != nil {
		if err := w.storage.sched.enqueue(ctx, task); err != nil {
			w.uploadFailed(task, err)
			return nil, fmt.Errorf("dstl: persist checkpoint %d: %w", checkpointID, err)
		}
	}
	return waiter.future, nil
}

// persistPreemptively uploads every closed set not uploaded yet, with no
// one waiting, so that a later checkpoint has little left to upload. Like
// a persist, it waits (until ctx ends) while the storage is at its
// in-flight limit, so that at most one upload takes the bytes in flight
// past the limit; but it marks no set for upload until there is room, so
// that the end of ctx (the appender's) fails nothing: the change that
// triggered it is appended already, and the sets stay for the next append
// past the threshold or the next persist.
func (w *Writer) persistPreemptively(ctx context.Context) {
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return
		}
		w.rolloverLocked()
		done, err := w.storage.sched.enqueueIfRoom(func() *uploadTask {
			var pending []*changeSet
			for _, cs := range w.sets {
				if cs.state == setNotUploaded {
					pending = append(pending, cs)
				}
			}
			return w.newTaskLocked(pending, w.nextCheckpoint)
		})
		if done {
			w.unpersisted = 0
		}
		w.mu.Unlock()
		if done || err != nil || w.storage.sched.waitAvailable(ctx) != nil {
			return
		}
	}
}

// newTaskLocked marks the sets as uploading and returns their upload task
// for checkpoint (see uploader.Task.Checkpoint), or nil when there are
// none.
func (w *Writer) newTaskLocked(sets []*changeSet, checkpoint int64) *uploadTask {
	if len(sets) == 0 {
		return nil
	}
	t := &uploadTask{Task: uploader.Task{LogID: w.logID, Checkpoint: max(checkpoint, 0)}, sets: sets}
	t.build = func() []*format.ChangeSet { return w.changeSets(t) }
	t.done = func(results []uploader.Result, err error) {
		if err != nil {
			w.uploadFailed(t, err)
		} else {
			w.uploadCompleted(t, results)
		}
	}
	t.release = func() { w.recycle(t) }
	for _, cs := range sets {
		cs.state = setUploading
		cs.task = t
		cs.owner = t
		t.LogicalSize += cs.size
	}
	return t
}

// changeSets builds the task's change sets for the uploader. It runs off the
// writer's lock: while a set is uploading, its task owns its buffers
// (Truncate and Close leave them alone).
func (w *Writer) changeSets(t *uploadTask) []*format.ChangeSet {
	out := make([]*format.ChangeSet, len(t.sets))
	for i, cs := range t.sets {
		out[i] = &format.ChangeSet{LogID: w.logID, SequenceNumber: uint64(cs.sqn)}
		if len(cs.refs) > 0 {
			out[i].AppendedFrom = cs
		}
	}
	return out
}

// Len is the set's number of changes (format.ChangeReader).
func (cs *changeSet) Len() int { return len(cs.refs) }

// ReadChanges gives the set's changes to the encoder in append order, each
// with its key group (format.ChangeSet.AppendedFrom), straight from the
// set's index, a batch at a time: the encoder reads them in the order of
// the arena's memory and places each in its key group's part of the frame
// as it goes. No list of all the changes is built: written at each upload
// into memory that had gone cold (or was new), such a list cost more than
// the encoder's own passes. (Ordering the changes by key group here would
// cost a pass over the set, and leave the encoder to gather each group's
// changes from all over the arena.) The changes alias the arena, which no
// one writes once the set is closed.
func (cs *changeSet) ReadChanges(i int, dst []format.KeyedChange) int {
	refs := cs.refs[min(i, len(cs.refs)):]
	refs = refs[:min(len(refs), len(dst))]
	for j, r := range refs {
		off := int(r.off)
		dst[j] = format.KeyedChange{KeyGroup: r.kg, Data: cs.chunks[r.chunk][off : off+int(r.n) : off+int(r.n)]}
	}
	return len(refs)
}

// recycle returns the buffers of the task's sets that no upload will read
// again to the storage's pool. The scheduler calls it once every attempt
// of the task's batch has ended.
func (w *Writer) recycle(t *uploadTask) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cs := range t.sets {
		if cs.owner == t && (cs.truncated || cs.state == setUploaded) {
			w.storage.buffers.put(cs)
		}
	}
}

// uploadCompleted records where the task's sets were stored. A set that was
// truncated meanwhile, or whose writer was closed, releases its reference.
func (w *Writer) uploadCompleted(t *uploadTask, results []uploader.Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, cs := range t.sets {
		r := results[i]
		if w.closed || cs.truncated || cs.task != t {
			w.storage.tracker.release(r.Object)
			continue
		}
		cs.task = nil
		cs.state = setUploaded
		cs.result = r
	}
	w.resolveWaitersLocked()
}

// uploadFailed puts the task's sets back to be uploaded by the next persist,
// and fails the persists waiting for them.
func (w *Writer) uploadFailed(t *uploadTask, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	failed := map[*changeSet]bool{}
	for _, cs := range t.sets {
		if cs.task != t {
			continue
		}
		cs.task = nil
		cs.state = setNotUploaded
		failed[cs] = true
	}
	if !w.closed {
		w.log.Warn("dstl: upload failed; the change sets are kept for the next persist", "sets", len(failed), "err", err)
	}
	w.waiters = slices.DeleteFunc(w.waiters, func(pw *persistWaiter) bool {
		for _, cs := range pw.sets {
			if failed[cs] {
				pw.future.resolve(PersistResult{}, fmt.Errorf("dstl: persist [%d, %d) of log %s: %w", pw.from, pw.to, w.logID, err))
				return true
			}
		}
		return false
	})
}

func (w *Writer) resolveWaitersLocked() {
	w.waiters = slices.DeleteFunc(w.waiters, w.tryResolveLocked)
}

// tryResolveLocked resolves the waiter if all its sets are uploaded (or
// fails it if one was truncated) and reports whether it is done.
func (w *Writer) tryResolveLocked(pw *persistWaiter) bool {
	for _, cs := range pw.sets {
		if cs.truncated {
			pw.future.resolve(PersistResult{}, fmt.Errorf("dstl: persist [%d, %d) of log %s: change set %d was truncated before it was uploaded: %w",
				pw.from, pw.to, w.logID, cs.sqn, ErrTruncated))
			return true
		}
		if cs.state != setUploaded {
			return false
		}
	}
	h := Handle{StorageID: w.storage.id, LogID: w.logID, KeyGroups: w.groups, Entries: make([]HandleEntry, 0, len(pw.sets))}
	// A checkpoint no newer than the latest confirmed one can never be
	// confirmed any more (it was, or a newer one subsumed it): its handle
	// keeps no set, as if it had been aborted.
	keep := !pw.aborted && (pw.checkpoint > w.latestConfirmed || w.latestConfirmed == math.MinInt64)
	// An empty handle has an (empty) local twin only with local recovery.
	local := !pw.aborted && (len(pw.sets) > 0 || w.storage.local != nil)
	for _, cs := range pw.sets {
		local = local && cs.result.LocalObject != ""
		r := cs.result
		h.Entries = append(h.Entries, HandleEntry{Object: r.Object, Offset: r.Offset, Length: r.Length, SequenceNumber: cs.sqn, LogicalSize: r.LogicalSize})
		h.LogicalSize += r.LogicalSize
		h.StoredSize += r.Length
		if !cs.reported {
			h.IncrementalSize += r.Length
			cs.reported = true
		}
		if !cs.confirmed && keep {
			if cs.pending == nil {
				cs.pending = map[int64]struct{}{}
			}
			cs.pending[pw.checkpoint] = struct{}{}
		}
	}
	res := PersistResult{Remote: h, From: pw.from, To: pw.to}
	if local {
		res.Local = w.localHandleLocked(pw, h)
	}
	pw.future.resolve(res, nil)
	return true
}

// localHandleLocked returns the handle of the local copies of the waiter's
// sets, h with their names, once the checkpoint claimed every copy; nil
// when one is gone.
func (w *Writer) localHandleLocked(pw *persistWaiter, h Handle) *Handle {
	objects := make([]string, 0, len(pw.sets))
	for _, cs := range pw.sets {
		if n := len(objects); n == 0 || objects[n-1] != cs.result.Object {
			objects = append(objects, cs.result.Object)
		}
	}
	if pw.checkpoint < w.latestConfirmed || !w.storage.tracker.claimLocal(w.logID, objects, pw.checkpoint) {
		return nil
	}
	local := h
	local.Entries = slices.Clone(h.Entries)
	for i, cs := range pw.sets {
		local.Entries[i].Object = cs.result.LocalObject
	}
	return &local
}

// Confirm tells the writer that checkpoint checkpointID, covering
// [from, to) (pass the [PersistResult]'s From and To), completed: the
// objects holding the change sets its handle covers now belong to the
// checkpoint owner, and the storage never deletes them. Sets in the range
// that no handle of the checkpoint covered are left alone. Checkpoints older
// than checkpointID that are still pending will never complete (a newer one
// subsumes them); sets only they kept are released. With local recovery,
// local copies that only the writer's older checkpoints' local handles (or
// those of closed writers) point to, and that hold no live change set, are
// deleted.
//
// A range that no persist can have returned (from past to, or to past the
// active change set) is an error wrapping [ErrTruncated], and nothing is
// confirmed.
func (w *Writer) Confirm(from, to SequenceNumber, checkpointID int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.acceptRangeLocked("confirm", from, to, checkpointID); err != nil {
		return err
	}
	n := 0
	for _, cs := range w.sets {
		if cs.sqn >= from && cs.sqn < to && cs.state == setUploaded && cs.coveredBy(checkpointID) {
			n += w.confirmLocked(cs, checkpointID)
		}
	}
	for _, cs := range w.retained {
		if cs.sqn >= from && cs.sqn < to && cs.coveredBy(checkpointID) {
			n += w.confirmLocked(cs, checkpointID)
		}
	}
	for _, cs := range w.sets {
		for cp := range cs.pending {
			if cp < checkpointID {
				delete(cs.pending, cp)
			}
		}
	}
	w.releaseRetainedLocked(func(cs *changeSet) {
		for cp := range cs.pending {
			if cp < checkpointID {
				delete(cs.pending, cp)
			}
		}
	})
	w.latestConfirmed = max(w.latestConfirmed, checkpointID)
	w.storage.tracker.confirmCheckpoint(w.logID, checkpointID)
	w.log.Debug("dstl: confirm", "checkpoint", checkpointID, "from", from, "to", to, "sets", n)
	return nil
}

// SetNextCheckpoint tells the writer that its next checkpoint is id or a
// later one. Each object records in its name the checkpoint it was made
// for: the one a Persist uploads for, or, for a change set uploaded before
// its persist (the pre-emptive persist), the checkpoint after the newest
// one the writer persisted, confirmed or reset, and at least the one set
// here. The deletion rule of package collect never deletes an object made
// for a checkpoint that may still complete, however old. After a restore,
// set the restored checkpoint's ID plus one (statestore's Checkpointer
// does); a writer that never learns it names its first uploads for
// checkpoint 1. A smaller id than the writer's changes nothing.
func (w *Writer) SetNextCheckpoint(id int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nextCheckpoint = max(w.nextCheckpoint, id)
}

// NextCheckpoint returns the checkpoint the writer's uploads before its
// next persist are made for (see SetNextCheckpoint).
func (w *Writer) NextCheckpoint() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nextCheckpoint
}

// seeCheckpointLocked records a checkpoint the writer persisted,
// confirmed or reset: its next uploads are for a later one.
func (w *Writer) seeCheckpointLocked(id int64) {
	if id < math.MaxInt64 {
		w.nextCheckpoint = max(w.nextCheckpoint, id+1)
	}
}

// acceptRangeLocked checks that [from, to) is a range a persist can have
// returned for checkpoint checkpointID (from at most to, and to at most
// the active change set), the range that op confirms or resets; with a
// good range, it records the checkpoint (see seeCheckpointLocked).
func (w *Writer) acceptRangeLocked(op string, from, to SequenceNumber, checkpointID int64) error {
	switch {
	case from > to:
		return fmt.Errorf("dstl: %s checkpoint %d of log %s: range [%d, %d) starts past its end: %w", op, checkpointID, w.logID, from, to, ErrTruncated)
	case to > w.active.sqn:
		return fmt.Errorf("dstl: %s checkpoint %d of log %s: range [%d, %d) ends past the active change set %d: %w",
			op, checkpointID, w.logID, from, to, w.active.sqn, ErrTruncated)
	}
	w.seeCheckpointLocked(checkpointID)
	return nil
}

// coveredBy reports whether a handle returned for the checkpoint covers the
// set (or a checkpoint confirmed it already).
func (cs *changeSet) coveredBy(checkpointID int64) bool {
	_, ok := cs.pending[checkpointID]
	return ok || cs.confirmed
}

func (w *Writer) confirmLocked(cs *changeSet, checkpointID int64) int {
	delete(cs.pending, checkpointID)
	if cs.confirmed {
		return 0
	}
	cs.confirmed = true
	w.storage.tracker.confirm(cs.result.Object)
	return 1
}

// Reset tells the writer that checkpoint checkpointID, covering [from, to)
// (the [PersistResult]'s From and To), was aborted. Uploaded change sets
// stay for the next checkpoint to reuse; truncated ones that only this
// checkpoint kept are released. With local recovery, local copies that
// only this checkpoint's local handles point to, and that hold no live
// change set, are deleted.
//
// A range that no persist can have returned (from past to, or to past the
// active change set) is an error wrapping [ErrTruncated], and nothing is
// reset.
func (w *Writer) Reset(from, to SequenceNumber, checkpointID int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.acceptRangeLocked("reset", from, to, checkpointID); err != nil {
		return err
	}
	for _, pw := range w.waiters {
		if pw.checkpoint == checkpointID {
			pw.aborted = true // its handle will not keep the sets
		}
	}
	for _, cs := range w.sets {
		if cs.sqn >= from && cs.sqn < to {
			delete(cs.pending, checkpointID)
		}
	}
	w.releaseRetainedLocked(func(cs *changeSet) {
		if cs.sqn >= from && cs.sqn < to {
			delete(cs.pending, checkpointID)
		}
	})
	w.storage.tracker.abortCheckpoint(w.logID, checkpointID)
	w.log.Debug("dstl: reset", "checkpoint", checkpointID, "from", from, "to", to)
	return nil
}

// releaseRetainedLocked applies update to every retained set, then releases
// those that no pending checkpoint needs any more.
func (w *Writer) releaseRetainedLocked(update func(*changeSet)) {
	w.retained = slices.DeleteFunc(w.retained, func(cs *changeSet) bool {
		update(cs)
		if cs.confirmed {
			w.storage.tracker.release(cs.result.Object) // owned: never deleted
			return true
		}
		if len(cs.pending) == 0 {
			w.storage.tracker.release(cs.result.Object)
			return true
		}
		return false
	})
}

// Truncate releases every change set below to: their state was
// materialised elsewhere. Objects that no change set refers to any more are
// deleted, unless a confirmed checkpoint owns them. A set that a returned
// handle of a still pending checkpoint covers keeps its object until that
// checkpoint is confirmed or aborted. Persists still waiting for a
// truncated set fail. to may not be past the active change set.
func (w *Writer) Truncate(to SequenceNumber) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if to > w.active.sqn {
		return fmt.Errorf("dstl: truncate log %s to %d: past the active change set %d: %w", w.logID, to, w.active.sqn, ErrTruncated)
	}
	if to <= w.lowest {
		return nil
	}
	keep := w.sets[:0]
	for _, cs := range w.sets {
		if cs.sqn < to {
			w.dropLocked(cs)
		} else {
			keep = append(keep, cs)
		}
	}
	clear(w.sets[len(keep):])
	w.sets = keep
	w.lowest = to
	w.resolveWaitersLocked()
	return nil
}

// dropLocked forgets a set: an uploaded set releases its object now (or,
// when a pending checkpoint covers it, once that checkpoint ends), an
// uploading one when its result arrives.
func (w *Writer) dropLocked(cs *changeSet) {
	cs.truncated = true
	switch cs.state {
	case setUploaded:
		if !cs.confirmed && len(cs.pending) > 0 {
			w.retained = append(w.retained, cs)
			return
		}
		w.storage.tracker.release(cs.result.Object)
	case setNotUploaded:
		w.storage.buffers.put(cs)
	case setUploading:
		// The upload owns the buffers; the scheduler recycles them.
	}
}

// TruncateAndClose drops the tail of the log, every change set from from
// on, and closes the writer. Objects of the dropped sets are released as by
// [Writer.Truncate].
func (w *Writer) TruncateAndClose(from SequenceNumber) error {
	w.mu.Lock()
	keep := w.sets[:0]
	for _, cs := range w.sets {
		if cs.sqn >= from {
			w.dropLocked(cs)
		} else {
			keep = append(keep, cs)
		}
	}
	clear(w.sets[len(keep):])
	w.sets = keep
	w.mu.Unlock()
	return w.Close()
}

// Close closes the writer: appends and persists fail from now on, pending
// persists fail with ErrClosed, and every change set is released except
// those a returned handle of a still pending checkpoint covers (their
// owner may yet confirm it; if not, a garbage collection of the job's
// prefix disposes of them) and those a
// confirmed checkpoint owns. Closing twice is not an error.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	for _, cs := range w.sets {
		w.dropLocked(cs)
	}
	w.sets, w.retained = nil, nil
	w.storage.buffers.put(w.active)
	w.active = &changeSet{sqn: w.active.sqn}
	for _, pw := range w.waiters {
		pw.future.resolve(PersistResult{}, fmt.Errorf("dstl: persist [%d, %d) of log %s: writer %w", pw.from, pw.to, w.logID, ErrClosed))
	}
	w.waiters = nil
	w.storage.tracker.writerClosed(w.logID)
	w.storage.forget(w)
	return nil
}

// PersistResult is what a persist resolves to.
type PersistResult struct {
	// From and To delimit the change sets the handles cover, [From, To):
	// what to pass to [Writer.Confirm] or [Writer.Reset] for the checkpoint.
	From, To SequenceNumber
	// Remote points to the change sets on the storage's backend.
	Remote Handle
	// Local points to local copies of the same change sets, at the same
	// offsets, when the storage keeps local copies (local recovery) and
	// every set has one; nil otherwise. Read both with
	// [Reader.ReadPreferLocal].
	Local *Handle
}

// Future is the pending result of [Writer.Persist]. Wait for it with
// [Future.Wait] or select on [Future.Done].
type Future struct {
	done   chan struct{}
	once   sync.Once
	result PersistResult
	err    error
}

func newFuture() *Future { return &Future{done: make(chan struct{})} }

func (f *Future) resolve(r PersistResult, err error) {
	f.once.Do(func() {
		f.result, f.err = r, err
		close(f.done)
	})
}

// Done returns a channel closed once the result is known.
func (f *Future) Done() <-chan struct{} { return f.done }

// Wait returns the result once it is known, or ctx's error if ctx ends
// first (the upload goes on).
func (f *Future) Wait(ctx context.Context) (PersistResult, error) {
	select {
	case <-f.done:
		return f.result, f.err
	case <-ctx.Done():
		return PersistResult{}, ctx.Err()
	}
}

// ErrNotDone is returned by [Future.Result] before the result is known.
var ErrNotDone = errors.New("dstl: persist not done")

// Result returns the result if it is known, or ErrNotDone.
func (f *Future) Result() (PersistResult, error) {
	select {
	case <-f.done:
		return f.result, f.err
	default:
		return PersistResult{}, ErrNotDone
	}
}
