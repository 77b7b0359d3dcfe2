package dstl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/dstlgo/dstl/dstl/format"
)

// attemptResult is what one upload attempt ended with.
type attemptResult struct {
	n   int
	out *UploadOutput
	err error
}

// uploadWithRetries runs the attempts of one batch upload.
//
// With the fixed policy, an attempt that has not ended after upload.timeout
// is left running and another starts beside it (hedging). After a failed
// attempt the next one starts after upload.next-attempt-delay, whether or
// not an earlier attempt is still running. At most upload.max-attempts
// start. The first attempt to succeed wins: the others are cancelled
// through their context and whatever they stored is discarded. The batch
// fails when no attempt succeeded and none may start any more: after the
// last attempt's error, or once the last attempt has run past its own
// timeout (then the attempts still running are cancelled, so that a batch
// never waits forever on stalled requests). With the none policy there is
// one attempt and no timeout.
//
// settled is closed once every attempt has returned; the caller hands
// failed change sets back to their writers only then. It is nil when the
// storage closed while attempts may still run.
func (s *scheduler) uploadWithRetries(batch []*UploadTask) (out *UploadOutput, settled <-chan struct{}, err error) {
	maxAttempts := s.cfg.UploadMaxAttempts
	timeout := s.cfg.UploadTimeout
	if s.cfg.RetryPolicy == RetryNone || maxAttempts < 1 {
		maxAttempts, timeout = 1, 0
	}
	delays := backoff.WithContext(backoff.NewConstantBackOff(s.cfg.UploadNextAttemptDelay), s.ctx)

	results := make(chan attemptResult, maxAttempts)
	cancels := make([]context.CancelFunc, 0, maxAttempts)
	started, running := 0, 0
	begin := time.Now()

	// hedge fires when the latest attempt has run for the timeout.
	hedge := time.NewTimer(time.Hour)
	hedge.Stop()
	defer hedge.Stop()
	var retry <-chan time.Time // a scheduled attempt after an error
	stop := false              // a permanent error: start no more attempts

	start := func() {
		started++
		running++
		ctx, cancel := context.WithCancel(s.ctx)
		cancels = append(cancels, cancel)
		s.m.uploadRequests.Add(s.ctx, 1)
		go func(n int) {
			out, err := s.uploader.Upload(ctx, batch)
			if err == nil {
				if err = checkOutput(batch, out); err != nil && out != nil {
					for _, obj := range out.Objects {
						s.tracker.discardNow(obj)
					}
					out = nil
				}
			}
			results <- attemptResult{n: n, out: out, err: err}
		}(started)
		if timeout > 0 {
			hedge.Reset(timeout)
		}
	}
	// lastLoser is the error of the latest attempt that losers saw fail;
	// read it only once losers' channel is closed.
	var lastLoser attemptResult
	// losers cancels the attempts still running and discards whatever they
	// stored once they end; the returned channel closes then.
	losers := func() chan struct{} {
		for _, c := range cancels {
			c()
		}
		done := make(chan struct{})
		if running == 0 {
			close(done)
			return done
		}
		n := running
		running = 0
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer close(done)
			for range n {
				r := <-results
				if r.err != nil {
					if r.n > lastLoser.n {
						lastLoser = r
					}
					continue
				}
				for _, obj := range r.out.Objects {
					s.log.Debug("dstl: discarding a losing attempt's object", "object", obj.Name, "attempt", r.n)
					s.tracker.discardNow(obj)
				}
			}
		}()
		return done
	}
	fail := func(cause error) (*UploadOutput, <-chan struct{}, error) {
		s.m.totalAttemptsPerUpload.Record(s.ctx, int64(started))
		return nil, losers(), s.uploadError(len(batch), started, cause)
	}

	var lastErr error
	start()
	for {
		select {
		case r := <-results:
			running--
			if r.err == nil {
				settled := losers()
				s.record(batch, r, started, begin)
				return r.out, settled, nil
			}
			lastErr = r.err
			s.log.Warn("dstl: upload attempt failed", "attempt", r.n, "of", maxAttempts, "tasks", len(batch), "err", r.err)
			if !retryable(r.err) {
				stop = true
				retry = nil
			} else if retry == nil && started < maxAttempts && s.ctx.Err() == nil {
				if d := delays.NextBackOff(); d != backoff.Stop {
					retry = time.After(d)
				}
			}
			if running == 0 && retry == nil {
				return fail(lastErr)
			}
		case <-hedge.C:
			// The latest attempt has run for the timeout (or ended).
			switch {
			case running == 0 || retry != nil:
				// The attempt after the delay restarts the clock.
			case !stop && started < maxAttempts:
				s.log.Debug("dstl: upload attempt timed out; starting another beside it", "attempt", started, "timeout", timeout)
				start()
			default:
				// No attempt may start any more and the last one ran out
				// of time: give up rather than wait forever.
				if lastErr != nil {
					return fail(lastErr)
				}
				// Cancel the attempts and wait for them (the caller would
				// anyway, before handing the change sets back), so that
				// the error says what the last one was going through.
				s.m.totalAttemptsPerUpload.Record(s.ctx, int64(started))
				settled := losers()
				<-settled
				cause := fmt.Errorf("every attempt ran past upload.timeout (%v): %w", timeout, context.DeadlineExceeded)
				if lastLoser.err != nil {
					// %v: the loser's error is mostly the cancellation
					// the engine caused, not the caller's.
					cause = fmt.Errorf("every attempt ran past upload.timeout (%v): %w; attempt %d, cancelled, ended with: %v",
						timeout, context.DeadlineExceeded, lastLoser.n, lastLoser.err)
				}
				return nil, settled, s.uploadError(len(batch), started, cause)
			}
		case <-retry:
			retry = nil
			if !stop && started < maxAttempts {
				start()
			} else if running == 0 {
				return fail(lastErr)
			}
		case <-s.ctx.Done():
			losers()
			return nil, nil, fmt.Errorf("dstl: upload: storage %w", ErrClosed)
		}
	}
}

// record reports a successful upload's metrics.
func (s *scheduler) record(batch []*UploadTask, r attemptResult, started int, begin time.Time) {
	s.m.attemptsPerUpload.Record(s.ctx, int64(r.n))
	s.m.totalAttemptsPerUpload.Record(s.ctx, int64(started))
	s.m.uploadLatency.Record(s.ctx, float64(time.Since(begin))/float64(time.Millisecond))
	var logical, stored int64
	for _, t := range batch {
		logical += t.LogicalSize
	}
	for _, obj := range r.out.Objects {
		stored += obj.Size
	}
	s.m.uploadSize.Record(s.ctx, logical)
	s.m.uploadStoredSize.Record(s.ctx, stored)
}

// uploadError is the error of a failed upload: it names the backend (the
// storage id) and the number of attempts, and wraps the cause.
func (s *scheduler) uploadError(tasks, attempts int, cause error) error {
	return fmt.Errorf("dstl: upload of %d tasks to %q failed after %d attempts: %w", tasks, s.backend, attempts, cause)
}

// retryable reports whether another attempt could succeed where err failed:
// not when the backend denied the request, rejected the name or classified
// the failure as permanent ([ErrPermanent], e.g. a missing bucket; a bare
// [ErrNotFound] on a put may be an expired multipart or resumable session,
// which a new attempt heals),
// nor for a bad configuration, a TLS handshake answered in plain HTTP or a
// certificate the client does not trust.
func retryable(err error) bool {
	switch {
	case errors.Is(err, ErrPermission), errors.Is(err, ErrInvalidName),
		errors.Is(err, ErrPermanent), errors.Is(err, ErrInvalidConfig), errors.Is(err, ErrClosed),
		errors.Is(err, format.ErrInvalidChangeSet), errors.Is(err, errBadOutput):
		return false
	}
	var (
		record    tls.RecordHeaderError
		verify    *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	return !errors.As(err, &record) && !errors.As(err, &verify) && !errors.As(err, &unknownCA) &&
		!errors.As(err, &hostname) && !errors.As(err, &invalid)
}
