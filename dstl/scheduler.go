package dstl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dstlgo/dstl/uploader"
)

// scheduler batches the upload tasks of all writers of a storage: tasks that
// arrive within the batching window (or until the size threshold) go to the
// uploader together, so they end up in one object. It counts the bytes
// queued or being uploaded and holds callers past the in-flight limit.
type scheduler struct {
	cfg     Config
	backend string // the storage id, which errors name
	up      uploader.Uploader
	tracker *tracker
	m       *metrics
	log     *slog.Logger

	ctx    context.Context // parent of every attempt; cancelled by close
	cancel context.CancelFunc
	slots  chan struct{} // one per concurrent batch (upload.num-threads)
	// preparer is up when it encodes batches ahead of their upload, and
	// ahead is held by the one batch taken and encoded while it waits for
	// a slot.
	preparer uploader.Preparer
	ahead    chan struct{}
	handoff  chan struct{} // an ending upload hands its slot to the batch encoded ahead
	// work hands an upload attempt to an idle attempt goroutine (see
	// runAttempt).
	work chan func()
	wg   sync.WaitGroup

	mu         sync.Mutex
	closed     bool
	queue      []*uploadTask
	aheadBatch []*uploadTask // the batch encoded ahead, waiting for a slot
	queueBytes int64
	timer      *time.Timer
	inFlight   int64         // bytes queued or being uploaded
	freed      chan struct{} // closed (and replaced) whenever in-flight bytes drop
	available  chan struct{} // closed while inFlight < max
	over       atomic.Bool   // inFlight >= max; read by Append without the lock
}

// newScheduler returns the scheduler of a storage: backend is the storage
// id that errors name; up stores the batches, and prep, when not nil
// (up itself), encodes them ahead; tr tracks the objects they were stored
// in.
func newScheduler(cfg Config, backend string, up uploader.Uploader, prep uploader.Preparer, tr *tracker, m *metrics, log *slog.Logger) *scheduler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &scheduler{
		cfg: cfg, backend: backend, up: up, tracker: tr, m: m, log: log,
		ctx: ctx, cancel: cancel,
		slots:     make(chan struct{}, cfg.UploadNumThreads),
		ahead:     make(chan struct{}, 1),
		handoff:   make(chan struct{}),
		work:      make(chan func()),
		freed:     make(chan struct{}),
		available: make(chan struct{}),
	}
	s.preparer = prep
	close(s.available)
	return s
}

// enqueue adds a task to the current batch. While the bytes in flight are
// at or over the limit it waits (the same rule as Available); it returns
// early with ctx's error. The check and the count happen under one lock, so
// of the tasks that see room, only the last one can take the total past the
// limit: bytes in flight stay below upload.max-in-flight plus the largest
// single task.
func (s *scheduler) enqueue(ctx context.Context, t *uploadTask) error {
	s.mu.Lock()
	for {
		if s.closed {
			s.mu.Unlock()
			return fmt.Errorf("dstl: upload: storage %w", ErrClosed)
		}
		if s.inFlight < s.cfg.UploadMaxInFlight {
			break
		}
		freed := s.freed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("dstl: waiting for upload capacity (%d bytes in flight, limit %d): %w",
				s.InFlight(), s.cfg.UploadMaxInFlight, ctx.Err())
		case <-freed:
		}
		s.mu.Lock()
	}
	s.addLocked(t)
	s.mu.Unlock()
	return nil
}

// enqueueIfRoom queues the task newTask builds if the bytes in flight are
// under the limit (the rule of enqueue), and reports whether it queued one
// or newTask had none to build. It never waits, and calls newTask only when
// there is room, under the scheduler's lock: the caller holds its writer's
// lock, so that no set is marked for an upload that then cannot start.
func (s *scheduler) enqueueIfRoom(newTask func() *uploadTask) (done bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, fmt.Errorf("dstl: upload: storage %w", ErrClosed)
	}
	if s.inFlight >= s.cfg.UploadMaxInFlight {
		return false, nil
	}
	if t := newTask(); t != nil {
		s.addLocked(t)
	}
	return true, nil
}

// addLocked counts a task in flight and adds it to the current batch.
func (s *scheduler) addLocked(t *uploadTask) {
	s.inFlight += t.LogicalSize
	s.updateAvailabilityLocked()
	s.queue = append(s.queue, t)
	s.queueBytes += t.LogicalSize
	switch {
	case s.queueBytes >= s.cfg.BatchPersistSizeThreshold || s.cfg.BatchPersistDelay <= 0:
		if s.timer != nil {
			s.timer.Stop()
			s.timer = nil
		}
		s.startDrainLocked()
	case s.timer == nil:
		s.timer = time.AfterFunc(s.cfg.BatchPersistDelay, s.onTimer)
	}
}

func (s *scheduler) onTimer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = nil
	if !s.closed {
		s.startDrainLocked()
	}
}

// startDrainLocked starts a goroutine that waits for an upload slot and
// then takes a batch from the queue (up to the size threshold; a drain for
// the rest follows at once). While every slot is busy, tasks keep joining
// the queue, so batches grow under load. With an uploader that encodes
// ahead, a batch that cannot grow any more is taken and encoded while
// every slot is busy (see drainAhead).
func (s *scheduler) startDrainLocked() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if s.preparer != nil {
			s.drainAhead()
			return
		}
		select {
		case s.slots <- struct{}{}:
		case <-s.ctx.Done():
			s.failQueue()
			return
		}
		s.drainInSlot()
	}()
}

// drainInSlot takes a batch and uploads it in the slot the caller holds,
// which it gives back.
func (s *scheduler) drainInSlot() {
	defer s.releaseSlot()
	if batch := s.takeBatch(nil); len(batch) > 0 {
		s.runBatch(batch, nil)
	}
}

// takeBatch takes the next batch from the queue, if ok (called with the
// lock held) allows, and starts a drain for the rest, which goes in the
// next object.
func (s *scheduler) takeBatch(ok func() bool) []*uploadTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok != nil && !ok() {
		return nil
	}
	batch := s.takeBatchLocked()
	if len(s.queue) > 0 && !s.closed {
		s.startDrainLocked()
	}
	return batch
}

// drainAhead is the drain of an uploader that encodes ahead. With a slot
// free, it drains as without one. While every slot is busy, one batch at
// a time is taken, if the queue holds a full one (of
// batch.persist-size-threshold bytes, which could not grow before a slot
// frees), and encoded; it then waits for a slot, which only puts it, its
// attempts putting the same bytes. A smaller batch waits for a slot as
// without a preparer, so that it takes in what arrives meanwhile. A batch
// whose encoding failed is uploaded as without a preparer (each attempt
// encodes it, and fails as it would have).
func (s *scheduler) drainAhead() {
	select {
	case s.slots <- struct{}{}:
		s.drainInSlot()
		return
	default:
	}
	select {
	case s.slots <- struct{}{}:
		s.drainInSlot()
		return
	case s.ahead <- struct{}{}:
	case <-s.ctx.Done():
		s.failQueue()
		return
	}
	batch := s.takeBatch(func() bool { return s.queueBytes >= s.cfg.BatchPersistSizeThreshold })
	if batch == nil {
		<-s.ahead
		select {
		case s.slots <- struct{}{}:
			s.drainInSlot()
		case <-s.ctx.Done():
			s.failQueue()
		}
		return
	}
	s.mu.Lock()
	s.aheadBatch = batch
	s.mu.Unlock()
	for _, t := range batch {
		t.prepare()
	}
	prepared, err := s.preparer.Prepare(s.ctx, uploaderTasks(batch))
	if err != nil {
		s.log.Warn("dstl: encoding a batch ahead failed; its attempts encode it", "tasks", len(batch), "err", err)
		prepared = nil
	}
	var closed bool
	select {
	case s.slots <- struct{}{}:
	case <-s.handoff: // an upload that ended gave its slot to this batch
	case <-s.ctx.Done():
		closed = true
	}
	s.mu.Lock()
	s.aheadBatch = nil
	s.mu.Unlock()
	<-s.ahead
	if closed {
		if prepared != nil {
			prepared.Release()
		}
		s.finish(batch, nil, fmt.Errorf("dstl: upload: storage %w", ErrClosed))
		return
	}
	defer s.releaseSlot()
	s.runBatch(batch, prepared)
}

// releaseSlot gives the caller's upload slot to the batch encoded ahead,
// if it waits for one, or else back. Drains that wait for a slot take
// newer batches, and under load many wait: without the hand-over, the
// batch taken ahead (the oldest, perhaps with the tasks a checkpoint
// waits for) would queue behind them all.
func (s *scheduler) releaseSlot() {
	select {
	case s.handoff <- struct{}{}:
	default:
		<-s.slots
	}
}

// takeBatchLocked takes queued tasks, oldest first, up to
// batch.persist-size-threshold bytes (at least one task), so that an
// object, and so an attempt, stays bounded however far uploads lag.
func (s *scheduler) takeBatchLocked() []*uploadTask {
	var n int
	var size int64
	for n < len(s.queue) && (n == 0 || size+s.queue[n].LogicalSize <= s.cfg.BatchPersistSizeThreshold) {
		size += s.queue[n].LogicalSize
		n++
	}
	batch := slices.Clone(s.queue[:n])
	clear(s.queue[:n])
	s.queue = s.queue[n:]
	s.queueBytes -= size
	return batch
}

// failQueue fails every queued task: the storage is closing.
func (s *scheduler) failQueue() {
	s.mu.Lock()
	batch := s.queue
	s.queue, s.queueBytes = nil, 0
	s.mu.Unlock()
	s.finish(batch, nil, fmt.Errorf("dstl: upload: storage %w", ErrClosed))
}

// runBatch uploads one batch with retries and completes its tasks;
// prepared, when not nil, is the batch encoded ahead, which the attempts
// put.
func (s *scheduler) runBatch(batch []*uploadTask, prepared uploader.Prepared) {
	s.m.batchSize.Record(s.ctx, int64(len(batch)))
	for _, t := range batch {
		t.prepare()
	}
	out, settled, err := s.uploadWithRetries(batch, prepared)
	if err != nil && settled != nil {
		// Cancelled attempts may still be reading the change sets: they go
		// back to their writers (to be uploaded again) once all have ended.
		<-settled
	}
	s.finish(batch, out, err)
	if settled == nil {
		return // closing: an attempt may still read the buffers
	}
	recycle := func() {
		if prepared != nil {
			prepared.Release()
		}
		for _, t := range batch {
			t.release()
		}
	}
	select {
	case <-settled:
		recycle()
	default:
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			<-settled
			recycle()
		}()
	}
}

// finish completes or fails the tasks and gives their bytes back.
func (s *scheduler) finish(batch []*uploadTask, out *uploader.Output, err error) {
	if len(batch) == 0 {
		return
	}
	if err == nil {
		refs := map[string]int{}
		for _, tr := range out.Tasks {
			for _, r := range tr.Results {
				refs[r.Object]++
			}
		}
		for _, obj := range out.Objects {
			s.tracker.track(obj, refs[obj.Name])
		}
	} else if !s.closing(err) {
		s.m.uploadFailures.Add(context.Background(), 1)
	}
	// Give the bytes back first, so that whoever learns of the completion
	// also sees the capacity.
	var size int64
	for _, t := range batch {
		size += t.LogicalSize
	}
	s.mu.Lock()
	s.inFlight -= size
	close(s.freed)
	s.freed = make(chan struct{})
	s.updateAvailabilityLocked()
	s.mu.Unlock()
	if err != nil {
		for _, t := range batch {
			t.done(nil, err)
		}
		return
	}
	byTask := engineTasks(batch)
	for _, tr := range out.Tasks {
		byTask[tr.Task].done(tr.Results, nil)
	}
}

// closing reports whether err failed an upload because the storage is
// closing (its tasks were queued, or their attempts cancelled), which is no
// upload failure.
func (s *scheduler) closing(err error) bool {
	return s.ctx.Err() != nil && (errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled))
}

// checkOutput verifies that an uploader returned, for every task of the
// batch and no other, one result per change set, each in an object it
// wrote. (A wrapping uploader with a bug is not helped by another attempt.)
func checkOutput(batch []*uploadTask, out *uploader.Output) error {
	if out == nil {
		return fmt.Errorf("%w: no output for %d tasks", errBadOutput, len(batch))
	}
	if len(out.Tasks) != len(batch) {
		return fmt.Errorf("%w: results for %d of %d tasks", errBadOutput, len(out.Tasks), len(batch))
	}
	inBatch := engineTasks(batch)
	objects := make(map[string]bool, len(out.Objects))
	for _, o := range out.Objects {
		objects[o.Name] = true
	}
	for _, tr := range out.Tasks {
		t := inBatch[tr.Task]
		if t == nil {
			return fmt.Errorf("%w: results for a task not in the batch, or twice for one", errBadOutput)
		}
		delete(inBatch, tr.Task)
		// Judge by the writer's own sets, not ChangeSets, which an
		// uploader could have changed.
		if len(tr.Results) != len(t.sets) {
			return fmt.Errorf("%w: %d results for a task of %d change sets of log %s", errBadOutput, len(tr.Results), len(t.sets), LogID(t.LogID))
		}
		for j, r := range tr.Results {
			sqn := t.sets[j].sqn
			if SequenceNumber(r.SequenceNumber) != sqn || !objects[r.Object] || r.Length <= 0 || r.Offset < 0 {
				return fmt.Errorf("%w: result %+v for change set %d of log %s (objects %v)", errBadOutput, r, sqn, LogID(t.LogID), out.Objects)
			}
		}
	}
	return nil
}

// errBadOutput: an uploader broke its contract.
var errBadOutput = errors.New("dstl: uploader returned an invalid output")

func (s *scheduler) updateAvailabilityLocked() {
	over := s.inFlight >= s.cfg.UploadMaxInFlight
	if over != s.over.Load() {
		s.over.Store(over)
		if over {
			s.available = make(chan struct{})
		} else {
			close(s.available)
		}
	}
}

// waitAvailable waits until the bytes in flight are under the limit, the
// storage closes, or ctx ends.
func (s *scheduler) waitAvailable(ctx context.Context) error {
	select {
	case <-s.Available():
		return nil
	case <-s.ctx.Done():
		return fmt.Errorf("storage %w", ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("waiting for upload capacity (%d bytes in flight, limit %d): %w",
			s.InFlight(), s.cfg.UploadMaxInFlight, ctx.Err())
	}
}

// Available returns a channel that is closed while the storage accepts more
// changes without holding callers.
func (s *scheduler) Available() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.available
}

// InFlight returns the bytes queued or being uploaded.
func (s *scheduler) InFlight() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// QueueSize returns the number of tasks waiting for the batching window
// or, taken and encoded ahead, for an upload slot.
func (s *scheduler) QueueSize() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.queue) + len(s.aheadBatch))
}

// close stops accepting tasks, cancels running attempts and waits until
// every batch goroutine has ended; queued tasks fail with ErrClosed.
func (s *scheduler) close() {
	s.mu.Lock()
	s.closed = true
	close(s.freed) // callers waiting for capacity see the close
	s.freed = make(chan struct{})
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	pending := len(s.queue) > 0
	s.mu.Unlock()
	s.cancel()
	if pending {
		s.failQueue()
	}
	s.wg.Wait()
}

// runAttempt runs an upload attempt on an idle attempt goroutine, or on a
// new one, which then stays for later attempts until the storage closes.
// An attempt goes deep into a backend's SDK (the AWS SDK's middleware
// stack alone is over a hundred frames): a goroutine started for each
// attempt would grow its stack by copying it, a few times, at every
// attempt, on the persist's path. The goroutines are about as many as
// attempts ever ran at once (an attempt that starts while the last one's
// goroutine is not back yet gets one more). It is called from a drain
// goroutine, which s.wg counts, so adding to s.wg is safe while close
// waits.
func (s *scheduler) runAttempt(f func()) {
	select {
	case s.work <- f:
		return
	default:
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			f()
			f = nil // an idle goroutine keeps nothing of its last attempt
			select {
			case f = <-s.work:
			case <-s.ctx.Done():
				return
			}
		}
	}()
}
