package s3

import (
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/faultproxy"
	"github.com/dstlgo/dstl/catalog"
)

// TestVerifyCreateOnly: MinIO refuses a Put of an existing name on both
// paths, so the check passes; the requests it sends are counted, and
// catalog.Join sends them once per Bucket.
func TestVerifyCreateOnly(t *testing.T) {
	env := requireEnv(t)
	proxy, err := faultproxy.New(env["DSTL_S3_ENDPOINT"], nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	u, _ := testURL(t, proxy.URL(), nil)
	b := openURL(t, u)

	if err := backends.VerifyCreateOnly(t.Context(), b, "job/.create-only-check"); err != nil {
		t.Fatalf("VerifyCreateOnly on MinIO: %v", err)
	}
	var sent []string
	for _, r := range proxy.Records() {
		sent = append(sent, r.Method+" "+r.Query)
	}
	t.Logf("the check sent %d requests: %q", len(sent), sent)
	if len(sent) > backends.ProbeRequests || len(sent) < 6 {
		t.Fatalf("the check sent %d requests, want 6 to %d: %q", len(sent), backends.ProbeRequests, sent)
	}
	if q := strings.Join(sent, ","); !strings.Contains(q, "uploads") || !strings.Contains(q, "uploadId") {
		t.Fatalf("the check sent no multipart upload: %q", sent)
	}

	// catalog.Join on another Bucket of the same store probes once.
	u2, _ := testURL(t, proxy.URL(), nil)
	b2 := openURL(t, u2)
	before := len(proxy.Records())
	for i := range 2 {
		if _, err := catalog.Join(t.Context(), b2, catalog.Config{JobID: "job", Process: i, Instances: 2}); err != nil {
			t.Fatalf("Join %d on MinIO: %v", i, err)
		}
	}
	probes, all := 0, 0
	for _, r := range proxy.Records()[before:] {
		all++
		if strings.Contains(r.Path, ".create-only-") {
			probes++
		}
	}
	t.Logf("two Joins sent %d requests, %d of them the check's", all, probes)
	if probes < 6 || probes > backends.ProbeRequests {
		t.Fatalf("two Joins sent %d requests of the check, want one check's", probes)
	}
}
