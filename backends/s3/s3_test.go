package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"math"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/conformance"
	"github.com/dstlgo/dstl/duplicating"
)

// testPartSize is the part size of the tests: S3's smallest.
const testPartSize = MinPartSize

// TestMain gives the SDK's default chain the emulator's credentials, as
// the standard AWS variables, and fails if any goroutine outlives the tests.
func TestMain(m *testing.M) {
	if k, s := os.Getenv("DSTL_S3_ACCESS_KEY"), os.Getenv("DSTL_S3_SECRET_KEY"); k != "" && s != "" {
		os.Setenv("AWS_ACCESS_KEY_ID", k)
		os.Setenv("AWS_SECRET_ACCESS_KEY", s)
		os.Unsetenv("AWS_SESSION_TOKEN")
		os.Unsetenv("AWS_PROFILE")
	}
	goleak.VerifyTestMain(m)
}

var emulatorVars = []string{"DSTL_S3_ENDPOINT", "DSTL_S3_REGION", "DSTL_S3_ACCESS_KEY", "DSTL_S3_SECRET_KEY", "DSTL_S3_BUCKET"}

// requireEnv returns the emulator's variables, or skips the test naming
// the missing ones.
func requireEnv(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	var missing []string
	for _, n := range emulatorVars {
		if v := os.Getenv(n); v != "" {
			env[n] = v
		} else {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		t.Skipf("%s not set (run with minio-test/with-emulators.sh)", strings.Join(missing, ", "))
	}
	return env
}

// testURL returns the base path of a fresh random prefix in the emulator's
// bucket, reached at endpoint (the emulator's, when empty), with extra
// query parameters.
func testURL(t *testing.T, endpoint string, extra url.Values) (string, string) {
	env := requireEnv(t)
	if endpoint == "" {
		endpoint = env["DSTL_S3_ENDPOINT"]
	}
	prefix := "dstl-test/" + strings.ToLower(rand.Text()[:16]) + "/"
	q := url.Values{
		"endpoint":       {endpoint},
		"region":         {env["DSTL_S3_REGION"]},
		"use_path_style": {"true"},
		"part_size":      {"5242880"},
	}
	for k, v := range extra {
		q[k] = v
	}
	return "s3://" + env["DSTL_S3_BUCKET"] + "/" + prefix + "?" + q.Encode(), prefix
}

// openURL opens a backend by URL, closed at the end of the test, and
// deletes what it left under its prefix.
func openURL(t *testing.T, basePath string) *Backend {
	t.Helper()
	b, err := New(t.Context(), basePath)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		clean(t, b)
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// clean deletes the objects under the backend's prefix.
func clean(t *testing.T, b *Backend) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var names []string
	if err := b.List(ctx, "", func(o backends.ObjectInfo) error { names = append(names, o.Name); return nil }); err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	for _, n := range names {
		if err := b.Delete(ctx, n); err != nil {
			t.Logf("cleanup: %v", err)
		}
	}
}

// harness opens a backend on a fresh prefix for the conformance suites;
// after each case it deletes what is left with a backend of its own.
func harness(t *testing.T) backends.Backend {
	u, _ := testURL(t, "", nil)
	b, err := New(t.Context(), u)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		c, err := New(context.Background(), u)
		if err != nil {
			t.Errorf("New: %v", err)
			return
		}
		clean(t, c)
		c.Close()
	})
	return b
}

func TestConformance(t *testing.T) {
	conformance.TestBackend(t, harness, conformance.WithPartSize(testPartSize), conformance.WithRawPut(rawPut))
}

func TestEngine(t *testing.T) { conformance.TestEngine(t, harness) }

// TestEngineLocalRecovery runs the engine suite with local copies of every
// object, the backend deciding each upload.
func TestEngineLocalRecovery(t *testing.T) {
	conformance.TestEngine(t, harness, conformance.WithLocalRecovery(duplicating.Open))
}

// uploads returns the ids of the incomplete multipart uploads of key.
// MinIO lists the uploads of one exact key only, so the prefix is the key.
func uploads(t *testing.T, b *Backend, key string) []string {
	t.Helper()
	out, err := b.d.client.ListMultipartUploads(t.Context(), &awss3.ListMultipartUploadsInput{Bucket: &b.d.bucket, Prefix: &key})
	if err != nil {
		t.Fatalf("ListMultipartUploads %s: %v", key, err)
	}
	var ids []string
	for _, u := range out.Uploads {
		if aws.ToString(u.Key) == key {
			ids = append(ids, aws.ToString(u.UploadId))
		}
	}
	return ids
}

func payload(n int) []byte {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*31 + i>>11)
	}
	return data
}

// TestCancelledMultipartLeavesNothing: a multipart Put cancelled while its
// parts go up is aborted: no object and no incomplete upload remain.
func TestCancelledMultipartLeavesNothing(t *testing.T) {
	u, _ := testURL(t, "", url.Values{"concurrency": {"1"}})
	b := openURL(t, u)
	data := payload(3 * testPartSize)
	ctx, cancel := context.WithCancel(t.Context())
	r := &cancelAt{r: bytes.NewReader(data), at: testPartSize + 10, cancel: cancel}
	err := b.Put(ctx, "big", r, int64(len(data)))
	conformance.CheckError(t, err, "put", ID, "big", context.Canceled)
	if ids := uploads(t, b, b.Prefix()+"big"); len(ids) != 0 {
		t.Fatalf("incomplete uploads left: %v", ids)
	}
	if _, err := b.Get(t.Context(), "big", 0, -1); err == nil {
		t.Fatal("the cancelled object exists")
	}
}

// cancelAt cancels a context once a read reaches offset at.
type cancelAt struct {
	r      *bytes.Reader
	at     int64
	cancel context.CancelFunc
}

func (c *cancelAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > c.at {
		c.cancel()
	}
	return c.r.ReadAt(p, off)
}

// TestStoredNames fixes the keys of the objects in the bucket: the URL's
// prefix, with a slash added, then the object's name, on both paths of a
// Put.
func TestStoredNames(t *testing.T) {
	u, root := testURL(t, "", nil)
	u = strings.Replace(u, "/"+root+"?", "/"+root+"p?", 1) // a slash is added
	b := openURL(t, u)
	for name, data := range map[string]string{"a/b": "1", "c": "2", "big": strings.Repeat("x", testPartSize+1)} {
		conformance.Put(t, b, name, data)
	}
	out, err := b.d.client.ListObjectsV2(t.Context(), &awss3.ListObjectsV2Input{Bucket: &b.d.bucket, Prefix: &root})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if want := []string{root + "p/a/b", root + "p/big", root + "p/c"}; !slices.Equal(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	if b.Prefix() != root+"p/" {
		t.Fatalf("Prefix() = %q", b.Prefix())
	}
}

// TestGivenClient: Open uses a ready client as it is; As gives the
// client and the location of a backend.
func TestGivenClient(t *testing.T) {
	u, prefix := testURL(t, "", nil)
	made, err := New(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer made.Close()
	var (
		client *awss3.Client
		loc    driver.Root
	)
	if !made.As(&client) || client != made.Client() {
		t.Fatalf("As(**s3.Client) gave %p, want %p", client, made.Client())
	}
	if !made.As(&loc) || loc != (driver.Root{Bucket: requireEnv(t)["DSTL_S3_BUCKET"], Prefix: prefix}) {
		t.Fatalf("As(*driver.Root) gave %+v", loc)
	}
	var other string
	if made.As(&other) {
		t.Fatal("As(*string) reported true")
	}
	cfg := DefaultConfig(loc.Bucket, prefix)
	cfg.Client = client
	cfg.PartSize = testPartSize
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	conformance.Put(t, b, "x", "1")
	if got, err := conformance.Read(t.Context(), made, "x", 0, -1); err != nil || got != "1" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	clean(t, b)
}

// TestHugeLength: a length past any possible end (offset+length overflows)
// reads to the end, not the whole object from 0.
func TestHugeLength(t *testing.T) {
	u, _ := testURL(t, "", nil)
	b := openURL(t, u)
	data := []byte("0123456789")
	if err := b.Put(t.Context(), "obj", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put: %v", err)
	}
	for _, tt := range []struct{ off, length int64 }{
		{3, math.MaxInt64}, {3, math.MaxInt64 - 2}, {0, math.MaxInt64}, {10, math.MaxInt64},
	} {
		got, err := conformance.Read(t.Context(), b, "obj", tt.off, tt.length)
		if want := string(data[tt.off:]); err != nil || got != want {
			t.Errorf("Get(%d, %d) = %q, %v; want %q", tt.off, tt.length, got, err, want)
		}
	}
}

// TestPossiblePrefixes: prefixes are plain string prefixes of names, also
// of names with dots. (MinIO refuses the prefixes ".", "a/." and "a/..",
// which valid names such as ".d" and "a/..c" start with, as
// XMinioInvalidResourceName; S3 lists them.)
func TestPossiblePrefixes(t *testing.T) {
	u, _ := testURL(t, "", nil)
	b := openURL(t, u)
	for _, name := range []string{"a/b", "a/..c", ".d"} {
		conformance.Put(t, b, name, "x")
	}
	for _, tc := range []struct{ prefix, want string }{
		{"", ".d,a/..c,a/b"}, {"a", "a/..c,a/b"}, {"a/", "a/..c,a/b"}, {"a/b", "a/b"},
		{".d", ".d"}, {"a/..c", "a/..c"}, {"b", ""},
	} {
		var names []string
		if err := b.List(t.Context(), tc.prefix, func(o backends.ObjectInfo) error { names = append(names, o.Name); return nil }); err != nil {
			t.Fatalf("List(%q): %v", tc.prefix, err)
		}
		if got := strings.Join(names, ","); got != tc.want {
			t.Errorf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

// rawPut writes an object under name as it is, through the SDK, as
// another tool would.
func rawPut(t *testing.T, b backends.Backend, name string, data []byte) error {
	sb := b.(*Backend)
	key := sb.Prefix() + name
	if _, err := sb.d.client.PutObject(t.Context(), &awss3.PutObjectInput{Bucket: &sb.d.bucket, Key: &key, Body: bytes.NewReader(data)}); err != nil {
		return err
	}
	t.Cleanup(func() {
		if _, err := sb.d.client.DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: &sb.d.bucket, Key: &key}); err != nil {
			t.Errorf("deleting the foreign object %q: %v", key, err)
		}
	})
	return nil
}
