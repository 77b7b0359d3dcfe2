package dstl

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/dstlgo/dstl/uploader"
)

// discardTimeout bounds one delete of a released object.
const discardTimeout = 30 * time.Second

// tracker reference-counts stored objects by the change sets they hold,
// across writers. An object whose count drops to zero is deleted by the
// discard pool, unless a checkpoint was confirmed with one of its change
// sets: then it belongs to the checkpoint owner and is never deleted here.
//
// Local copies (local recovery) live by rules of their own, kept by
// [localCopies] under the tracker's lock; the tracker deletes the copies it
// says nothing needs any more.
type tracker struct {
	discarder   func(ctx context.Context, obj uploader.StoredObject) error
	localDelete func(ctx context.Context, name string) error // nil without local copies
	log         *slog.Logger
	m           *metrics

	mu      sync.Mutex
	objects map[string]*trackedObject
	locals  localCopies
	queue   []discardItem // waiting for a discard goroutine
	wake    *sync.Cond
	closing bool
	wg      sync.WaitGroup
}

// discardItem is a delete for the discard pool: an object with its local
// copy if it has one, or only a local copy.
type discardItem struct {
	obj       uploader.StoredObject
	localOnly bool
}

type trackedObject struct {
	obj   uploader.StoredObject
	refs  int
	owned bool // confirmed: the checkpoint owner holds it now
}

func newTracker(threads int, discarder func(context.Context, uploader.StoredObject) error, localDelete func(context.Context, string) error, log *slog.Logger, m *metrics) *tracker {
	t := &tracker{discarder: discarder, localDelete: localDelete, log: log, m: m, objects: map[string]*trackedObject{},
		locals: newLocalCopies()}
	t.wake = sync.NewCond(&t.mu)
	t.wg.Add(threads)
	for range threads {
		go t.discardLoop()
	}
	return t
}

// track starts counting references to obj: refs change sets hold it. An
// object tracked with no reference is discarded at once, with its local
// copy (a losing attempt's object, say). The local copy of a tracked object
// is tracked on its own.
func (t *tracker) track(obj uploader.StoredObject, refs int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if refs <= 0 {
		t.enqueueLocked(discardItem{obj: obj})
		return
	}
	if obj.LocalName != "" {
		// Without a local backend (the storage has no local recovery) the
		// copy is not tracked, so no local handle ever points to it.
		if t.localDelete != nil {
			t.locals.add(obj.Name, obj.LocalName, obj.Size, refs)
		}
		obj.LocalName = ""
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
	t.dropLocalsLocked(t.locals.released(name))
	if o.refs > 0 {
		return
	}
	delete(t.objects, name)
	if !o.owned {
		t.enqueueLocked(discardItem{obj: o.obj})
	}
}

// claimLocal records that the local handle of writer log's checkpoint cp
// points to the local copies of the objects, if they all still exist, and
// reports whether it may be returned.
func (t *tracker) claimLocal(log LogID, objects []string, cp int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.locals.claim(log, objects, cp)
}

// confirmCheckpoint ends writer log's claims of checkpoints older than cp,
// and those of closed writers and restores.
func (t *tracker) confirmCheckpoint(log LogID, cp int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropLocalsLocked(t.locals.confirmed(log, cp))
}

// abortCheckpoint ends writer log's claims of checkpoint cp.
func (t *tracker) abortCheckpoint(log LogID, cp int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropLocalsLocked(t.locals.aborted(log, cp))
}

// writerClosed makes the claims of a closed writer the job's: a newer
// checkpoint confirmed by any writer ends them.
func (t *tracker) writerClosed(log LogID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.locals.writerClosed(log)
}

// keepRestored tracks a local copy that a crashed run left and that a
// handle being restored points to, until the first confirmed checkpoint.
// It reports false when the copy is tracked already.
func (t *tracker) keepRestored(name, localName string, size int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.locals.keepRestored(name, localName, size)
}

// localNames returns the names of the local copies tracked.
func (t *tracker) localNames() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.locals.names()
}

// dropLocalsLocked queues the deletes of local copies nothing needs.
func (t *tracker) dropLocalsLocked(drop []uploader.StoredObject) {
	for _, obj := range drop {
		t.enqueueLocked(discardItem{obj: obj, localOnly: true})
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

// discardNow deletes an object no change set ever referred to, with its
// local copy.
func (t *tracker) discardNow(obj uploader.StoredObject) { t.track(obj, 0) }

func (t *tracker) enqueueLocked(it discardItem) {
	t.queue = append(t.queue, it)
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
		it := t.queue[0]
		t.queue[0] = discardItem{}
		t.queue = t.queue[1:]
		t.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), discardTimeout)
		if it.localOnly {
			var err error
			if t.localDelete != nil {
				err = t.localDelete(ctx, it.obj.LocalName)
			}
			if err != nil {
				t.m.localDiscardFailures.Add(context.Background(), 1)
				t.log.Warn("dstl: could not delete a local copy; the next start-up cleans it (Storage.CleanLocalCopies)", "object", it.obj.LocalName, "err", err)
			} else {
				t.m.localDiscards.Add(context.Background(), 1)
			}
		} else if err := t.discarder(ctx, it.obj); err != nil {
			t.m.discardFailures.Add(context.Background(), 1)
			t.log.Warn("dstl: could not delete released object; it stays until a garbage collection of the job's prefix", "object", it.obj.Name, "err", err)
		} else {
			t.m.discards.Add(context.Background(), 1)
		}
		cancel()
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
