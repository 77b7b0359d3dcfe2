package dstl

import (
	"math/bits"
	"sync"
)

// freeList keeps up to its capacity of values for reuse, and hands out the
// one put last: the buffer most likely still in the CPU's caches. Unlike a
// sync.Pool, the garbage collector does not empty it, which matters for
// the buffers of the write path: a steady writer reuses the same few
// instead of allocating new ones at every upload.
type freeList[T any] struct {
	mu    sync.Mutex
	items []T
	limit int
}

func newFreeList[T any](n int) *freeList[T] { return &freeList[T]{limit: n} }

func (f *freeList[T]) get() (T, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero T
	n := len(f.items)
	if n == 0 {
		return zero, false
	}
	v := f.items[n-1]
	f.items[n-1] = zero
	f.items = f.items[:n-1]
	return v, true
}

func (f *freeList[T]) put(v T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.items) < f.limit {
		f.items = append(f.items, v)
	} // full: let the garbage collector have it
}

// A change set's arena is a list of chunks. A change is copied once, into
// the chunk in use, and never moved: when a change does not fit, the set
// takes a new chunk (twice the last one's size, up to maxChunk) instead of
// growing its arena by copying it, so appending costs the same whatever
// the set's size. A set's first chunk is sized for what its writer's
// previous set held. A change larger than maxChunk gets a chunk of its
// own size, which is not pooled.
const (
	minChunk = 4 << 10
	maxChunk = 1 << 20
	// chunkClasses are the pooled chunk sizes: minChunk << c for c in
	// [0, chunkClasses).
	chunkClasses = 9
)

// chunkClass returns the class of the smallest pooled chunk of at least
// n bytes (n <= maxChunk).
func chunkClass(n int) int {
	if n <= minChunk {
		return 0
	}
	return bits.Len(uint((n - 1) / minChunk)) // ceil(log2(n / minChunk))
}

// chunkPool keeps the chunks of uploaded change sets for reuse, one free
// list per size class, up to limit bytes in all: with the limit at the
// bytes that may be in flight, a steady load appends into recycled chunks
// only, with no allocation (and no zeroing, and no page faults on fresh
// memory).
type chunkPool struct {
	mu     sync.Mutex
	free   [chunkClasses][][]byte
	held   int64
	limit  int64
	allocs int64 // chunks allocated, for tests
}

func (p *chunkPool) get(class int) []byte {
	p.mu.Lock()
	if l := p.free[class]; len(l) > 0 {
		c := l[len(l)-1]
		l[len(l)-1] = nil
		p.free[class] = l[:len(l)-1]
		p.held -= int64(cap(c))
		p.mu.Unlock()
		return c
	}
	p.allocs++
	p.mu.Unlock()
	return make([]byte, 0, minChunk<<class)
}

func (p *chunkPool) put(c []byte) {
	n := cap(c)
	if n < minChunk || n > maxChunk || n&(n-1) != 0 {
		return // not a pooled size
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held+int64(n) > p.limit {
		return // full: let the garbage collector have it
	}
	class := chunkClass(n)
	p.free[class] = append(p.free[class], c[:0])
	p.held += int64(n)
}

// bufferPool recycles the buffers of change sets once their upload has
// ended, so that a steady writer appends without allocating: their
// chunks, and their lists of changes.
type bufferPool struct {
	chunks *chunkPool
	free   *freeList[*setBuffers]
}

type setBuffers struct {
	chunks [][]byte
	refs   []changeRef
}

func newBufferPool(sets int, chunkBytes int64) bufferPool {
	return bufferPool{chunks: &chunkPool{limit: chunkBytes}, free: newFreeList[*setBuffers](sets)}
}

// get gives next the lists of a recycled set, or new ones sized for what
// prev held, up to limit bytes when limit > 0 (a set that rolls over at
// the limit goes a change past it), with an eighth more; and the size of
// next's first chunk, sized so too.
func (p *bufferPool) get(next, prev *changeSet, limit int64) {
	size, refs := int(prev.size), len(prev.refs)
	if limit > 0 && int64(size) > limit {
		refs = int(int64(refs) * limit / int64(size))
		size = int(limit)
	}
	next.firstChunk = min(size+size/8, maxChunk)
	if b, ok := p.free.get(); ok {
		next.chunks, next.refs = b.chunks, b.refs
		return
	}
	next.refs = make([]changeRef, 0, refs+refs/8)
}

// grow gives cs a new chunk with room for need bytes.
func (p *bufferPool) grow(cs *changeSet, need int) {
	size := max(cs.firstChunk, minChunk)
	if len(cs.chunks) > 0 {
		size = min(2*cap(cs.tail), maxChunk)
	}
	size = max(size, need)
	var c []byte
	if size > maxChunk {
		c = make([]byte, 0, size)
	} else {
		c = p.chunks.get(chunkClass(size))
	}
	cs.chunks = append(cs.chunks, c)
	cs.tail = c
}

// put takes a set's buffers back; the set must not be read again.
func (p *bufferPool) put(cs *changeSet) {
	if cs.chunks != nil || cs.refs != nil {
		for i, c := range cs.chunks {
			p.chunks.put(c)
			cs.chunks[i] = nil
		}
		p.free.put(&setBuffers{chunks: cs.chunks[:0], refs: cs.refs[:0]})
	}
	cs.chunks, cs.tail, cs.refs = nil, nil, nil
}
