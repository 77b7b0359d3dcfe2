package dstl

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// rangeCache keeps byte ranges of objects fetched for reading, so that an
// object shared by many handles is fetched once. Ranges unused for the idle
// timeout are dropped by a janitor goroutine that runs only while the cache
// holds something. The cache holds a reference to the buffer of each range
// it keeps ([rangeBuf]); every rangeData it hands out carries a reference
// of its own, which the receiver releases when done with the bytes.
type rangeCache struct {
	idle  time.Duration
	limit int64 // bytes
	now   func() time.Time

	mu       sync.Mutex
	objects  map[string][]*segment
	bytes    int64
	inflight map[rangeKey]*fetchCall
	janitor  chan struct{} // closed to stop the janitor; nil when none runs
	done     chan struct{} // closed when the janitor has stopped
	closed   bool
}

type segment struct {
	off      int64
	buf      *rangeBuf
	verified frameSet
	lastUsed time.Time
}

// frameSet holds the frames of a fetched range whose length field and
// CRC32C were verified when it was fetched ([format.VerifyFrame]): frame
// offset in the object to frame length. It does not change once cached.
type frameSet map[int64]int64

// has reports whether the frame of length n at off was verified.
func (s frameSet) has(off, n int64) bool {
	m, ok := s[off]
	return ok && m == n
}

// rangeData is a fetched range: its bytes, its verified frames and a
// reference to the buffer that holds them, to release once the bytes are
// no longer used.
type rangeData struct {
	data     []byte
	verified frameSet
	buf      *rangeBuf
}

// release drops the reference to the buffer; the bytes must not be used
// after.
func (d rangeData) release() {
	if d.buf != nil {
		d.buf.release()
	}
}

type rangeKey struct {
	object   string
	off, len int64
}

// fetchCall is a fetch in progress that other readers of the same range
// wait for instead of fetching again.
type fetchCall struct {
	done chan struct{}
	data rangeData
	err  error
	// waiters is the number of callers waiting for the fetch; when it
	// ends, each gets a reference to the buffer. ended is set then.
	waiters int
	ended   bool
}

// defaultCacheLimit bounds the bytes a reader's cache keeps: past it, the
// least recently used ranges go first.
const defaultCacheLimit = 256 << 20

func newRangeCache(idle time.Duration, limit int64) *rangeCache {
	return &rangeCache{idle: idle, limit: limit, now: time.Now, objects: map[string][]*segment{}, inflight: map[rangeKey]*fetchCall{}}
}

// get returns n bytes of object from off if a cached range covers them,
// with the verified frames of that range.
func (c *rangeCache) get(object string, off, n int64) (rangeData, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.objects[object] {
		if off >= s.off && off+n <= s.off+int64(len(s.buf.b)) {
			s.lastUsed = c.now()
			s.buf.retain()
			return rangeData{data: s.buf.b[off-s.off : off-s.off+n : off-s.off+n], verified: s.verified, buf: s.buf}, true
		}
	}
	return rangeData{}, false
}

// fetch returns n bytes of object from off, from the cache or by calling
// load once however many callers ask at the same time; the caller releases
// what it gets. load returns the bytes with one reference, which the
// caller that loaded gets. fetched reports whether this call loaded the
// bytes. A caller waiting for another's load stops when its own ctx ends,
// and loads again itself if the other's failed only because the other's
// context ended.
func (c *rangeCache) fetch(ctx context.Context, object string, off, n int64, load func(context.Context) (rangeData, error)) (data rangeData, fetched bool, err error) {
	for {
		if d, ok := c.get(object, off, n); ok {
			return d, false, nil
		}
		key := rangeKey{object, off, n}
		c.mu.Lock()
		call, ok := c.inflight[key]
		if !ok {
			break // with c.mu held: this caller loads
		}
		call.waiters++
		c.mu.Unlock()
		select {
		case <-call.done:
		case <-ctx.Done():
			c.mu.Lock()
			if call.ended {
				call.data.release() // the reference the load gave this waiter
			} else {
				call.waiters--
			}
			c.mu.Unlock()
			return rangeData{}, false, ctx.Err()
		}
		if call.err != nil && (errors.Is(call.err, context.Canceled) || errors.Is(call.err, context.DeadlineExceeded)) && ctx.Err() == nil {
			continue
		}
		return call.data, false, call.err
	}
	key := rangeKey{object, off, n}
	call := &fetchCall{done: make(chan struct{})}
	c.inflight[key] = call
	c.mu.Unlock()

	call.data, call.err = load(ctx)
	c.mu.Lock()
	delete(c.inflight, key)
	call.ended = true
	if call.err == nil {
		for range call.waiters {
			call.data.buf.retain()
		}
	}
	if call.err == nil && !c.closed && c.idle > 0 && call.data.buf.held() <= c.limit {
		call.data.buf.retain()
		c.objects[object] = append(c.objects[object], &segment{off: off, buf: call.data.buf, verified: call.data.verified, lastUsed: c.now()})
		c.bytes += call.data.buf.held()
		c.evictLocked()
		c.startJanitorLocked()
	}
	c.mu.Unlock()
	close(call.done)
	return call.data, true, call.err
}

func (c *rangeCache) startJanitorLocked() {
	if c.janitor != nil {
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	c.janitor, c.done = stop, done
	every := max(c.idle/4, 10*time.Millisecond)
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if c.expire() {
					return
				}
			}
		}
	}()
}

// evictLocked drops the least recently used ranges while the cache holds
// more than its limit.
func (c *rangeCache) evictLocked() {
	for c.bytes > c.limit {
		var oldObj string
		var oldIdx = -1
		var oldest time.Time
		for obj, segs := range c.objects {
			for i, s := range segs {
				if oldIdx < 0 || s.lastUsed.Before(oldest) {
					oldObj, oldIdx, oldest = obj, i, s.lastUsed
				}
			}
		}
		if oldIdx < 0 {
			return
		}
		segs := c.objects[oldObj]
		c.bytes -= segs[oldIdx].buf.held()
		segs[oldIdx].buf.release()
		segs = slices.Delete(segs, oldIdx, oldIdx+1)
		if len(segs) == 0 {
			delete(c.objects, oldObj)
		} else {
			c.objects[oldObj] = segs
		}
	}
}

// expire drops idle ranges and reports whether the janitor should stop
// (the cache is empty).
func (c *rangeCache) expire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cutoff := c.now().Add(-c.idle)
	for obj, segs := range c.objects {
		kept := segs[:0]
		for _, s := range segs {
			if s.lastUsed.After(cutoff) {
				kept = append(kept, s)
			} else {
				c.bytes -= s.buf.held()
				s.buf.release()
			}
		}
		clear(segs[len(kept):])
		if len(kept) == 0 {
			delete(c.objects, obj)
		} else {
			c.objects[obj] = kept
		}
	}
	if len(c.objects) == 0 {
		c.janitor, c.done = nil, nil
		return true
	}
	return false
}

// size returns the cached bytes.
func (c *rangeCache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// close drops everything and stops the janitor.
func (c *rangeCache) close() {
	c.mu.Lock()
	c.closed = true
	stop, done := c.janitor, c.done
	c.janitor, c.done = nil, nil
	for _, segs := range c.objects {
		for _, s := range segs {
			s.buf.release()
		}
	}
	c.objects = map[string][]*segment{}
	c.bytes = 0
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}
