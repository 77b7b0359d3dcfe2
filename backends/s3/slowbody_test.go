package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl"
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
		c.Endpoint, c.Request.ResponseTimeout, c.Request.MaxAttempts, c.Request.TimeoutAttempts = srv.URL, time.Second, 1, 1
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

// TestEngineSlowUploadIsNotHedged: with the engine's defaults, a persist
// of a 3 MiB object to an endpoint that reads bodies at 1 MiB/s succeeds
// with one PUT. The transport hands the whole body to the socket's buffers
// long before the service has read it, so the seconds after the last
// reported byte must not count as a stall.
func TestEngineSlowUploadIsNotHedged(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 3 s")
	}
	var puts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			puts.Add(1)
		}
		const rate = 1 << 20
		chunk := make([]byte, rate/16)
		for {
			if _, err := io.ReadFull(r.Body, chunk); err != nil {
				break
			}
			time.Sleep(time.Second / 16)
		}
		w.Header().Set("ETag", `"etag"`)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	b, _ := silentBackend(t, func(c *Config) { c.Endpoint = srv.URL })
	cfg := dstl.DefaultConfig("s3://bkt/job")
	s, err := dstl.New(cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w, err := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 0})
	if err != nil {
		t.Fatal(err)
	}
	change := make([]byte, 1<<20)
	rand.Read(change)
	for range 3 {
		if err := w.Append(t.Context(), 0, change); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	f, err := w.Persist(t.Context(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Wait(t.Context()); err != nil {
		t.Fatalf("persist of 3 MiB at 1 MiB/s with the defaults: %v", err)
	}
	t.Logf("persist took %v with %d PUTs", time.Since(start).Round(time.Millisecond), puts.Load())
	if n := puts.Load(); n != 1 {
		t.Fatalf("%d PUTs, want 1: a progressing upload was hedged", n)
	}
}
