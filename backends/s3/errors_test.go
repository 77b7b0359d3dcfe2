package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/conformance"
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

// send returns err as the SDK reports a request that did not go out.
func send(err error) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "Op", Err: &smithyhttp.RequestSendError{Err: err}}
}

type timeoutError struct{}

func (*timeoutError) Error() string   { return "i/o timeout" }
func (*timeoutError) Timeout() bool   { return true }
func (*timeoutError) Temporary() bool { return true }

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
		{"no such key", apiError(404, "NoSuchKey"), false, backends.ErrNotFound, false},
		{"head 404", apiError(404, "NotFound"), false, backends.ErrNotFound, false},
		{"no such bucket", apiError(404, "NoSuchBucket"), false, backends.ErrNotFound, false},
		{"access denied", apiError(403, "AccessDenied"), false, backends.ErrPermission, false},
		{"bad signature", apiError(403, "SignatureDoesNotMatch"), false, backends.ErrPermission, false},
		{"412 on put", apiError(412, "PreconditionFailed"), true, backends.ErrExists, false},
		{"412 elsewhere", apiError(412, "PreconditionFailed"), false, backends.ErrPrecondition, false},
		{"invalid range", apiError(416, "InvalidRange"), false, backends.ErrInvalidRange, false},
		{"slow down", apiError(503, "SlowDown"), false, nil, true},
		{"internal", apiError(500, "InternalError"), false, nil, true},
		{"bad gateway", apiError(502, ""), false, nil, true},
		{"too many", apiError(429, ""), false, nil, true},
		{"request timeout", apiError(400, "RequestTimeout"), false, nil, true},
		{"bad request", apiError(400, "InvalidArgument"), false, nil, false},
		{"conditional conflict", apiError(409, "ConditionalRequestConflict"), true, nil, true},
		{"other conflict", apiError(409, "OperationAborted"), false, nil, false},
		{"reset", sendErr, false, nil, true},
		{"refused", send(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), false, nil, true},
		{"dial timeout", send(&net.OpError{Op: "dial", Err: &timeoutError{}}), false, nil, true},
		{"dns temporary", send(&net.DNSError{Err: "server misbehaving", Name: "h", IsTemporary: true}), false, nil, true},
		{"dns timeout", send(&net.DNSError{Err: "i/o timeout", Name: "h", IsTimeout: true}), false, nil, true},
		{"dns not found", send(&net.DNSError{Err: "no such host", Name: "h", IsNotFound: true}), false, nil, false},
		{"dns other", send(&net.DNSError{Err: "bad", Name: "h"}), false, nil, false},
		{"unknown authority", send(&url.Error{Op: "Put", URL: "u", Err: x509.UnknownAuthorityError{}}), false, nil, false},
		{"wrong host", send(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "h"}), false, nil, false},
		{"expired", send(x509.CertificateInvalidError{Cert: &x509.Certificate{}, Reason: x509.Expired}), false, nil, false},
		{"verification", send(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), false, nil, false},
		{"not tls", send(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), false, nil, false},
		{"https to plain http", send(&url.Error{Op: "Get", URL: "https://h/b/k", Err: http.ErrSchemeMismatch}), false, nil, false},
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
				for _, s := range []error{backends.ErrNotFound, backends.ErrPermission, backends.ErrExists, backends.ErrPrecondition} {
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

// TestErrorText: errors name the endpoint, say that a bucket is missing,
// and say "no answer" with the transport's cause where the SDK says
// "StatusCode: 0".
func TestErrorText(t *testing.T) {
	b := &Backend{bucket: "bkt", prefix: "p/", endpoint: "http://127.0.0.1:9"}
	sdkSend := func(err error) error {
		return &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject", Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 0}},
				Err:      &smithyhttp.RequestSendError{Err: err},
			},
		}}
	}
	for _, tc := range []struct {
		name      string
		err       error
		want      []string
		avoid     []string
		permanent bool
	}{
		{"missing bucket", apiError(404, "NoSuchBucket"), []string{`bucket "bkt" does not exist`, "at http://127.0.0.1:9"}, nil, true},
		{"no answer", sdkSend(&url.Error{Op: "Get", URL: "http://127.0.0.1:9/bkt/p/obj", Err: &timeoutError{}}),
			[]string{"GetObject: no answer: Get \"http://127.0.0.1:9/bkt/p/obj\": i/o timeout"}, []string{"StatusCode: 0"}, false},
		{"scheme mismatch", sdkSend(&url.Error{Op: "Get", URL: "https://127.0.0.1:9/bkt/p/obj", Err: http.ErrSchemeMismatch}),
			[]string{"server gave HTTP response to HTTPS client"}, []string{"StatusCode: 0"}, true},
		{"missing key", apiError(404, "NoSuchKey"), []string{"object not found"}, []string{"does not exist"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := b.wrap("get", "obj", tc.err, false)
			if !errors.Is(err, tc.err) {
				t.Errorf("cause lost in %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if errors.Is(err, backends.ErrPermanent) != tc.permanent {
				t.Errorf("error %v matches ErrPermanent: %v, want %v", err, !tc.permanent, tc.permanent)
			}
			for _, a := range tc.avoid {
				if strings.Contains(err.Error(), a) {
					t.Errorf("error %q says %q", err, a)
				}
			}
		})
	}
}
