package dstl

import (
	"sync"
	"time"
)

// rangeCache keeps byte ranges of objects fetched for reading, so that an
// object shared by many handles is fetched once. Ranges unused for the idle
// timeout are dropped by a janitor goroutine that runs only while the cache
// holds something.
type rangeCache struct {
	idle time.Duration
	now  func() time.Time

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
	data     []byte
	lastUsed time.Time
}

type rangeKey struct {
	object   string
	off, len int64
}

// fetchCall is a fetch in progress that other readers of the same range
// wait for instead of fetching again.
type fetchCall struct {
	done chan struct{}
	data []byte
	err  error
}

func newRangeCache(idle time.Duration) *rangeCache {
	return &rangeCache{idle: idle, now: time.Now, objects: map[string][]*segment{}, inflight: map[rangeKey]*fetchCall{}}
}

// get returns n bytes of object from off if a cached range covers them.
func (c *rangeCache) get(object string, off, n int64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.objects[object] {
		if off >= s.off && off+n <= s.off+int64(len(s.data)) {
			s.lastUsed = c.now()
			return s.data[off-s.off : off-s.off+n : off-s.off+n], true
		}
	}
	return nil, false
}

// fetch returns n bytes of object from off, from the cache or by calling
// load once however many callers ask at the same time. fetched reports
// whether this call loaded the bytes.
func (c *rangeCache) fetch(object string, off, n int64, load func() ([]byte, error)) (data []byte, fetched bool, err error) {
	if d, ok := c.get(object, off, n); ok {
		return d, false, nil
	}
	key := rangeKey{object, off, n}
	c.mu.Lock()
	if call, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		<-call.done
		return call.data, false, call.err
	}
	call := &fetchCall{done: make(chan struct{})}
	c.inflight[key] = call
	c.mu.Unlock()

	call.data, call.err = load()
	c.mu.Lock()
	delete(c.inflight, key)
	if call.err == nil && !c.closed && c.idle > 0 {
		c.objects[object] = append(c.objects[object], &segment{off: off, data: call.data, lastUsed: c.now()})
		c.bytes += int64(len(call.data))
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
				c.bytes -= int64(len(s.data))
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
	c.objects = map[string][]*segment{}
	c.bytes = 0
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}
