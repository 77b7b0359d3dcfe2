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
// The backend is a driver (package github.com/dstlgo/dstl/backends/driver)
// under the portable [backends.Bucket], which checks names, sizes and
// ranges, times and retries each request under [Config].Request, and wraps
// the errors. The driver makes the blob calls and says what their errors
// mean:
//
//   - A Put is one blob.Bucket.Upload, create-only
//     (blob.WriterOptions.IfNotExist): a Put of an existing name fails
//     with [backends.ErrExists] (fileblob checks the name and then renames
//     its file: this package serializes those commits within a process,
//     but Puts racing for one name from several processes may all
//     succeed; the local backend has no such limit). A failed or cancelled
//     Put cancels the writer's context before the driver closes it, so
//     that the driver commits nothing (s3blob aborts its multipart upload,
//     and so does this package when s3blob's own abort did not happen).
//     For an s3blob or a gcsblob bucket, the driver also has the
//     multipart path of [driver.MultipartPutter], so that the create-only
//     check of the portable layer (backends.VerifyCreateOnly) probes the
//     completion of a multipart or resumable upload too; other drivers
//     have one path.
//     The whole upload is one request, retried as a whole when it timed
//     out or failed for a transient reason; its timeout is the request
//     timeout once per part it goes up in, and twice more (see
//     [Config].Request).
//     Every Put marks its object with a random id in its metadata
//     ("dstl-upload-id"). When an attempt finds the object present, the
//     request that stored it may have been this Put's own, its answer
//     lost and the request sent again (by the retries of the portable
//     layer, or by the SDK's own): the Put succeeds if the object carries
//     its id (where the driver keeps no metadata, if the object holds
//     exactly the body, which reads it whole), and fails with ErrExists
//     otherwise.
//   - A Get opens one ranged reader; the wait for its answer is bounded by
//     the response timeout (see [Config].Request), since the drivers' HTTP
//     clients are out of reach.
//   - A List reads the whole listing, a page per request, and sorts it,
//     since not every driver lists in lexical order (fileblob walks
//     directories).
//   - Errors are classified by their gcerrors code, then by the HTTP
//     status of the SDK's error, then as transport errors: throttling,
//     5xx, a connection reset and a timeout are retried, a certificate
//     that does not verify or a host name that does not resolve are not.
//     A missing bucket fails with [backends.ErrNotFound] and
//     [backends.ErrPermanent], an answer 401 or 403 with
//     [backends.ErrPermission], whatever the driver's code says.
//
// The drivers' SDKs retry single HTTP requests of their own as well.
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
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
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
	"google.golang.org/api/googleapi"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
)

// ID is the backend's identifier in the registry.
const ID = "gocloud"

// Scheme is the URL scheme this backend registers (the others gocloud.dev
// serves belong to the native backends).
const Scheme = "mem"

func init() { backends.RegisterURL(ID, ParseURL, Open, Scheme) }

// Backend stores objects in a gocloud.dev/blob bucket: the portable
// [backends.Bucket] over the bucket. Its As sets a **blob.Bucket to the
// bucket (without the prefix), and passes other targets on to the
// bucket's As (a **s3.Client of an s3blob bucket, ...). It is safe for
// concurrent use.
type Backend struct {
	*backends.Bucket
	d *bucket
}

// bucket is the driver: the keys of a blob.Bucket.
type bucket struct {
	bucket *blob.Bucket
	owned  bool   // opened from the URL, so closed by Close
	where  string // the bucket URL without secrets, for errors
	cfg    Config
	s3     *s3.Client // the bucket's S3 client, for s3blob buckets
}

var _ driver.Bucket = (*bucket)(nil)

// New opens a backend from a base path (see [ParseURL]). It is the factory
// the backend registers.
func New(ctx context.Context, basePath string) (*Backend, error) {
	return backends.OpenURL(ctx, basePath, ParseURL, Open)
}

// Open opens a backend with cfg: on cfg.Bucket when set, otherwise on the
// bucket that blob.OpenBucket opens for cfg.URL.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, backends.Invalid(err)
	}
	d := &bucket{bucket: cfg.Bucket, cfg: cfg, where: redact(cfg.URL)}
	if d.bucket == nil {
		bk, err := blob.OpenBucket(ctx, cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("gocloud: open bucket %q: %w", d.where, redactError(err, cfg.URL))
		}
		d.bucket, d.owned = bk, true
	}
	if d.where == "" {
		d.where = "bucket"
	}
	var client *s3.Client
	if d.bucket.As(&client) && client != nil {
		d.s3 = client
	}
	return &Backend{Bucket: backends.New(ID, d.driver(), cfg.Request, backends.WithPrefix(cfg.Prefix)), d: d}, nil
}

// driver returns the driver that the portable layer runs: d itself, or,
// for an s3blob or a gcsblob bucket, whose Puts above the part size take
// a second path, d with that path as a [driver.MultipartPutter] (see
// [multipartBucket]).
func (d *bucket) driver() driver.Bucket {
	var gcs *storage.Client
	switch {
	case d.s3 != nil:
		// The transfer manager, which beforeWrite rebuilds, uploads in
		// parts from the threshold on: from 1 byte, any body goes up as a
		// multipart upload, in one part up to the part size.
		return &multipartBucket{bucket: d, min: 1, up: upload{
			bufferSize: max(d.cfg.PartSize, s3MinPartSize),
			threshold:  1,
		}}
	case d.bucket.As(&gcs) && gcs != nil:
		// The GCS client sends a body of at most one chunk in one
		// request, whatever its chunk size, and rounds the chunk size up
		// to a multiple of the smallest one.
		return &multipartBucket{bucket: d, min: gcsMinChunkSize + 1, up: upload{bufferSize: gcsMinChunkSize}}
	}
	return d
}

// s3MinPartSize is the smallest part S3 takes but for the last one.
const s3MinPartSize = 5 << 20

// gcsMinChunkSize is the smallest chunk of a GCS resumable upload.
const gcsMinChunkSize = 256 << 10

// multipartBucket is the driver of an s3blob or a gcsblob bucket: whose
// Puts above the part size go up as an S3 multipart upload, completed by
// CompleteMultipartUpload, or as a GCS resumable upload, completed by its
// last chunk. It adds that path as [driver.MultipartPutter], for the
// check of create-only ([backends.VerifyCreateOnly]).
//
// The drivers of other buckets have no second path, and the portable
// layer probes their single-request path only: azureblob stages blocks
// and commits a block list (with If-None-Match: *) whatever the size of
// the body, so that its Puts all take one path, which that probe tests;
// memblob and fileblob (mem://, file://) keep objects whole, and so does
// a driver this package does not know.
type multipartBucket struct {
	*bucket
	min int64  // the smallest size that up sends on the multipart path
	up  upload // how PutMultipart goes up
}

var _ driver.MultipartPutter = (*multipartBucket)(nil)

// PutMultipart stores body as one blob.Writer whose buffer forces the
// multipart path, otherwise as Put does (create-only, with the same
// errors and the same handling of a lost answer): on S3 a multipart upload
// with a threshold of 1 byte, in one part up to the part size (at least
// 5 MiB), completed by CompleteMultipartUpload with If-None-Match: *; on
// GCS a resumable upload in chunks of 256 KiB with the DoesNotExist
// precondition.
func (d *multipartBucket) PutMultipart(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	return d.put(ctx, rt, name, body, size, d.up)
}

// MinMultipartSize is the smallest size that PutMultipart sends on the
// multipart path: 1 byte on S3, 256 KiB and one byte on GCS.
func (d *multipartBucket) MinMultipartSize() int64 { return d.min }

// Close closes the bucket when the backend opened it itself (and, where
// the driver's HTTP client allows it, that client's idle connections). A
// Bucket given in [Config] stays open.
func (d *bucket) Close() error {
	if !d.owned {
		return nil
	}
	if d.s3 != nil {
		if c, ok := d.s3.Options().HTTPClient.(interface{ CloseIdleConnections() }); ok {
			defer c.CloseIdleConnections()
		}
	}
	if err := d.bucket.Close(); err != nil {
		return fmt.Errorf("%s: %w", d.where, err)
	}
	return nil
}

// As sets a **blob.Bucket target to the bucket and a *driver.Root to the
// bucket's URL (without secrets), and hands other targets to the bucket's
// As.
func (d *bucket) As(target any) bool {
	switch p := target.(type) {
	case **blob.Bucket:
		*p = d.bucket
	case *driver.Root:
		*p = driver.Root{Bucket: d.where}
	default:
		return d.bucket.As(target)
	}
	return true
}

// Location names the bucket, without secrets, and the object's key.
func (d *bucket) Location(name string) string {
	return fmt.Sprintf("%s object %q", d.where, name)
}

// metaID is the metadata key under which every Put marks its object with
// a random id of its own.
const metaID = "dstl-upload-id"

// Put writes the object with one blob.Writer, create-only, as a single
// request of rt: the attempt is the whole upload. It is retried when it
// timed out or failed for a transient reason. The object carries the
// Put's id in its metadata ([metaID]): when an attempt finds the object
// present, the request that stored it may have been this Put's own, its
// answer lost and the request sent again (by rt, or by the SDK's own
// retries within the attempt), and the Put succeeds if the object is its
// own (see [bucket.mine]).
func (d *bucket) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	return d.put(ctx, rt, name, body, size, upload{bufferSize: d.cfg.PartSize, threshold: int64(d.cfg.PartSize)})
}

// upload is how the writer of a Put goes up: the writer's buffer size
// (blob.WriterOptions.BufferSize, the part or chunk size), and for s3blob
// the size from which its transfer manager uploads in parts (0 keeps the
// driver's own transfer manager, with its threshold of 16 MiB).
type upload struct {
	bufferSize int
	threshold  int64
}

// put is Put with the writer's upload up.
func (d *bucket) put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64, up upload) error {
	id := rand.Text()
	return rt.Do(ctx, d.putBudget(size, up.bufferSize), func(ctx context.Context) error {
		err := d.write(ctx, rt, name, id, body, size, up)
		if gcerrors.Code(err) != gcerrors.FailedPrecondition {
			return err
		}
		// IfNotExist is the only condition of a write: the object exists.
		mine, merr := d.mine(ctx, name, id, body, size)
		switch {
		case merr == nil && mine:
			return nil
		case merr != nil && d.Classify(merr) == driver.Transient:
			return fmt.Errorf("the object exists; telling whether it is this Put's own: %w", merr)
		}
		return fmt.Errorf("%w: %w", backends.ErrExists, err)
	})
}

// mine reports whether the stored object name is the one this Put (of id)
// stored: by the id in its metadata, in one request; where the object has
// no id (a driver that keeps no metadata, such as fileblob with
// metadata=skip), by its size and bytes, which reads the whole object.
func (d *bucket) mine(ctx context.Context, name, id string, body *driver.Body, size int64) (bool, error) {
	attrs, err := d.bucket.Attributes(ctx, name)
	if err != nil {
		return false, err
	}
	if attrs.Size != size {
		return false, nil
	}
	if got, ok := attrs.Metadata[metaID]; ok {
		return got == id, nil
	}
	return d.holds(ctx, name, body, size)
}

// putBudget returns the body size a Put of size bytes gives rt.Do, which
// allows a request its timeout plus its body at [driver.MinThroughput].
// One attempt of a Put is the whole upload, which may take many requests
// (the parts of an S3 multipart upload, GCS resumable chunks, Azure staged
// blocks), so it gets the request timeout once per request: once for an
// object of at most one part, otherwise once per part and twice more
// (starting and completing the upload), as if the parts went up one after
// the other; the request timeouts past the first are passed as the bytes
// that MinThroughput sends in them. An object that takes longer than one
// request timeout to upload as a whole but whose every request fits in it
// is thus not cut short and sent again. A part size of 0 counts parts of
// [DefaultPartSize]. The part size is partSize, the writer's buffer size.
func (d *bucket) putBudget(size int64, partSize int) int64 {
	part := int64(partSize)
	if part <= 0 {
		part = DefaultPartSize
	}
	t := d.cfg.Request.Timeout
	perTimeout := int64(t/time.Second)*driver.MinThroughput + int64(t%time.Second)*driver.MinThroughput/int64(time.Second)
	parts := size/part + min(size%part, 1)
	switch {
	case parts <= 1 || perTimeout <= 0:
		return size
	case parts >= (math.MaxInt64-size)/perTimeout:
		return math.MaxInt64 // beyond any clock: the caller's context bounds it
	}
	return size + (parts+1)*perTimeout
}

// write makes one attempt of a Put, with blob.Bucket.Upload: the driver
// reads the body itself (through a blob.Writer's Write, azureblob's Close
// panics after a failed upload). A failure of the body cancels the
// writer's context before the driver sees it, so that its Close commits
// nothing; so does the end of ctx.
func (d *bucket) write(ctx context.Context, rt driver.Runner, name, id string, body *driver.Body, size int64, up upload) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var seen written
	src := &source{r: body.Section(0, size), cancel: cancel, seen: &seen}
	err := d.bucket.Upload(wctx, name, src, &blob.WriterOptions{
		ContentType:    "application/octet-stream",
		IfNotExist:     true,
		BufferSize:     up.bufferSize,
		MaxConcurrency: d.cfg.Concurrency,
		Metadata:       map[string]string{metaID: id},
		BeforeWrite:    func(as func(any) bool) error { return d.beforeWrite(as, &seen, up) },
	})
	src.committed()
	if err == nil {
		return nil
	}
	d.abort(ctx, rt, seen, err)
	if werr := ctx.Err(); werr != nil && !errors.Is(err, werr) {
		err = fmt.Errorf("%w (%w)", werr, err)
	}
	return err
}

// source is the body of one write as the driver reads it. A failure
// cancels the write. At the end of a fileblob write, it takes
// fileCommits until committed: fileblob checks that the name is free and
// then renames its temporary file, without a lock that spans writers, so
// that of two Puts racing for one name both could succeed; the commits
// of this process take turns.
type source struct {
	r      io.Reader
	cancel context.CancelFunc
	seen   *written
	locked bool
}

func (s *source) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	switch {
	case err == io.EOF:
		if s.seen.file && !s.locked {
			fileCommits.Lock()
			s.locked = true
		}
	case err != nil:
		s.cancel()
	}
	return n, err
}

// committed ends the write's hold of fileCommits, once the driver
// committed or failed.
func (s *source) committed() {
	if s.locked {
		s.locked = false
		fileCommits.Unlock()
	}
}

// written is what the driver showed of one write to BeforeWrite.
type written struct {
	s3Bucket, s3Key string // the bucket and key of an s3blob upload
	file            bool   // a fileblob write, to a temporary file
}

// fileCommits serializes the commits of fileblob writes (see source).
var fileCommits sync.Mutex

// abortTimeout bounds the abort of a failed multipart upload.
const abortTimeout = 30 * time.Second

// abort aborts the S3 multipart upload that err names, if any, of the
// write w. s3blob's transfer manager aborts it already; this makes sure,
// even when ctx is done or the first abort failed.
func (d *bucket) abort(ctx context.Context, rt driver.Runner, w written, err error) {
	var mpe transfermanager.MultipartUploadError
	if d.s3 == nil || !errors.As(err, &mpe) || mpe.UploadID() == "" || w.s3Bucket == "" || w.s3Key == "" {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	_ = rt.Do(actx, 0, func(ctx context.Context) error {
		_, err := d.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &w.s3Bucket, Key: &w.s3Key, UploadId: aws.String(mpe.UploadID())})
		if nsu := (*s3types.NoSuchUpload)(nil); errors.As(err, &nsu) {
			return nil
		}
		return err
	})
}

// beforeWrite notes in w the bucket and key of an s3blob upload (which
// hold the prefix of the bucket URL's "prefix" parameter and the
// driver's escaping), for abort, and whether the write is fileblob's. It
// tunes s3blob's transfer manager:
// s3blob passes it the part size and the concurrency, but not the
// threshold from which it uploads in parts (16 MiB by default), so the
// transfer manager is rebuilt with the part size and the threshold of up
// (for a Put, the threshold at the part size) unless up's threshold is 0.
// The bucket's checksum setting is kept.
func (d *bucket) beforeWrite(as func(any) bool, w *written, up upload) error {
	var f *os.File
	w.file = as(&f)
	var in *transfermanager.UploadObjectInput
	if as(&in) && in != nil {
		w.s3Bucket, w.s3Key = aws.ToString(in.Bucket), aws.ToString(in.Key)
	}
	var tm *transfermanager.Client
	if d.s3 == nil || up.threshold == 0 || !as(&tm) || tm == nil {
		return nil
	}
	*tm = *transfermanager.New(d.s3, func(o *transfermanager.Options) {
		o.RequestChecksumCalculation = d.s3.Options().RequestChecksumCalculation
		o.PartSizeBytes = int64(up.bufferSize)
		o.MultipartUploadThreshold = up.threshold
		if d.cfg.Concurrency > 0 {
			o.Concurrency = d.cfg.Concurrency
		}
		// Abort a failed upload on a context of its own, even when the
		// Put's context was cancelled.
		o.FailTimeout = abortTimeout
	})
	return nil
}

// holds reports whether the stored object name holds exactly body.
func (d *bucket) holds(ctx context.Context, name string, body *driver.Body, size int64) (bool, error) {
	r, err := d.bucket.NewReader(ctx, name, nil)
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
		if _, err := body.ReadAt(want[:n], off); err != nil {
			return false, err
		}
		if !bytes.Equal(got[:n], want[:n]) {
			return false, nil
		}
	}
	return true, nil
}

// Open opens one ranged reader. The wait for it (the answer's headers) is
// bounded by the policy's response timeout; the reader's request lives on
// until ctx ends, which the portable layer ends once the reader is closed.
// An offset past the end fails with [backends.ErrInvalidRange] where the
// driver does not refuse the range itself (memblob).
func (d *bucket) Open(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	r, err := d.bucket.NewRangeReader(ctx, name, offset, length, nil)
	if err == nil && offset > r.Size() {
		_ = r.Close()
		err = fmt.Errorf("%w: offset %d past the end of the %d-byte object", backends.ErrInvalidRange, offset, r.Size())
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Size returns the object's size, from its attributes.
func (d *bucket) Size(ctx context.Context, name string) (int64, error) {
	attrs, err := d.bucket.Attributes(ctx, name)
	if err != nil {
		return 0, err
	}
	return attrs.Size, nil
}

// Delete deletes the object.
func (d *bucket) Delete(ctx context.Context, name string) error {
	return d.bucket.Delete(ctx, name)
}

// List reads the whole listing under prefix, a page per request of rt,
// sorts it, and calls fn for each object.
func (d *bucket) List(ctx context.Context, rt driver.Runner, prefix string, fn func(driver.ObjectInfo) error) error {
	var objs []driver.ObjectInfo
	opts := &blob.ListOptions{Prefix: prefix}
	for token := blob.FirstPageToken; len(token) > 0; {
		var (
			page []*blob.ListObject
			next []byte
		)
		err := rt.Do(ctx, 0, func(ctx context.Context) error {
			var err error
			page, next, err = d.bucket.ListPage(ctx, token, 1000, opts)
			return err
		})
		if err != nil {
			return err
		}
		for _, o := range page {
			objs = append(objs, driver.ObjectInfo{Name: o.Key, Size: o.Size, ModTime: o.ModTime})
		}
		token = next
	}
	slices.SortFunc(objs, func(x, y driver.ObjectInfo) int { return strings.Compare(x.Name, y.Name) })
	for _, o := range objs {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// Classify maps the errors of gocloud.dev/blob and its drivers' SDKs: a
// transport error that no attempt heals first (azureblob calls a host
// name that does not resolve NotFound), then a cancellation, a missing
// bucket (which the drivers call NotFound), a refusal by its HTTP status
// (gcsblob calls a 403 NotFound, azureblob an authorization failure
// Unknown), then the gcerrors code, then the HTTP status of the SDK's
// error (a range past the end, throttling, 5xx), then any other transport
// error (also under an error with a 2xx status: an answer whose body was
// cut short). A failed precondition is a Precondition: Put, whose
// create-only write is the one request with a condition, marks it as
// backends.ErrExists itself.
func (d *bucket) Classify(err error) driver.Code {
	if c, ok := driver.TransportCode(err); ok && c == driver.Permanent {
		return c
	}
	if errors.Is(err, context.Canceled) {
		return driver.Unknown
	}
	if bucketMissing(err) {
		return driver.BucketNotFound
	}
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENOTEMPTY) {
		// fileblob: a name under an object's, or a directory of objects
		// whose name is not an object's.
		return driver.NotFound
	}
	status := httpStatus(err)
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return driver.Permission
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return driver.NotFound
	case gcerrors.AlreadyExists:
		return driver.Exists
	case gcerrors.FailedPrecondition:
		return driver.Precondition
	case gcerrors.PermissionDenied:
		return driver.Permission
	case gcerrors.ResourceExhausted, gcerrors.Internal, gcerrors.DeadlineExceeded:
		return driver.Transient
	case gcerrors.InvalidArgument, gcerrors.Unimplemented, gcerrors.Canceled:
		return driver.Unknown
	}
	if status >= 400 {
		switch {
		case status == http.StatusRequestedRangeNotSatisfiable:
			return driver.InvalidRange
		case status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500:
			return driver.Transient
		}
		return driver.Unknown
	}
	if c, ok := driver.TransportCode(err); ok {
		return c
	}
	return driver.Unknown
}

// bucketMissing reports whether err says that the bucket (container) does
// not exist, in the words of the AWS, Google or Azure SDK.
func bucketMissing(err error) bool {
	var api interface{ ErrorCode() string } // AWS
	if errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket" {
		return true
	}
	if e, ok := errors.AsType[*azcore.ResponseError](err); ok && e.ErrorCode == "ContainerNotFound" {
		return true
	}
	return errors.Is(err, storage.ErrBucketNotExist)
}

// httpStatus digs the HTTP status code out of an error of the drivers'
// SDKs (AWS, Google, Azure), or returns 0.
func httpStatus(err error) int {
	var aws interface{ HTTPStatusCode() int }
	var other interface{ StatusCode() int }
	if errors.As(err, &aws) {
		return aws.HTTPStatusCode()
	}
	if e, ok := errors.AsType[*googleapi.Error](err); ok {
		return e.Code
	}
	if e, ok := errors.AsType[*azcore.ResponseError](err); ok {
		return e.StatusCode
	}
	if errors.As(err, &other) {
		return other.StatusCode()
	}
	return 0
}
