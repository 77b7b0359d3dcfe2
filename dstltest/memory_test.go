package dstltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dstlgo/dstl/conformance"
	"github.com/dstlgo/dstl/dstl"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func put(t *testing.T, b dstl.Backend, name, data string) {
	t.Helper()
	if err := b.Put(t.Context(), name, strings.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%q): %v", name, err)
	}
}

func get(ctx context.Context, b dstl.Backend, name string, offset, length int64) (string, error) {
	r, err := b.Get(ctx, name, offset, length)
	if err != nil {
		return "", err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	return string(data), err
}

func list(t *testing.T, b dstl.Backend, prefix string) []string {
	t.Helper()
	var out []string
	if err := b.List(t.Context(), prefix, func(o dstl.ObjectInfo) error { out = append(out, o.Name); return nil }); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return out
}

// checkBackendError checks that err is a *dstl.BackendError naming op, the
// memory backend and object, and wrapping want.
func checkBackendError(t *testing.T, err error, op Op, object string, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v: want %v", err, want)
	}
	be, ok := errors.AsType[*dstl.BackendError](err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *dstl.BackendError", err, err)
	}
	if be.Op != string(op) || be.Backend != ID || be.Object != object {
		t.Fatalf("error names op %q backend %q object %q, want %q %q %q", be.Op, be.Backend, be.Object, op, ID, object)
	}
}

func TestGetRanges(t *testing.T) {
	b := NewBackend()
	defer b.Close()
	const data = "0123456789"
	put(t, b, "obj", data)
	put(t, b, "empty", "")
	tests := []struct {
		name           string
		object         string
		offset, length int64
		want           string
		err            error
	}{
		{"whole", "obj", 0, -1, data, nil},
		{"prefix", "obj", 0, 4, "0123", nil},
		{"middle", "obj", 3, 4, "3456", nil},
		{"to end", "obj", 7, -1, "789", nil},
		{"past end is cut", "obj", 8, 100, "89", nil},
		{"zero length", "obj", 5, 0, "", nil},
		{"offset at end", "obj", 10, -1, "", nil},
		{"offset past end", "obj", 11, -1, "", dstl.ErrInvalidRange},
		{"negative offset", "obj", -1, 1, "", dstl.ErrInvalidRange},
		{"bad length", "obj", 0, -2, "", dstl.ErrInvalidRange},
		{"empty object", "empty", 0, -1, "", nil},
		{"missing", "nope", 0, -1, "", dstl.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := get(t.Context(), b, tt.object, tt.offset, tt.length)
			if tt.err != nil {
				checkBackendError(t, err, OpGet, tt.object, tt.err)
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Get = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestPutExisting(t *testing.T) {
	b := NewBackend()
	defer b.Close()
	put(t, b, "a", "original")
	err := b.Put(t.Context(), "a", strings.NewReader("new"), 3)
	checkBackendError(t, err, OpPut, "a", dstl.ErrExists)
	if got, ok := b.ObjectBytes("a"); !ok || string(got) != "original" {
		t.Fatalf("object = %q, %v", got, ok)
	}
}

// failingReader returns its data up to at, then err.
type failingReader struct {
	data []byte
	at   int64
	err  error
}

func (r *failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) <= r.at {
		return copy(p, r.data[off:]), nil
	}
	n := 0
	if off < r.at {
		n = copy(p, r.data[off:r.at])
	}
	return n, r.err
}

// cancellingReader cancels a context when read.
type cancellingReader struct {
	*strings.Reader
	cancel context.CancelFunc
}

func (r cancellingReader) ReadAt(p []byte, off int64) (int, error) {
	r.cancel()
	return r.Reader.ReadAt(p, off)
}

func TestPutFailureStoresNothing(t *testing.T) {
	errBroken := errors.New("broken")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		mk   func() (context.Context, io.ReaderAt)
		size int64
		want error
	}{
		{"cancelled", func() (context.Context, io.ReaderAt) { return cancelled, strings.NewReader("abc") }, 3, context.Canceled},
		{"cancelled while reading", func() (context.Context, io.ReaderAt) {
			ctx, cancel := context.WithCancel(context.Background())
			return ctx, cancellingReader{strings.NewReader("abc"), cancel}
		}, 3, context.Canceled},
		{"body fails half-way", func() (context.Context, io.ReaderAt) {
			return context.Background(), &failingReader{data: []byte("abcdef"), at: 3, err: errBroken}
		}, 6, errBroken},
		{"short body", func() (context.Context, io.ReaderAt) { return context.Background(), strings.NewReader("ab") }, 3, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBackend()
			defer b.Close()
			ctx, body := tt.mk()
			checkBackendError(t, b.Put(ctx, "obj", body, tt.size), OpPut, "obj", tt.want)
			if b.Len() != 0 {
				t.Fatalf("objects stored: %v", b.Objects())
			}
			put(t, b, "obj", "ok")
		})
	}
}

func TestInvalidNames(t *testing.T) {
	b := NewBackend()
	defer b.Close()
	for _, name := range []string{"", "/a", "a/", "a//b", ".", "..", "a/../b", "./a", `a\b`, "a\x00"} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			checkBackendError(t, b.Put(t.Context(), name, strings.NewReader("x"), 1), OpPut, name, dstl.ErrInvalidName)
			_, err := b.Get(t.Context(), name, 0, -1)
			checkBackendError(t, err, OpGet, name, dstl.ErrInvalidName)
			checkBackendError(t, b.Delete(t.Context(), name), OpDelete, name, dstl.ErrInvalidName)
		})
	}
	if b.Len() != 0 {
		t.Fatalf("objects stored: %v", b.Objects())
	}
}

func TestDelete(t *testing.T) {
	b := NewBackend()
	defer b.Close()
	put(t, b, "a", "x")
	for _, name := range []string{"a", "a", "never"} {
		if err := b.Delete(t.Context(), name); err != nil {
			t.Fatalf("Delete(%q): %v", name, err)
		}
	}
	if _, err := get(t.Context(), b, "a", 0, -1); !errors.Is(err, dstl.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if got, want := b.DeletedNames(), []string{"a", "a", "never"}; !slices.Equal(got, want) {
		t.Fatalf("DeletedNames = %q, want %q", got, want)
	}
}

func TestList(t *testing.T) {
	b := NewBackend()
	defer b.Close()
	names := []string{"a", "a-b", "a/x", "a/y/z", "b c", "ünï/cödé", "100%/x", "z"}
	for _, n := range names {
		put(t, b, n, n)
	}
	sorted := slices.Sorted(slices.Values(names))
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", sorted},
		{"a", []string{"a", "a-b", "a/x", "a/y/z"}},
		{"a/", []string{"a/x", "a/y/z"}},
		{"a/y", []string{"a/y/z"}},
		{"b ", []string{"b c"}},
		{"ü", []string{"ünï/cödé"}},
		{"100%", []string{"100%/x"}},
		{"nope", nil},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			if got := list(t, b, tt.prefix); !slices.Equal(got, tt.want) {
				t.Fatalf("List(%q) = %q, want %q", tt.prefix, got, tt.want)
			}
		})
	}
	for _, o := range b.Objects() {
		if o.Size != int64(len(o.Name)) || o.ModTime.IsZero() {
			t.Errorf("object %+v", o)
		}
	}
}

func TestListCallback(t *testing.T) {
	b := NewBackend()
	defer b.Close()
	put(t, b, "a", "")
	put(t, b, "b", "")
	put(t, b, "c", "")
	stop := errors.New("stop")
	var seen []string
	err := b.List(t.Context(), "", func(o dstl.ObjectInfo) error {
		seen = append(seen, o.Name)
		// The callback may call the backend.
		if err := b.Delete(t.Context(), o.Name); err != nil {
			return err
		}
		if o.Name == "b" {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("List = %v, want the callback's error as it is", err)
	}
	if want := []string{"a", "b"}; !slices.Equal(seen, want) {
		t.Fatalf("seen %q, want %q", seen, want)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = b.List(ctx, "", func(dstl.ObjectInfo) error { t.Error("callback called"); return nil })
	checkBackendError(t, err, OpList, "", context.Canceled)
}

func TestListCancelledMidway(t *testing.T) {
	b := NewBackend()
	defer b.Close()
	put(t, b, "a", "")
	put(t, b, "b", "")
	ctx, cancel := context.WithCancel(t.Context())
	n := 0
	err := b.List(ctx, "", func(dstl.ObjectInfo) error { n++; cancel(); return nil })
	checkBackendError(t, err, OpList, "", context.Canceled)
	if n != 1 {
		t.Fatalf("callback called %d times", n)
	}
}

func TestInspection(t *testing.T) {
	b := NewBackend()
	defer b.Close()
	put(t, b, "a", "hello")
	put(t, b, "b/c", "world!")
	if _, err := get(t.Context(), b, "a", 1, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := get(t.Context(), b, "b/c", 0, -1); err != nil {
		t.Fatal(err)
	}
	_, _ = get(t.Context(), b, "missing", 0, -1)
	_ = b.Delete(t.Context(), "a")
	_ = list(t, b, "")

	if got, want := b.Counts(), map[Op]int{OpPut: 2, OpGet: 3, OpDelete: 1, OpList: 1}; !maps.Equal(got, want) {
		t.Errorf("Counts = %v, want %v", got, want)
	}
	if got := b.BytesRead(); got != 3+6 {
		t.Errorf("BytesRead = %d, want 9", got)
	}
	if b.Len() != 1 || len(b.Objects()) != 1 || b.Objects()[0].Name != "b/c" || b.Objects()[0].Size != 6 {
		t.Errorf("Len %d, Objects %+v", b.Len(), b.Objects())
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
	if got, _ := get(t.Context(), b, "b/c", 0, -1); got != "World!" {
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

func TestReaderHonoursContext(t *testing.T) {
	b := NewBackend()
	defer b.Close()
	put(t, b, "a", "abc")
	ctx, cancel := context.WithCancel(t.Context())
	r, err := b.Get(ctx, "a", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err = r.Read(make([]byte, 1))
	checkBackendError(t, err, OpGet, "a", context.Canceled)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestClosed(t *testing.T) {
	b := NewBackend()
	put(t, b, "a", "abc")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	checkBackendError(t, b.Put(t.Context(), "b", strings.NewReader("x"), 1), OpPut, "b", dstl.ErrClosed)
	_, err := b.Get(t.Context(), "a", 0, -1)
	checkBackendError(t, err, OpGet, "a", dstl.ErrClosed)
	checkBackendError(t, b.Delete(t.Context(), "a"), OpDelete, "a", dstl.ErrClosed)
	checkBackendError(t, b.List(t.Context(), "p", func(dstl.ObjectInfo) error { return nil }), OpList, "p", dstl.ErrClosed)
	if data, ok := b.ObjectBytes("a"); !ok || string(data) != "abc" {
		t.Fatalf("objects not inspectable after Close: %q, %v", data, ok)
	}
}

func TestConcurrent(t *testing.T) {
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
			if got, err := get(t.Context(), b, name, 0, -1); err == nil && got != string(data) {
				errs <- fmt.Errorf("%s: wrong bytes", name)
			}
			_ = list(t, b, "obj/")
		})
		wg.Go(func() {
			data := fmt.Sprint(i)
			err := b.Put(t.Context(), "race", strings.NewReader(data), int64(len(data)))
			if err != nil && !errors.Is(err, dstl.ErrExists) && !errors.Is(err, errBoom) {
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

func TestConformance(t *testing.T) {
	conformance.TestBackend(t, func(*testing.T) dstl.Backend { return NewBackend() })
}
