package gcs

import (
	"context"
	"crypto/rand"
	"errors"
	"hash/crc32"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/conformance"
	"github.com/dstlgo/dstl/duplicating"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testPartSize is the part size of the tests: the smallest chunk the
// client sends.
const testPartSize = MinPartSize

// emulator returns the endpoint and bucket of the emulator, or skips the
// test naming the missing variables. The bucket is created when missing.
func emulator(t *testing.T) (endpoint, bucket string) {
	t.Helper()
	var missing []string
	for _, v := range []string{"DSTL_GCS_ENDPOINT", "DSTL_GCS_BUCKET"} {
		if os.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		t.Skipf("%s not set: run `make test` or bash minio-test/with-emulators.sh", strings.Join(missing, ", "))
	}
	// The backend reaches the emulator by its endpoint option alone.
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	endpoint, bucket = os.Getenv("DSTL_GCS_ENDPOINT"), os.Getenv("DSTL_GCS_BUCKET")
	ensureBucket(t, endpoint, bucket)
	return endpoint, bucket
}

func ensureBucket(t *testing.T, endpoint, bucket string) {
	t.Helper()
	c := rawClient(t, endpoint)
	h := c.Bucket(bucket)
	if _, err := h.Attrs(t.Context()); errors.Is(err, storage.ErrBucketNotExist) {
		if err := h.Create(t.Context(), "dstl-test", nil); err != nil && !strings.Contains(err.Error(), "409") {
			t.Fatalf("creating bucket %s: %v", bucket, err)
		}
	} else if err != nil {
		t.Fatalf("bucket %s: %v", bucket, err)
	}
}

// testConfig returns the configuration of a backend on a fresh prefix of the
// emulator's bucket.
func testConfig(t *testing.T) Config {
	t.Helper()
	endpoint, bucket := emulator(t)
	cfg := DefaultConfig(bucket, "test/"+rand.Text()+"/")
	cfg.Endpoint = endpoint
	cfg.PartSize = testPartSize
	cfg.Request.Timeout = 10 * time.Second
	return cfg
}

// harness opens a backend on a fresh prefix for the conformance suites.
func harness(t *testing.T) backends.Backend {
	b, err := Open(t.Context(), testConfig(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
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

// rawNames lists the names under prefix in the bucket, with a client of
// its own.
func rawNames(t *testing.T, endpoint, bucket, prefix string) []string {
	t.Helper()
	c := rawClient(t, endpoint)
	var names []string
	it := c.Bucket(bucket).Objects(t.Context(), &storage.Query{Prefix: prefix})
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return names
		}
		if err != nil {
			t.Fatalf("listing %s: %v", prefix, err)
		}
		names = append(names, a.Name)
	}
}

// rawClient returns a client of the emulator at endpoint, with a transport
// of its own whose idle connections are closed at the end of the test.
func rawClient(t *testing.T, endpoint string) *storage.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	c, err := storage.NewClient(t.Context(), option.WithEndpoint(endpoint+"/storage/v1/"),
		option.WithoutAuthentication(), option.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		tr.CloseIdleConnections()
	})
	return c
}

// rawPut writes an object under name as it is, through the client, as
// another tool would.
func rawPut(t *testing.T, b backends.Backend, name string, data []byte) error {
	gb := b.(*Backend)
	var bh *storage.BucketHandle
	if !gb.As(&bh) {
		t.Fatal("As(**storage.BucketHandle) = false")
	}
	o := bh.Object(gb.Config().Prefix + name)
	w := o.NewWriter(t.Context())
	if _, err := w.Write(data); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	t.Cleanup(func() {
		if err := o.Delete(context.Background()); err != nil {
			t.Errorf("deleting the foreign object %q: %v", o.ObjectName(), err)
		}
	})
	return nil
}

// TestPutSendsBodyCRC32C: a Put sends the CRC32C that its body gives
// (backends.MemoryBody.WithCRC32C, an encoder's object) instead of
// computing one: the service stores it, and refuses the upload when it
// does not match the bytes.
func TestPutSendsBodyCRC32C(t *testing.T) {
	b := harness(t)
	defer b.Close()
	data := make([]byte, 5000)
	_, _ = rand.Read(data)
	crc := crc32.Checksum(data, castagnoli)
	if err := b.Put(t.Context(), "right", backends.NewMemoryBody(data).WithCRC32C(crc), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	var client *storage.Client
	if !b.(*Backend).As(&client) {
		t.Fatal("no client")
	}
	cfg := b.(*Backend).Config()
	attrs, err := client.Bucket(cfg.Bucket).Object(cfg.Prefix + "right").Attrs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if attrs.CRC32C != crc {
		t.Fatalf("stored CRC32C %#08x, want %#08x", attrs.CRC32C, crc)
	}
	err = b.Put(t.Context(), "wrong", backends.NewMemoryBody(data).WithCRC32C(crc^1), int64(len(data)))
	if err == nil {
		t.Fatal("a Put whose body gives a wrong CRC32C succeeded: the body's checksum was not sent")
	}
	if _, err := b.Get(t.Context(), "wrong", 0, -1); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get of the refused object: %v, want ErrNotFound", err)
	}
}
