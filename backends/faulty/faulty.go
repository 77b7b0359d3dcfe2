// Package faulty wraps a [backends.Backend] to inject the faults of a
// storage service into its calls: errors, answers lost after the call
// took effect, delays, stalls until released, requests that complete
// although their caller gave up, and stores that land after the caller
// was told the Put failed. Tests, simulations and benchmarks use it over
// any backend, usually an in-memory one (package
// github.com/dstlgo/dstl/backends/mem).
//
// A [Func] decides the fault of each call. The wrapper passes every call
// that is refused before it reaches a service (a name that
// [backends.CheckObjectName] rejects, a Put of a negative size or a nil
// body, a done context, a closed wrapper) to the wrapped backend without
// asking the Func, so that faults apply only where a service could fail.
// Injected faults sit above the wrapped backend: a [backends.Bucket]
// under the wrapper neither retries nor counts them.
//
//	f := faulty.New(b, func(c faulty.Call) faulty.Fault {
//		if c.Op == faulty.OpPut {
//			return faulty.Fault{Err: errBoom, Lost: true} // stored, answer lost
//		}
//		return faulty.Fault{}
//	})
package faulty

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/dstlgo/dstl/backends"
)

// Op names a backend operation.
type Op string

// The operations of a [backends.Backend].
const (
	OpPut    Op = "put"
	OpGet    Op = "get"
	OpDelete Op = "delete"
	OpList   Op = "list"
)

// Call is one call of the wrapped backend, as a [Func] sees it.
type Call struct {
	Op   Op
	Name string // the object's name; for OpList, the prefix
	// Body and Size are those of a Put: a Func may read the body (to
	// decide by what is put), and must not keep it.
	Body io.ReaderAt
	Size int64
}

// Fault is what a [Func] makes of one call. The zero Fault lets the call
// through. Its parts apply in this order: Delay, then Stall, then Err.
type Fault struct {
	// Err, when not nil, fails the call with an error that wraps it.
	// Unless Lost is set, the call is not made: a failed Put stores
	// nothing, a failed Delete leaves the object.
	Err error
	// Lost makes the call first and then fails it with Err, as when the
	// answer of a request that took effect is lost: a Put stored the
	// object, a Delete removed it. A Get's reader is closed, and a List
	// reports nothing to its callback. A call that fails by itself
	// returns its own error.
	Lost bool
	// Delay is waited before the call, as by a slow service.
	Delay time.Duration
	// Stall waits, after Delay, until [Backend.ReleaseStalls].
	Stall bool
	// OnCancel says what the caller's cancellation during Delay or Stall
	// does. Closing the wrapper ends both waits and fails the call with
	// [backends.ErrClosed], whatever OnCancel says.
	OnCancel OnCancel
	// LateBy is how long after its caller gave up a Put or Delete with
	// OnCancel [Late] is made.
	LateBy time.Duration
}

// OnCancel is what a caller's cancellation during a [Fault]'s Delay or
// Stall does. Ignore, Complete and Late apply to Puts and Deletes; a Get
// or a List whose caller gave up fails at once with its context's error.
type OnCancel int

const (
	// Abort ends the wait: the call is not made and fails with the
	// context's error.
	Abort OnCancel = iota
	// Ignore waits on as if nothing happened, then makes the call
	// without the cancellation and returns its answer: a request that
	// completed although its caller gave up.
	Ignore
	// Complete ends the wait, makes the call at once without the
	// cancellation, and fails with the context's error: the request took
	// effect, its caller is told it was cancelled.
	Complete
	// Late ends the wait and fails with the context's error at once, and
	// the call is made [Fault.LateBy] later, in the background (a
	// service that finishes a request its client abandoned). A Put's
	// body is copied before the call returns. [Backend.Wait] waits for
	// such calls, and so does Close.
	Late
)

// Func decides the fault of one call. It is called once per call that
// could reach a service, from the calling goroutine, without any lock of
// the wrapper held; it must be safe for concurrent use.
type Func func(Call) Fault

// Backend is a [backends.Backend] that passes every call to another
// backend, with the faults its [Func] decides. Errors it makes up are
// *[backends.Error] values that name the wrapped backend (by its ID
// method, as [backends.Bucket] has, else "faulty"), unless the injected
// error is one already. It is safe for concurrent use.
type Backend struct {
	b  backends.Backend
	id string

	mu        sync.Mutex
	f         Func
	closed    bool
	done      chan struct{} // closed by Close
	release   chan struct{} // closed by ReleaseStalls, then replaced
	stalled   int           // calls stalled now
	changed   chan struct{} // closed, then replaced, when stalled changes
	leftovers map[string]bool
	late      sync.WaitGroup // calls made late
}

var _ backends.Backend = (*Backend)(nil)

// New returns a Backend that passes calls to b, with the faults f decides
// (nil: none).
func New(b backends.Backend, f Func) *Backend {
	id := "faulty"
	if n, ok := b.(interface{ ID() string }); ok {
		id = n.ID()
	}
	return &Backend{
		b: b, id: id, f: f,
		done:      make(chan struct{}),
		release:   make(chan struct{}),
		changed:   make(chan struct{}),
		leftovers: map[string]bool{},
	}
}

// Unwrap returns the backend the calls go to.
func (b *Backend) Unwrap() backends.Backend { return b.b }

// SetFunc makes f decide the faults of later calls; nil injects none.
// Calls already running keep the fault they got.
func (b *Backend) SetFunc(f Func) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.f = f
}

// ReleaseStalls lets every call that is stalled now go on. Calls that
// stall later stall until the next ReleaseStalls.
func (b *Backend) ReleaseStalls() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.release)
	b.release = make(chan struct{})
}

// Stalled returns the number of calls that are stalled now.
func (b *Backend) Stalled() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stalled
}

// WaitStalled waits until at least n calls are stalled, or ctx is done.
func (b *Backend) WaitStalled(ctx context.Context, n int) error {
	for {
		b.mu.Lock()
		stalled, changed := b.stalled, b.changed
		b.mu.Unlock()
		if stalled >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("faulty: waiting for %d stalled calls (%d now): %w", n, stalled, ctx.Err())
		}
	}
}

// Wait waits for the calls that faults made late ([Late]) to end.
func (b *Backend) Wait() { b.late.Wait() }

// Leftovers returns, sorted, the names of the objects that injected
// faults may have left in the store: those stored by Puts whose callers
// got an error (Lost, [Complete], [Late]), and those whose Deletes
// failed by an injected error.
func (b *Backend) Leftovers() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.leftovers))
	for name := range b.leftovers {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Close ends the delays and stalls of running calls, which then fail
// with [backends.ErrClosed], waits for the calls made late, and closes
// the wrapped backend. Closing twice is not an error.
func (b *Backend) Close() error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.done)
	}
	b.mu.Unlock()
	b.late.Wait()
	return b.b.Close()
}

// Put stores the object through the wrapped backend, with the call's
// fault.
func (b *Backend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	ft, ok := b.fault(ctx, Call{Op: OpPut, Name: name, Body: body, Size: size})
	if !ok {
		return b.b.Put(ctx, name, body, size)
	}
	put := func(ctx context.Context) error { return b.b.Put(ctx, name, body, size) }
	late := func() (func(context.Context) error, error) {
		data := make([]byte, size)
		if _, err := io.ReadFull(io.NewSectionReader(body, 0, size), data); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { return b.b.Put(ctx, name, bytes.NewReader(data), size) }, nil
	}
	out, err := b.run(ctx, OpPut, name, ft, put, late)
	if out == lingered {
		b.leave(name)
	}
	return err
}

// Get reads the object through the wrapped backend, with the call's
// fault.
func (b *Backend) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	ft, ok := b.fault(ctx, Call{Op: OpGet, Name: name})
	if !ok {
		return b.b.Get(ctx, name, offset, length)
	}
	var r io.ReadCloser
	_, err := b.run(ctx, OpGet, name, ft, func(ctx context.Context) error {
		var err error
		r, err = b.b.Get(ctx, name, offset, length)
		if err == nil && ft.Lost && ft.Err != nil {
			r.Close() // the answer never reaches the caller
		}
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Delete deletes the object through the wrapped backend, with the call's
// fault.
func (b *Backend) Delete(ctx context.Context, name string) error {
	ft, ok := b.fault(ctx, Call{Op: OpDelete, Name: name})
	if !ok {
		return b.b.Delete(ctx, name)
	}
	del := func(ctx context.Context) error { return b.b.Delete(ctx, name) }
	out, err := b.run(ctx, OpDelete, name, ft, del, func() (func(context.Context) error, error) { return del, nil })
	if out == refused {
		b.leave(name)
	}
	return err
}

// List lists the objects through the wrapped backend, with the call's
// fault.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	if fn == nil {
		return b.b.List(ctx, prefix, fn)
	}
	ft, ok := b.fault(ctx, Call{Op: OpList, Name: prefix})
	if !ok {
		return b.b.List(ctx, prefix, fn)
	}
	if ft.Lost && ft.Err != nil {
		fn = func(backends.ObjectInfo) error { return nil } // the answer never reaches the caller
	}
	_, err := b.run(ctx, OpList, prefix, ft, func(ctx context.Context) error { return b.b.List(ctx, prefix, fn) }, nil)
	return err
}

// fault returns the fault of a call, or false when the call goes to the
// wrapped backend as it is: no Func, the wrapper closed, ctx done, a
// name that no service would see, or a Put of a negative size or a nil
// body.
func (b *Backend) fault(ctx context.Context, c Call) (Fault, bool) {
	b.mu.Lock()
	f, closed := b.f, b.closed
	b.mu.Unlock()
	if f == nil || closed || ctx.Err() != nil {
		return Fault{}, false
	}
	if c.Op != OpList && backends.CheckObjectName(c.Name) != nil {
		return Fault{}, false
	}
	if c.Op == OpPut && (c.Size < 0 || c.Body == nil) {
		return Fault{}, false
	}
	return f(c), true
}

// outcome is what became of a call with a fault.
type outcome int

const (
	answered outcome = iota // made, with its answer; or not made, for the caller's cancellation or Close
	refused                 // not made: failed by the injected error
	lingered                // made, while the caller got an error
)

// run makes a call (call) with its fault. late, when not nil (a Put or a
// Delete), returns the call to make in the background for [Late].
func (b *Backend) run(ctx context.Context, op Op, name string, ft Fault, call func(context.Context) error, late func() (func(context.Context) error, error)) (outcome, error) {
	onCancel := ft.OnCancel
	if late == nil {
		onCancel = Abort
	}
	switch err := b.wait(ctx, ft, onCancel == Ignore); {
	case errors.Is(err, backends.ErrClosed):
		return answered, b.fail(op, name, err)
	case err != nil:
		switch onCancel {
		case Complete:
			if cerr := call(context.WithoutCancel(ctx)); cerr != nil {
				return answered, cerr
			}
			return lingered, b.fail(op, name, err)
		case Late:
			c, lerr := late()
			if lerr != nil {
				return answered, b.fail(op, name, fmt.Errorf("%w (reading the body for a late call: %w)", err, lerr))
			}
			b.goLate(ctx, op, name, ft.LateBy, c)
		}
		return answered, b.fail(op, name, err)
	}
	if onCancel == Ignore {
		ctx = context.WithoutCancel(ctx)
	}
	switch {
	case ft.Err == nil:
		return answered, call(ctx)
	case !ft.Lost:
		return refused, b.fail(op, name, fmt.Errorf("injected fault: %w", ft.Err))
	}
	if err := call(ctx); err != nil {
		return answered, err
	}
	return lingered, b.fail(op, name, fmt.Errorf("injected fault: answer lost: %w", ft.Err))
}

// goLate makes call in the background, after the delay d.
func (b *Backend) goLate(ctx context.Context, op Op, name string, d time.Duration, call func(context.Context) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return // Close waits for late calls: none starts after it
	}
	b.late.Add(1)
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer b.late.Done()
		time.Sleep(d)
		if call(ctx) == nil && op == OpPut {
			b.leave(name)
		}
	}()
}

// wait waits for the fault's delay and stall; it returns the context's
// error when ctx is done first (unless ignoreCancel), or an error
// wrapping [backends.ErrClosed] when the wrapper is closed.
func (b *Backend) wait(ctx context.Context, ft Fault, ignoreCancel bool) error {
	cancelled := ctx.Done()
	if ignoreCancel {
		cancelled = nil
	}
	if ft.Delay > 0 {
		t := time.NewTimer(ft.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-cancelled:
			return ctx.Err()
		case <-b.done:
			return backends.ErrClosed
		}
	}
	if !ft.Stall {
		return nil
	}
	b.mu.Lock()
	release := b.release
	b.addStalled(1)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.addStalled(-1)
		b.mu.Unlock()
	}()
	select {
	case <-release:
		return nil
	case <-cancelled:
		return ctx.Err()
	case <-b.done:
		return backends.ErrClosed
	}
}

// addStalled changes the count of stalled calls; b.mu is held.
func (b *Backend) addStalled(d int) {
	b.stalled += d
	close(b.changed)
	b.changed = make(chan struct{})
}

// leave records name among the leftovers.
func (b *Backend) leave(name string) {
	b.mu.Lock()
	b.leftovers[name] = true
	b.mu.Unlock()
}

// fail returns err as the error of op on name: as it is when it is an
// *backends.Error already, or wraps one.
func (b *Backend) fail(op Op, name string, err error) error {
	if _, ok := errors.AsType[*backends.Error](err); ok {
		return err
	}
	return backends.NewError(string(op), b.id, name, err)
}
