package catalog_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstltest"
)

func bytesReader(b []byte) io.ReaderAt { return bytes.NewReader(b) }

func containsName(err error, name string) bool { return strings.Contains(err.Error(), name) }

// lossy loses the answer of its nth Put: the object is stored, and the
// caller gets an error, as when a connection breaks after the service
// stored the object.
type lossy struct {
	backends.Backend
	nth  int64
	puts atomic.Int64
}

// Unwrap returns the backend the calls go to.
func (l *lossy) Unwrap() backends.Backend { return l.Backend }

var errLost = errors.New("connection reset after the request was sent")

func (l *lossy) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	err := l.Backend.Put(ctx, name, body, size)
	if l.puts.Add(1) == l.nth && err == nil {
		return errLost
	}
	return err
}

// hooked calls before, once, before the first call of op on name (for
// dstltest.OpList: the first listing after a Put of name), as when another
// process acts between two requests of a caller.
type hooked struct {
	backends.Backend
	op     dstltest.Op // default dstltest.OpPut
	name   string
	before func()
	put    atomic.Bool
	done   atomic.Bool
}

// Unwrap returns the backend the calls go to.
func (h *hooked) Unwrap() backends.Backend { return h.Backend }

func (h *hooked) hook(op dstltest.Op, name string) {
	want := h.op
	if want == "" {
		want = dstltest.OpPut
	}
	if op == dstltest.OpPut && name == h.name {
		h.put.Store(true)
	}
	if op == want && (op == dstltest.OpList && h.put.Load() || op != dstltest.OpList && name == h.name) && h.done.CompareAndSwap(false, true) {
		h.before()
	}
}

func (h *hooked) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	h.hook(dstltest.OpPut, name)
	return h.Backend.Put(ctx, name, body, size)
}

func (h *hooked) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	h.hook(dstltest.OpGet, name)
	return h.Backend.Get(ctx, name, offset, length)
}

func (h *hooked) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	h.hook(dstltest.OpList, prefix)
	return h.Backend.List(ctx, prefix, fn)
}
