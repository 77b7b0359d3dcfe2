package uploader

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/metric"

	"github.com/dstlgo/dstl/backends"
)

// LocalRecovery is the seam of local recovery: one component that stores
// each batch on the storage's backend and, at the same offsets and under
// the name it gives in [StoredObject.LocalName] and [Result.LocalObject],
// a local copy of it (the persist results then carry a local handle), and
// that owns the backend of the local copies. The storage reads local
// handles from that backend, deletes from it the copies that no live
// change set and no claim of a local handle needs any more, and lists it
// at start-up. A storage gets one with dstl.WithLocalRecovery; package
// github.com/dstlgo/dstl/duplicating implements it.
type LocalRecovery interface {
	// Uploader stores batches: its Upload names the local copies it
	// wrote, its Discard deletes an object and, when StoredObject.LocalName
	// is set, its local copy.
	Uploader
	// LocalBackend returns the backend of the local copies.
	LocalBackend() backends.Backend
	// Close releases the component; the storage calls it last, after its
	// uploads and deletes ended.
	Close() error
}

// LocalRecoveryParams is what an [OpenLocalRecovery] builds the local
// recovery of a storage from.
type LocalRecoveryParams struct {
	// Dir is the directory of the local copies (local-recovery.dir).
	Dir string
	// Remote is the storage's backend, which decides whether an upload
	// succeeded.
	Remote backends.Backend
	// Options are the storage's settings of the default uploader, for
	// the component to encode batches as the storage would.
	Options Options
	// Logger is the storage's logger.
	Logger *slog.Logger
	// MeterProvider is the storage's OpenTelemetry meter provider.
	MeterProvider metric.MeterProvider
}

// OpenLocalRecovery opens the local recovery of a storage whose
// configuration enables it (see dstl.WithLocalRecovery).
type OpenLocalRecovery func(ctx context.Context, p LocalRecoveryParams) (LocalRecovery, error)
