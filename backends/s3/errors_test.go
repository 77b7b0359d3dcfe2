package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/dstlgo/dstl/conformance"
	"github.com/dstlgo/dstl/dstl"
)

// apiError returns an error as the SDK reports an answer of the service.
func apiError(status int, code string) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "Op", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      &smithy.GenericAPIError{Code: code, Message: "m"},
		},
	}}
}

func TestErrorMapping(t *testing.T) {
	b := &Backend{bucket: "bkt", prefix: "p/"}
	sendErr := &smithyhttp.RequestSendError{Err: syscall.ECONNRESET}
	tests := []struct {
		name      string
		err       error
		put       bool
		want      error // sentinel, or nil for none
		retryable bool
	}{
		{"no such key", apiError(404, "NoSuchKey"), false, dstl.ErrNotFound, false},
		{"head 404", apiError(404, "NotFound"), false, dstl.ErrNotFound, false},
		{"no such bucket", apiError(404, "NoSuchBucket"), false, dstl.ErrNotFound, false},
		{"access denied", apiError(403, "AccessDenied"), false, dstl.ErrPermission, false},
		{"bad signature", apiError(403, "SignatureDoesNotMatch"), false, dstl.ErrPermission, false},
		{"412 on put", apiError(412, "PreconditionFailed"), true, dstl.ErrExists, false},
		{"412 elsewhere", apiError(412, "PreconditionFailed"), false, dstl.ErrPrecondition, false},
		{"invalid range", apiError(416, "InvalidRange"), false, dstl.ErrInvalidRange, false},
		{"slow down", apiError(503, "SlowDown"), false, nil, true},
		{"internal", apiError(500, "InternalError"), false, nil, true},
		{"bad gateway", apiError(502, ""), false, nil, true},
		{"too many", apiError(429, ""), false, nil, true},
		{"request timeout", apiError(400, "RequestTimeout"), false, nil, true},
		{"bad request", apiError(400, "InvalidArgument"), false, nil, false},
		{"reset", sendErr, false, nil, true},
		{"cut answer", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), false, nil, true},
		{"body failed", &bodyError{io.ErrUnexpectedEOF}, true, io.ErrUnexpectedEOF, false},
		{"cancelled", fmt.Errorf("op: %w", context.Canceled), false, context.Canceled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryable(tt.err); got != tt.retryable {
				t.Errorf("retryable = %v, want %v", got, tt.retryable)
			}
			op := "get"
			if tt.put {
				op = "put"
			}
			err := b.wrap(op, "obj", tt.err, tt.put)
			conformance.CheckError(t, err, op, ID, "obj", tt.want)
			if !errors.Is(err, tt.err) {
				t.Errorf("cause lost in %v", err)
			}
			if want := "s3://bkt/p/obj"; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
			if tt.want == nil {
				for _, s := range []error{dstl.ErrNotFound, dstl.ErrPermission, dstl.ErrExists, dstl.ErrPrecondition} {
					if errors.Is(err, s) {
						t.Errorf("error %v wraps %v", err, s)
					}
				}
			}
			if again := b.wrap("list", "x", err, false); again != err {
				t.Errorf("a BackendError was wrapped again")
			}
		})
	}
}
