// Package transportcase holds the transport errors every driver must
// classify alike, for the drivers' tests.
package transportcase

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"syscall"
)

// TransportCase is a transport error wrapped the way an HTTP client returns
// it, and whether [driver.TransportCode] calls it [driver.Permanent], one that another
// attempt cannot heal. The backends' tests check their retry decisions
// against [TransportCases].
type TransportCase struct {
	Name      string
	Err       error
	Permanent bool
}

// TransportCases returns the transport errors every backend must classify
// alike: the permanent ones are never retried, the others always are.
func TransportCases() []TransportCase {
	wrap := func(err error) error { return &url.Error{Op: "Get", URL: "https://x/", Err: err} }
	return []TransportCase{
		{"unknown authority", wrap(x509.UnknownAuthorityError{}), true},
		{"wrong host name", wrap(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "x"}), true},
		{"expired", wrap(x509.CertificateInvalidError{Reason: x509.Expired}), true},
		{"verification", wrap(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), true},
		{"not TLS", wrap(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), true},
		{"https to a plain-HTTP endpoint", wrap(http.ErrSchemeMismatch), true},
		{"no such host", wrap(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}}), true},
		{"DNS error", wrap(&net.DNSError{Err: "server misbehaving", Name: "x"}), true},
		{"temporary DNS error", wrap(&net.DNSError{Err: "try again", Name: "x", IsTemporary: true}), false},
		{"DNS timeout", wrap(&net.DNSError{Err: "i/o timeout", Name: "x", IsTimeout: true}), false},
		{"reset", wrap(&net.OpError{Op: "read", Err: fmt.Errorf("read: %w", syscall.ECONNRESET)}), false},
		{"refused", wrap(&net.OpError{Op: "dial", Err: fmt.Errorf("connect: %w", syscall.ECONNREFUSED)}), false},
	}
}
