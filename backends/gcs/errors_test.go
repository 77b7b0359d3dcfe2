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

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/conformance"
)

func TestErrorMapping(t *testing.T) {
	b := &Backend{cfg: Config{Bucket: "bkt", Prefix: "p/"}}
	apiErr := func(code int) error {
		return fmt.Errorf("call: %w", &googleapi.Error{Code: code, Message: http.StatusText(code)})
	}
	tests := []struct {
		op   string
		err  error
		want error
	}{
		{"get", storage.ErrObjectNotExist, backends.ErrNotFound},
		{"list", storage.ErrBucketNotExist, backends.ErrNotFound},
		{"get", apiErr(http.StatusNotFound), backends.ErrNotFound},
		{"put", apiErr(http.StatusPreconditionFailed), backends.ErrExists},
		{"delete", apiErr(http.StatusPreconditionFailed), backends.ErrPrecondition},
		{"put", apiErr(http.StatusForbidden), backends.ErrPermission},
		{"list", apiErr(http.StatusUnauthorized), backends.ErrPermission},
		{"get", apiErr(http.StatusRequestedRangeNotSatisfiable), backends.ErrInvalidRange},
		{"get", context.Canceled, context.Canceled},
		{"put", apiErr(http.StatusServiceUnavailable), nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.op, tt.err), func(t *testing.T) {
			err := b.wrap(tt.op, "a/b", tt.err)
			conformance.CheckError(t, err, tt.op, ID, "a/b", tt.want)
			if !errors.Is(err, tt.err) {
				t.Errorf("%v does not wrap %v", err, tt.err)
			}
			if msg := err.Error(); !strings.Contains(msg, `bucket "bkt"`) || !strings.Contains(msg, `"p/a/b"`) {
				t.Errorf("message %q does not name bucket and object", msg)
			}
		})
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&googleapi.Error{Code: 503}, true},
		{&googleapi.Error{Code: 500}, true},
		{&googleapi.Error{Code: 429}, true},
		{&googleapi.Error{Code: 408}, true},
		{&googleapi.Error{Code: 403}, false},
		{&googleapi.Error{Code: 401}, false},
		{&googleapi.Error{Code: 404}, false},
		{&googleapi.Error{Code: 412}, false},
		{fmt.Errorf("write: %w", syscall.ECONNRESET), true},
		{io.ErrUnexpectedEOF, true},
		{errAttemptTimeout, true},
		{context.Canceled, false},
		{&bodyError{io.ErrUnexpectedEOF}, false},
		{errors.New("something else"), false},
	}
	for _, tt := range tests {
		if got := retryable(tt.err); got != tt.want {
			t.Errorf("retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
