package counting_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/conformance"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

// TestCounting runs calls in turn through a wrapped memory backend and
// checks the counters each one adds.
func TestCounting(t *testing.T) {
	mem := dstltest.NewBackend()
	c := counting.New(mem)
	if c.Unwrap() != mem {
		t.Fatal("Unwrap does not return the wrapped backend")
	}
	stop := errors.New("stop")
	steps := []struct {
		name    string
		call    func() error
		wantErr error // nil: none
		add     counting.Stats
	}{
		{"put a", func() error { return c.Put(t.Context(), "a", strings.NewReader("hello"), 5) }, nil,
			counting.Stats{Puts: 1, BytesPut: 5}},
		{"put b", func() error { return c.Put(t.Context(), "b", strings.NewReader("world!"), 6) }, nil,
			counting.Stats{Puts: 1, BytesPut: 6}},
		{"put a again", func() error { return c.Put(t.Context(), "a", strings.NewReader("again"), 5) }, backends.ErrExists,
			counting.Stats{Puts: 1, Errors: 1}},
		{"get b, read 2 bytes", func() error {
			r, err := c.Get(t.Context(), "b", 0, -1)
			if err != nil {
				return err
			}
			if _, err := io.ReadFull(r, make([]byte, 2)); err != nil {
				return err
			}
			return r.Close()
		}, nil, counting.Stats{Gets: 1, BytesRead: 2}},
		{"get a from 1", func() error { _, err := conformance.Read(t.Context(), c, "a", 1, -1); return err }, nil,
			counting.Stats{Gets: 1, BytesRead: 4}},
		{"get missing", func() error { _, err := c.Get(t.Context(), "missing", 0, -1); return err }, backends.ErrNotFound,
			counting.Stats{Gets: 1, Errors: 1}},
		{"delete a", func() error { return c.Delete(t.Context(), "a") }, nil,
			counting.Stats{Deletes: 1}},
		{"list", func() error {
			n := 0
			err := c.List(t.Context(), "", func(backends.ObjectInfo) error { n++; return nil })
			if err == nil && n != 1 {
				err = fmt.Errorf("listed %d objects, want 1", n)
			}
			return err
		}, nil, counting.Stats{Lists: 1}},
		{"list stopped by the callback", func() error {
			return c.List(t.Context(), "", func(backends.ObjectInfo) error { return stop })
		}, stop, counting.Stats{Lists: 1}}, // the callback's error is no failed call
		{"list failing", func() error {
			mem.SetFault(dstltest.FailAll(dstltest.OpList, backends.ErrPermanent))
			defer mem.SetFault(nil)
			return c.List(t.Context(), "", func(backends.ObjectInfo) error { return nil })
		}, backends.ErrPermanent, counting.Stats{Lists: 1, Errors: 1}},
	}
	var want counting.Stats
	for _, s := range steps {
		err := s.call()
		if !errors.Is(err, s.wantErr) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.wantErr)
		}
		if s.wantErr == stop && err != stop {
			t.Fatalf("%s: %v, want the callback's error as it is", s.name, err)
		}
		want = add(want, s.add)
		if got := c.Stats(); got != want {
			t.Fatalf("after %s: Stats = %+v, want %+v", s.name, got, want)
		}
	}
	if got, n := c.Stats().Requests(), want.Puts+want.Gets+want.Deletes+want.Lists; got != n || n != 10 {
		t.Fatalf("Requests = %d, want %d (10)", got, n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mem.Put(t.Context(), "x", strings.NewReader(""), 0); !errors.Is(err, dstl.ErrClosed) {
		t.Fatalf("Close did not close the wrapped backend: %v", err)
	}
}

func add(a, b counting.Stats) counting.Stats {
	return counting.Stats{
		Puts: a.Puts + b.Puts, Gets: a.Gets + b.Gets, Deletes: a.Deletes + b.Deletes, Lists: a.Lists + b.Lists,
		Errors: a.Errors + b.Errors, BytesPut: a.BytesPut + b.BytesPut, BytesRead: a.BytesRead + b.BytesRead,
	}
}

// TestCountingConcurrent checks that no call is lost when many run at once.
func TestCountingConcurrent(t *testing.T) {
	c := counting.New(dstltest.NewBackend())
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("o-%d", i)
			if err := c.Put(t.Context(), name, strings.NewReader("abc"), 3); err != nil {
				t.Error(err)
			}
			if _, err := conformance.Read(t.Context(), c, name, 0, -1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, want := c.Stats(), (counting.Stats{Puts: n, Gets: n, BytesPut: 3 * n, BytesRead: 3 * n}); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}

// TestConformance checks that the wrapper passes every call, result and
// error through unchanged.
func TestConformance(t *testing.T) {
	conformance.TestBackend(t, func(*testing.T) backends.Backend { return counting.New(dstltest.NewBackend()) })
}
