package dstltest

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/conformance"
	"github.com/dstlgo/dstl/dstl"
)

// call makes one call of op on name ("obj" exists with "data").
func call(ctx context.Context, b *Backend, op Op, name string) error {
	switch op {
	case OpPut:
		return b.Put(ctx, name, strings.NewReader("new"), 3)
	case OpGet:
		r, err := b.Get(ctx, name, 0, -1)
		if err == nil {
			_, err = io.ReadAll(r)
			r.Close()
		}
		return err
	case OpDelete:
		return b.Delete(ctx, name)
	case OpList:
		return b.List(ctx, name, func(backends.ObjectInfo) error { return nil })
	}
	panic("unknown op " + op)
}

func TestFaultErr(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		op   Op
		name string
		err  error
	}{
		{OpPut, "fresh", errBoom},
		{OpGet, "obj", errBoom},
		{OpDelete, "obj", backends.ErrPermission},
		{OpList, "o", errBoom},
	}
	for _, tt := range tests {
		t.Run(string(tt.op), func(t *testing.T) {
			b := NewBackend()
			defer b.Close()
			conformance.Put(t, b, "obj", "data")
			before := b.Counts()
			var asked []string
			b.SetFault(func(op Op, name string) Fault {
				asked = append(asked, string(op)+" "+name)
				if op == tt.op {
					return Fault{Err: tt.err}
				}
				return Fault{}
			})
			checkBackendError(t, call(t.Context(), b, tt.op, tt.name), tt.op, tt.name, tt.err)
			if want := string(tt.op) + " " + tt.name; len(asked) != 1 || asked[0] != want {
				t.Fatalf("fault func asked %q, want [%q]", asked, want)
			}
			if got, want := b.Counts()[tt.op], before[tt.op]+1; got != want {
				t.Fatalf("%s counted %d times, want %d", tt.op, got, want)
			}
			// Nothing changed.
			if got := b.Objects(); len(got) != 1 || got[0].Name != "obj" {
				t.Fatalf("objects after failed %s: %+v", tt.op, got)
			}
			if len(b.DeletedNames()) != 0 || b.BytesRead() != 0 {
				t.Fatalf("failed call recorded: deleted %q, read %d", b.DeletedNames(), b.BytesRead())
			}
			b.SetFault(nil)
			if err := call(t.Context(), b, tt.op, tt.name); err != nil {
				t.Fatalf("after SetFault(nil): %v", err)
			}
		})
	}
}

func TestFailNthAndFailAll(t *testing.T) {
	errBoom := errors.New("boom")
	b := NewBackend()
	defer b.Close()
	b.SetFault(Combine(FailNth(OpPut, 2, errBoom), FailAll(OpDelete, backends.ErrPermission)))
	var results []bool
	for _, name := range []string{"a", "b", "c", "d"} {
		err := b.Put(t.Context(), name, strings.NewReader(name), 1)
		if err != nil && !errors.Is(err, errBoom) {
			t.Fatal(err)
		}
		results = append(results, err == nil)
	}
	if want := []bool{true, false, true, true}; !equalBools(results, want) {
		t.Fatalf("put results %v, want %v", results, want)
	}
	if got := list(t, b, ""); strings.Join(got, ",") != "a,c,d" {
		t.Fatalf("objects %q", got)
	}
	for range 2 {
		checkBackendError(t, b.Delete(t.Context(), "a"), OpDelete, "a", backends.ErrPermission)
	}
	if _, err := conformance.Read(t.Context(), b, "a", 0, -1); err != nil {
		t.Fatal(err)
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCombine(t *testing.T) {
	e1, e2 := errors.New("1"), errors.New("2")
	f := Combine(
		func(Op, string) Fault { return Fault{Delay: time.Second} },
		nil,
		func(Op, string) Fault { return Fault{Err: e1, Delay: time.Second} },
		func(Op, string) Fault { return Fault{Err: e2, Stall: true} },
	)
	got := f(OpGet, "x")
	if got.Err != e1 || got.Delay != 2*time.Second || !got.Stall {
		t.Fatalf("Combine = %+v", got)
	}
	if (Combine()(OpGet, "x") != Fault{}) {
		t.Fatal("empty Combine injects a fault")
	}
}

func TestStall(t *testing.T) {
	tests := []struct {
		name string
		end  func(b *Backend, cancel context.CancelFunc)
		want error // nil: the call goes through
	}{
		{"released", func(b *Backend, _ context.CancelFunc) { b.ReleaseStalls() }, nil},
		{"cancelled", func(_ *Backend, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"closed", func(b *Backend, _ context.CancelFunc) { b.Close() }, dstl.ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBackend()
			defer b.Close()
			b.SetFault(StallFirst(OpPut))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error)
			go func() { done <- b.Put(ctx, "stalled", strings.NewReader("x"), 1) }()
			if err := b.WaitStalled(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			// Other calls are not held up by the stalled one.
			conformance.Put(t, b, "other", "y")
			select {
			case err := <-done:
				t.Fatalf("stalled put returned early: %v", err)
			default:
			}
			tt.end(b, cancel)
			err := <-done
			if tt.want == nil {
				if err != nil {
					t.Fatalf("released put: %v", err)
				}
				if _, ok := b.ObjectBytes("stalled"); !ok {
					t.Fatal("released put stored nothing")
				}
			} else {
				checkBackendError(t, err, OpPut, "stalled", tt.want)
				if _, ok := b.ObjectBytes("stalled"); ok {
					t.Fatal("failed put stored the object")
				}
			}
			if n := b.Stalled(); n != 0 {
				t.Fatalf("Stalled = %d after the end", n)
			}
		})
	}
}
