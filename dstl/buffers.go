package dstl

import "sync"

// freeList keeps up to its capacity of values for reuse, and hands out the
// one put last: the buffer most likely still in the CPU's caches. Unlike a
// sync.Pool, the garbage collector does not empty it, which matters for
// the multi-megabyte buffers of the write path: a steady writer reuses the
// same few arenas instead of allocating new ones at every upload.
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

// bufferPool recycles the arenas of change sets once their upload has
// ended, so that a steady writer appends without allocating.
type bufferPool struct{ free *freeList[*setBuffers] }

type setBuffers struct {
	data    []byte
	refs    []changeRef
	scratch [][]byte
}

// maxPooledArena bounds the arenas kept for reuse.
const maxPooledArena = 64 << 20

func newBufferPool(n int) bufferPool { return bufferPool{free: newFreeList[*setBuffers](n)} }

// get gives next buffers: recycled ones, or new ones sized for what prev
// held (not for prev's capacity, so that one large set does not make every
// later one reserve as much), up to limit bytes when limit > 0, with an
// eighth more: a set that rolls over at the limit goes a change past it,
// and one that outgrows its arena copies it whole.
func (p *bufferPool) get(next, prev *changeSet, limit int64) {
	if b, ok := p.free.get(); ok {
		next.data, next.refs, next.scratch = b.data, b.refs, b.scratch
		return
	}
	size, refs := len(prev.data), len(prev.refs)
	if limit > 0 && int64(size) > limit {
		refs = int(int64(refs) * limit / int64(size))
		size = int(limit)
	}
	next.data = make([]byte, 0, size+size/8)
	next.refs = make([]changeRef, 0, refs+refs/8)
}

// put takes a set's buffers back; the set must not be read again.
func (p *bufferPool) put(cs *changeSet) {
	if cs.data != nil && cap(cs.data) <= maxPooledArena {
		clear(cs.scratch) // drop the references into the arena
		p.free.put(&setBuffers{data: cs.data[:0], refs: cs.refs[:0], scratch: cs.scratch[:0]})
	}
	cs.data, cs.refs, cs.scratch = nil, nil, nil
}
