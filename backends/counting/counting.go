// Package counting wraps a [backends.Backend] to count the requests and bytes
// that go through it: how many puts, gets, deletes and lists a workload
// costs, which is what a cloud store bills. The CLI's demo and bench report
// these counts; tests use them to check how many requests an operation
// makes.
//
// The wrapper is no backend of its own and registers no identifier: wrap
// the backend a program opened.
//
//	b := counting.New(backend)
//	storage, err := dstl.New(cfg, b)
//	...
//	fmt.Println(b.Stats().Requests(), "requests")
package counting

import (
	"context"
	"io"
	"sync/atomic"

	"github.com/dstlgo/dstl/backends"
)

// Stats are the counters of a [Backend].
type Stats struct {
	Puts    int64 // Put calls, failed ones included
	Gets    int64 // Get calls, failed ones included
	Deletes int64 // Delete calls, failed ones included
	Lists   int64 // List calls, failed ones included
	Errors  int64 // calls that returned an error (List: not the callback's)

	BytesPut  int64 // bytes stored by successful Puts
	BytesRead int64 // bytes read from the readers Get returned
}

// Requests returns the number of calls of all operations.
func (s Stats) Requests() int64 { return s.Puts + s.Gets + s.Deletes + s.Lists }

// Backend is a [backends.Backend] that passes every call to another backend
// and counts the calls and the bytes that went through. Results and errors
// pass through unchanged. It is safe for concurrent use.
type Backend struct {
	b backends.Backend

	puts, gets, deletes, lists, errors atomic.Int64
	bytesPut, bytesRead                atomic.Int64
}

var _ backends.Backend = (*Backend)(nil)

// New returns a Backend that passes calls to b.
func New(b backends.Backend) *Backend { return &Backend{b: b} }

// Unwrap returns the backend the calls go to.
func (c *Backend) Unwrap() backends.Backend { return c.b }

// Stats returns the counters so far.
func (c *Backend) Stats() Stats {
	return Stats{
		Puts:      c.puts.Load(),
		Gets:      c.gets.Load(),
		Deletes:   c.deletes.Load(),
		Lists:     c.lists.Load(),
		Errors:    c.errors.Load(),
		BytesPut:  c.bytesPut.Load(),
		BytesRead: c.bytesRead.Load(),
	}
}

func (c *Backend) count(err error) error {
	if err != nil {
		c.errors.Add(1)
	}
	return err
}

// Put calls Put of the wrapped backend.
func (c *Backend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	c.puts.Add(1)
	err := c.b.Put(ctx, name, body, size)
	if err == nil {
		c.bytesPut.Add(size)
	}
	return c.count(err)
}

// Get calls Get of the wrapped backend; the bytes read from the reader are
// counted.
func (c *Backend) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	c.gets.Add(1)
	r, err := c.b.Get(ctx, name, offset, length)
	if err != nil {
		return nil, c.count(err)
	}
	return &reader{ReadCloser: r, n: &c.bytesRead}, nil
}

// reader counts the bytes read through it into n.
type reader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// Delete calls Delete of the wrapped backend.
func (c *Backend) Delete(ctx context.Context, name string) error {
	c.deletes.Add(1)
	return c.count(c.b.Delete(ctx, name))
}

// List calls List of the wrapped backend. An error of fn is returned as it
// is and not counted as a failed call.
func (c *Backend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	c.lists.Add(1)
	var fnErr error
	err := c.b.List(ctx, prefix, func(o backends.ObjectInfo) error {
		fnErr = fn(o)
		return fnErr
	})
	if err != nil && err != fnErr {
		c.errors.Add(1)
	}
	return err
}

// Close closes the wrapped backend.
func (c *Backend) Close() error { return c.b.Close() }
