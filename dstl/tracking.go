package dstl

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// discardTimeout bounds one delete of a released object.
const discardTimeout = 30 * time.Second

// tracker reference-counts stored objects by the change sets they hold,
// across writers. An object whose count drops to zero is deleted by the
// discard pool, unless a checkpoint was confirmed with one of its change
// sets: then it belongs to the checkpoint owner and is never deleted here.
type tracker struct {
	discarder func(ctx context.Context, obj StoredObject) error
	log       *slog.Logger
	m         *metrics

	mu      sync.Mutex
	objects map[string]*trackedObject
	queue   []StoredObject // objects waiting for a discard goroutine
	wake    *sync.Cond
	closing bool
	wg      sync.WaitGroup
}

type trackedObject struct {
	obj   StoredObject
	refs  int
	owned bool // confirmed: the checkpoint owner holds it now
}

func newTracker(threads int, discarder func(context.Context, StoredObject) error, log *slog.Logger, m *metrics) *tracker {
	t := &tracker{discarder: discarder, log: log, m: m, objects: map[string]*trackedObject{}}
	t.wake = sync.NewCond(&t.mu)
	t.wg.Add(threads)
	for range threads {
		go t.discardLoop()
	}
	return t
}

// track starts counting references to obj: refs change sets hold it. An
// object tracked with no reference is discarded at once (a losing attempt's
// object, say).
func (t *tracker) track(obj StoredObject, refs int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if refs <= 0 {
		t.enqueueLocked(obj)
		return
	}
	t.objects[obj.Name] = &trackedObject{obj: obj, refs: refs}
}

// release drops one change set's reference to the object; the last one
// deletes it unless it is owned by a checkpoint.
func (t *tracker) release(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.objects[name]
	if !ok {
		return
	}
	o.refs--
	if o.refs > 0 {
		return
	}
	delete(t.objects, name)
	if !o.owned {
		t.enqueueLocked(o.obj)
	}
}

// confirm hands the object to the checkpoint owner: it is never deleted by
// the storage after this.
func (t *tracker) confirm(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o, ok := t.objects[name]; ok {
		o.owned = true
	}
}

// refs returns the references held on an object (for tests), or -1 when it
// is not tracked.
func (t *tracker) refs(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o, ok := t.objects[name]; ok {
		return o.refs
	}
	return -1
}

// discardNow deletes an object no change set ever referred to.
func (t *tracker) discardNow(obj StoredObject) { t.track(obj, 0) }

func (t *tracker) enqueueLocked(obj StoredObject) {
	t.queue = append(t.queue, obj)
	t.wake.Signal()
}

func (t *tracker) discardLoop() {
	defer t.wg.Done()
	t.mu.Lock()
	for {
		for len(t.queue) == 0 && !t.closing {
			t.wake.Wait()
		}
		if len(t.queue) == 0 {
			t.mu.Unlock()
			return
		}
		obj := t.queue[0]
		t.queue[0] = StoredObject{}
		t.queue = t.queue[1:]
		t.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), discardTimeout)
		err := t.discarder(ctx, obj)
		cancel()
		if err != nil {
			t.m.discardFailures.Add(context.Background(), 1)
			t.log.Warn("dstl: could not delete released object; it stays until a garbage collection of the job's prefix", "object", obj.Name, "err", err)
		} else {
			t.m.discards.Add(context.Background(), 1)
		}
		t.mu.Lock()
	}
}

// close lets the discard goroutines finish the queue, then stops them.
func (t *tracker) close() {
	t.mu.Lock()
	t.closing = true
	t.wake.Broadcast()
	t.mu.Unlock()
	t.wg.Wait()
}
