// Package azure is the dstl backend for Azure Blob Storage, on the azblob
// SDK.
//
// It registers itself in init under the identifier "azure" and the URL
// scheme "azblob"; import it for its side effect to make it available to
// [backends.Open]:
//
//	import _ "github.com/dstlgo/dstl/backends/azure"
//
// Base paths are azblob://CONTAINER/PREFIX URLs; see [ParseURL] for the
// query parameters and where credentials come from. Programs that configure
// the backend in code use [Open] with a [Config], which may carry a ready
// container client. Object names are stored as blob names under the prefix.
//
// Put never replaces a blob. Up to the part size it is one Put Blob request
// with If-None-Match: *. Above it, blocks of the part size are staged in
// parallel (a bounded number at a time) under block ids unique to that Put,
// then committed with Put Block List and If-None-Match: *; the blob appears
// only at the commit, whole. A Put that fails or is cancelled before the
// commit leaves no blob: its uncommitted blocks are invisible to Get and
// List, and the service discards them on its own (after a week, or at the
// next commit of the same name). Of Puts racing for one name, exactly one
// commit succeeds; the others fail with [backends.ErrExists].
//
// Every request, and every block, runs under a per-request timeout and is
// retried with exponential backoff and jitter (Config.Request); the SDK's
// own retries are turned off so that they are not doubled. A retried create
// that finds the blob already there checks the upload id it stored in the
// blob's metadata, so that its own earlier, timed-out attempt is not taken
// for a competitor.
package azure

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/gate"
	"github.com/dstlgo/dstl/backends/internal/request"
	"github.com/dstlgo/dstl/backends/internal/urlparam"
	"github.com/dstlgo/dstl/dstl"
)

// ID is the backend's identifier in the registry and in its errors.
const ID = "azure"

// Scheme is the URL scheme of the backend's base paths.
const Scheme = "azblob"

// metaUploadID is the metadata key under which a Put stores its upload id.
const metaUploadID = "dstluploadid"

var getenv = os.Getenv

func init() {
	backends.Register(ID, func(ctx context.Context, basePath string) (backends.Backend, error) {
		return New(ctx, basePath)
	}, Scheme)
}

// Backend is a [backends.Backend] on an Azure Blob Storage container. It is
// safe for concurrent use.
type Backend struct {
	client      *container.Client
	container   string
	prefix      string
	partSize    int64
	concurrency int
	policy      request.Policy
	endpoint    string          // the account's Blob service URL, which errors name
	transport   *http.Transport // our own, when we made it: its idle connections go at Close

	calls gate.Gate // Close waits for the calls in progress
}

var _ backends.Backend = (*Backend)(nil)

// New opens a backend from an azblob:// base path (see [ParseURL]). It is
// the factory the backend registers.
func New(ctx context.Context, basePath string) (*Backend, error) {
	cfg, err := ParseURL(basePath)
	if err != nil {
		return nil, urlparam.Invalid(err)
	}
	return Open(ctx, cfg)
}

// Open opens a backend with cfg. It makes no request: a missing container
// or bad credentials show in the first call.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("azure: open container %q: %w", cfg.Container, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, urlparam.Invalid(err)
	}
	b := &Backend{
		client:      cfg.Client,
		container:   cfg.Container,
		prefix:      cfg.Prefix,
		partSize:    cfg.PartSize,
		concurrency: cfg.Concurrency,
		policy:      cfg.Request,
		endpoint:    endpointName(cfg, cfg.Client),
	}
	if b.prefix != "" && !strings.HasSuffix(b.prefix, "/") {
		b.prefix += "/"
	}
	if b.client != nil {
		return b, nil
	}
	hc := cfg.HTTPClient
	if hc == nil {
		b.transport = http.DefaultTransport.(*http.Transport).Clone()
		hc = &http.Client{Transport: request.CountSent(request.ResponseTimeout(b.transport, cfg.Request.ResponseTimeout))}
	}
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: hc,
		// request.Do retries; the SDK must not retry as well.
		Retry: policy.RetryOptions{MaxRetries: -1},
	}}
	var err error
	switch {
	case cfg.ConnectionString != "":
		b.client, err = container.NewClientFromConnectionString(cfg.ConnectionString, cfg.Container, opts)
	case cfg.AccountKey != "":
		var cred *container.SharedKeyCredential
		if cred, err = container.NewSharedKeyCredential(cfg.Account, cfg.AccountKey); err == nil {
			b.client, err = container.NewClientWithSharedKeyCredential(containerURL(cfg), cred, opts)
		}
	default:
		cred := cfg.Credential
		if cred == nil {
			cred, err = azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
				ClientOptions: azcore.ClientOptions{Transport: hc},
			})
		}
		if err == nil {
			b.client, err = container.NewClient(containerURL(cfg), cred, opts)
		}
	}
	if err != nil {
		b.closeIdle()
		// The SDK's messages name no secret, but do not risk echoing a
		// connection string: say which kind of credential failed.
		return nil, fmt.Errorf("azure: open container %q: making the client: %w", cfg.Container, err)
	}
	b.endpoint = endpointName(cfg, b.client)
	return b, nil
}

// endpointName is the endpoint that errors name: the account's Blob
// service URL.
func endpointName(cfg Config, client *container.Client) string {
	if client != nil {
		if u, err := url.Parse(client.URL()); err == nil {
			u.RawQuery, u.Path, u.RawPath = "", strings.TrimSuffix(u.Path, "/"+cfg.Container), "" // no SAS token
			return redact(u)
		}
	}
	if cfg.AccountURL != "" {
		if u, err := url.Parse(cfg.AccountURL); err == nil {
			return redact(u)
		}
	}
	return "https://" + cfg.Account + ".blob.core.windows.net"
}

// containerURL returns the URL of cfg's container.
func containerURL(cfg Config) string {
	u := cfg.AccountURL
	if u == "" {
		u = "https://" + cfg.Account + ".blob.core.windows.net"
	}
	return strings.TrimSuffix(u, "/") + "/" + cfg.Container
}

// Client returns the container client the backend sends its requests
// with, for programs that compare the backend with the SDK used directly
// (such as "dstl bench") or that need a call the backend does not make.
func (b *Backend) Client() *container.Client { return b.client }

// Container returns the name of the backend's container.
func (b *Backend) Container() string { return b.container }

// Prefix returns the prefix of the backend's blob names.
func (b *Backend) Prefix() string { return b.prefix }

// Close waits for running calls to return and closes the idle connections
// of the HTTP client the backend made. Later calls fail with
// [dstl.ErrClosed]; readers returned by Get stay usable until closed.
// Close must not be called from a List callback. Closing twice is not an
// error.
func (b *Backend) Close() error {
	if !b.calls.Close() {
		return nil
	}
	b.closeIdle()
	return nil
}

func (b *Backend) closeIdle() {
	if b.transport != nil {
		b.transport.CloseIdleConnections()
	}
}

// begin registers a call; it fails once the backend is closed.
func (b *Backend) begin() error {
	if !b.calls.Enter() {
		return dstl.ErrClosed
	}
	return nil
}

// fail wraps err as the backend's error for op on name.
func (b *Backend) fail(op, name string, err error) error {
	switch {
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		err = request.Permanent(fmt.Errorf("container %q does not exist: %w", b.container, err))
	case isCredentialError(err):
		err = request.Permanent(&credentialError{err})
	case request.PermanentTransportError(err):
		err = request.Permanent(err)
	}
	return backends.NewError(op, ID, name, backends.RedactError(fmt.Errorf("container %q at %s, blob %q: %w", b.container, b.endpoint, b.prefix+name, err)))
}

// start checks the state, the context and the name common to every call.
func (b *Backend) start(ctx context.Context, op, name string) (done func(), err error) {
	if err := b.begin(); err != nil {
		return nil, b.fail(op, name, err)
	}
	if err := ctx.Err(); err != nil {
		b.calls.Leave()
		return nil, b.fail(op, name, err)
	}
	if op != "list" {
		if err := backends.CheckObjectName(name); err != nil {
			b.calls.Leave()
			return nil, b.fail(op, name, err)
		}
	}
	return b.calls.Leave, nil
}

// do runs fn under the backend's retry policy.
func (b *Backend) do(ctx context.Context, fn func(ctx context.Context) error) error {
	return request.Do(ctx, b.policy, retryable, fn)
}

// doBody runs a request with a body of size bytes under the retry policy,
// its timeout grown with the body (see [request.Policy.ForBody]).
func (b *Backend) doBody(ctx context.Context, size int64, fn func(ctx context.Context) error) error {
	return request.Do(ctx, b.policy.ForBody(size), retryable, fn)
}

// Put stores size bytes of body under name, never replacing a blob; see the
// package documentation for how.
func (b *Backend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	done, err := b.start(ctx, "put", name)
	if err != nil {
		return err
	}
	defer done()
	switch {
	case size < 0:
		return b.fail("put", name, fmt.Errorf("negative size %d", size))
	case body == nil:
		return b.fail("put", name, errors.New("nil body"))
	case size > b.partSize*MaxBlocks:
		return b.fail("put", name, fmt.Errorf("size %d is over %d blocks of the part size %d", size, MaxBlocks, b.partSize))
	}
	if err := b.put(ctx, name, body, size); err != nil {
		return b.fail("put", name, err)
	}
	return nil
}

func (b *Backend) put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	uploadID := newID()
	meta := map[string]*string{metaUploadID: to.Ptr(uploadID)}
	ifNone := &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}}
	bb := b.client.NewBlockBlobClient(b.prefix + name)
	if size <= b.partSize {
		data, err := readPart(ctx, body, 0, size)
		if err != nil {
			return err
		}
		err = b.create(ctx, bb, uploadID, size, func(ctx context.Context) error {
			_, err := bb.Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), &blockblob.UploadOptions{
				Metadata: meta, AccessConditions: ifNone,
			})
			return err
		})
		if !errors.Is(err, backends.ErrExists) || !b.absent(ctx, bb) {
			return err
		}
		// Some services (Azurite) refuse Put Blob with If-None-Match: * on
		// a name that holds only uncommitted blocks, of a failed or a
		// running staged Put, though no blob is there. Put Block List
		// with the same condition takes it: stage the body as one block
		// and commit it. A running staged Put of the name then fails at
		// its commit with ErrExists, as it should.
		id := blockID(uploadID, 0)
		if err := b.doBody(ctx, size, func(ctx context.Context) error {
			_, err := bb.StageBlock(ctx, id, streaming.NopCloser(bytes.NewReader(data)), nil)
			return err
		}); err != nil {
			return mapErr(err)
		}
		return b.create(ctx, bb, uploadID, 0, func(ctx context.Context) error {
			_, err := bb.CommitBlockList(ctx, []string{id}, &blockblob.CommitBlockListOptions{Metadata: meta, AccessConditions: ifNone})
			return err
		})
	}

	n := int((size + b.partSize - 1) / b.partSize)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = blockID(uploadID, i)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		sem      = make(chan struct{}, b.concurrency)
	)
	setErr := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
loop:
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-sctx.Done():
			break loop
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			off := int64(i) * b.partSize
			data, err := readPart(sctx, body, off, min(b.partSize, size-off))
			if err != nil {
				setErr(err)
				return
			}
			err = b.doBody(sctx, int64(len(data)), func(ctx context.Context) error {
				_, err := bb.StageBlock(ctx, ids[i], streaming.NopCloser(bytes.NewReader(data)), nil)
				return err
			})
			if err != nil {
				setErr(fmt.Errorf("staging block %d of %d: %w", i+1, n, err))
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		if ctx.Err() != nil && !errors.Is(firstErr, ctx.Err()) {
			return fmt.Errorf("%w (%v)", ctx.Err(), firstErr)
		}
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.create(ctx, bb, uploadID, 0, func(ctx context.Context) error {
		_, err := bb.CommitBlockList(ctx, ids, &blockblob.CommitBlockListOptions{Metadata: meta, AccessConditions: ifNone})
		return err
	})
}

// create runs a create-only request fn, with a body of bodySize bytes,
// under the retry policy. A conflict
// after a retried attempt is checked against the blob's upload id: if the
// blob is this Put's own, an earlier attempt succeeded after all.
func (b *Backend) create(ctx context.Context, bb *blockblob.Client, uploadID string, bodySize int64, fn func(ctx context.Context) error) error {
	attempts := 0
	err := b.doBody(ctx, bodySize, func(ctx context.Context) error {
		attempts++
		return fn(ctx)
	})
	if err == nil || !isExists(err) {
		return mapErr(err)
	}
	if attempts > 1 {
		var props blob.GetPropertiesResponse
		perr := b.do(ctx, func(ctx context.Context) error {
			var err error
			props, err = bb.GetProperties(ctx, nil)
			return err
		})
		if perr == nil {
			for k, v := range props.Metadata {
				if strings.EqualFold(k, metaUploadID) && v != nil && *v == uploadID {
					return nil
				}
			}
		}
	}
	return mapErr(err)
}

// blockID returns the id of block i of the Put uploadID: unique to that
// Put, so racing Puts of one name never mix their blocks, and all of one
// length, as the service requires.
func blockID(uploadID string, i int) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%s-%08d", uploadID, i))
}

// absent reports whether the blob is known not to exist.
func (b *Backend) absent(ctx context.Context, bb *blockblob.Client) bool {
	err := b.do(ctx, func(ctx context.Context) error {
		_, err := bb.GetProperties(ctx, nil)
		return err
	})
	return bloberror.HasCode(err, bloberror.BlobNotFound)
}

// readPart reads size bytes of body from off, checking ctx first and after.
func readPart(ctx context.Context, body io.ReaderAt, off, size int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data := make([]byte, size)
	n, err := body.ReadAt(data, off)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case int64(n) == size:
		return data, nil
	case err == io.EOF || err == nil:
		return nil, fmt.Errorf("body: %d bytes at offset %d, want %d: %w", n, off, size, io.ErrUnexpectedEOF)
	default:
		return nil, fmt.Errorf("body at offset %d: %w", off+int64(n), err)
	}
}

// newID returns a random id of 32 hex digits.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
