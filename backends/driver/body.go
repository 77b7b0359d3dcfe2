package driver

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Body is the body of a Put: the caller's bytes, replayable, which
// remembers how they failed. A driver reads it with ReadAt, through a
// Section per request, or into memory with Bytes or View; when the
// caller's body fails or ends before its size, the Put fails with that
// error and its requests are not retried, whatever the transport made of
// it. The portable layer closes the body when the driver's Put returns:
// from then on ReadAt (and so a Section) fails with [ErrBodyClosed], so
// that a transport still reading a request's body after its round trip
// ended (net/http may, for a moment, on an early answer or a cancelled
// request) gets an error, never the caller's bytes, which the caller may
// be filling with its next object.
type Body struct {
	r    io.ReaderAt
	size int64

	mu  sync.Mutex
	err error

	// closing is held for reading by every read of the caller's body and
	// for writing by Close, which so waits for reads in progress.
	closing sync.RWMutex
	closed  bool
}

// ErrBodyClosed is the error of a read of a [Body] after its Put returned.
var ErrBodyClosed = errors.New("driver: read of a Put's body after the Put returned")

// Close ends the body's reads: it waits for those in progress (one call
// of the caller's ReadAt each: a copy, for a body in memory), and every
// later ReadAt fails with [ErrBodyClosed], and SliceAt with false, without
// recording a failure of the caller's body. The portable layer calls it
// when the driver's Put returns, so that a Put does not return while a
// read of its body is in progress: a caller's ReadAt must not block
// indefinitely.
func (b *Body) Close() {
	b.closing.Lock()
	b.closed = true
	b.closing.Unlock()
}

// NewBody returns the body of a Put of size bytes read from r.
func NewBody(r io.ReaderAt, size int64) *Body { return &Body{r: r, size: size} }

// Size returns the body's size.
func (b *Body) Size() int64 { return b.size }

// ReadAt reads from the caller's body, recording a failure. A read that
// ends before the body's size fails with an error wrapping
// io.ErrUnexpectedEOF; at the size, it returns io.EOF.
func (b *Body) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if off >= b.size {
		return 0, io.EOF
	}
	want := p
	if rest := b.size - off; int64(len(want)) > rest {
		want = want[:rest]
	}
	n, closed, err := b.readAt(want, off)
	if closed {
		return 0, ErrBodyClosed
	}
	switch {
	case n == len(want):
		if len(want) < len(p) {
			return n, io.EOF
		}
		return n, nil
	case err == nil || errors.Is(err, io.EOF):
		err = fmt.Errorf("body ends after %d of %d bytes: %w", off+int64(n), b.size, io.ErrUnexpectedEOF)
	default:
		err = fmt.Errorf("reading the body: %w", err)
	}
	b.fail(err)
	return n, err
}

// readAt reads from the caller's body unless the body is closed, under
// the read lock that Close waits for.
func (b *Body) readAt(p []byte, off int64) (n int, closed bool, err error) {
	b.closing.RLock()
	defer b.closing.RUnlock()
	if b.closed {
		return 0, true, nil
	}
	n, err = b.r.ReadAt(p, off)
	return n, false, err
}

func (b *Body) fail(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}

// Err returns the first failure of the caller's body, or nil.
func (b *Body) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Section returns a reader of n bytes of the body from off on, for one
// request (a whole object, or a part). It seeks, as signing a request over
// plain HTTP needs.
func (b *Body) Section(off, n int64) *io.SectionReader {
	return io.NewSectionReader(b, off, n)
}

// View returns n bytes of the body from off on: the caller's own bytes,
// without a copy, when the body is in memory (see SliceAt); otherwise a
// copy read with ReadAt. The driver does not change them, and is done
// with them when its Put returns: it hands them to no one who may still
// read them after, such as net/http as a request's body (a transport may
// go on reading a body for a moment after its round trip ended, on an
// early answer or a cancelled request), but it may to a writer whose
// Write consumes them before it returns.
func (b *Body) View(off, n int64) ([]byte, error) {
	if p, ok := b.SliceAt(off, n); ok {
		return p, nil
	}
	return b.Bytes(off, n)
}

// sliceAt is a caller's body whose bytes are in memory (such as
// backends.MemoryBody): it hands them out without a copy.
type sliceAt interface {
	SliceAt(off, n int64) ([]byte, bool)
}

// SliceAt returns the n bytes of the body at off without copying them,
// when the caller's body is in memory and has them all, and true;
// otherwise false, and the driver reads them with ReadAt (which reports a
// body that ends short as such). A driver does not change them, nor keeps
// them past the Put (see View): Close cannot take back bytes handed out
// before it.
func (b *Body) SliceAt(off, n int64) ([]byte, bool) {
	m, ok := b.r.(sliceAt)
	if !ok || off < 0 || n < 0 || n > b.size-off {
		return nil, false
	}
	b.closing.RLock()
	closed := b.closed
	b.closing.RUnlock()
	if closed {
		return nil, false
	}
	p, ok := m.SliceAt(off, n)
	if !ok || int64(len(p)) != n {
		return nil, false
	}
	return p, true
}

// crc32cOf is a caller's body that knows its bytes' CRC32C (such as
// backends.MemoryBody given one, or an object an encoder builds).
type crc32cOf interface {
	CRC32C() (uint32, bool)
}

// CRC32C returns the CRC32C (Castagnoli) of the body's bytes and true,
// when the caller's body gives it; otherwise false, and a driver that
// sends a checksum with the object computes it from the bytes. A body
// whose bytes are still being written (an object its encoder builds
// while the Put reads it) gives it once they are all written. A store
// that checks the checksum refuses an upload whose bytes do not match it.
func (b *Body) CRC32C() (uint32, bool) {
	c, ok := b.r.(crc32cOf)
	if !ok {
		return 0, false
	}
	return c.CRC32C()
}

// Bytes reads n bytes of the body from off on into memory: a copy, which
// the driver may hand to anything, for as long as it likes.
func (b *Body) Bytes(off, n int64) ([]byte, error) {
	p := make([]byte, n)
	if _, err := b.ReadAt(p, off); err != nil {
		return nil, err
	}
	return p, nil
}
