// Package s3 is the dstl backend on Amazon S3 and S3-compatible services
// (MinIO and others), with aws-sdk-go-v2.
//
// Importing the package registers the backend as "s3" for base paths of
// the form "s3://bucket/prefix" (see [ParseURL]); [Open] opens it from a
// [Config], also over a ready *s3.Client.
//
// The package is a driver (see package
// github.com/dstlgo/dstl/backends/driver): it makes the SDK calls and says
// what the service's errors mean. The [Backend] it returns embeds the
// portable [backends.Bucket], which checks names, sizes, bodies and
// ranges, refuses calls once closed, times and retries every request
// under the policy of the [Config] ([Config.Request]), fails readers once
// their context is done, and wraps every error with its sentinel and the
// object's location.
//
// Object names are keys under the prefix. A Put of up to [Config.PartSize]
// bytes is one PutObject; a larger one is a multipart upload whose parts
// go up in parallel, up to [Config.Concurrency] at once, each part a
// request of its own with its own retries. Both are create-only
// (If-None-Match: *), so a Put never replaces an object and fails with
// [backends.ErrExists] instead; a multipart upload that fails or is
// cancelled is aborted, leaving nothing visible. One whose process dies,
// or whose abort fails, stays as an incomplete upload:
// [Backend.ListIncompleteUploads] and [Backend.AbortIncompleteUpload] find
// and abort those ("dstl gc" does), and a bucket lifecycle rule
// AbortIncompleteMultipartUpload removes them. Checksums are computed and
// validated only where the API requires them, which S3-compatible services
// accept. Over plain HTTP the SDK signs the SHA-256 of every upload body;
// [Config.UnsignedPayload] sends them unsigned, as over HTTPS.
//
// Throttling, 5xx answers, cut connections and timeouts are retried with
// exponential backoff and jitter; the SDK's own retryer is off. A Get's
// attempt timeout bounds the wait for the answer's headers; reading the
// body is bounded by the caller's context only. The transport the backend
// makes waits at most the policy's ResponseTimeout for the answer's
// headers of a request without a large body (uploads of objects and parts
// are bounded by its Timeout), and a request gives up after its
// TimeoutAttempts attempts that timed out: an endpoint that never
// answers fails a request in about 20 s with the defaults. Errors name the
// bucket, the key and the endpoint; a missing bucket is said to be one,
// and is a permanent failure ([backends.ErrPermanent]).
//
// Every Put marks its object with a random id in the metadata
// x-amz-meta-dstl-upload-id. Should the answer to a PutObject or
// CompleteMultipartUpload that did succeed be lost, its retry meets the
// object (412); the Put then reads the object's metadata and succeeds when
// the id and size are its own, and fails with [backends.ErrExists] otherwise.
// The same check runs when the retries of that request run out.
//
// The Backend's As ([backends.Bucket.As]) gives the *s3.Client and the
// [driver.Root] (bucket and prefix), for calls the backend does not make.
//
// What the SDK of a client the backend makes logs (such as its fallback
// to IMDSv1) goes to [slog.Default], as a warning or a debug record whose
// message starts with "s3: AWS SDK: ", never to standard error.
//
// Limits: [Config.Concurrency] bounds the parts of one Put, not of all
// Puts together. A CreateMultipartUpload whose answer is lost leaves an
// incomplete upload for the bucket's lifecycle rule
// (AbortIncompleteMultipartUpload) to remove.
package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"golang.org/x/sync/errgroup"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/dstl/objname"
)

// ID is the backend's identifier in the registry and in its errors.
const ID = "s3"

// Scheme is the URL scheme of the backend's base paths.
const Scheme = "s3"

// abortTimeout bounds the abort of a failed multipart upload, which runs
// on a context of its own since the caller's may be done.
const abortTimeout = 30 * time.Second

func init() { backends.RegisterURL(ID, ParseURL, Open, Scheme) }

// Backend is the S3 backend: the portable [backends.Bucket] over an S3
// bucket, with the calls of its own (incomplete uploads). It is safe for
// concurrent use.
type Backend struct {
	*backends.Bucket
	d *bucket
}

// bucket is the driver: SDK calls on the keys of a bucket.
type bucket struct {
	client    *awss3.Client
	transport *http.Transport // ours to close, or nil for a given client
	bucket    string
	partSize  int64
	conc      int
	sse       types.ServerSideEncryption
	kmsKeyID  *string
	endpoint  string // what errors name: the endpoint, or AWS's
	prefix    string // the base path's key prefix, which the portable layer puts before every other key; the unsigned-payload probe's own

	// bodyOpts are the options of the requests with a body (PutObject,
	// UploadPart): with Config.UnsignedPayload, the swap of the
	// payload's SHA-256 for UNSIGNED-PAYLOAD.
	bodyOpts []func(*awss3.Options)
	unsigned unsignedCheck
}

// ErrUnsignedPayloadRefused is wrapped by the error of a Put on a backend
// with [Config.UnsignedPayload] when the store refuses bodies that are not
// signed (it took the same Put signed), and of
// [Backend.VerifyUnsignedPayload] then. Such an error is permanent
// ([backends.ErrPermanent]): another attempt would be refused too. Turn
// the option off for that store.
var ErrUnsignedPayloadRefused = errors.New("s3: the store refuses unsigned payloads (UNSIGNED-PAYLOAD)")

// unsignedCheck is what a backend with Config.UnsignedPayload knows of its
// store: ok once a request with an unsigned body went through; refused,
// once a probe found that the store refuses them, is the error every Put
// returns from then on.
type unsignedCheck struct {
	on      bool
	ok      atomic.Bool
	mu      sync.Mutex // held by a probe
	refused atomic.Pointer[error]
	// unsure is when a probe last could not tell (the store took no
	// probe object, signed or not: wrong credentials, say); another runs
	// only probeAgain later, so that failing puts do not each send one.
	unsure time.Time
}

// probeAgain is how long after a probe that could not tell the next one
// may run.
const probeAgain = 30 * time.Second

var _ driver.Bucket = (*bucket)(nil)

// New opens a backend from a base path "s3://bucket/prefix?..." (see
// [ParseURL]). It is the factory the backend registers.
func New(ctx context.Context, basePath string) (*Backend, error) {
	return backends.OpenURL(ctx, basePath, ParseURL, Open)
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
		return nil, backends.Invalid(err)
	}
	d := &bucket{
		client:   cfg.Client,
		bucket:   cfg.Bucket,
		partSize: cfg.PartSize,
		conc:     cfg.Concurrency,
		sse:      types.ServerSideEncryption(cfg.SSE),
		endpoint: endpointOf(cfg),
		prefix:   cfg.prefix(),
	}
	if cfg.SSEKMSKeyID != "" {
		d.kmsKeyID = aws.String(cfg.SSEKMSKeyID)
	}
	if cfg.UnsignedPayload {
		d.unsigned.on = true
		d.bodyOpts = []func(*awss3.Options){awss3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)}
	}
	if d.client == nil {
		client, tr, err := newClient(ctx, cfg)
		if err != nil {
			return nil, err
		}
		d.client, d.transport = client, tr
	}
	return &Backend{Bucket: backends.New(ID, d, cfg.Request, backends.WithPrefix(cfg.prefix())), d: d}, nil
}

// newClient builds a client from the default chain. The HTTP client is set
// on the S3 options rather than given to LoadDefaultConfig, which rejects
// one when AWS_CA_BUNDLE is set; the bundle is honoured here instead, so
// that Close can release the transport's idle connections.
func newClient(ctx context.Context, cfg Config) (*awss3.Client, *http.Transport, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithLogger(sdkLogger{}),
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
		// The SDK's default keeps 10 idle connections per host: a burst
		// of concurrent ranged reads would dial anew.
		tr.MaxIdleConnsPerHost = max(tr.MaxIdleConnsPerHost, driver.IdleConnsPerHost)
	} else {
		tr = driver.NewHTTPTransport()
		if bundle := os.Getenv("AWS_CA_BUNDLE"); bundle != "" {
			if err := addCABundle(tr, bundle); err != nil {
				return nil, nil, err
			}
		}
	}
	hc := &http.Client{
		Transport:     driver.Transport(tr, cfg.Request.ResponseTimeout),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	client := awss3.NewFromConfig(awsCfg, func(o *awss3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.UsePathStyle
		o.HTTPClient = hc
		o.Retryer = aws.NopRetryer{} // the portable layer retries
	})
	return client, tr, nil
}

// sdkLogger is the SDK's logger of a client the backend makes: it passes
// the SDK's messages on to slog's default logger, as warnings (the SDK's
// Warn) or debug records.
type sdkLogger struct{}

// Logf logs a message of the SDK.
func (sdkLogger) Logf(classification logging.Classification, format string, v ...any) {
	level := slog.LevelDebug
	if classification == logging.Warn {
		level = slog.LevelWarn
	}
	slog.Log(context.Background(), level, "s3: AWS SDK: "+fmt.Sprintf(format, v...))
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

// UnsignedPayload reports whether the backend sends upload bodies
// unsigned ([Config.UnsignedPayload]).
func (b *Backend) UnsignedPayload() bool { return b.d.unsigned.on }

// VerifyUnsignedPayload checks that the store takes bodies that are not
// signed, on a backend with [Config.UnsignedPayload] (on another, it
// returns nil at once): it puts a small object with an unsigned body
// under a name of its own, then deletes it; where the store refuses that
// Put, it tries the same signed, and fails with an error wrapping
// [ErrUnsignedPayloadRefused] when that one went through. Other errors
// (a store that cannot be reached) are returned as they are. A verdict
// holds for the backend's life; a Put finds it out by itself too.
func (b *Backend) VerifyUnsignedPayload(ctx context.Context) error {
	d := b.d
	if !d.unsigned.on {
		return nil
	}
	if err := d.unsigned.verdict(); err != nil {
		return err
	}
	return b.Run(ctx, "put", "(unsigned payload probe)", func(ctx context.Context, rt driver.Runner) error {
		refused, err := d.probeUnsigned(ctx, rt)
		if refused {
			return d.unsigned.verdict()
		}
		return err
	})
}

// Client returns the S3 client the backend sends its requests with, for
// programs that compare the backend with the SDK used directly (such as
// "dstl bench") or that need a call the backend does not make.
func (b *Backend) Client() *awss3.Client { return b.d.client }

// As sets a **s3.Client target to the client and a *driver.Root target
// to the bucket.
func (d *bucket) As(target any) bool {
	switch p := target.(type) {
	case **awss3.Client:
		*p = d.client
	case *driver.Root:
		*p = driver.Root{Bucket: d.bucket}
	default:
		return false
	}
	return true
}

// Close closes the idle connections of the HTTP transport the backend
// made (not those of a client given in [Config.Client]).
func (d *bucket) Close() error {
	if d.transport != nil {
		d.transport.CloseIdleConnections()
	}
	return nil
}

// Location names the bucket, the key and the endpoint.
func (d *bucket) Location(name string) string {
	return fmt.Sprintf("s3://%s/%s at %s", d.bucket, name, d.endpoint)
}

// Put stores the object create-only: up to the part size with one
// PutObject, above with a multipart upload that is aborted when it fails.
func (d *bucket) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	if err := d.unsigned.verdict(); err != nil {
		return err
	}
	if size <= d.partSize {
		return d.putSingle(ctx, rt, name, body, size)
	}
	return d.putMultipart(ctx, rt, name, body, size)
}

func (d *bucket) putSingle(ctx context.Context, rt driver.Runner, key string, body *driver.Body, size int64) error {
	id := rand.Text()
	attempts := 0
	err := rt.Do(ctx, size, func(ctx context.Context) error {
		attempts++
		_, err := d.client.PutObject(ctx, &awss3.PutObjectInput{
			Bucket:               &d.bucket,
			Key:                  &key,
			Body:                 body.Section(0, size),
			ContentLength:        aws.Int64(size),
			IfNoneMatch:          aws.String("*"),
			Metadata:             map[string]string{metaUploadID: id},
			ServerSideEncryption: d.sse,
			SSEKMSKeyId:          d.kmsKeyID,
		}, d.bodyOpts...)
		d.unsigned.note(err)
		return d.explain(err)
	})
	if uerr := d.checkUnsigned(ctx, rt, body, err); uerr != err {
		return uerr // the store refuses unsigned bodies
	}
	return d.settle(ctx, rt, key, id, body, attempts, err)
}

// PutMultipart stores body as a multipart upload, in one part up to the
// part size: the path of the Puts above it, for the check of create-only
// (backends.VerifyCreateOnly).
func (d *bucket) PutMultipart(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	return d.putMultipart(ctx, rt, name, body, size)
}

// MinMultipartSize is 1: S3's last part, and so a single one, may be of
// any size.
func (d *bucket) MinMultipartSize() int64 { return 1 }

func (d *bucket) putMultipart(ctx context.Context, rt driver.Runner, key string, body *driver.Body, size int64) (err error) {
	partSize := max(d.partSize, (size+maxParts-1)/maxParts)
	n := int((size + partSize - 1) / partSize)

	var uploadID *string
	id := rand.Text()
	err = rt.Do(ctx, 0, func(ctx context.Context) error {
		out, err := d.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{
			Bucket:               &d.bucket,
			Key:                  &key,
			Metadata:             map[string]string{metaUploadID: id},
			ServerSideEncryption: d.sse,
			SSEKMSKeyId:          d.kmsKeyID,
		})
		if err == nil {
			uploadID = out.UploadId
		}
		return d.explain(err)
	})
	if err != nil {
		return fmt.Errorf("create multipart upload: %w", err)
	}
	defer func() {
		if err != nil {
			if aerr := d.abort(ctx, rt, key, uploadID); aerr != nil {
				err = fmt.Errorf("%w (and the abort of upload %s failed: %w)", err, aws.ToString(uploadID), aerr)
			}
		}
	}()

	parts := make([]types.CompletedPart, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(d.conc)
	for i := range n {
		if gctx.Err() != nil {
			break // a part failed, or ctx ended: start no more
		}
		off := int64(i) * partSize
		length := min(partSize, size-off)
		num := aws.Int32(int32(i + 1))
		g.Go(func() error {
			return rt.Do(gctx, length, func(ctx context.Context) error {
				out, err := d.client.UploadPart(ctx, &awss3.UploadPartInput{
					Bucket:        &d.bucket,
					Key:           &key,
					UploadId:      uploadID,
					PartNumber:    num,
					Body:          body.Section(off, length),
					ContentLength: aws.Int64(length),
				}, d.bodyOpts...)
				d.unsigned.note(err)
				if err != nil {
					return fmt.Errorf("part %d: %w", *num, d.explain(err))
				}
				parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: num}
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil || ctx.Err() != nil {
		if err == nil {
			err = ctx.Err() // parts left unstarted
		}
		if uerr := d.checkUnsigned(ctx, rt, body, err); uerr != err {
			return uerr
		}
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return fmt.Errorf("upload part: %w", err)
	}
	attempts := 0
	err = rt.Do(ctx, 0, func(ctx context.Context) error {
		attempts++
		_, err := d.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
			Bucket:          &d.bucket,
			Key:             &key,
			UploadId:        uploadID,
			IfNoneMatch:     aws.String("*"),
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
		return d.explain(err)
	})
	if err = d.settle(ctx, rt, key, id, body, attempts, err); err != nil {
		return fmt.Errorf("complete multipart upload: %w", err)
	}
	return nil
}

// note records that a request with an unsigned body went through.
func (u *unsignedCheck) note(err error) {
	if u.on && err == nil && !u.ok.Load() {
		u.ok.Store(true)
	}
}

// verdict returns the error of every Put once a probe found that the store
// refuses unsigned bodies, or nil.
func (u *unsignedCheck) verdict() error {
	if p := u.refused.Load(); p != nil {
		return *p
	}
	return nil
}

// checkUnsigned returns err, the error of a Put's request with an
// unsigned body, or, when the store may refuse unsigned bodies (no such
// request went through yet, and err is none that a refusal cannot be: a
// failure of the body, an end of ctx, an existing object, a missing
// bucket), the probe's verdict: an error wrapping
// ErrUnsignedPayloadRefused when the store took a signed Put where it
// refused an unsigned one. Probes do not run at once, and a verdict
// holds for the backend's life.
func (d *bucket) checkUnsigned(ctx context.Context, rt driver.Runner, body *driver.Body, err error) error {
	if err == nil || !d.unsigned.on || d.unsigned.ok.Load() || ctx.Err() != nil || body.Err() != nil {
		return err
	}
	switch d.Classify(err) {
	case driver.Exists, driver.BucketNotFound, driver.NotFound, driver.InvalidRange:
		return err
	case driver.Transient:
		// A store that refuses unsigned bodies answers 4xx, or 501 Not
		// Implemented; not 503, nor a timeout.
		if statusCode(err) != http.StatusNotImplemented {
			return err
		}
	}
	if v := d.unsigned.verdict(); v != nil {
		return v
	}
	refused, perr := d.probeUnsigned(ctx, rt)
	if perr != nil || !refused {
		return err // the probe could not tell, or unsigned bodies go through
	}
	return d.unsigned.verdict()
}

// probeUnsigned finds out whether the store refuses unsigned bodies: it
// puts a small object with an unsigned body under a name of its own and,
// if that fails, the same signed; it deletes what it put. The store
// refuses them when the first failed and the second went through; then
// the verdict is kept. An error means the probe could not tell.
func (d *bucket) probeUnsigned(ctx context.Context, rt driver.Runner) (refused bool, err error) {
	u := &d.unsigned
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.verdict() != nil {
		return true, nil
	}
	if u.ok.Load() {
		return false, nil
	}
	if !u.unsure.IsZero() && time.Since(u.unsure) < probeAgain {
		return false, errors.New("a probe could not tell a moment ago")
	}
	name, err := objname.NewCreateOnlyProbe("")
	if err != nil {
		return false, err
	}
	key := d.prefix + name
	body := []byte("dstl probe: does the store take unsigned payloads?\n")
	put := func(opts ...func(*awss3.Options)) error {
		return rt.Do(ctx, int64(len(body)), func(ctx context.Context) error {
			_, err := d.client.PutObject(ctx, &awss3.PutObjectInput{
				Bucket:               &d.bucket,
				Key:                  &key,
				Body:                 bytes.NewReader(body),
				ContentLength:        aws.Int64(int64(len(body))),
				ServerSideEncryption: d.sse,
				SSEKMSKeyId:          d.kmsKeyID,
			}, opts...)
			return d.explain(err)
		})
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		_ = rt.Do(dctx, 0, func(ctx context.Context) error {
			_, err := d.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &d.bucket, Key: &key})
			return d.explain(err)
		})
	}()
	unsignedErr := put(d.bodyOpts...)
	if unsignedErr == nil {
		u.ok.Store(true)
		return false, nil
	}
	if err := put(); err != nil {
		u.unsure = time.Now()
		return false, fmt.Errorf("the store took no probe object, unsigned (%w) nor signed: %w", unsignedErr, err)
	}
	verdict := fmt.Errorf("%w: %s took a put signed and refused the same with an unsigned body (%w); "+
		"turn unsigned_payload (Config.UnsignedPayload) off for this store: %w",
		ErrUnsignedPayloadRefused, d.Location(name), unsignedErr, backends.ErrPermanent)
	u.refused.Store(&verdict)
	return true, nil
}

// metaUploadID is the object metadata (x-amz-meta-dstl-upload-id) that
// holds the random id of the Put that wrote the object.
const metaUploadID = "dstl-upload-id"

// settle decides the outcome of the request that makes a Put's object
// visible (PutObject or CompleteMultipartUpload), which failed with err
// after attempts attempts. The answer to an attempt that succeeded may
// have been lost, so that a retry met the object (412, or NoSuchUpload
// for a completed upload) or the retries ran out: then the object is ours,
// and the Put succeeded, when it carries the Put's id and the body's size.
// A 412 on the first attempt, a failure of the body, or an object of
// another Put, is err as it is.
func (d *bucket) settle(ctx context.Context, rt driver.Runner, key, id string, body *driver.Body, attempts int, err error) error {
	if err == nil || ctx.Err() != nil || body.Err() != nil {
		return err
	}
	code, status := apiCode(err), statusCode(err)
	switch {
	case status == http.StatusPreconditionFailed || code == "PreconditionFailed",
		code == "NoSuchUpload" || status == http.StatusNotFound:
		if attempts <= 1 {
			return err
		}
	case d.Classify(err) == driver.Transient, isContextError(err): // the retries ran out
	default:
		return err
	}
	var got *awss3.HeadObjectOutput
	head := func(ctx context.Context) error {
		out, err := d.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &d.bucket, Key: &key})
		got = out
		return d.explain(err)
	}
	var herr error
	if isTimeout(err) {
		// After attempts that went unanswered, one more unanswered
		// request tells nothing new: the check ends at its first attempt
		// that times out (other failures are retried as ever).
		herr = untilTimeout(ctx, rt, head)
	} else {
		herr = rt.Do(ctx, 0, head)
	}
	if herr != nil || aws.ToInt64(got.ContentLength) != body.Size() {
		return err
	}
	for k, v := range got.Metadata {
		if strings.EqualFold(k, metaUploadID) && v == id {
			return nil
		}
	}
	return err
}

// untilTimeout runs fn, one request, through rt, which times and retries
// it, but makes no attempt after one that timed out: that attempt ends
// rt's attempts as if it succeeded (no backoff, no retry counted), and its
// error is returned.
func untilTimeout(ctx context.Context, rt driver.Runner, fn func(ctx context.Context) error) error {
	var timedOut error
	err := rt.Do(ctx, 0, func(actx context.Context) error {
		err := fn(actx)
		if err != nil && (actx.Err() != nil || isTimeout(err)) {
			timedOut = err
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	return timedOut
}

// abort aborts a multipart upload on a context of its own, bounded, since
// ctx may be done.
func (d *bucket) abort(ctx context.Context, rt driver.Runner, key string, uploadID *string) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	return d.abortUpload(actx, rt, key, uploadID)
}

// abortUpload aborts a multipart upload. An upload that is gone already
// (completed or aborted) is no error.
func (d *bucket) abortUpload(ctx context.Context, rt driver.Runner, key string, uploadID *string) error {
	err := rt.Do(ctx, 0, func(ctx context.Context) error {
		_, err := d.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{
			Bucket: &d.bucket, Key: &key, UploadId: uploadID,
		})
		return d.explain(err)
	})
	if err != nil && d.Classify(err) == driver.NotFound { // NoSuchUpload, not NoSuchBucket
		return nil
	}
	return err
}

// Open makes one GetObject of the range.
func (d *bucket) Open(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	in := &awss3.GetObjectInput{Bucket: &d.bucket, Key: aws.String(name)}
	switch {
	case length > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	case offset > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
	}
	out, err := d.client.GetObject(ctx, in)
	if err != nil {
		return nil, d.explain(err)
	}
	return out.Body, nil
}

// Size makes one HeadObject.
func (d *bucket) Size(ctx context.Context, name string) (int64, error) {
	out, err := d.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &d.bucket, Key: aws.String(name)})
	if err != nil {
		return 0, d.explain(err)
	}
	return aws.ToInt64(out.ContentLength), nil
}

// Delete makes one DeleteObject.
func (d *bucket) Delete(ctx context.Context, name string) error {
	_, err := d.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &d.bucket, Key: aws.String(name)})
	return d.explain(err)
}

// List lists the keys under the prefix page by page (S3 lists keys in
// UTF-8 binary order), each page a request.
func (d *bucket) List(ctx context.Context, rt driver.Runner, prefix string, fn func(driver.ObjectInfo) error) error {
	in := &awss3.ListObjectsV2Input{Bucket: &d.bucket, Prefix: aws.String(prefix)}
	for {
		var page *awss3.ListObjectsV2Output
		err := rt.Do(ctx, 0, func(ctx context.Context) error {
			out, err := d.client.ListObjectsV2(ctx, in)
			page = out
			return d.explain(err)
		})
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			if err := fn(driver.ObjectInfo{Name: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)}); err != nil {
				return err
			}
		}
		if !aws.ToBool(page.IsTruncated) || page.NextContinuationToken == nil {
			return nil
		}
		in.ContinuationToken = page.NextContinuationToken
	}
}

// Classify maps the service's error codes and HTTP statuses, then the
// transport's errors. A 412 is [driver.Exists]: the backend's only
// preconditions are the create-only writes' If-None-Match.
func (d *bucket) Classify(err error) driver.Code {
	if errors.Is(err, ErrUnsignedPayloadRefused) {
		return driver.Permanent
	}
	switch apiCode(err) {
	case "NoSuchBucket":
		return driver.BucketNotFound
	case "NoSuchKey", "NotFound":
		return driver.NotFound
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled":
		return driver.Permission
	case "PreconditionFailed":
		return driver.Exists
	case "InvalidRange":
		return driver.InvalidRange
	case "SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "RequestTimeoutException",
		"InternalError", "ServiceUnavailable", "TooManyRequests", "RequestLimitExceeded",
		"ConditionalRequestConflict": // 409 of racing conditional writes; a retry resolves it
		return driver.Transient
	}
	switch status := statusCode(err); {
	case status == http.StatusNotFound:
		return driver.NotFound
	case status == http.StatusForbidden:
		return driver.Permission
	case status == http.StatusPreconditionFailed:
		return driver.Exists
	case status == http.StatusRequestedRangeNotSatisfiable:
		return driver.InvalidRange
	case status == http.StatusTooManyRequests, status == http.StatusRequestTimeout, status >= 500:
		return driver.Transient
	case status != 0:
		return driver.Unknown
	}
	if errors.Is(err, context.Canceled) {
		return driver.Unknown
	}
	if code, ok := driver.TransportCode(err); ok {
		return code
	}
	if send := (*smithyhttp.RequestSendError)(nil); errors.As(err, &send) {
		return driver.Transient // the request did not go out, or its answer did not come
	}
	return driver.Unknown
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

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &t) && t.Timeout()
}

// explain makes an error of the SDK say what happened: that the bucket
// does not exist, or, where the SDK's text says "https response error
// StatusCode: 0, RequestID: , HostID: , ...", that no answer came, and the
// transport's cause. The error still matches what err matches.
func (d *bucket) explain(err error) error {
	if err == nil {
		return nil
	}
	if apiCode(err) == "NoSuchBucket" {
		return fmt.Errorf("bucket %q does not exist: %w", d.bucket, err)
	}
	var (
		send     *smithyhttp.RequestSendError
		canceled *smithy.CanceledError
		opErr    *smithy.OperationError
	)
	if statusCode(err) != 0 || !errors.As(err, &opErr) || !errors.As(err, &send) && !errors.As(err, &canceled) {
		return err
	}
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
	return &readableError{msg: msg, err: err}
}

// readableError replaces the text of an SDK error with msg, and keeps the
// error for errors.Is and errors.As.
type readableError struct {
	msg string
	err error
}

func (e *readableError) Error() string { return e.msg }
func (e *readableError) Unwrap() error { return e.err }
