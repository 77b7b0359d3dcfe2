package dstl

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// rangeBuf is the buffer of a fetched range. The cache that keeps it and
// every read that decodes from it hold a reference; when the last one lets
// go, the buffer returns to a pool for the next range of its size class,
// so that a recovery does not allocate (and zero) a buffer per range nor
// leave the garbage collector megabytes to sweep. A change yielded from a
// range is valid until the read that yielded it returns, which holds its
// reference until then.
type rangeBuf struct {
	b     []byte
	class int // index in rangePools, or -1: not pooled
	refs  atomic.Int32
}

// held is the memory the buffer takes, which the cache's limit counts:
// its capacity (a pooled buffer is rounded up to its size class).
func (b *rangeBuf) held() int64 { return int64(cap(b.b)) }

// Size classes of pooled buffers: four per power of two, from
// minPooledRange to maxCoalesced, so that a buffer wastes at most a
// quarter of its size.
const (
	minPooledShift   = 16 // ranges below 64 KiB are allocated as they come
	maxPooledShift   = 26 // maxCoalesced
	classesPerOctave = 4
)

var rangePools [(maxPooledShift - minPooledShift + 1) * classesPerOctave]sync.Pool

// poisonReleased makes release overwrite a buffer before it goes back to
// the pool, so that a test reading a released buffer sees garbage; it is
// set in race-detector builds (see rangebuf_race.go).
var poisonReleased = false

// sizeClass returns the pool index and capacity of a buffer for n bytes,
// or -1 when n is not pooled.
func sizeClass(n int64) (int, int64) {
	if n <= 1<<minPooledShift || n > 1<<maxPooledShift {
		return -1, n
	}
	k := bits.Len64(uint64(n - 1)) // 2^(k-1) < n <= 2^k
	step := int64(1) << (k - 3)    // a quarter of 2^(k-1)
	j := (n - 1 - 1<<(k-1)) / step // 0..3: n <= 2^(k-1) + (j+1)*step
	return (k-1-minPooledShift)*classesPerOctave + int(j), 1<<(k-1) + (j+1)*step
}

// newRangeBuf returns a buffer of n bytes with one reference, the caller's.
// Its contents are not zeroed: the caller fills it.
func newRangeBuf(n int64) *rangeBuf {
	class, size := sizeClass(n)
	var rb *rangeBuf
	if class >= 0 {
		rb, _ = rangePools[class].Get().(*rangeBuf)
	}
	if rb == nil {
		rb = &rangeBuf{b: make([]byte, size), class: class}
	}
	rb.b = rb.b[:n]
	rb.refs.Store(1)
	return rb
}

// retain adds a reference.
func (rb *rangeBuf) retain() {
	if rb.refs.Add(1) <= 1 {
		panic("dstl: retain of a released range buffer")
	}
}

// release drops a reference; the last one returns the buffer to its pool.
func (rb *rangeBuf) release() {
	switch n := rb.refs.Add(-1); {
	case n > 0:
		return
	case n < 0:
		panic("dstl: range buffer released more often than retained")
	}
	if rb.class < 0 {
		return
	}
	if poisonReleased {
		b := rb.b[:cap(rb.b)]
		for i := range b {
			b[i] = 0xdb
		}
	}
	rangePools[rb.class].Put(rb)
}
