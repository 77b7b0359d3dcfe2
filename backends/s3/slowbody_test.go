package s3

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// slowReader is an S3 endpoint on 127.0.0.1 that reads request bodies at
// about rate bytes per second and answers every request with 200.
func slowReader(t *testing.T, rate int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, rate/16)
		for {
			_, err := io.ReadFull(r.Body, chunk)
			if err != nil {
				break
			}
			time.Sleep(time.Second / 16)
		}
		w.Header().Set("ETag", `"etag"`)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestResponseTimeoutSlowUpload: the response timeout bounds the wait for
// an answer, not the upload of a body: a 4 MiB Put to an endpoint that
// reads it at 1 MiB/s succeeds with response_timeout=1s.
func TestResponseTimeoutSlowUpload(t *testing.T) {
	srv := slowReader(t, 1<<20)
	b, _ := silentBackend(t, func(c *Config) {
		c.Endpoint, c.ResponseTimeout, c.MaxAttempts, c.TimeoutAttempts = srv.URL, time.Second, 1, 1
	})
	body := bytes.Repeat([]byte("x"), 4<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := b.Put(ctx, "big.dstl", bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatalf("put of 4 MiB at 1 MiB/s with response_timeout=1s: %v", err)
	}
	t.Logf("put took %v", time.Since(start).Round(time.Millisecond))
}
