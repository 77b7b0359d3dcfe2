package driver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"
)

// SmallBody is the largest request body whose request the response timeout
// of [ResponseTimeout] still bounds: such a body is in the socket's send
// buffer at once, so the wait for the answer is all that is left. Larger
// bodies (an object, a part) are bounded by the request timeout only,
// since the wait for their answer starts while much of the body may still
// be on its way.
const SmallBody = 64 << 10

// ResponseTimeout wraps rt so that a request without a body, or with a
// body of known length up to [SmallBody] (a GET, HEAD, LIST or DELETE, a
// completion of a multipart upload), fails when its answer's headers have
// not arrived within d of its start; the answer's body stays readable
// after. Requests with larger bodies, or of unknown length, are passed on
// as they are. The error says "no answer from <host> within d" and is a
// timeout (its Timeout method reports true, and it matches
// context.DeadlineExceeded). d <= 0 returns rt.
func ResponseTimeout(rt http.RoundTripper, d time.Duration) http.RoundTripper {
	if d <= 0 {
		return rt
	}
	return &responseTimeout{rt: rt, d: d}
}

type responseTimeout struct {
	rt http.RoundTripper
	d  time.Duration
}

// Timer states of one request.
const (
	armed int32 = iota
	fired
	disarmed
)

func (t *responseTimeout) RoundTrip(req *http.Request) (*http.Response, error) {
	if !smallBody(req) {
		return t.rt.RoundTrip(req)
	}
	ctx, cancel := context.WithCancel(req.Context())
	var state atomic.Int32
	timer := time.AfterFunc(t.d, func() {
		if state.CompareAndSwap(armed, fired) {
			cancel()
		}
	})
	resp, err := t.rt.RoundTrip(req.WithContext(ctx))
	if !state.CompareAndSwap(armed, disarmed) {
		// The timer fired: whatever came back came too late.
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		return nil, &NoAnswerError{Host: req.URL.Host, Wait: t.d}
	}
	timer.Stop()
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// smallBody reports whether req has no body or one of known length up to
// SmallBody.
func smallBody(req *http.Request) bool {
	if req.Body == nil || req.Body == http.NoBody {
		return true
	}
	return req.ContentLength > 0 && req.ContentLength <= SmallBody
}

// cancelOnClose ends a request's context once its answer's body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// NoAnswerError is the error of a request whose answer did not arrive
// within the response timeout of [ResponseTimeout].
type NoAnswerError struct {
	Host string        // the endpoint, host:port
	Wait time.Duration // the response timeout
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("no answer from %s within %v", e.Host, e.Wait)
}

// Timeout reports true: the error is a timeout.
func (e *NoAnswerError) Timeout() bool { return true }

// Is matches context.DeadlineExceeded.
func (e *NoAnswerError) Is(target error) bool { return target == context.DeadlineExceeded }

// CountSent wraps rt so that the bytes of every request body that rt reads
// (hands to the connection) are reported, as they are read, to the upload
// attempt that the request's context belongs to ([ReportProgress]).
// The engine then judges an attempt by the bytes it sent rather than by a
// backend's reads of the object's body, which a backend that buffers a
// whole object or part reads long before the bytes move. Requests without
// a body, or outside an upload attempt, are passed on as they are.
func CountSent(rt http.RoundTripper) http.RoundTripper {
	return countSent{rt: rt}
}

type countSent struct{ rt http.RoundTripper }

func (t countSent) RoundTrip(req *http.Request) (*http.Response, error) {
	report := ProgressFrom(req.Context())
	if report == nil || req.Body == nil || req.Body == http.NoBody {
		return t.rt.RoundTrip(req)
	}
	r := req.WithContext(req.Context()) // a shallow copy: rt must not change req
	r.Body = &countingBody{ReadCloser: req.Body, report: report}
	if get := req.GetBody; get != nil {
		r.GetBody = func() (io.ReadCloser, error) {
			b, err := get()
			if err != nil || b == nil || b == http.NoBody {
				return b, err
			}
			return &countingBody{ReadCloser: b, report: report}, nil
		}
	}
	return t.rt.RoundTrip(r)
}

// countingBody reports the bytes read from a request body.
type countingBody struct {
	io.ReadCloser
	report func(n int64)
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.report(int64(n))
	return n, err
}

// IdleConnsPerHost is how many idle connections to one host the
// transports of [NewHTTPTransport] keep for reuse. net/http keeps 2 by
// default, so that every burst of more concurrent requests (a reader
// fetches several ranges at once) closed the connections past the second
// at its end and dialled them anew at the next burst.
const IdleConnsPerHost = 64

// NewHTTPTransport returns a copy of [http.DefaultTransport] that keeps up
// to [IdleConnsPerHost] idle connections per host: the transport of a
// driver that makes its own.
func NewHTTPTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, IdleConnsPerHost)
	return t
}

// Transport wraps rt, the HTTP transport of a driver's SDK client, with
// [ResponseTimeout] (d) and [CountSent]: an answer that never comes fails
// its request after d, and the bytes of every request body are reported
// as upload progress.
func Transport(rt http.RoundTripper, d time.Duration) http.RoundTripper {
	return CountSent(ResponseTimeout(rt, d))
}

// TransportCode classifies an error of the HTTP transport (or the
// network) under a request, for a driver's Classify, and reports whether
// it is one: a certificate the client does not trust (unknown authority,
// wrong host name, expired or otherwise invalid, no system roots), a TLS
// record that is not TLS (https to a plain-HTTP port, which net/http
// reports as [http.ErrSchemeMismatch]) or a host name that does not
// resolve is [Permanent]; a timeout, a cut, reset or refused connection,
// an answer cut short, a temporary DNS failure or any other network error
// is [Transient]. Any failure of the HTTP exchange that the client wraps
// in a *url.Error counts as a network error, so a driver whose transport
// fetches credentials must classify its credential source's refusals
// before it calls TransportCode.
func TransportCode(err error) (Code, bool) {
	var (
		verify    *tls.CertificateVerificationError
		unknown   x509.UnknownAuthorityError
		unknownP  *x509.UnknownAuthorityError
		hostname  x509.HostnameError
		hostnameP *x509.HostnameError
		invalid   x509.CertificateInvalidError
		invalidP  *x509.CertificateInvalidError
		roots     x509.SystemRootsError
		rootsP    *x509.SystemRootsError
		record    tls.RecordHeaderError
		recordP   *tls.RecordHeaderError
		dns       *net.DNSError
		timeout   interface{ Timeout() bool }
		ne        net.Error
	)
	switch {
	case errors.Is(err, http.ErrSchemeMismatch): // https to a plain-HTTP endpoint
		return Permanent, true
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &unknownP),
		errors.As(err, &hostname), errors.As(err, &hostnameP), errors.As(err, &invalid), errors.As(err, &invalidP),
		errors.As(err, &roots), errors.As(err, &rootsP), errors.As(err, &record), errors.As(err, &recordP):
		return Permanent, true
	case errors.As(err, &dns):
		if dns.IsNotFound || !dns.IsTemporary && !dns.IsTimeout {
			return Permanent, true
		}
		return Transient, true
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &timeout) && timeout.Timeout():
		return Transient, true
	case errors.As(err, &ne), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return Transient, true
	}
	return Unknown, false
}
