// Package s3 is a [backends.Backend] on Amazon S3 and S3-compatible services
// (MinIO and others), with aws-sdk-go-v2.
//
// Importing the package registers the backend as "s3" for base paths of
// the form "s3://bucket/prefix" (see [ParseURL]); [Open] opens it from a
// [Config], also over a ready *s3.Client.
//
// Object names are keys under the prefix. A Put of up to [Config.PartSize]
// bytes is one PutObject; a larger one is a multipart upload whose parts
// go up in parallel, up to [Config.Concurrency] at once. Both are
// create-only (If-None-Match: *), so a Put never replaces an object and
// fails with [backends.ErrExists] instead; a multipart upload that fails or is
// cancelled is aborted, leaving nothing visible. One whose process dies,
// or whose abort fails, stays as an incomplete upload:
// [Backend.ListIncompleteUploads] and [Backend.AbortIncompleteUpload] find
// and abort those ("dstl gc" does), and a bucket lifecycle rule
// AbortIncompleteMultipartUpload removes them. Checksums are computed and
// validated only where the API requires them, which S3-compatible services
// accept.
//
// Every request (and every part) runs with a timeout per attempt and is
// retried with exponential backoff and jitter when it is throttled, meets a
// 5xx answer, a cut connection or a timeout; the SDK's own retryer is off.
// A Get's attempt timeout bounds the wait for the answer's headers; reading
// the body is bounded by the caller's context only. The transport the
// backend makes waits at most [Config.ResponseTimeout] for the answer's
// headers of a request without a large body (uploads of objects and parts
// are bounded by [Config.RequestTimeout]), and a request gives up after [Config.TimeoutAttempts] attempts
// that timed out: an endpoint that never answers fails a request in about
// 20 s with the defaults. Errors name the endpoint.
//
// Every Put marks its object with a random id in the metadata
// x-amz-meta-dstl-upload-id. Should the answer to a PutObject or
// CompleteMultipartUpload that did succeed be lost, its retry meets the
// object (412); the Put then reads the object's metadata and succeeds when
// the id and size are its own, and fails with [backends.ErrExists] otherwise.
// The same check runs when the retries of that request run out.
//
// Limits: [Config.Concurrency] bounds the parts of one Put, not of all
// Puts together. A CreateMultipartUpload whose answer is lost leaves an
// incomplete upload for the bucket's lifecycle rule
// (AbortIncompleteMultipartUpload) to remove.
package s3

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"golang.org/x/sync/errgroup"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/gate"
	"github.com/dstlgo/dstl/backends/internal/request"
	"github.com/dstlgo/dstl/backends/internal/urlparam"
	"github.com/dstlgo/dstl/dstl"
)

// ID is the backend's identifier in the registry and in its errors.
const ID = "s3"

// Scheme is the URL scheme of the backend's base paths.
const Scheme = "s3"

// abortTimeout bounds the abort of a failed multipart upload, which runs
// on a context of its own since the caller's may be done.
const abortTimeout = 30 * time.Second

func init() {
	backends.Register(ID, func(ctx context.Context, basePath string) (backends.Backend, error) {
		return New(ctx, basePath)
	}, Scheme)
}

// Backend is a [backends.Backend] on an S3 bucket. It is safe for concurrent
// use.
type Backend struct {
	client    *awss3.Client
	transport *http.Transport // ours to close, or nil for a given client
	bucket    string
	prefix    string
	partSize  int64
	conc      int
	sse       types.ServerSideEncryption
	kmsKeyID  *string
	policy    request.Policy
	endpoint  string // what errors name: the endpoint, or AWS's

	calls gate.Gate // Close waits for the calls in progress
}

var _ backends.Backend = (*Backend)(nil)

// New opens a backend from a base path "s3://bucket/prefix?..." (see
// [ParseURL]). It is the factory the backend registers.
func New(ctx context.Context, basePath string) (*Backend, error) {
	cfg, err := ParseURL(basePath)
	if err != nil {
		return nil, urlparam.Invalid(err)
	}
	return Open(ctx, cfg)
}

// Open opens a backend with cfg. Unless cfg.Client is set, it builds a
// client from the SDK's default configuration chain (credentials,
// region, AWS_CA_BUNDLE) and cfg's endpoint settings. Open sends no
// request; a missing bucket shows in the first call.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("s3: open bucket %q: %w", cfg.Bucket, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, urlparam.Invalid(err)
	}
	b := &Backend{
		client:   cfg.Client,
		bucket:   cfg.Bucket,
		prefix:   cfg.prefix(),
		partSize: cfg.PartSize,
		conc:     cfg.Concurrency,
		sse:      types.ServerSideEncryption(cfg.SSE),
		policy: request.Policy{
			Timeout:         cfg.RequestTimeout,
			MaxAttempts:     cfg.MaxAttempts,
			InitialBackoff:  request.DefaultPolicy.InitialBackoff,
			MaxBackoff:      request.DefaultPolicy.MaxBackoff,
			ResponseTimeout: cfg.ResponseTimeout,
			TimeoutAttempts: cfg.TimeoutAttempts,
		},
		endpoint: endpointOf(cfg),
	}
	if cfg.SSEKMSKeyID != "" {
		b.kmsKeyID = aws.String(cfg.SSEKMSKeyID)
	}
	if b.client == nil {
		client, tr, err := newClient(ctx, cfg)
		if err != nil {
			return nil, err
		}
		b.client, b.transport = client, tr
	}
	return b, nil
}

// newClient builds a client from the default chain. The HTTP client is set
// on the S3 options rather than given to LoadDefaultConfig, which rejects
// one when AWS_CA_BUNDLE is set; the bundle is honoured here instead, so
// that Close can release the transport's idle connections.
func newClient(ctx context.Context, cfg Config) (*awss3.Client, *http.Transport, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("s3: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	var tr *http.Transport
	if bc, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient); ok {
		tr = bc.GetTransport() // a copy, with the CA bundle's roots when one is set
	} else {
		tr = http.DefaultTransport.(*http.Transport).Clone()
		if bundle := os.Getenv("AWS_CA_BUNDLE"); bundle != "" {
			if err := addCABundle(tr, bundle); err != nil {
				return nil, nil, err
			}
		}
	}
	hc := &http.Client{
		Transport:     request.CountSent(request.ResponseTimeout(tr, cfg.ResponseTimeout)),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	client := awss3.NewFromConfig(awsCfg, func(o *awss3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.UsePathStyle
		o.HTTPClient = hc
		o.Retryer = aws.NopRetryer{} // request.Do retries
	})
	return client, tr, nil
}

func addCABundle(tr *http.Transport, file string) error {
	pem, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("s3: read AWS_CA_BUNDLE: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("s3: AWS_CA_BUNDLE %q holds no PEM certificate", file)
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tr.TLSClientConfig.RootCAs = pool
	return nil
}

// endpointOf is the endpoint that errors name.
func endpointOf(cfg Config) string {
	switch {
	case cfg.Client != nil:
		return "the given client's endpoint"
	case cfg.Endpoint != "":
		if u, err := url.Parse(cfg.Endpoint); err == nil {
			return redact(u)
		}
		return "the configured endpoint"
	case cfg.Region != "":
		return "AWS S3 (" + cfg.Region + ")"
	}
	return "AWS S3"
}

// Client returns the S3 client the backend sends its requests with, for
// programs that compare the backend with the SDK used directly (such as
// "dstl bench") or that need a call the backend does not make.
func (b *Backend) Client() *awss3.Client { return b.client }

// Bucket returns the backend's bucket.
func (b *Backend) Bucket() string { return b.bucket }

// Prefix returns the key prefix of the backend's objects ("" or ending in
// a slash).
func (b *Backend) Prefix() string { return b.prefix }

// Close waits for running calls to return and closes the idle connections
// of the HTTP transport the backend made (not those of a client given in
// [Config.Client]). Later calls fail with [dstl.ErrClosed]; readers
// returned by Get stay usable until closed. Closing twice is not an error.
func (b *Backend) Close() error {
	if !b.calls.Close() {
		return nil
	}
	if b.transport != nil {
		b.transport.CloseIdleConnections()
	}
	return nil
}

// begin registers a running call; it fails once the backend is closed.
func (b *Backend) begin(op, name string) error {
	if !b.calls.Enter() {
		return backends.NewError(op, ID, name, dstl.ErrClosed)
	}
	return nil
}

func (b *Backend) key(name string) string { return b.prefix + name }

// Put stores size bytes of body under name, create-only: it fails with
// [backends.ErrExists] when name exists. Up to the part size it is one
// PutObject; above, a multipart upload that is aborted when it fails.
func (b *Backend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	if err := backends.CheckObjectName(name); err != nil {
		return backends.NewError("put", ID, name, err)
	}
	if size < 0 {
		return backends.NewError("put", ID, name, fmt.Errorf("negative size %d", size))
	}
	if body == nil {
		return backends.NewError("put", ID, name, errors.New("nil body"))
	}
	if err := b.begin("put", name); err != nil {
		return err
	}
	defer b.calls.Leave()
	if err := ctx.Err(); err != nil {
		return b.wrap("put", name, err, false)
	}
	var err error
	if size <= b.partSize {
		err = b.putSingle(ctx, name, body, size)
	} else {
		err = b.putMultipart(ctx, name, body, size)
	}
	return b.wrap("put", name, err, true)
}

func (b *Backend) putSingle(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	key := b.key(name)
	id := rand.Text()
	attempts := 0
	err := b.doBody(ctx, size, func(ctx context.Context) error {
		attempts++
		r := newBody(body, 0, size)
		_, err := b.client.PutObject(ctx, &awss3.PutObjectInput{
			Bucket:               &b.bucket,
			Key:                  &key,
			Body:                 r,
			ContentLength:        aws.Int64(size),
			IfNoneMatch:          aws.String("*"),
			Metadata:             map[string]string{metaUploadID: id},
			ServerSideEncryption: b.sse,
			SSEKMSKeyId:          b.kmsKeyID,
		})
		return r.check(err)
	})
	return b.settle(ctx, key, id, size, attempts, err)
}

func (b *Backend) putMultipart(ctx context.Context, name string, body io.ReaderAt, size int64) (err error) {
	key := b.key(name)
	partSize := max(b.partSize, (size+maxParts-1)/maxParts)
	n := int((size + partSize - 1) / partSize)

	var uploadID *string
	id := rand.Text()
	err = b.do(ctx, func(ctx context.Context) error {
		out, err := b.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{
			Bucket:               &b.bucket,
			Key:                  &key,
			Metadata:             map[string]string{metaUploadID: id},
			ServerSideEncryption: b.sse,
			SSEKMSKeyId:          b.kmsKeyID,
		})
		if err == nil {
			uploadID = out.UploadId
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create multipart upload: %w", err)
	}
	defer func() {
		if err != nil {
			if aerr := b.abort(ctx, key, uploadID); aerr != nil {
				err = fmt.Errorf("%w (and the abort of upload %s failed: %w)", err, aws.ToString(uploadID), aerr)
			}
		}
	}()

	parts := make([]types.CompletedPart, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(b.conc)
	for i := range n {
		off := int64(i) * partSize
		length := min(partSize, size-off)
		num := aws.Int32(int32(i + 1))
		g.Go(func() error {
			return b.doBody(gctx, length, func(ctx context.Context) error {
				r := newBody(body, off, length)
				out, err := b.client.UploadPart(ctx, &awss3.UploadPartInput{
					Bucket:        &b.bucket,
					Key:           &key,
					UploadId:      uploadID,
					PartNumber:    num,
					Body:          r,
					ContentLength: aws.Int64(length),
				})
				if err = r.check(err); err != nil {
					return fmt.Errorf("part %d: %w", *num, err)
				}
				parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: num}
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return fmt.Errorf("upload part: %w", err)
	}
	attempts := 0
	err = b.do(ctx, func(ctx context.Context) error {
		attempts++
		_, err := b.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
			Bucket:          &b.bucket,
			Key:             &key,
			UploadId:        uploadID,
			IfNoneMatch:     aws.String("*"),
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
		return err
	})
	if err = b.settle(ctx, key, id, size, attempts, err); err != nil {
		return fmt.Errorf("complete multipart upload: %w", err)
	}
	return nil
}

// metaUploadID is the object metadata (x-amz-meta-dstl-upload-id) that
// holds the random id of the Put that wrote the object.
const metaUploadID = "dstl-upload-id"

// settle decides the outcome of the request that makes a Put's object
// visible (PutObject or CompleteMultipartUpload), which failed with err
// after attempts attempts. The answer to an attempt that succeeded may
// have been lost, so that a retry met the object (412, or NoSuchUpload
// for a completed upload) or the retries ran out: then the object is ours,
// and the Put succeeded, when it carries the Put's id and size. A 412 on
// the first attempt, or an object of another Put, is err as it is.
func (b *Backend) settle(ctx context.Context, key, id string, size int64, attempts int, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	var be *bodyError
	code, status := apiCode(err), statusCode(err)
	switch {
	case errors.As(err, &be):
		return err
	case status == http.StatusPreconditionFailed || code == "PreconditionFailed",
		code == "NoSuchUpload" || status == http.StatusNotFound:
		if attempts <= 1 {
			return err
		}
	case retryable(err), request.IsContextError(err): // the retries ran out
	default:
		return err
	}
	// After attempts that went unanswered, one more unanswered request
	// tells nothing new: the check gets a single attempt that may time out.
	p := b.policy
	if request.IsTimeout(err) {
		p.TimeoutAttempts = 1
	}
	var got *awss3.HeadObjectOutput
	herr := request.Do(ctx, p, retryable, func(ctx context.Context) error {
		out, err := b.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &b.bucket, Key: &key})
		got = out
		return err
	})
	if herr != nil || aws.ToInt64(got.ContentLength) != size {
		return err
	}
	for k, v := range got.Metadata {
		if strings.EqualFold(k, metaUploadID) && v == id {
			return nil
		}
	}
	return err
}

// abort aborts a multipart upload on a context of its own, bounded, since
// ctx may be done. An upload that is gone already is no error.
func (b *Backend) abort(ctx context.Context, key string, uploadID *string) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	err := b.do(actx, func(ctx context.Context) error {
		_, err := b.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{
			Bucket: &b.bucket, Key: &key, UploadId: uploadID,
		})
		return err
	})
	if err != nil && (apiCode(err) == "NoSuchUpload" || statusCode(err) == http.StatusNotFound) {
		return nil
	}
	return err
}

// Get returns length bytes of the object from offset on (-1: to the end).
func (b *Backend) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if err := backends.CheckObjectName(name); err != nil {
		return nil, backends.NewError("get", ID, name, err)
	}
	if offset < 0 || length < -1 {
		return nil, backends.NewError("get", ID, name,
			fmt.Errorf("%w: offset %d, length %d", backends.ErrInvalidRange, offset, length))
	}
	if err := b.begin("get", name); err != nil {
		return nil, err
	}
	defer b.calls.Leave()
	if err := ctx.Err(); err != nil {
		return nil, b.wrap("get", name, err, false)
	}
	key := b.key(name)
	if length == 0 {
		if err := b.checkOffset(ctx, key, offset); err != nil {
			return nil, b.wrap("get", name, err, false)
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	in := &awss3.GetObjectInput{Bucket: &b.bucket, Key: &key}
	switch {
	case length > 0 && length <= math.MaxInt64-offset:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	case offset > 0: // also a length past any possible end
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
	}
	var out *awss3.GetObjectOutput
	var cancelBody context.CancelFunc
	err := b.do(ctx, func(actx context.Context) error {
		// The body outlives the attempt: the call runs on a context of the
		// caller's that only the attempt's timeout cancels, and only until
		// the answer's headers are in.
		cctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(actx, cancel)
		o, err := b.client.GetObject(cctx, in)
		if !stop() {
			if err == nil {
				o.Body.Close()
			}
			cancel()
			return fmt.Errorf("attempt timed out: %w", cmpErr(actx.Err(), err))
		}
		if err != nil {
			cancel()
			return err
		}
		out, cancelBody = o, cancel
		return nil
	})
	if err != nil {
		if statusCode(err) == http.StatusRequestedRangeNotSatisfiable || apiCode(err) == "InvalidRange" {
			// The range starts at or past the end: at the end is an empty read.
			if cerr := b.checkOffset(ctx, key, offset); cerr != nil {
				return nil, b.wrap("get", name, cerr, false)
			}
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, b.wrap("get", name, err, false)
	}
	return &reader{b: b, ctx: ctx, name: name, body: out.Body, cancel: cancelBody}, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// checkOffset checks that the object exists and offset is not past its end.
func (b *Backend) checkOffset(ctx context.Context, key string, offset int64) error {
	var size int64
	err := b.do(ctx, func(ctx context.Context) error {
		out, err := b.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &b.bucket, Key: &key})
		if err == nil {
			size = aws.ToInt64(out.ContentLength)
		}
		return err
	})
	if err != nil {
		return err
	}
	if offset > size {
		return fmt.Errorf("%w: offset %d past the end of %d bytes", backends.ErrInvalidRange, offset, size)
	}
	return nil
}

// reader is the body of a Get; its errors name the object.
type reader struct {
	b      *Backend
	ctx    context.Context
	name   string
	body   io.ReadCloser
	cancel context.CancelFunc
	once   sync.Once
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, r.b.wrap("get", r.name, err, false)
	}
	n, err := r.body.Read(p)
	if err != nil && err != io.EOF {
		if cerr := r.ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		err = r.b.wrap("get", r.name, err, false)
	}
	return n, err
}

func (r *reader) Close() error {
	var err error
	r.once.Do(func() {
		err = r.body.Close()
		r.cancel()
	})
	return err
}

// Delete removes the object; a missing object is no error.
func (b *Backend) Delete(ctx context.Context, name string) error {
	if err := backends.CheckObjectName(name); err != nil {
		return backends.NewError("delete", ID, name, err)
	}
	if err := b.begin("delete", name); err != nil {
		return err
	}
	defer b.calls.Leave()
	if err := ctx.Err(); err != nil {
		return b.wrap("delete", name, err, false)
	}
	key := b.key(name)
	err := b.do(ctx, func(ctx context.Context) error {
		_, err := b.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &b.bucket, Key: &key})
		return err
	})
	if err != nil && isNotFound(err) && apiCode(err) != "NoSuchBucket" {
		return nil
	}
	return b.wrap("delete", name, err, false)
}

// List calls fn for every object whose name starts with prefix, in lexical
// order (S3 lists keys in UTF-8 binary order). Keys under the backend's
// prefix that are no valid object names (such as "dir/" markers) are
// skipped.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	if fn == nil {
		return backends.NewError("list", ID, prefix, errors.New("nil callback"))
	}
	if err := b.begin("list", prefix); err != nil {
		return err
	}
	defer b.calls.Leave()
	if !canMatch(prefix) {
		return b.wrap("list", prefix, ctx.Err(), false)
	}
	full := b.key(prefix)
	in := &awss3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: &full}
	for {
		if err := ctx.Err(); err != nil {
			return b.wrap("list", prefix, err, false)
		}
		var page *awss3.ListObjectsV2Output
		err := b.do(ctx, func(ctx context.Context) error {
			out, err := b.client.ListObjectsV2(ctx, in)
			page = out
			return err
		})
		if err != nil {
			return b.wrap("list", prefix, err, false)
		}
		for _, o := range page.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), b.prefix)
			if backends.CheckObjectName(name) != nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				return b.wrap("list", prefix, err, false)
			}
			if err := fn(backends.ObjectInfo{Name: name, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)}); err != nil {
				return err
			}
		}
		if !aws.ToBool(page.IsTruncated) || page.NextContinuationToken == nil {
			return nil
		}
		in.ContinuationToken = page.NextContinuationToken
	}
}

// canMatch reports whether some valid object name starts with prefix: its
// complete segments must be valid. Services may refuse such prefixes.
func canMatch(prefix string) bool {
	if strings.ContainsAny(prefix, "\\\x00") {
		return false
	}
	segs := strings.Split(prefix, "/")
	for _, s := range segs[:len(segs)-1] {
		if s == "" || s == "." || s == ".." {
			return false
		}
	}
	return true
}

// do runs one request with the backend's retry policy.
func (b *Backend) do(ctx context.Context, fn func(context.Context) error) error {
	return request.Do(ctx, b.policy, retryable, fn)
}

// doBody runs a request with a body of size bytes under the retry policy,
// its timeout grown with the body (see [request.Policy.ForBody]).
func (b *Backend) doBody(ctx context.Context, size int64, fn func(context.Context) error) error {
	return request.Do(ctx, b.policy.ForBody(size), retryable, fn)
}

// body is the replayable body of one attempt: a section of the caller's
// io.ReaderAt (seekable, as SigV4 over plain HTTP needs) that remembers
// whether the caller's body failed or came up short.
type body struct {
	r    *io.SectionReader
	size int64

	mu  sync.Mutex
	err error
}

func newBody(r io.ReaderAt, off, size int64) *body {
	return &body{r: io.NewSectionReader(r, off, size), size: size}
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil {
		pos, _ := b.r.Seek(0, io.SeekCurrent)
		b.mu.Lock()
		switch {
		case err != io.EOF:
			b.err = fmt.Errorf("reading the body: %w", err)
		case pos < b.size:
			b.err = fmt.Errorf("body ends after %d of %d bytes: %w", pos, b.size, io.ErrUnexpectedEOF)
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *body) Seek(offset int64, whence int) (int64, error) { return b.r.Seek(offset, whence) }

// check returns the body's own error, when it failed, in place of the
// request's, as a permanent error.
func (b *body) check(err error) error {
	if err == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return &bodyError{b.err}
	}
	return err
}

// bodyError is a failure of the caller's body; it is not retried.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// retryable reports whether a failed request is worth another attempt:
// throttling, 5xx answers, request timeouts, cut or refused connections.
func retryable(err error) bool {
	var be *bodyError
	switch {
	case errors.As(err, &be), request.IsContextError(err):
		return false
	}
	switch apiCode(err) {
	case "SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "RequestTimeoutException",
		"InternalError", "ServiceUnavailable", "TooManyRequests", "RequestLimitExceeded",
		"ConditionalRequestConflict": // 409 of racing conditional writes; a retry resolves it
		return true
	}
	if code := statusCode(err); code != 0 {
		return code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500
	}
	if request.PermanentTransportError(err) {
		return false
	}
	var send *smithyhttp.RequestSendError
	var ne net.Error
	return errors.As(err, &send) || errors.As(err, &ne) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

func statusCode(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func isNotFound(err error) bool {
	switch apiCode(err) {
	case "NoSuchKey", "NotFound", "NoSuchBucket":
		return true
	}
	return statusCode(err) == http.StatusNotFound
}

// wrap turns err into a *backends.Error for op on name, wrapping the
// sentinel that matches; put says whether a 412 means the object exists.
// The message names the bucket and the key.
func (b *Backend) wrap(op, name string, err error, put bool) error {
	if err == nil {
		return nil
	}
	var be *backends.Error
	if errors.As(err, &be) {
		return err
	}
	var sentinel error
	code, status := apiCode(err), statusCode(err)
	switch {
	case errors.Is(err, backends.ErrNotFound), errors.Is(err, backends.ErrExists), errors.Is(err, backends.ErrPermission),
		errors.Is(err, backends.ErrInvalidName), errors.Is(err, backends.ErrInvalidRange), errors.Is(err, dstl.ErrClosed),
		errors.Is(err, backends.ErrPrecondition):
		// already classified
	case isNotFound(err):
		sentinel = backends.ErrNotFound
	case status == http.StatusForbidden, code == "AccessDenied", code == "InvalidAccessKeyId",
		code == "SignatureDoesNotMatch", code == "AllAccessDisabled":
		sentinel = backends.ErrPermission
	case status == http.StatusPreconditionFailed || code == "PreconditionFailed":
		if put {
			sentinel = backends.ErrExists
		} else {
			sentinel = backends.ErrPrecondition
		}
	case status == http.StatusRequestedRangeNotSatisfiable || code == "InvalidRange":
		sentinel = backends.ErrInvalidRange
	}
	var (
		send     *smithyhttp.RequestSendError
		canceled *smithy.CanceledError
		opErr    *smithy.OperationError
	)
	switch {
	case code == "NoSuchBucket":
		err = fmt.Errorf("bucket %q does not exist: %w", b.bucket, err)
	case status == 0 && errors.As(err, &opErr) && (errors.As(err, &send) || errors.As(err, &canceled)):
		// The SDK's text ("https response error StatusCode: 0, RequestID:
		// , HostID: , ...") says nothing but that no answer came.
		cause := "canceled: "
		if send != nil {
			cause, canceled = "", nil
		}
		if canceled != nil {
			cause += canceled.Err.Error()
		} else {
			cause += send.Err.Error()
		}
		msg := strings.Replace(err.Error(), opErr.Error(), opErr.Operation()+": no answer: "+cause, 1)
		err = &readableError{msg: msg, err: err}
	}
	if code == "NoSuchBucket" || request.PermanentTransportError(err) {
		err = request.Permanent(err) // no attempt heals it
	}
	err = fmt.Errorf("s3://%s/%s at %s: %w", b.bucket, b.key(name), b.endpoint, err)
	if sentinel != nil {
		err = fmt.Errorf("%w: %w", sentinel, err)
	}
	return backends.NewError(op, ID, name, backends.RedactError(err))
}

// readableError replaces the text of an SDK error with msg, and keeps the
// error for errors.Is and errors.As.
type readableError struct {
	msg string
	err error
}

func (e *readableError) Error() string { return e.msg }
func (e *readableError) Unwrap() error { return e.err }
