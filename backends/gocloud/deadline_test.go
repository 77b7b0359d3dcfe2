package gocloud

import (
	"context"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/internal/faultproxy"
)

// TestGetSilentEndpoint: a Get through s3blob from an endpoint that takes
// connections and never answers fails after TimeoutAttempts waits of
// response_timeout, naming the endpoint.
func TestGetSilentEndpoint(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	silent, err := faultproxy.NewSilent()
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	env := map[string]string{"DSTL_S3_REGION": "us-east-1", "DSTL_S3_BUCKET": "bkt"}
	b, err := New(t.Context(), s3URL(env, silent.URL(), "job", "response_timeout=300ms&timeout_attempts=2"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	_, err = b.Get(context.Background(), "x.dstl", 0, -1)
	took := time.Since(start)
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	if err == nil {
		t.Fatal("get succeeded")
	}
	if took > 3*time.Second {
		t.Errorf("took %v, want about 2 × 300ms", took)
	}
	if n := silent.Connections(); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
}
