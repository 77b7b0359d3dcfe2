package dstl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/uploader"
)

// attemptResult is what one upload attempt ended with.
type attemptResult struct {
	n   int
	out *uploader.Output
	err error
}

// uploadOutcome is how the upload of one batch ended: out on success,
// err otherwise. settled is closed once every attempt has returned; it is
// nil when the storage closed while attempts may still run.
type uploadOutcome struct {
	out     *uploader.Output
	settled <-chan struct{}
	err     error
}

// uploadRun is the state of one batch upload's attempts. Only the goroutine
// running uploadWithRetries touches it, except lastLoser (see losers).
type uploadRun struct {
	s           *scheduler
	batch       []*uploadTask
	prepared    uploader.Prepared // the batch encoded ahead, or nil
	maxAttempts int
	timeout     time.Duration // 0: no hedging and no give-up on time
	delays      backoff.BackOff
	begin       time.Time

	results          chan attemptResult
	cancels          []context.CancelFunc
	progress         []*progress // of attempt n at n-1
	ended            []bool      // whether attempt n has returned, at n-1
	started, running int
	hedge            *time.Timer      // fires at the next deadline of a running attempt (see watch)
	retry            <-chan time.Time // a scheduled attempt after an error
	stop             bool             // a permanent error: start no more attempts
	lastErr          error            // the latest attempt error seen
	// lastLoser is the error of the latest attempt that losers saw fail;
	// read it only once losers' channel is closed.
	lastLoser attemptResult
}

// uploadWithRetries runs the attempts of one batch upload.
//
// The engine never retries a request: an attempt is one call of the
// uploader (one backend Put), whose backend retries its requests inside
// it. An attempt's progress is the bytes it sent, as the backend reports
// them ([driver.ReportProgress]; the HTTP transport of the cloud backends does),
// or, for a backend that reports nothing, its reads of new bytes of the
// object's body. An attempt counts as stalled (see [progress.stalledAt])
// when it reported no bytes sent for upload.timeout, or when, past
// upload.timeout from its start, it moved less than [minUploadThroughput]
// for the time beyond.
//
// With the fixed policy, when the latest attempt has stalled, it is left
// running and another starts beside it (hedging). After a failed attempt
// the next one starts after upload.next-attempt-delay, whether or not an
// earlier attempt is still running. At most upload.max-attempts start.
// The first attempt to succeed wins: the others are cancelled through
// their context and whatever they stored is discarded. The batch fails
// when no attempt succeeded and none may start any more: after the last
// attempt's error, or once every attempt still running has stalled (then
// they are cancelled). Its error is the last attempt error seen, or says
// how the last running attempt stalled. With the none policy there is one
// attempt and no timeout.
//
// settled is closed once every attempt has returned; the caller hands
// failed change sets back to their writers only then. It is nil when the
// storage closed while attempts may still run.
func (s *scheduler) uploadWithRetries(batch []*uploadTask, prepared uploader.Prepared) (out *uploader.Output, settled <-chan struct{}, err error) {
	r := s.newUploadRun(batch)
	r.prepared = prepared
	defer r.hedge.Stop()
	r.start()
	for {
		var end *uploadOutcome
		select {
		case a := <-r.results:
			end = r.onResult(a)
		case <-r.hedge.C:
			end = r.onHedge()
		case <-r.retry:
			end = r.onRetry()
		case <-s.ctx.Done():
			r.losers()
			end = &uploadOutcome{err: fmt.Errorf("dstl: upload: storage %w", ErrClosed)}
		}
		if end != nil {
			return end.out, end.settled, end.err
		}
	}
}

// newUploadRun applies the retry policy to the batch's upload.
func (s *scheduler) newUploadRun(batch []*uploadTask) *uploadRun {
	maxAttempts, timeout := s.cfg.UploadMaxAttempts, s.cfg.UploadTimeout
	if s.cfg.RetryPolicy == RetryNone || maxAttempts < 1 {
		maxAttempts, timeout = 1, 0
	}
	hedge := time.NewTimer(time.Hour)
	hedge.Stop()
	return &uploadRun{
		s: s, batch: batch, maxAttempts: maxAttempts, timeout: timeout,
		delays:   backoff.WithContext(backoff.NewConstantBackOff(max(s.cfg.UploadNextAttemptDelay, 0)), s.ctx),
		begin:    time.Now(),
		results:  make(chan attemptResult, maxAttempts),
		cancels:  make([]context.CancelFunc, 0, maxAttempts),
		progress: make([]*progress, 0, maxAttempts),
		ended:    make([]bool, 0, maxAttempts),
		hedge:    hedge,
	}
}

// start starts the next attempt and re-arms the timer.
func (r *uploadRun) start() {
	r.started++
	r.running++
	ctx, cancel := context.WithCancel(r.s.ctx)
	p := newProgress(time.Now())
	r.cancels = append(r.cancels, cancel)
	r.progress = append(r.progress, p)
	r.ended = append(r.ended, false)
	r.s.m.uploadRequests.Add(r.s.ctx, 1)
	actx, n := withProgress(ctx, p), r.started
	r.s.runAttempt(func() { r.attempt(actx, n) })
	r.watch(time.Now())
}

// mayStart reports whether another attempt may start.
func (r *uploadRun) mayStart() bool { return !r.stop && r.started < r.maxAttempts }

// hedgeAt is when the latest attempt counts as stalled (see
// [progress.stalledAt]) and is due a hedge; ok is false when it has ended.
func (r *uploadRun) hedgeAt() (at time.Time, ok bool) {
	n := r.started
	if n == 0 || r.ended[n-1] {
		return time.Time{}, false
	}
	at, _ = r.progress[n-1].stalledAt(r.timeout)
	return at, true
}

// stalledAt is when running attempt n (from 1) counts as stalled, and why.
func (r *uploadRun) stalledAt(n int) (time.Time, string) {
	return r.progress[n-1].stalledAt(r.timeout)
}

// watch arms the timer for the next deadline after now: the latest
// attempt's hedge while another may start, else the first stall of a
// running attempt. Progress only moves deadlines later, so the timer
// firing early just re-arms it.
func (r *uploadRun) watch(now time.Time) {
	r.hedge.Stop()
	if r.timeout <= 0 || r.running == 0 || r.retry != nil {
		// The attempt after the delay re-arms the timer.
		return
	}
	var next time.Time
	if r.mayStart() {
		next, _ = r.hedgeAt()
	} else {
		for n := 1; n <= r.started; n++ {
			if at, _ := r.stalledAt(n); !r.ended[n-1] && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
	}
	if !next.IsZero() {
		r.hedge.Reset(max(next.Sub(now), time.Millisecond))
	}
}

// attempt makes attempt n and reports its result. An output that breaks
// the uploader's contract fails the attempt, and its objects are discarded.
func (r *uploadRun) attempt(ctx context.Context, n int) {
	var out *uploader.Output
	var err error
	if r.prepared != nil {
		out, err = r.prepared.Upload(ctx)
	} else {
		out, err = r.s.up.Upload(ctx, uploaderTasks(r.batch))
	}
	if err == nil {
		if err = checkOutput(r.batch, out); err != nil && out != nil {
			for _, obj := range out.Objects {
				r.s.tracker.discardNow(obj)
			}
			out = nil
		}
	}
	r.results <- attemptResult{n: n, out: out, err: err}
}

// onResult handles an attempt's end: a success wins; an error schedules the
// next attempt after the delay unless it is permanent or none may start,
// and fails the batch when nothing is left running or scheduled.
func (r *uploadRun) onResult(a attemptResult) *uploadOutcome {
	r.running--
	r.ended[a.n-1] = true
	defer r.watch(time.Now())
	if a.err == nil {
		settled := r.losers()
		r.s.record(r.batch, a, r.started, r.begin)
		return &uploadOutcome{out: a.out, settled: settled}
	}
	r.lastErr = a.err
	r.s.log.Warn("dstl: upload attempt failed", "attempt", a.n, "of", r.maxAttempts, "tasks", len(r.batch), "err", a.err)
	if !retryable(a.err) {
		r.stop = true
		r.retry = nil
	} else if r.retry == nil && r.started < r.maxAttempts && r.s.ctx.Err() == nil {
		if d := r.delays.NextBackOff(); d != backoff.Stop {
			r.retry = time.After(d)
		}
	}
	if r.running == 0 && r.retry == nil {
		return r.fail(r.lastErr)
	}
	return nil
}

// onHedge handles the timer: when the latest attempt has made no progress
// for the timeout, another starts beside it if one may; when none may and
// every running attempt has stalled, the batch gives up with the last
// error seen.
func (r *uploadRun) onHedge() *uploadOutcome {
	now := time.Now()
	if r.running == 0 || r.retry != nil {
		// The attempt after the delay re-arms the timer.
		return nil
	}
	if r.mayStart() {
		if at, ok := r.hedgeAt(); ok && !now.Before(at) {
			r.s.log.Debug("dstl: upload attempt made no progress; starting another beside it", "attempt", r.started, "timeout", r.timeout)
			r.start()
			return nil
		}
		r.watch(now)
		return nil
	}
	var why string
	for n := 1; n <= r.started; n++ {
		if r.ended[n-1] {
			continue
		}
		at, w := r.stalledAt(n)
		if now.Before(at) {
			r.watch(now)
			return nil
		}
		why = fmt.Sprintf("attempt %d: %s", n, w)
	}
	if r.lastErr != nil {
		return r.fail(r.lastErr)
	}
	return r.giveUpTimedOut(why)
}

// onRetry starts the attempt scheduled after an error, or fails the batch
// when none may start and nothing is running.
func (r *uploadRun) onRetry() *uploadOutcome {
	r.retry = nil
	if r.mayStart() {
		r.start()
	} else if r.running == 0 {
		return r.fail(r.lastErr)
	} else {
		r.watch(time.Now())
	}
	return nil
}

// giveUpTimedOut fails the batch once no attempt may start any more and
// every running one has stalled, rather than wait forever; why says what
// the last running one went through (see [progress.stalledAt]). It cancels
// the attempts and waits for them (the caller would anyway, before handing
// the change sets back), so that the error says how the last one ended.
func (r *uploadRun) giveUpTimedOut(why string) *uploadOutcome {
	r.s.m.totalAttemptsPerUpload.Record(r.s.ctx, int64(r.started))
	settled := r.losers()
	<-settled
	cause := fmt.Errorf("every attempt stalled (%s): %w", why, context.DeadlineExceeded)
	if r.lastLoser.err != nil {
		// %v: the loser's error is mostly the cancellation the engine
		// caused, not the caller's.
		cause = fmt.Errorf("every attempt stalled (%s): %w; attempt %d, cancelled, ended with: %v",
			why, context.DeadlineExceeded, r.lastLoser.n, r.lastLoser.err)
	}
	return &uploadOutcome{settled: settled, err: r.s.uploadError(len(r.batch), r.started, cause)}
}

// fail fails the batch with cause, after cancelling what still runs.
func (r *uploadRun) fail(cause error) *uploadOutcome {
	r.s.m.totalAttemptsPerUpload.Record(r.s.ctx, int64(r.started))
	return &uploadOutcome{settled: r.losers(), err: r.s.uploadError(len(r.batch), r.started, cause)}
}

// losers cancels the attempts still running and discards whatever they
// stored once they end; the returned channel closes then.
func (r *uploadRun) losers() chan struct{} {
	for _, c := range r.cancels {
		c()
	}
	done := make(chan struct{})
	if r.running == 0 {
		close(done)
		return done
	}
	n := r.running
	r.running = 0
	r.s.wg.Add(1)
	go func() {
		defer r.s.wg.Done()
		defer close(done)
		for range n {
			r.collectLoser(<-r.results)
		}
	}()
	return done
}

// collectLoser notes a losing attempt's error or discards what it stored.
func (r *uploadRun) collectLoser(a attemptResult) {
	if a.err != nil {
		if a.n > r.lastLoser.n {
			r.lastLoser = a
		}
		return
	}
	for _, obj := range a.out.Objects {
		r.s.log.Debug("dstl: discarding a losing attempt's object", "object", obj.Name, "attempt", a.n)
		r.s.tracker.discardNow(obj)
	}
}

// record reports a successful upload's metrics.
func (s *scheduler) record(batch []*uploadTask, r attemptResult, started int, begin time.Time) {
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
// the failure as permanent ([backends.ErrPermanent], e.g. a missing bucket; a bare
// [backends.ErrNotFound] on a put may be an expired multipart or resumable session,
// which a new attempt heals),
// nor for a bad configuration, a TLS handshake answered in plain HTTP or a
// certificate the client does not trust.
func retryable(err error) bool {
	switch {
	case errors.Is(err, backends.ErrPermission), errors.Is(err, backends.ErrInvalidName),
		errors.Is(err, backends.ErrPermanent), errors.Is(err, ErrInvalidConfig), errors.Is(err, ErrClosed),
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
