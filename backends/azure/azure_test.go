package azure

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/faultproxy"
	"github.com/dstlgo/dstl/conformance"
	"github.com/dstlgo/dstl/duplicating"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testPartSize is the small part size of the tests: the conformance
// suite's large object goes up in four blocks.
const testPartSize = 64 << 10

var envNames = []string{"DSTL_AZURE_ENDPOINT", "DSTL_AZURE_ACCOUNT", "DSTL_AZURE_KEY", "DSTL_AZURE_CONTAINER"}

// emulator returns the emulator's settings, or skips the test naming the
// variables that are not set.
func emulator(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	var missing []string
	for _, n := range envNames {
		if v := os.Getenv(n); v != "" {
			env[n] = v
		} else {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		t.Skipf("%s not set (run under minio-test/with-emulators.sh)", strings.Join(missing, ", "))
	}
	return env
}

// testConfig returns a configuration for a fresh random prefix in the
// emulator's container (created when missing), with endpoint in place of
// the emulator's when it is not empty.
func testConfig(t *testing.T, endpoint string) Config {
	t.Helper()
	env := emulator(t)
	cfg := DefaultConfig(env["DSTL_AZURE_CONTAINER"])
	cfg.AccountURL = env["DSTL_AZURE_ENDPOINT"]
	cfg.Account = env["DSTL_AZURE_ACCOUNT"]
	cfg.AccountKey = env["DSTL_AZURE_KEY"]
	cfg.Prefix = "test/" + strings.ToLower(rand.Text()) + "/"
	cfg.PartSize = testPartSize
	cfg.Request = backends.Policy{Timeout: 10 * time.Second, MaxAttempts: 4, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	ensureContainer(t, cfg)
	if endpoint != "" {
		cfg.AccountURL = endpoint
	}
	return cfg
}

// ensureContainer creates cfg's container when it does not exist.
func ensureContainer(t *testing.T, cfg Config) {
	t.Helper()
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer b.Close()
	if _, err := client(t, b).Create(t.Context(), nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		t.Fatalf("creating container %s: %v", cfg.Container, err)
	}
}

// client returns the backend's container client.
func client(t *testing.T, b *Backend) *container.Client {
	t.Helper()
	var c *container.Client
	if !b.As(&c) || c == nil {
		t.Fatal("As(**container.Client) gives no client")
	}
	return c
}

func open(t *testing.T, cfg Config) *Backend {
	t.Helper()
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func harness(t *testing.T) backends.Backend {
	b, err := Open(t.Context(), testConfig(t, ""))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return b
}

func TestConformance(t *testing.T) {
	conformance.TestBackend(t, harness, conformance.WithPartSize(testPartSize), conformance.WithRawPut(rawPut))
}

// rawPut writes a blob under name as it is, through the SDK, as another
// tool would.
func rawPut(t *testing.T, b backends.Backend, name string, data []byte) error {
	ab := b.(*Backend)
	c, full := client(t, ab), ab.Prefix()+name
	if _, err := c.NewBlockBlobClient(full).UploadBuffer(t.Context(), data, nil); err != nil {
		return err
	}
	t.Cleanup(func() {
		if _, err := c.NewBlobClient(full).Delete(context.Background(), nil); err != nil {
			t.Errorf("deleting the foreign blob %q: %v", full, err)
		}
	})
	return nil
}

func TestEngine(t *testing.T) { conformance.TestEngine(t, harness) }

// TestEngineLocalRecovery runs the engine suite with local copies of every
// object, the backend deciding each upload.
func TestEngineLocalRecovery(t *testing.T) {
	conformance.TestEngine(t, harness, conformance.WithLocalRecovery(duplicating.Open))
}

func data(n int) []byte {
	d := make([]byte, n)
	for i := range d {
		d[i] = byte(i*31 + i>>11)
	}
	return d
}

// committedBlocks returns the committed block ids of name.
func committedBlocks(t *testing.T, b *Backend, name string) []string {
	t.Helper()
	bl, err := client(t, b).NewBlockBlobClient(b.Prefix()+name).GetBlockList(t.Context(), blockblob.BlockListTypeCommitted, nil)
	if err != nil {
		t.Fatalf("GetBlockList %s: %v", name, err)
	}
	var ids []string
	for _, blk := range bl.CommittedBlocks {
		ids = append(ids, deref(blk.Name))
	}
	return ids
}

// TestStagedBlocks: above the part size a Put stages blocks of the part
// size under ids of one length, below it it is one request.
func TestStagedBlocks(t *testing.T) {
	b := open(t, testConfig(t, ""))
	want := data(3*testPartSize + 100)
	if err := b.Put(t.Context(), "big", bytes.NewReader(want), int64(len(want))); err != nil {
		t.Fatal(err)
	}
	ids := committedBlocks(t, b, "big")
	if len(ids) != 4 {
		t.Fatalf("committed %d blocks, want 4", len(ids))
	}
	for _, id := range ids {
		if len(id) != len(ids[0]) {
			t.Fatalf("block ids of different lengths: %q", ids)
		}
	}
	got, err := conformance.Read(t.Context(), b, "big", 0, -1)
	if err != nil || got != string(want) {
		t.Fatalf("read back %d bytes, %v; want the %d put", len(got), err, len(want))
	}
	small := data(testPartSize)
	if err := b.Put(t.Context(), "small", bytes.NewReader(small), int64(len(small))); err != nil {
		t.Fatal(err)
	}
	if ids := committedBlocks(t, b, "small"); len(ids) > 1 {
		t.Fatalf("a Put of the part size committed %d blocks, want one request", len(ids))
	}
}

// TestPermission: a wrong key is ErrPermission, without retries.
func TestPermission(t *testing.T) {
	cfg := testConfig(t, "")
	var n atomic.Int32
	p, err := faultproxy.New(strings.TrimSuffix(cfg.AccountURL, "/"+cfg.Account), func(*http.Request, int) faultproxy.Action {
		n.Add(1)
		return faultproxy.Action{}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cfg.AccountURL = p.URL() + "/" + cfg.Account
	cfg.AccountKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 64))
	b := open(t, cfg)
	conformance.CheckError(t, b.Put(t.Context(), "x", strings.NewReader("x"), 1), "put", ID, "x", backends.ErrPermission)
	if got := n.Load(); got != 1 {
		t.Fatalf("%d requests for a permission error, want 1 (no retry)", got)
	}
	if err := b.Put(t.Context(), "x", strings.NewReader("x"), 1); !strings.Contains(err.Error(), cfg.Container) {
		t.Fatalf("error %q does not name the container %q", err, cfg.Container)
	}
}

// TestFaults: requests that fail with 503 or 500, stall past the
// per-request timeout or are cut are retried, and the objects read back
// whole; a staged upload that fails for good leaves no blob.
func TestFaults(t *testing.T) {
	cfg := testConfig(t, "")
	account := cfg.Account
	p, err := faultproxy.New(strings.TrimSuffix(cfg.AccountURL, "/"+account), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cfg.AccountURL = p.URL() + "/" + account
	cfg.Request.Timeout = 500 * time.Millisecond
	cfg.Request.MaxAttempts = 5
	cfg.Concurrency = 2
	b := open(t, cfg)

	p.SetRule(func(r *http.Request, n int) faultproxy.Action {
		switch n % 7 {
		case 1:
			return faultproxy.Action{Status: http.StatusServiceUnavailable}
		case 3:
			return faultproxy.Action{Stall: 2 * time.Second}
		case 4:
			return faultproxy.Action{Reset: true}
		case 6:
			return faultproxy.Action{Status: http.StatusInternalServerError}
		}
		return faultproxy.Action{}
	})
	objects := map[string][]byte{"faults/small": data(1000), "faults/staged": data(4*testPartSize + 7)}
	for name, d := range objects {
		if err := b.Put(t.Context(), name, bytes.NewReader(d), int64(len(d))); err != nil {
			t.Fatalf("Put %s through faults: %v", name, err)
		}
	}
	for name, d := range objects {
		got, err := conformance.Read(t.Context(), b, name, 0, -1)
		if err != nil || got != string(d) {
			t.Fatalf("Get %s through faults: %d bytes, %v; want the %d put", name, len(got), err, len(d))
		}
	}
	staged := objects["faults/staged"]
	for i := int64(1); i <= 4; i++ {
		off := i*testPartSize - 3
		got, err := conformance.Read(t.Context(), b, "faults/staged", off, 6)
		if err != nil || got != string(staged[off:off+6]) {
			t.Fatalf("ranged Get at %d through faults = %q, %v", off, got, err)
		}
	}
	if p.Faults() < 4 {
		t.Fatalf("only %d faults injected", p.Faults())
	}

	// Every block after the first fails for good: the Put fails and
	// leaves no blob, and the name stays free.
	var blocks atomic.Int32
	p.SetRule(func(r *http.Request, n int) faultproxy.Action {
		if r.URL.Query().Get("comp") == "block" && blocks.Add(1) > 1 {
			return faultproxy.Action{Status: http.StatusServiceUnavailable}
		}
		return faultproxy.Action{}
	})
	d := data(5 * testPartSize)
	err = b.Put(t.Context(), "faults/failed", bytes.NewReader(d), int64(len(d)))
	conformance.CheckError(t, err, "put", ID, "faults/failed", nil)
	p.SetRule(nil)
	var names []string
	if err := b.List(t.Context(), "faults/", func(o backends.ObjectInfo) error { names = append(names, o.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 {
		t.Fatalf("List after the failed Put = %q, want the two objects put before", names)
	}
	_, err = b.Get(t.Context(), "faults/failed", 0, -1)
	conformance.CheckError(t, err, "get", ID, "faults/failed", backends.ErrNotFound)
	if err := b.Put(t.Context(), "faults/failed", bytes.NewReader(d), int64(len(d))); err != nil {
		t.Fatalf("Put after the failed one: %v", err)
	}
}

// TestReadyClient: Open takes a ready container client.
func TestReadyClient(t *testing.T) {
	cfg := testConfig(t, "")
	cred, err := container.NewSharedKeyCredential(cfg.Account, cfg.AccountKey)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	client, err := container.NewClientWithSharedKeyCredential(cfg.AccountURL+"/"+cfg.Container, cred, &container.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: &http.Client{Transport: tr}, Retry: policy.RetryOptions{MaxRetries: -1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	own := DefaultConfig(cfg.Container)
	own.Client, own.Prefix, own.PartSize = client, cfg.Prefix, testPartSize
	b := open(t, own)
	d := data(2*testPartSize + 1)
	if err := b.Put(t.Context(), "obj", bytes.NewReader(d), int64(len(d))); err != nil {
		t.Fatal(err)
	}
	got, err := conformance.Read(t.Context(), b, "obj", testPartSize-5, 10)
	if err != nil || got != string(d[testPartSize-5:testPartSize+5]) {
		t.Fatalf("Get across a block boundary = %q, %v", got, err)
	}
}

// TestForeignNamesNotDeleted: blobs under the prefix whose names no Put
// writes ("dir/", "x//y"), put there through the SDK by another tool, are
// skipped by List, so that a sweep that deletes what List reports (as the
// garbage collector does) never deletes them; Delete refuses their names.
func TestForeignNamesNotDeleted(t *testing.T) {
	b := open(t, testConfig(t, ""))
	ours := []string{"a", "dir/b", "x/y"}
	for _, name := range ours {
		conformance.Put(t, b, name, "data of "+name)
	}
	var foreign []string
	for _, name := range []string{"dir/", "x//y"} {
		if err := rawPut(t, b, name, []byte("foreign")); err != nil {
			t.Logf("the store refuses the name %q: %v", name, err)
			continue
		}
		foreign = append(foreign, name)
	}
	if len(foreign) == 0 {
		t.Skip("the store refused every foreign name")
	}
	var swept []string
	err := b.List(t.Context(), "", func(o backends.ObjectInfo) error {
		swept = append(swept, o.Name)
		return b.Delete(t.Context(), o.Name)
	})
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if !slices.Equal(swept, ours) {
		t.Fatalf("List reported %q, want %q", swept, ours)
	}
	var left []string
	pager := client(t, b).NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: to.Ptr(b.Prefix())})
	for pager.More() {
		page, err := pager.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page.Segment.BlobItems {
			left = append(left, strings.TrimPrefix(deref(item.Name), b.Prefix()))
		}
	}
	if !slices.Equal(left, foreign) {
		t.Fatalf("after the sweep the prefix holds %q, want the foreign blobs %q", left, foreign)
	}
	for _, name := range foreign {
		conformance.CheckError(t, b.Delete(t.Context(), name), "delete", ID, name, backends.ErrInvalidName)
	}
}
