// Package duplicating is local recovery for dstl: an uploader that writes
// every object to the storage's backend and the same bytes, under the same
// name, to a local directory, so that a process restarted on the same
// machine recovers from local files instead of the backend.
//
// A storage gets it with the option [dstl.WithLocalRecovery] and turns it
// on with the configuration options "local-recovery.enabled" and
// "local-recovery.dir" (without them the option does nothing, so a program
// may always pass it):
//
//	cfg := dstl.DefaultConfig("s3://bucket/changelog")
//	cfg.LocalRecoveryEnabled = true
//	cfg.LocalRecoveryDir = "/var/lib/myservice/dstl"
//	storage, err := dstl.Open(ctx, cfg, dstl.WithLocalRecovery(duplicating.Open))
//
// [Opener] gives the same with options, e.g. [WithLocalTimeout].
//
// The backend's write decides whether an upload succeeded. A failed local
// write never fails it, nor does a slow one hold it past [WithLocalTimeout]:
// the persist result then has no local handle, and the failure is logged
// and counted (metric dstl.local.copy_failures). A local copy whose remote
// write failed is deleted at once. Each copy has
// the offsets of the object it copies, so a [dstl.PersistResult]'s Local
// handle differs from its Remote one only in the names of the objects;
// [dstl.Reader.ReadPreferLocal] reads it, falling back to the backend per
// change set. The storage deletes the local copies that no live change set
// and no pending or latest confirmed checkpoint needs (see
// [dstl.Writer.Confirm]), and [dstl.Storage.CleanLocalCopies] deletes what
// a crashed run left.
//
// The directory belongs to one storage at a time: two processes of one job
// need two directories.
package duplicating

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/uploader"
)

// Uploader stores each batch as one object on a remote backend and as a
// local copy on a local backend. It implements [uploader.LocalRecovery].
type Uploader struct {
	remote    backends.Backend
	local     backends.Backend
	ownsLocal bool
	encoder   *uploader.Backend // encodes a batch and puts it through the tee
	log       *slog.Logger
	m         metrics
	// localTimeout bounds the wait for a local copy once the remote write
	// succeeded.
	localTimeout time.Duration
}

// Option changes how [New] and [Opener] build an uploader.
type Option func(*Uploader)

// WithLogger sets the logger; the default is [slog.Default].
func WithLogger(l *slog.Logger) Option { return func(u *Uploader) { u.log = l } }

// WithMeterProvider sets the OpenTelemetry meter provider of the
// uploader's metrics; the default is the global one.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(u *Uploader) { u.m.provider = mp }
}

// WithLocalTimeout bounds how long an upload waits for its local copy once
// the remote write has succeeded; past it the local write is cancelled, the
// copy given up (counted as a failure) and the upload completes without it.
// The default is [DefaultLocalTimeout]; it must be positive.
func WithLocalTimeout(d time.Duration) Option { return func(u *Uploader) { u.localTimeout = d } }

// DefaultLocalTimeout is the default of [WithLocalTimeout].
const DefaultLocalTimeout = 5 * time.Second

// New returns an uploader that encodes batches as o says (job prefix,
// compression, buffer size) and writes each object to remote and to local.
// The caller closes both backends. A storage uses it only as its local
// recovery component: pass it with [dstl.WithLocalRecovery] (an opener
// that returns it) and set local-recovery.enabled (the directory is then
// unused); a storage refuses it from [dstl.WithUploader], since it would
// not delete the copies.
func New(remote, local backends.Backend, o uploader.Options, opts ...Option) (*Uploader, error) {
	if remote == nil {
		return nil, errors.New("duplicating: the remote backend is nil")
	}
	if local == nil {
		return nil, errors.New("duplicating: the local backend is nil")
	}
	u := &Uploader{remote: remote, local: local, log: slog.Default(), localTimeout: DefaultLocalTimeout}
	for _, opt := range opts {
		opt(u)
	}
	if u.localTimeout <= 0 {
		return nil, fmt.Errorf("duplicating: the local timeout must be positive, not %v", u.localTimeout)
	}
	if u.m.provider == nil {
		u.m.provider = otel.GetMeterProvider()
	}
	if err := u.m.init(); err != nil {
		return nil, fmt.Errorf("duplicating: metrics: %w", err)
	}
	u.encoder = uploader.NewBackend(tee{u}, o)
	return u, nil
}

// Open opens the local recovery of a storage, as [Opener] without options
// does: pass it to a storage with dstl.WithLocalRecovery(duplicating.Open).
func Open(ctx context.Context, p uploader.LocalRecoveryParams) (uploader.LocalRecovery, error) {
	return Opener()(ctx, p)
}

// Opener returns what opens the local recovery of a storage, for
// [dstl.WithLocalRecovery]: it opens the local backend at
// p.Dir (creating it when missing), removes the
// temporary files that writes interrupted by a crash left under the job's
// prefix, and returns an [Uploader] that mirrors to it what goes to
// p.Remote, with the storage's logger and meter provider unless opts set
// others. Closing the uploader closes the local backend.
func Opener(opts ...Option) uploader.OpenLocalRecovery {
	return func(ctx context.Context, p uploader.LocalRecoveryParams) (uploader.LocalRecovery, error) {
		u, err := open(ctx, p, opts)
		if err != nil {
			return nil, err
		}
		return u, nil
	}
}

func open(ctx context.Context, p uploader.LocalRecoveryParams, extra []Option) (*Uploader, error) {
	if p.Dir == "" {
		return nil, fmt.Errorf("duplicating: %w: option \"local-recovery.dir\" is required", dstl.ErrInvalidConfig)
	}
	lb, err := local.Open(ctx, local.DefaultConfig(p.Dir))
	if err != nil {
		return nil, fmt.Errorf("duplicating: %w", err)
	}
	if _, err := lb.RemoveTemporaryFiles(ctx, objname.JobPrefix(p.Options.JobID)); err != nil {
		return nil, errors.Join(fmt.Errorf("duplicating: %w", err), lb.Close())
	}
	var opts []Option
	if p.Logger != nil {
		opts = append(opts, WithLogger(p.Logger))
	}
	if p.MeterProvider != nil {
		opts = append(opts, WithMeterProvider(p.MeterProvider))
	}
	u, err := New(p.Remote, lb, p.Options, append(opts, extra...)...)
	if err != nil {
		return nil, errors.Join(err, lb.Close())
	}
	u.ownsLocal = true
	return u, nil
}

// LocalBackend returns the backend of the local copies.
func (u *Uploader) LocalBackend() backends.Backend { return u.local }

// Upload encodes the batch into one object and writes it to both backends
// at once. It fails only when the remote write fails; the results name the
// local copy when it was written too.
func (u *Uploader) Upload(ctx context.Context, tasks []*uploader.Task) (*uploader.Output, error) {
	// The tee records the copies of this upload's objects in written, which
	// it finds in the context its Put is called with.
	written := &copied{}
	out, err := u.encoder.Upload(context.WithValue(ctx, copiedKey{}, written), tasks)
	return nameCopies(out, written), err
}

// Prepare encodes the batch into one object ahead of its upload (see
// [uploader.Preparer]); each attempt writes it to both backends, as
// Upload does.
func (u *Uploader) Prepare(ctx context.Context, tasks []*uploader.Task) (uploader.Prepared, error) {
	p, err := u.encoder.Prepare(ctx, tasks)
	if err != nil {
		return nil, err
	}
	return prepared{p}, nil
}

// prepared is a batch encoded ahead, written to both backends.
type prepared struct{ uploader.Prepared }

// Upload writes the object to both backends at once, as
// [Uploader.Upload] does.
func (p prepared) Upload(ctx context.Context) (*uploader.Output, error) {
	written := &copied{}
	out, err := p.Prepared.Upload(context.WithValue(ctx, copiedKey{}, written))
	return nameCopies(out, written), err
}

// nameCopies names in out the local copies of the objects that written
// lists.
func nameCopies(out *uploader.Output, written *copied) *uploader.Output {
	if out == nil {
		return nil
	}
	for i := range out.Objects {
		obj := &out.Objects[i]
		if !written.has(obj.Name) {
			continue
		}
		obj.LocalName = obj.Name
		for _, tr := range out.Tasks {
			rs := tr.Results
			for j := range rs {
				if rs[j].Object == obj.Name {
					rs[j].LocalObject = obj.Name
				}
			}
		}
	}
	return out
}

// copied lists the local copies one call of Upload wrote.
type copied struct {
	mu    sync.Mutex
	names []string
}

// copiedKey is the context key of an upload's [copied].
type copiedKey struct{}

func (c *copied) add(name string) {
	c.mu.Lock()
	c.names = append(c.names, name)
	c.mu.Unlock()
}

func (c *copied) has(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.names, name)
}

// Discard deletes an object from the remote backend and, when
// obj.LocalName is set, its local copy. Both are attempted; the error joins
// both failures.
func (u *Uploader) Discard(ctx context.Context, obj uploader.StoredObject) error {
	var errs []error
	if obj.Name != "" {
		errs = append(errs, u.remote.Delete(ctx, obj.Name))
	}
	if obj.LocalName != "" {
		errs = append(errs, u.local.Delete(ctx, obj.LocalName))
	}
	return errors.Join(errs...)
}

// Close closes the local backend if [Open] opened it.
func (u *Uploader) Close() error {
	if !u.ownsLocal {
		return nil
	}
	return u.local.Close()
}

// cleanupTimeout bounds the delete of a local copy that will not be used.
const cleanupTimeout = 30 * time.Second

// tee is the backend the encoder puts objects on: the remote one, with
// each Put mirrored to the local one.
type tee struct{ u *Uploader }

// Put writes the object to both backends in parallel and returns the
// remote write's error. A local copy is kept only when both succeeded, the
// local write within the local timeout of the remote one. Put always waits
// for the local write to return: the body is reused after Put.
func (t tee) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	u := t.u
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	localErr := make(chan error, 1)
	go func() { localErr <- u.local.Put(lctx, name, body, size) }()
	if err := u.remote.Put(ctx, name, body, size); err != nil {
		if <-localErr == nil {
			u.dropLocal(ctx, name, "its upload failed")
		}
		return err
	}
	timer := time.NewTimer(u.localTimeout)
	defer timer.Stop()
	var lerr error
	select {
	case lerr = <-localErr:
	case <-timer.C:
		cancel()
		if lerr = <-localErr; lerr == nil {
			u.dropLocal(ctx, name, "it was written after the local timeout")
			lerr = errors.New("written after the timeout")
		}
		lerr = fmt.Errorf("the local copy took longer than %v after the upload: %w", u.localTimeout, lerr)
	}
	if lerr != nil {
		u.m.failures.Add(ctx, 1)
		u.log.Warn("dstl: local copy failed; the upload succeeded, its persist results have no local handle", "object", name, "err", lerr)
		return nil
	}
	u.m.copies.Add(ctx, 1)
	u.m.bytes.Add(ctx, size)
	if c, ok := ctx.Value(copiedKey{}).(*copied); ok {
		c.add(name)
	}
	return nil
}

// dropLocal deletes a local copy that will not be used, even if ctx ended.
func (u *Uploader) dropLocal(ctx context.Context, name, why string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := u.local.Delete(dctx, name); err != nil {
		u.log.Warn("dstl: could not delete a local copy that will not be used", "object", name, "why", why, "err", err)
	}
}

func (t tee) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	return t.u.remote.Get(ctx, name, offset, length)
}

func (t tee) Delete(ctx context.Context, name string) error { return t.u.remote.Delete(ctx, name) }

func (t tee) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	return t.u.remote.List(ctx, prefix, fn)
}

func (t tee) Close() error { return nil }

// metrics of the local copies.
type metrics struct {
	provider metric.MeterProvider
	copies   metric.Int64Counter
	bytes    metric.Int64Counter
	failures metric.Int64Counter
}

func (m *metrics) init() error {
	meter := m.provider.Meter("github.com/dstlgo/dstl/duplicating")
	var errs [3]error
	m.copies, errs[0] = meter.Int64Counter("dstl.local.copies", metric.WithUnit("{object}"),
		metric.WithDescription("Objects copied to the local recovery directory."))
	m.bytes, errs[1] = meter.Int64Counter("dstl.local.copy_bytes", metric.WithUnit("By"),
		metric.WithDescription("Bytes copied to the local recovery directory."))
	m.failures, errs[2] = meter.Int64Counter("dstl.local.copy_failures", metric.WithUnit("{object}"),
		metric.WithDescription("Local copies that failed while the upload succeeded."))
	return errors.Join(errs[:]...)
}
