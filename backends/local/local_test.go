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
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/conformance"
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

// checkBackendError checks err with [conformance.CheckError], for this
// backend.
func checkBackendError(t *testing.T, err error, op, object string, want error) {
	t.Helper()
	conformance.CheckError(t, err, op, ID, object, want)
}

// harness opens a backend on a fresh directory for the conformance suites.
// After each case, every file under the root must be an object that List
// reports: no temporary file, and no object file of a failed Put, is left
// behind.
func harness(t *testing.T) backends.Backend {
	root := t.TempDir()
	b, err := Open(t.Context(), DefaultConfig(root))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { checkRoot(t, root) })
	return b
}

// TestConformance runs the backend contract's suite.
func TestConformance(t *testing.T) { conformance.TestBackend(t, harness) }

// TestEngine runs the DSTL over the backend.
func TestEngine(t *testing.T) { conformance.TestEngine(t, harness) }

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
	if err := b.List(ctx, "", func(o backends.ObjectInfo) error { objects = append(objects, o.Name); return nil }); err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, f := range files(t, root) {
		if !strings.HasSuffix(f, "/") && !slices.Contains(objects, f) {
			t.Errorf("file %q left behind is no object", f)
		}
	}
}

// TestPutLarge crosses the boundaries of the chunks Put copies bodies in,
// or writes them in from a body in memory.
func TestPutLarge(t *testing.T) {
	data := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz"), 3*copyChunk/26+7)
	for _, tc := range []struct {
		name string
		body io.ReaderAt
	}{
		{"reader", bytes.NewReader(data)},
		{"in memory", backends.NewMemoryBody(data)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t)
			if err := b.Put(t.Context(), "big/one", tc.body, int64(len(data))); err != nil {
				t.Fatal(err)
			}
			got, err := conformance.Read(t.Context(), b, "big/one", 0, -1)
			if err != nil || got != string(data) {
				t.Fatalf("Get: %d bytes, err %v; want %d bytes", len(got), err, len(data))
			}
			got, err = conformance.Read(t.Context(), b, "big/one", copyChunk-1, 3)
			if want := string(data[copyChunk-1 : copyChunk+2]); err != nil || got != want {
				t.Fatalf("Get range = %q, %v; want %q", got, err, want)
			}
		})
	}
}

// TestPutMemoryBodyCancelled: a Put from a body in memory stops between
// chunks once its context is done, and leaves no object.
func TestPutMemoryBodyCancelled(t *testing.T) {
	b := open(t)
	data := make([]byte, 3*copyChunk)
	ctx, cancel := context.WithCancel(t.Context())
	body := &cancelAfterSlice{MemoryBody: backends.NewMemoryBody(data), cancel: cancel}
	if err := b.Put(ctx, "gone", body, int64(len(data))); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put = %v, want context.Canceled", err)
	}
	if body.slices != 1 {
		t.Errorf("%d chunks taken after the cancel, want 1", body.slices)
	}
	if _, err := conformance.Read(t.Context(), b, "gone", 0, -1); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get = %v, want not found", err)
	}
}

// TestPutMemoryBodyShort: a body in memory that ends before the Put's
// size, or that hands out fewer bytes than asked, fails the Put with
// io.ErrUnexpectedEOF as any short body does, and leaves no object.
func TestPutMemoryBodyShort(t *testing.T) {
	data := make([]byte, 3*copyChunk)
	for _, tc := range []struct {
		name string
		body io.ReaderAt
		size int64
	}{
		{"ends short", backends.NewMemoryBody(data[:100]), 101},
		{"ends short after chunks", backends.NewMemoryBody(data[:2*copyChunk+5]), int64(len(data))},
		{"hands out short slices", shortSlices{backends.NewMemoryBody(data[:copyChunk+7])}, int64(len(data))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t)
			if err := b.Put(t.Context(), "short", tc.body, tc.size); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("Put = %v, want io.ErrUnexpectedEOF", err)
			}
			if _, err := conformance.Read(t.Context(), b, "short", 0, -1); !errors.Is(err, backends.ErrNotFound) {
				t.Fatalf("Get = %v, want not found", err)
			}
		})
	}
}

// TestPutMemoryBodyShortSlices: a body whose SliceAt hands out fewer bytes
// than asked is read with ReadAt instead: the object is whole.
func TestPutMemoryBodyShortSlices(t *testing.T) {
	b := open(t)
	data := bytes.Repeat([]byte("0123456789"), 3*copyChunk/10)
	if err := b.Put(t.Context(), "whole", shortSlices{backends.NewMemoryBody(data)}, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if got, err := conformance.Read(t.Context(), b, "whole", 0, -1); err != nil || got != string(data) {
		t.Fatalf("Get: %d bytes of %d, %v", len(got), len(data), err)
	}
}

// shortSlices is a body in memory whose SliceAt hands out one byte less
// than asked.
type shortSlices struct{ *backends.MemoryBody }

func (s shortSlices) SliceAt(off, n int64) ([]byte, bool) {
	p, ok := s.MemoryBody.SliceAt(off, n)
	if ok && len(p) > 1 {
		p = p[:len(p)-1]
	}
	return p, ok
}

// cancelAfterSlice is a body in memory that cancels a context when its
// first chunk is taken.
type cancelAfterSlice struct {
	*backends.MemoryBody
	cancel func()
	slices int
}

func (c *cancelAfterSlice) SliceAt(off, n int64) ([]byte, bool) {
	if n > 1 {
		c.slices++
		c.cancel()
	}
	return c.MemoryBody.SliceAt(off, n)
}

func TestPutFileDirectoryConflict(t *testing.T) {
	b := open(t)
	conformance.Put(t, b, "file", "x")
	conformance.Put(t, b, "dir/obj", "y")
	tests := []struct{ name string }{{"file/sub"}, {"file/sub/deeper"}, {"dir"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := b.Put(t.Context(), tt.name, strings.NewReader("z"), 1)
			checkBackendError(t, err, "put", tt.name, backends.ErrInvalidName)
			if errors.Is(err, backends.ErrExists) {
				t.Fatalf("conflict reported as ErrExists: %v", err)
			}
		})
	}
	if got, want := files(t, b.Root()), []string{"dir/", "dir/obj", "file"}; !slices.Equal(got, want) {
		t.Fatalf("files = %q, want %q", got, want)
	}
}

// TestInvalidNamesTouchNothing: a name with a segment reserved for
// temporary files is rejected, and no rejected name creates a file or a
// directory.
func TestInvalidNamesTouchNothing(t *testing.T) {
	b := open(t)
	reserved := []string{".tmp-x", "a/.tmp-x/b", "a/.tmp-"}
	for _, name := range reserved {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			checkBackendError(t, b.Put(t.Context(), name, strings.NewReader("x"), 1), "put", name, backends.ErrInvalidName)
			_, err := b.Get(t.Context(), name, 0, -1)
			checkBackendError(t, err, "get", name, backends.ErrInvalidName)
			checkBackendError(t, b.Delete(t.Context(), name), "delete", name, backends.ErrInvalidName)
		})
	}
	for _, name := range append(conformance.InvalidNames(), reserved...) {
		if err := b.Put(t.Context(), name, strings.NewReader("x"), 1); !errors.Is(err, backends.ErrInvalidName) {
			t.Errorf("Put(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	if got := files(t, b.Root()); len(got) != 0 {
		t.Errorf("files = %q", got)
	}
}

// TestDeleteLeavesDirectories: Delete removes files only; a directory, even
// an empty one, is no object and stays.
func TestDeleteLeavesDirectories(t *testing.T) {
	b := open(t)
	conformance.Put(t, b, "a/b", "x")
	conformance.Put(t, b, "c/d", "y")
	for _, name := range []string{"a/b", "a", "c"} {
		if err := b.Delete(t.Context(), name); err != nil {
			t.Fatalf("Delete(%q): %v", name, err)
		}
	}
	if got, want := files(t, b.Root()), []string{"a/", "c/", "c/d"}; !slices.Equal(got, want) {
		t.Fatalf("files = %q, want %q", got, want)
	}
}

// TestListSkipsNonObjects: temporary files, symbolic links, files whose
// names are no object names, and directories are not listed.
func TestListSkipsNonObjects(t *testing.T) {
	b := open(t)
	conformance.Put(t, b, "a", "1")
	conformance.Put(t, b, "d/x", "22")
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
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a", "d/x"}},
		{"d", []string{"d/x"}},
		{"d/", []string{"d/x"}},
		{".tmp", nil},
		{"d/.tmp", nil},
		{"back", nil},
		{"sym", nil},
		{"emptydir", nil},
		{"emptydir/", nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.prefix), func(t *testing.T) {
			var got []string
			if err := b.List(t.Context(), tt.prefix, func(o backends.ObjectInfo) error { got = append(got, o.Name); return nil }); err != nil {
				t.Fatalf("List: %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("List(%q) = %q, want %q", tt.prefix, got, tt.want)
			}
		})
	}
}

// TestRemoveTemporaryFiles: the temporary files under a prefix go, objects
// and files elsewhere stay.
func TestRemoveTemporaryFiles(t *testing.T) {
	tests := []struct {
		prefix string
		want   int
		left   []string
	}{
		{"", 3, nil},
		{"job", 2, []string{".tmp-root"}},
		{"job/", 2, []string{".tmp-root"}},
		{"job/sub", 1, []string{".tmp-root", "job/.tmp-1"}},
		{"missing", 0, []string{".tmp-root", "job/.tmp-1", "job/sub/.tmp-2"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.prefix), func(t *testing.T) {
			b := open(t)
			conformance.Put(t, b, "job/a.dstl", "1")
			conformance.Put(t, b, "job/sub/b.dstl", "2")
			for _, f := range []string{".tmp-root", "job/.tmp-1", "job/sub/.tmp-2"} {
				if err := os.WriteFile(filepath.Join(b.Root(), filepath.FromSlash(f)), []byte("t"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			n, err := b.RemoveTemporaryFiles(t.Context(), tt.prefix)
			if err != nil || n != tt.want {
				t.Fatalf("RemoveTemporaryFiles(%q) = %d, %v; want %d", tt.prefix, n, err, tt.want)
			}
			for _, f := range []string{".tmp-root", "job/.tmp-1", "job/sub/.tmp-2"} {
				_, err := os.Stat(filepath.Join(b.Root(), filepath.FromSlash(f)))
				if exists := err == nil; exists != slices.Contains(tt.left, f) {
					t.Errorf("%s exists = %v after removing under %q", f, exists, tt.prefix)
				}
			}
			if got, err := conformance.Read(t.Context(), b, "job/sub/b.dstl", 0, -1); got != "2" || err != nil {
				t.Errorf("object job/sub/b.dstl = %q, %v", got, err)
			}
		})
	}
	b := open(t)
	if _, err := b.RemoveTemporaryFiles(t.Context(), "../x"); !errors.Is(err, backends.ErrInvalidName) {
		t.Errorf("RemoveTemporaryFiles(../x) = %v, want ErrInvalidName", err)
	}
}

// TestReaderOutlivesClose: a reader that Get returned before Close stays
// usable.
func TestReaderOutlivesClose(t *testing.T) {
	b := open(t)
	conformance.Put(t, b, "a", "abc")
	r, err := b.Get(t.Context(), "a", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if data, err := io.ReadAll(r); err != nil || string(data) != "abc" {
		t.Fatalf("read after Close: %q, %v", data, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
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
	if got, err := conformance.Read(t.Context(), b, "link", 0, -1); err == nil {
		t.Fatalf("Get through an escaping symlink = %q", got)
	}
	if err := b.Put(t.Context(), "dirlink/new", strings.NewReader("x"), 1); err == nil {
		t.Fatal("Put through an escaping symlink succeeded")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(outside), "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("file written outside the root: %v", err)
	}
	var names []string
	if err := b.List(t.Context(), "", func(o backends.ObjectInfo) error { names = append(names, o.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(names) != 0 {
		t.Fatalf("List = %q, want nothing", names)
	}
}

func TestPermissionError(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores file permissions")
	}
	b := open(t)
	conformance.Put(t, b, "ro/a", "x")
	dir := filepath.Join(b.Root(), "ro")
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	err := b.Put(t.Context(), "ro/b", strings.NewReader("x"), 1)
	checkBackendError(t, err, "put", "ro/b", backends.ErrPermission)
}

func TestDirectoryRemovedBehindBackend(t *testing.T) {
	b := open(t)
	conformance.Put(t, b, "a/b/one", "1")
	if err := os.RemoveAll(filepath.Join(b.Root(), "a")); err != nil {
		t.Fatal(err)
	}
	conformance.Put(t, b, "a/b/two", "2")
	if got, err := conformance.Read(t.Context(), b, "a/b/two", 0, -1); err != nil || got != "2" {
		t.Fatalf("Get = %q, %v", got, err)
	}
}

func TestClassify(t *testing.T) {
	d := &bucket{}
	pathErr := func(err error) error { return &fs.PathError{Op: "open", Path: "x", Err: err} }
	tests := []struct {
		name string
		err  error
		want driver.Code
	}{
		{"not exist", pathErr(fs.ErrNotExist), driver.NotFound},
		{"not a directory", pathErr(syscall.ENOTDIR), driver.NotFound},
		{"permission", pathErr(fs.ErrPermission), driver.Permission},
		{"exists", pathErr(fs.ErrExist), driver.Exists},
		{"other", pathErr(syscall.EIO), driver.Unknown},
		{"context", context.DeadlineExceeded, driver.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := d.Classify(tt.err); got != tt.want {
				t.Fatalf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
