package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/conformance"
)

// offlineBackend opens a backend on bucket "bkt" under prefix "p/" whose
// endpoint nothing listens on; the tests below send no request.
func offlineBackend(t *testing.T) *Backend {
	t.Helper()
	cfg := DefaultConfig("bkt", "p/")
	cfg.Endpoint = "http://127.0.0.1:1"
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func apiErr(code int) error {
	return fmt.Errorf("call: %w", &googleapi.Error{Code: code, Message: http.StatusText(code)})
}

// TestErrorMapping: an error of the client comes out of the backend as a
// *backends.Error of the operation that wraps the sentinel of its meaning
// and the cause, and names the object's URL and the endpoint.
func TestErrorMapping(t *testing.T) {
	b := offlineBackend(t)
	tests := []struct {
		op        string
		err       error
		want      error
		permanent bool
	}{
		{"get", storage.ErrObjectNotExist, backends.ErrNotFound, false},
		{"list", storage.ErrBucketNotExist, backends.ErrNotFound, true},
		{"get", apiErr(http.StatusNotFound), backends.ErrNotFound, false},
		{"put", apiErr(http.StatusPreconditionFailed), backends.ErrExists, false},
		{"put", apiErr(http.StatusForbidden), backends.ErrPermission, false},
		{"list", apiErr(http.StatusUnauthorized), backends.ErrPermission, false},
		{"get", apiErr(http.StatusRequestedRangeNotSatisfiable), backends.ErrInvalidRange, false},
		{"get", context.Canceled, context.Canceled, false},
		{"put", apiErr(http.StatusServiceUnavailable), nil, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.op, tt.err), func(t *testing.T) {
			err := b.Run(t.Context(), tt.op, "a/b", func(context.Context, driver.Runner) error { return tt.err })
			conformance.CheckError(t, err, tt.op, ID, "a/b", tt.want)
			if !errors.Is(err, tt.err) {
				t.Errorf("%v does not wrap %v", err, tt.err)
			}
			if errors.Is(err, backends.ErrPermanent) != tt.permanent {
				t.Errorf("%v matches ErrPermanent: %v, want %v", err, !tt.permanent, tt.permanent)
			}
			if msg := err.Error(); !strings.Contains(msg, "gs://bkt/p/a/b at http://127.0.0.1:1") {
				t.Errorf("message %q does not name the object's URL and the endpoint", msg)
			}
		})
	}
}

// TestClassify: what the driver makes of the client's errors; only
// transient ones are retried.
func TestClassify(t *testing.T) {
	d := &bucket{}
	tests := []struct {
		err  error
		want driver.Code
	}{
		{&googleapi.Error{Code: 503}, driver.Transient},
		{&googleapi.Error{Code: 500}, driver.Transient},
		{&googleapi.Error{Code: 429}, driver.Transient},
		{&googleapi.Error{Code: 408}, driver.Transient},
		{&googleapi.Error{Code: 403}, driver.Permission},
		{&googleapi.Error{Code: 401}, driver.Permission},
		{&googleapi.Error{Code: 404}, driver.NotFound},
		{&googleapi.Error{Code: 412}, driver.Exists},
		{&googleapi.Error{Code: 416}, driver.InvalidRange},
		{&googleapi.Error{Code: 400}, driver.Unknown},
		{storage.ErrObjectNotExist, driver.NotFound},
		{fmt.Errorf("x: %w", storage.ErrBucketNotExist), driver.BucketNotFound},
		{fmt.Errorf("%w: %w", storage.ErrBucketNotExist, apiErr(404)), driver.BucketNotFound},
		{fmt.Errorf("write: %w", syscall.ECONNRESET), driver.Transient},
		{io.ErrUnexpectedEOF, driver.Transient},
		{&driver.NoAnswerError{Host: "x:1", Wait: time.Second}, driver.Transient},
		{fmt.Errorf("attempt: %w", context.DeadlineExceeded), driver.Transient},
		{context.Canceled, driver.Unknown},
		{errors.New("something else"), driver.Unknown},
	}
	for _, tt := range tests {
		if got := d.Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestAs: the client and the bucket's handle are there for calls the
// backend does not make; other targets are refused.
func TestAs(t *testing.T) {
	b := offlineBackend(t)
	var c *storage.Client
	var h *storage.BucketHandle
	if !b.As(&c) || c == nil || !b.As(&h) || h == nil || h.BucketName() != "bkt" {
		t.Fatalf("As: client %v, bucket %v", c, h)
	}
	var other *http.Client
	if b.As(&other) {
		t.Fatal("As(**http.Client) = true")
	}
}
