package s3

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/faultproxy"
	"github.com/dstlgo/dstl/dstl"
)

// silentBackend opens a backend on an endpoint that takes connections and
// never answers, with cfg's deadlines.
func silentBackend(t *testing.T, tune func(*Config)) (*Backend, *faultproxy.Silent) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	silent, err := faultproxy.NewSilent()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(silent.Close)
	cfg := DefaultConfig("bkt", "job")
	cfg.Endpoint, cfg.UsePathStyle, cfg.Region = silent.URL(), true, "us-east-1"
	if tune != nil {
		tune(&cfg)
	}
	b, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, silent
}

// TestSilentEndpoint: against an endpoint that takes connections and
// never answers, the first call (each, without the hold after an
// unanswered call) fails within TimeoutAttempts ×
// ResponseTimeout (plus backoff), naming the endpoint, as a timeout.
func TestSilentEndpoint(t *testing.T) {
	short := func(c *Config) { c.Request.ResponseTimeout, c.Request.TimeoutAttempts = 300*time.Millisecond, 2 }
	for _, tc := range []struct {
		name  string
		tune  func(*Config)
		bound time.Duration
	}{
		{"short deadlines", short, 3 * time.Second},
		{"short deadlines, no hold", func(c *Config) {
			c.Request.ResponseTimeout, c.Request.TimeoutAttempts, c.Request.UnansweredHold = 300*time.Millisecond, 2, 0
		}, 3 * time.Second},
		{"request timeout below the response timeout", func(c *Config) { c.Request.Timeout, c.Request.TimeoutAttempts = 300*time.Millisecond, 2 }, 3 * time.Second},
		{"defaults", nil, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tune == nil && testing.Short() {
				t.Skip("takes about 20 s")
			}
			b, silent := silentBackend(t, tc.tune)
			faultproxy.CheckSilentCalls(t, b, silent, tc.bound, tc.tune != nil) // with the defaults, one call shows the bound
		})
	}
}

// TestReaderRestoreSilentEndpoint: a restore over several handles from an
// endpoint that never answers stops at the first read that ran out of
// time, instead of spending the deadlines once per handle; the error of
// every handle names the endpoint. With the defaults it fails within 30 s.
func TestReaderRestoreSilentEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tune  func(*Config)
		bound time.Duration // one read's deadlines (four would be four times it)
	}{
		{"short deadlines", func(c *Config) { c.Request.ResponseTimeout, c.Request.TimeoutAttempts = 500*time.Millisecond, 2 }, 2500 * time.Millisecond},
		{"defaults", nil, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tune == nil && testing.Short() {
				t.Skip("takes about 20 s")
			}
			restoreFromSilentEndpoint(t, tc.tune, tc.bound)
		})
	}
}

func restoreFromSilentEndpoint(t *testing.T, tune func(*Config), bound time.Duration) {
	b, silent := silentBackend(t, tune)
	groups := dstl.KeyGroupRange{Start: 0, End: 3}
	r, err := dstl.NewReader(b, groups, dstl.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var handles []dstl.Handle
	for i := range 4 {
		h := dstl.Handle{StorageID: ID, LogID: dstl.NewLogID(), KeyGroups: groups,
			Entries:    []dstl.HandleEntry{{Object: fmt.Sprintf("job/obj-%d.dstl", i), Offset: 0, Length: 64, SequenceNumber: 0, LogicalSize: 10}},
			StoredSize: 64, LogicalSize: 10, IncrementalSize: 64}
		if err := h.Validate(); err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	start := time.Now()
	for i, h := range handles {
		err := r.Read(context.Background(), h, func(dstl.Change) error { return nil })
		if err == nil {
			t.Fatalf("handle %d read", i)
		}
		if !strings.Contains(err.Error(), silent.Addr()) {
			t.Errorf("handle %d: error %q does not name the endpoint %s", i, err, silent.Addr())
		}
		t.Logf("handle %d after %v: %v", i, time.Since(start).Round(time.Millisecond), err)
	}
	if took := time.Since(start); took > bound {
		t.Errorf("restore of %d handles took %v, want the deadline of one read (at most %v)", len(handles), took, bound)
	}
	if n := r.Stats().Requests; n != 1 {
		t.Errorf("%d reads sent, want 1", n)
	}
}

// TestMissingBucket: a call on a bucket that does not exist says so,
// naming it, rather than that the object is missing.
func TestMissingBucket(t *testing.T) {
	base, _ := testURL(t, "", nil)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = "no-such-bucket-" + strings.ToLower(rand.Text()[:8])
	b := openURL(t, u.String())
	_, err = b.Get(t.Context(), "x.dstl", 0, -1)
	if want := `bucket "` + u.Host + `" does not exist`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to say %s", err, want)
	}
	if !errors.Is(err, backends.ErrNotFound) || !errors.Is(err, backends.ErrPermanent) {
		t.Errorf("err %v does not match ErrNotFound and ErrPermanent", err)
	}
	// A Put is not retried by the storage either: it fails at once.
	if err := b.Put(t.Context(), "x.dstl", strings.NewReader("x"), 1); !errors.Is(err, backends.ErrPermanent) {
		t.Errorf("put: err %v does not match ErrPermanent", err)
	}
}

// TestPutSilentEndpoint: a Put to an endpoint that never answers sends
// TimeoutAttempts PutObjects, then checks once (not TimeoutAttempts times)
// whether one of them stored the object.
func TestPutSilentEndpoint(t *testing.T) {
	b, silent := silentBackend(t, func(c *Config) { c.Request.ResponseTimeout, c.Request.TimeoutAttempts = 200*time.Millisecond, 2 })
	err := b.Put(context.Background(), "x.dstl", strings.NewReader("data"), 4)
	if err == nil || !strings.Contains(err.Error(), silent.Addr()) {
		t.Fatalf("err = %v, want an error naming %s", err, silent.Addr())
	}
	// Each unanswered request holds its connection: one per request.
	if n := silent.Connections(); n != 3 {
		t.Errorf("%d requests, want 2 PutObjects and 1 HeadObject", n)
	}
}

// TestImpossiblePrefix: a listing by a prefix that no valid object name
// starts with (one of its complete segments is no valid segment) finds
// nothing and sends no request, for objects and for incomplete uploads.
func TestImpossiblePrefix(t *testing.T) {
	b, silent := silentBackend(t, func(c *Config) { c.Request.ResponseTimeout, c.Request.MaxAttempts = 200*time.Millisecond, 1 })
	for _, p := range []string{"/", "/a", "a//", "./", "../x", "a/./b", "a/../b", "a\\b", "a\x00"} {
		if err := b.List(t.Context(), p, func(o backends.ObjectInfo) error {
			t.Errorf("List(%q) listed %q", p, o.Name)
			return nil
		}); err != nil {
			t.Errorf("List(%q): %v", p, err)
		}
		if err := b.ListIncompleteUploads(t.Context(), p, func(u IncompleteUpload) error {
			t.Errorf("ListIncompleteUploads(%q) listed %+v", p, u)
			return nil
		}, nil); err != nil {
			t.Errorf("ListIncompleteUploads(%q): %v", p, err)
		}
	}
	if n := silent.Connections(); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}
