// Package request runs one backend request with a timeout per attempt and
// retries with exponential backoff and jitter, for the cloud backends.
package request

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
)

// Policy says how a backend retries one request.
type Policy struct {
	// Timeout bounds each attempt; 0 means none (the caller's context only).
	// A request with a body gets more: see [Policy.ForBody].
	Timeout time.Duration
	// MaxAttempts is the number of attempts, the first included (at least 1).
	MaxAttempts int
	// InitialBackoff is the wait after the first failed attempt; it doubles
	// (with ±50 % jitter) up to MaxBackoff.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait between attempts.
	MaxBackoff time.Duration
	// ResponseTimeout bounds the wait for the answer's headers of a
	// request without a body or with a small one, from its start, when a
	// backend wraps the HTTP transport it makes with [ResponseTimeout];
	// uploads of larger bodies are bounded by Timeout only. 0 means none
	// but Timeout. An endpoint that takes connections and never answers
	// fails such an attempt after it.
	ResponseTimeout time.Duration
	// TimeoutAttempts bounds the attempts that time out (no answer within
	// Timeout or ResponseTimeout, or any other timeout of the transport):
	// once so many did, Do gives up although attempts remain, since an
	// endpoint that did not answer twice rarely answers the third time.
	// 0 means MaxAttempts.
	TimeoutAttempts int
}

// Defaults of the deadlines of every request. With them, a request to an
// endpoint that takes connections but never answers fails after about
// DefaultTimeoutAttempts × DefaultResponseTimeout (20 s).
const (
	// DefaultResponseTimeout is the default of Policy.ResponseTimeout.
	DefaultResponseTimeout = 10 * time.Second
	// DefaultTimeoutAttempts is the default of Policy.TimeoutAttempts.
	DefaultTimeoutAttempts = 2
)

// MinThroughput is the slowest rate, in bytes per second, at which a
// request's body is taken to be on its way: a request with a body of n
// bytes may take its policy's Timeout plus n at this rate (see
// [Policy.ForBody]), as the engine allows an upload attempt
// ([driver.MinThroughput]). A backend retries a single request; the
// engine never does, and starts a new attempt (a new object) instead.
const MinThroughput = driver.MinThroughput

// ForBody returns the policy of a request with a body of size bytes: its
// Timeout grows by the body's size at [MinThroughput], so that a slow but
// progressing upload of a large object or part is not cut and sent again
// (with the default 30 s, a 16 MiB part may take 94 s). A Timeout of 0
// stays 0 (no bound), as does one that would pass any clock.
func (p Policy) ForBody(size int64) Policy {
	if p.Timeout <= 0 || size <= 0 {
		return p
	}
	const rate = MinThroughput
	secs := size / rate
	if secs >= int64((math.MaxInt64-p.Timeout)/time.Second)-1 {
		p.Timeout = 0
		return p
	}
	p.Timeout += time.Duration(secs)*time.Second + time.Duration(size%rate)*time.Second/rate
	return p
}

// DefaultPolicy is what the backends use unless configured otherwise.
var DefaultPolicy = Policy{
	Timeout: 30 * time.Second, MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second,
	ResponseTimeout: DefaultResponseTimeout, TimeoutAttempts: DefaultTimeoutAttempts,
}

// Validate checks the policy; field names the option in errors.
func (p Policy) Validate() error {
	switch {
	case p.Timeout < 0:
		return fmt.Errorf("request timeout %v is negative", p.Timeout)
	case p.MaxAttempts < 1:
		return fmt.Errorf("max attempts %d: want at least 1", p.MaxAttempts)
	case p.InitialBackoff < 0 || p.MaxBackoff < p.InitialBackoff:
		return fmt.Errorf("backoff %v..%v: want 0 <= initial <= max", p.InitialBackoff, p.MaxBackoff)
	case p.ResponseTimeout < 0:
		return fmt.Errorf("response timeout %v is negative", p.ResponseTimeout)
	case p.TimeoutAttempts < 0:
		return fmt.Errorf("timeout attempts %d is negative", p.TimeoutAttempts)
	}
	return nil
}

// Do runs fn until it succeeds, returns an error retryable does not accept,
// the attempts run out, p.TimeoutAttempts attempts timed out, or ctx ends.
// Each attempt gets its own context, bounded by the policy's timeout. The
// error of the last attempt is returned; an attempt that timed out while
// ctx is alive counts as retryable, and its error says so (and matches
// context.DeadlineExceeded), whatever the transport made of the
// cancellation.
func Do(ctx context.Context, p Policy, retryable func(error) bool, fn func(ctx context.Context) error) error {
	timeouts := 0
	maxTimeouts := p.TimeoutAttempts
	if maxTimeouts <= 0 {
		maxTimeouts = max(p.MaxAttempts, 1)
	}
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(max(p.InitialBackoff, time.Millisecond)),
		backoff.WithMaxInterval(max(p.MaxBackoff, time.Millisecond)),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMaxElapsedTime(0),
	)
	var bo backoff.BackOff = backoff.WithContext(backoff.WithMaxRetries(b, uint64(max(p.MaxAttempts, 1)-1)), ctx)
	return backoff.Retry(func() error {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if p.Timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, p.Timeout)
		}
		err := fn(actx)
		attemptTimedOut := err != nil && actx.Err() != nil && ctx.Err() == nil
		cancel()
		if attemptTimedOut && !errors.Is(err, context.DeadlineExceeded) {
			// The transport may report the attempt's end as a cancellation.
			if err.Error() == context.Canceled.Error() {
				err = fmt.Errorf("no answer within %v: %w", p.Timeout, context.DeadlineExceeded)
			} else {
				err = fmt.Errorf("no answer within %v (%w): %w", p.Timeout, context.DeadlineExceeded, err)
			}
		}
		timedOut := attemptTimedOut || err != nil && ctx.Err() == nil && IsTimeout(err)
		if timedOut {
			timeouts++
		}
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return backoff.Permanent(err)
		case timedOut && timeouts >= maxTimeouts:
			return backoff.Permanent(fmt.Errorf("giving up after %d attempts that timed out: %w", timeouts, err))
		case timedOut, retryable(err):
			return err
		default:
			return backoff.Permanent(err)
		}
	}, bo)
}

// IsTimeout reports whether err is a timeout: a context's deadline, or an
// error of the network or the HTTP transport that says it is one (such as
// the transport's wait for the answer's headers).
func IsTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &t) && t.Timeout()
}

// IsContextError reports whether err is a context's cancellation or deadline.
func IsContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// PermanentTransportError reports whether err is a transport error that
// another attempt cannot heal: a certificate the client does not trust
// (unknown authority, wrong host name, expired or otherwise invalid, no
// system roots), a TLS record that is not TLS (e.g. https to a plain-HTTP
// port, which net/http reports as [http.ErrSchemeMismatch]), or a host
// name that does not resolve and is not a temporary DNS failure.
// Connection resets, refusals and timeouts are not among them.
func PermanentTransportError(err error) bool {
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
	)
	switch {
	case errors.Is(err, http.ErrSchemeMismatch): // https to a plain-HTTP endpoint
		return true
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &unknownP),
		errors.As(err, &hostname), errors.As(err, &hostnameP), errors.As(err, &invalid), errors.As(err, &invalidP),
		errors.As(err, &roots), errors.As(err, &rootsP), errors.As(err, &record), errors.As(err, &recordP):
		return true
	case errors.As(err, &dns):
		return dns.IsNotFound || !dns.IsTemporary && !dns.IsTimeout
	}
	return false
}

// Permanent marks err as a failure that another attempt cannot heal: it
// matches [backends.ErrPermanent] (and still err) with errors.Is, and reads as
// err. A nil err stays nil.
func Permanent(err error) error {
	if err == nil || errors.Is(err, backends.ErrPermanent) {
		return err
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() []error { return []error{e.err, backends.ErrPermanent} }
