package dstl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dstlgo/dstl/dstl/objname"

	"go.opentelemetry.io/otel/metric"
)

// LocalRecovery is the seam of local recovery: one component that stores
// each batch on the storage's backend and, at the same offsets and under
// the name it gives in [StoredObject.LocalName] and
// [UploadResult.LocalObject], a local copy of it (the persist results then
// carry a local handle), and that owns the backend of the local copies.
// The storage reads local handles from that backend
// ([Reader.ReadPreferLocal]), deletes from it the copies that no live
// change set and no claim of a local handle needs any more, and lists it at
// start-up ([Storage.CleanLocalCopies]). A storage gets one with [WithLocalRecovery];
// package github.com/dstlgo/dstl/duplicating implements it.
type LocalRecovery interface {
	// Uploader stores batches: its Upload names the local copies it
	// wrote, its Discard deletes an object and, when StoredObject.LocalName
	// is set, its local copy.
	Uploader
	// LocalBackend returns the backend of the local copies.
	LocalBackend() Backend
	// Close releases the component; the storage calls it last, after its
	// uploads and deletes ended.
	Close() error
}

// LocalRecoveryParams is what an [OpenLocalRecovery] builds the local
// recovery of a storage from.
type LocalRecoveryParams struct {
	// Config is the storage's configuration; LocalRecoveryDir names the
	// directory of the local copies.
	Config Config
	// Remote is the storage's backend, which decides whether an upload
	// succeeded.
	Remote Backend
	// Logger is the storage's logger.
	Logger *slog.Logger
	// MeterProvider is the storage's OpenTelemetry meter provider.
	MeterProvider metric.MeterProvider
}

// OpenLocalRecovery opens the local recovery of a storage whose
// configuration enables it (see [WithLocalRecovery]).
type OpenLocalRecovery func(ctx context.Context, p LocalRecoveryParams) (LocalRecovery, error)

// WithLocalRecovery gives the storage the local recovery that open opens
// (for instance duplicating.Open): when [Config.LocalRecoveryEnabled] is
// set (option "local-recovery.enabled"), [Open] and [New] call open with
// the storage's configuration and backend, use the component as the
// storage's uploader (still wrapped by [WithUploader]) and close it last;
// otherwise open is not called, so a program may pass the option always
// and leave the choice to its configuration. A configuration enabling
// local recovery without this option is refused with [ErrInvalidConfig].
func WithLocalRecovery(open OpenLocalRecovery) Option {
	return func(o *options) { o.localRecovery = open }
}

// openLocalRecovery opens the storage's local recovery with the opener of
// [WithLocalRecovery].
func openLocalRecovery(ctx context.Context, open OpenLocalRecovery, p LocalRecoveryParams) (LocalRecovery, error) {
	if open == nil {
		return nil, fmt.Errorf("%w: option \"local-recovery.enabled\" is true, but the storage was given no local recovery: pass dstl.WithLocalRecovery(duplicating.Open) (package github.com/dstlgo/dstl/duplicating)", ErrInvalidConfig)
	}
	lr, err := open(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("dstl: local recovery in %q: %w", p.Config.LocalRecoveryDir, err)
	}
	if lr == nil || lr.LocalBackend() == nil {
		var err error
		if lr != nil {
			err = lr.Close()
		}
		return nil, errors.Join(err, fmt.Errorf("dstl: local recovery in %q: the component %T has no local backend", p.Config.LocalRecoveryDir, lr))
	}
	return lr, nil
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
	var doomed []ObjectInfo
	prefix := ObjectPrefix(s.cfg.JobID)
	err := s.local.List(ctx, prefix, func(o ObjectInfo) error {
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
