package dstl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// Backend is the small blob interface every storage service implements. The
// uploader, the reader and the garbage collector call it; it knows nothing of
// change sets.
//
// Implementations must be safe for concurrent use. Every error they return
// should be a *[BackendError] (see [NewBackendError]) so that it names the
// operation, the backend and the object, and should wrap one of the sentinel
// errors below where one applies. A call whose context is done fails with an
// error that wraps the context's error. A name that breaks the rules of
// [CheckObjectName] fails with ErrInvalidName.
//
// The package github.com/dstlgo/dstl/conformance holds the tests every
// implementation must pass.
type Backend interface {
	// Put stores size bytes of body under name. It is atomic: afterwards the
	// object is either absent or whole. A cancelled or failed Put leaves
	// nothing visible. The body is replayable (an io.ReaderAt), so an
	// implementation may resend it on retry. Putting a name that already
	// exists fails with ErrExists; of Puts racing for one name, exactly one
	// succeeds. A negative size or a nil body is an error, a body shorter
	// than size fails with an error that wraps io.ErrUnexpectedEOF, and an
	// error of the body is wrapped.
	Put(ctx context.Context, name string, body io.ReaderAt, size int64) error

	// Get returns length bytes of the object from offset on; a length of -1
	// reads to the end. A range that runs past the end is cut at the end; an
	// offset past the end, a negative offset or a length below -1 fails with
	// ErrInvalidRange. A missing object fails with ErrNotFound. Reads from
	// the returned reader fail once ctx is done. The caller closes the
	// reader.
	Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error)

	// Delete removes the object. Deleting a missing object is not an error.
	Delete(ctx context.Context, name string) error

	// List calls fn for every object whose name starts with prefix, in
	// lexical order of names. An error from fn stops the listing and is
	// returned as it is. fn may call the backend's other methods, Close
	// excepted. Once ctx is done, fn is not called again.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error

	// Close releases the backend's resources. Later calls fail with
	// ErrClosed; closing twice is not an error.
	Close() error
}

// ObjectInfo describes one stored object, as [Backend.List] reports it.
type ObjectInfo struct {
	Name    string    // name relative to the backend's root
	Size    int64     // size in bytes
	ModTime time.Time // time of the last modification
}

// Sentinel errors that backends wrap, checked with [errors.Is].
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrExists: the object exists already and is never overwritten.
	ErrExists = errors.New("object already exists")
	// ErrPermission: the credentials do not allow the operation.
	ErrPermission = errors.New("permission denied")
	// ErrPrecondition: a precondition of the request failed.
	ErrPrecondition = errors.New("precondition failed")
	// ErrInvalidName: the object name is not acceptable (empty, or would
	// escape the backend's root).
	ErrInvalidName = errors.New("invalid object name")
	// ErrInvalidRange: the requested range starts past the end of the
	// object, or is negative.
	ErrInvalidRange = errors.New("invalid range")
	// ErrClosed: the storage, writer, reader or backend was closed.
	ErrClosed = errors.New("closed")
	// ErrPermanent: a failure that another attempt cannot heal (missing
	// credentials, a TLS handshake with a plain-HTTP endpoint, ...). A
	// backend wraps it where no more specific sentinel applies, so that the
	// storage neither retries nor hedges the request.
	ErrPermanent = errors.New("permanent failure")
)

// Sentinel errors of the engine, checked with [errors.Is].
var (
	// ErrUnknownBackend: no registered backend has the identifier or serves
	// the URL scheme of the base path.
	ErrUnknownBackend = errors.New("dstl: unknown backend")
	// ErrKeyGroup: a key group outside the writer's range.
	ErrKeyGroup = errors.New("dstl: key group out of range")
	// ErrTooLarge: a change larger than [MaxChangeSize].
	ErrTooLarge = errors.New("dstl: change too large")
	// ErrTruncated: a sequence number or range out of the log's range: below
	// the writer's truncation point, past the active change set, or a range
	// that starts past its end; also a persist whose change sets were
	// truncated before they were uploaded.
	ErrTruncated = errors.New("dstl: sequence number out of the log's range")
)

// BackendError is the error a backend returns: it names the operation, the
// backend and the object, and wraps the cause.
type BackendError struct {
	Op      string // "put", "get", "delete", "list"
	Backend string // backend identifier, e.g. "local"
	Object  string // object name (or prefix, for list)
	Err     error  // the cause; may wrap a sentinel such as ErrNotFound
}

// NewBackendError returns a *BackendError, or nil when err is nil.
func NewBackendError(op, backend, object string, err error) error {
	if err == nil {
		return nil
	}
	return &BackendError{Op: op, Backend: backend, Object: object, Err: err}
}

func (e *BackendError) Error() string {
	return fmt.Sprintf("%s %s %q: %v", e.Backend, e.Op, e.Object, e.Err)
}

// Unwrap returns the cause.
func (e *BackendError) Unwrap() error { return e.Err }

// CheckObjectName checks the rules every backend applies to object names: a
// name is a non-empty, clean, relative, slash-separated path, with no "."
// or ".." segment, no empty segment, and no backslash or NUL byte, so that
// it means the same on a filesystem and in a bucket and can never escape a
// backend's root. A violation is an error wrapping [ErrInvalidName].
// Backends may add rules of their own.
func CheckObjectName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case strings.ContainsAny(name, "\\\x00"):
		return fmt.Errorf("%w: contains a backslash or a NUL byte", ErrInvalidName)
	case strings.HasPrefix(name, "/"):
		return fmt.Errorf("%w: absolute", ErrInvalidName)
	case path.Clean(name) != name:
		return fmt.Errorf("%w: not a clean path (empty, \".\" or \"..\" segment, or trailing slash)", ErrInvalidName)
	case name == "." || name == ".." || strings.HasPrefix(name, "../"):
		return fmt.Errorf("%w: escapes the root", ErrInvalidName)
	}
	return nil
}
