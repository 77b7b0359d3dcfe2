package driver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
)

// dirDriver is a minimal driver: objects are files named by their object
// name with "/" replaced, in one directory. It makes the calls of its
// "service" (the filesystem) and classifies their errors; it checks
// nothing, because backends.Bucket does.
type dirDriver struct{ dir string }

func (d dirDriver) path(name string) string {
	return filepath.Join(d.dir, strings.ReplaceAll(name, "/", "%2F"))
}

func (d dirDriver) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	// One request, sent through rt: it is timed and retried as the
	// backend's policy says.
	return rt.Do(ctx, size, func(ctx context.Context) error {
		data, err := body.Bytes(0, size)
		if err != nil {
			return err // a failing body is never retried
		}
		f, err := os.OpenFile(d.path(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644) // create-only
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		return errors.Join(err, f.Close())
	})
}

func (d dirDriver) Open(_ context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	data, err := os.ReadFile(d.path(name))
	if err != nil {
		return nil, err
	}
	if offset > int64(len(data)) {
		return nil, errOffset
	}
	data = data[offset:]
	if length >= 0 && length < int64(len(data)) {
		data = data[:length]
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

var errOffset = errors.New("offset past the end")

func (d dirDriver) Size(_ context.Context, name string) (int64, error) {
	fi, err := os.Stat(d.path(name))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (d dirDriver) Delete(_ context.Context, name string) error { return os.Remove(d.path(name)) }

func (d dirDriver) List(_ context.Context, _ driver.Runner, prefix string, fn func(driver.ObjectInfo) error) error {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return err
	}
	var objs []driver.ObjectInfo
	for _, e := range entries {
		name := strings.ReplaceAll(e.Name(), "%2F", "/")
		if fi, err := e.Info(); err == nil && strings.HasPrefix(name, prefix) {
			objs = append(objs, driver.ObjectInfo{Name: name, Size: fi.Size(), ModTime: fi.ModTime()})
		}
	}
	slices.SortFunc(objs, func(a, b driver.ObjectInfo) int { return strings.Compare(a.Name, b.Name) })
	for _, o := range objs {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

func (d dirDriver) Classify(err error) driver.Code {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return driver.NotFound
	case errors.Is(err, os.ErrExist):
		return driver.Exists
	case errors.Is(err, errOffset):
		return driver.InvalidRange
	}
	return driver.Unknown
}

func (d dirDriver) Location(name string) string { return d.path(name) }
func (d dirDriver) As(any) bool                 { return false }
func (d dirDriver) Close() error                { return nil }

// A backend is a driver under the portable layer: backends.New gives it
// the checks, retries, errors and metrics of every backend.
func Example() {
	dir, _ := os.MkdirTemp("", "driver-example")
	defer os.RemoveAll(dir)
	b := backends.New("dir", dirDriver{dir: dir}, backends.NoRetries)
	defer b.Close()
	ctx := context.Background()

	fmt.Println(b.Put(ctx, "a/b", strings.NewReader("hello"), 5))
	err := b.Put(ctx, "a/b", strings.NewReader("again"), 5)
	fmt.Println(errors.Is(err, backends.ErrExists))
	err = b.Put(ctx, "../escape", strings.NewReader("x"), 1) // the portable layer refuses the name
	fmt.Println(errors.Is(err, backends.ErrInvalidName))
	r, _ := b.Get(ctx, "a/b", 1, 3)
	data, _ := io.ReadAll(r)
	r.Close()
	fmt.Printf("%s\n", data)
	fmt.Println(b.Delete(ctx, "missing")) // a missing object is no error
	// Output:
	// <nil>
	// true
	// true
	// ell
	// <nil>
}
