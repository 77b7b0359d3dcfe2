// Package gocloud is a dstl backend over any gocloud.dev/blob bucket: mem://,
// file://, s3://, gs:// and azblob:// URLs, through the drivers memblob,
// fileblob, s3blob, gcsblob and azureblob, which it links.
//
// It registers itself as backend "gocloud" and for the URL scheme "mem":
// base paths "mem://..." open it by their scheme. The schemes s3, gs,
// azblob and file belong to the native backends; to open such a URL with
// this backend, select it by identifier, e.g. the option "storage: gocloud"
// or backends.Open(ctx, "gocloud", "s3://bucket/prefix?region=..."):
// then any URL that gocloud.dev/blob opens is accepted. See [ParseURL] for
// the URL form and its query parameters.
//
// Puts are create-only (blob.WriterOptions.IfNotExist): a Put of an
// existing name fails with [backends.ErrExists]. A failed or cancelled Put
// cancels the writer's context before closing it, so the driver commits
// nothing (s3blob aborts its multipart upload). Each request (a Put as a
// whole, a Get's opening, a Delete, a page of a List) has its own timeout
// and is retried with exponential backoff when it fails for a transient
// reason (throttling, 5xx, a connection reset, a timeout), but not for a
// certificate that does not verify or a host name that does not resolve;
// the drivers' SDKs retry single HTTP requests of their own as well. The
// timeout of a Put grows with the object: the request timeout once per
// part it goes up in, and twice more (see [Config].Retry). When a retried Put
// finds the object present, the earlier attempt may have committed it
// before its answer was lost: the Put succeeds if the stored object holds
// exactly the body, and fails with ErrExists otherwise.
//
// For s3:// URLs, s3blob builds its AWS client from the URL parameters and
// the SDK's standard chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_PROFILE, ...). That chain also reads AWS_CA_BUNDLE: when it is set,
// the SDK accepts only its own HTTP client, with the bundle as the only
// trusted roots, so a bundle meant for other endpoints breaks TLS to this
// one. Unset it, or set it empty, when it does not apply (the tests set it
// empty for MinIO). A client built this way keeps its transport out of
// reach: Close cannot close its idle keep-alive connections, which end
// after the transport's idle timeout (90 s). For S3-compatible stores such
// as MinIO use endpoint=..., use_path_style=true and
// request_checksum_calculation=when_required&response_checksum_validation=when_required.
package gocloud

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob:// URLs
	_ "gocloud.dev/blob/fileblob"  // file:// URLs
	_ "gocloud.dev/blob/gcsblob"   // gs:// URLs
	_ "gocloud.dev/blob/memblob"   // mem:// URLs
	_ "gocloud.dev/blob/s3blob"    // s3:// URLs
	"gocloud.dev/gcerrors"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/gate"
	"github.com/dstlgo/dstl/backends/internal/request"
	"github.com/dstlgo/dstl/backends/internal/urlparam"
	"github.com/dstlgo/dstl/dstl"
)

// ID is the backend's identifier in the registry.
const ID = "gocloud"

// Scheme is the URL scheme this backend registers (the others gocloud.dev
// serves belong to the native backends).
const Scheme = "mem"

func init() {
	backends.Register(ID, func(ctx context.Context, basePath string) (backends.Backend, error) {
		return New(ctx, basePath)
	}, Scheme)
}

// Backend stores objects in a gocloud.dev/blob bucket. It is safe for
// concurrent use.
type Backend struct {
	bucket *blob.Bucket
	owned  bool   // opened from the URL, so closed by Close
	where  string // the bucket URL without query, for errors
	cfg    Config
	s3     *s3.Client // the bucket's S3 client, for s3blob buckets
	s3Name string     // the S3 bucket's name, when known from the URL

	calls gate.Gate // Close waits for the calls in progress
}

var _ backends.Backend = (*Backend)(nil)

// New opens a backend from a base path (see [ParseURL]). It is the factory
// the backend registers.
func New(ctx context.Context, basePath string) (*Backend, error) {
	cfg, err := ParseURL(basePath)
	if err != nil {
		return nil, urlparam.Invalid(err)
	}
	return Open(ctx, cfg)
}

// Open opens a backend with cfg: on cfg.Bucket when set, otherwise on the
// bucket that blob.OpenBucket opens for cfg.URL.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, urlparam.Invalid(err)
	}
	b := &Backend{bucket: cfg.Bucket, cfg: cfg, where: redact(cfg.URL)}
	if b.bucket == nil {
		bk, err := blob.OpenBucket(ctx, cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("gocloud: open bucket %q: %w", b.where, redactError(err, cfg.URL))
		}
		b.bucket, b.owned = bk, true
	}
	if b.where == "" {
		b.where = "bucket"
	}
	var client *s3.Client
	if b.bucket.As(&client) && client != nil {
		b.s3 = client
		if u, err := url.Parse(cfg.URL); err == nil && u.Scheme == "s3" && !u.Query().Has("prefix") {
			b.s3Name = u.Host
		}
	}
	return b, nil
}

// redact returns a bucket URL for messages: without user information,
// with "?..." for its query (whose values may be secrets) and without
// fragment; of a URL that does not parse, only the scheme.
func redact(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		if i := strings.Index(raw, ":"); i > 0 && err == nil {
			return raw[:i] + ":..."
		}
		return "..."
	}
	v := *u
	v.User = nil
	if v.RawQuery != "" {
		v.RawQuery = "..."
	}
	v.ForceQuery = false
	v.Fragment, v.RawFragment = "", ""
	return v.String()
}

// redactError returns err with the bucket URL raw, which the drivers'
// errors echo, replaced by its redacted form, in any of the ways it may be
// written. The result does not wrap err, which would keep the URL.
func redactError(err error, raw string) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.URL == raw {
		err = fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	msg := err.Error()
	shown := redact(raw)
	forms := []string{raw}
	if u, perr := url.Parse(raw); perr == nil {
		forms = append(forms, u.String(), u.Redacted())
		if u.RawQuery != "" {
			forms = append(forms, "?"+u.RawQuery)
		}
	}
	for _, f := range forms {
		if f != "" && f != shown {
			msg = strings.ReplaceAll(msg, f, shown)
		}
	}
	return errors.New(msg)
}

// Bucket returns the bucket the backend stores objects in (without the
// prefix).
func (b *Backend) Bucket() *blob.Bucket { return b.bucket }

// Close waits for running calls to return and, when the backend opened the
// bucket itself, closes it (and, where the driver's HTTP client allows it,
// that client's idle connections). A Bucket given in [Config] stays open. Later calls fail with
// [dstl.ErrClosed]; closing twice is not an error.
func (b *Backend) Close() error {
	if !b.calls.Close() {
		return nil
	}
	if !b.owned {
		return nil
	}
	if b.s3 != nil {
		if c, ok := b.s3.Options().HTTPClient.(interface{ CloseIdleConnections() }); ok {
			defer c.CloseIdleConnections()
		}
	}
	if err := b.bucket.Close(); err != nil {
		return fmt.Errorf("gocloud: close %s: %w", b.where, err)
	}
	return nil
}

func (b *Backend) begin(op, name string) error {
	if !b.calls.Enter() {
		return backends.NewError(op, ID, name, fmt.Errorf("%s: %w", b.where, dstl.ErrClosed))
	}
	return nil
}

func (b *Backend) key(name string) string { return b.cfg.Prefix + name }

// Put stores size bytes of body under name, create-only; see
// [backends.Backend.Put].
func (b *Backend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) (err error) {
	if err := backends.CheckObjectName(name); err != nil {
		return b.wrap("put", name, err)
	}
	if size < 0 {
		return b.wrap("put", name, fmt.Errorf("negative size %d", size))
	}
	if body == nil {
		return b.wrap("put", name, errors.New("nil body"))
	}
	if err := b.begin("put", name); err != nil {
		return err
	}
	defer b.calls.Leave()
	defer func() { err = b.wrap("put", name, err) }()
	if err := ctx.Err(); err != nil {
		return err
	}
	attempt := 0
	return request.Do(ctx, b.putPolicy(size), retryable, func(ctx context.Context) error {
		attempt++
		err := b.putOnce(ctx, name, body, size)
		if attempt > 1 && gcerrors.Code(err) == gcerrors.FailedPrecondition {
			// An earlier attempt may have committed the object before
			// its answer was lost.
			if same, serr := b.holds(ctx, name, body, size); serr == nil && same {
				return nil
			}
		}
		return err
	})
}

// putPolicy is the retry policy of a Put of size bytes. One attempt of a
// Put is the whole upload, which may take many requests (the parts of an
// S3 multipart upload, GCS resumable chunks, Azure staged blocks), so its
// timeout is the request timeout once per request: once for an object of
// at most one part, otherwise once per part and twice more (starting and
// completing the upload), as if the parts went up one after the other. An
// object that takes longer than one request timeout to upload as a whole
// but whose every request fits in it is thus not cut short and sent again.
// On top, the body may go at [request.MinThroughput] (see
// [request.Policy.ForBody]), so that a slow but progressing upload is not
// cut either. A part size of 0 counts parts of [DefaultPartSize].
func (b *Backend) putPolicy(size int64) request.Policy {
	p := b.cfg.Retry
	if p.Timeout <= 0 {
		return p
	}
	part := int64(b.cfg.PartSize)
	if part <= 0 {
		part = DefaultPartSize
	}
	requests := int64(1)
	if parts := size/part + min(size%part, 1); parts > 1 {
		requests = parts + min(2, math.MaxInt64-parts)
	}
	if requests > int64(math.MaxInt64/p.Timeout) {
		p.Timeout = 0 // beyond any clock: the caller's context bounds it
	} else {
		p.Timeout *= time.Duration(requests)
	}
	return p.ForBody(size)
}

// putOnce makes one attempt of a Put. On any failure it cancels the
// writer's context before closing it, so that nothing is committed.
func (b *Backend) putOnce(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.bucket.NewWriter(wctx, b.key(name), &blob.WriterOptions{
		ContentType:    "application/octet-stream",
		IfNotExist:     true,
		BufferSize:     b.cfg.PartSize,
		MaxConcurrency: b.cfg.Concurrency,
		BeforeWrite:    b.beforeWrite,
	})
	if err != nil {
		return err
	}
	n, err := io.Copy(w, io.NewSectionReader(body, 0, size))
	if err == nil && n < size {
		err = fmt.Errorf("body ended after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		cancel()
		_ = w.Close()
		if werr := ctx.Err(); werr != nil && !errors.Is(err, werr) {
			err = fmt.Errorf("%w (%w)", werr, err)
		}
		b.abort(ctx, name, err)
		return err
	}
	if err := w.Close(); err != nil {
		b.abort(ctx, name, err)
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return err
	}
	return nil
}

// abortTimeout bounds the abort of a failed multipart upload.
const abortTimeout = 30 * time.Second

// abort aborts the S3 multipart upload that err names, if any. s3blob's
// transfer manager aborts it already; this makes sure, even when ctx is
// done or the first abort failed.
func (b *Backend) abort(ctx context.Context, name string, err error) {
	var mpe transfermanager.MultipartUploadError
	if b.s3 == nil || !errors.As(err, &mpe) || mpe.UploadID() == "" {
		return
	}
	bucket, key := b.s3Name, b.key(name)
	if bucket == "" {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	_ = request.Do(actx, b.cfg.Retry, retryable, func(ctx context.Context) error {
		_, err := b.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: aws.String(mpe.UploadID())})
		var nsu *s3types.NoSuchUpload
		if errors.As(err, &nsu) {
			return nil
		}
		return err
	})
}

// beforeWrite tunes s3blob's transfer manager: s3blob passes it the part
// size and the concurrency, but not the threshold above which it uploads
// in parts (16 MiB by default), so the transfer manager is rebuilt with the
// threshold at the part size. The bucket's checksum setting is kept.
func (b *Backend) beforeWrite(as func(any) bool) error {
	var tm *transfermanager.Client
	if b.s3 == nil || b.cfg.PartSize == 0 || !as(&tm) || tm == nil {
		return nil
	}
	*tm = *transfermanager.New(b.s3, func(o *transfermanager.Options) {
		o.RequestChecksumCalculation = b.s3.Options().RequestChecksumCalculation
		o.PartSizeBytes = int64(b.cfg.PartSize)
		o.MultipartUploadThreshold = int64(b.cfg.PartSize)
		if b.cfg.Concurrency > 0 {
			o.Concurrency = b.cfg.Concurrency
		}
		// Abort a failed upload on a context of its own, even when the
		// Put's context was cancelled.
		o.FailTimeout = abortTimeout
	})
	return nil
}

// holds reports whether the stored object name holds exactly body.
func (b *Backend) holds(ctx context.Context, name string, body io.ReaderAt, size int64) (bool, error) {
	r, err := b.bucket.NewReader(ctx, b.key(name), nil)
	if err != nil {
		return false, err
	}
	defer r.Close()
	if r.Size() != size {
		return false, nil
	}
	const chunk = 64 << 10
	got := make([]byte, chunk)
	want := make([]byte, chunk)
	for off := int64(0); off < size; off += chunk {
		n := int(min(chunk, size-off))
		if _, err := io.ReadFull(r, got[:n]); err != nil {
			return false, err
		}
		if _, err := body.ReadAt(want[:n], off); err != nil && !(errors.Is(err, io.EOF) && off+int64(n) == size) {
			return false, err
		}
		if !bytes.Equal(got[:n], want[:n]) {
			return false, nil
		}
	}
	return true, nil
}

// Get returns length bytes of the object from offset on (-1: to the end);
// see [backends.Backend.Get].
func (b *Backend) Get(ctx context.Context, name string, offset, length int64) (_ io.ReadCloser, err error) {
	if err := backends.CheckObjectName(name); err != nil {
		return nil, b.wrap("get", name, err)
	}
	if offset < 0 || length < -1 {
		return nil, b.wrap("get", name, fmt.Errorf("%w: offset %d, length %d", backends.ErrInvalidRange, offset, length))
	}
	if err := b.begin("get", name); err != nil {
		return nil, err
	}
	defer b.calls.Leave()
	defer func() { err = b.wrap("get", name, err) }()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if length > math.MaxInt64-offset {
		// Past any possible end, and offset+length-1 would overflow in
		// the drivers' range headers (s3blob and azureblob then read the
		// whole object): read to the end.
		length = -1
	}
	var rc io.ReadCloser
	err = request.Do(ctx, b.cfg.Retry, retryable, func(actx context.Context) error {
		var err error
		rc, err = b.open(ctx, actx, name, offset, length)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &reader{ctx: ctx, b: b, name: name, r: rc}, nil
}

// open opens a ranged reader. The reader lives on ctx, not on the
// attempt's context actx, which would end with the attempt; but opening it
// is bounded by the policy's timeout all the same.
func (b *Backend) open(ctx, actx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	key := b.key(name)
	rctx, rcancel := context.WithCancel(ctx)
	stop := func() bool { return true }
	t := b.cfg.Retry.Timeout
	if rt := b.cfg.Retry.ResponseTimeout; rt > 0 && (t == 0 || rt < t) {
		t = rt // opening the reader is the wait for the answer's headers
	}
	if t > 0 {
		stop = time.AfterFunc(t, rcancel).Stop
	}
	r, err := b.bucket.NewRangeReader(rctx, key, offset, length, nil)
	if !stop() && ctx.Err() == nil {
		if err == nil {
			_ = r.Close()
		}
		rcancel()
		return nil, fmt.Errorf("open reader: %w after %v", context.DeadlineExceeded, t)
	}
	if err == nil {
		if offset > r.Size() {
			_ = r.Close()
			rcancel()
			return nil, fmt.Errorf("%w: offset %d past the end of the %d-byte object", backends.ErrInvalidRange, offset, r.Size())
		}
		return &cancelCloser{r, rcancel}, nil
	}
	rcancel()
	switch gcerrors.Code(err) {
	case gcerrors.NotFound, gcerrors.PermissionDenied, gcerrors.Canceled:
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, err
	}
	// Some services refuse a range that starts at or past the end (S3
	// answers 416): look at the size.
	attrs, aerr := b.bucket.Attributes(actx, key)
	if aerr != nil {
		if gcerrors.Code(aerr) == gcerrors.NotFound {
			return nil, aerr
		}
		return nil, err
	}
	switch {
	case offset > attrs.Size:
		return nil, fmt.Errorf("%w: offset %d past the end of the %d-byte object", backends.ErrInvalidRange, offset, attrs.Size)
	case offset == attrs.Size || length == 0:
		return io.NopCloser(strings.NewReader("")), nil
	}
	return nil, err
}

// cancelCloser cancels the reader's context once it is closed.
type cancelCloser struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelCloser) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// reader is the io.ReadCloser Get returns: its reads fail once ctx is done.
type reader struct {
	ctx  context.Context
	b    *Backend
	name string
	r    io.ReadCloser
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, r.b.wrap("get", r.name, err)
	}
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = r.b.wrap("get", r.name, err)
	}
	return n, err
}

func (r *reader) Close() error { return r.b.wrap("get", r.name, r.r.Close()) }

// Delete removes the object; a missing object is not an error.
func (b *Backend) Delete(ctx context.Context, name string) (err error) {
	if err := backends.CheckObjectName(name); err != nil {
		return b.wrap("delete", name, err)
	}
	if err := b.begin("delete", name); err != nil {
		return err
	}
	defer b.calls.Leave()
	defer func() { err = b.wrap("delete", name, err) }()
	if err := ctx.Err(); err != nil {
		return err
	}
	return request.Do(ctx, b.cfg.Retry, retryable, func(ctx context.Context) error {
		err := b.bucket.Delete(ctx, b.key(name))
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil
		}
		return err
	})
}

// List calls fn for every object whose name starts with prefix, in lexical
// order; see [backends.Backend.List]. It reads the whole listing first (a
// page at a time, each page a request of its own) and sorts it, since not
// every driver lists in lexical order (fileblob walks directories).
func (b *Backend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) (err error) {
	if fn == nil {
		return b.wrap("list", prefix, errors.New("nil callback"))
	}
	if err := b.begin("list", prefix); err != nil {
		return err
	}
	if noValidName(prefix) {
		b.calls.Leave()
		return nil
	}
	var objs []backends.ObjectInfo
	err = func() error {
		defer b.calls.Leave()
		token := blob.FirstPageToken
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			var page []*blob.ListObject
			var next []byte
			err := request.Do(ctx, b.cfg.Retry, retryable, func(ctx context.Context) error {
				var err error
				page, next, err = b.bucket.ListPage(ctx, token, 1000, &blob.ListOptions{Prefix: b.key(prefix)})
				return err
			})
			if err != nil {
				return err
			}
			for _, o := range page {
				if o.IsDir {
					continue
				}
				name := strings.TrimPrefix(o.Key, b.cfg.Prefix)
				if backends.CheckObjectName(name) != nil {
					continue
				}
				objs = append(objs, backends.ObjectInfo{Name: name, Size: o.Size, ModTime: o.ModTime})
			}
			if len(next) == 0 {
				return nil
			}
			token = next
		}
	}()
	if err != nil {
		return b.wrap("list", prefix, err)
	}
	slices.SortFunc(objs, func(x, y backends.ObjectInfo) int { return strings.Compare(x.Name, y.Name) })
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			return b.wrap("list", prefix, err)
		}
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// noValidName reports whether no valid object name starts with prefix: it
// is absolute, or holds an empty, "." or ".." segment before its last
// slash, a backslash or a NUL byte. Some services refuse to list such
// prefixes.
func noValidName(prefix string) bool {
	if strings.HasPrefix(prefix, "/") || strings.ContainsAny(prefix, "\\\x00") {
		return true
	}
	segs := strings.Split(prefix, "/")
	for _, seg := range segs[:len(segs)-1] {
		if seg == "" || seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// retryable reports whether a failed request may succeed when sent again:
// throttling, server errors, timeouts and broken connections; never a
// missing object, a refused permission, a failed precondition or a bad
// argument.
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || request.PermanentTransportError(err) {
		return false
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound, gcerrors.PermissionDenied, gcerrors.FailedPrecondition, gcerrors.AlreadyExists,
		gcerrors.InvalidArgument, gcerrors.Unimplemented, gcerrors.Canceled:
		return false
	case gcerrors.ResourceExhausted, gcerrors.Internal, gcerrors.DeadlineExceeded:
		return true
	}
	if errors.Is(err, backends.ErrInvalidRange) || errors.Is(err, io.ErrUnexpectedEOF) && strings.Contains(err.Error(), "body ended") {
		return false
	}
	if s := httpStatus(err); s != 0 {
		return s == http.StatusTooManyRequests || s == http.StatusRequestTimeout || s >= 500
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded)
}

// httpStatus digs the HTTP status code out of an SDK error, or returns 0.
func httpStatus(err error) int {
	var sc interface{ HTTPStatusCode() int } // AWS
	if errors.As(err, &sc) {
		return sc.HTTPStatusCode()
	}
	type statusCoder interface{ StatusCode() int }
	var sc2 statusCoder
	if errors.As(err, &sc2) {
		return sc2.StatusCode()
	}
	return 0
}

// wrap turns err into a *backends.Error for op on name that names the
// bucket and wraps the matching sentinel.
func (b *Backend) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var be *backends.Error
	if errors.As(err, &be) {
		return err
	}
	var sentinel error
	switch {
	case errors.Is(err, backends.ErrNotFound), errors.Is(err, backends.ErrExists), errors.Is(err, backends.ErrPermission),
		errors.Is(err, backends.ErrInvalidName), errors.Is(err, backends.ErrInvalidRange), errors.Is(err, dstl.ErrClosed),
		errors.Is(err, backends.ErrPrecondition), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// already classified, or the context's
	default:
		switch gcerrors.Code(err) {
		case gcerrors.NotFound:
			sentinel = backends.ErrNotFound
		case gcerrors.PermissionDenied:
			sentinel = backends.ErrPermission
		case gcerrors.FailedPrecondition:
			if op == "put" {
				sentinel = backends.ErrExists
			} else {
				sentinel = backends.ErrPrecondition
			}
		case gcerrors.AlreadyExists:
			sentinel = backends.ErrExists
		}
	}
	if sentinel != nil {
		err = fmt.Errorf("%w: %w", sentinel, err)
	}
	return backends.NewError(op, ID, name, fmt.Errorf("%s object %q: %w", b.where, b.key(name), err))
}
