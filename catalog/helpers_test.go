package catalog_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"

	"github.com/dstlgo/dstl/backends"
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

var errLost = errors.New("connection reset after the request was sent")

func (l *lossy) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	err := l.Backend.Put(ctx, name, body, size)
	if l.puts.Add(1) == l.nth && err == nil {
		return errLost
	}
	return err
}

// hooked calls before, once, before the first Put of name, or, with
// list set, before the first List after that Put, as when another process
// acts between a caller's listing and its write, or its write and its
// listing.
type hooked struct {
	backends.Backend
	name   string
	list   bool
	before func()
	put    atomic.Bool
	done   atomic.Bool
}

func (h *hooked) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	if name == h.name && h.put.CompareAndSwap(false, true) && !h.list && h.done.CompareAndSwap(false, true) {
		h.before()
	}
	return h.Backend.Put(ctx, name, body, size)
}

func (h *hooked) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	if h.list && h.put.Load() && h.done.CompareAndSwap(false, true) {
		h.before()
	}
	return h.Backend.List(ctx, prefix, fn)
}
