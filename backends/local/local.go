// Package local is the dstl backend that keeps objects as files under a
// directory of the local filesystem.
//
// It registers itself in init under the identifier "local" and the URL
// scheme "file"; import it for its side effect to make it available to
// [backends.Open]:
//
//	import _ "github.com/dstlgo/dstl/backends/local"
//
// Base paths are plain paths or file:///abs/path URLs; see [ParseURL] for
// the query parameters. Programs that configure the backend in code use
// [Open] with a [Config].
//
// An object name is a clean, relative, slash-separated path: each "/" makes
// a subdirectory. Names that are empty, absolute, not clean (".", "..", "//",
// a trailing "/"), contain a backslash or a NUL byte, or have a segment that
// starts with ".tmp-" (reserved for temporary files) are rejected with
// [backends.ErrInvalidName]; the root is opened with [os.OpenRoot], so symbolic
// links cannot lead outside it either. Because a file and a directory cannot
// share a name, the names "a" and "a/b" cannot both be stored; the second
// one fails with [backends.ErrInvalidName].
//
// Put writes a temporary file next to the object, fsyncs it, links it under
// the object's name (never replacing an existing object) and fsyncs the
// directory, so an object is either absent or whole, also after a crash.
// A crash may leave temporary files behind; they are invisible to List and
// can be removed once no Put is running.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
)

// ID is the backend's identifier in the registry and in its errors.
const ID = "local"

// Scheme is the URL scheme of the backend's base paths.
const Scheme = "file"

// TempPrefix starts the names of the temporary files Put writes. List skips
// them, and object names may not have a segment that starts with it.
const TempPrefix = ".tmp-"

const (
	filePerm = 0o644
	dirPerm  = 0o755
	// copyChunk is what Put writes at a time: small enough that the write
	// of a body still being encoded follows its encoder closely (a chunk
	// is written once all of it is final), large enough that a syscall
	// per chunk costs nothing.
	copyChunk = 256 << 10
)

func init() { backends.RegisterURL(ID, ParseURL, Open, Scheme) }

// Backend is the local backend: the portable [backends.Bucket] over the
// files under a root directory, with the calls of its own. It is safe for
// concurrent use.
type Backend struct {
	*backends.Bucket
	d *bucket
}

// bucket is the driver: files under a root directory.
type bucket struct {
	root *os.Root
	dir  string // absolute path of the root
	sync bool

	synced sync.Map // directory name -> struct{}: its entry in its parent was fsynced
}

var _ driver.Bucket = (*bucket)(nil)

// New opens a backend from a base path, a plain path or a file:// URL (see
// [ParseURL]). It is the factory the backend registers.
func New(ctx context.Context, basePath string) (*Backend, error) {
	return backends.OpenURL(ctx, basePath, ParseURL, Open)
}

// Open opens a backend with cfg. With cfg.CreateRoot, the root directory is
// created when missing; otherwise it must exist. Local files are not
// retried: each call makes one attempt.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local: open %q: %w", cfg.Root, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, backends.Invalid(err)
	}
	dir, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("local: open %q: %w", cfg.Root, err)
	}
	if cfg.CreateRoot {
		if err := os.MkdirAll(dir, dirPerm); err != nil {
			return nil, fmt.Errorf("local: create root: %w", err)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("local: open root: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("local: open root: %s is not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("local: open root: %w", err)
	}
	d := &bucket{root: root, dir: dir, sync: !cfg.NoSync}
	return &Backend{Bucket: backends.New(ID, d, backends.NoRetries), d: d}, nil
}

// Root returns the absolute path of the backend's root directory.
func (b *Backend) Root() string { return b.d.dir }

// Close releases the root directory.
func (d *bucket) Close() error {
	if err := d.root.Close(); err != nil {
		return fmt.Errorf("local: close: %w", err)
	}
	return nil
}

// As sets a **os.Root target to the root directory, and a *driver.Root to
// its path.
func (d *bucket) As(target any) bool {
	switch p := target.(type) {
	case **os.Root:
		*p = d.root
	case *driver.Root:
		*p = driver.Root{Bucket: d.dir}
	default:
		return false
	}
	return true
}

// Location names no more than the errors of the filesystem do.
func (d *bucket) Location(string) string { return "" }

// Classify maps the errors of the filesystem.
func (d *bucket) Classify(err error) driver.Code {
	switch {
	case isMissing(err):
		return driver.NotFound
	case errors.Is(err, fs.ErrPermission):
		return driver.Permission
	case errors.Is(err, fs.ErrExist):
		return driver.Exists
	}
	return driver.Unknown
}

// Put writes a temporary file next to the object, fsyncs it, links it
// under the object's name (never replacing an existing object) and fsyncs
// the directory. Nothing is left visible by a failed or cancelled Put.
func (d *bucket) Put(ctx context.Context, _ driver.Runner, name string, body *driver.Body, size int64) (err error) {
	if err := checkName(name); err != nil {
		return err
	}
	dir := path.Dir(name)
	f, tmp, err := d.createTempIn(dir)
	if err != nil {
		return err
	}
	defer func() {
		if f != nil {
			_ = f.Close()
		}
		// The temporary name is never needed after Put: on success the
		// object is a second link to it.
		_ = d.root.Remove(filepath.FromSlash(tmp))
	}()

	if err := copyBody(ctx, f, body, size); err != nil {
		return err
	}
	if d.sync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	cerr := f.Close()
	f = nil
	if cerr != nil {
		return cerr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.root.Link(filepath.FromSlash(tmp), filepath.FromSlash(name)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := d.root.Lstat(filepath.FromSlash(name)); serr == nil && fi.IsDir() {
				return fmt.Errorf("%w: a directory of other objects has this name", backends.ErrInvalidName)
			}
			return fmt.Errorf("%w: %w", backends.ErrExists, err)
		}
		return err
	}
	if d.sync {
		if err := d.syncDir(dir); err != nil {
			// Not known to be durable: take the object back so that a
			// failed Put leaves nothing.
			_ = d.root.Remove(filepath.FromSlash(name))
			return err
		}
	}
	return nil
}

// copyBufs holds the buffers Put copies bodies through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyChunk); return &b }}

// copyBody copies size bytes of body to f in chunks, checking ctx between
// them.
func copyBody(ctx context.Context, f *os.File, body *driver.Body, size int64) error {
	// A body in memory is written from there, a chunk at a time (each
	// chunk taken counts, as progress, before it is written); the rest of
	// a body, or all of one not in memory, is copied through a buffer,
	// whose reads report a body that ends short.
	var done int64
	for done < size {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(size-done, copyChunk)
		p, ok := body.SliceAt(done, n)
		if !ok {
			break
		}
		if _, err := f.Write(p); err != nil {
			return err
		}
		done += n
	}
	if done == size {
		return ctx.Err()
	}
	r := body.Section(done, size-done)
	pooled := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(pooled)
	buf := (*pooled)[:min(size-done, copyChunk)]
	for done < size {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := io.ReadFull(r, buf[:min(int64(len(buf)), size-done)])
		if n > 0 {
			if _, werr := f.Write(buf[:n]); werr != nil {
				return werr
			}
			done += int64(n)
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("body ended after %d of %d bytes: %w", done, size, io.ErrUnexpectedEOF)
			}
			return fmt.Errorf("read body: %w", err)
		}
	}
	return ctx.Err()
}

// createTempIn creates a new temporary file in dir, creating dir first
// unless it is known to exist.
func (d *bucket) createTempIn(dir string) (*os.File, string, error) {
	if _, known := d.synced.Load(dir); known || dir == "." {
		f, tmp, err := d.createTemp(dir)
		if !isMissing(err) || dir == "." {
			return f, tmp, err
		}
		// Removed behind our back: forget what we knew of it.
		for p := dir; p != "."; p = path.Dir(p) {
			d.synced.Delete(p)
		}
	}
	if err := d.ensureDir(dir); err != nil {
		return nil, "", err
	}
	return d.createTemp(dir)
}

// createTemp creates a new temporary file in dir.
func (d *bucket) createTemp(dir string) (*os.File, string, error) {
	for range 100 {
		name := path.Join(dir, TempPrefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := d.root.OpenFile(filepath.FromSlash(name), os.O_RDWR|os.O_CREATE|os.O_EXCL, filePerm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", errors.New("cannot find a free temporary file name")
}

// ensureDir creates dir and its missing parents. The entry of each created
// directory in its parent is fsynced, and so is, once per process, the entry
// of each existing one (it may have been created by a Put that has not
// fsynced it yet).
func (d *bucket) ensureDir(dir string) error {
	if dir == "." {
		return nil
	}
	if err := d.ensureDir(path.Dir(dir)); err != nil {
		return err
	}
	err := d.root.Mkdir(filepath.FromSlash(dir), dirPerm)
	if err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, serr := d.root.Lstat(filepath.FromSlash(dir))
		if serr != nil {
			return serr
		}
		if !fi.IsDir() {
			return fmt.Errorf("%w: object %q exists, so it cannot be a directory", backends.ErrInvalidName, dir)
		}
		if _, ok := d.synced.Load(dir); ok {
			return nil
		}
	}
	if d.sync {
		if err := d.syncDir(path.Dir(dir)); err != nil {
			return err
		}
	}
	d.synced.Store(dir, struct{}{})
	return nil
}

// syncDir fsyncs a directory, making the entries in it durable.
func (d *bucket) syncDir(dir string) error {
	f, err := d.root.Open(filepath.FromSlash(dir))
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Open opens the file and returns a reader of length bytes from offset on
// (-1: to the end). An offset past the end fails with
// backends.ErrInvalidRange.
func (d *bucket) Open(_ context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	f, err := d.root.Open(filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%w: not a regular file", backends.ErrNotFound)
	}
	if err == nil && offset > fi.Size() {
		err = fmt.Errorf("%w: offset %d past the end of the %d-byte object", backends.ErrInvalidRange, offset, fi.Size())
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	n := fi.Size() - offset
	if length >= 0 && length < n {
		n = length
	}
	return &reader{SectionReader: io.NewSectionReader(f, offset, n), f: f}, nil
}

// reader reads a section of a file.
type reader struct {
	*io.SectionReader
	f *os.File
}

func (r *reader) Close() error {
	if err := r.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// Size returns the size of the object's file.
func (d *bucket) Size(_ context.Context, name string) (int64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	fi, err := d.root.Stat(filepath.FromSlash(name))
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%w: not a regular file", backends.ErrNotFound)
	}
	return fi.Size(), nil
}

// Delete removes the object's file. Directories are left in place, even
// when they become empty.
func (d *bucket) Delete(_ context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	fi, err := d.root.Lstat(filepath.FromSlash(name))
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return nil // a directory of other objects, not an object
	}
	if err := d.root.Remove(filepath.FromSlash(name)); err != nil {
		return err
	}
	if d.sync {
		return d.syncDir(path.Dir(name))
	}
	return nil
}

// List calls fn for every object whose name starts with prefix (a plain
// string prefix, not only a directory), in lexical order of names, with the
// names relative to the root and "/"-separated. Temporary files, and files
// that are not regular or whose names are not valid object names, are
// skipped. Objects put or deleted during the listing may or may not be seen.
func (d *bucket) List(ctx context.Context, _ driver.Runner, prefix string, fn func(driver.ObjectInfo) error) error {
	start := "."
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = prefix[:i]
		if checkName(start) != nil {
			return nil // no valid name has this prefix
		}
	}
	err := d.walk(ctx, start, prefix, fn)
	if se, ok := errors.AsType[*stopError](err); ok {
		return se.err // fn's own error, returned as it is
	}
	if isMissing(err) && start != "." {
		return nil
	}
	return err
}

// stopError carries the callback's error out of walk, to be returned as it
// is. It does not unwrap, so that walk's checks do not look into it.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }

// RemoveTemporaryFiles deletes the temporary files that Puts interrupted
// by a crash left in the directory of prefix (a "/"-separated directory
// under the root; "" for the root) and below it, and returns how many it
// deleted. Call it only while no Put into that directory is running, for
// instance at start-up, before the backend is used.
func (b *Backend) RemoveTemporaryFiles(ctx context.Context, prefix string) (n int, err error) {
	const op = "remove temporary files"
	dir := strings.TrimSuffix(prefix, "/")
	if dir == "" {
		dir = "."
	} else if err := checkName(dir); err != nil {
		return 0, backends.NewError(op, ID, prefix, err)
	}
	err = b.Run(ctx, op, prefix, func(ctx context.Context, _ driver.Runner) error {
		return fs.WalkDir(b.d.root.FS(), dir, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				if isMissing(err) {
					return nil
				}
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if de.IsDir() || !strings.HasPrefix(de.Name(), TempPrefix) {
				return nil
			}
			if err := b.d.root.Remove(filepath.FromSlash(p)); err != nil && !isMissing(err) {
				return err
			}
			n++
			return nil
		})
	})
	return n, err
}

// walk lists directory dir in lexical order of full names. A subdirectory d
// sorts as "d/": every name under it starts with that, so its objects come
// exactly where they belong among its siblings.
func (d *bucket) walk(ctx context.Context, dir, prefix string, fn func(driver.ObjectInfo) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := d.root.Open(filepath.FromSlash(dir))
	if err != nil {
		return err
	}
	entries, err := f.ReadDir(-1)
	_ = f.Close()
	if err != nil {
		return err
	}
	type entry struct {
		key string // full name, with a trailing "/" for directories
		de  fs.DirEntry
	}
	list := make([]entry, 0, len(entries))
	for _, de := range entries {
		base := de.Name()
		if strings.HasPrefix(base, TempPrefix) {
			continue
		}
		key := base
		if dir != "." {
			key = dir + "/" + base
		}
		if de.IsDir() {
			key += "/"
			// Descend only where names may start with prefix.
			if !strings.HasPrefix(key, prefix) && !strings.HasPrefix(prefix, key) {
				continue
			}
		} else if !strings.HasPrefix(key, prefix) {
			continue
		}
		list = append(list, entry{key, de})
	}
	slices.SortFunc(list, func(x, y entry) int { return strings.Compare(x.key, y.key) })
	for _, e := range list {
		if e.de.IsDir() {
			if err := d.walk(ctx, strings.TrimSuffix(e.key, "/"), prefix, fn); err != nil && !isMissing(err) {
				return err
			}
			continue
		}
		if !e.de.Type().IsRegular() || checkName(e.key) != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := e.de.Info()
		if err != nil {
			if isMissing(err) {
				continue // deleted meanwhile
			}
			return err
		}
		if err := fn(driver.ObjectInfo{Name: e.key, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
			return &stopError{err}
		}
	}
	return nil
}

// checkName reports whether name is a valid object name; see the package
// documentation.
func checkName(name string) error {
	if err := backends.CheckObjectName(name); err != nil {
		return err
	}
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return fmt.Errorf("%w: not a local relative path", backends.ErrInvalidName)
	}
	for seg := range strings.SplitSeq(name, "/") {
		if strings.HasPrefix(seg, TempPrefix) {
			return fmt.Errorf("%w: segment starts with %q, reserved for temporary files", backends.ErrInvalidName, TempPrefix)
		}
	}
	return nil
}

// isMissing reports whether err means that a file does not exist (or that a
// path runs through a file as if it were a directory).
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
