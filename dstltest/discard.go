package dstltest

import (
	"context"
	"io"

	"github.com/dstlgo/dstl/dstl"
)

// DiscardID names the [Discard] backend in its errors.
const DiscardID = "discard"

// Discard is a [dstl.Backend] that accepts every Put and stores nothing: Get
// fails with [dstl.ErrNotFound], List lists nothing, Delete and Close do
// nothing. It measures the engine's write path without any I/O (as the
// benchmarks of Append do). It breaks the contract of a backend on purpose
// (what was put cannot be read), so it serves no reader. The zero value is
// ready to use and safe for concurrent use.
type Discard struct{}

var _ dstl.Backend = Discard{}

// Put does nothing and succeeds.
func (Discard) Put(context.Context, string, io.ReaderAt, int64) error { return nil }

// Get fails with an error wrapping [dstl.ErrNotFound].
func (Discard) Get(_ context.Context, name string, _, _ int64) (io.ReadCloser, error) {
	return nil, dstl.NewBackendError("get", DiscardID, name, dstl.ErrNotFound)
}

// Delete does nothing and succeeds.
func (Discard) Delete(context.Context, string) error { return nil }

// List calls fn for no object.
func (Discard) List(context.Context, string, func(dstl.ObjectInfo) error) error { return nil }

// Close does nothing.
func (Discard) Close() error { return nil }
