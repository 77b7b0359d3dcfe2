package dstltest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/conformance"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func list(t *testing.T, b backends.Backend, prefix string) []string {
	t.Helper()
	var out []string
	if err := b.List(t.Context(), prefix, func(o backends.ObjectInfo) error { out = append(out, o.Name); return nil }); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return out
}

// checkBackendError checks err with [conformance.CheckError], for the
// memory backend.
func checkBackendError(t *testing.T, err error, op Op, object string, want error) {
	t.Helper()
	conformance.CheckError(t, err, string(op), ID, object, want)
}

// harness opens a fresh in-memory backend for the conformance suites.
func harness(*testing.T) backends.Backend { return NewBackend() }

// TestConformance runs the backend contract's suite; the tests below are of
// what the in-memory backend adds: inspection, fault injection, counting.
func TestConformance(t *testing.T) { conformance.TestBackend(t, harness) }

// TestEngine runs the DSTL over the in-memory backend.
func TestEngine(t *testing.T) { conformance.TestEngine(t, harness) }

func TestInspection(t *testing.T) {
	b := NewBackend()
	defer b.Close()
	conformance.Put(t, b, "a", "hello")
	conformance.Put(t, b, "b/c", "world!")
	if _, err := conformance.Read(t.Context(), b, "a", 1, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := conformance.Read(t.Context(), b, "b/c", 0, -1); err != nil {
		t.Fatal(err)
	}
	_, _ = conformance.Read(t.Context(), b, "missing", 0, -1)
	_ = b.Delete(t.Context(), "a")
	_ = list(t, b, "")

	if got, want := b.Counts(), map[Op]int{OpPut: 2, OpGet: 3, OpDelete: 1, OpList: 1}; !maps.Equal(got, want) {
		t.Errorf("Counts = %v, want %v", got, want)
	}
	if got := b.BytesRead(); got != 3+6 {
		t.Errorf("BytesRead = %d, want 9", got)
	}
	if objs := b.Objects(); b.Len() != 1 || len(objs) != 1 || objs[0].Name != "b/c" || objs[0].Size != 6 || objs[0].ModTime.IsZero() {
		t.Errorf("Len %d, Objects %+v", b.Len(), objs)
	}
	if _, ok := b.ObjectBytes("a"); ok {
		t.Error("deleted object still has bytes")
	}

	// ObjectBytes returns a copy; SetObjectBytes corrupts or plants objects.
	data, ok := b.ObjectBytes("b/c")
	if !ok || string(data) != "world!" {
		t.Fatalf("ObjectBytes = %q, %v", data, ok)
	}
	r, err := b.Get(t.Context(), "b/c", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	data[0] = 'W'
	b.SetObjectBytes("b/c", data)
	data[1] = 'O'
	if got, _ := conformance.Read(t.Context(), b, "b/c", 0, -1); got != "World!" {
		t.Fatalf("after SetObjectBytes: %q", got)
	}
	if old, _ := io.ReadAll(r); string(old) != "world!" {
		t.Fatalf("earlier reader sees %q", old)
	}
	b.SetObjectBytes("planted", nil)
	if got := list(t, b, ""); !slices.Equal(got, []string{"b/c", "planted"}) {
		t.Fatalf("List = %q", got)
	}
	if got, want := b.Counts()[OpPut], 2; got != want {
		t.Errorf("SetObjectBytes counted as a put: %d", got)
	}
}

// TestDeletedNames: every Delete is recorded, of missing objects too.
func TestDeletedNames(t *testing.T) {
	b := NewBackend()
	defer b.Close()
	conformance.Put(t, b, "a", "x")
	for _, name := range []string{"a", "a", "never"} {
		if err := b.Delete(t.Context(), name); err != nil {
			t.Fatalf("Delete(%q): %v", name, err)
		}
	}
	if got, want := b.DeletedNames(), []string{"a", "a", "never"}; !slices.Equal(got, want) {
		t.Fatalf("DeletedNames = %q, want %q", got, want)
	}
}

// TestInspectableAfterClose: Close ends the calls, not the inspection.
func TestInspectableAfterClose(t *testing.T) {
	b := NewBackend()
	conformance.Put(t, b, "a", "abc")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if data, ok := b.ObjectBytes("a"); !ok || string(data) != "abc" {
		t.Fatalf("objects not inspectable after Close: %q, %v", data, ok)
	}
	if b.Len() != 1 || len(b.Objects()) != 1 {
		t.Fatalf("Len %d, Objects %+v after Close", b.Len(), b.Objects())
	}
}

// TestConcurrentFaults: faults set, calls counted and objects inspected while
// calls run.
func TestConcurrentFaults(t *testing.T) {
	b := NewBackend()
	defer b.Close()
	errBoom := errors.New("boom")
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, 10*n)
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("obj/%03d", i)
			data := bytes.Repeat([]byte{byte(i)}, 100)
			if err := b.Put(t.Context(), name, bytes.NewReader(data), 100); err != nil && !errors.Is(err, errBoom) {
				errs <- err
				return
			}
			if got, err := conformance.Read(t.Context(), b, name, 0, -1); err == nil && got != string(data) {
				errs <- fmt.Errorf("%s: wrong bytes", name)
			}
			_ = list(t, b, "obj/")
		})
		wg.Go(func() {
			data := fmt.Sprint(i)
			err := b.Put(t.Context(), "race", strings.NewReader(data), int64(len(data)))
			if err != nil && !errors.Is(err, backends.ErrExists) && !errors.Is(err, errBoom) {
				errs <- err
			}
		})
		wg.Go(func() {
			if i%10 == 0 {
				b.SetFault(FailNth(OpPut, 3, errBoom))
			}
			_ = b.Counts()
			_ = b.Objects()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := b.Counts()[OpPut]; got != 2*n {
		t.Errorf("puts counted: %d, want %d", got, 2*n)
	}
	if _, ok := b.ObjectBytes("race"); !ok {
		t.Error("no put of the raced name succeeded")
	}
}
