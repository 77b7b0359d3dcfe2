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
	"github.com/dstlgo/dstl/backends/internal/gate"
	"github.com/dstlgo/dstl/backends/internal/urlparam"
	"github.com/dstlgo/dstl/dstl"
)

// ID is the backend's identifier in the registry and in its errors.
const ID = "local"

// Scheme is the URL scheme of the backend's base paths.
const Scheme = "file"

// TempPrefix starts the names of the temporary files Put writes. List skips
// them, and object names may not have a segment that starts with it.
const TempPrefix = ".tmp-"

const (
	filePerm  = 0o644
	dirPerm   = 0o755
	copyChunk = 1 << 20
)

func init() {
	backends.Register(ID, func(ctx context.Context, basePath string) (backends.Backend, error) {
		return New(ctx, basePath)
	}, Scheme)
}

// Backend is a [backends.Backend] that stores objects as files under a root
// directory. It is safe for concurrent use.
type Backend struct {
	root *os.Root
	dir  string // absolute path of the root
	sync bool

	calls gate.Gate // Close waits for the calls in progress

	synced sync.Map // directory name -> struct{}: its entry in its parent was fsynced
}

var _ backends.Backend = (*Backend)(nil)

// New opens a backend from a base path, a plain path or a file:// URL (see
// [ParseURL]). It is the factory the backend registers.
func New(ctx context.Context, basePath string) (*Backend, error) {
	cfg, err := ParseURL(basePath)
	if err != nil {
		return nil, urlparam.Invalid(err)
	}
	return Open(ctx, cfg)
}

// Open opens a backend with cfg. With cfg.CreateRoot, the root directory is
// created when missing; otherwise it must exist.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local: open %q: %w", cfg.Root, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, urlparam.Invalid(err)
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
	return &Backend{root: root, dir: dir, sync: !cfg.NoSync}, nil
}

// Root returns the absolute path of the backend's root directory.
func (b *Backend) Root() string { return b.dir }

// Close waits for running calls to return and releases the root directory.
// Later calls fail with [dstl.ErrClosed]; readers returned by Get stay
// usable until closed. Close must not be called from a List callback.
// Closing twice is not an error.
func (b *Backend) Close() error {
	if !b.calls.Close() {
		return nil
	}
	if err := b.root.Close(); err != nil {
		return fmt.Errorf("local: close: %w", err)
	}
	return nil
}

// begin registers a running call; it fails once the backend is closed.
func (b *Backend) begin(op, name string) error {
	if !b.calls.Enter() {
		return backends.NewError(op, ID, name, dstl.ErrClosed)
	}
	return nil
}

// Put stores size bytes of body under name, atomically; see the package
// documentation. It fails with [backends.ErrExists] when name exists, and a
// body shorter than size is an error. Nothing is left visible by a failed
// or cancelled Put.
func (b *Backend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) (err error) {
	if err := checkName(name); err != nil {
		return backends.NewError("put", ID, name, err)
	}
	if size < 0 {
		return backends.NewError("put", ID, name, fmt.Errorf("negative size %d", size))
	}
	if body == nil {
		return backends.NewError("put", ID, name, errors.New("nil body"))
	}
	if err := b.begin("put", name); err != nil {
		return err
	}
	defer b.calls.Leave()
	defer func() { err = b.wrap("put", name, err) }()
	if err := ctx.Err(); err != nil {
		return err
	}

	dir := path.Dir(name)
	f, tmp, err := b.createTempIn(dir)
	if err != nil {
		return err
	}
	defer func() {
		if f != nil {
			_ = f.Close()
		}
		// The temporary name is never needed after Put: on success the
		// object is a second link to it.
		_ = b.root.Remove(filepath.FromSlash(tmp))
	}()

	if err := copyBody(ctx, f, body, size); err != nil {
		return err
	}
	if b.sync {
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
	if err := b.root.Link(filepath.FromSlash(tmp), filepath.FromSlash(name)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := b.root.Lstat(filepath.FromSlash(name)); serr == nil && fi.IsDir() {
				return fmt.Errorf("%w: a directory of other objects has this name", backends.ErrInvalidName)
			}
			return fmt.Errorf("%w: %w", backends.ErrExists, err)
		}
		return err
	}
	if b.sync {
		if err := b.syncDir(dir); err != nil {
			// Not known to be durable: take the object back so that a
			// failed Put leaves nothing.
			_ = b.root.Remove(filepath.FromSlash(name))
			return err
		}
	}
	return nil
}

// copyBody copies size bytes of body to f in chunks, checking ctx between
// them.
// copyBufs holds the buffers Put copies bodies through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyChunk); return &b }}

func copyBody(ctx context.Context, f *os.File, body io.ReaderAt, size int64) error {
	r := io.NewSectionReader(body, 0, size)
	pooled := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(pooled)
	buf := (*pooled)[:min(size, copyChunk)]
	var done int64
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
func (b *Backend) createTempIn(dir string) (*os.File, string, error) {
	if _, known := b.synced.Load(dir); known || dir == "." {
		f, tmp, err := b.createTemp(dir)
		if !isMissing(err) || dir == "." {
			return f, tmp, err
		}
		// Removed behind our back: forget what we knew of it.
		for d := dir; d != "."; d = path.Dir(d) {
			b.synced.Delete(d)
		}
	}
	if err := b.ensureDir(dir); err != nil {
		return nil, "", err
	}
	return b.createTemp(dir)
}

// createTemp creates a new temporary file in dir.
func (b *Backend) createTemp(dir string) (*os.File, string, error) {
	for range 100 {
		name := path.Join(dir, TempPrefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := b.root.OpenFile(filepath.FromSlash(name), os.O_RDWR|os.O_CREATE|os.O_EXCL, filePerm)
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
func (b *Backend) ensureDir(dir string) error {
	if dir == "." {
		return nil
	}
	if err := b.ensureDir(path.Dir(dir)); err != nil {
		return err
	}
	err := b.root.Mkdir(filepath.FromSlash(dir), dirPerm)
	if err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, serr := b.root.Lstat(filepath.FromSlash(dir))
		if serr != nil {
			return serr
		}
		if !fi.IsDir() {
			return fmt.Errorf("%w: object %q exists, so it cannot be a directory", backends.ErrInvalidName, dir)
		}
		if _, ok := b.synced.Load(dir); ok {
			return nil
		}
	}
	if b.sync {
		if err := b.syncDir(path.Dir(dir)); err != nil {
			return err
		}
	}
	b.synced.Store(dir, struct{}{})
	return nil
}

// syncDir fsyncs a directory, making the entries in it durable.
func (b *Backend) syncDir(dir string) error {
	d, err := b.root.Open(filepath.FromSlash(dir))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Get returns length bytes of the object from offset on (-1: to the end).
// See [backends.Backend.Get]. Reads from the returned reader fail once ctx is
// done.
func (b *Backend) Get(ctx context.Context, name string, offset, length int64) (_ io.ReadCloser, err error) {
	if err := checkName(name); err != nil {
		return nil, backends.NewError("get", ID, name, err)
	}
	if offset < 0 || length < -1 {
		return nil, backends.NewError("get", ID, name,
			fmt.Errorf("%w: offset %d, length %d", backends.ErrInvalidRange, offset, length))
	}
	if err := b.begin("get", name); err != nil {
		return nil, err
	}
	defer b.calls.Leave()
	defer func() { err = b.wrap("get", name, err) }()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := b.root.Open(filepath.FromSlash(name))
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
	return &reader{ctx: ctx, b: b, name: name, f: f, r: io.NewSectionReader(f, offset, n)}, nil
}

// reader is the io.ReadCloser Get returns.
type reader struct {
	ctx  context.Context
	b    *Backend
	name string
	f    *os.File
	r    *io.SectionReader
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, r.b.wrap("get", r.name, err)
	}
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = r.b.wrap("get", r.name, err)
	}
	return n, err
}

func (r *reader) Close() error {
	if err := r.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return r.b.wrap("get", r.name, err)
	}
	return nil
}

// Delete removes the object; a missing object is not an error. Directories
// are left in place, even when they become empty.
func (b *Backend) Delete(ctx context.Context, name string) (err error) {
	if err := checkName(name); err != nil {
		return backends.NewError("delete", ID, name, err)
	}
	if err := b.begin("delete", name); err != nil {
		return err
	}
	defer b.calls.Leave()
	defer func() { err = b.wrap("delete", name, err) }()
	if err := ctx.Err(); err != nil {
		return err
	}
	fi, err := b.root.Lstat(filepath.FromSlash(name))
	if err != nil {
		if isMissing(err) {
			return nil
		}
		return err
	}
	if fi.IsDir() {
		return nil // a directory of other objects, not an object
	}
	if err := b.root.Remove(filepath.FromSlash(name)); err != nil {
		if isMissing(err) {
			return nil
		}
		return err
	}
	if b.sync {
		return b.syncDir(path.Dir(name))
	}
	return nil
}

// List calls fn for every object whose name starts with prefix (a plain
// string prefix, not only a directory), in lexical order of names, with the
// names relative to the root and "/"-separated. Temporary files, and files
// that are not regular or whose names are not valid object names, are
// skipped. Objects put or deleted during the listing may or may not be seen.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) (err error) {
	if fn == nil {
		return backends.NewError("list", ID, prefix, errors.New("nil callback"))
	}
	if err := b.begin("list", prefix); err != nil {
		return err
	}
	defer b.calls.Leave()
	start := "."
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = prefix[:i]
		if checkName(start) != nil {
			return nil // no valid name has this prefix
		}
	}
	err = b.walk(ctx, start, prefix, fn)
	if se, ok := errors.AsType[*stopError](err); ok {
		return se.err // fn's own error, returned as it is
	}
	if isMissing(err) && start != "." {
		return nil
	}
	return b.wrap("list", prefix, err)
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
	dir := strings.TrimSuffix(prefix, "/")
	if dir == "" {
		dir = "."
	} else if err := checkName(dir); err != nil {
		return 0, backends.NewError("remove temporary files", ID, prefix, err)
	}
	if err := b.begin("remove temporary files", prefix); err != nil {
		return 0, err
	}
	defer b.calls.Leave()
	defer func() { err = b.wrap("remove temporary files", prefix, err) }()
	err = fs.WalkDir(b.root.FS(), dir, func(p string, de fs.DirEntry, err error) error {
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
		if err := b.root.Remove(filepath.FromSlash(p)); err != nil && !isMissing(err) {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// walk lists directory dir in lexical order of full names. A subdirectory d
// sorts as "d/": every name under it starts with that, so its objects come
// exactly where they belong among its siblings.
func (b *Backend) walk(ctx context.Context, dir, prefix string, fn func(backends.ObjectInfo) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d, err := b.root.Open(filepath.FromSlash(dir))
	if err != nil {
		return err
	}
	entries, err := d.ReadDir(-1)
	_ = d.Close()
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
			if err := b.walk(ctx, strings.TrimSuffix(e.key, "/"), prefix, fn); err != nil && !isMissing(err) {
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
		if err := fn(backends.ObjectInfo{Name: e.key, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
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

// wrap turns err into a *backends.Error for op on name that wraps the
// matching sentinel.
func (b *Backend) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var be *backends.Error
	if errors.As(err, &be) {
		return err
	}
	var sentinel error
	switch {
	case errors.Is(err, backends.ErrNotFound), errors.Is(err, backends.ErrExists), errors.Is(err, backends.ErrPermission),
		errors.Is(err, backends.ErrInvalidName), errors.Is(err, backends.ErrInvalidRange), errors.Is(err, dstl.ErrClosed),
		errors.Is(err, backends.ErrPrecondition):
		// already classified
	case isMissing(err):
		sentinel = backends.ErrNotFound
	case errors.Is(err, fs.ErrPermission):
		sentinel = backends.ErrPermission
	case errors.Is(err, os.ErrClosed):
		sentinel = dstl.ErrClosed
	}
	if sentinel != nil {
		err = fmt.Errorf("%w: %w", sentinel, err)
	}
	return backends.NewError(op, ID, name, err)
}
