package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/conformance"
	"github.com/dstlgo/dstl/dstl"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// open returns a backend on a fresh directory, closed at the end of the test.
func open(t *testing.T) *Backend {
	t.Helper()
	b, err := Open(t.Context(), DefaultConfig(t.TempDir()))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func put(t *testing.T, b *Backend, name, data string) {
	t.Helper()
	if err := b.Put(t.Context(), name, strings.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%q): %v", name, err)
	}
}

func get(ctx context.Context, b *Backend, name string, offset, length int64) (string, error) {
	r, err := b.Get(ctx, name, offset, length)
	if err != nil {
		return "", err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	return string(data), err
}

// files returns every file and directory under dir, relative and sorted.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			if d.IsDir() {
				rel += "/"
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkBackendError checks that err is a *dstl.BackendError naming op, the
// backend and object, and wrapping want.
func checkBackendError(t *testing.T, err error, op, object string, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v: want %v", err, want)
	}
	be, ok := errors.AsType[*dstl.BackendError](err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *dstl.BackendError", err, err)
	}
	if be.Op != op || be.Backend != ID || be.Object != object {
		t.Fatalf("error names op %q backend %q object %q, want %q %q %q", be.Op, be.Backend, be.Object, op, ID, object)
	}
}

func TestPutGet(t *testing.T) {
	b := open(t)
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
		{"whole by length", "obj", 0, 10, data, nil},
		{"prefix", "obj", 0, 4, "0123", nil},
		{"middle", "obj", 3, 4, "3456", nil},
		{"suffix to end", "obj", 7, -1, "789", nil},
		{"past end is cut", "obj", 8, 100, "89", nil},
		{"zero length", "obj", 5, 0, "", nil},
		{"offset at end", "obj", 10, -1, "", nil},
		{"offset past end", "obj", 11, -1, "", dstl.ErrInvalidRange},
		{"negative offset", "obj", -1, 1, "", dstl.ErrInvalidRange},
		{"bad length", "obj", 0, -2, "", dstl.ErrInvalidRange},
		{"empty object", "empty", 0, -1, "", nil},
		{"empty object zero offset length", "empty", 0, 5, "", nil},
		{"missing", "nope", 0, -1, "", dstl.ErrNotFound},
		{"missing nested", "no/such/obj", 0, -1, "", dstl.ErrNotFound},
		{"under an object", "obj/x", 0, -1, "", dstl.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := get(t.Context(), b, tt.object, tt.offset, tt.length)
			if tt.err != nil {
				checkBackendError(t, err, "get", tt.object, tt.err)
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got != tt.want {
				t.Fatalf("Get = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPutLarge(t *testing.T) {
	b := open(t)
	data := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz"), 3*copyChunk/26+7)
	if err := b.Put(t.Context(), "big/one", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	got, err := get(t.Context(), b, "big/one", 0, -1)
	if err != nil || got != string(data) {
		t.Fatalf("Get: %d bytes, err %v; want %d bytes", len(got), err, len(data))
	}
	got, err = get(t.Context(), b, "big/one", copyChunk-1, 3)
	if want := string(data[copyChunk-1 : copyChunk+2]); err != nil || got != want {
		t.Fatalf("Get range = %q, %v; want %q", got, err, want)
	}
}

func TestPutLongerBodyUsesSize(t *testing.T) {
	b := open(t)
	if err := b.Put(t.Context(), "x", strings.NewReader("abcdef"), 3); err != nil {
		t.Fatal(err)
	}
	if got, err := get(t.Context(), b, "x", 0, -1); err != nil || got != "abc" {
		t.Fatalf("Get = %q, %v; want abc", got, err)
	}
}

func TestGetOnDirectory(t *testing.T) {
	b := open(t)
	put(t, b, "dir/obj", "x")
	_, err := get(t.Context(), b, "dir", 0, -1)
	checkBackendError(t, err, "get", "dir", dstl.ErrNotFound)
}

func TestPutExisting(t *testing.T) {
	b := open(t)
	put(t, b, "a/obj", "original")
	err := b.Put(t.Context(), "a/obj", strings.NewReader("other"), 5)
	checkBackendError(t, err, "put", "a/obj", dstl.ErrExists)
	if got, err := get(t.Context(), b, "a/obj", 0, -1); err != nil || got != "original" {
		t.Fatalf("after failed put: %q, %v", got, err)
	}
	if got, want := files(t, b.Root()), []string{"a/", "a/obj"}; !slices.Equal(got, want) {
		t.Fatalf("files = %q, want %q", got, want)
	}
}

func TestPutFileDirectoryConflict(t *testing.T) {
	b := open(t)
	put(t, b, "file", "x")
	put(t, b, "dir/obj", "y")
	tests := []struct{ name string }{{"file/sub"}, {"file/sub/deeper"}, {"dir"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := b.Put(t.Context(), tt.name, strings.NewReader("z"), 1)
			checkBackendError(t, err, "put", tt.name, dstl.ErrInvalidName)
			if errors.Is(err, dstl.ErrExists) {
				t.Fatalf("conflict reported as ErrExists: %v", err)
			}
		})
	}
	if got, want := files(t, b.Root()), []string{"dir/", "dir/obj", "file"}; !slices.Equal(got, want) {
		t.Fatalf("files = %q, want %q", got, want)
	}
}

// cancellingReader cancels a context once it has been read past at.
type cancellingReader struct {
	data   []byte
	at     int64
	cancel context.CancelFunc
}

func (r *cancellingReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.at {
		r.cancel()
	}
	if off >= int64(len(r.data)) {
		return 0, io.EOF
	}
	n := copy(p, r.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
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

func TestPutFailureLeavesNothing(t *testing.T) {
	errBroken := errors.New("broken body")
	data := bytes.Repeat([]byte{7}, 3*copyChunk)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  func() (context.Context, io.ReaderAt)
		size int64
		want error
	}{
		{"cancelled before", func() (context.Context, io.ReaderAt) {
			return cancelled, bytes.NewReader(data)
		}, int64(len(data)), context.Canceled},
		{"cancelled during copy", func() (context.Context, io.ReaderAt) {
			ctx, cancel := context.WithCancel(context.Background())
			return ctx, &cancellingReader{data: data, at: copyChunk, cancel: cancel}
		}, int64(len(data)), context.Canceled},
		{"cancelled at the last read", func() (context.Context, io.ReaderAt) {
			ctx, cancel := context.WithCancel(context.Background())
			return ctx, &cancellingReader{data: data, at: 2 * copyChunk, cancel: cancel}
		}, int64(len(data)), context.Canceled},
		{"body fails half-way", func() (context.Context, io.ReaderAt) {
			return context.Background(), &failingReader{data: data, at: copyChunk + 10, err: errBroken}
		}, int64(len(data)), errBroken},
		{"body shorter than size", func() (context.Context, io.ReaderAt) {
			return context.Background(), bytes.NewReader(data[:100])
		}, 101, io.ErrUnexpectedEOF},
		{"empty body, size 1", func() (context.Context, io.ReaderAt) {
			return context.Background(), bytes.NewReader(nil)
		}, 1, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := open(t)
			ctx, body := tt.ctx()
			err := b.Put(ctx, "sub/dir/obj", body, tt.size)
			checkBackendError(t, err, "put", "sub/dir/obj", tt.want)
			for _, f := range files(t, b.Root()) {
				if !strings.HasSuffix(f, "/") {
					t.Errorf("file %q left behind", f)
				}
			}
			if _, err := get(t.Context(), b, "sub/dir/obj", 0, -1); !errors.Is(err, dstl.ErrNotFound) {
				t.Errorf("Get after failed put: %v, want ErrNotFound", err)
			}
			// The name is free for a retry.
			put(t, b, "sub/dir/obj", "ok")
		})
	}
}

func TestPutArguments(t *testing.T) {
	b := open(t)
	if err := b.Put(t.Context(), "x", strings.NewReader(""), -1); err == nil {
		t.Error("negative size accepted")
	}
	if err := b.Put(t.Context(), "x", nil, 0); err == nil {
		t.Error("nil body accepted")
	}
	if got := files(t, b.Root()); len(got) != 0 {
		t.Errorf("files = %q", got)
	}
}

func TestInvalidNames(t *testing.T) {
	b := open(t)
	names := []string{
		"", "/abs", "/", ".", "..", "../x", "a/../b", "a/..", "./a", "a/./b", "a/.",
		"a/", "a//b", `a\b`, `..\x`, "a\x00b", ".tmp-x", "a/.tmp-x/b", "a/.tmp-",
	}
	for _, name := range names {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			err := b.Put(t.Context(), name, strings.NewReader("x"), 1)
			checkBackendError(t, err, "put", name, dstl.ErrInvalidName)
			_, err = b.Get(t.Context(), name, 0, -1)
			checkBackendError(t, err, "get", name, dstl.ErrInvalidName)
			err = b.Delete(t.Context(), name)
			checkBackendError(t, err, "delete", name, dstl.ErrInvalidName)
		})
	}
	if got := files(t, b.Root()); len(got) != 0 {
		t.Errorf("files = %q", got)
	}
}

func TestSymlinkEscape(t *testing.T) {
	b := open(t)
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(b.Root(), "link")); err != nil {
		t.Skipf("symlink: %v", err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(b.Root(), "dirlink")); err != nil {
		t.Fatal(err)
	}
	if got, err := get(t.Context(), b, "link", 0, -1); err == nil {
		t.Fatalf("Get through an escaping symlink = %q", got)
	}
	if err := b.Put(t.Context(), "dirlink/new", strings.NewReader("x"), 1); err == nil {
		t.Fatal("Put through an escaping symlink succeeded")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(outside), "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("file written outside the root: %v", err)
	}
	var names []string
	if err := b.List(t.Context(), "", func(o dstl.ObjectInfo) error { names = append(names, o.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(names) != 0 {
		t.Fatalf("List = %q, want nothing", names)
	}
}

func TestDelete(t *testing.T) {
	b := open(t)
	put(t, b, "a/b", "x")
	put(t, b, "file", "x")
	tests := []struct {
		name, object string
	}{
		{"existing", "a/b"},
		{"again", "a/b"},
		{"never existed", "nope"},
		{"missing parent", "no/such/thing"},
		{"under a file", "file/x"},
		{"a directory is no object", "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := b.Delete(t.Context(), tt.object); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if _, err := get(t.Context(), b, tt.object, 0, -1); !errors.Is(err, dstl.ErrNotFound) {
				t.Fatalf("Get after Delete: %v", err)
			}
		})
	}
	if got, want := files(t, b.Root()), []string{"a/", "file"}; !slices.Equal(got, want) {
		t.Fatalf("files = %q, want %q", got, want)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	checkBackendError(t, b.Delete(ctx, "file"), "delete", "file", context.Canceled)
}

func TestList(t *testing.T) {
	b := open(t)
	objects := map[string]string{
		"a":              "1",
		"a-b":            "22",
		"a.b":            "333",
		"a0":             "4",
		"ab/c":           "5",
		"d/x":            "6",
		"d/y/z":          "77",
		"d/y/z0":         "8",
		"d-/q":           "9",
		"with space/o k": "10",
		"ünï/cödé":       "11",
		"100%/50%25":     "12",
		"z":              "",
	}
	before := time.Now().Add(-time.Second)
	for name, data := range objects {
		put(t, b, name, data)
	}
	// Temporary files, symlinks and oddly named files are not objects.
	for _, f := range []string{".tmp-1", "d/.tmp-2", `back\slash`} {
		if err := os.WriteFile(filepath.Join(b.Root(), filepath.FromSlash(f)), []byte("t"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a", filepath.Join(b.Root(), "symlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(b.Root(), "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	all := make([]string, 0, len(objects))
	for name := range objects {
		all = append(all, name)
	}
	slices.Sort(all)
	withPrefix := func(p string) []string {
		var out []string
		for _, n := range all {
			if strings.HasPrefix(n, p) {
				out = append(out, n)
			}
		}
		return out
	}
	prefixes := []string{
		"", "a", "a-", "a/", "ab", "ab/", "d", "d/", "d/y", "d/y/", "d/y/z", "d-",
		"with", "with space/", "ü", "ünï/c", "100%", "100%/50%", "z", "zz",
		"nope/", "../", "./", "a//", "/", "d//y", "emptydir/", "emptydir", "sym",
	}
	for _, p := range prefixes {
		t.Run(fmt.Sprintf("%q", p), func(t *testing.T) {
			var got []string
			err := b.List(t.Context(), p, func(o dstl.ObjectInfo) error {
				got = append(got, o.Name)
				if want := int64(len(objects[o.Name])); o.Size != want {
					t.Errorf("%q: size %d, want %d", o.Name, o.Size, want)
				}
				if o.ModTime.Before(before) || o.ModTime.After(time.Now().Add(time.Second)) {
					t.Errorf("%q: mod time %v", o.Name, o.ModTime)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if want := withPrefix(p); !slices.Equal(got, want) {
				t.Fatalf("List(%q) = %q, want %q", p, got, want)
			}
		})
	}
}

func TestListCallbackError(t *testing.T) {
	b := open(t)
	put(t, b, "a", "")
	put(t, b, "b/c", "")
	put(t, b, "d", "")
	stop := errors.New("stop")
	var got []string
	err := b.List(t.Context(), "", func(o dstl.ObjectInfo) error {
		got = append(got, o.Name)
		if o.Name == "b/c" {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("List = %v, want the callback's error as it is", err)
	}
	if want := []string{"a", "b/c"}; !slices.Equal(got, want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
}

func TestListCancelled(t *testing.T) {
	b := open(t)
	put(t, b, "a", "")
	put(t, b, "b", "")
	ctx, cancel := context.WithCancel(t.Context())
	n := 0
	err := b.List(ctx, "", func(dstl.ObjectInfo) error { n++; cancel(); return nil })
	checkBackendError(t, err, "list", "", context.Canceled)
	if n != 1 {
		t.Fatalf("callback called %d times after cancel", n)
	}
}

func TestReaderHonoursContext(t *testing.T) {
	b := open(t)
	put(t, b, "a", "abcdef")
	ctx, cancel := context.WithCancel(t.Context())
	r, err := b.Get(ctx, "a", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 2)
	if _, err := io.ReadFull(r, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err = r.Read(buf)
	checkBackendError(t, err, "get", "a", context.Canceled)
}

func TestConcurrent(t *testing.T) {
	b := open(t)
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("dir%d/obj%d", i%4, i)
			data := strings.Repeat(fmt.Sprint(i), 1000)
			if err := b.Put(t.Context(), name, strings.NewReader(data), int64(len(data))); err != nil {
				errs <- err
				return
			}
			got, err := get(t.Context(), b, name, 0, -1)
			if err != nil || got != data {
				errs <- fmt.Errorf("get %s: %d bytes, %v", name, len(got), err)
			}
		})
	}
	// Racing puts of one name: exactly one wins, the others see ErrExists.
	var won sync.Map
	for i := range n {
		wg.Go(func() {
			data := fmt.Sprintf("writer %d", i)
			err := b.Put(t.Context(), "race/obj", strings.NewReader(data), int64(len(data)))
			switch {
			case err == nil:
				won.Store(data, true)
			case !errors.Is(err, dstl.ErrExists):
				errs <- err
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if err := b.List(t.Context(), "", func(dstl.ObjectInfo) error { return nil }); err != nil {
				errs <- err
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var winners []string
	won.Range(func(k, _ any) bool { winners = append(winners, k.(string)); return true })
	if len(winners) != 1 {
		t.Fatalf("%d puts of one name succeeded: %q", len(winners), winners)
	}
	if got, err := get(t.Context(), b, "race/obj", 0, -1); err != nil || got != winners[0] {
		t.Fatalf("race/obj = %q, %v; want %q", got, err, winners[0])
	}
	count := 0
	if err := b.List(t.Context(), "", func(dstl.ObjectInfo) error { count++; return nil }); err != nil {
		t.Fatal(err)
	}
	if count != n+1 {
		t.Fatalf("listed %d objects, want %d", count, n+1)
	}
	for _, f := range files(t, b.Root()) {
		if strings.Contains(f, TempPrefix) {
			t.Errorf("temporary file %q left behind", f)
		}
	}
}

func TestClosed(t *testing.T) {
	b, err := Open(t.Context(), DefaultConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	put(t, b, "a", "abc")
	r, err := b.Get(t.Context(), "a", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// A reader opened before Close stays usable.
	if data, err := io.ReadAll(r); err != nil || string(data) != "abc" {
		t.Fatalf("read after Close: %q, %v", data, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	checkBackendError(t, b.Put(t.Context(), "b", strings.NewReader("x"), 1), "put", "b", dstl.ErrClosed)
	_, err = b.Get(t.Context(), "a", 0, -1)
	checkBackendError(t, err, "get", "a", dstl.ErrClosed)
	checkBackendError(t, b.Delete(t.Context(), "a"), "delete", "a", dstl.ErrClosed)
	checkBackendError(t, b.List(t.Context(), "p", func(dstl.ObjectInfo) error { return nil }), "list", "p", dstl.ErrClosed)
}

func TestPermissionError(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores file permissions")
	}
	b := open(t)
	put(t, b, "ro/a", "x")
	dir := filepath.Join(b.Root(), "ro")
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	err := b.Put(t.Context(), "ro/b", strings.NewReader("x"), 1)
	checkBackendError(t, err, "put", "ro/b", dstl.ErrPermission)
}

func TestErrorMessageNamesOpBackendObject(t *testing.T) {
	b := open(t)
	_, err := b.Get(t.Context(), "missing/obj", 0, -1)
	msg := err.Error()
	for _, want := range []string{"local", "get", `"missing/obj"`, dstl.ErrNotFound.Error()} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
}

func TestDirectoryRemovedBehindBackend(t *testing.T) {
	b := open(t)
	put(t, b, "a/b/one", "1")
	if err := os.RemoveAll(filepath.Join(b.Root(), "a")); err != nil {
		t.Fatal(err)
	}
	put(t, b, "a/b/two", "2")
	if got, err := get(t.Context(), b, "a/b/two", 0, -1); err != nil || got != "2" {
		t.Fatalf("Get = %q, %v", got, err)
	}
}

func TestWrapClassifies(t *testing.T) {
	b := &Backend{}
	pathErr := func(err error) error { return &fs.PathError{Op: "open", Path: "x", Err: err} }
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"not exist", pathErr(fs.ErrNotExist), dstl.ErrNotFound},
		{"permission", pathErr(fs.ErrPermission), dstl.ErrPermission},
		{"closed file", pathErr(os.ErrClosed), dstl.ErrClosed},
		{"sentinel kept", fmt.Errorf("%w: x", dstl.ErrExists), dstl.ErrExists},
		{"context", context.DeadlineExceeded, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := b.wrap("put", "obj", tt.err)
			checkBackendError(t, err, "put", "obj", tt.want)
			if !errors.Is(err, tt.err) {
				t.Fatalf("cause %v lost in %v", tt.err, err)
			}
			if again := b.wrap("get", "other", err); again != err {
				t.Fatalf("a BackendError was wrapped again: %v", again)
			}
		})
	}
	if b.wrap("put", "x", nil) != nil {
		t.Fatal("wrap(nil) != nil")
	}
}

// TestConformance runs the backend contract's suite. After each case, every
// file under the root must be an object that List reports: no temporary
// file, and no object file of a failed Put, is left behind.
func TestConformance(t *testing.T) {
	conformance.TestBackend(t, func(t *testing.T) dstl.Backend {
		root := t.TempDir()
		b, err := Open(t.Context(), DefaultConfig(root))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { checkRoot(t, root) })
		return b
	})
}

// checkRoot checks, with a backend of its own, that every file under root
// is an object that List reports.
func checkRoot(t *testing.T, root string) {
	t.Helper()
	ctx := context.Background() // the test's context is done in cleanups
	b, err := Open(ctx, DefaultConfig(root))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer b.Close()
	var objects []string
	if err := b.List(ctx, "", func(o dstl.ObjectInfo) error { objects = append(objects, o.Name); return nil }); err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, f := range files(t, root) {
		if !strings.HasSuffix(f, "/") && !slices.Contains(objects, f) {
			t.Errorf("file %q left behind is no object", f)
		}
	}
}
