package dstl

import (
	"context"
	"io"
	"sync/atomic"
	"time"
)

// MinUploadThroughput is the slowest rate, in bytes per second, at which an
// upload is still taken to be on its way: an attempt that made no progress
// since it last read its object's body (or since its start) is given up
// only after upload.timeout plus the body's size at this rate, so that an
// answer awaited while the body is still in transit, or a backend that
// reads the body whole before sending it, is not taken for a stall. The
// cloud backends bound a request with a body the same way.
const MinUploadThroughput = 256 << 10

// transferTime is the time size bytes take at [MinUploadThroughput].
func transferTime(size int64) time.Duration {
	if size <= 0 {
		return 0
	}
	const rate = MinUploadThroughput
	return time.Duration(size/rate)*time.Second + time.Duration(size%rate)*time.Second/rate
}

// progress is what the engine knows of one upload attempt's progress: the
// time of its latest read of the object's body (or of its start) and the
// body's size. The uploader reports it through [trackBody]; an uploader
// that does not is without progress from its start.
type progress struct {
	last atomic.Int64 // unix nanoseconds
	size atomic.Int64
}

func newProgress(now time.Time) *progress {
	p := &progress{}
	p.last.Store(now.UnixNano())
	return p
}

// idle reports how long the attempt has been without progress at now.
func (p *progress) idle(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, p.last.Load()))
}

type progressKey struct{}

// withProgress returns ctx carrying p, for [trackBody].
func withProgress(ctx context.Context, p *progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// trackBody returns body such that every read of it counts as progress of
// the attempt that ctx belongs to (none when ctx carries no progress, e.g.
// outside the scheduler), and records the body's size. Reading the body is
// what moves an upload: once the whole body is read, waiting for the
// answer is no progress.
func trackBody(ctx context.Context, body io.ReaderAt, size int64) io.ReaderAt {
	p, _ := ctx.Value(progressKey{}).(*progress)
	if p == nil {
		return body
	}
	p.size.Store(size)
	p.last.Store(time.Now().UnixNano())
	return &progressReader{r: body, p: p}
}

// progressReader is a body whose reads count as progress.
type progressReader struct {
	r io.ReaderAt
	p *progress
}

func (r *progressReader) ReadAt(b []byte, off int64) (int, error) {
	n, err := r.r.ReadAt(b, off)
	if n > 0 {
		r.p.last.Store(time.Now().UnixNano())
	}
	return n, err
}
