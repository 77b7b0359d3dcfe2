package s3

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
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

// sdkSend returns err as the SDK reports a request without an answer:
// "StatusCode: 0".
func sdkSend(err error) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 0}},
			Err:      &smithyhttp.RequestSendError{Err: err},
		},
	}}
}

type timeoutError struct{}

func (*timeoutError) Error() string   { return "i/o timeout" }
func (*timeoutError) Timeout() bool   { return true }
func (*timeoutError) Temporary() bool { return true }

// TestClassify: what the service's codes and statuses and the transport's
// errors mean, and so which sentinel an error wraps and whether it is
// retried (Transient) or permanent.
func TestClassify(t *testing.T) {
	d := &bucket{bucket: "bkt"}
	tests := []struct {
		name string
		err  error
		want driver.Code
	}{
		{"no such key", apiError(404, "NoSuchKey"), driver.NotFound},
		{"head 404", apiError(404, "NotFound"), driver.NotFound},
		{"404 without a code", apiError(404, ""), driver.NotFound},
		{"no such upload", apiError(404, "NoSuchUpload"), driver.NotFound},
		{"no such bucket", apiError(404, "NoSuchBucket"), driver.BucketNotFound},
		{"no such bucket, explained", d.explain(apiError(404, "NoSuchBucket")), driver.BucketNotFound},
		{"access denied", apiError(403, "AccessDenied"), driver.Permission},
		{"bad signature", apiError(403, "SignatureDoesNotMatch"), driver.Permission},
		{"bad key id", apiError(403, "InvalidAccessKeyId"), driver.Permission},
		{"403 without a code", apiError(403, ""), driver.Permission},
		{"412", apiError(412, "PreconditionFailed"), driver.Exists},
		{"412 of a part", fmt.Errorf("part 2: %w", apiError(412, "")), driver.Exists},
		{"invalid range", apiError(416, "InvalidRange"), driver.InvalidRange},
		{"slow down", apiError(503, "SlowDown"), driver.Transient},
		{"internal", apiError(500, "InternalError"), driver.Transient},
		{"bad gateway", apiError(502, ""), driver.Transient},
		{"too many", apiError(429, ""), driver.Transient},
		{"408", apiError(408, ""), driver.Transient},
		{"request timeout", apiError(400, "RequestTimeout"), driver.Transient},
		{"bad request", apiError(400, "InvalidArgument"), driver.Unknown},
		{"conditional conflict", apiError(409, "ConditionalRequestConflict"), driver.Transient},
		{"other conflict", apiError(409, "OperationAborted"), driver.Unknown},
		{"reset", &smithyhttp.RequestSendError{Err: syscall.ECONNRESET}, driver.Transient},
		{"refused", send(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), driver.Transient},
		{"dial timeout", send(&net.OpError{Op: "dial", Err: &timeoutError{}}), driver.Transient},
		{"no answer", sdkSend(&driver.NoAnswerError{Host: "h:1", Wait: time.Second}), driver.Transient},
		{"send failed otherwise", send(errors.New("something")), driver.Transient},
		{"dns temporary", send(&net.DNSError{Err: "server misbehaving", Name: "h", IsTemporary: true}), driver.Transient},
		{"dns timeout", send(&net.DNSError{Err: "i/o timeout", Name: "h", IsTimeout: true}), driver.Transient},
		{"dns not found", send(&net.DNSError{Err: "no such host", Name: "h", IsNotFound: true}), driver.Permanent},
		{"dns other", send(&net.DNSError{Err: "bad", Name: "h"}), driver.Permanent},
		{"unknown authority", send(&url.Error{Op: "Put", URL: "u", Err: x509.UnknownAuthorityError{}}), driver.Permanent},
		{"wrong host", send(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "h"}), driver.Permanent},
		{"expired", send(x509.CertificateInvalidError{Cert: &x509.Certificate{}, Reason: x509.Expired}), driver.Permanent},
		{"verification", send(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), driver.Permanent},
		{"not tls", send(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), driver.Permanent},
		{"https to plain http", sdkSend(&url.Error{Op: "Get", URL: "https://h/b/k", Err: http.ErrSchemeMismatch}), driver.Permanent},
		{"cut answer", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), driver.Transient},
		{"cancelled", fmt.Errorf("op: %w", context.Canceled), driver.Unknown},
		{"other", errors.New("other"), driver.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := d.Classify(tt.err); got != tt.want {
				t.Fatalf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestExplain: an error without an answer says "no answer" and the
// transport's cause where the SDK says "StatusCode: 0"; a missing bucket
// is named; the cause is kept.
func TestExplain(t *testing.T) {
	d := &bucket{bucket: "bkt", endpoint: "http://127.0.0.1:9"}
	for _, tc := range []struct {
		name  string
		err   error
		want  []string
		avoid []string
	}{
		{"missing bucket", apiError(404, "NoSuchBucket"), []string{`bucket "bkt" does not exist`}, nil},
		{"no answer", sdkSend(&url.Error{Op: "Get", URL: "http://127.0.0.1:9/bkt/p/obj", Err: &timeoutError{}}),
			[]string{"GetObject: no answer: Get \"http://127.0.0.1:9/bkt/p/obj\": i/o timeout"}, []string{"StatusCode: 0"}},
		{"scheme mismatch", sdkSend(&url.Error{Op: "Get", URL: "https://127.0.0.1:9/bkt/p/obj", Err: http.ErrSchemeMismatch}),
			[]string{"server gave HTTP response to HTTPS client"}, []string{"StatusCode: 0"}},
		{"missing key", apiError(404, "NoSuchKey"), []string{"NoSuchKey"}, []string{"does not exist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := d.explain(tc.err)
			if !errors.Is(err, tc.err) {
				t.Errorf("cause lost in %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, a := range tc.avoid {
				if strings.Contains(err.Error(), a) {
					t.Errorf("error %q says %q", err, a)
				}
			}
		})
	}
	if d.explain(nil) != nil {
		t.Error("explain(nil) != nil")
	}
	if got, want := d.Location("p/obj"), "s3://bkt/p/obj at http://127.0.0.1:9"; got != want { // the key: the prefix, then the name
		t.Errorf("Location = %q, want %q", got, want)
	}
}

// answering is an S3 endpoint that answers every request with status and
// the error code, and counts the requests.
func answering(t *testing.T, status int, code string) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>m</Message><RequestId>r</RequestId></Error>`, code)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestErrors: the service's answers become errors through the backend
// that wrap their sentinel (or none), name the operation, the object, its
// key and the endpoint, keep the service's code, are permanent when no
// attempt heals them, and are retried only when another attempt may
// succeed.
func TestErrors(t *testing.T) {
	const maxAttempts = 3
	tests := []struct {
		name      string
		op        string
		status    int
		code      string
		want      error // sentinel, or nil for none
		permanent bool
		requests  int64
	}{
		{"missing key", "get", 404, "NoSuchKey", backends.ErrNotFound, false, 1},
		{"missing bucket", "get", 404, "NoSuchBucket", backends.ErrNotFound, true, 1},
		{"denied", "get", 403, "AccessDenied", backends.ErrPermission, false, 1},
		{"bad request", "get", 400, "InvalidArgument", nil, false, 1},
		{"slow down", "get", 503, "SlowDown", nil, false, maxAttempts},
		{"internal", "get", 500, "InternalError", nil, false, maxAttempts},
		{"exists", "put", 412, "PreconditionFailed", backends.ErrExists, false, 1},
		{"put denied", "put", 403, "AccessDenied", backends.ErrPermission, false, 1},
		// The retries ran out: the Put checks whether one stored the object.
		{"put slow down", "put", 503, "SlowDown", nil, false, 2 * maxAttempts},
		{"delete, missing bucket", "delete", 404, "NoSuchBucket", backends.ErrNotFound, true, 1},
		{"list, missing bucket", "list", 404, "NoSuchBucket", backends.ErrNotFound, true, 1},
		{"list denied", "list", 403, "AccessDenied", backends.ErrPermission, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, requests := answering(t, tt.status, tt.code)
			b, _ := silentBackend(t, func(c *Config) { c.Endpoint, c.Request.MaxAttempts = srv.URL, maxAttempts })
			ctx := t.Context()
			name := "obj"
			var err error
			switch tt.op {
			case "get":
				var r io.ReadCloser
				if r, err = b.Get(ctx, name, 0, -1); err == nil {
					r.Close()
				}
			case "put":
				err = b.Put(ctx, name, bytes.NewReader([]byte("data")), 4)
			case "delete":
				err = b.Delete(ctx, name)
			case "list":
				name = ""
				err = b.List(ctx, name, func(backends.ObjectInfo) error { return nil })
			}
			conformance.CheckError(t, err, tt.op, ID, name, tt.want)
			if want := "s3://bkt/job/" + name + " at " + srv.URL; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
			if tt.want == nil {
				for _, s := range []error{backends.ErrNotFound, backends.ErrPermission, backends.ErrExists, backends.ErrPrecondition} {
					if errors.Is(err, s) {
						t.Errorf("error %v wraps %v", err, s)
					}
				}
			}
			if errors.Is(err, backends.ErrPermanent) != tt.permanent {
				t.Errorf("error %v matches ErrPermanent: %v, want %v", err, !tt.permanent, tt.permanent)
			}
			if tt.code == "NoSuchBucket" && !strings.Contains(err.Error(), `bucket "bkt" does not exist`) {
				t.Errorf("error %q does not say that the bucket does not exist", err)
			}
			if ae := smithy.APIError(nil); !errors.As(err, &ae) || ae.ErrorCode() != tt.code {
				t.Errorf("error %v lost the service's code %s", err, tt.code)
			}
			if n := requests.Load(); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
		})
	}
	t.Run("delete of a missing key", func(t *testing.T) {
		srv, _ := answering(t, 404, "NoSuchKey")
		b, _ := silentBackend(t, func(c *Config) { c.Endpoint = srv.URL })
		if err := b.Delete(t.Context(), "obj"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	})
}

// TestNoAnswerText: a request that got no answer says so and why, not
// "StatusCode: 0"; https to a plain-HTTP endpoint is permanent and not
// retried.
func TestNoAnswerText(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()
	plain, requests := answering(t, 404, "NoSuchKey")
	mismatch := strings.Replace(plain.URL, "http://", "https://", 1)
	for _, tc := range []struct {
		name, endpoint string
		want           []string
		permanent      bool
	}{
		{"refused", refused, []string{"GetObject: no answer: ", "connection refused"}, false},
		{"https to plain http", mismatch, []string{"server gave HTTP response to HTTPS client"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := silentBackend(t, func(c *Config) { c.Endpoint, c.Request.MaxAttempts = tc.endpoint, 2 })
			_, err := b.Get(t.Context(), "obj", 0, -1)
			conformance.CheckError(t, err, "get", ID, "obj", nil)
			for _, w := range append(tc.want, "at "+tc.endpoint) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "StatusCode: 0") {
				t.Errorf("error %q says StatusCode: 0", err)
			}
			if errors.Is(err, backends.ErrPermanent) != tc.permanent {
				t.Errorf("error %v matches ErrPermanent: %v, want %v", err, !tc.permanent, tc.permanent)
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the plain-HTTP endpoint saw %d requests", n)
	}
}
