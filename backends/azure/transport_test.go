package azure

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/internal/transportcase"
)

// answer returns the SDK's error for an answer of the service with status
// and error code (none when code is empty).
func answer(status int, code bloberror.Code) error {
	req, _ := http.NewRequest(http.MethodGet, "https://acct.blob.core.windows.net/ctr/blob", nil)
	resp := &http.Response{StatusCode: status, Status: http.StatusText(status), Header: http.Header{},
		Body: io.NopCloser(strings.NewReader("")), Request: req}
	if code != "" {
		resp.Header.Set("x-ms-error-code", string(code))
	}
	return runtime.NewResponseError(resp)
}

// identityAnswer returns the identity service's error for an answer with status.
func identityAnswer(status int) error {
	return &azidentity.AuthenticationFailedError{RawResponse: &http.Response{
		StatusCode: status, Status: http.StatusText(status), Body: io.NopCloser(strings.NewReader(`{}`)),
	}}
}

// TestClassify: the service's answers, the identity service's errors and
// the transport's errors map to their codes, also once explain has given
// them their messages.
func TestClassify(t *testing.T) {
	d := &bucket{container: "ctr"}
	tests := []struct {
		name string
		err  error
		want driver.Code
	}{
		{"blob not found", answer(404, bloberror.BlobNotFound), driver.NotFound},
		{"404 without a code", answer(404, ""), driver.NotFound},
		{"container not found", answer(404, bloberror.ContainerNotFound), driver.BucketNotFound},
		{"account not found", answer(404, bloberror.ResourceNotFound), driver.BucketNotFound},
		{"blob exists", answer(409, bloberror.BlobAlreadyExists), driver.Exists},
		{"If-None-Match: * met a blob", answer(412, bloberror.ConditionNotMet), driver.Exists},
		{"lease id missing", answer(412, bloberror.LeaseIDMissing), driver.Precondition},
		{"invalid range", answer(416, bloberror.InvalidRange), driver.InvalidRange},
		{"forbidden", answer(403, bloberror.AuthorizationFailure), driver.Permission},
		{"authentication failed", answer(403, bloberror.AuthenticationFailed), driver.Permission},
		{"unauthorized", answer(401, ""), driver.Permission},
		{"server busy", answer(503, bloberror.ServerBusy), driver.Transient},
		{"operation timed out", answer(500, bloberror.OperationTimedOut), driver.Transient},
		{"408", answer(408, ""), driver.Transient},
		{"429", answer(429, ""), driver.Transient},
		{"502", answer(502, ""), driver.Transient},
		{"504", answer(504, ""), driver.Transient},
		{"bad request", answer(400, bloberror.InvalidHeaderValue), driver.Unknown},
		{"no credentials set up", azidentity.NewCredentialUnavailableError("no source of credentials"), driver.Permanent},
		{"credentials refused", identityAnswer(http.StatusUnauthorized), driver.Permanent},
		{"identity endpoint 503", identityAnswer(http.StatusServiceUnavailable), driver.Transient},
		{"identity endpoint 429", identityAnswer(http.StatusTooManyRequests), driver.Transient},
		{"identity endpoint not reached", &azidentity.AuthenticationFailedError{}, driver.Transient},
		{"unexpected EOF", &url.Error{Op: "Get", URL: "https://x/", Err: io.ErrUnexpectedEOF}, driver.Transient},
		{"other", errors.New("something else"), driver.Unknown},
	}
	for _, tc := range transportcase.TransportCases() {
		want := driver.Transient
		if tc.Permanent {
			want = driver.Permanent
		}
		tests = append(tests, struct {
			name string
			err  error
			want driver.Code
		}{"transport: " + tc.Name, tc.Err, want})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := d.Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
			explained := d.explain(fmt.Errorf("wrapped: %w", tt.err))
			if got := d.Classify(explained); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", explained, got, tt.want)
			}
		})
	}
}

// TestExplain: an answer reads as its status and code, a missing container
// and missing credentials say so.
func TestExplain(t *testing.T) {
	d := &bucket{container: "ctr"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{answer(404, bloberror.BlobNotFound), "HTTP 404 BlobNotFound"},
		{answer(503, ""), "HTTP 503"},
		{answer(404, bloberror.ContainerNotFound), `container "ctr" does not exist: HTTP 404 ContainerNotFound`},
		{azidentity.NewCredentialUnavailableError("no source"), "missing or refused Azure credentials (set " + EnvConnectionString},
		{io.ErrUnexpectedEOF, io.ErrUnexpectedEOF.Error()},
	} {
		if got := d.explain(tc.err).Error(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("explain(%T) = %q, want it to start with %q", tc.err, got, tc.want)
		}
	}
	if d.explain(nil) != nil {
		t.Error("explain(nil) != nil")
	}
}

// TestTransportErrors: a call whose requests meet a transport error fails
// at once with ErrPermanent when no attempt can heal it, and is retried
// otherwise.
func TestTransportErrors(t *testing.T) {
	for _, tc := range transportcase.TransportCases() {
		t.Run(tc.Name, func(t *testing.T) {
			var calls atomic.Int32
			cfg := DefaultConfig("ctr")
			cfg.AccountURL, cfg.Account = "https://127.0.0.1:1/acct", "acct"
			cfg.AccountKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 64))
			cfg.HTTPClient = &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
				calls.Add(1)
				return nil, errors.Unwrap(tc.Err) // the client wraps it in a *url.Error again
			})}
			cfg.Request = backends.Policy{Timeout: time.Second, MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
			b, err := Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			_, err = b.Get(context.Background(), "x.dstl", 0, -1)
			if err == nil {
				t.Fatal("get succeeded")
			}
			if errors.Is(err, backends.ErrPermanent) != tc.Permanent {
				t.Errorf("%v matches ErrPermanent: %v, want %v", err, !tc.Permanent, tc.Permanent)
			}
			want := int32(3)
			if tc.Permanent {
				want = 1
			}
			if n := calls.Load(); n != want {
				t.Errorf("%d attempts, want %d", n, want)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
