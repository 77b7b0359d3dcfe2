package dstl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/uploader"
)

// WithLocalRecovery gives the storage the local recovery that open opens
// (for instance duplicating.Open): when [Config.LocalRecoveryEnabled] is
// set (option "local-recovery.enabled"), [Open] and [New] call open with
// the storage's configuration and backend, use the component as the
// storage's uploader (still wrapped by [WithUploader]) and close it last;
// otherwise open is not called, so a program may pass the option always
// and leave the choice to its configuration. A configuration enabling
// local recovery without this option is refused with [ErrInvalidConfig].
func WithLocalRecovery(open uploader.OpenLocalRecovery) Option {
	return func(o *options) { o.localRecovery = open }
}

// openLocalRecovery opens the storage's local recovery with the opener of
// [WithLocalRecovery].
func openLocalRecovery(ctx context.Context, open uploader.OpenLocalRecovery, p uploader.LocalRecoveryParams) (uploader.LocalRecovery, error) {
	if open == nil {
		return nil, fmt.Errorf("%w: option \"local-recovery.enabled\" is true, but the storage was given no local recovery: pass dstl.WithLocalRecovery(duplicating.Open) (package github.com/dstlgo/dstl/duplicating)", ErrInvalidConfig)
	}
	lr, err := open(ctx, p)
	if err != nil {
		if lr != nil {
			err = errors.Join(err, lr.Close())
		}
		return nil, fmt.Errorf("dstl: local recovery in %q: %w", p.Dir, err)
	}
	if lr == nil || lr.LocalBackend() == nil {
		var err error
		if lr != nil {
			err = lr.Close()
		}
		return nil, errors.Join(err, fmt.Errorf("dstl: local recovery in %q: the component %T has no local backend", p.Dir, lr))
	}
	return lr, nil
}

// ReadReport says where [Reader.ReadPreferLocal] took each change set from.
type ReadReport struct {
	LocalSets   int   // change sets read from local copies
	RemoteSets  int   // change sets read from the backend
	LocalBytes  int64 // stored bytes of the sets read locally
	RemoteBytes int64 // stored bytes of the sets read remotely
	// Fallbacks lists the sets a local copy was named for but that were
	// read from the backend, with the reason.
	Fallbacks []Fallback
}

// Fallback is a change set read from the backend although the local handle
// named a copy: the copy was missing, unreadable or damaged.
type Fallback struct {
	SequenceNumber SequenceNumber
	LocalObject    string
	Offset         int64
	Err            error
}

// ReadPreferLocal reads like [Reader.Read], taking each change set from
// its local copy when local names one and falling back to remote, change
// set by change set, when the copy is missing, unreadable or fails its
// checksum. A set is yielded only once it decoded whole, so a fallback
// never yields a change twice. local is the [PersistResult]'s Local handle
// of the same persist as remote, or nil (then everything is read
// remotely); it must point to the same change sets at the same offsets and
// lengths, else the error wraps [ErrInvalidHandle]. The report says which
// copy each set came from; a reader without a local backend (the storage
// was opened without local recovery) reads everything remotely.
func (r *Reader) ReadPreferLocal(ctx context.Context, remote Handle, local *Handle, fn func(Change) error) (ReadReport, error) {
	var rep ReadReport
	if err := r.checkHandle(remote); err != nil {
		return rep, err
	}
	if local == nil || r.local == nil {
		err := r.Read(ctx, remote, fn)
		if err == nil {
			rep.RemoteSets = len(remote.Entries)
			rep.RemoteBytes = remote.StoredSize
		}
		return rep, err
	}
	if err := checkMirror(remote, *local); err != nil {
		return rep, err
	}
	locals := r.newLoader(r.local, true, local.Entries)
	defer locals.close()
	// The backend is asked only for what fell back: the entries of a local
	// range that could not be read, planned together, or the one entry
	// whose copy is damaged.
	fallbacks := map[int]*loader{} // by index in locals.ranges
	var singles []*loader          // of entries whose local copy is damaged
	defer func() {
		for _, l := range fallbacks {
			l.close()
		}
		for _, l := range singles {
			l.close()
		}
	}()
	remoteLoader := func(e, le HandleEntry) *loader {
		k := findRange(locals.ranges, le)
		if locals.failed[k] == nil {
			l := r.newLoader(r.backend, false, []HandleEntry{e})
			singles = append(singles, l)
			return l
		}
		if l := fallbacks[k]; l != nil {
			return l
		}
		var entries []HandleEntry
		for j, lj := range local.Entries {
			if findRange(locals.ranges, lj) == k {
				entries = append(entries, remote.Entries[j])
			}
		}
		fallbacks[k] = r.newLoader(r.backend, false, entries)
		return fallbacks[k]
	}
	// A set, where it came from, and the fallback that took it from the
	// backend, if one did: the report counts the sets fn was given.
	type read struct {
		cs       *format.ChangeSet
		local    bool
		fallback *Fallback
		needed   int64 // from the backend
	}
	err := readAhead(ctx, len(remote.Entries), !locals.cached(), func(ctx context.Context, i int, dec *format.FrameDecoder) (read, error) {
		e, le := remote.Entries[i], local.Entries[i]
		cs, _, err := locals.changeSet(ctx, dec, *local, le)
		if err == nil {
			return read{cs: cs, local: true}, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return read{}, ctxErr
		}
		fb := &Fallback{SequenceNumber: le.SequenceNumber, LocalObject: le.Object, Offset: le.Offset, Err: err}
		r.fallbacks.Add(1)
		r.log.Warn("dstl: local copy unusable, reading the change set from the backend", "log", remote.LogID,
			"sequence_number", le.SequenceNumber, "local_object", le.Object, "object", e.Object, "err", err)
		localErr := err
		cs, needed, err := remoteLoader(e, le).changeSet(ctx, dec, remote, e)
		if err != nil {
			return read{fallback: fb, needed: needed}, fmt.Errorf("%w (the local copy %q failed first: %v)", err, le.Object, localErr)
		}
		return read{cs: cs, fallback: fb, needed: needed}, nil
	}, func(i int, rd read, err error) error {
		r.needed.Add(rd.needed)
		if rd.fallback != nil {
			rep.Fallbacks = append(rep.Fallbacks, *rd.fallback)
		}
		if err != nil {
			return err
		}
		if rd.local {
			rep.LocalSets++
			rep.LocalBytes += local.Entries[i].Length
		} else {
			rep.RemoteSets++
			rep.RemoteBytes += remote.Entries[i].Length
		}
		return r.emit(rd.cs, remote.Entries[i], fn)
	})
	return rep, err
}

// checkMirror checks that local points to the change sets of remote at the
// same offsets and lengths.
func checkMirror(remote, local Handle) error {
	if err := local.Validate(); err != nil {
		return err
	}
	if local.LogID != remote.LogID || local.KeyGroups != remote.KeyGroups || len(local.Entries) != len(remote.Entries) {
		return fmt.Errorf("dstl: read: the local handle (log %s, %v, %d entries) is not of the same persist as the remote one (log %s, %v, %d entries): %w",
			local.LogID, local.KeyGroups, len(local.Entries), remote.LogID, remote.KeyGroups, len(remote.Entries), ErrInvalidHandle)
	}
	for i, le := range local.Entries {
		re := remote.Entries[i]
		if le.SequenceNumber != re.SequenceNumber || le.Offset != re.Offset || le.Length != re.Length {
			return fmt.Errorf("dstl: read: entry %d of the local handle (change set %d at offset %d, %d bytes) differs from the remote one (change set %d at offset %d, %d bytes): %w",
				i, le.SequenceNumber, le.Offset, le.Length, re.SequenceNumber, re.Offset, re.Length, ErrInvalidHandle)
		}
	}
	return nil
}

// writtenBefore reports whether name is a log object's name under prefix
// (see [objname]) whose time is before t (in whole milliseconds, the
// names' precision).
func writtenBefore(prefix, name string, t time.Time) bool {
	n := objname.Parse(prefix, name)
	return n.Kind == objname.Log && n.Time().UnixMilli() < t.UnixMilli()
}

// CleanResult says what [Storage.CleanLocalCopies] found.
type CleanResult struct {
	Kept         int   // local copies a given handle points to
	Deleted      int   // local copies deleted
	DeletedBytes int64 // their size
}

// CleanLocalCopies deletes the local copies under the job's prefix that
// were named before this storage opened (by the time in their UUIDv7
// names, see package [objname]) and that no handle in keep points to: what a
// crashed run of the job left in the local recovery directory. Call it at
// start-up with the handles being restored, remote or local ones (copies
// are matched by name: package duplicating names a copy like the object it
// copies). The copies kept stay until the first checkpoint a writer of the
// storage confirms. Files of other names are left alone; with an empty job
// id the prefix is the whole directory, which belongs to one storage
// anyway. Without local recovery it does nothing.
func (s *Storage) CleanLocalCopies(ctx context.Context, keep ...Handle) (CleanResult, error) {
	var res CleanResult
	if s.local == nil {
		return res, nil
	}
	referenced := map[string]bool{}
	for i := range keep {
		for _, e := range keep[i].Entries {
			referenced[e.Object] = true
		}
	}
	ours := s.tracker.localNames()
	var doomed []backends.ObjectInfo
	prefix := objname.JobPrefix(s.cfg.JobID)
	err := s.local.List(ctx, prefix, func(o backends.ObjectInfo) error {
		switch {
		case ours[o.Name] || !writtenBefore(prefix, o.Name, s.opened):
			// one of this storage's (tracked, or being uploaded), or no
			// object of the storage's naming
		case referenced[o.Name]:
			if s.tracker.keepRestored(o.Name, o.Name, o.Size) {
				res.Kept++
			}
		default:
			doomed = append(doomed, o)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("dstl: clean local copies: %w", err)
	}
	var errs []error
	for _, o := range doomed {
		if err := s.local.Delete(ctx, o.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Deleted++
		res.DeletedBytes += o.Size
	}
	if len(doomed) > 0 {
		s.log.Info("dstl: deleted local copies left by an earlier run", "deleted", res.Deleted, "bytes", res.DeletedBytes, "kept", res.Kept)
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("dstl: clean local copies: %w", err)
	}
	return res, nil
}

// localCopies is the storage's bookkeeping of local copies (local
// recovery). They live by rules of their own, since the storage, not the
// checkpoint owner, keeps them: a local copy is deleted once no live change
// set is stored in it (all were truncated or their writers closed) and no
// claim is left on it. A local handle returned to a writer for checkpoint N
// claims its copies for (writer, N). The writer confirming N ends its
// claims of older checkpoints (they will never be recovered from), aborting
// N ends its claims of N. So the copies of each writer's latest confirmed
// checkpoint, and of those still pending, stay. Once a writer is closed,
// its claims are the job's: any writer confirming a newer checkpoint ends
// them, as do the restored copies' claims.
//
// The methods that end a copy's last need return it, to be deleted from
// the local backend (as a uploader.StoredObject with Name, Size and LocalName). A
// localCopies is not safe for concurrent use: the tracker's lock guards it.
type localCopies struct {
	copies map[string]*localCopy // by the name of the object on the backend
	closed map[LogID]struct{}    // closed writers with claims left
}

// localCopy is a local copy of a stored object.
type localCopy struct {
	name   string // on the local backend
	size   int64
	sets   int                // live change sets stored in it
	claims map[claim]struct{} // local handles that point to it
}

// claim is a writer's checkpoint whose local handle points to a copy.
type claim struct {
	log LogID
	cp  int64
}

// restoredClaim is the claim of a local copy kept for a restore (see
// [Storage.CleanLocalCopies]): of no writer and older than any checkpoint,
// so the first checkpoint any writer confirms ends it.
var restoredClaim = claim{cp: math.MinInt64}

func newLocalCopies() localCopies {
	return localCopies{copies: map[string]*localCopy{}, closed: map[LogID]struct{}{}}
}

// add tracks localName, the copy of the object name that sets live change
// sets are stored in.
func (l *localCopies) add(name, localName string, size int64, sets int) {
	l.copies[name] = &localCopy{name: localName, size: size, sets: sets}
}

// released drops one live change set from the copy of object name, if it
// has one.
func (l *localCopies) released(name string) []uploader.StoredObject {
	lc := l.copies[name]
	if lc == nil {
		return nil
	}
	lc.sets--
	return l.dropIfUnneeded(name, lc, nil)
}

// claim records that the local handle of writer log's checkpoint cp points
// to the copies of the objects, if they all still exist, and reports
// whether it may be returned.
func (l *localCopies) claim(log LogID, objects []string, cp int64) bool {
	for _, name := range objects {
		if l.copies[name] == nil {
			return false
		}
	}
	for _, name := range objects {
		lc := l.copies[name]
		if lc.claims == nil {
			lc.claims = map[claim]struct{}{}
		}
		lc.claims[claim{log, cp}] = struct{}{}
	}
	return true
}

// confirmed ends writer log's claims of checkpoints older than cp, and
// those of closed writers and restores.
func (l *localCopies) confirmed(log LogID, cp int64) []uploader.StoredObject {
	return l.endClaims(func(c claim) bool {
		if c.log != log && c != restoredClaim {
			if _, closed := l.closed[c.log]; !closed {
				return false
			}
		}
		return c.cp < cp
	})
}

// aborted ends writer log's claims of checkpoint cp.
func (l *localCopies) aborted(log LogID, cp int64) []uploader.StoredObject {
	return l.endClaims(func(c claim) bool { return c == claim{log, cp} })
}

// writerClosed makes the claims of a closed writer the job's: a newer
// checkpoint confirmed by any writer ends them.
func (l *localCopies) writerClosed(log LogID) {
	for _, lc := range l.copies {
		for c := range lc.claims {
			if c.log == log {
				l.closed[log] = struct{}{}
				return
			}
		}
	}
}

// endClaims ends the claims that end says and returns the copies nothing
// needs any more.
func (l *localCopies) endClaims(end func(claim) bool) []uploader.StoredObject {
	var drop []uploader.StoredObject
	left := map[LogID]bool{}
	for name, lc := range l.copies {
		for c := range lc.claims {
			if end(c) {
				delete(lc.claims, c)
			} else {
				left[c.log] = true
			}
		}
		drop = l.dropIfUnneeded(name, lc, drop)
	}
	for log := range l.closed {
		if !left[log] {
			delete(l.closed, log)
		}
	}
	return drop
}

// dropIfUnneeded stops tracking the copy when nothing needs it any more and
// appends it to drop.
func (l *localCopies) dropIfUnneeded(name string, lc *localCopy, drop []uploader.StoredObject) []uploader.StoredObject {
	if lc.sets > 0 || len(lc.claims) > 0 {
		return drop
	}
	delete(l.copies, name)
	return append(drop, uploader.StoredObject{Name: name, Size: lc.size, LocalName: lc.name})
}

// keepRestored tracks a local copy that a crashed run left and that a
// handle being restored points to, until the first confirmed checkpoint.
// It reports false when the copy is tracked already.
func (l *localCopies) keepRestored(name, localName string, size int64) bool {
	if l.copies[name] != nil {
		return false
	}
	l.copies[name] = &localCopy{name: localName, size: size, claims: map[claim]struct{}{restoredClaim: {}}}
	return true
}

// names returns the names of the local copies tracked.
func (l *localCopies) names() map[string]bool {
	names := make(map[string]bool, len(l.copies))
	for _, lc := range l.copies {
		names[lc.name] = true
	}
	return names
}
