package dstl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/dstlgo/dstl/dstl/objname"

	"go.opentelemetry.io/otel/metric"
)

// LocalCopier is implemented by an [Uploader] that keeps a local copy of
// every object it stores, at the same offsets, and names it in
// [StoredObject.LocalName] and [UploadResult.LocalObject] (package
// github.com/dstlgo/dstl/duplicating does). The storage deletes local copies
// and reads local handles through the backend it returns.
type LocalCopier interface {
	LocalBackend() Backend
}

// LocalRecoveryParams is what a [LocalRecoveryFactory] builds an uploader
// from.
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

// A LocalRecoveryFactory returns the uploader of a storage whose
// configuration enables local recovery. The uploader must implement
// [LocalCopier]; if it implements io.Closer, the storage closes it last.
type LocalRecoveryFactory func(ctx context.Context, p LocalRecoveryParams) (Uploader, error)

var localRecovery struct {
	sync.Mutex
	factory LocalRecoveryFactory
}

// RegisterLocalRecovery installs the factory [Open] and [New] use when
// [Config.LocalRecoveryEnabled] is set. Package
// github.com/dstlgo/dstl/duplicating registers itself on import; it panics
// if called twice or with nil.
func RegisterLocalRecovery(f LocalRecoveryFactory) {
	localRecovery.Lock()
	defer localRecovery.Unlock()
	if f == nil {
		panic("dstl: RegisterLocalRecovery with a nil factory")
	}
	if localRecovery.factory != nil {
		panic("dstl: RegisterLocalRecovery called twice")
	}
	localRecovery.factory = f
}

// openLocalRecovery returns the uploader of local recovery for cfg.
func openLocalRecovery(ctx context.Context, p LocalRecoveryParams) (Uploader, error) {
	localRecovery.Lock()
	f := localRecovery.factory
	localRecovery.Unlock()
	if f == nil {
		return nil, fmt.Errorf("%w: option \"local-recovery.enabled\" is true, but no local recovery is linked into the program: import github.com/dstlgo/dstl/duplicating", ErrInvalidConfig)
	}
	up, err := f(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("dstl: local recovery in %q: %w", p.Config.LocalRecoveryDir, err)
	}
	if _, ok := up.(LocalCopier); !ok {
		if c, ok := up.(io.Closer); ok {
			err = c.Close()
		}
		return nil, errors.Join(err, fmt.Errorf("dstl: local recovery: the uploader %T keeps no local copies (it does not implement dstl.LocalCopier)", up))
	}
	return up, nil
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
