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
// The package is a driver (see package
// github.com/dstlgo/dstl/backends/driver): it makes the SDK's calls and
// says what the service's errors mean. The [backends.Bucket] that [Backend]
// embeds does the rest: it checks names, sizes and ranges, times and
// retries every request (every block included) under the policy of
// Config.Request, with exponential backoff and jitter, retrying only
// throttling, timeouts, 5xx answers and cut connections, and it wraps the
// errors, which name the container, the endpoint and the blob. The SDK's
// own retries are turned off, so that they are not doubled. Missing or
// refused credentials, a missing container or account, an untrusted
// certificate or an unknown host fail at once, with
// [backends.ErrPermanent].
//
// Put never replaces a blob. Up to the part size it is one Put Blob request
// with If-None-Match: *. Above it, blocks of the part size are staged in
// parallel (a bounded number at a time) under block ids unique to that Put,
// then committed with Put Block List and If-None-Match: *; the blob appears
// only at the commit, whole. A Put that fails or is cancelled before the
// commit leaves no blob: its uncommitted blocks are invisible to Get and
// List, and the service discards them on its own (after a week, or at the
// next commit of the same name). Of Puts racing for one name, exactly one
// commit succeeds; the others fail with [backends.ErrExists]. A retried
// create that finds the blob already there checks the upload id it stored
// in the blob's metadata, so that its own earlier attempt, whose answer
// was lost, is not taken for a competitor.
//
// List reports the blobs under the prefix; those whose names no Put could
// have written (such as "dir/" markers or "a//b", written by other tools)
// are skipped, and so never handed to Get or Delete.
package azure

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
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
	"github.com/dstlgo/dstl/backends/driver"
)

// ID is the backend's identifier in the registry and in its errors.
const ID = "azure"

// Scheme is the URL scheme of the backend's base paths.
const Scheme = "azblob"

// metaUploadID is the metadata key under which a Put stores its upload id.
const metaUploadID = "dstluploadid"

var getenv = os.Getenv

func init() { backends.RegisterURL(ID, ParseURL, Open, Scheme) }

// Backend is the Azure Blob Storage backend: the portable
// [backends.Bucket] over a container, with the calls of its own. Its As
// sets a **container.Client to the container client it sends its
// requests with, for programs that compare the backend with the SDK used
// directly (such as "dstl bench") or that need a call the backend does
// not make. It is safe for concurrent use.
type Backend struct {
	*backends.Bucket
	d *bucket
}

// bucket is the driver: the blobs of a container.
type bucket struct {
	client      *container.Client
	container   string
	partSize    int64
	concurrency int
	endpoint    string          // the account's Blob service URL, which errors name
	transport   *http.Transport // our own, when we made it: its idle connections go at Close
}

var _ driver.Bucket = (*bucket)(nil)

// New opens a backend from an azblob:// base path (see [ParseURL]). It is
// the factory the backend registers.
func New(ctx context.Context, basePath string) (*Backend, error) {
	return backends.OpenURL(ctx, basePath, ParseURL, Open)
}

// Open opens a backend with cfg. It makes no request: a missing container
// or bad credentials show in the first call.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("azure: open container %q: %w", cfg.Container, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, backends.Invalid(err)
	}
	d := &bucket{
		client:      cfg.Client,
		container:   cfg.Container,
		partSize:    cfg.PartSize,
		concurrency: cfg.Concurrency,
	}
	prefix := cfg.Prefix
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if d.client == nil {
		if err := d.makeClient(cfg); err != nil {
			_ = d.Close()
			// The SDK's messages name no secret, but do not risk echoing a
			// connection string: say which kind of credential failed.
			return nil, fmt.Errorf("azure: open container %q: making the client: %w", cfg.Container, err)
		}
	}
	d.endpoint = endpointName(cfg, d.client)
	return &Backend{Bucket: backends.New(ID, d, cfg.Request, backends.WithPrefix(prefix)), d: d}, nil
}

// makeClient makes the container client of cfg, on cfg.HTTPClient or on a
// transport of its own that times out answers that never come.
func (d *bucket) makeClient(cfg Config) error {
	hc := cfg.HTTPClient
	if hc == nil {
		d.transport = driver.NewHTTPTransport()
		hc = &http.Client{Transport: driver.Transport(d.transport, cfg.Request.ResponseTimeout)}
	}
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: hc,
		// The portable layer retries; the SDK must not retry as well.
		Retry: policy.RetryOptions{MaxRetries: -1},
	}}
	var err error
	switch {
	case cfg.ConnectionString != "":
		d.client, err = container.NewClientFromConnectionString(cfg.ConnectionString, cfg.Container, opts)
	case cfg.AccountKey != "":
		var cred *container.SharedKeyCredential
		if cred, err = container.NewSharedKeyCredential(cfg.Account, cfg.AccountKey); err == nil {
			d.client, err = container.NewClientWithSharedKeyCredential(containerURL(cfg), cred, opts)
		}
	default:
		cred := cfg.Credential
		if cred == nil {
			cred, err = azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
				ClientOptions: azcore.ClientOptions{Transport: hc},
			})
		}
		if err == nil {
			d.client, err = container.NewClient(containerURL(cfg), cred, opts)
		}
	}
	return err
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

// Container returns the name of the backend's container.
func (b *Backend) Container() string { return b.d.container }

// Close closes the idle connections of the HTTP client the backend made.
func (d *bucket) Close() error {
	if d.transport != nil {
		d.transport.CloseIdleConnections()
	}
	return nil
}

// As sets a **container.Client target to the container client and a
// *driver.Root to the container.
func (d *bucket) As(target any) bool {
	switch p := target.(type) {
	case **container.Client:
		*p = d.client
	case *driver.Root:
		*p = driver.Root{Bucket: d.container}
	default:
		return false
	}
	return true
}

// Location names the container, the endpoint and the blob.
func (d *bucket) Location(name string) string {
	return fmt.Sprintf("container %q at %s, blob %q", d.container, d.endpoint, name)
}

// Put stores size bytes of body under name, never replacing a blob; see the
// package documentation for how.
func (d *bucket) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	return d.put(ctx, rt, name, body, size, size > d.partSize)
}

// PutMultipart stores body as staged blocks and a block list committed,
// in one block up to the part size: the path of the Puts above it, for the
// check of create-only (backends.VerifyCreateOnly).
func (d *bucket) PutMultipart(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	return d.put(ctx, rt, name, body, size, true)
}

// MinMultipartSize is 1: a block may be of any size.
func (d *bucket) MinMultipartSize() int64 { return 1 }

// put stores body in one Put Blob request, or as staged blocks and a
// committed block list.
func (d *bucket) put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64, staged bool) error {
	if size > d.partSize*MaxBlocks {
		return fmt.Errorf("size %d is over %d blocks of the part size %d", size, MaxBlocks, d.partSize)
	}
	uploadID := newID()
	meta := map[string]*string{metaUploadID: to.Ptr(uploadID)}
	ifNone := &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}}
	bb := d.client.NewBlockBlobClient(name)
	commit := func(ids []string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := bb.CommitBlockList(ctx, ids, &blockblob.CommitBlockListOptions{Metadata: meta, AccessConditions: ifNone})
			return d.explain(err)
		}
	}
	if !staged {
		data, err := body.Bytes(0, size)
		if err != nil {
			return err
		}
		err = d.create(ctx, rt, bb, uploadID, size, func(ctx context.Context) error {
			_, err := bb.Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), &blockblob.UploadOptions{
				Metadata: meta, AccessConditions: ifNone,
			})
			return d.explain(err)
		})
		if !isExists(err) || !d.absent(ctx, rt, bb) {
			return err
		}
		// Some services (Azurite) refuse Put Blob with If-None-Match: * on
		// a name that holds only uncommitted blocks, of a failed or a
		// running staged Put, though no blob is there. Put Block List
		// with the same condition takes it: stage the body as one block
		// and commit it. A running staged Put of the name then fails at
		// its commit with ErrExists, as it should.
		ids := []string{blockID(uploadID, 0)}
		if err := d.stage(ctx, rt, bb, ids[0], data); err != nil {
			return err
		}
		return d.create(ctx, rt, bb, uploadID, 0, commit(ids))
	}

	n := int((size + d.partSize - 1) / d.partSize)
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
		sem      = make(chan struct{}, d.concurrency)
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
			if sctx.Err() != nil {
				return
			}
			off := int64(i) * d.partSize
			data, err := body.Bytes(off, min(d.partSize, size-off))
			if err == nil {
				err = d.stage(sctx, rt, bb, ids[i], data)
			}
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
	return d.create(ctx, rt, bb, uploadID, 0, commit(ids))
}

// stage stages data as the block id of bb.
func (d *bucket) stage(ctx context.Context, rt driver.Runner, bb *blockblob.Client, id string, data []byte) error {
	return rt.Do(ctx, int64(len(data)), func(ctx context.Context) error {
		_, err := bb.StageBlock(ctx, id, streaming.NopCloser(bytes.NewReader(data)), nil)
		return d.explain(err)
	})
}

// create runs a create-only request fn, with a body of bodySize bytes,
// through rt. A conflict after a retried attempt is checked against the
// blob's upload id: if the blob is this Put's own, an earlier attempt
// succeeded after all, its answer lost.
func (d *bucket) create(ctx context.Context, rt driver.Runner, bb *blockblob.Client, uploadID string, bodySize int64, fn func(ctx context.Context) error) error {
	attempts := 0
	err := rt.Do(ctx, bodySize, func(ctx context.Context) error {
		attempts++
		return fn(ctx)
	})
	if attempts < 2 || !isExists(err) {
		return err
	}
	var props blob.GetPropertiesResponse
	perr := rt.Do(ctx, 0, func(ctx context.Context) error {
		var err error
		props, err = bb.GetProperties(ctx, nil)
		return d.explain(err)
	})
	if perr == nil {
		for k, v := range props.Metadata {
			if strings.EqualFold(k, metaUploadID) && v != nil && *v == uploadID {
				return nil
			}
		}
	}
	return err
}

// absent reports whether the blob is known not to exist.
func (d *bucket) absent(ctx context.Context, rt driver.Runner, bb *blockblob.Client) bool {
	err := rt.Do(ctx, 0, func(ctx context.Context) error {
		_, err := bb.GetProperties(ctx, nil)
		return d.explain(err)
	})
	return bloberror.HasCode(err, bloberror.BlobNotFound)
}

// blockID returns the id of block i of the Put uploadID: unique to that
// Put, so racing Puts of one name never mix their blocks, and all of one
// length, as the service requires.
func blockID(uploadID string, i int) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%s-%08d", uploadID, i))
}

// newID returns a random id of 32 hex digits.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
