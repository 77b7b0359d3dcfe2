package gcs

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/faultproxy"
)

// TestSilentEndpoint: against an endpoint that takes connections and
// never answers, the first call (each, without the hold after an
// unanswered call) fails within TimeoutAttempts × the header
// timeout (plus backoff), naming the endpoint, as a timeout.
func TestSilentEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tune  func(*Config)
		bound time.Duration
	}{
		{"short deadlines", func(c *Config) { c.Request.ResponseTimeout, c.Request.TimeoutAttempts = 300*time.Millisecond, 2 }, 3 * time.Second},
		{"short deadlines, no hold", func(c *Config) {
			c.Request.ResponseTimeout, c.Request.TimeoutAttempts, c.Request.UnansweredHold = 300*time.Millisecond, 2, 0
		}, 3 * time.Second},
		{"timeout below the response timeout", func(c *Config) { c.Request.Timeout, c.Request.TimeoutAttempts = 300*time.Millisecond, 2 }, 3 * time.Second},
		{"defaults", nil, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tune == nil && testing.Short() {
				t.Skip("takes about 20 s")
			}
			silent, err := faultproxy.NewSilent()
			if err != nil {
				t.Fatal(err)
			}
			defer silent.Close()
			cfg := DefaultConfig("bkt", "job")
			cfg.Endpoint = silent.URL()
			if tc.tune != nil {
				tc.tune(&cfg)
			}
			b, err := Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			faultproxy.CheckSilentCalls(t, b, silent, tc.bound, tc.tune != nil) // with the defaults, one call shows the bound
		})
	}
}

// TestSilentEndpointGivenClient: with a client of the Config, whose
// transport does not bound the wait for an answer, a read still fails
// within TimeoutAttempts × the response timeout, not the request timeout.
func TestSilentEndpointGivenClient(t *testing.T) {
	silent, err := faultproxy.NewSilent()
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	client, err := storage.NewClient(t.Context(), option.WithEndpoint(silent.URL()+"/storage/v1/"), option.WithoutAuthentication(),
		option.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cfg := DefaultConfig("bkt", "job")
	cfg.Client = client
	cfg.Request.ResponseTimeout, cfg.Request.TimeoutAttempts = 300*time.Millisecond, 2 // Timeout stays 30 s
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	faultproxy.CheckSilentCalls(t, b, silent, 3*time.Second, false)
}

// TestMissingBucket: a call on a bucket that does not exist says so,
// naming it, rather than that the object is missing, and fails for good.
func TestMissingBucket(t *testing.T) {
	cfg := testConfig(t)
	cfg.Bucket = "no-such-bucket-" + strings.ToLower(cfg.Prefix[5:13])
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for op, call := range map[string]func() error{
		"get": func() error {
			rc, err := b.Get(t.Context(), "x.dstl", 0, -1)
			if err == nil {
				rc.Close()
			}
			return err
		},
		"get at the end": func() error {
			rc, err := b.Get(t.Context(), "x.dstl", 0, 0) // asks for the size only
			if err == nil {
				rc.Close()
			}
			return err
		},
		"list":   func() error { return b.List(t.Context(), "", func(backends.ObjectInfo) error { return nil }) },
		"put":    func() error { return b.Put(t.Context(), "x.dstl", strings.NewReader("x"), 1) },
		"delete": func() error { return b.Delete(t.Context(), "x.dstl") },
	} {
		err := call()
		if want := `bucket "` + cfg.Bucket + `" does not exist`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to say %s", op, err, want)
		}
		if !errors.Is(err, backends.ErrNotFound) || !errors.Is(err, backends.ErrPermanent) {
			t.Errorf("%s: err %v does not match ErrNotFound and ErrPermanent", op, err)
		}
	}
}
