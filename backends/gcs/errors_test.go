package gcs

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/storage"
	"golang.org/x/oauth2"
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
		{tokenErr(&auth.Error{Response: &http.Response{StatusCode: 400}}), driver.Permission},
		{tokenErr(&auth.Error{Response: &http.Response{StatusCode: 401}}), driver.Permission},
		{tokenErr(&auth.Error{Response: &http.Response{StatusCode: 503}}), driver.Transient},
		{tokenErr(&auth.Error{Response: &http.Response{StatusCode: 429}}), driver.Transient},
		{tokenErr(&oauth2.RetrieveError{Response: &http.Response{StatusCode: 400}, ErrorCode: "invalid_grant"}), driver.Permission},
		{tokenErr(&oauth2.RetrieveError{Response: &http.Response{StatusCode: 500}}), driver.Transient},
		{tokenErr(fmt.Errorf("auth: cannot fetch token: %w", syscall.ECONNREFUSED)), driver.Transient},
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

// tokenErr is the error of a request whose token could not be fetched.
func tokenErr(err error) error {
	return &url.Error{Op: "Get", URL: "https://storage.googleapis.com/b/bkt/o/x", Err: err}
}

// TestRefusedCredentials: when the token endpoint refuses the credentials
// (400 invalid_grant), a call fails with ErrPermission after one attempt,
// rather than being retried as a network failure.
func TestRefusedCredentials(t *testing.T) {
	var tokens atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/token" {
			t.Errorf("a request without a token: %s %s", r.Method, r.URL)
		}
		tokens.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`))
	}))
	defer srv.Close()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "k",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "dstl@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": srv.URL + "/token",
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig("bkt", "p/")
	cfg.Endpoint = srv.URL
	cfg.CredentialsFile = filepath.Join(t.TempDir(), "credentials.json")
	if err := os.WriteFile(cfg.CredentialsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for op, call := range map[string]func() error{
		"get": func() error {
			rc, err := b.Get(t.Context(), "x", 0, -1)
			if err == nil {
				rc.Close()
			}
			return err
		},
		"put":    func() error { return b.Put(t.Context(), "x", strings.NewReader("x"), 1) },
		"delete": func() error { return b.Delete(t.Context(), "x") },
		"list":   func() error { return b.List(t.Context(), "", func(backends.ObjectInfo) error { return nil }) },
	} {
		t.Run(op, func(t *testing.T) {
			tokens.Store(0)
			err := call()
			if n := tokens.Load(); n != 1 {
				t.Errorf("%d token requests, want 1", n)
			}
			name := "x"
			if op == "list" {
				name = ""
			}
			conformance.CheckError(t, err, op, ID, name, backends.ErrPermission)
		})
	}
}
