package dstltest

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/conformance"
	"github.com/dstlgo/dstl/dstl"
)

func TestCounting(t *testing.T) {
	mem := NewBackend()
	c := NewCounting(mem)
	if c.Unwrap() != mem {
		t.Fatal("Unwrap")
	}
	conformance.Put(t, c, "a", "hello")
	conformance.Put(t, c, "b", "world!")
	if err := c.Put(t.Context(), "a", strings.NewReader("again"), 5); !errors.Is(err, dstl.ErrExists) {
		t.Fatalf("Put existing: %v", err)
	}
	r, err := c.Get(t.Context(), "b", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r, make([]byte, 2)); err != nil { // read only part of it
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := conformance.Read(t.Context(), c, "a", 1, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(t.Context(), "missing", 0, -1); !errors.Is(err, dstl.ErrNotFound) {
		t.Fatalf("Get missing: %v", err)
	}
	if err := c.Delete(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if got := list(t, c, ""); len(got) != 1 {
		t.Fatalf("List = %q", got)
	}
	stop := errors.New("stop")
	if err := c.List(t.Context(), "", func(dstl.ObjectInfo) error { return stop }); err != stop {
		t.Fatalf("List = %v, want the callback's error as it is", err)
	}
	mem.SetFault(FailAll(OpList, errors.New("boom")))
	if err := c.List(t.Context(), "", func(dstl.ObjectInfo) error { return nil }); err == nil {
		t.Fatal("injected list fault lost")
	}

	want := Stats{Puts: 3, Gets: 3, Deletes: 1, Lists: 3, Errors: 3, BytesPut: 11, BytesRead: 2 + 4}
	if got := c.Stats(); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
	if got := c.Stats().Requests(); got != 10 {
		t.Fatalf("Requests = %d, want 10", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mem.Put(t.Context(), "x", strings.NewReader(""), 0); !errors.Is(err, dstl.ErrClosed) {
		t.Fatalf("Close did not close the wrapped backend: %v", err)
	}
}

// TestCountingConformance checks that the wrapper passes every call, result
// and error through unchanged.
func TestCountingConformance(t *testing.T) {
	conformance.TestBackend(t, func(*testing.T) dstl.Backend { return NewCounting(NewBackend()) })
}
