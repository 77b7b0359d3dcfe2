package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"net"
	"net/http"
	"reflect"
	"strings"
	"syscall"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/request"
)

// Get returns length bytes of the object from offset on (-1: to the end),
// with one ranged Get Blob request. The request is retried until the
// response headers arrive; reading the body is not retried.
func (b *Backend) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	done, err := b.start(ctx, "get", name)
	if err != nil {
		return nil, err
	}
	defer done()
	if offset < 0 || length < -1 {
		return nil, b.fail("get", name, fmt.Errorf("%w: offset %d, length %d", backends.ErrInvalidRange, offset, length))
	}
	bc := b.client.NewBlobClient(b.prefix + name)
	if length == 0 {
		if err := b.checkOffset(ctx, bc, offset); err != nil {
			return nil, b.fail("get", name, err)
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	opts := &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: offset}}
	// A length past any possible end reads to the end: the SDK would
	// overflow computing offset+length-1 for the range header.
	if length > 0 && length <= math.MaxInt64-offset {
		opts.Range.Count = length
	}
	var (
		resp      blob.DownloadStreamResponse
		keepAlive context.CancelFunc
	)
	err = b.do(ctx, func(actx context.Context) error {
		// The body outlives the attempt: run the request on a context of
		// the caller's that the attempt's timeout cancels only until the
		// headers are in.
		rctx, rcancel := context.WithCancel(ctx)
		stop := context.AfterFunc(actx, rcancel)
		r, err := bc.DownloadStream(rctx, opts)
		if err != nil {
			rcancel()
			return err
		}
		if !stop() {
			r.Body.Close()
			return actx.Err()
		}
		resp, keepAlive = r, rcancel
		return nil
	})
	if err != nil {
		if bloberror.HasCode(err, bloberror.InvalidRange) {
			// The offset is at or past the end: at the end is an empty read.
			if err := b.checkOffset(ctx, bc, offset); err != nil {
				return nil, b.fail("get", name, err)
			}
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, b.fail("get", name, mapErr(err))
	}
	return &reader{b: b, name: name, ctx: ctx, body: resp.Body, cancel: keepAlive}, nil
}

// checkOffset fails unless the blob exists and offset is at most its size.
func (b *Backend) checkOffset(ctx context.Context, bc *blob.Client, offset int64) error {
	var props blob.GetPropertiesResponse
	err := b.do(ctx, func(ctx context.Context) error {
		var err error
		props, err = bc.GetProperties(ctx, nil)
		return err
	})
	if err != nil {
		return mapErr(err)
	}
	if size := deref(props.ContentLength); offset > size {
		return fmt.Errorf("%w: offset %d past the end of %d bytes", backends.ErrInvalidRange, offset, size)
	}
	return nil
}

// reader is the body of a download: it fails once its context is done, and
// Close also releases the context of its request.
type reader struct {
	b      *Backend
	name   string
	ctx    context.Context
	body   io.ReadCloser
	cancel context.CancelFunc
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, r.b.fail("get", r.name, err)
	}
	n, err := r.body.Read(p)
	if err != nil && err != io.EOF {
		if cerr := r.ctx.Err(); cerr != nil {
			err = fmt.Errorf("%w (%v)", cerr, err)
		}
		err = r.b.fail("get", r.name, err)
	}
	return n, err
}

func (r *reader) Close() error {
	err := r.body.Close()
	r.cancel()
	return err
}

// Delete removes the blob; a missing one is not an error.
func (b *Backend) Delete(ctx context.Context, name string) error {
	done, err := b.start(ctx, "delete", name)
	if err != nil {
		return err
	}
	defer done()
	bc := b.client.NewBlobClient(b.prefix + name)
	err = b.do(ctx, func(ctx context.Context) error {
		_, err := bc.Delete(ctx, nil)
		return err
	})
	if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
		return b.fail("delete", name, mapErr(err))
	}
	return nil
}

// List calls fn for every blob under the backend's prefix plus prefix, in
// lexical order, a page of up to 5000 names per request. Blobs under the
// backend's prefix whose names are no valid object names (such as "dir/"
// markers or "a//b", written by other tools) are skipped.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	done, err := b.start(ctx, "list", prefix)
	if err != nil {
		return err
	}
	defer done()
	pager := b.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: to.Ptr(b.prefix + prefix)})
	for pager.More() {
		var page container.ListBlobsFlatResponse
		err := b.do(ctx, func(ctx context.Context) error {
			var err error
			page, err = pager.NextPage(ctx)
			return err
		})
		if err != nil {
			return b.fail("list", prefix, mapErr(err))
		}
		if page.Segment == nil {
			continue
		}
		for _, item := range page.Segment.BlobItems {
			if err := ctx.Err(); err != nil {
				return b.fail("list", prefix, err)
			}
			name, ok := strings.CutPrefix(deref(item.Name), b.prefix)
			if !ok || item.Deleted != nil && *item.Deleted || backends.CheckObjectName(name) != nil {
				continue // not ours: a deleted blob, or a name no Put writes (such as "dir/")
			}
			info := backends.ObjectInfo{Name: name}
			if p := item.Properties; p != nil {
				info.Size = deref(p.ContentLength)
				info.ModTime = deref(p.LastModified)
			}
			if err := fn(info); err != nil {
				return err
			}
		}
	}
	return nil
}

// responseError shortens the SDK's multi-line error message to status and
// code, keeping the SDK's error for errors.As.
type responseError struct{ err *azcore.ResponseError }

func (e *responseError) Error() string {
	if e.err.ErrorCode == "" {
		return fmt.Sprintf("HTTP %d", e.err.StatusCode)
	}
	return fmt.Sprintf("HTTP %d %s", e.err.StatusCode, e.err.ErrorCode)
}

func (e *responseError) Unwrap() error { return e.err }

// mapErr maps an SDK error to the dstl sentinels.
func mapErr(err error) error {
	var re *azcore.ResponseError
	if err == nil || !errors.As(err, &re) {
		return err
	}
	short := &responseError{err: re}
	code := bloberror.Code(re.ErrorCode)
	switch {
	case code == bloberror.BlobNotFound || code == bloberror.ContainerNotFound || re.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %w", backends.ErrNotFound, short)
	case isExists(err):
		return fmt.Errorf("%w: %w", backends.ErrExists, short)
	case code == bloberror.InvalidRange || re.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%w: %w", backends.ErrInvalidRange, short)
	case re.StatusCode == http.StatusForbidden || re.StatusCode == http.StatusUnauthorized ||
		code == bloberror.AuthorizationFailure || code == bloberror.AuthenticationFailed ||
		code == bloberror.AuthorizationPermissionMismatch:
		return fmt.Errorf("%w: %w", backends.ErrPermission, short)
	case re.StatusCode == http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %w", backends.ErrPrecondition, short)
	}
	return short
}

// isExists reports whether err is a create-only request's conflict: the blob
// exists already (409 BlobAlreadyExists, or 412 for If-None-Match: *).
func isExists(err error) bool {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return false
	}
	return re.ErrorCode == string(bloberror.BlobAlreadyExists) ||
		re.StatusCode == http.StatusPreconditionFailed && re.ErrorCode != string(bloberror.LeaseIDMissing)
}

// retryable reports whether a failed request is worth another attempt:
// throttling, request timeouts, server errors and broken connections, never
// an authorisation, precondition or client error, nor a transport error
// another attempt cannot heal (see [request.PermanentTransportError]). The caller's context
// ending is never retried; request.Do retries an attempt that timed out.
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if isCredentialError(err) {
		return false // no credentials, or ones the identity service refused
	}
	var af *azidentity.AuthenticationFailedError
	if errors.As(err, &af) {
		return true // the identity endpoint failed, or did not answer
	}
	if request.PermanentTransportError(err) {
		return false // an untrusted certificate or an unknown host stays so
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		switch re.StatusCode {
		case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
			http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return re.ErrorCode == string(bloberror.ServerBusy) || re.ErrorCode == string(bloberror.OperationTimedOut)
	}
	var ne net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.As(err, &ne)
}

// isCredentialError reports whether err is a genuine failure of a token
// credential: none of its sources is set up (azidentity's
// credential-unavailable error), or the identity service refused it with a
// 4xx answer other than 408 and 429. azcore marks every error of a
// credential as not to be retried, a connection reset or a timeout of the
// identity endpoint included; those are no credential errors and stay
// transient.
func isCredentialError(err error) bool {
	var af *azidentity.AuthenticationFailedError
	if errors.As(err, &af) {
		if af.RawResponse == nil {
			return false // no answer: the identity endpoint was not reached
		}
		code := af.RawResponse.StatusCode
		return code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
	}
	for e := range errorChain(err) {
		if reflect.TypeOf(e) == credentialUnavailableType {
			return true
		}
	}
	return false
}

// credentialUnavailableType is the type of azidentity's error for a
// credential that lacks what it needs to try (its type is not exported).
var credentialUnavailableType = reflect.TypeOf(azidentity.NewCredentialUnavailableError(""))

// errorChain yields err and every error it wraps, depth first.
func errorChain(err error) iter.Seq[error] {
	return func(yield func(error) bool) {
		var walk func(error) bool
		walk = func(e error) bool {
			if e == nil {
				return true
			}
			if !yield(e) {
				return false
			}
			switch u := e.(type) {
			case interface{ Unwrap() error }:
				return walk(u.Unwrap())
			case interface{ Unwrap() []error }:
				for _, e := range u.Unwrap() {
					if !walk(e) {
						return false
					}
				}
			}
			return true
		}
		walk(err)
	}
}

// credentialError says that no credentials were usable, and how to give
// some, before azidentity's long account of what it tried.
type credentialError struct{ err error }

func (e *credentialError) Error() string {
	msg, _, _ := strings.Cut(e.err.Error(), "\n")
	return "missing or refused Azure credentials (set " + EnvConnectionString + ", or " + EnvKey +
		" with the account, or set up a source of DefaultAzureCredential): " + strings.TrimSpace(msg)
}

func (e *credentialError) Unwrap() error { return e.err }

// deref returns *p, or the zero value for a nil p.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
