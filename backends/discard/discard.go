// Package discard provides a [backends.Backend] that stores nothing and an
// [uploader.Uploader] that encodes nothing: they measure the engine's
// write path without any I/O, as the CLI's bench and the benchmarks of
// Append do.
//
// The backend is the portable layer ([backends.Bucket]) over a driver
// that keeps nothing, so that its calls are checked like any backend's.
// Both break a contract on purpose (what was put cannot be read), so the
// backend registers no identifier and serves no reader.
package discard

import (
	"context"
	"errors"
	"io"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
)

// ID names the backend in its errors; give it to [dstl.DefaultConfig].
const ID = "discard"

// New returns a backend that accepts every valid Put and stores nothing:
// Get fails with [backends.ErrNotFound], List lists nothing, Delete
// succeeds. It is safe for concurrent use.
func New() *backends.Bucket { return backends.New(ID, bucket{}, backends.NoRetries) }

// errNotFound is the error of every read: nothing is stored.
var errNotFound = errors.New("discard: nothing is stored")

// bucket is the driver that keeps nothing.
type bucket struct{}

// Put keeps nothing and succeeds.
func (bucket) Put(context.Context, driver.Runner, string, *driver.Body, int64) error { return nil }

// Open finds nothing.
func (bucket) Open(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return nil, errNotFound
}

// Size finds nothing.
func (bucket) Size(context.Context, string) (int64, error) { return 0, errNotFound }

// Delete has nothing to delete, and succeeds.
func (bucket) Delete(context.Context, string) error { return nil }

// List lists nothing.
func (bucket) List(context.Context, driver.Runner, string, func(driver.ObjectInfo) error) error {
	return nil
}

// Classify maps the error of reads to NotFound.
func (bucket) Classify(err error) driver.Code {
	if errors.Is(err, errNotFound) {
		return driver.NotFound
	}
	return driver.Unknown
}

// Location names nothing.
func (bucket) Location(string) string { return "" }

// As sets a *driver.Root to the backend's identifier.
func (bucket) As(target any) bool {
	if r, ok := target.(*driver.Root); ok {
		*r = driver.Root{Bucket: ID}
		return true
	}
	return false
}

// Close does nothing.
func (bucket) Close() error { return nil }
