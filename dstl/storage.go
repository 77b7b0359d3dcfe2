package dstl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/uploader"
)

// Storage is the changelog storage of one job in one process. It opens a
// [Writer] per operator instance, batches their uploads into shared objects,
// tracks those objects and reads handles back. It is safe for concurrent use.
type Storage struct {
	cfg         Config
	id          string
	backend     backends.Backend
	ownsBackend bool
	up          uploader.Uploader
	local       backends.Backend       // where local copies are, nil without local recovery
	recovery    uploader.LocalRecovery // the local recovery component, closed last; nil without
	opened      time.Time
	sched       *scheduler
	tracker     *tracker
	m           *metrics
	log         *slog.Logger
	readerCache *rangeCache
	buffers     bufferPool

	mu      sync.Mutex
	closed  bool
	writers map[*Writer]struct{}
}

// Option changes how a storage is built.
type Option func(*options)

type options struct {
	logger        *slog.Logger
	meterProvider metric.MeterProvider
	wrapUploader  func(uploader.Uploader) uploader.Uploader
	wrapPrepares  bool // the wrapper's Prepare, if any, is used (tests)
	localRecovery uploader.OpenLocalRecovery
	storageID     string
}

// WithLogger sets the logger; the default is [slog.Default].
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithMeterProvider sets the OpenTelemetry meter provider of the storage's
// metrics; the default is the global one (a no-op unless the program
// installs a provider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meterProvider = mp }
}

// WithUploader wraps the storage's uploader (the default one, or the local
// recovery component of [WithLocalRecovery]), for instance to inject faults
// in tests. Every attempt then calls the wrapper's Upload: a wrapped
// storage does not encode batches ahead (see [uploader.Preparer]).
func WithUploader(wrap func(uploader.Uploader) uploader.Uploader) Option {
	return func(o *options) { o.wrapUploader = wrap }
}

// WithStorageID sets the identifier written into handles (the default is the
// backend's identifier when the storage was opened by [Open], else "custom").
func WithStorageID(id string) Option { return func(o *options) { o.storageID = id } }

// Open fills in cfg's defaults ([Config.WithDefaults]), validates it,
// opens the backend it names (by cfg.Storage or by the URL scheme of
// cfg.BasePath, see [backends.Register]) and returns a storage that owns
// the backend: closing the storage closes it.
func Open(ctx context.Context, cfg Config, opts ...Option) (*Storage, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b, id, err := backends.Open(ctx, cfg.Storage, cfg.BasePath)
	if err != nil {
		return nil, err
	}
	s, err := newStorage(ctx, cfg, b, append([]Option{WithStorageID(id)}, opts...)...)
	if err != nil {
		return nil, errors.Join(err, b.Close())
	}
	s.ownsBackend = true
	return s, nil
}

// New returns a storage over a backend the caller opened and closes,
// with cfg's defaults filled in ([Config.WithDefaults]). The backend's
// base path is where objects go; cfg.BasePath and cfg.Storage are not
// used to open anything.
func New(cfg Config, backend backends.Backend, opts ...Option) (*Storage, error) {
	return newStorage(context.Background(), cfg, backend, opts...)
}

func newStorage(ctx context.Context, cfg Config, backend backends.Backend, opts ...Option) (*Storage, error) {
	if cfg.BasePath == "" {
		cfg.BasePath = "(backend given)"
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{logger: slog.Default(), storageID: "custom"}
	for _, opt := range opts {
		opt(&o)
	}
	if o.meterProvider == nil {
		o.meterProvider = otel.GetMeterProvider()
	}
	up, lr, err := buildUploader(ctx, cfg, backend, o)
	if err != nil {
		return nil, err
	}
	// Parts in dependency order: metrics, the tracker (which records into
	// them), the scheduler (which tracks objects), the gauges (which read
	// the scheduler), the storage.
	m, err := newMetrics(o.meterProvider)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("dstl: metrics: %w", err), closeIfSet(lr))
	}
	var local backends.Backend
	var localDelete func(context.Context, string) error
	if lr != nil {
		local = lr.LocalBackend()
		localDelete = local.Delete
	}
	tr := newTracker(cfg.DiscardNumThreads, up.Discard, localDelete, o.logger, m)
	// Only the storage's own uploader encodes ahead: a wrapper from
	// WithUploader that embeds it would have its Upload bypassed by the
	// Prepare it inherits.
	var prep uploader.Preparer
	if o.wrapUploader == nil || o.wrapPrepares {
		prep, _ = up.(uploader.Preparer)
	}
	sched := newScheduler(cfg, o.storageID, up, prep, tr, m, o.logger)
	if err := m.observe(sched.QueueSize, sched.InFlight); err != nil {
		sched.close()
		tr.close()
		return nil, errors.Join(fmt.Errorf("dstl: metrics: %w", err), closeIfSet(lr))
	}
	return &Storage{
		cfg:         cfg,
		id:          o.storageID,
		backend:     backend,
		up:          up,
		local:       local,
		recovery:    lr,
		opened:      time.Now(),
		sched:       sched,
		tracker:     tr,
		m:           m,
		log:         o.logger,
		readerCache: newRangeCache(cfg.CacheIdleTimeout, defaultCacheLimit),
		buffers:     newBufferPool(pooledSets(cfg), pooledChunkBytes(cfg)),
		writers:     map[*Writer]struct{}{},
	}, nil
}

// pooledSets is how many change sets' lists of changes a storage keeps for
// reuse: as many as can be in flight, full, at once (upload.max-in-flight
// over the pre-emptive persist threshold), and two more, so that a writer
// appending flat out finds recycled lists at each roll-over instead of
// allocating (and zeroing) new ones. At least two per upload thread, at
// most 64.
func pooledSets(cfg Config) int {
	n := 2 * cfg.UploadNumThreads
	if t := cfg.PreemptivePersistThreshold; t > 0 {
		n = max(n, int(min(cfg.UploadMaxInFlight/t, 62))+2)
	}
	return min(n, 64)
}

// pooledChunkBytes bounds the bytes of arena chunks a storage keeps for
// reuse: twice upload.max-in-flight (which bounds the changes waiting for
// or in an upload; the writers' open sets hold more), but at least 16 MiB
// and at most 512 MiB.
func pooledChunkBytes(cfg Config) int64 {
	return min(max(2*cfg.UploadMaxInFlight, 16<<20), 512<<20)
}

// buildUploader returns the storage's uploader: the default one, or the
// local recovery component when the configuration enables it, wrapped by
// WithUploader; lr is the component (nil without local recovery), which
// owns the backend of local copies and is closed last.
func buildUploader(ctx context.Context, cfg Config, backend backends.Backend, o options) (up uploader.Uploader, lr uploader.LocalRecovery, err error) {
	up = uploader.NewBackend(backend, uploadOptions(cfg))
	if cfg.LocalRecoveryEnabled {
		lr, err = openLocalRecovery(ctx, o.localRecovery, uploader.LocalRecoveryParams{Dir: cfg.LocalRecoveryDir, Remote: backend, Options: uploadOptions(cfg), Logger: o.logger, MeterProvider: o.meterProvider})
		if err != nil {
			return nil, nil, err
		}
		up = lr
	}
	if o.wrapUploader != nil {
		up = o.wrapUploader(up)
	}
	// A wrapper that keeps local copies of its own would have them named in
	// handles but never deleted: the storage deletes copies only through
	// the component of WithLocalRecovery.
	if other, ok := up.(uploader.LocalRecovery); ok && (lr == nil || other.LocalBackend() != lr.LocalBackend()) {
		return nil, nil, errors.Join(closeIfSet(lr), fmt.Errorf("%w: the uploader from dstl.WithUploader (%T) keeps local copies of its own: pass it with dstl.WithLocalRecovery and set \"local-recovery.enabled\", so that the storage tracks and deletes them", ErrInvalidConfig, up))
	}
	return up, lr, nil
}

// closeIfSet closes lr unless it is nil.
func closeIfSet(lr uploader.LocalRecovery) error {
	if lr == nil {
		return nil
	}
	return lr.Close()
}

// NewWriter opens a writer for one operator instance owning the key groups
// of kgr. operator names it in logs.
func (s *Storage) NewWriter(operator string, kgr KeyGroupRange) (*Writer, error) {
	if err := kgr.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("dstl: new writer: storage %w", ErrClosed)
	}
	w := newWriter(s, operator, kgr)
	s.writers[w] = struct{}{}
	return w, nil
}

func (s *Storage) forget(w *Writer) {
	s.mu.Lock()
	delete(s.writers, w)
	s.mu.Unlock()
}

// Writers returns the number of the storage's open writers: those that
// [Storage.NewWriter] opened and that are not closed. A log object holds
// the change sets of every writer of its storage, so a program that
// deletes log objects by its own writer's checkpoints alone checks that
// its writer is the only one.
func (s *Storage) Writers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.writers)
}

// Available returns a channel that is closed while the bytes queued or in
// flight are under upload.max-in-flight. A processor selects on it to stop
// pulling input while uploads catch up.
func (s *Storage) Available() <-chan struct{} { return s.sched.Available() }

// InFlight returns the bytes queued or being uploaded.
func (s *Storage) InFlight() int64 { return s.sched.InFlight() }

// ID returns the storage identifier written into handles.
func (s *Storage) ID() string { return s.id }

// Backend returns the storage's backend.
func (s *Storage) Backend() backends.Backend { return s.backend }

// Config returns the storage's configuration, its defaults filled in.
func (s *Storage) Config() Config { return s.cfg }

// Close closes every writer, fails uploads still queued, cancels those
// running, lets the discard pool delete what was released, and closes the
// backend if the storage opened it. Local copies that a pending checkpoint
// or the latest confirmed one points to stay, for a restart to recover
// from (see [Storage.CleanLocalCopies]). No goroutine of the storage outlives
// Close.
func (s *Storage) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	writers := make([]*Writer, 0, len(s.writers))
	for w := range s.writers {
		writers = append(writers, w)
	}
	s.mu.Unlock()
	for _, w := range writers {
		w.Close()
	}
	s.sched.close()
	s.tracker.close()
	s.readerCache.close()
	err := s.m.close()
	if s.recovery != nil {
		err = errors.Join(err, s.recovery.Close())
	}
	if s.ownsBackend {
		err = errors.Join(err, s.backend.Close())
	}
	return err
}
