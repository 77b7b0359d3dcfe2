package azure

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
)

// permanentTransportError reports whether err is a transport error that
// another attempt cannot heal: a certificate the client does not trust
// (unknown authority, wrong host name, expired or otherwise invalid), a
// TLS record that is not TLS (e.g. https to a plain-HTTP port), or a host
// name that does not resolve and is not a temporary DNS failure.
// Connection resets, refusals and timeouts are not among them.
func permanentTransportError(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		return true
	}
	if _, ok := errors.AsType[*x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[*x509.HostnameError](err); ok {
		return true
	}
	if _, ok := errors.AsType[*x509.CertificateInvalidError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return true
	}
	if _, ok := errors.AsType[*tls.RecordHeaderError](err); ok {
		return true
	}
	if e, ok := errors.AsType[*net.DNSError](err); ok {
		return e.IsNotFound || !e.IsTemporary && !e.IsTimeout
	}
	return false
}
