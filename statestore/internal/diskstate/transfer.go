package diskstate

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dstlgo/dstl/backends"
)

// DefaultParallelism is how many files a [Target] uploads or downloads at
// once when its Parallelism is not set.
const DefaultParallelism = 4

// cleanupTimeout bounds the deletions that undo a failed materialisation.
const cleanupTimeout = 30 * time.Second

// Target is where the files of snapshots go and come from.
type Target struct {
	// Backend stores the files. Required.
	Backend backends.Backend
	// NewObject returns the object name of a new file; every call a name
	// never used before. Required to materialise.
	NewObject func() (string, error)
	// LocalDir, when set, keeps a copy of every file uploaded or downloaded
	// at LocalDir/<object name> (a hard link, or a copy on another file
	// system; a failure to keep one is logged), and a restore takes a file
	// from there when its copy is intact (size and CRC), instead of
	// downloading it. Removing the copies of obsolete objects is the
	// caller's.
	LocalDir string
	// Parallelism is how many files are uploaded or downloaded at once;
	// DefaultParallelism when not above zero.
	Parallelism int
	// Logger receives the log messages; slog.Default() when nil.
	Logger *slog.Logger

	// Bounds, overridden by tests; MaxFiles and MaxFileSize when zero.
	maxFiles    int
	maxFileSize int64
}

func (t *Target) parallelism() int {
	if t.Parallelism > 0 {
		return t.Parallelism
	}
	return DefaultParallelism
}

func (t *Target) logger() *slog.Logger {
	if t.Logger != nil {
		return t.Logger
	}
	return slog.Default()
}

func (t *Target) fileLimit() int {
	if t.maxFiles > 0 {
		return t.maxFiles
	}
	return MaxFiles
}

func (t *Target) sizeLimit() int64 {
	if t.maxFileSize > 0 {
		return t.maxFileSize
	}
	return MaxFileSize
}

// localPath returns where the local copy of object goes.
func (t *Target) localPath(object string) string {
	return filepath.Join(t.LocalDir, filepath.FromSlash(object))
}

// tempFiles are the temporary files of one call, removed at its end.
type tempFiles struct {
	mu    sync.Mutex
	paths []string
}

func (tf *tempFiles) add(path string) {
	tf.mu.Lock()
	tf.paths = append(tf.paths, path)
	tf.mu.Unlock()
}

// removeAll removes every file still there.
func (tf *tempFiles) removeAll(logger *slog.Logger) {
	tf.mu.Lock()
	defer tf.mu.Unlock()
	for _, p := range tf.paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			logger.Warn("diskstate: remove temporary file", "path", p, "err", err)
		}
	}
	tf.paths = nil
}

// uploader uploads files, at most Parallelism at once, and remembers what
// it stored so that a failure can undo it.
type uploader struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	t      *Target
	sem    chan struct{}
	wg     sync.WaitGroup

	mu       sync.Mutex
	err      error
	uploaded []string // objects stored
	copies   []string // local copies made
	bytes    int64
}

func newUploader(ctx context.Context, t *Target) *uploader {
	ctx, cancel := context.WithCancelCause(ctx)
	return &uploader{ctx: ctx, cancel: cancel, t: t, sem: make(chan struct{}, t.parallelism())}
}

// submit names f with a new object and starts its upload; it waits while
// Parallelism uploads are running. It returns the first error of an
// upload so far.
func (u *uploader) submit(f *localFile) error {
	if err := u.failed(); err != nil {
		return err
	}
	object, err := u.t.NewObject()
	if err != nil {
		err = fmt.Errorf("diskstate: new object name: %w", err)
		u.fail(err)
		return err
	}
	if err := backends.CheckObjectName(object); err != nil {
		err = fmt.Errorf("diskstate: new object name %q: %w", object, err)
		u.fail(err)
		return err
	}
	f.Object = object
	select {
	case u.sem <- struct{}{}:
	case <-u.ctx.Done():
		return u.failed()
	}
	u.wg.Add(1)
	go func() {
		defer func() { <-u.sem; u.wg.Done() }()
		if err := u.upload(f); err != nil {
			u.fail(err)
		}
	}()
	return nil
}

func (u *uploader) fail(err error) {
	u.mu.Lock()
	if u.err == nil {
		u.err = err
	}
	u.mu.Unlock()
	u.cancel(err)
}

func (u *uploader) failed() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err != nil {
		return u.err
	}
	return context.Cause(u.ctx)
}

// wait waits for every upload and returns the first error.
func (u *uploader) wait() error {
	u.wg.Wait()
	err := u.failed()
	u.cancel(nil)
	return err
}

func (u *uploader) upload(f *localFile) error {
	fh, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("diskstate: upload %s: %w", f.Object, err)
	}
	defer fh.Close()
	if err := u.t.Backend.Put(u.ctx, f.Object, fh, f.Size); err != nil {
		return fmt.Errorf("diskstate: upload %s: %w", f.Object, err)
	}
	u.mu.Lock()
	u.uploaded = append(u.uploaded, f.Object)
	u.bytes += f.Size
	u.mu.Unlock()
	if u.t.LocalDir != "" {
		// Without its local copy, a restore downloads the file: a failure
		// here fails nothing else.
		dst := u.t.localPath(f.Object)
		if err := linkOrCopy(f.path, dst); err != nil {
			u.t.logger().Warn("diskstate: keep local copy", "object", f.Object, "path", dst, "err", err)
		} else {
			u.mu.Lock()
			u.copies = append(u.copies, dst)
			u.mu.Unlock()
		}
	}
	if err := os.Remove(f.path); err != nil {
		return fmt.Errorf("diskstate: uploaded %s: %w", f.Object, err)
	}
	return nil
}

// undo deletes the objects stored and the local copies made, best effort.
func (u *uploader) undo(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	logger := u.t.logger()
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, o := range u.uploaded {
		if err := u.t.Backend.Delete(ctx, o); err != nil {
			logger.Warn("diskstate: delete object of a failed materialisation", "object", o, "err", err)
		}
	}
	for _, p := range u.copies {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			logger.Warn("diskstate: remove local copy of a failed materialisation", "path", p, "err", err)
		}
	}
	u.uploaded, u.copies = nil, nil
}

// linkOrCopy makes dst a hard link to src, or a copy when linking fails,
// atomically: dst is either absent or whole.
func linkOrCopy(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(name)
		}
	}()
	_ = tmp.Close()
	if err := os.Remove(name); err != nil {
		return err
	}
	if err := os.Link(src, name); err != nil {
		if err := copyFile(src, name); err != nil {
			return err
		}
	}
	if err := os.Rename(name, dst); err != nil {
		return err
	}
	ok = true
	return nil
}

// copyFile copies src to a new file dst and syncs it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkFile reports whether the file at path has f's size and CRC.
func checkFile(path string, f File) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	return copyChecked(nil, fh, f)
}

// copyChecked copies r to w, or only reads it if w is nil, and reports
// whether r held f's size and CRC.
func copyChecked(w io.Writer, r io.Reader, f File) error {
	h := crc32.New(castagnoli)
	var dst io.Writer = h
	if w != nil {
		dst = io.MultiWriter(w, h)
	}
	n, err := io.Copy(dst, io.LimitReader(r, f.Size+1))
	if err != nil {
		return err
	}
	if n != f.Size {
		return fmt.Errorf("%d bytes, manifest says %d: %w", n, f.Size, ErrFormat)
	}
	if got := h.Sum32(); got != f.CRC {
		return fmt.Errorf("CRC %08x, manifest says %08x: %w", got, f.CRC, ErrFormat)
	}
	return nil
}

// fetched is one file brought to the temporary directory for a restore.
type fetched struct {
	path  string
	local bool // taken from the local copy
}

// fetch brings f into dir: from its local copy when that is intact, from
// the backend otherwise (then checked against the manifest's size and CRC,
// and kept as the new local copy).
func (t *Target) fetch(ctx context.Context, f File, dir string, track func(string)) (fetched, error) {
	if t.LocalDir != "" {
		src := t.localPath(f.Object)
		switch err := checkFile(src, f); {
		case err == nil:
			tmp, err := os.CreateTemp(dir, "fetch-*.sst")
			if err != nil {
				return fetched{}, fmt.Errorf("diskstate: fetch %s: %w", f.Object, err)
			}
			path := tmp.Name()
			track(path)
			_ = tmp.Close()
			_ = os.Remove(path)
			if err := os.Link(src, path); err != nil {
				if err := copyFile(src, path); err != nil {
					// Gone since it was checked (removed by another
					// checkpointer sharing the local directory, say):
					// fetch it from the backend.
					_ = os.Remove(path)
					t.logger().Warn("diskstate: local copy unusable, fetching it", "object", f.Object, "path", src, "err", err)
					break
				}
			}
			return fetched{path: path, local: true}, nil
		case errors.Is(err, fs.ErrNotExist):
		default:
			t.logger().Warn("diskstate: local copy damaged, fetching it", "object", f.Object, "path", src, "err", err)
		}
	}
	path, err := t.download(ctx, f, dir, track)
	if err != nil {
		return fetched{}, err
	}
	if t.LocalDir != "" {
		if err := linkOrCopy(path, t.localPath(f.Object)); err != nil {
			t.logger().Warn("diskstate: keep local copy", "object", f.Object, "err", err)
		}
	}
	return fetched{path: path}, nil
}

// download streams f's object to a new file in dir, computing its CRC,
// and checks its size and CRC.
//
// The file is not synced (which took about a third of a restore's time):
// the database it goes into holds nothing after a crash (Open empties its
// directory; the state is what the next restore loads), and a local copy
// made of it is used only if its size and CRC still match.
func (t *Target) download(ctx context.Context, f File, dir string, track func(string)) (string, error) {
	out, err := os.CreateTemp(dir, "fetch-*.sst")
	if err != nil {
		return "", fmt.Errorf("diskstate: fetch %s: %w", f.Object, err)
	}
	path := out.Name()
	track(path)
	err = func() error {
		r, err := t.Backend.Get(ctx, f.Object, 0, -1)
		if err != nil {
			return err
		}
		defer r.Close()
		return copyChecked(out, r, f)
	}()
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("diskstate: fetch %s: %w", f.Object, err)
	}
	return path, nil
}
