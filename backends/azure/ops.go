package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/internal/errchain"
)

// Open makes one ranged Get Blob request and returns its body.
func (d *bucket) Open(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	opts := &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: offset}}
	if length > 0 {
		opts.Range.Count = length
	}
	resp, err := d.client.NewBlobClient(name).DownloadStream(ctx, opts)
	if err != nil {
		return nil, d.explain(err)
	}
	return resp.Body, nil
}

// Size returns the blob's size, from its properties.
func (d *bucket) Size(ctx context.Context, name string) (int64, error) {
	props, err := d.client.NewBlobClient(name).GetProperties(ctx, nil)
	if err != nil {
		return 0, d.explain(err)
	}
	return deref(props.ContentLength), nil
}

// Delete deletes the blob.
func (d *bucket) Delete(ctx context.Context, name string) error {
	_, err := d.client.NewBlobClient(name).Delete(ctx, nil)
	return d.explain(err)
}

// List calls fn for every blob under prefix, in lexical order, a page of
// up to 5000 names per request.
func (d *bucket) List(ctx context.Context, rt driver.Runner, prefix string, fn func(driver.ObjectInfo) error) error {
	pager := d.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: to.Ptr(prefix)})
	for pager.More() {
		var page container.ListBlobsFlatResponse
		err := rt.Do(ctx, 0, func(ctx context.Context) error {
			var err error
			page, err = pager.NextPage(ctx)
			return d.explain(err)
		})
		if err != nil {
			return err
		}
		if page.Segment == nil {
			continue
		}
		for _, item := range page.Segment.BlobItems {
			if deref(item.Deleted) {
				continue // a deleted blob
			}
			info := driver.ObjectInfo{Name: deref(item.Name)}
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

// Classify maps the service's answers, the identity service's and the
// transport's errors to their codes.
func (d *bucket) Classify(err error) driver.Code {
	var (
		re *azcore.ResponseError
		af *azidentity.AuthenticationFailedError
	)
	switch {
	case isCredentialError(err):
		return driver.Permanent // no credentials, or ones the identity service refused
	case errors.As(err, &af):
		return driver.Transient // the identity endpoint failed, or did not answer
	case errors.As(err, &re):
		return responseCode(re)
	}
	if code, ok := driver.TransportCode(err); ok {
		return code
	}
	return driver.Unknown
}

// responseCode is the code of an answer of the service.
func responseCode(re *azcore.ResponseError) driver.Code {
	code := bloberror.Code(re.ErrorCode)
	switch {
	case code == bloberror.ContainerNotFound || code == bloberror.ResourceNotFound:
		return driver.BucketNotFound // the container, or the account, does not exist
	case code == bloberror.BlobNotFound || re.StatusCode == http.StatusNotFound:
		return driver.NotFound
	case isExists(re):
		return driver.Exists
	case code == bloberror.InvalidRange || re.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return driver.InvalidRange
	case re.StatusCode == http.StatusForbidden || re.StatusCode == http.StatusUnauthorized ||
		code == bloberror.AuthorizationFailure || code == bloberror.AuthenticationFailed ||
		code == bloberror.AuthorizationPermissionMismatch:
		return driver.Permission
	case re.StatusCode == http.StatusPreconditionFailed:
		return driver.Precondition
	case code == bloberror.ServerBusy || code == bloberror.OperationTimedOut:
		return driver.Transient
	}
	switch re.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return driver.Transient
	}
	return driver.Unknown
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

// explain gives an error of the SDK a short message, which Classify reads
// as it would the error itself: an answer of the service reads as its
// status and code (a missing container says so), and a credential error
// says how to give credentials.
func (d *bucket) explain(err error) error {
	var re *azcore.ResponseError
	switch {
	case err == nil:
		return nil
	case isCredentialError(err):
		return &credentialError{err}
	case !errors.As(err, &re):
		return err
	case bloberror.Code(re.ErrorCode) == bloberror.ContainerNotFound:
		return fmt.Errorf("container %q does not exist: %w", d.container, &responseError{re})
	}
	return &responseError{re}
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
	for e := range errchain.All(err) {
		if reflect.TypeOf(e) == credentialUnavailableType {
			return true
		}
	}
	return false
}

// credentialUnavailableType is the type of azidentity's error for a
// credential that lacks what it needs to try (its type is not exported).
var credentialUnavailableType = reflect.TypeOf(azidentity.NewCredentialUnavailableError(""))

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
