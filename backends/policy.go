package backends

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/dstlgo/dstl/backends/driver"
)

// Policy says how the portable layer times and retries each request of a
// backend. The backends' Configs carry it as their Request field, set by
// the URL parameters request_timeout (called timeout by gcs and azure),
// max_attempts, response_timeout, timeout_attempts and unanswered_hold.
type Policy struct {
	// Timeout bounds each attempt of a request; 0 means none (the
	// caller's context only). A request with a body gets more: see
	// [Policy.ForBody].
	Timeout time.Duration
	// MaxAttempts is the number of attempts, the first included (at least 1).
	MaxAttempts int
	// InitialBackoff is the wait after the first failed attempt; it doubles
	// (with ±50 % jitter) up to MaxBackoff.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait between attempts.
	MaxBackoff time.Duration
	// ResponseTimeout bounds the wait for the answer's headers of a
	// request without a body or with a small one, from its start; a driver
	// applies it in its HTTP transport ([driver.Transport]). Uploads of
	// larger bodies are bounded by Timeout only. 0 means none but Timeout.
	ResponseTimeout time.Duration
	// TimeoutAttempts bounds the attempts that time out (no answer within
	// Timeout or ResponseTimeout, or any other timeout of the transport):
	// once so many did, the request gives up although attempts remain,
	// since an endpoint that did not answer twice rarely answers the third
	// time. 0 means MaxAttempts.
	TimeoutAttempts int
	// UnansweredHold is how long, after a Get or List of the bucket went
	// unanswered (its attempts timed out while the caller's context was
	// alive), the bucket fails its further Gets and Lists at once, without
	// a request, with an error that wraps [ErrUnavailable] and quotes the
	// unanswered call's error. So a restore of many objects from an
	// endpoint that never answers fails within the deadlines of one read.
	// After the hold one call (the probe) goes through while the others
	// still fail at once; any answer to a Get or List, an error answer
	// such as a missing object included, ends the hold, and the probe's
	// timeout starts it again. Puts and Deletes are not held: they have
	// their retries of their own; one that succeeds ends the hold, since
	// the store answers. Reads of a body that Get returned are not held
	// either. 0 means no hold; [DefaultPolicy] has [DefaultUnansweredHold].
	UnansweredHold time.Duration
}

// Defaults of the deadlines of every request. With them, a request to an
// endpoint that takes connections but never answers fails after about
// DefaultTimeoutAttempts × DefaultResponseTimeout (20 s).
const (
	// DefaultResponseTimeout is the default of Policy.ResponseTimeout.
	DefaultResponseTimeout = 10 * time.Second
	// DefaultTimeoutAttempts is the default of Policy.TimeoutAttempts.
	DefaultTimeoutAttempts = 2
	// DefaultUnansweredHold is the default of Policy.UnansweredHold.
	DefaultUnansweredHold = 5 * time.Second
)

// DefaultPolicy is what the backends use unless configured otherwise.
var DefaultPolicy = Policy{
	Timeout: 30 * time.Second, MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second,
	ResponseTimeout: DefaultResponseTimeout, TimeoutAttempts: DefaultTimeoutAttempts,
	UnansweredHold: DefaultUnansweredHold,
}

// NoRetries is the policy of a backend whose requests are not worth
// retrying, such as local files: one attempt, no timeout, no hold after
// an unanswered call.
var NoRetries = Policy{MaxAttempts: 1}

// Validate checks the policy.
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
	case p.UnansweredHold < 0:
		return fmt.Errorf("unanswered hold %v is negative", p.UnansweredHold)
	}
	return nil
}

// ForBody returns the policy of a request with a body of size bytes: its
// Timeout grows by the body's size at [driver.MinThroughput], so that a
// slow but progressing upload of a large object or part is not cut and
// sent again (with the default 30 s, a 16 MiB part may take 94 s). A
// Timeout of 0 stays 0 (no bound), as does one that would pass any clock.
func (p Policy) ForBody(size int64) Policy {
	if p.Timeout <= 0 || size <= 0 {
		return p
	}
	const rate = driver.MinThroughput
	secs := size / rate
	if secs >= int64((math.MaxInt64-p.Timeout)/time.Second)-1 {
		p.Timeout = 0
		return p
	}
	p.Timeout += time.Duration(secs)*time.Second + time.Duration(size%rate)*time.Second/rate
	return p
}

// runner is the [driver.Runner] of one operation of a Bucket.
type runner struct {
	b    *Bucket
	op   string
	body *driver.Body // of a Put, else nil
}

// Do runs fn until it succeeds, fails with an error that is not transient,
// the attempts run out, the policy's TimeoutAttempts attempts timed out, or
// ctx ends. Each attempt gets its own context, bounded by the policy's
// timeout (grown for bodySize bytes). The error of the last attempt is
// returned; an attempt that timed out while ctx is alive counts as
// transient, and its error says so (and matches context.DeadlineExceeded),
// whatever the transport made of the cancellation. A failure of the Put's
// body, or an error of List's callback, is never retried.
func (r *runner) Do(ctx context.Context, bodySize int64, fn func(ctx context.Context) error) error {
	p := r.b.policy.ForBody(bodySize)
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
	bo := backoff.WithContext(backoff.WithMaxRetries(b, uint64(max(p.MaxAttempts, 1)-1)), ctx)
	attempt := 0
	return backoff.Retry(func() error {
		if attempt++; attempt > 1 {
			r.b.metrics.retry(ctx, r.op)
		}
		var bodyBefore error // a body that failed before the request did not fail it
		if r.body != nil {
			bodyBefore = r.body.Err()
		}
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
		if err == nil {
			return nil
		}
		if r.body != nil && bodyBefore == nil {
			if berr := r.body.Err(); berr != nil {
				return backoff.Permanent(&bodyError{berr})
			}
		}
		if cb := (*callbackError)(nil); errors.As(err, &cb) {
			return backoff.Permanent(err)
		}
		timedOut := attemptTimedOut || ctx.Err() == nil && isTimeout(err)
		if timedOut {
			timeouts++
		}
		switch {
		case ctx.Err() != nil:
			return backoff.Permanent(err)
		case timedOut && timeouts >= maxTimeouts:
			return backoff.Permanent(fmt.Errorf("giving up after %d attempts that timed out: %w", timeouts, err))
		case timedOut, r.b.d.Classify(err) == driver.Transient:
			return err
		default:
			return backoff.Permanent(err)
		}
	}, bo)
}

// isTimeout reports whether err is a timeout: a context's deadline, or an
// error of the network or the HTTP transport that says it is one.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &t) && t.Timeout()
}

// isContextError reports whether err is a context's cancellation or deadline.
func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// bodyError is a failure of the caller's body: not retried, and reported
// as it is.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// callbackError is an error of List's callback, which stops the listing:
// not retried, were the callback called within a request, and returned
// as it is by List.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }
func (e *callbackError) Unwrap() error { return e.err }

// permanent marks err as a failure that another attempt cannot heal: it
// matches [ErrPermanent] (and still err) with errors.Is, and reads as err.
func permanent(err error) error {
	if err == nil || errors.Is(err, ErrPermanent) {
		return err
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() []error { return []error{e.err, ErrPermanent} }
