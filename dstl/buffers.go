package dstl

import "sync"

// bufferPool recycles the arenas of change sets once their upload has
// ended, so that a steady writer appends without allocating.
type bufferPool struct{ pool sync.Pool }

type setBuffers struct {
	data    []byte
	refs    []changeRef
	scratch [][]byte
}

// maxPooledArena bounds the arenas kept for reuse.
const maxPooledArena = 64 << 20

// get gives next buffers, recycled or sized like prev's.
func (p *bufferPool) get(next, prev *changeSet) {
	if b, ok := p.pool.Get().(*setBuffers); ok {
		next.data, next.refs, next.scratch = b.data, b.refs, b.scratch
		return
	}
	next.data = make([]byte, 0, cap(prev.data))
	next.refs = make([]changeRef, 0, cap(prev.refs))
}

// put takes a set's buffers back; the set must not be read again.
func (p *bufferPool) put(cs *changeSet) {
	if cs.data == nil || cap(cs.data) > maxPooledArena {
		cs.data, cs.refs, cs.scratch = nil, nil, nil
		return
	}
	clear(cs.scratch) // drop the references into the arena
	p.pool.Put(&setBuffers{data: cs.data[:0], refs: cs.refs[:0], scratch: cs.scratch[:0]})
	cs.data, cs.refs, cs.scratch = nil, nil, nil
}
