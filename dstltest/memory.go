// Package dstltest provides test doubles for code that uses a
// [backends.Backend]. It has an in-memory [Backend] with fault injection
// and inspection, a [ConditionStore] that honours or ignores create-only
// conditions, and an uploader that stores nothing.
//
// They are thin constructors over the in-memory driver (package
// github.com/dstlgo/dstl/backends/mem), the fault-injecting wrapper
// (package github.com/dstlgo/dstl/backends/faulty) and the
// request-counting wrapper (package github.com/dstlgo/dstl/backends/counting).
package dstltest

import (
	"context"
	"io"
	"slices"
	"sync"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/backends/faulty"
	"github.com/dstlgo/dstl/backends/mem"
)

// ID names the in-memory backend in its errors: the identifier of
// package mem. A Backend is not reached through the backend registry.
const ID = mem.ID

// Backend is an in-memory [backends.Backend] with fault injection, for
// tests: the portable layer over the in-memory driver, so that it has
// the semantics (and the errors) every backend has, under the
// fault-injecting wrapper and the request-counting one, with the
// inspection of its store.
//
// Errors are *[backends.Error] values with backend [ID]. All methods are
// safe for concurrent use, and no goroutine outlives a call.
type Backend struct {
	store  *mem.Store
	faults *faulty.Backend
	count  *counting.Backend

	mu      sync.Mutex
	deleted []string
}

var _ backends.Backend = (*Backend)(nil)

// NewBackend returns an empty in-memory backend without faults.
func NewBackend() *Backend {
	m, err := mem.Open(context.Background(), mem.Config{})
	if err != nil {
		panic("dstltest: open an in-memory backend: " + err.Error()) // the zero Config is valid
	}
	f := faulty.New(m, nil)
	return &Backend{store: m.Store(), faults: f, count: counting.New(f)}
}

// SetFault makes f decide the fault of every later call; nil removes
// fault injection. Calls already running keep the fault they got.
func (b *Backend) SetFault(f FaultFunc) {
	if f == nil {
		b.faults.SetFunc(nil)
		return
	}
	b.faults.SetFunc(func(c faulty.Call) Fault { return f(c.Op, c.Name) })
}

// ReleaseStalls lets every call that is stalled now go on. Calls that
// stall later stall until the next ReleaseStalls.
func (b *Backend) ReleaseStalls() { b.faults.ReleaseStalls() }

// Stalled returns the number of calls that are stalled now.
func (b *Backend) Stalled() int { return b.faults.Stalled() }

// WaitStalled waits until at least n calls are stalled, or ctx is done.
func (b *Backend) WaitStalled(ctx context.Context, n int) error { return b.faults.WaitStalled(ctx, n) }

// Close makes later calls fail with [backends.ErrClosed] and ends the
// delays and stalls of running ones, which then fail with it too. The
// objects stay inspectable. Closing twice is not an error.
func (b *Backend) Close() error { return b.count.Close() }

// Put stores a copy of size bytes of body under name; see
// [backends.Backend.Put].
func (b *Backend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	return b.count.Put(ctx, name, body, size)
}

// Get returns length bytes of the object from offset on (-1: to the
// end); see [backends.Backend.Get]. The bytes read from the reader count
// toward [Backend.BytesRead].
func (b *Backend) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	return b.count.Get(ctx, name, offset, length)
}

// Delete removes the object; a missing object is not an error. Every
// Delete that succeeds is recorded in [Backend.DeletedNames].
func (b *Backend) Delete(ctx context.Context, name string) error {
	if err := b.count.Delete(ctx, name); err != nil {
		return err
	}
	b.mu.Lock()
	b.deleted = append(b.deleted, name)
	b.mu.Unlock()
	return nil
}

// List calls fn for every object whose name starts with prefix, in
// lexical order, as they were when List was called; see
// [backends.Backend.List].
func (b *Backend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	return b.count.List(ctx, prefix, fn)
}

// Counts returns the number of calls by operation, failed ones included;
// operations never called are missing.
func (b *Backend) Counts() map[Op]int {
	s := b.count.Stats()
	out := map[Op]int{}
	for op, n := range map[Op]int64{OpPut: s.Puts, OpGet: s.Gets, OpDelete: s.Deletes, OpList: s.Lists} {
		if n > 0 {
			out[op] = int(n)
		}
	}
	return out
}

// Objects returns the stored objects, sorted by name.
func (b *Backend) Objects() []backends.ObjectInfo { return b.store.Objects("") }

// Len returns the number of stored objects.
func (b *Backend) Len() int { return b.store.Len() }

// ObjectBytes returns a copy of the object's bytes, and whether it exists.
func (b *Backend) ObjectBytes(name string) ([]byte, bool) { return b.store.Object(name) }

// SetObjectBytes stores a copy of data under name, replacing the object if
// it exists, without counting a call or injecting a fault. Tests use it to
// corrupt or plant objects. Readers returned by earlier Gets keep the old
// bytes.
func (b *Backend) SetObjectBytes(name string, data []byte) { b.store.SetObject(name, data) }

// BytesRead returns the number of bytes read from the readers Get
// returned.
func (b *Backend) BytesRead() int64 { return b.count.Stats().BytesRead }

// DeletedNames returns the names of the successful Delete calls, in order,
// including those of objects that did not exist.
func (b *Backend) DeletedNames() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.deleted)
}

// VerifyCreateOnly returns nil: the in-memory driver refuses a Put of an
// existing name by construction (its conformance tests show it), so the
// check of create-only puts (backends.VerifyCreateOnly) sends it nothing,
// and tests that count its requests count none of a probe's.
func (b *Backend) VerifyCreateOnly(context.Context, string) error { return nil }
