package conformance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
)

// The helpers below serve the tests a backend keeps of its own, beside
// [TestBackend].

// CheckError fails t unless err wraps want (is any error, when want is nil)
// and is a *[backends.Error] that names op, backend and object, in its
// message too. An empty backend stands for any non-empty identifier.
func CheckError(t testing.TB, err error, op, backend, object string, want error) {
	t.Helper()
	if err == nil {
		if want == nil {
			t.Fatalf("%s %q: no error, want one", op, object)
		}
		t.Fatalf("%s %q: no error, want %v", op, object, want)
	}
	if want != nil && !errors.Is(err, want) {
		t.Fatalf("%s %q: error %v, want %v", op, object, err, want)
	}
	be, ok := errors.AsType[*backends.Error](err)
	if !ok {
		t.Fatalf("%s %q: error %v (%T) is not a *backends.Error", op, object, err, err)
	}
	if be.Op != op || be.Object != object || be.Backend == "" || backend != "" && be.Backend != backend {
		t.Fatalf("error %v names op %q backend %q object %q, want %q %q %q",
			err, be.Op, be.Backend, be.Object, op, cmp.Or(backend, "(any)"), object)
	}
	msg := err.Error()
	parts := []string{be.Backend, op, strconv.Quote(object)}
	if want != nil {
		parts = append(parts, want.Error())
	}
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("error message %q does not mention %q", msg, p)
		}
	}
}

// Put stores data under name, failing t on an error.
func Put(t testing.TB, b backends.Backend, name, data string) {
	t.Helper()
	if err := b.Put(t.Context(), name, strings.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%q): %v", name, err)
	}
}

// Read returns length bytes of the object from offset on (-1: to the end),
// read whole from the reader Get returns, which it closes.
func Read(ctx context.Context, b backends.Backend, name string, offset, length int64) (string, error) {
	r, err := b.Get(ctx, name, offset, length)
	if err != nil {
		return "", err
	}
	data, err := io.ReadAll(r)
	if cerr := r.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	return string(data), err
}
