// Package gcs is the dstl backend for Google Cloud Storage, built on
// cloud.google.com/go/storage.
//
// It registers itself in init under the identifier "gcs" and the URL scheme
// "gs"; import it for its side effect to make it available to
// [backends.Open]:
//
//	import _ "github.com/dstlgo/dstl/backends/gcs"
//
// Base paths are "gs://bucket/prefix" URLs; see [ParseURL] for the query
// parameters. Programs that configure the backend in code use [Open] with a
// [Config], which may carry a ready *storage.Client.
//
// Put is create-only: it writes with the precondition ifGenerationMatch=0
// (storage.Conditions{DoesNotExist: true}), so an existing object is never
// replaced and the loser of a race fails with [backends.ErrExists]. An object
// of at most [Config.PartSize] bytes is read whole first (so a short or
// failing body is found before anything is sent) and goes up in one
// request with its CRC32C; a larger one
// in a resumable upload of PartSize chunks, sent one after another (a
// resumable session takes its chunks in order, so there are no parallel
// parts). An object becomes visible only when its last chunk is committed;
// a failed or cancelled Put cancels the upload's context before that, so
// nothing is visible (the abandoned session expires on the service's side).
//
// Retries: the client's own retries are switched off for single requests,
// which go through a loop with a timeout per attempt and exponential
// backoff with jitter. A resumable upload is retried chunk by chunk by the
// client, with a retry policy set on the object handle: the same number of
// attempts, backoff and retryable errors, each chunk bounded by the
// timeout. Only throttling (429), 408, 5xx, connection errors and
// timeouts are retried, never 401/403/404/412.
package gcs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/gate"
	"github.com/dstlgo/dstl/backends/internal/request"
	"github.com/dstlgo/dstl/backends/internal/urlparam"
	"github.com/dstlgo/dstl/dstl"
)

// ID is the backend's identifier in the registry and in its errors.
const ID = "gcs"

// Scheme is the URL scheme of the backend's base paths.
const Scheme = "gs"

func init() {
	backends.Register(ID, func(ctx context.Context, basePath string) (backends.Backend, error) {
		return New(ctx, basePath)
	}, Scheme)
}

// Backend is a [backends.Backend] on a Google Cloud Storage bucket. It is safe
// for concurrent use.
type Backend struct {
	cfg       Config
	client    *storage.Client
	ownClient bool
	transport *http.Transport // closed on Close, when the backend made it
	bucket    *storage.BucketHandle
	policy    request.Policy

	calls gate.Gate // Close waits for the calls in progress
}

var _ backends.Backend = (*Backend)(nil)

// New opens a backend from a gs:// base path (see [ParseURL]). It is the
// factory the backend registers.
func New(ctx context.Context, basePath string) (*Backend, error) {
	cfg, err := ParseURL(basePath)
	if err != nil {
		return nil, urlparam.Invalid(err)
	}
	return Open(ctx, cfg)
}

// Open opens a backend with cfg. It does not check that the bucket exists.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("gcs: open bucket %q: %w", cfg.Bucket, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, urlparam.Invalid(err)
	}
	if cfg.Prefix != "" && !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultPageSize
	}
	b := &Backend{cfg: cfg, client: cfg.Client, policy: cfg.policy()}
	if b.client == nil {
		var opts []option.ClientOption
		if cfg.Endpoint != "" {
			opts = append(opts, option.WithEndpoint(strings.TrimSuffix(cfg.Endpoint, "/")+"/storage/v1/"))
		}
		switch {
		case cfg.CredentialsFile != "":
			opts = append(opts, option.WithAuthCredentialsFile(option.ServiceAccount, cfg.CredentialsFile))
		case cfg.Anonymous || cfg.Endpoint != "":
			// No credentials: a transport of our own, whose idle
			// connections Close closes, with a bound on the wait for
			// each answer.
			b.transport = http.DefaultTransport.(*http.Transport).Clone()
			opts = append(opts, option.WithoutAuthentication(),
				option.WithHTTPClient(&http.Client{Transport: request.CountSent(request.ResponseTimeout(b.transport, cfg.headerTimeout()))}))
		}
		opts = append(opts, cfg.ClientOptions...)
		c, err := storage.NewClient(ctx, opts...)
		if err != nil {
			b.closeTransport()
			return nil, fmt.Errorf("gcs: open bucket %q: %w", cfg.Bucket, err)
		}
		b.client, b.ownClient = c, true
	}
	b.bucket = b.client.Bucket(cfg.Bucket)
	return b, nil
}

// Client returns the storage client the backend sends its requests with,
// for programs that compare the backend with the SDK used directly (such
// as "dstl bench") or that need a call the backend does not make.
func (b *Backend) Client() *storage.Client { return b.client }

// Config returns the backend's configuration (with the prefix as used).
func (b *Backend) Config() Config { return b.cfg }

// Close waits for running calls to return and closes the client, unless it
// came with the Config. Later calls fail with [dstl.ErrClosed]; closing
// twice is not an error.
func (b *Backend) Close() error {
	if !b.calls.Close() {
		return nil
	}
	var err error
	if b.ownClient {
		err = b.client.Close()
	}
	b.closeTransport()
	if err != nil {
		return fmt.Errorf("gcs: close: %w", err)
	}
	return nil
}

func (b *Backend) closeTransport() {
	if b.transport != nil {
		b.transport.CloseIdleConnections()
	}
}

// begin registers a running call; it fails once the backend is closed.
func (b *Backend) begin(op, name string) error {
	if !b.calls.Enter() {
		return b.newError(op, name, dstl.ErrClosed)
	}
	return nil
}

// object returns the handle of name under the prefix, without the client's
// own retries.
func (b *Backend) object(name string) *storage.ObjectHandle {
	return b.bucket.Object(b.cfg.Prefix + name).Retryer(storage.WithPolicy(storage.RetryNever))
}

// Put stores size bytes of body under name, create-only and atomically;
// see the package documentation.
func (b *Backend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) (err error) {
	if err := backends.CheckObjectName(name); err != nil {
		return b.newError("put", name, err)
	}
	if size < 0 {
		return b.newError("put", name, fmt.Errorf("negative size %d", size))
	}
	if body == nil {
		return b.newError("put", name, errors.New("nil body"))
	}
	if err := b.begin("put", name); err != nil {
		return err
	}
	defer b.calls.Leave()
	defer func() { err = b.wrap("put", name, b.bucketNotFound(ctx, err)) }()
	if err := ctx.Err(); err != nil {
		return err
	}
	if size > b.cfg.PartSize {
		return b.putResumable(ctx, name, body, size)
	}
	// A small object is read whole first, so that a short or failing body
	// is found before anything is sent, and its CRC32C goes with it: the
	// service refuses an upload whose bytes do not match.
	data := make([]byte, size)
	if n, err := body.ReadAt(data, 0); n < len(data) {
		if err == nil || err == io.EOF {
			return fmt.Errorf("body ended after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
		}
		return fmt.Errorf("read body: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	crc := crc32.Checksum(data, castagnoli)
	attempt := 0
	err = request.Do(ctx, b.policy.ForBody(size), retryable, func(ctx context.Context) error {
		attempt++
		return b.write(ctx, b.object(name), bytes.NewReader(data), size, 0, &crc)
	})
	if attempt > 1 && isCode(err, http.StatusPreconditionFailed) && b.sameObject(ctx, name, size, crc) {
		// An earlier attempt stored the object, but its answer was lost.
		return nil
	}
	return err
}

// putResumable uploads in chunks of the part size; the client retries each
// chunk under the backend's policy.
func (b *Backend) putResumable(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	o := b.bucket.Object(b.cfg.Prefix+name).Retryer(
		storage.WithPolicy(storage.RetryAlways), // create-only, so idempotent
		storage.WithMaxAttempts(b.cfg.MaxAttempts),
		storage.WithBackoff(gax.Backoff{Initial: max(b.cfg.InitialBackoff, time.Millisecond), Max: max(b.cfg.MaxBackoff, time.Millisecond), Multiplier: 2}),
		storage.WithErrorFunc(retryable),
	)
	if b.cfg.Timeout > 0 {
		// A bound on the whole upload: every chunk, and the start of the
		// session, may use all its attempts. (A client the backend builds
		// for an endpoint also bounds each answer's wait by the timeout;
		// a client built for Application Default Credentials relies on
		// this bound for the start of the session.)
		chunks := (size + b.cfg.PartSize - 1) / b.cfg.PartSize
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(chunks+1)*b.chunkRetryDeadline())
		defer cancel()
	}
	return b.write(ctx, o, body, size, int(b.cfg.PartSize), nil)
}

// chunkRetryDeadline is the time one chunk may take, all its attempts
// included.
func (b *Backend) chunkRetryDeadline() time.Duration {
	n := time.Duration(b.cfg.MaxAttempts)
	return n*b.chunkTimeout() + n*b.cfg.MaxBackoff
}

// chunkTimeout bounds one attempt of one chunk of a resumable upload: the
// request timeout, grown with the chunk (see [request.Policy.ForBody]).
func (b *Backend) chunkTimeout() time.Duration {
	return b.policy.ForBody(b.cfg.PartSize).Timeout
}

// write sends one upload of body with the DoesNotExist precondition, in one
// request (chunk 0) or resumably. On any error it cancels the upload before
// closing the writer, so that nothing is committed.
func (b *Backend) write(ctx context.Context, o *storage.ObjectHandle, body io.ReaderAt, size int64, chunk int, crc *uint32) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := o.If(storage.Conditions{DoesNotExist: true}).NewWriter(wctx)
	w.ChunkSize = chunk
	w.ForceEmptyContentType = true
	w.ContentType = "application/octet-stream"
	if crc != nil {
		w.CRC32C, w.SendCRC32C = *crc, true
	}
	if chunk > 0 {
		w.ChunkTransferTimeout = b.chunkTimeout()
		if b.cfg.Timeout > 0 {
			w.ChunkRetryDeadline = b.chunkRetryDeadline()
		}
	}
	n, err := io.Copy(w, &bodyReader{r: io.NewSectionReader(body, 0, size)})
	if err == nil && n < size {
		err = fmt.Errorf("body ended after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		// Cancel first, then close the writer with the error, not with
		// Close: Close would end the request's body and commit what was
		// sent so far.
		cancel()
		_ = w.CloseWithError(err) //nolint:staticcheck // aborts the pipe at once, see above
		return err
	}
	return w.Close()
}

// bodyReader marks errors of the body, so that they are not retried as
// transport errors.
type bodyReader struct{ r io.Reader }

func (r *bodyReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = &bodyError{err}
	}
	return n, err
}

type bodyError struct{ err error }

func (e *bodyError) Error() string { return "read body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// sameObject reports whether the object stored under name has the size and
// CRC32C of the body, i.e. was stored by an earlier attempt of this Put.
func (b *Backend) sameObject(ctx context.Context, name string, size int64, crc uint32) bool {
	var attrs *storage.ObjectAttrs
	err := request.Do(ctx, b.policy, retryable, func(ctx context.Context) error {
		var err error
		attrs, err = b.object(name).Attrs(ctx)
		return err
	})
	if err != nil || attrs.Size != size {
		return false
	}
	return crc == attrs.CRC32C
}

// Get returns length bytes of the object from offset on (-1: to the end).
// See [backends.Backend.Get]. Reads from the returned reader fail once ctx is
// done.
func (b *Backend) Get(ctx context.Context, name string, offset, length int64) (_ io.ReadCloser, err error) {
	if err := backends.CheckObjectName(name); err != nil {
		return nil, b.newError("get", name, err)
	}
	if offset < 0 || length < -1 {
		return nil, b.newError("get", name, fmt.Errorf("%w: offset %d, length %d", backends.ErrInvalidRange, offset, length))
	}
	if err := b.begin("get", name); err != nil {
		return nil, err
	}
	defer b.calls.Leave()
	defer func() { err = b.wrap("get", name, err) }()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if length == 0 {
		return b.emptyRead(ctx, name, offset)
	}
	if length > math.MaxInt64-offset {
		// Past any possible end, and offset+length would overflow in the
		// client's range header: read to the end.
		length = -1
	}
	// The reader lives past the attempt, so the attempt's timeout is a
	// timer that cancels its context only until the answer is there.
	var rd *reader
	p := b.policy
	p.Timeout = 0
	err = request.Do(ctx, p, retryable, func(_ context.Context) error {
		rctx, cancel := context.WithCancel(ctx)
		var timer *time.Timer
		if d := b.cfg.headerTimeout(); d > 0 {
			timer = time.AfterFunc(d, cancel)
		}
		r, err := b.object(name).NewRangeReader(rctx, offset, length)
		if timer != nil && !timer.Stop() {
			if err == nil {
				_ = r.Close()
			}
			cancel()
			return errAttemptTimeout
		}
		if err != nil {
			cancel()
			return err
		}
		rd = &reader{ctx: ctx, b: b, name: name, r: r, cancel: cancel}
		return nil
	})
	if isCode(err, http.StatusRequestedRangeNotSatisfiable) {
		// The service answers 416 for an offset at the end too, which is
		// an empty read.
		return b.emptyRead(ctx, name, offset)
	}
	if err = b.bucketNotFound(ctx, err); err != nil {
		return nil, err
	}
	return rd, nil
}

// bucketNotFound returns err, marked with storage.ErrBucketNotExist when
// it is a 404 answer (an object, or the bucket, not found) and the bucket
// is known not to exist.
func (b *Backend) bucketNotFound(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, storage.ErrBucketNotExist) ||
		!errors.Is(err, storage.ErrObjectNotExist) && !isCode(err, http.StatusNotFound) || !b.bucketMissing(ctx) {
		return err
	}
	return fmt.Errorf("%w: %w", storage.ErrBucketNotExist, err)
}

// bucketMissing reports whether the bucket is known not to exist: the
// service answers 404 to a read of an object of a missing bucket too. One
// request, without retries; any other outcome is false.
func (b *Backend) bucketMissing(ctx context.Context) bool {
	if d := b.cfg.headerTimeout(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	_, err := b.bucket.Retryer(storage.WithPolicy(storage.RetryNever)).Attrs(ctx)
	return errors.Is(err, storage.ErrBucketNotExist)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errAttemptTimeout = fmt.Errorf("request timed out: %w", context.DeadlineExceeded)

// emptyRead checks that the object exists and that offset is not past its
// end, and returns an empty reader.
func (b *Backend) emptyRead(ctx context.Context, name string, offset int64) (io.ReadCloser, error) {
	var attrs *storage.ObjectAttrs
	err := request.Do(ctx, b.policy, retryable, func(ctx context.Context) error {
		var err error
		attrs, err = b.object(name).Attrs(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	if offset > attrs.Size {
		return nil, fmt.Errorf("%w: offset %d past the end of the %d-byte object", backends.ErrInvalidRange, offset, attrs.Size)
	}
	return &reader{ctx: ctx, b: b, name: name, cancel: func() {}}, nil
}

// reader is the io.ReadCloser Get returns.
type reader struct {
	ctx    context.Context
	b      *Backend
	name   string
	r      *storage.Reader // nil: empty
	cancel context.CancelFunc
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, r.b.wrap("get", r.name, err)
	}
	if r.r == nil {
		return 0, io.EOF
	}
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		if cerr := r.ctx.Err(); cerr != nil {
			err = cerr
		}
		err = r.b.wrap("get", r.name, err)
	}
	return n, err
}

func (r *reader) Close() error {
	defer r.cancel()
	if r.r == nil {
		return nil
	}
	if err := r.r.Close(); err != nil {
		return r.b.wrap("get", r.name, err)
	}
	return nil
}

// Delete removes the object; a missing object is not an error.
func (b *Backend) Delete(ctx context.Context, name string) (err error) {
	if err := backends.CheckObjectName(name); err != nil {
		return b.newError("delete", name, err)
	}
	if err := b.begin("delete", name); err != nil {
		return err
	}
	defer b.calls.Leave()
	defer func() { err = b.wrap("delete", name, err) }()
	if err := ctx.Err(); err != nil {
		return err
	}
	err = request.Do(ctx, b.policy, retryable, func(ctx context.Context) error {
		return b.object(name).Delete(ctx)
	})
	if errors.Is(err, storage.ErrObjectNotExist) || isCode(err, http.StatusNotFound) {
		return nil // absent, or deleted by an attempt whose answer was lost
	}
	return err
}

// List calls fn for every object whose name starts with prefix, in lexical
// order of names (the service's order), with names relative to the
// backend's prefix. Each page is one request, retried on its own.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) (err error) {
	if fn == nil {
		return b.newError("list", prefix, errors.New("nil callback"))
	}
	if err := b.begin("list", prefix); err != nil {
		return err
	}
	defer b.calls.Leave()
	q := &storage.Query{Prefix: b.cfg.Prefix + prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return b.wrap("list", prefix, err)
	}
	token := ""
	for {
		if err := ctx.Err(); err != nil {
			return b.wrap("list", prefix, err)
		}
		var page []*storage.ObjectAttrs
		var next string
		err := request.Do(ctx, b.policy, retryable, func(ctx context.Context) error {
			page = page[:0]
			it := b.bucket.Retryer(storage.WithPolicy(storage.RetryNever)).Objects(ctx, q)
			var err error
			next, err = iterator.NewPager(it, b.cfg.PageSize, token).NextPage(&page)
			return err
		})
		if err != nil {
			return b.wrap("list", prefix, err)
		}
		for _, a := range page {
			if err := ctx.Err(); err != nil {
				return b.wrap("list", prefix, err)
			}
			name := strings.TrimPrefix(a.Name, b.cfg.Prefix)
			if backends.CheckObjectName(name) != nil {
				continue // not a name this backend could have stored
			}
			if err := fn(backends.ObjectInfo{Name: name, Size: a.Size, ModTime: a.Updated}); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		token = next
	}
}

// retryable reports whether a failed request may be sent again: throttling,
// 408, 5xx, connection errors and timeouts; never the body's errors, a
// cancellation, or a transport error another attempt cannot heal (see
// [request.PermanentTransportError]).
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if _, ok := errors.AsType[*bodyError](err); ok {
		return false
	}
	if request.PermanentTransportError(err) {
		return false // an untrusted certificate or an unknown host stays so
	}
	if e, ok := errors.AsType[*googleapi.Error](err); ok {
		return e.Code == http.StatusRequestTimeout || e.Code == http.StatusTooManyRequests || e.Code >= 500
	}
	if errors.Is(err, errAttemptTimeout) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	return storage.ShouldRetry(err)
}

// isCode reports whether err is a googleapi error with HTTP status code.
func isCode(err error, code int) bool {
	e, ok := errors.AsType[*googleapi.Error](err)
	return ok && e.Code == code
}

// newError returns a *backends.Error whose message names the bucket
// and the endpoint.
func (b *Backend) newError(op, name string, err error) error {
	return backends.NewError(op, ID, name, backends.RedactError(fmt.Errorf("bucket %q at %s, object %q: %w", b.cfg.Bucket, b.cfg.endpointName(), b.cfg.Prefix+name, err)))
}

// wrap turns err into a *backends.Error for op on name that wraps the
// matching sentinel.
func (b *Backend) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*backends.Error](err); ok {
		return err
	}
	var sentinel error
	switch {
	case errors.Is(err, backends.ErrNotFound), errors.Is(err, backends.ErrExists), errors.Is(err, backends.ErrPermission),
		errors.Is(err, backends.ErrInvalidName), errors.Is(err, backends.ErrInvalidRange), errors.Is(err, dstl.ErrClosed),
		errors.Is(err, backends.ErrPrecondition):
	case errors.Is(err, storage.ErrObjectNotExist), errors.Is(err, storage.ErrBucketNotExist), isCode(err, http.StatusNotFound):
		sentinel = backends.ErrNotFound
	case isCode(err, http.StatusPreconditionFailed):
		if op == "put" {
			sentinel = backends.ErrExists
		} else {
			sentinel = backends.ErrPrecondition
		}
	case isCode(err, http.StatusForbidden), isCode(err, http.StatusUnauthorized):
		sentinel = backends.ErrPermission
	case isCode(err, http.StatusRequestedRangeNotSatisfiable):
		sentinel = backends.ErrInvalidRange
	}
	if errors.Is(err, storage.ErrBucketNotExist) {
		err = request.Permanent(fmt.Errorf("bucket %q does not exist: %w", b.cfg.Bucket, err))
	} else if request.PermanentTransportError(err) {
		err = request.Permanent(err)
	}
	if sentinel != nil {
		err = fmt.Errorf("%w: %w", sentinel, err)
	}
	return b.newError(op, name, err)
}
