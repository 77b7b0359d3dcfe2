package azure

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/internal/faultproxy"
)

// TestSilentEndpoint: against an endpoint that takes connections and
// never answers, the first call (each, without the hold after an
// unanswered call) fails within TimeoutAttempts × the response
// timeout (plus backoff), naming the endpoint, as a timeout (not as
// "context canceled").
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
			cfg := DefaultConfig("ctr")
			cfg.AccountURL = silent.URL() + "/acct"
			cfg.Account = "acct"
			cfg.AccountKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 64))
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

// TestMissingCredentials: without credentials, a call fails at once (no
// retry) with an error that says credentials are missing and how to give
// some.
func TestMissingCredentials(t *testing.T) {
	for _, k := range []string{"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
		"AZURE_USERNAME", "AZURE_FEDERATED_TOKEN_FILE", "IDENTITY_ENDPOINT", "MSI_ENDPOINT", EnvConnectionString, EnvKey, EnvAccount} {
		t.Setenv(k, "")
	}
	t.Setenv("PATH", t.TempDir()) // no az, azd or pwsh to ask
	t.Setenv("AZURE_TOKEN_CREDENTIALS", "dev")
	cfg := DefaultConfig("ctr")
	cfg.AccountURL = "https://127.0.0.1:1/acct"
	cfg.Request.MaxAttempts = 5
	b, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	_, err = b.Get(context.Background(), "x.dstl", 0, -1)
	if err == nil {
		t.Fatal("get succeeded")
	}
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if !strings.Contains(err.Error(), "missing or refused Azure credentials") || !strings.Contains(err.Error(), EnvConnectionString) {
		t.Errorf("error %q does not say that credentials are missing", err)
	}
	if code := b.d.Classify(err); code != driver.Permanent || !errors.Is(err, backends.ErrPermanent) {
		t.Errorf("error %v is classified %v, or does not match ErrPermanent", err, code)
	}
}

// TestMissingContainer: a call on a container that does not exist says so,
// naming it, rather than that the object is missing.
func TestMissingContainer(t *testing.T) {
	cfg := testConfig(t, "")
	cfg.Container = "no-such-container-" + strings.ToLower(cfg.Prefix[5:13])
	b := open(t, cfg)
	_, err := b.Get(t.Context(), "x.dstl", 0, -1)
	if want := `container "` + cfg.Container + `" does not exist`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to say %s", err, want)
	}
	if !errors.Is(err, backends.ErrNotFound) || !errors.Is(err, backends.ErrPermanent) {
		t.Errorf("err %v does not match ErrNotFound and ErrPermanent", err)
	}
}

// TestMissingAccount: a call on an account that the service does not know
// (404 ResourceNotFound) fails with ErrNotFound and ErrPermanent, a Delete
// too: the object is not merely missing, its storage is.
func TestMissingAccount(t *testing.T) {
	cfg := testConfig(t, "")
	cfg.AccountURL = strings.TrimSuffix(cfg.AccountURL, "/"+cfg.Account) + "/nosuchaccount"
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	var requests atomic.Int32
	cfg.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		requests.Add(1)
		return tr.RoundTrip(r)
	})}
	b := open(t, cfg)
	_, err := b.Get(t.Context(), "x.dstl", 0, -1)
	if !errors.Is(err, backends.ErrNotFound) || !errors.Is(err, backends.ErrPermanent) {
		t.Errorf("Get: %v, want ErrNotFound and ErrPermanent", err)
	}
	requests.Store(0)
	err = b.Delete(t.Context(), "x.dstl")
	if !errors.Is(err, backends.ErrNotFound) || !errors.Is(err, backends.ErrPermanent) {
		t.Errorf("Delete: %v, want ErrNotFound and ErrPermanent", err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("Delete sent %d requests, want 1 (no retry)", n)
	}
}
