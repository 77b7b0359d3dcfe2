package uploader

import (
	"fmt"
	"io"
	"sync"

	"github.com/dstlgo/dstl/dstl/format"
)

// streamBody is the body of a Put of an object that an encoder builds
// while the Put reads it: its bytes are final up to what the encoder told
// (format.Encoder.SetProgress), and a read of bytes past that waits for
// them. The object's size is known before the encoder starts, so the Put
// can send it up front; every byte read stays in the buffer, so a
// backend's retry of a request reads it again. It hands out its bytes
// without a copy (SliceAt), as a body in memory does, and gives the
// object's CRC32C once the encoder is done (CRC32C).
type streamBody struct {
	buf  []byte // the object, of size bytes once complete
	size int64

	mu    sync.Mutex
	cond  sync.Cond
	ready int64  // bytes final: buf[:ready]
	done  bool   // the encoder ended: ready is size, or err is set
	err   error  // why the encoder failed
	crc   uint32 // the object's CRC32C, once done without error
}

// newStreamBody returns the body of an object of size bytes that an
// encoder builds in buf (whose capacity is at least size).
func newStreamBody(buf []byte, size int64) *streamBody {
	b := &streamBody{buf: buf[:size:size], size: size}
	b.cond.L = &b.mu
	return b
}

// final tells the body that the object's first n bytes are final.
func (b *streamBody) final(n int64) {
	b.mu.Lock()
	if n > b.ready {
		b.ready = n
		b.cond.Broadcast()
	}
	b.mu.Unlock()
}

// finish tells the body that the encoder ended, with the object's
// CRC32C, or with err: reads that wait for bytes it did not write fail
// with err. An object shorter or longer than its size is an error too.
func (b *streamBody) finish(written int64, crc uint32, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil && (written != b.size || b.ready != b.size) {
		// The change sets' readers gave other changes when encoded than
		// when measured.
		err = fmt.Errorf("dstl: the encoder wrote an object of %d bytes (%d told final), not the %d its change sets measured: %w",
			written, b.ready, b.size, format.ErrInvalidChangeSet)
	}
	b.done, b.err, b.crc = true, err, crc
	b.cond.Broadcast()
}

// wait waits until the bytes up to end are final, or the encoder failed
// before them.
func (b *streamBody) wait(end int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.ready < end && !b.done {
		b.cond.Wait()
	}
	if b.ready < end {
		return fmt.Errorf("dstl: encoding the object: %w", b.err)
	}
	return nil
}

// ReadAt reads the object's bytes at off, once they are final.
func (b *streamBody) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("dstl: read an object's body at offset %d: negative offset", off)
	}
	if off >= b.size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), b.size)
	if err := b.wait(end); err != nil {
		return 0, err
	}
	n := copy(p, b.buf[off:end])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// SliceAt returns the n bytes at off without copying them, once they are
// final, and true; false when they are not all in the object or the
// encoder failed before them (a read then says why).
func (b *streamBody) SliceAt(off, n int64) ([]byte, bool) {
	if off < 0 || n < 0 || off > b.size || n > b.size-off {
		return nil, false
	}
	if b.wait(off+n) != nil {
		return nil, false
	}
	return b.buf[off : off+n : off+n], true
}

// CRC32C returns the object's CRC32C once the encoder is done, and true;
// false if it failed.
func (b *streamBody) CRC32C() (uint32, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.done {
		b.cond.Wait()
	}
	return b.crc, b.err == nil
}

// result waits for the encoder and returns its error.
func (b *streamBody) result() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.done {
		b.cond.Wait()
	}
	return b.err
}
