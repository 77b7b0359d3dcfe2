package dstl

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/uploader"
)

// minUploadThroughput is the slowest rate, in bytes per second, at which
// an upload is still taken to be on its way ([driver.MinThroughput]): once
// upload.timeout has passed, an attempt must have moved at least this rate
// times the time beyond it, so that a trickle is given up in bounded time
// while 1 MiB/s is never cut.
const minUploadThroughput = driver.MinThroughput

// transferTime is the time size bytes take at [minUploadThroughput].
func transferTime(size int64) time.Duration {
	if size <= 0 {
		return 0
	}
	const rate = minUploadThroughput
	return time.Duration(size/rate)*time.Second + time.Duration(size%rate)*time.Second/rate
}

// progress is what the engine knows of one upload attempt's progress.
// Reports of bytes sent ([driver.ReportProgress]) override reads of the body
// ([progress.trackBody]): once one came, reads no longer count.
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
// [minUploadThroughput] (the rate floor), and, once it reports bytes
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
	why = fmt.Sprintf("%d bytes %s in %v, below %d KiB/s after upload.timeout (%v)", moved, what, at.Sub(start).Round(time.Millisecond), minUploadThroughput>>10, timeout)
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

// withProgress returns ctx carrying p, for [driver.ReportProgress] and
// [uploader.TrackBody].
func withProgress(ctx context.Context, p *progress) context.Context {
	return uploader.WithBodyTracker(driver.WithProgress(ctx, p.sent), p.trackBody)
}

// trackBody returns body such that reading bytes of it not read before
// counts as progress of the attempt, until the backend reports bytes sent
// ([driver.ReportProgress]). Re-reads (a backend's retry of a request) do
// not count. The attempt's clock restarts now: the time spent encoding the
// object is not the backend's.
func (p *progress) trackBody(body io.ReaderAt, size int64) io.ReaderAt {
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
	r.read(off, int64(n))
	return n, err
}

// SliceAt hands out the body's bytes without a copy where the body can
// (an in-memory one, see backends.MemoryBody); taking them counts as
// reading them.
func (r *progressReader) SliceAt(off, n int64) ([]byte, bool) {
	s, ok := r.r.(interface {
		SliceAt(off, n int64) ([]byte, bool)
	})
	if !ok {
		return nil, false
	}
	p, ok := s.SliceAt(off, n)
	if ok {
		r.read(off, int64(len(p)))
	}
	return p, ok
}

// CRC32C passes on the CRC32C of the body's bytes, where the body gives
// it (see backends.MemoryBody).
func (r *progressReader) CRC32C() (uint32, bool) {
	c, ok := r.r.(interface{ CRC32C() (uint32, bool) })
	if !ok {
		return 0, false
	}
	return c.CRC32C()
}

// read counts n bytes read at off: those past the furthest read so far
// are progress, until the backend reports bytes sent.
func (r *progressReader) read(off, n int64) {
	if n <= 0 || r.p.lastSent.Load() != 0 {
		return
	}
	end := off + n
	for {
		hw := r.hw.Load()
		if end <= hw {
			return
		}
		if r.hw.CompareAndSwap(hw, end) {
			r.p.bodyBytes.Add(end - hw)
			return
		}
	}
}
