package azure

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/dstlgo/dstl/backends"
)

// tokenFunc is a token credential that fails with the error it returns.
type tokenFunc struct {
	calls atomic.Int32
	err   func() error
}

func (c *tokenFunc) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c.calls.Add(1)
	return azcore.AccessToken{}, c.err()
}

// TestCredentialErrors: only a genuine credential failure (none set up, or
// refused by the identity service with a 4xx answer) is permanent and said
// to be about credentials; a network failure of the identity endpoint is
// retried like any other.
func TestCredentialErrors(t *testing.T) {
	refused := func() error {
		return &azidentity.AuthenticationFailedError{RawResponse: &http.Response{
			StatusCode: http.StatusUnauthorized, Status: "401 Unauthorized",
			Body: io.NopCloser(strings.NewReader(`{"error":"invalid_client"}`)),
		}}
	}
	unavailableIdentity := func() error {
		return &azidentity.AuthenticationFailedError{RawResponse: &http.Response{
			StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
			Body: io.NopCloser(strings.NewReader(`{}`)),
		}}
	}
	for _, tc := range []struct {
		name      string
		err       func() error
		permanent bool
	}{
		{"connection reset", func() error { return syscall.ECONNRESET }, false},
		{"timeout", func() error { return context.DeadlineExceeded }, false},
		{"identity endpoint 503", unavailableIdentity, false},
		{"refused", refused, true},
		{"none set up", func() error { return azidentity.NewCredentialUnavailableError("no source of credentials") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cred := &tokenFunc{err: tc.err}
			cfg := DefaultConfig("c")
			cfg.AccountURL, cfg.Credential = "https://127.0.0.1:1", cred
			cfg.Request = backends.Policy{Timeout: time.Second, MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
			b, err := Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			_, err = b.Get(context.Background(), "x.dstl", 0, -1)
			if err == nil {
				t.Fatal("get succeeded")
			}
			says := strings.Contains(err.Error(), "credentials")
			if got := errors.Is(err, backends.ErrPermanent); got != tc.permanent || says != tc.permanent {
				t.Errorf("err %v: permanent %v, names credentials %v; want %v", err, got, says, tc.permanent)
			}
			want := int32(3)
			if tc.permanent {
				want = 1
			}
			if n := cred.calls.Load(); n != want {
				t.Errorf("%d attempts, want %d", n, want)
			}
		})
	}
}

// TestErrorsHideSAS: the error of a request made with a SAS names the
// endpoint but never the signature, although the SDK's transport error
// quotes the whole request URL.
func TestErrorsHideSAS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // connections are refused
	cfg := DefaultConfig("c")
	cfg.ConnectionString = "BlobEndpoint=http://" + addr + "/acct;SharedAccessSignature=sv=2022-11-02&sig=TOPSECRETSIG"
	cfg.Request = backends.Policy{Timeout: time.Second, MaxAttempts: 1}
	b, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.Get(context.Background(), "x.dstl", 0, -1)
	if err == nil {
		t.Fatal("get succeeded")
	}
	if strings.Contains(err.Error(), "TOPSECRETSIG") || !strings.Contains(err.Error(), addr) {
		t.Errorf("err %q: want the endpoint %s named and no signature", err, addr)
	}
	var ue *url.Error
	if errors.As(err, &ue) && strings.Contains(ue.URL, "TOPSECRETSIG") {
		t.Errorf("url.Error keeps the signature: %s", ue.URL)
	}
}
