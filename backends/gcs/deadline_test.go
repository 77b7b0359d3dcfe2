package gcs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/internal/faultproxy"
	"github.com/dstlgo/dstl/dstl"
)

// TestSilentEndpoint: against an endpoint that takes connections and
// never answers, each call fails within TimeoutAttempts × the header
// timeout (plus backoff), naming the endpoint, as a timeout.
func TestSilentEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tune  func(*Config)
		bound time.Duration
	}{
		{"short deadlines", func(c *Config) { c.ResponseTimeout, c.TimeoutAttempts = 300*time.Millisecond, 2 }, 3 * time.Second},
		{"timeout below the response timeout", func(c *Config) { c.Timeout, c.TimeoutAttempts = 300*time.Millisecond, 2 }, 3 * time.Second},
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
			calls := map[string]func(ctx context.Context) error{
				"get": func(ctx context.Context) error {
					rc, err := b.Get(ctx, "x.dstl", 0, -1)
					if err == nil {
						rc.Close()
					}
					return err
				},
				"list": func(ctx context.Context) error {
					return b.List(ctx, "", func(dstl.ObjectInfo) error { return nil })
				},
			}
			if tc.tune == nil {
				delete(calls, "list") // one call shows the defaults' bound
			}
			for op, call := range calls {
				start := time.Now()
				err := call(context.Background())
				took := time.Since(start)
				if err == nil {
					t.Fatalf("%s succeeded", op)
				}
				if took > tc.bound {
					t.Errorf("%s took %v, want at most %v", op, took, tc.bound)
				}
				if !strings.Contains(err.Error(), silent.Addr()) {
					t.Errorf("%s: error %q does not name the endpoint %s", op, err, silent.Addr())
				}
				var to interface{ Timeout() bool }
				if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &to) && to.Timeout()) {
					t.Errorf("%s: error %v is no timeout", op, err)
				}
				t.Logf("%s failed after %v: %v", op, took.Round(time.Millisecond), err)
			}
		})
	}
}

// TestMissingBucket: a call on a bucket that does not exist says so,
// naming it, rather than that the object is missing.
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
		"list": func() error { return b.List(t.Context(), "", func(dstl.ObjectInfo) error { return nil }) },
		"put":  func() error { return b.Put(t.Context(), "x.dstl", strings.NewReader("x"), 1) },
	} {
		err := call()
		if want := `bucket "` + cfg.Bucket + `" does not exist`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to say %s", op, err, want)
		}
		if !errors.Is(err, dstl.ErrNotFound) || !errors.Is(err, dstl.ErrPermanent) {
			t.Errorf("%s: err %v does not match ErrNotFound and ErrPermanent", op, err)
		}
	}
}
