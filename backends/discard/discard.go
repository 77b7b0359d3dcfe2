// Package discard provides a [backends.Backend] that stores nothing and an
// [uploader.Uploader] that encodes nothing: they measure the engine's
// write path without any I/O, as the CLI's bench and the benchmarks of
// Append do.
//
// Both break a contract on purpose (what was put cannot be read), so the
// backend registers no identifier and serves no reader.
package discard

import (
	"context"
	"io"

	"github.com/dstlgo/dstl/backends"
)

// ID names the backend in its errors; give it to [dstl.DefaultConfig].
const ID = "discard"

// Backend accepts every Put and stores nothing: Get fails with
// [backends.ErrNotFound], List lists nothing, Delete and Close do nothing. The
// zero value is ready to use and safe for concurrent use.
type Backend struct{}

var _ backends.Backend = Backend{}

// Put does nothing and succeeds.
func (Backend) Put(context.Context, string, io.ReaderAt, int64) error { return nil }

// Get fails with an error wrapping [backends.ErrNotFound].
func (Backend) Get(_ context.Context, name string, _, _ int64) (io.ReadCloser, error) {
	return nil, backends.NewError("get", ID, name, backends.ErrNotFound)
}

// Delete does nothing and succeeds.
func (Backend) Delete(context.Context, string) error { return nil }

// List calls fn for no object.
func (Backend) List(context.Context, string, func(backends.ObjectInfo) error) error { return nil }

// Close does nothing.
func (Backend) Close() error { return nil }
