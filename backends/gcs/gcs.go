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
// [Config], which may carry a ready *storage.Client. The backend is the
// portable [backends.Bucket] over a driver that makes the storage client's
// calls and says what the service's errors mean; the portable layer checks
// names, sizes and bodies, times and retries requests under the policy of
// the [Config] ([Config.Request]), and wraps the errors. [Backend.As]
// gives the *storage.Client and the *storage.BucketHandle for calls the
// backend does not make.
//
// Put is create-only: it writes with the precondition ifGenerationMatch=0
// (storage.Conditions{DoesNotExist: true}), so an existing object is never
// replaced and the loser of a race fails with [backends.ErrExists]. An
// object of at most [Config.PartSize] bytes is read whole first (so a short
// or failing body is found before anything is sent) and goes up in one
// request with its CRC32C; should the answer to an attempt that stored it
// be lost, the retry's 412 is taken for success when the stored object has
// the body's size and CRC32C. A larger object goes up in a resumable upload
// of PartSize chunks, sent one after another (a resumable session takes its
// chunks in order, so there are no parallel parts). An object becomes
// visible only when its last chunk is committed; a failed or cancelled Put
// cancels the upload's context before that, so nothing is visible (the
// abandoned session expires on the service's side).
//
// Who retries what. The client's own retries are switched off for every
// request but the chunks of a resumable upload: single requests (a small
// Put, a read, an attribute or listing request, a delete) are timed and
// retried by the portable layer. A resumable upload is the exception: it
// is one call to the portable layer, made once and never retried by it,
// whose session start and chunks the client retries itself, with a retry
// policy set on the object handle: the attempts and backoff of
// [Config.Request], the errors the driver classifies as transient
// (throttling, 408, 5xx, connection errors and timeouts, never
// 401/403/404/412 nor a failure of the body), each chunk's attempt bounded
// by its Timeout grown for the chunk at [driver.MinThroughput], and the
// whole upload by the time all its chunks may take. The client bounds a
// chunk's retries by time only, so the driver counts the failed attempts
// in a row and stops after MaxAttempts; a chunk that goes through starts the count anew (the
// session's start shares the first chunk's count), and an attempt that
// timed out, which the client retries without asking, is bounded by the
// chunk's time of MaxAttempts attempts and backoffs.
//
// The service answers a request for an object of a missing bucket with
// 404, as for a missing object. After a 404, the backend asks once (without
// retries) whether the bucket exists; when it does not, the error says so
// and matches [backends.ErrNotFound] and [backends.ErrPermanent], a Delete's
// too (deleting a missing object succeeds).
package gcs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
)

// ID is the backend's identifier in the registry and in its errors.
const ID = "gcs"

// Scheme is the URL scheme of the backend's base paths.
const Scheme = "gs"

func init() { backends.RegisterURL(ID, ParseURL, Open, Scheme) }

// Backend is the GCS backend: the portable [backends.Bucket] over a bucket
// of Google Cloud Storage, with the calls of its own. It is safe for
// concurrent use. Its As takes a **storage.Client or a
// **storage.BucketHandle.
type Backend struct {
	*backends.Bucket
	d *bucket
}

// bucket is the driver: the storage client's calls on one bucket.
type bucket struct {
	cfg       Config
	client    *storage.Client
	ownClient bool
	transport *http.Transport // closed on Close, when the driver made it
	bucket    *storage.BucketHandle
}

var _ driver.Bucket = (*bucket)(nil)

// New opens a backend from a gs:// base path (see [ParseURL]). It is the
// factory the backend registers.
func New(ctx context.Context, basePath string) (*Backend, error) {
	return backends.OpenURL(ctx, basePath, ParseURL, Open)
}

// Open opens a backend with cfg. It does not check that the bucket exists.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("gcs: open bucket %q: %w", cfg.Bucket, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, backends.Invalid(err)
	}
	if cfg.Prefix != "" && !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultPageSize
	}
	d := &bucket{cfg: cfg, client: cfg.Client}
	if d.client == nil {
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
			d.transport = driver.NewHTTPTransport()
			opts = append(opts, option.WithoutAuthentication(),
				option.WithHTTPClient(&http.Client{Transport: driver.Transport(d.transport, cfg.headerTimeout())}))
		}
		opts = append(opts, cfg.ClientOptions...)
		c, err := storage.NewClient(ctx, opts...)
		if err != nil {
			d.closeTransport()
			return nil, fmt.Errorf("gcs: open bucket %q: %w", cfg.Bucket, err)
		}
		d.client, d.ownClient = c, true
	}
	d.bucket = d.client.Bucket(cfg.Bucket)
	return &Backend{Bucket: backends.New(ID, d, cfg.Request, backends.WithPrefix(cfg.Prefix)), d: d}, nil
}

// Config returns the backend's configuration (with the prefix as used).
func (b *Backend) Config() Config { return b.d.cfg }

// Close closes the client, unless it came with the Config.
func (d *bucket) Close() error {
	var err error
	if d.ownClient {
		err = d.client.Close()
	}
	d.closeTransport()
	return err
}

func (d *bucket) closeTransport() {
	if d.transport != nil {
		d.transport.CloseIdleConnections()
	}
}

// As sets a **storage.Client target to the client, a
// **storage.BucketHandle target to the bucket's handle and a *driver.Root
// to the bucket.
func (d *bucket) As(target any) bool {
	switch p := target.(type) {
	case **storage.Client:
		*p = d.client
	case **storage.BucketHandle:
		*p = d.bucket
	case *driver.Root:
		*p = driver.Root{Bucket: d.cfg.Bucket}
	default:
		return false
	}
	return true
}

// Location names the object's URL and the endpoint.
func (d *bucket) Location(name string) string {
	return fmt.Sprintf("gs://%s/%s at %s", d.cfg.Bucket, name, d.cfg.endpointName())
}

// Classify maps the client's errors: its sentinels of missing objects and
// buckets, the service's status codes (404, 412 of the create-only
// precondition, 401 and 403, 416 of a read past the end, 408, 429 and 5xx),
// the token endpoint's answers (refused credentials are a permission
// error), then the transport's errors and what else the client would retry.
func (d *bucket) Classify(err error) driver.Code {
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
		return driver.BucketNotFound
	case errors.Is(err, storage.ErrObjectNotExist):
		return driver.NotFound
	case errors.Is(err, context.Canceled):
		return driver.Unknown
	}
	if e, ok := errors.AsType[*googleapi.Error](err); ok {
		switch c := e.Code; {
		case c == http.StatusNotFound:
			return driver.NotFound
		case c == http.StatusPreconditionFailed:
			return driver.Exists
		case c == http.StatusUnauthorized, c == http.StatusForbidden:
			return driver.Permission
		case c == http.StatusRequestedRangeNotSatisfiable:
			return driver.InvalidRange
		case c == http.StatusRequestTimeout, c == http.StatusTooManyRequests, c >= 500:
			return driver.Transient
		}
		return driver.Unknown
	}
	// A token the credentials could not get fails the request before it
	// is sent, inside the transport's error.
	if e, ok := errors.AsType[*auth.Error](err); ok && e.Response != nil {
		return tokenCode(e.Response.StatusCode)
	}
	if e, ok := errors.AsType[*oauth2.RetrieveError](err); ok && e.Response != nil {
		return tokenCode(e.Response.StatusCode)
	}
	if code, ok := driver.TransportCode(err); ok {
		return code
	}
	if storage.ShouldRetry(err) {
		return driver.Transient
	}
	return driver.Unknown
}

// tokenCode classifies the status code of a token endpoint's answer: it
// throttles or fails for a while (408, 429, 5xx), or it refuses the
// credentials.
func tokenCode(status int) driver.Code {
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500:
		return driver.Transient
	case status >= 400:
		return driver.Permission
	}
	return driver.Unknown
}

// object returns the handle of name under the prefix, without the client's
// own retries.
func (d *bucket) object(name string) *storage.ObjectHandle {
	return d.bucket.Object(name).Retryer(storage.WithPolicy(storage.RetryNever))
}

// Put stores the object in one request, or resumably when it is larger
// than the part size; see the package documentation.
func (d *bucket) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	if size > d.cfg.PartSize {
		return d.missing(ctx, d.putResumable(ctx, name, body, size, d.cfg.PartSize))
	}
	// A small object is read whole first, so that a short or failing body
	// is found before anything is sent, and its CRC32C goes with it: the
	// service refuses an upload whose bytes do not match. The client's
	// Writer consumes what it is given before its Write returns, so the
	// caller's own bytes do (View), without a copy. A body that knows its
	// CRC32C (an object whose encoder combined its frames' checksums)
	// gives it; others are checksummed here.
	data, err := body.View(0, size)
	if err != nil {
		return err
	}
	crc, ok := body.CRC32C()
	if !ok {
		crc = crc32.Checksum(data, castagnoli)
	}
	attempt := 0
	err = rt.Do(ctx, size, func(ctx context.Context) error {
		attempt++
		return d.write(ctx, d.object(name), bytes.NewReader(data), 0, &crc, nil)
	})
	if attempt > 1 && isCode(err, http.StatusPreconditionFailed) && d.sameObject(ctx, rt, name, size, crc) {
		// An earlier attempt stored the object, but its answer was lost.
		return nil
	}
	return d.missing(ctx, err)
}

// PutMultipart stores body as a resumable upload in chunks of the
// smallest chunk size: the path of the Puts above the part size, for the
// check of create-only (backends.VerifyCreateOnly).
func (d *bucket) PutMultipart(ctx context.Context, _ driver.Runner, name string, body *driver.Body, size int64) error {
	return d.missing(ctx, d.putResumable(ctx, name, body, size, MinPartSize))
}

// MinMultipartSize is one byte more than [MinPartSize]: the client sends
// a body of at most one chunk in one request, whatever its chunk size.
func (d *bucket) MinMultipartSize() int64 { return MinPartSize + 1 }

// putResumable uploads in chunks of chunkSize bytes; the client retries the
// session's start and each chunk (see the package documentation), so the
// upload is not sent through the portable layer's runner.
func (d *bucket) putResumable(ctx context.Context, name string, body *driver.Body, size, chunkSize int64) error {
	p := d.cfg.Request
	// The client retries an upload's requests until the chunk's retry
	// deadline, whatever its maximum of attempts: the failures in a row
	// are counted here, and a chunk that goes through starts the count
	// anew.
	var failed atomic.Int64
	retry := func(err error) bool {
		return body.Err() == nil && d.Classify(err) == driver.Transient && failed.Add(1) < int64(p.MaxAttempts)
	}
	o := d.bucket.Object(name).Retryer(
		storage.WithPolicy(storage.RetryAlways), // create-only, so idempotent
		storage.WithMaxAttempts(p.MaxAttempts),
		storage.WithBackoff(gax.Backoff{Initial: max(p.InitialBackoff, time.Millisecond), Max: max(p.MaxBackoff, time.Millisecond), Multiplier: 2}),
		storage.WithErrorFunc(retry),
	)
	if p.Timeout > 0 {
		// A bound on the whole upload: every chunk, and the start of the
		// session, may use all its attempts. (A client the backend builds
		// for an endpoint also bounds each answer's wait by the response
		// timeout; a client built for Application Default Credentials
		// relies on this bound for the start of the session.)
		chunks := (size + chunkSize - 1) / chunkSize
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(chunks+1)*d.chunkRetryDeadline())
		defer cancel()
	}
	return d.write(ctx, o, body.Section(0, size), int(chunkSize), nil, func(int64) { failed.Store(0) })
}

// chunkRetryDeadline is the time one chunk may take, all its attempts
// included.
func (d *bucket) chunkRetryDeadline() time.Duration {
	n := time.Duration(d.cfg.Request.MaxAttempts)
	return n*d.chunkTimeout() + n*d.cfg.Request.MaxBackoff
}

// chunkTimeout bounds one attempt of one chunk of a resumable upload: the
// request timeout, grown with the chunk (see [backends.Policy.ForBody]).
func (d *bucket) chunkTimeout() time.Duration {
	return d.cfg.Request.ForBody(d.cfg.PartSize).Timeout
}

// write sends one upload of body with the DoesNotExist precondition, in one
// request (chunk 0) or resumably, calling chunkDone (when not nil) after
// each chunk that went through. On any error it cancels the upload before
// closing the writer, so that nothing is committed.
func (d *bucket) write(ctx context.Context, o *storage.ObjectHandle, body io.Reader, chunk int, crc *uint32, chunkDone func(int64)) error {
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
		w.ProgressFunc = chunkDone
		w.ChunkTransferTimeout = d.chunkTimeout()
		if d.cfg.Request.Timeout > 0 {
			w.ChunkRetryDeadline = d.chunkRetryDeadline()
		}
	}
	_, err := io.Copy(w, body)
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

// sameObject reports whether the object stored under name has the size and
// CRC32C of the body, i.e. was stored by an earlier attempt of this Put.
func (d *bucket) sameObject(ctx context.Context, rt driver.Runner, name string, size int64, crc uint32) bool {
	var attrs *storage.ObjectAttrs
	err := rt.Do(ctx, 0, func(ctx context.Context) error {
		var err error
		attrs, err = d.object(name).Attrs(ctx)
		return err
	})
	return err == nil && attrs.Size == size && attrs.CRC32C == crc
}

// Open makes one ranged read request.
func (d *bucket) Open(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	r, err := d.object(name).NewRangeReader(ctx, offset, length)
	if err != nil {
		return nil, d.missing(ctx, err)
	}
	return r, nil
}

// Size asks for the object's attributes.
func (d *bucket) Size(ctx context.Context, name string) (int64, error) {
	attrs, err := d.object(name).Attrs(ctx)
	if err != nil {
		return 0, d.missing(ctx, err)
	}
	return attrs.Size, nil
}

// Delete deletes the object.
func (d *bucket) Delete(ctx context.Context, name string) error {
	return d.missing(ctx, d.object(name).Delete(ctx))
}

// List lists the objects under the prefix a page at a time, in lexical
// order of names (the service's order). Each page is one request, sent
// through rt.
func (d *bucket) List(ctx context.Context, rt driver.Runner, prefix string, fn func(driver.ObjectInfo) error) error {
	q := &storage.Query{Prefix: prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return err
	}
	for token := ""; ; {
		var page []*storage.ObjectAttrs
		var next string
		err := rt.Do(ctx, 0, func(ctx context.Context) error {
			page = page[:0]
			it := d.bucket.Retryer(storage.WithPolicy(storage.RetryNever)).Objects(ctx, q)
			var err error
			next, err = iterator.NewPager(it, d.cfg.PageSize, token).NextPage(&page)
			return err
		})
		if err != nil {
			return d.missing(ctx, err)
		}
		for _, a := range page {
			if err := fn(driver.ObjectInfo{Name: a.Name, Size: a.Size, ModTime: a.Updated}); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		token = next
	}
}

// missing returns err, saying that the bucket does not exist when it is
// so, in an error that Classify maps to [driver.BucketNotFound]: the
// service answers 404 to a request for an object of a missing bucket too,
// so a 404 is followed by one request for the bucket.
func (d *bucket) missing(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
	case (errors.Is(err, storage.ErrObjectNotExist) || isCode(err, http.StatusNotFound)) && d.bucketMissing(ctx):
		err = fmt.Errorf("%w: %w", storage.ErrBucketNotExist, err)
	default:
		return err
	}
	return fmt.Errorf("bucket %q does not exist: %w", d.cfg.Bucket, err)
}

// bucketMissing reports whether the bucket is known not to exist. One
// request, bounded by the response timeout, without retries; any other
// outcome is false.
func (d *bucket) bucketMissing(ctx context.Context) bool {
	if t := d.cfg.headerTimeout(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	_, err := d.bucket.Retryer(storage.WithPolicy(storage.RetryNever)).Attrs(ctx)
	return errors.Is(err, storage.ErrBucketNotExist)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// isCode reports whether err is a googleapi error with HTTP status code.
func isCode(err error, code int) bool {
	e, ok := errors.AsType[*googleapi.Error](err)
	return ok && e.Code == code
}
