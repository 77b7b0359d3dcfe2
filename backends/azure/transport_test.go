package azure

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"syscall"
	"testing"
)

func TestRetryableTransport(t *testing.T) {
	urlErr := func(err error) error { return &url.Error{Op: "Get", URL: "https://x/", Err: err} }
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"unknown authority", urlErr(x509.UnknownAuthorityError{}), false},
		{"wrong host name", urlErr(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "x"}), false},
		{"expired", urlErr(x509.CertificateInvalidError{Reason: x509.Expired}), false},
		{"verification", urlErr(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), false},
		{"not TLS", urlErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), false},
		{"no such host", urlErr(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}}), false},
		{"DNS error", urlErr(&net.DNSError{Err: "server misbehaving", Name: "x"}), false},
		{"temporary DNS error", urlErr(&net.DNSError{Err: "try again", Name: "x", IsTemporary: true}), true},
		{"DNS timeout", urlErr(&net.DNSError{Err: "i/o timeout", Name: "x", IsTimeout: true}), true},
		{"reset", urlErr(&net.OpError{Op: "read", Err: fmt.Errorf("read: %w", syscall.ECONNRESET)}), true},
		{"refused", urlErr(&net.OpError{Op: "dial", Err: fmt.Errorf("connect: %w", syscall.ECONNREFUSED)}), true},
		{"unexpected EOF", urlErr(io.ErrUnexpectedEOF), true},
		{"other", errors.New("something else"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryable(tt.err); got != tt.want {
				t.Errorf("retryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestGetHugeLength: a length past any possible end reads to the end,
// however large.
func TestGetHugeLength(t *testing.T) {
	b := harness(t)
	defer b.Close()
	data := []byte("0123456789")
	if err := b.Put(t.Context(), "huge", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put: %v", err)
	}
	for _, tt := range []struct{ offset, length int64 }{
		{3, math.MaxInt64}, {3, math.MaxInt64 - 3}, {3, math.MaxInt64 - 2}, {0, math.MaxInt64}, {3, 1 << 62},
	} {
		t.Run(fmt.Sprint(tt.offset, tt.length), func(t *testing.T) {
			r, err := b.Get(t.Context(), "huge", tt.offset, tt.length)
			if err != nil {
				t.Fatalf("Get(%d, %d): %v", tt.offset, tt.length, err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil || !bytes.Equal(got, data[tt.offset:]) {
				t.Fatalf("Get(%d, %d) = %q, %v; want %q", tt.offset, tt.length, got, err, data[tt.offset:])
			}
		})
	}
}
