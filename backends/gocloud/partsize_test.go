package gocloud

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/faultproxy"
)

// TestHarnessPartSizes: the GCS harness of the conformance suites puts a
// body of one part and a half, the size of the suite's multipart cases
// (PutExistingMultipart, ConcurrentMultipart), as a resumable upload;
// otherwise those cases test the single-request path twice. (azureblob
// needs no such test: its every upload is staged blocks and a block list.)
func TestHarnessPartSizes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      string // the emulator's endpoint variable, pointed at the proxy
		harness  func(*testing.T) backends.Backend
		partSize int64 // what the conformance suite is told
		// multipart reports whether the requests show the multipart path
		multipart func(rs []faultproxy.Record) bool
	}{
		{"GCS", "DSTL_GCS_ENDPOINT", gcsHarness, gcsPartSize, func(rs []faultproxy.Record) bool {
			for _, r := range rs {
				if strings.Contains(r.Query, "uploadType=resumable") {
					return true
				}
			}
			return false
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := os.Getenv(tc.env)
			if target == "" {
				t.Skipf("%s unset", tc.env)
			}
			proxy, err := faultproxy.New(target, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(proxy.Close)
			t.Setenv(tc.env, proxy.URL())
			b := tc.harness(t)
			defer b.Close()
			size := tc.partSize + tc.partSize/2
			if err := b.Put(t.Context(), "big", bytes.NewReader(make([]byte, size)), size); err != nil {
				t.Fatal(err)
			}
			var sent []string
			for _, r := range proxy.Records() {
				sent = append(sent, r.Method+" "+r.Query)
			}
			if !tc.multipart(proxy.Records()) {
				t.Fatalf("a Put of %d bytes (a part and a half of %d) took the single-request path: %q", size, tc.partSize, sent)
			}
			if err := b.Delete(t.Context(), "big"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
