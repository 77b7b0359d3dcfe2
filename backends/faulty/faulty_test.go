package faulty_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/faulty"
	"github.com/dstlgo/dstl/backends/mem"
	"github.com/dstlgo/dstl/conformance"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errBoom = errors.New("boom")

// open returns a wrapper over a new in-memory backend holding "obj", and
// its store.
func open(t *testing.T, f faulty.Func) (*faulty.Backend, *mem.Store) {
	t.Helper()
	m, err := mem.Open(t.Context(), mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m.Store().SetObject("obj", []byte("data"))
	b := faulty.New(m, f)
	t.Cleanup(func() { b.Close() })
	return b, m.Store()
}

// on returns a Func that gives ft to the calls of op.
func on(op faulty.Op, ft faulty.Fault) faulty.Func {
	return func(c faulty.Call) faulty.Fault {
		if c.Op == op {
			return ft
		}
		return faulty.Fault{}
	}
}

// call makes one call of op on name and reads what it answers.
func call(ctx context.Context, b backends.Backend, op faulty.Op, name string) (string, error) {
	switch op {
	case faulty.OpPut:
		return "", b.Put(ctx, name, strings.NewReader("new"), 3)
	case faulty.OpGet:
		r, err := b.Get(ctx, name, 0, -1)
		if err != nil {
			return "", err
		}
		defer r.Close()
		data, err := io.ReadAll(r)
		return string(data), err
	case faulty.OpDelete:
		return "", b.Delete(ctx, name)
	case faulty.OpList:
		var names []string
		err := b.List(ctx, name, func(o backends.ObjectInfo) error { names = append(names, o.Name); return nil })
		return strings.Join(names, ","), err
	}
	panic("unknown op " + op)
}

var ops = []struct {
	op   faulty.Op
	name string
}{{faulty.OpPut, "fresh"}, {faulty.OpGet, "obj"}, {faulty.OpDelete, "obj"}, {faulty.OpList, "o"}}

// TestErr: an injected error fails the call, which is not made, with an
// error that names the wrapped backend; the Func sees each call once.
func TestErr(t *testing.T) {
	for _, tc := range ops {
		t.Run(string(tc.op), func(t *testing.T) {
			var asked []faulty.Call
			b, st := open(t, func(c faulty.Call) faulty.Fault {
				asked = append(asked, c)
				if c.Op == tc.op {
					return faulty.Fault{Err: errBoom}
				}
				return faulty.Fault{}
			})
			_, err := call(t.Context(), b, tc.op, tc.name)
			conformance.CheckError(t, err, string(tc.op), mem.ID, tc.name, errBoom)
			if len(asked) != 1 || asked[0].Op != tc.op || asked[0].Name != tc.name || (tc.op == faulty.OpPut) != (asked[0].Body != nil) {
				t.Fatalf("Func asked %+v", asked)
			}
			if got := st.Objects(""); len(got) != 1 || got[0].Name != "obj" {
				t.Fatalf("objects after a failed %s: %+v", tc.op, got)
			}
			if got := b.Leftovers(); !slices.Equal(got, map[faulty.Op][]string{faulty.OpDelete: {"obj"}}[tc.op]) {
				t.Fatalf("Leftovers = %q", got)
			}
			b.SetFunc(nil)
			if _, err := call(t.Context(), b, tc.op, tc.name); err != nil {
				t.Fatalf("without faults: %v", err)
			}
		})
	}
}

// TestLost: a call whose answer is lost takes effect, and its caller gets
// the injected error.
func TestLost(t *testing.T) {
	for _, tc := range ops {
		t.Run(string(tc.op), func(t *testing.T) {
			b, st := open(t, on(tc.op, faulty.Fault{Err: errBoom, Lost: true}))
			got, err := call(t.Context(), b, tc.op, tc.name)
			conformance.CheckError(t, err, string(tc.op), mem.ID, tc.name, errBoom)
			if got != "" {
				t.Fatalf("the caller got %q", got)
			}
			if _, stored := st.Object(tc.name); tc.op != faulty.OpList && stored != (tc.op != faulty.OpDelete) {
				t.Fatalf("%s stored after the call: %v", tc.name, stored)
			}
			if got, want := b.Leftovers(), map[faulty.Op][]string{faulty.OpPut: {"fresh"}}[tc.op]; !slices.Equal(got, want) {
				t.Fatalf("Leftovers = %q, want %q", got, want)
			}
		})
	}
	// A call that fails by itself says so.
	b, _ := open(t, on(faulty.OpPut, faulty.Fault{Err: errBoom, Lost: true}))
	if err := b.Put(t.Context(), "obj", strings.NewReader("x"), 1); !errors.Is(err, backends.ErrExists) || errors.Is(err, errBoom) {
		t.Fatalf("lost answer of a refused Put = %v", err)
	}
}

// TestInjectedBackendError: an injected *backends.Error is returned as
// it is, wrapped.
func TestInjectedBackendError(t *testing.T) {
	injected := backends.NewError("put", "other", "fresh", backends.ErrPermission)
	b, _ := open(t, on(faulty.OpPut, faulty.Fault{Err: injected}))
	err := b.Put(t.Context(), "fresh", strings.NewReader("x"), 1)
	if e, ok := errors.AsType[*backends.Error](err); !ok || e != injected || !errors.Is(err, backends.ErrPermission) {
		t.Fatalf("Put = %v", err)
	}
}

// TestNoFaultForInvalidCalls: calls that no service would see are not
// shown to the Func.
func TestNoFaultForInvalidCalls(t *testing.T) {
	b, _ := open(t, func(c faulty.Call) faulty.Fault { t.Errorf("Func asked %+v", c); return faulty.Fault{} })
	conformance.CheckError(t, b.Put(t.Context(), "", strings.NewReader(""), 0), "put", mem.ID, "", backends.ErrInvalidName)
	conformance.CheckError(t, b.Put(t.Context(), "a", nil, 0), "put", mem.ID, "a", nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	conformance.CheckError(t, b.Delete(ctx, "obj"), "delete", mem.ID, "obj", context.Canceled)
	b.Close()
	conformance.CheckError(t, b.Put(t.Context(), "a", strings.NewReader(""), 0), "put", mem.ID, "a", backends.ErrClosed)
}

// TestDelay: a delay holds the call; cancellation or Close ends it, and
// the call is not made.
func TestDelay(t *testing.T) {
	const delay = 30 * time.Millisecond
	b, st := open(t, on(faulty.OpPut, faulty.Fault{Delay: delay}))
	start := time.Now()
	conformance.Put(t, b, "a", "x")
	if d := time.Since(start); d < delay {
		t.Fatalf("put took %v, want at least %v", d, delay)
	}
	b.SetFunc(func(faulty.Call) faulty.Fault { return faulty.Fault{Delay: time.Hour} })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	conformance.CheckError(t, b.Put(ctx, "b", strings.NewReader("x"), 1), "put", mem.ID, "b", context.DeadlineExceeded)
	if _, ok := st.Object("b"); ok {
		t.Fatal("a put cancelled during its delay stored the object")
	}
	done := make(chan error)
	go func() { done <- b.Delete(context.Background(), "a") }()
	time.Sleep(10 * time.Millisecond)
	b.Close()
	conformance.CheckError(t, <-done, "delete", mem.ID, "a", backends.ErrClosed)
}

// TestStall: a stalled call waits for ReleaseStalls, its caller's
// cancellation or Close, and other calls go on meanwhile.
func TestStall(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(b *faulty.Backend, cancel context.CancelFunc)
		want error // nil: the call goes through
	}{
		{"released", func(b *faulty.Backend, _ context.CancelFunc) { b.ReleaseStalls() }, nil},
		{"cancelled", func(_ *faulty.Backend, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"closed", func(b *faulty.Backend, _ context.CancelFunc) { b.Close() }, backends.ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			b, st := open(t, func(c faulty.Call) faulty.Fault {
				return faulty.Fault{Stall: c.Op == faulty.OpPut && calls.Add(1) == 1}
			})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error)
			go func() { done <- b.Put(ctx, "stalled", strings.NewReader("x"), 1) }()
			if err := b.WaitStalled(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			conformance.Put(t, b, "other", "y")
			tc.end(b, cancel)
			err := <-done
			if tc.want == nil && err != nil {
				t.Fatalf("released put: %v", err)
			}
			if tc.want != nil {
				conformance.CheckError(t, err, "put", mem.ID, "stalled", tc.want)
			}
			if _, ok := st.Object("stalled"); ok != (tc.want == nil) {
				t.Fatalf("stored: %v", ok)
			}
			if n := b.Stalled(); n != 0 {
				t.Fatalf("Stalled = %d after the end", n)
			}
		})
	}
	b, _ := open(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := b.WaitStalled(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitStalled = %v", err)
	}
}

// TestOnCancel: what a cancellation during a delay does to a Put.
func TestOnCancel(t *testing.T) {
	for _, tc := range []struct {
		on       faulty.OnCancel
		wantErr  error // nil: the Put succeeds
		stored   bool
		leftover bool
	}{
		{faulty.Abort, context.Canceled, false, false},
		{faulty.Ignore, nil, true, false},
		{faulty.Complete, context.Canceled, true, true},
		{faulty.Late, context.Canceled, true, true},
	} {
		b, st := open(t, on(faulty.OpPut, faulty.Fault{Delay: 50 * time.Millisecond, OnCancel: tc.on, LateBy: 10 * time.Millisecond}))
		ctx, cancel := context.WithCancel(t.Context())
		body := []byte("body")
		go func() { time.Sleep(5 * time.Millisecond); cancel() }()
		err := b.Put(ctx, "p", bytes.NewReader(body), int64(len(body)))
		copy(body, "XXXX") // the caller reuses its body: a late Put has a copy
		if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
			t.Errorf("OnCancel %d: Put = %v, want %v", tc.on, err, tc.wantErr)
		}
		b.Wait()
		data, ok := st.Object("p")
		if ok != tc.stored || ok && string(data) != "body" {
			t.Errorf("OnCancel %d: stored %q, %v", tc.on, data, ok)
		}
		if got := len(b.Leftovers()) > 0; got != tc.leftover {
			t.Errorf("OnCancel %d: Leftovers %q", tc.on, b.Leftovers())
		}
	}
}

// TestCloseWaitsForLateCalls: Close waits for the calls made late, and
// then closes the wrapped backend.
func TestCloseWaitsForLateCalls(t *testing.T) {
	b, st := open(t, on(faulty.OpPut, faulty.Fault{Stall: true, OnCancel: faulty.Late, LateBy: 20 * time.Millisecond}))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- b.Put(ctx, "late", strings.NewReader("x"), 1) }()
	if err := b.WaitStalled(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Put = %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Object("late"); !ok {
		t.Fatal("Close returned before the late Put stored its object")
	}
	if err := b.Unwrap().Put(t.Context(), "after", strings.NewReader("x"), 1); !errors.Is(err, backends.ErrClosed) {
		t.Fatalf("the wrapped backend is open after Close: %v", err)
	}
}

// TestReleaseStallsReleasesOnlyCurrentStalls: a call that stalls after
// ReleaseStalls waits for the next one.
func TestReleaseStallsReleasesOnlyCurrentStalls(t *testing.T) {
	b, _ := open(t, on(faulty.OpGet, faulty.Fault{Stall: true}))
	done := make(chan error, 3)
	for range 2 {
		go func() { _, err := call(t.Context(), b, faulty.OpGet, "obj"); done <- err }()
	}
	if err := b.WaitStalled(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	b.ReleaseStalls()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	go func() { _, err := call(t.Context(), b, faulty.OpGet, "obj"); done <- err }()
	if err := b.WaitStalled(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("a call stalled after ReleaseStalls returned: %v", err)
	default:
	}
	b.ReleaseStalls()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
