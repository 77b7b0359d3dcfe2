package gocloud

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"go.uber.org/goleak"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"
	"gocloud.dev/gcp"
	"google.golang.org/api/googleapi"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/internal/faultproxy"
	"github.com/dstlgo/dstl/conformance"
	"github.com/dstlgo/dstl/dstl"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// s3blob builds its AWS client itself, with an HTTP transport
		// that the SDK keeps out of reach (BuildableClient hands out
		// copies), so Close cannot close its idle keep-alive
		// connections; they end after the transport's idle timeout.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}

// memPartSize is the part size of the tests on mem://, which keeps objects
// whole anyway.
const memPartSize = 64 << 10

// memHarness opens a backend on a new mem:// bucket, under a random prefix.
func memHarness(t *testing.T) backends.Backend {
	b, err := New(t.Context(), "mem://test/"+rand.Text()+"?part_size=65536")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// rawPut writes an object under name as it is, through the blob.Bucket
// that As hands out, as another tool would.
func rawPut(t *testing.T, b backends.Backend, name string, data []byte) error {
	gb := b.(*Backend)
	var bk *blob.Bucket
	if !gb.As(&bk) {
		t.Fatal("As(**blob.Bucket) = false")
	}
	key := gb.Prefix() + name
	if err := bk.WriteAll(t.Context(), key, data, nil); err != nil {
		return err
	}
	t.Cleanup(func() {
		if err := bk.Delete(context.Background(), key); err != nil {
			t.Errorf("deleting the foreign object %q: %v", key, err)
		}
	})
	return nil
}

func TestConformanceMem(t *testing.T) {
	conformance.TestBackend(t, memHarness, conformance.WithPartSize(memPartSize), conformance.WithRawPut(rawPut))
}

func TestEngineMem(t *testing.T) { conformance.TestEngine(t, memHarness) }

// TestRegistry: mem:// opens this backend by scheme, and any gocloud URL
// opens it by identifier.
func TestRegistry(t *testing.T) {
	ctx := t.Context()
	b, id, err := backends.Open(ctx, "", "mem://x/p")
	if err != nil || id != ID {
		t.Fatalf("OpenBackend(mem://) = %q, %v", id, err)
	}
	_ = b.Close()
	dir := t.TempDir()
	b, id, err = backends.Open(ctx, ID, "file://"+dir+"?metadata=skip")
	if err != nil || id != ID {
		t.Fatalf("OpenBackend(gocloud, file://) = %q, %v", id, err)
	}
	conformance.Put(t, b, "a/b", "xyz")
	if got, err := conformance.Read(ctx, b, "a/b", 1, -1); err != nil || got != "yz" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	if _, err := os.Stat(dir + "/a/b"); err != nil {
		t.Fatalf("file bucket: %v", err)
	}
	_ = b.Close()
}

func TestParseURL(t *testing.T) {
	def := DefaultConfig("")
	tests := []struct {
		in      string
		url     string
		prefix  string
		check   func(Config) bool
		wantErr string // substring; "" means no error
	}{
		{in: "mem://", url: "mem:", check: func(c Config) bool {
			return c.PartSize == def.PartSize && c.Concurrency == def.Concurrency && c.Request == def.Request
		}},
		{in: "mem://b/jobs/42", url: "mem://b", prefix: "jobs/42/"},
		{in: "mem://b/jobs/42/?nomd5", url: "mem://b?nomd5", prefix: "jobs/42/"},
		{in: "s3://bkt/p?region=us-east-1&endpoint=http%3A%2F%2F127.0.0.1%3A9000&use_path_style=true&part_size=6000000&concurrency=2",
			url: "s3://bkt?endpoint=http%3A%2F%2F127.0.0.1%3A9000&region=us-east-1&use_path_style=true", prefix: "p/",
			check: func(c Config) bool { return c.PartSize == 6000000 && c.Concurrency == 2 }},
		{in: "mem://?request_timeout=2s&max_attempts=3", url: "mem:",
			check: func(c Config) bool { return c.Request.Timeout == 2*time.Second && c.Request.MaxAttempts == 3 }},
		{in: "mem://b?response_timeout=0&timeout_attempts=1&nomd5", url: "mem://b?nomd5",
			check: func(c Config) bool { return c.Request.ResponseTimeout == 0 && c.Request.TimeoutAttempts == 1 }},
		{in: "mem://b?unanswered_hold=1s&nomd5", url: "mem://b?nomd5",
			check: func(c Config) bool { return c.Request.UnansweredHold == time.Second }},
		{in: "file:///var/dstl?prefix=a/", url: "file:///var/dstl?prefix=a%2F"},
		{in: "mem://?part_size=-1", wantErr: `"part_size"`},
		{in: "mem://?part_size=x", wantErr: `"part_size"`},
		{in: "mem://?concurrency=1&concurrency=2", wantErr: `"concurrency"`},
		{in: "mem://?max_attempts=0", wantErr: `"max_attempts"`},
		{in: "mem://?request_timeout=soon", wantErr: `"request_timeout"`},
		{in: "mem://?request_timeout=1s&request_timeout=2s", wantErr: `"request_timeout" given 2 times`},
		{in: "mem://?response_timeout=-1s", wantErr: `"response_timeout"`},
		{in: "mem://?timeout_attempts=-1", wantErr: `"timeout_attempts"`},
		{in: "mem://?unanswered_hold=-1s", wantErr: `"unanswered_hold"`},
		{in: "mem://?key=a", wantErr: `"key"`},
		{in: "", wantErr: "empty"},
		{in: "/just/a/path", wantErr: "not a URL"},
		{in: "mem://u:p@b", wantErr: "user information"},
		{in: "s3://b?endpoint=http://u:p@host", wantErr: "credentials do not go in the URL"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			c, err := ParseURL(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseURL = %+v, %v; want error with %s", c, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.URL != tt.url || c.Prefix != tt.prefix {
				t.Fatalf("URL %q prefix %q; want %q, %q", c.URL, c.Prefix, tt.url, tt.prefix)
			}
			if tt.check != nil && !tt.check(c) {
				t.Fatalf("config %+v", c)
			}
		})
	}
}

// TestUnknownParams: a parameter neither this package nor the driver knows
// is rejected, naming it and the URL.
func TestUnknownParams(t *testing.T) {
	for _, u := range []string{"mem://?bogus=1", "s3://bkt?region=us-east-1&bogus=1", "file:///var/dstl?bogus=1"} {
		_, err := New(t.Context(), u)
		if err == nil || !strings.Contains(err.Error(), "bogus") || !strings.Contains(err.Error(), "open bucket") {
			t.Errorf("New(%q) = %v; want an error naming %q", u, err, "bogus")
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []struct {
		cfg     Config
		wantErr string
	}{
		{Config{}, "a bucket URL or a Bucket is required"},
		{Config{URL: "mem://", PartSize: -1, Request: DefaultConfig("").Request}, "part size"},
		{Config{URL: "mem://", Concurrency: -1, Request: DefaultConfig("").Request}, "concurrency"},
		{Config{URL: "mem://", Prefix: "/abs/", Request: DefaultConfig("").Request}, "prefix"},
		{Config{URL: "mem://"}, "gocloud: Request: max attempts 0"}, // zero request policy
	}
	for i, tc := range bad {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%d: Validate(%+v) = %v, want %q", i, tc.cfg, err, tc.wantErr)
		}
	}
	if err := DefaultConfig("mem://").Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestReadyBucket: a Bucket given in Config is used under the prefix, As
// hands it out, and it stays open after Close.
func TestReadyBucket(t *testing.T) {
	bk := memblob.OpenBucket(nil)
	defer bk.Close()
	cfg := DefaultConfig("")
	cfg.Bucket, cfg.Prefix = bk, "pre/"
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	conformance.Put(t, b, "obj", "data")
	var given *blob.Bucket
	if !b.As(&given) || given != bk {
		t.Fatalf("As(**blob.Bucket) gave %p, want the given bucket %p", given, bk)
	}
	var client *s3.Client
	if b.As(&client) {
		t.Fatal("As(**s3.Client) of a memblob bucket = true")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := bk.ReadAll(t.Context(), "pre/obj")
	if err != nil || string(got) != "data" {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
	err = b.Put(t.Context(), "x", strings.NewReader("x"), 1)
	conformance.CheckError(t, err, "put", ID, "x", dstl.ErrClosed)
}

// TestErrorNamesBucket: errors name the bucket URL and the key.
func TestErrorNamesBucket(t *testing.T) {
	b, err := New(t.Context(), "mem://bkt/pre")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.Get(t.Context(), "missing", 0, -1)
	conformance.CheckError(t, err, "get", ID, "missing", backends.ErrNotFound)
	if !strings.Contains(err.Error(), "mem://bkt") || !strings.Contains(err.Error(), "pre/missing") {
		t.Fatalf("error %q does not name bucket and key", err)
	}
}

// blobErrors returns errors of gocloud.dev/blob itself, with their
// gcerrors codes: a missing object, and a create-only write of an existing
// one.
func blobErrors(t *testing.T) (notFound, exists error) {
	ctx := t.Context()
	bk := memblob.OpenBucket(nil)
	defer bk.Close()
	_, notFound = bk.NewReader(ctx, "missing", nil)
	if err := bk.WriteAll(ctx, "x", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	exists = bk.WriteAll(ctx, "x", []byte("y"), &blob.WriterOptions{IfNotExist: true})
	if gcerrors.Code(notFound) != gcerrors.NotFound || gcerrors.Code(exists) != gcerrors.FailedPrecondition {
		t.Fatalf("blob errors %v, %v have codes %v, %v", notFound, exists, gcerrors.Code(notFound), gcerrors.Code(exists))
	}
	return notFound, exists
}

// TestClassify: what the driver makes of the errors of gocloud.dev/blob,
// of the SDKs' HTTP answers and of the transport, as they come and
// wrapped, and so what the portable layer retries (Transient only) and
// which sentinel it wraps.
func TestClassify(t *testing.T) {
	notFound, exists := blobErrors(t)
	wrapURL := func(err error) error {
		return fmt.Errorf("send: %w", &url.Error{Op: "Put", URL: "http://127.0.0.1/x", Err: err})
	}
	tests := []struct {
		name string
		err  error
		want driver.Code
	}{
		{"blob not found", notFound, driver.NotFound},
		{"blob create-only write of an existing name", exists, driver.Precondition},
		{"context canceled", context.Canceled, driver.Unknown},
		{"context canceled in the transport", &url.Error{Op: "Get", URL: "http://127.0.0.1/x", Err: context.Canceled}, driver.Unknown},
		{"context deadline", context.DeadlineExceeded, driver.Transient},
		{"plain", errors.New("plain"), driver.Unknown},
		{"AWS 503", statusErr(503), driver.Transient},
		{"AWS 500", statusErr(500), driver.Transient},
		{"AWS 429", statusErr(429), driver.Transient},
		{"AWS 408", statusErr(408), driver.Transient},
		{"AWS 403", statusErr(403), driver.Permission},
		{"AWS 401", statusErr(401), driver.Permission},
		{"AWS no such bucket", &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject",
			Err: &smithy.GenericAPIError{Code: "NoSuchBucket", Message: "The specified bucket does not exist"}}, driver.BucketNotFound},
		{"AWS answer cut short", awsCutAnswer(), driver.Transient},
		{"AWS 404", statusErr(404), driver.Unknown},
		{"AWS 416", statusErr(416), driver.InvalidRange},
		{"Google 503", &googleapi.Error{Code: 503}, driver.Transient},
		{"Google 416", &googleapi.Error{Code: 416}, driver.InvalidRange},
		{"Azure 503", &azcore.ResponseError{StatusCode: 503}, driver.Transient},
		{"Azure 416", &azcore.ResponseError{StatusCode: 416}, driver.InvalidRange},
		{"Azure 400", &azcore.ResponseError{StatusCode: 400}, driver.Unknown},
		{"Azure 403", &azcore.ResponseError{StatusCode: 403, ErrorCode: "AuthorizationPermissionMismatch"}, driver.Permission},
		{"Azure no such container", &azcore.ResponseError{StatusCode: 404, ErrorCode: "ContainerNotFound"}, driver.BucketNotFound},
		{"Google 403", &googleapi.Error{Code: 403}, driver.Permission},
		{"Google no such bucket", fmt.Errorf("%w: %w", storage.ErrBucketNotExist, &googleapi.Error{Code: 404}), driver.BucketNotFound},
		{"unknown authority", x509.UnknownAuthorityError{}, driver.Permanent},
		{"certificate invalid", x509.CertificateInvalidError{Reason: x509.Expired}, driver.Permanent},
		{"hostname", x509.HostnameError{Host: "h"}, driver.Permanent},
		{"system roots", x509.SystemRootsError{}, driver.Permanent},
		{"verification", &tls.CertificateVerificationError{Err: errors.New("bad")}, driver.Permanent},
		{"record header", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, driver.Permanent},
		{"https to a plain-HTTP endpoint", http.ErrSchemeMismatch, driver.Permanent},
		{"dns not found", &net.DNSError{Err: "no such host", Name: "h", IsNotFound: true}, driver.Permanent},
		{"dns permanent", &net.DNSError{Err: "server misbehaving", Name: "h"}, driver.Permanent},
		{"dns temporary", &net.DNSError{Err: "try again", Name: "h", IsTemporary: true}, driver.Transient},
		{"dns timeout", &net.DNSError{Err: "i/o timeout", Name: "h", IsTimeout: true}, driver.Transient},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, driver.Transient},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, driver.Transient},
		{"timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, driver.Transient},
		{"unexpected EOF", io.ErrUnexpectedEOF, driver.Transient},
	}
	d := &bucket{}
	for _, tt := range tests {
		for _, err := range []error{tt.err, fmt.Errorf("gocloud: %w", tt.err)} {
			if got := d.Classify(err); got != tt.want {
				t.Errorf("%s: Classify(%v) = %v, want %v", tt.name, err, got, tt.want)
			}
		}
		if tt.want == driver.Permanent || tt.want == driver.Transient {
			// Transport errors come inside a *url.Error.
			if got := d.Classify(wrapURL(tt.err)); got != tt.want {
				t.Errorf("%s: Classify(%v) = %v, want %v", tt.name, wrapURL(tt.err), got, tt.want)
			}
		}
	}
}

// awsCutAnswer is the error of the AWS SDK for an answer of 200 whose
// body was cut short: a deserialization error under the 200.
func awsCutAnswer() error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "ListObjectsV2", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusOK}},
			Err:      &smithy.DeserializationError{Err: fmt.Errorf("failed to decode response body, %w", io.ErrUnexpectedEOF)},
		},
	}}
}

// refusingGCS is the HTTP transport of a Google Cloud Storage client whose
// every request is refused (403), and whose listings say that the bucket
// does not exist (404).
type refusingGCS struct{}

func (refusingGCS) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	code, msg := http.StatusForbidden, "caller does not have storage.objects access"
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/o") {
		code, msg = http.StatusNotFound, "The specified bucket does not exist."
	}
	body := fmt.Sprintf(`{"error":{"code":%d,"message":%q,"errors":[{"message":%q,"reason":"x"}]}}`, code, msg, msg)
	return &http.Response{
		StatusCode: code, Status: http.StatusText(code), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json; charset=UTF-8"}},
		Body:   io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r,
	}, nil
}

// TestRefusedGCS: through gcsblob, which calls a 403 NotFound, a refused
// read or delete fails with ErrPermission (a delete does not report
// success), and a listing of a missing bucket with ErrNotFound and
// ErrPermanent.
func TestRefusedGCS(t *testing.T) {
	ctx := t.Context()
	bk, err := gcsblob.OpenBucket(ctx, &gcp.HTTPClient{Client: http.Client{Transport: refusingGCS{}}}, "bkt", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bk.Close()
	cfg := DefaultConfig("gs://bkt")
	cfg.Bucket, cfg.Request.MaxAttempts = bk, 1
	b, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.Get(ctx, "obj", 0, -1)
	conformance.CheckError(t, err, "get", ID, "obj", backends.ErrPermission)
	conformance.CheckError(t, b.Delete(ctx, "obj"), "delete", ID, "obj", backends.ErrPermission)
	err = b.List(ctx, "", func(backends.ObjectInfo) error { return nil })
	conformance.CheckError(t, err, "list", ID, "", backends.ErrNotFound)
	if !errors.Is(err, backends.ErrPermanent) {
		t.Errorf("list of a missing bucket: %v does not match ErrPermanent", err)
	}
}

// TestMissingBucketS3: a call on a bucket that does not exist fails with
// ErrNotFound and ErrPermanent, so that no one retries it.
func TestMissingBucketS3(t *testing.T) {
	env := s3Env(t)
	missing := maps.Clone(env)
	missing["DSTL_S3_BUCKET"] = "no-such-bucket-" + strings.ToLower(rand.Text()[:8])
	b, err := New(t.Context(), s3URL(missing, env["DSTL_S3_ENDPOINT"], "p", "max_attempts=2"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.Get(t.Context(), "x", 0, -1)
	conformance.CheckError(t, err, "get", ID, "x", backends.ErrNotFound)
	if !errors.Is(err, backends.ErrPermanent) {
		t.Errorf("get: %v does not match ErrPermanent", err)
	}
	err = b.Put(t.Context(), "x", strings.NewReader("x"), 1)
	conformance.CheckError(t, err, "put", ID, "x", backends.ErrNotFound)
	if !errors.Is(err, backends.ErrPermanent) {
		t.Errorf("put: %v does not match ErrPermanent", err)
	}
	err = b.List(t.Context(), "", func(backends.ObjectInfo) error { return nil })
	if !errors.Is(err, backends.ErrNotFound) || !errors.Is(err, backends.ErrPermanent) {
		t.Errorf("list: %v does not match ErrNotFound and ErrPermanent", err)
	}
}

type statusErr int

func (s statusErr) Error() string       { return http.StatusText(int(s)) }
func (s statusErr) HTTPStatusCode() int { return int(s) }

// s3Env returns the MinIO settings, or skips the test naming what is
// missing. It also sets the AWS environment the SDK's standard chain reads:
// the credentials, and an empty AWS_CA_BUNDLE (a bundle set for other
// endpoints must not apply to the plain-HTTP emulator).
func s3Env(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	var missing []string
	for _, k := range []string{"DSTL_S3_ENDPOINT", "DSTL_S3_REGION", "DSTL_S3_ACCESS_KEY", "DSTL_S3_SECRET_KEY", "DSTL_S3_BUCKET"} {
		if env[k] = os.Getenv(k); env[k] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Skipf("S3 emulator not configured: %s unset", strings.Join(missing, ", "))
	}
	t.Setenv("AWS_ACCESS_KEY_ID", env["DSTL_S3_ACCESS_KEY"])
	t.Setenv("AWS_SECRET_ACCESS_KEY", env["DSTL_S3_SECRET_KEY"])
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CA_BUNDLE", "")
	empty := t.TempDir() + "/empty"
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", empty)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", empty)
	return env
}

// s3URL is the gocloud URL of prefix in the emulator's bucket, through
// endpoint, with extra query parameters.
func s3URL(env map[string]string, endpoint, prefix, extra string) string {
	q := url.Values{}
	q.Set("endpoint", endpoint)
	q.Set("region", env["DSTL_S3_REGION"])
	q.Set("use_path_style", "true")
	q.Set("disable_https", "true")
	q.Set("request_checksum_calculation", "when_required")
	q.Set("response_checksum_validation", "when_required")
	u := "s3://" + env["DSTL_S3_BUCKET"] + "/" + prefix + "?" + q.Encode()
	if extra != "" {
		u += "&" + extra
	}
	return u
}

// s3Check is a raw S3 client of the test's own, to look at the bucket.
func s3Check(t *testing.T, env map[string]string) *s3.Client {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion(env["DSTL_S3_REGION"]),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(env["DSTL_S3_ACCESS_KEY"], env["DSTL_S3_SECRET_KEY"], "")),
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
		config.WithSharedConfigFiles([]string{}),
		config.WithSharedCredentialsFiles([]string{}),
	)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(env["DSTL_S3_ENDPOINT"])
		o.UsePathStyle = true
		o.HTTPClient = &http.Client{Transport: tr}
	})
}

// checkNoUploads fails the test when an incomplete multipart upload is
// left under prefix. It lists the uploads of the whole bucket and picks
// those under prefix itself, since MinIO answers a listing by a prefix
// that is not a whole key with no uploads at all.
func checkNoUploads(t *testing.T, c *s3.Client, bucket, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := &s3.ListMultipartUploadsInput{Bucket: &bucket}
	for {
		out, err := c.ListMultipartUploads(ctx, in)
		if err != nil {
			t.Errorf("ListMultipartUploads: %v", err)
			return
		}
		for _, u := range out.Uploads {
			if !strings.HasPrefix(aws.ToString(u.Key), prefix) {
				continue
			}
			t.Errorf("incomplete multipart upload left behind: %s (%s)", aws.ToString(u.Key), aws.ToString(u.UploadId))
			_, _ = c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: u.Key, UploadId: u.UploadId})
		}
		if !aws.ToBool(out.IsTruncated) {
			return
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// s3Clean deletes every object under prefix.
func s3Clean(t *testing.T, c *s3.Client, bucket, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Errorf("clean %s: %v", prefix, err)
			return
		}
		for _, o := range page.Contents {
			_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: o.Key})
		}
	}
}

// s3PartSize is the smallest part S3 accepts.
const s3PartSize = 5 << 20

func s3Harness(t *testing.T) backends.Backend {
	env := s3Env(t)
	check := s3Check(t, env)
	prefix := "gocloud-test/" + rand.Text() + "/"
	b, err := New(t.Context(), s3URL(env, env["DSTL_S3_ENDPOINT"], strings.TrimSuffix(prefix, "/"), "part_size=5242880&concurrency=3"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		checkNoUploads(t, check, env["DSTL_S3_BUCKET"], prefix)
		s3Clean(t, check, env["DSTL_S3_BUCKET"], prefix)
	})
	return b
}

func TestConformanceS3(t *testing.T) {
	s3Env(t)
	conformance.TestBackend(t, s3Harness, conformance.WithPartSize(s3PartSize), conformance.WithRawPut(rawPut))
}

// TestAsS3: As hands out the S3 client of an s3blob bucket.
func TestAsS3(t *testing.T) {
	s3Env(t)
	b := s3Harness(t).(*Backend)
	defer b.Close()
	var client *s3.Client
	if !b.As(&client) || client == nil {
		t.Fatal("As(**s3.Client) of an s3blob bucket = false")
	}
	var bk *blob.Bucket
	if !b.As(&bk) || bk == nil {
		t.Fatal("As(**blob.Bucket) = false")
	}
}

func TestEngineS3(t *testing.T) {
	s3Env(t)
	conformance.TestEngine(t, s3Harness)
}

// TestFaultsS3: through a proxy that fails, stalls and cuts requests, the
// retries deliver the object whole; an upload in parts that fails for good
// leaves no incomplete multipart upload.
func TestFaultsS3(t *testing.T) {
	env := s3Env(t)
	check := s3Check(t, env)
	bucket := env["DSTL_S3_BUCKET"]
	proxy, err := faultproxy.New(env["DSTL_S3_ENDPOINT"], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	prefix := "gocloud-fault/" + rand.Text() + "/"
	t.Cleanup(func() { s3Clean(t, check, bucket, prefix) })
	b, err := New(t.Context(), s3URL(env, proxy.URL(), strings.TrimSuffix(prefix, "/"),
		"part_size=5242880&concurrency=2&request_timeout=4s&max_attempts=6"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	data := make([]byte, 2*s3PartSize+12345) // three parts
	_, _ = rand.Read(data)

	// Faults on writes: requests 2, 5, 9 answer 503, 500 and are cut; one
	// part upload stalls past the request timeout.
	stalled := false
	proxy.SetRule(func(r *http.Request, n int) faultproxy.Action {
		switch {
		case n == 2:
			return faultproxy.Action{Status: http.StatusServiceUnavailable}
		case n == 5:
			return faultproxy.Action{Status: http.StatusInternalServerError}
		case n == 9:
			return faultproxy.Action{Reset: true}
		case !stalled && r.Method == http.MethodPut && r.URL.Query().Has("partNumber"):
			stalled = true
			return faultproxy.Action{Stall: time.Minute}
		}
		return faultproxy.Action{}
	})
	if err := b.Put(t.Context(), "big", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put through faults: %v (records %+v)", err, proxy.Records())
	}
	// Faults on reads.
	proxy.SetRule(func(r *http.Request, n int) faultproxy.Action {
		if r.Method == http.MethodGet && n%2 == 1 {
			return faultproxy.Action{Status: http.StatusServiceUnavailable}
		}
		return faultproxy.Action{}
	})
	got, err := conformance.Read(t.Context(), b, "big", 0, -1)
	if err != nil || got != string(data) {
		t.Fatalf("read back: %d bytes, %v; want %d bytes", len(got), err, len(data))
	}
	if proxy.Faults() < 4 {
		t.Fatalf("only %d faults injected: %+v", proxy.Faults(), proxy.Records())
	}
	checkNoUploads(t, check, bucket, prefix)

	// Every part upload fails: the Put fails, leaving no object and no
	// incomplete upload.
	proxy.SetRule(func(r *http.Request, n int) faultproxy.Action {
		if r.Method == http.MethodPut && r.URL.Query().Has("partNumber") {
			return faultproxy.Action{Status: http.StatusInternalServerError}
		}
		return faultproxy.Action{}
	})
	if err := b.Put(t.Context(), "doomed", bytes.NewReader(data), int64(len(data))); err == nil {
		t.Fatal("Put with every part failing succeeded")
	}
	proxy.SetRule(nil)
	_, err = b.Get(t.Context(), "doomed", 0, -1)
	conformance.CheckError(t, err, "get", ID, "doomed", backends.ErrNotFound)
	checkNoUploads(t, check, bucket, prefix)

	// A Put cancelled midway leaves nothing either.
	ctx, cancel := context.WithCancel(t.Context())
	proxy.SetRule(func(r *http.Request, n int) faultproxy.Action {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
			cancel()
		}
		return faultproxy.Action{}
	})
	if err := b.Put(ctx, "cancelled", bytes.NewReader(data), int64(len(data))); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Put = %v", err)
	}
	proxy.SetRule(nil)
	_, err = b.Get(t.Context(), "cancelled", 0, -1)
	conformance.CheckError(t, err, "get", ID, "cancelled", backends.ErrNotFound)
	checkNoUploads(t, check, bucket, prefix)
}

// TestCancelledPutPrefixParamS3: a Put in parts cancelled midway leaves
// no incomplete multipart upload behind, also when the key holds the
// prefix of the bucket URL's own "prefix" parameter and the part size is
// the driver's (whose transfer manager aborts on the cancelled context,
// and so fails to).
func TestCancelledPutPrefixParamS3(t *testing.T) {
	env := s3Env(t)
	check := s3Check(t, env)
	bucket := env["DSTL_S3_BUCKET"]
	prefix := "gocloud-abort/" + rand.Text() + "/"
	t.Cleanup(func() {
		checkNoUploads(t, check, bucket, prefix)
		s3Clean(t, check, bucket, prefix)
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	proxy, err := faultproxy.New(env["DSTL_S3_ENDPOINT"], func(r *http.Request, n int) faultproxy.Action {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
			cancel()
		}
		return faultproxy.Action{}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	b, err := New(t.Context(), s3URL(env, proxy.URL(), "", "part_size=0&prefix="+url.QueryEscape(prefix)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data := make([]byte, 17<<20) // above the driver's threshold of 16 MiB: in parts
	if err := b.Put(ctx, "cancelled", bytes.NewReader(data), int64(len(data))); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Put = %v", err)
	}
	_, err = b.Get(t.Context(), "cancelled", 0, -1)
	conformance.CheckError(t, err, "get", ID, "cancelled", backends.ErrNotFound)
}

// fileHarness opens a backend on a new file:// bucket.
func fileHarness(t *testing.T) backends.Backend {
	b, err := New(t.Context(), "file://"+t.TempDir())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// TestConformanceFile: fileblob, whose names are paths, passes the suite:
// a name under an object's, or a directory's, is no object.
func TestConformanceFile(t *testing.T) {
	conformance.TestBackend(t, fileHarness, conformance.WithPartSize(memPartSize))
}

// TestFilePutRace: of Puts racing for one name on fileblob, exactly one
// succeeds, round after round.
func TestFilePutRace(t *testing.T) {
	b := fileHarness(t)
	defer b.Close()
	for round := range 100 {
		name := fmt.Sprintf("race/%d", round)
		var wg sync.WaitGroup
		var won atomic.Int32
		for i := range 8 {
			wg.Go(func() {
				data := fmt.Sprintf("writer %d", i)
				err := b.Put(t.Context(), name, strings.NewReader(data), int64(len(data)))
				switch {
				case err == nil:
					won.Add(1)
				case !errors.Is(err, backends.ErrExists):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := won.Load(); n != 1 {
			t.Fatalf("round %d: %d Puts of one name succeeded", round, n)
		}
	}
}

// azureHarness opens a backend on the Azurite emulator's container through
// azureblob, under a random prefix, or skips the test naming what is
// missing. azureblob reads the account and its key from the environment.
func azureHarness(t *testing.T) backends.Backend {
	t.Helper()
	env := map[string]string{}
	var missing []string
	for _, k := range []string{"DSTL_AZURE_ENDPOINT", "DSTL_AZURE_ACCOUNT", "DSTL_AZURE_KEY", "DSTL_AZURE_CONTAINER"} {
		if env[k] = os.Getenv(k); env[k] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Skipf("Azure emulator not configured: %s unset", strings.Join(missing, ", "))
	}
	t.Setenv("AZURE_STORAGE_ACCOUNT", env["DSTL_AZURE_ACCOUNT"])
	t.Setenv("AZURE_STORAGE_KEY", env["DSTL_AZURE_KEY"])
	ep, err := url.Parse(env["DSTL_AZURE_ENDPOINT"])
	if err != nil {
		t.Fatal(err)
	}
	u := "azblob://" + env["DSTL_AZURE_CONTAINER"] + "/gocloud-test/" + rand.Text() + "?protocol=http&localemu=true&domain=" + url.QueryEscape(ep.Host)
	b, err := New(t.Context(), u)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// gcsHarness opens a backend on the fake-gcs-server emulator's bucket
// through gcsblob, under a random prefix, or skips the test naming what is
// missing.
func gcsHarness(t *testing.T) backends.Backend {
	t.Helper()
	endpoint, bucket := os.Getenv("DSTL_GCS_ENDPOINT"), os.Getenv("DSTL_GCS_BUCKET")
	if endpoint == "" || bucket == "" {
		t.Skip("GCS emulator not configured: DSTL_GCS_ENDPOINT or DSTL_GCS_BUCKET unset")
	}
	ep, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("STORAGE_EMULATOR_HOST", ep.Host)
	b, err := New(t.Context(), "gs://"+bucket+"/gocloud-test/"+rand.Text()+"?anonymous=true&part_size="+strconv.Itoa(gcsPartSize))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// gcsPartSize is the part size of the tests on the GCS emulator: the
// smallest chunk the GCS client sends resumably.
const gcsPartSize = 256 << 10

func TestConformanceGCS(t *testing.T) {
	conformance.TestBackend(t, gcsHarness, conformance.WithPartSize(gcsPartSize))
}

// TestConformanceAzure: azureblob passes the suite, whose failed and
// create-only Puts made its writer's Close panic when the upload went
// through Write.
func TestConformanceAzure(t *testing.T) {
	conformance.TestBackend(t, azureHarness, conformance.WithPartSize(memPartSize))
}

// TestListSorted: List reports lexical order even where the driver walks
// directories (fileblob).
func TestListSorted(t *testing.T) {
	b, err := New(t.Context(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, n := range []string{"a/b", "a-c", "a0"} {
		conformance.Put(t, b, n, n)
	}
	var got []string
	if err := b.List(t.Context(), "a", func(o backends.ObjectInfo) error { got = append(got, o.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "a-c a/b a0" {
		t.Fatalf("List = %q", got)
	}
}

// lostAnswer is a driver.Runner whose first attempt's answer is lost: it
// runs fn, then runs it again as a retry whatever the first returned.
type lostAnswer struct{}

func (lostAnswer) Do(ctx context.Context, _ int64, fn func(ctx context.Context) error) error {
	_ = fn(ctx)
	return fn(ctx)
}

// TestLostAnswer: when the answer to a Put's attempt that stored the
// object is lost, the retry meets the object and the Put succeeds, since
// the object carries its id; an object another Put wrote (another body of
// the same size or of another size, or the same body) fails the Put with
// ErrExists, and so does a Put that meets an object at its first attempt.
// On every driver whose emulator is configured.
func TestLostAnswer(t *testing.T) {
	for _, h := range []struct {
		name    string
		harness func(t *testing.T) backends.Backend
	}{
		{"mem", memHarness}, {"file", fileHarness}, {"s3", s3Harness}, {"gcs", gcsHarness}, {"azure", azureHarness},
	} {
		t.Run(h.name, func(t *testing.T) {
			b := h.harness(t).(*Backend)
			defer b.Close()
			checkLostAnswer(t, b)
		})
	}
}

func checkLostAnswer(t *testing.T, b *Backend) {
	put := func(rt driver.Runner, name, data string) error {
		body := driver.NewBody(strings.NewReader(data), int64(len(data)))
		return b.d.Put(t.Context(), rt, b.Prefix()+name, body, int64(len(data)))
	}
	if err := put(lostAnswer{}, "obj", "data"); err != nil {
		t.Fatalf("Put whose first answer was lost: %v", err)
	}
	if got, err := conformance.Read(t.Context(), b, "obj", 0, -1); err != nil || got != "data" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	for _, other := range []string{"atad", "data!", "data"} {
		if err := put(lostAnswer{}, "obj", other); !errors.Is(err, backends.ErrExists) {
			t.Errorf("Put of %q over another Put's object = %v, want ErrExists", other, err)
		}
		if err := b.Put(t.Context(), "obj", strings.NewReader(other), int64(len(other))); !errors.Is(err, backends.ErrExists) {
			t.Errorf("Put of %q over another Put's object = %v, want ErrExists", other, err)
		}
	}
	if err := b.Delete(t.Context(), "obj"); err != nil {
		t.Fatal(err)
	}
}

// TestLostAnswerNoMetadata: where the driver keeps no metadata (fileblob
// with metadata=skip), a Put whose answer was lost tells its object by
// its bytes.
func TestLostAnswerNoMetadata(t *testing.T) {
	b, err := New(t.Context(), "file://"+t.TempDir()+"?metadata=skip")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	put := func(name, data string) error {
		body := driver.NewBody(strings.NewReader(data), int64(len(data)))
		return b.d.Put(t.Context(), lostAnswer{}, b.Prefix()+name, body, int64(len(data)))
	}
	if err := put("obj", "data"); err != nil {
		t.Fatalf("Put whose first answer was lost: %v", err)
	}
	if err := put("obj", "atad"); !errors.Is(err, backends.ErrExists) {
		t.Errorf("Put over another Put's object = %v, want ErrExists", err)
	}
}

// dropAnswers is a proxy in front of the endpoint target that forwards
// every request and, for those drop picks, cuts the connection instead of
// passing the answer on: the request took effect, its answer is lost.
func dropAnswers(t *testing.T, target string, drop func(r *http.Request) bool) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = u.Scheme, u.Host
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		resp, err := tr.RoundTrip(out)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		mu.Lock()
		cut := drop(r)
		mu.Unlock()
		if cut {
			_, _ = io.Copy(io.Discard, resp.Body)
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestLostAnswerS3: when the answer to the PutObject or the
// CompleteMultipartUpload that stored the object is lost, and the SDK's
// own retry of the request meets the object (412) within the first
// attempt, the Put succeeds.
func TestLostAnswerS3(t *testing.T) {
	env := s3Env(t)
	check := s3Check(t, env)
	bucket := env["DSTL_S3_BUCKET"]
	for _, tc := range []struct {
		name string
		size int
		last func(r *http.Request) bool // the request that stores the object
	}{
		{"PutObject", 100, func(r *http.Request) bool { return r.Method == http.MethodPut }},
		{"CompleteMultipartUpload", s3PartSize + 1, func(r *http.Request) bool {
			return r.Method == http.MethodPost && r.URL.Query().Has("uploadId")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dropped := 0
			proxy := dropAnswers(t, env["DSTL_S3_ENDPOINT"], func(r *http.Request) bool {
				if dropped == 0 && tc.last(r) {
					dropped++
					return true
				}
				return false
			})
			prefix := "gocloud-lost/" + rand.Text() + "/"
			t.Cleanup(func() {
				checkNoUploads(t, check, bucket, prefix)
				s3Clean(t, check, bucket, prefix)
			})
			b, err := New(t.Context(), s3URL(env, proxy.URL, strings.TrimSuffix(prefix, "/"), "part_size=5242880"))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			data := make([]byte, tc.size)
			_, _ = rand.Read(data)
			if err := b.Put(t.Context(), "obj", bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatalf("Put whose answer was lost (%d dropped): %v", dropped, err)
			}
			if dropped != 1 {
				t.Fatalf("%d answers dropped, want 1", dropped)
			}
			if got, err := conformance.Read(t.Context(), b, "obj", 0, -1); err != nil || got != string(data) {
				t.Fatalf("read back %d bytes, %v", len(got), err)
			}
			if err := b.Put(t.Context(), "obj", bytes.NewReader(data), int64(len(data))); !errors.Is(err, backends.ErrExists) {
				t.Fatalf("second Put of the same bytes = %v, want ErrExists", err)
			}
		})
	}
}

// TestPutBudget: the timeout of a Put's attempt, as the portable layer
// gives it for the body size the driver passes, is the request timeout
// once per request of the upload, plus the body at driver.MinThroughput.
func TestPutBudget(t *testing.T) {
	const T = 10 * time.Second
	body := func(n int64) time.Duration { return time.Duration(n) * time.Second / driver.MinThroughput }
	tests := []struct {
		partSize int
		timeout  time.Duration
		size     int64
		want     time.Duration
	}{
		{partSize: 100, timeout: T, size: 0, want: T},
		{partSize: 100, timeout: T, size: 100, want: T + body(100)},
		{partSize: 100, timeout: T, size: 101, want: 4*T + body(101)},
		{partSize: 100, timeout: T, size: 1000, want: 12*T + body(1000)},
		{partSize: 0, timeout: T, size: 3 * DefaultPartSize, want: 5*T + body(3*DefaultPartSize)},
		{partSize: 0, timeout: T, size: 1 << 20, want: T + 4*time.Second},
		{partSize: 100, timeout: 1500 * time.Millisecond, size: 250, want: 5*1500*time.Millisecond + body(250)},
		{partSize: 100, timeout: 0, size: 1000, want: 0},
		{partSize: 1, timeout: T, size: math.MaxInt64, want: 0}, // beyond any clock
		{partSize: 1, timeout: T, size: math.MaxInt64 / 2, want: 0},
	}
	for _, tt := range tests {
		d := &bucket{cfg: DefaultConfig("mem://")}
		d.cfg.PartSize, d.cfg.Request.Timeout = tt.partSize, tt.timeout
		if got := d.cfg.Request.ForBody(d.putBudget(tt.size, d.cfg.PartSize)).Timeout; got != tt.want {
			t.Errorf("part size %d, timeout %v, size %d: Put timeout %v, want %v", tt.partSize, tt.timeout, tt.size, got, tt.want)
		}
	}
}

// slowBody is a body that takes perKiB for every KiB read, and counts the
// bytes read.
type slowBody struct {
	data   []byte
	perKiB time.Duration
	read   atomic.Int64
}

func (s *slowBody) ReadAt(p []byte, off int64) (int, error) {
	r := bytes.NewReader(s.data)
	n, err := r.ReadAt(p, off)
	time.Sleep(time.Duration(n) * s.perKiB / 1024)
	s.read.Add(int64(n))
	return n, err
}

// TestSlowPutMem: a Put whose upload as a whole takes longer than the
// request timeout, each part well within it, succeeds at its first
// attempt.
func TestSlowPutMem(t *testing.T) {
	b, err := New(t.Context(), "mem://b?part_size=65536&request_timeout=300ms&max_attempts=5")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	body := &slowBody{data: make([]byte, 4*65536), perKiB: 2 * time.Millisecond} // ~128 ms a part, ~512 ms in all
	_, _ = rand.Read(body.data)
	start := time.Now()
	if err := b.Put(t.Context(), "slow", body, int64(len(body.data))); err != nil {
		t.Fatalf("slow Put: %v (after %v)", err, time.Since(start))
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("Put took %v, not longer than the request timeout: the test proves nothing", el)
	}
	if got := body.read.Load(); got != int64(len(body.data)) {
		t.Fatalf("body read %d bytes for a %d-byte object: the Put took more than one attempt", got, len(body.data))
	}
	got, err := conformance.Read(t.Context(), b, "slow", 0, -1)
	if err != nil || got != string(body.data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
}

// TestSlowSinglePutMem: a Put of one request that takes longer than the
// request timeout, because its body goes slowly (faster than
// driver.MinThroughput), succeeds at its first attempt: the timeout of a
// request grows with its body.
func TestSlowSinglePutMem(t *testing.T) {
	b, err := New(t.Context(), "mem://b?request_timeout=100ms&max_attempts=5")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	body := &slowBody{data: make([]byte, 128<<10), perKiB: 2 * time.Millisecond} // ~256 ms, one request
	_, _ = rand.Read(body.data)
	start := time.Now()
	if err := b.Put(t.Context(), "slow", body, int64(len(body.data))); err != nil {
		t.Fatalf("slow Put: %v (after %v)", err, time.Since(start))
	}
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Fatalf("Put took %v, not longer than the request timeout: the test proves nothing", el)
	}
	if got := body.read.Load(); got != int64(len(body.data)) {
		t.Fatalf("body read %d bytes for a %d-byte object: the Put took more than one attempt", got, len(body.data))
	}
}

// TestSlowPutS3: through a proxy that holds every part a little, a Put in
// parts that takes longer than the request timeout as a whole, each
// request well within it, succeeds at its first attempt.
func TestSlowPutS3(t *testing.T) {
	env := s3Env(t)
	check := s3Check(t, env)
	bucket := env["DSTL_S3_BUCKET"]
	proxy, err := faultproxy.New(env["DSTL_S3_ENDPOINT"], func(r *http.Request, n int) faultproxy.Action {
		if r.Method == http.MethodPut && r.URL.Query().Has("partNumber") {
			return faultproxy.Action{Stall: 700 * time.Millisecond}
		}
		return faultproxy.Action{}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	prefix := "gocloud-slow/" + rand.Text() + "/"
	t.Cleanup(func() {
		checkNoUploads(t, check, bucket, prefix)
		s3Clean(t, check, bucket, prefix)
	})
	b, err := New(t.Context(), s3URL(env, proxy.URL(), strings.TrimSuffix(prefix, "/"),
		"part_size=5242880&concurrency=1&request_timeout=1500ms&max_attempts=5"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data := make([]byte, 2*s3PartSize+1) // three parts, ~2.1 s in all
	_, _ = rand.Read(data)
	start := time.Now()
	if err := b.Put(t.Context(), "slow", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("slow Put: %v (after %v)", err, time.Since(start))
	}
	if el := time.Since(start); el < 1500*time.Millisecond {
		t.Fatalf("Put took %v, not longer than the request timeout: the test proves nothing", el)
	}
	creates := 0
	for _, r := range proxy.Records() {
		if r.Method == http.MethodPost && strings.Contains(r.Query, "uploads") {
			creates++
		}
	}
	if creates != 1 {
		t.Fatalf("%d multipart uploads started, want 1 (one attempt): %+v", creates, proxy.Records())
	}
	got, err := conformance.Read(t.Context(), b, "slow", 0, -1)
	if err != nil || got != string(data) {
		t.Fatalf("read back %d bytes, %v; want %d", len(got), err, len(data))
	}
}

// hugeLengths are Get lengths from offset 3 that run past any end, some so
// far that offset+length-1 overflows.
var hugeLengths = []int64{math.MaxInt64, math.MaxInt64 - 2, math.MaxInt64 - 3, math.MaxInt64 / 2}

// checkHugeGet: Get(name, 3, huge) returns the object from byte 3 to the
// end.
func checkHugeGet(t *testing.T, b backends.Backend) {
	t.Helper()
	const data = "0123456789abcdef"
	conformance.Put(t, b, "huge", data)
	for _, n := range hugeLengths {
		got, err := conformance.Read(t.Context(), b, "huge", 3, n)
		if err != nil || got != data[3:] {
			t.Errorf("Get(huge, 3, %d) = %q, %v; want %q", n, got, err, data[3:])
		}
	}
}

func TestHugeGetLengthMem(t *testing.T) {
	b := memHarness(t)
	defer b.Close()
	checkHugeGet(t, b)
}

func TestHugeGetLengthS3(t *testing.T) {
	s3Env(t)
	b := s3Harness(t)
	defer b.Close()
	checkHugeGet(t, b)
}

// TestNoSecretsInErrors: errors about base paths and bucket URLs that
// carry credentials, or a query that may, never show them.
func TestNoSecretsInErrors(t *testing.T) {
	for _, u := range []string{
		"s3://AKIA:SECRET@b/p",
		"s3://AKIA:SECRET@b/%zz",
		"gs://user:SECRET@b/p",
		"mem://u:SECRET@b",
		"s3://SECRET@b/p?region=us-east-1",
		"s3:AKIA:SECRET@b",
		"s3://b:SECRET/p",
		"s3://b/p?endpoint=http://u:SECRET@127.0.0.1:9000&region=us-east-1",
		"s3://b/p?endpoint=http%3A%2F%2Fu%3ASECRET%40127.0.0.1%3A9000&region=us-east-1",
		"s3://b/p?endpoint=u:SECRET@127.0.0.1:9000&region=us-east-1",
		"s3://b/p?token=SECRET&part_size=x",
		"s3://b/p?token=SECRET&region=%zz",
		"mem://b?sig=SECRET&max_attempts=0",
		"nosuchscheme://b?sig=SECRET",
	} {
		_, perr := ParseURL(u)
		_, nerr := New(t.Context(), u)
		_, oerr := Open(t.Context(), DefaultConfig(u))
		for i, err := range []error{perr, nerr, oerr} {
			if err == nil {
				if i > 0 || !strings.HasPrefix(u, "nosuchscheme:") { // ParseURL knows no schemes
					t.Errorf("%q: call %d succeeded", u, i)
				}
			} else if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("%q: call %d: error shows the secret: %v", u, i, err)
			}
		}
	}
	for _, u := range []string{"s3://AKIA:SECRET@b/p", "s3://b/p?endpoint=http://u:SECRET@127.0.0.1:9000&region=us-east-1"} {
		if _, err := ParseURL(u); err == nil || !strings.Contains(err.Error(), "credentials do not go in the URL") {
			t.Errorf("ParseURL(%q) = %v; want the credentials rejected", u, err)
		}
	}
	// Errors of a backend name its bucket without the query.
	b, err := New(t.Context(), "mem://bkt/p?nomd5")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.Get(t.Context(), "missing", 0, -1)
	if err == nil || strings.Contains(err.Error(), "nomd5") {
		t.Fatalf("Get error %v shows the query", err)
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"mem://b", "mem://b"},
		{"s3://u:p@b/x?endpoint=e#f", "s3://b/x?..."},
		{"s3:u:p@b", "s3:..."},
		{"s3://b/%zz?x=y", "..."},
		{"mem://?", "mem:"},
	}
	for _, tt := range tests {
		if got := redact(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
