// Package dstltest provides test doubles for code that uses a
// [backends.Backend]: an in-memory [Backend] with fault injection and
// inspection. The request-counting wrapper is package
// github.com/dstlgo/dstl/backends/counting; the backend that stores nothing
// is package github.com/dstlgo/dstl/backends/discard.
package dstltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
)

// ID names the in-memory backend in its errors. It is not registered in
// the backend registry.
const ID = "memory"

// Backend is an in-memory [backends.Backend] with fault injection, for tests. It
// has the semantics every backend must have: a Put is atomic (the object is
// visible only once whole) and never replaces an object ([backends.ErrExists]),
// Get is ranged, List is sorted, Delete is idempotent, and every call honours
// its context. Object names follow the rules of the strictest backend, the
// local one: a name that is empty, starts or ends with "/", contains "//", a
// "." or ".." segment, a backslash or a NUL byte fails with
// [backends.ErrInvalidName].
//
// Errors are *[backends.Error] values with backend [ID]. All methods are
// safe for concurrent use, and no goroutine outlives a call.
type Backend struct {
	mu        sync.Mutex
	objects   map[string]object
	fault     FaultFunc
	counts    map[Op]int
	bytesRead int64
	deleted   []string
	closed    bool
	done      chan struct{} // closed by Close
	release   chan struct{} // closed by ReleaseStalls, then replaced
	stalled   int           // calls stalled now
	changed   chan struct{} // closed, then replaced, when stalled changes
}

type object struct {
	data    []byte // never modified once stored
	modTime time.Time
}

var _ backends.Backend = (*Backend)(nil)

// NewBackend returns an empty in-memory backend without faults.
func NewBackend() *Backend {
	return &Backend{
		objects: map[string]object{},
		counts:  map[Op]int{},
		done:    make(chan struct{}),
		release: make(chan struct{}),
		changed: make(chan struct{}),
	}
}

// SetFault makes f decide the fault of every later call; nil removes
// fault injection. Calls already running keep the fault they got.
func (b *Backend) SetFault(f FaultFunc) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fault = f
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
			return fmt.Errorf("dstltest: waiting for %d stalled calls (%d now): %w", n, stalled, ctx.Err())
		}
	}
}

// Close makes later calls fail with [dstl.ErrClosed] and ends the delays and
// stalls of running ones, which then fail with it too. The objects stay
// inspectable. Closing twice is not an error.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.done)
	}
	return nil
}

// begin counts a call of op, checks the backend, the name and ctx, and
// applies the injected fault.
func (b *Backend) begin(ctx context.Context, op Op, name string, checkName bool) error {
	b.mu.Lock()
	b.counts[op]++
	closed, f := b.closed, b.fault
	b.mu.Unlock()
	if closed {
		return dstl.ErrClosed
	}
	if checkName {
		if err := validName(name); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if f == nil {
		return nil
	}
	ft := f(op, name)
	if ft.Delay > 0 {
		t := time.NewTimer(ft.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-b.done:
			t.Stop()
			return dstl.ErrClosed
		}
	}
	if ft.Stall {
		if err := b.stall(ctx); err != nil {
			return err
		}
	}
	if ft.Err != nil {
		return fmt.Errorf("injected fault: %w", ft.Err)
	}
	return nil
}

// stall blocks until ReleaseStalls, Close or ctx.
func (b *Backend) stall(ctx context.Context) error {
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
	case <-ctx.Done():
		return ctx.Err()
	case <-b.done:
		return dstl.ErrClosed
	}
}

// addStalled changes the count of stalled calls; b.mu is held.
func (b *Backend) addStalled(d int) {
	b.stalled += d
	close(b.changed)
	b.changed = make(chan struct{})
}

func validName(name string) error { return backends.CheckObjectName(name) }

func wrap(op Op, name string, err error) error {
	if _, ok := errors.AsType[*backends.Error](err); ok {
		return err
	}
	return backends.NewError(string(op), ID, name, err)
}

// Put stores a copy of size bytes of body under name; see
// [backends.Backend.Put]. A body shorter than size is an error.
func (b *Backend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	return wrap(OpPut, name, b.put(ctx, name, body, size))
}

func (b *Backend) put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	if err := b.begin(ctx, OpPut, name, true); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("negative size %d", size)
	}
	if body == nil {
		return errors.New("nil body")
	}
	data := make([]byte, size)
	n, err := io.ReadFull(io.NewSectionReader(body, 0, size), data)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("body ended after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
		}
		return fmt.Errorf("read body: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return dstl.ErrClosed
	}
	if _, ok := b.objects[name]; ok {
		return backends.ErrExists
	}
	b.objects[name] = object{data: data, modTime: time.Now()}
	return nil
}

// Get returns length bytes of the object from offset on (-1: to the end);
// see [backends.Backend.Get]. Reads from the returned reader fail once ctx is
// done. The bytes of the range count toward [Backend.BytesRead].
func (b *Backend) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	rc, err := b.get(ctx, name, offset, length)
	if err != nil {
		return nil, wrap(OpGet, name, err)
	}
	return rc, nil
}

func (b *Backend) get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if err := b.begin(ctx, OpGet, name, true); err != nil {
		return nil, err
	}
	if offset < 0 || length < -1 {
		return nil, fmt.Errorf("%w: offset %d, length %d", backends.ErrInvalidRange, offset, length)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, dstl.ErrClosed
	}
	o, ok := b.objects[name]
	if !ok {
		return nil, backends.ErrNotFound
	}
	size := int64(len(o.data))
	if offset > size {
		return nil, fmt.Errorf("%w: offset %d past the end of the %d-byte object", backends.ErrInvalidRange, offset, size)
	}
	end := size
	if length >= 0 && length < size-offset { // (offset+length may overflow)
		end = offset + length
	}
	b.bytesRead += end - offset
	return &reader{ctx: ctx, name: name, r: bytes.NewReader(o.data[offset:end])}, nil
}

// reader is the io.ReadCloser Get returns.
type reader struct {
	ctx  context.Context
	name string
	r    *bytes.Reader
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, wrap(OpGet, r.name, err)
	}
	return r.r.Read(p)
}

func (r *reader) Close() error { return nil }

// Delete removes the object; a missing object is not an error. Every Delete
// that gets past fault injection is recorded in [Backend.DeletedNames].
func (b *Backend) Delete(ctx context.Context, name string) error {
	return wrap(OpDelete, name, b.delete(ctx, name))
}

func (b *Backend) delete(ctx context.Context, name string) error {
	if err := b.begin(ctx, OpDelete, name, true); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return dstl.ErrClosed
	}
	delete(b.objects, name)
	b.deleted = append(b.deleted, name)
	return nil
}

// List calls fn for every object whose name starts with prefix, in lexical
// order, as they were when List was called. fn is called without locks
// held, so it may call the backend. An error from fn stops the listing and
// is returned as it is.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	err := b.begin(ctx, OpList, prefix, false)
	if err == nil && fn == nil {
		err = errors.New("nil callback")
	}
	if err != nil {
		return wrap(OpList, prefix, err)
	}
	for _, o := range b.snapshot(prefix) {
		if err := ctx.Err(); err != nil {
			return wrap(OpList, prefix, err)
		}
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// snapshot returns the objects whose names start with prefix, sorted.
func (b *Backend) snapshot(prefix string) []backends.ObjectInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]backends.ObjectInfo, 0, len(b.objects))
	for name, o := range b.objects {
		if strings.HasPrefix(name, prefix) {
			out = append(out, backends.ObjectInfo{Name: name, Size: int64(len(o.data)), ModTime: o.modTime})
		}
	}
	slices.SortFunc(out, func(x, y backends.ObjectInfo) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// Counts returns the number of calls by operation, failed ones included.
func (b *Backend) Counts() map[Op]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[Op]int, len(b.counts))
	for op, n := range b.counts {
		out[op] = n
	}
	return out
}

// Objects returns the stored objects, sorted by name.
func (b *Backend) Objects() []backends.ObjectInfo { return b.snapshot("") }

// Len returns the number of stored objects.
func (b *Backend) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.objects)
}

// ObjectBytes returns a copy of the object's bytes, and whether it exists.
func (b *Backend) ObjectBytes(name string) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.objects[name]
	if !ok {
		return nil, false
	}
	return bytes.Clone(o.data), true
}

// SetObjectBytes stores a copy of data under name, replacing the object if
// it exists, without counting a call or injecting a fault. Tests use it to
// corrupt or plant objects. Readers returned by earlier Gets keep the old
// bytes.
func (b *Backend) SetObjectBytes(name string, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objects[name] = object{data: bytes.Clone(data), modTime: time.Now()}
}

// BytesRead returns the total size of the ranges Get has returned.
func (b *Backend) BytesRead() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytesRead
}

// DeletedNames returns the names of the successful Delete calls, in order,
// including those of objects that did not exist.
func (b *Backend) DeletedNames() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.deleted)
}

// VerifyCreateOnly returns nil: the in-memory backend refuses a Put of an
// existing name by construction (its conformance tests show it), so the
// check of create-only puts (backends.VerifyCreateOnly) sends it nothing,
// and tests that count its requests count none of a probe's.
func (b *Backend) VerifyCreateOnly(context.Context, string) error { return nil }
