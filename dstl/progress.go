package dstl

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// MinUploadThroughput is the slowest rate, in bytes per second, at which an
// upload is still taken to be on its way. An upload attempt is judged by
// the bytes it moved since its start: once upload.timeout has passed, it
// must have moved at least this rate times the time beyond upload.timeout
// (each byte buys 1/MinUploadThroughput s), so that a trickle is given up
// in bounded time while 1 MiB/s is never cut. The cloud backends bound a
// request with a body the same way.
const MinUploadThroughput = 256 << 10

// transferTime is the time size bytes take at [MinUploadThroughput].
func transferTime(size int64) time.Duration {
	if size <= 0 {
		return 0
	}
	const rate = MinUploadThroughput
	return time.Duration(size/rate)*time.Second + time.Duration(size%rate)*time.Second/rate
}

// ReportProgress reports that n more bytes of an upload left for the
// storage service, to the upload attempt that ctx belongs to (ctx is, or
// derives from, the context the engine passed to the uploader or to the
// backend's Put). It does nothing when ctx belongs to no attempt or n <= 0,
// and is safe for concurrent use.
//
// A backend reports the bytes it actually sent; the HTTP transport of the
// s3, gcs and azure backends does so for every request body. Once an
// attempt has a report, it is judged by its reports alone: the engine
// stops counting its reads of the object's body (which a backend that
// buffers a whole object or part before sending reads long before the
// bytes move), and the attempt counts as stalled when no report came for
// upload.timeout while some of the body was unsent (once all of it went,
// the rate floor of [MinUploadThroughput] alone judges the wait for the
// answer, since the bytes still drain from the socket's buffers). A backend that reports nothing is judged by its reads of
// the body, which must then move with the upload (as a backend that
// streams the body does).
func ReportProgress(ctx context.Context, n int64) {
	if p := ProgressFrom(ctx); p != nil {
		p(n)
	}
}

// ProgressFrom returns the function that reports progress (as
// [ReportProgress]) to the upload attempt ctx belongs to, or nil when it
// belongs to none, so that a caller can skip counting.
func ProgressFrom(ctx context.Context) func(n int64) {
	f, _ := ctx.Value(reporterKey{}).(func(n int64))
	return f
}

// WithProgress returns ctx carrying report as the receiver of
// [ReportProgress], in place of any the context carried. The engine sets
// one for every upload attempt; an uploader that runs its uploads itself,
// or a test of a backend's reports, may set its own.
func WithProgress(ctx context.Context, report func(n int64)) context.Context {
	return context.WithValue(ctx, reporterKey{}, report)
}

// progress is what the engine knows of one upload attempt's progress.
// Reports of bytes sent ([ReportProgress]) override reads of the body
// ([trackBody]): once one came, reads no longer count.
type progress struct {
	start     atomic.Int64 // unix nanoseconds: of the attempt, or when its body was handed over
	bodyBytes atomic.Int64 // new bytes of the body read (high-water mark)
	sentBytes atomic.Int64 // bytes reported sent
	bodySize  atomic.Int64 // size of the object's body; 0: unknown
	lastSent  atomic.Int64 // unix nanoseconds of the latest report; 0: none
}

func newProgress(now time.Time) *progress {
	p := &progress{}
	p.start.Store(now.UnixNano())
	return p
}

// sent records n bytes sent now.
func (p *progress) sent(n int64) {
	if n <= 0 {
		return
	}
	p.sentBytes.Add(n)
	p.lastSent.Store(time.Now().UnixNano())
}

// stalledAt is when the attempt counts as stalled with timeout
// (upload.timeout), given what it moved so far, and why. It is the
// earlier of: its start plus timeout plus its bytes at
// [MinUploadThroughput] (the rate floor), and, once it reports bytes
// sent, its latest report plus timeout (no bytes moved). Progress only
// moves it later.
func (p *progress) stalledAt(timeout time.Duration) (at time.Time, why string) {
	last := p.lastSent.Load()
	moved := p.bodyBytes.Load()
	what := "read of its body"
	if last != 0 {
		moved, what = p.sentBytes.Load(), "sent"
	}
	start := time.Unix(0, p.start.Load())
	at = start.Add(timeout + transferTime(moved))
	why = fmt.Sprintf("%d bytes %s in %v, below %d KiB/s after upload.timeout (%v)", moved, what, at.Sub(start).Round(time.Millisecond), MinUploadThroughput>>10, timeout)
	// Once the whole body was handed to the transport, bytes still drain
	// from the send buffers and the answer is awaited without reports: from
	// then on the rate floor alone judges the attempt.
	if size := p.bodySize.Load(); last != 0 && (size == 0 || moved < size) {
		if idle := time.Unix(0, last).Add(timeout); idle.Before(at) {
			at = idle
			why = fmt.Sprintf("no bytes sent for upload.timeout (%v), after %d bytes", timeout, moved)
		}
	}
	return at, why
}

type progressKey struct{}
type reporterKey struct{}

// withProgress returns ctx carrying p, for [trackBody] and [ReportProgress].
func withProgress(ctx context.Context, p *progress) context.Context {
	return WithProgress(context.WithValue(ctx, progressKey{}, p), p.sent)
}

// trackBody returns body such that reading bytes of it not read before
// counts as progress of the attempt that ctx belongs to (none when ctx
// carries no progress, e.g. outside the scheduler), until the backend
// reports bytes sent ([ReportProgress]). Re-reads (a backend's retry of a
// request) do not count. The attempt's clock restarts now: the time spent
// encoding the object is not the backend's.
func trackBody(ctx context.Context, body io.ReaderAt, size int64) io.ReaderAt {
	p, _ := ctx.Value(progressKey{}).(*progress)
	if p == nil {
		return body
	}
	p.bodySize.Store(size)
	p.start.Store(time.Now().UnixNano())
	return &progressReader{r: body, p: p}
}

// progressReader is a body whose reads of new bytes count as progress.
type progressReader struct {
	r  io.ReaderAt
	p  *progress
	hw atomic.Int64 // high-water mark: end of the furthest read
}

func (r *progressReader) ReadAt(b []byte, off int64) (int, error) {
	n, err := r.r.ReadAt(b, off)
	if n > 0 && r.p.lastSent.Load() == 0 {
		end := off + int64(n)
		for {
			hw := r.hw.Load()
			if end <= hw {
				break
			}
			if r.hw.CompareAndSwap(hw, end) {
				r.p.bodyBytes.Add(end - hw)
				break
			}
		}
	}
	return n, err
}
