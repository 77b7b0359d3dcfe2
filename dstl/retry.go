package dstl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
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
// is left running and another starts beside it (hedging); after a failed
// attempt, and when no other attempt is still running, the next one starts
// after upload.next-attempt-delay. At most upload.max-attempts start. The
// first attempt to succeed wins: the others are cancelled through their
// context and whatever they stored is discarded. The batch fails only when
// the last attempt has ended without success. With the none policy there is
// one attempt and no timeout.
//
// settled is closed once every attempt has ended; it is nil when the
// storage closed while attempts may still run.
func (s *scheduler) uploadWithRetries(batch []*UploadTask) (out *UploadOutput, settled <-chan struct{}, err error) {
	maxAttempts := s.cfg.UploadMaxAttempts
	if s.cfg.RetryPolicy == RetryNone || maxAttempts < 1 {
		maxAttempts = 1
	}
	delays := backoff.WithContext(backoff.NewConstantBackOff(s.cfg.UploadNextAttemptDelay), s.ctx)

	results := make(chan attemptResult, maxAttempts)
	cancels := make([]context.CancelFunc, 0, maxAttempts)
	started, running := 0, 0
	begin := time.Now()

	hedge := time.NewTimer(time.Hour)
	hedge.Stop()
	defer hedge.Stop()
	var retry <-chan time.Time

	start := func() {
		started++
		running++
		ctx, cancel := context.WithCancel(s.ctx)
		cancels = append(cancels, cancel)
		s.m.uploadRequests.Add(s.ctx, 1)
		go func(n int) {
			out, err := s.uploader.Upload(ctx, batch)
			if err == nil {
				err = checkOutput(batch, out)
				if err != nil && out != nil {
					for _, obj := range out.Objects {
						s.tracker.discardNow(obj)
					}
					out = nil
				}
			}
			results <- attemptResult{n: n, out: out, err: err}
		}(started)
		if s.cfg.RetryPolicy != RetryNone && started < maxAttempts && s.cfg.UploadTimeout > 0 {
			hedge.Reset(s.cfg.UploadTimeout)
		}
	}
	// losers waits for the attempts still running after a winner (or after
	// the storage closed) and discards whatever they stored.
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
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer close(done)
			for range n {
				if r := <-results; r.err == nil {
					for _, obj := range r.out.Objects {
						s.log.Debug("dstl: discarding a losing attempt's object", "object", obj.Name, "attempt", r.n)
						s.tracker.discardNow(obj)
					}
				}
			}
		}()
		return done
	}

	var lastErr error
	start()
	for {
		select {
		case r := <-results:
			running--
			if r.err == nil {
				settled := losers()
				s.m.attemptsPerUpload.Record(s.ctx, int64(r.n))
				s.m.totalAttemptsPerUpload.Record(s.ctx, int64(started))
				s.m.uploadLatency.Record(s.ctx, float64(time.Since(begin))/float64(time.Millisecond))
				var logical, stored int64
				for _, t := range batch {
					logical += t.Size
				}
				for _, obj := range r.out.Objects {
					stored += obj.Size
				}
				s.m.uploadSize.Record(s.ctx, logical)
				s.m.uploadStoredSize.Record(s.ctx, stored)
				return r.out, settled, nil
			}
			lastErr = r.err
			s.log.Warn("dstl: upload attempt failed", "attempt", r.n, "of", maxAttempts, "tasks", len(batch), "err", r.err)
			if running > 0 || retry != nil {
				continue // a running attempt or a scheduled retry may still succeed
			}
			if started < maxAttempts && retryable(r.err) && s.ctx.Err() == nil {
				hedge.Stop()
				if d := delays.NextBackOff(); d != backoff.Stop {
					retry = time.After(d)
					continue
				}
			}
			s.m.totalAttemptsPerUpload.Record(s.ctx, int64(started))
			return nil, losers(), fmt.Errorf("dstl: upload of %d tasks failed after %d attempts: %w", len(batch), started, lastErr)
		case <-hedge.C:
			if started < maxAttempts {
				s.log.Debug("dstl: upload attempt timed out; starting another beside it", "attempt", started, "timeout", s.cfg.UploadTimeout)
				start()
			}
		case <-retry:
			retry = nil
			start()
		case <-s.ctx.Done():
			losers()
			return nil, nil, fmt.Errorf("dstl: upload: storage %w", ErrClosed)
		}
	}
}

// retryable reports whether another attempt could succeed where err failed.
func retryable(err error) bool {
	switch {
	case errors.Is(err, ErrPermission), errors.Is(err, ErrInvalidName), errors.Is(err, ErrClosed):
		return false
	}
	return true
}
