package s3

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dstlgo/dstl/backends"
)

// storingSilently is an S3 endpoint whose PutObject stores the object
// (its size and upload id) but never answers, and whose HeadObject
// answers with what was stored, after head (when not nil) has had its say
// on each HEAD (the n-th): it answers for the HEAD and returns true, or
// returns false. done is closed at the end of the test.
func storingSilently(t *testing.T, head func(w http.ResponseWriter, r *http.Request, n int64, done <-chan struct{}) bool) (*httptest.Server, *atomic.Int64) {
	var (
		mu    sync.Mutex
		size  string
		id    string
		heads atomic.Int64
		done  = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch r.Method {
		case http.MethodPut:
			mu.Lock()
			size, id = r.Header.Get("Content-Length"), r.Header.Get("X-Amz-Meta-"+metaUploadID)
			mu.Unlock()
			silence(r, done) // stored, and the answer never comes
		case http.MethodHead:
			n := heads.Add(1)
			if head != nil && head(w, r, n, done) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if id == "" {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Length", size)
			w.Header().Set("X-Amz-Meta-"+metaUploadID, id)
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusNotImplemented)
		}
	}))
	t.Cleanup(func() { close(done); srv.CloseClientConnections(); srv.Close() })
	return srv, &heads
}

// silence waits until the client gives up r or the test ends.
func silence(r *http.Request, done <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-done:
	}
}

// retries returns the retries the bucket's metrics counted.
func retries(t *testing.T, reader *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "dstl.backend.retries" {
				for _, dp := range sum.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// TestSettleAfterTimeouts: when every PutObject of a Put timed out, the
// check whether one of them stored the object ends at its first attempt
// that times out, with no wait and no retry counted after it; a check
// that meets a 503 is retried, and finds the object the Put stored.
func TestSettleAfterTimeouts(t *testing.T) {
	t.Run("the check times out", func(t *testing.T) {
		srv, heads := storingSilently(t, func(_ http.ResponseWriter, r *http.Request, _ int64, done <-chan struct{}) bool {
			silence(r, done) // no answer to the check either
			return true
		})
		// The request timeout ends each attempt, as with a given client,
		// which has no response timeout.
		b, _ := silentBackend(t, func(c *Config) {
			c.Endpoint, c.Request.Timeout, c.Request.ResponseTimeout, c.Request.TimeoutAttempts = srv.URL, 300*time.Millisecond, 0, 2
		})
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer mp.Shutdown(context.Background())
		bk := backends.New(ID, b.d, b.Policy(), backends.WithMeterProvider(mp))
		err := bk.Put(t.Context(), "x.dstl", strings.NewReader("data"), 4)
		if err == nil {
			t.Fatal("Put succeeded")
		}
		if n := heads.Load(); n != 1 {
			t.Errorf("%d HeadObjects, want 1", n)
		}
		// The second PutObject is the only retry.
		if n := retries(t, reader); n != 1 {
			t.Errorf("%d retries counted, want 1 (the second PutObject)", n)
		}
	})
	t.Run("the check meets a 503", func(t *testing.T) {
		srv, heads := storingSilently(t, func(w http.ResponseWriter, _ *http.Request, n int64, _ <-chan struct{}) bool {
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return true
			}
			return false
		})
		b, _ := silentBackend(t, func(c *Config) {
			c.Endpoint, c.Request.ResponseTimeout, c.Request.TimeoutAttempts = srv.URL, 300*time.Millisecond, 2
		})
		if err := b.Put(t.Context(), "x.dstl", strings.NewReader("data"), 4); err != nil {
			t.Fatalf("Put: %v", err)
		}
		if n := heads.Load(); n != 2 {
			t.Errorf("%d HeadObjects, want 2", n)
		}
	})
}
