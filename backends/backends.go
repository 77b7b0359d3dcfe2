// Package backends is the portable layer over the storage services. It
// defines the [Backend] contract and the errors every backend returns, and
// opens a backend from a base path. [Bucket] runs any driver with every
// check, timeout, retry, error and metric done once.
//
// The engine, the reader, the garbage collector and the tools use the
// Backend contract. A driver is what package
// github.com/dstlgo/dstl/backends/driver describes.
//
// Applications open a backend with [Open] ("s3://bucket/prefix", a local
// path, ...) or with a backend package's Open(ctx, Config), and check its
// errors with errors.Is against the sentinels below. Backend authors read
// package driver.
package backends

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/dstlgo/dstl/backends/driver"
)

// Backend is the small blob interface of a storage service. The uploader,
// the reader and the garbage collector call it; it knows nothing of change
// sets. [Bucket] implements it over any driver; wrappers (request
// counting, fault injection) implement it over another Backend.
//
// Implementations must be safe for concurrent use. Every error they return
// should be an *[Error] that names the operation, the backend and the
// object, and should wrap one of the sentinel errors below where one
// applies. A call whose context is done fails with an error that wraps the
// context's error. A name that breaks the rules of [CheckObjectName] fails
// with ErrInvalidName.
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
type ObjectInfo = driver.ObjectInfo

// Sentinel errors that backends wrap, checked with [errors.Is].
var (
	// ErrNotFound: the object (or its bucket) does not exist.
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
	// ErrClosed: the backend (or the storage, writer or reader over it)
	// was closed.
	ErrClosed = errors.New("closed")
	// ErrPermanent: a failure that another attempt cannot heal (missing
	// credentials, a TLS handshake with a plain-HTTP endpoint, a missing
	// bucket, ...): the engine neither retries nor hedges it.
	ErrPermanent = errors.New("permanent failure")
	// ErrUnavailable: the call was not tried, since an earlier Get or
	// List of the same bucket went unanswered (see
	// [Policy.UnansweredHold]); the error quotes that call's error. It is
	// no timeout: it does not match context.DeadlineExceeded.
	ErrUnavailable = errors.New("backend unavailable")
	// ErrInvalidConfig: a base path, URL parameter or option is not
	// valid; the error names it.
	ErrInvalidConfig = errors.New("dstl: invalid config")
	// ErrUnknownBackend: no registered backend has the identifier or
	// serves the URL scheme of the base path.
	ErrUnknownBackend = errors.New("dstl: unknown backend")
)

// Error is the error a backend returns: it names the operation, the
// backend and the object, and wraps the cause.
type Error struct {
	Op      string // "put", "get", "delete", "list"
	Backend string // backend identifier, e.g. "local"
	Object  string // object name (or prefix, for list)
	Err     error  // the cause; may wrap a sentinel such as ErrNotFound
}

// NewError returns an *Error, or nil when err is nil.
func NewError(op, backend, object string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Backend: backend, Object: object, Err: err}
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s %q: %v", e.Backend, e.Op, e.Object, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// CheckObjectName checks the rules every backend applies to object names: a
// name is a non-empty, clean, relative, slash-separated path, with no "."
// or ".." segment, no empty segment, and no backslash or NUL byte, so that
// it means the same on a filesystem and in a bucket and can never escape a
// backend's root. A violation is an error wrapping [ErrInvalidName].
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

// canMatch reports whether some valid object name starts with prefix: its
// complete segments must be valid.
func canMatch(prefix string) bool {
	if strings.ContainsAny(prefix, "\\\x00") || strings.HasPrefix(prefix, "/") {
		return false
	}
	segs := strings.Split(prefix, "/")
	for _, s := range segs[:len(segs)-1] {
		if s == "" || s == "." || s == ".." {
			return false
		}
	}
	return true
}

// IncompleteUpload is an upload a service started and never completed nor
// aborted (an S3 multipart upload of a writer killed mid-upload): invisible
// to reads and listings, but stored, and billed, until aborted.
type IncompleteUpload struct {
	// Name is the object the upload would have written.
	Name string
	// UploadID is the service's id of the upload.
	UploadID string
	// Initiated is when the upload was started, by the service's clock.
	Initiated time.Time
}

// IncompleteUploads is a backend whose incomplete uploads can be listed
// and aborted (the s3 backend is one), for the garbage collector.
type IncompleteUploads interface {
	// ListIncompleteUploads calls fn for every incomplete upload of an
	// object whose name starts with prefix, and page, when not nil, for
	// every page of uploads the storage answers (each is progress).
	ListIncompleteUploads(ctx context.Context, prefix string, fn func(IncompleteUpload) error, page func()) error
	// AbortIncompleteUpload aborts an upload that ListIncompleteUploads
	// reported; one that is gone already is no error.
	AbortIncompleteUpload(ctx context.Context, u IncompleteUpload) error
}

// MemoryBody is the body of a Put held in memory. Besides ReadAt, it hands
// out its bytes without a copy (SliceAt), so that a driver that writes to
// a file writes from them directly instead of copying them through a
// buffer of its own, and may give their CRC32C (CRC32C), so that a driver
// that sends a checksum with the object (gcs) does not compute it.
// Wrappers of a body (such as one that counts reads as progress) pass
// SliceAt and CRC32C on.
type MemoryBody struct {
	b      []byte
	crc    uint32
	hasCRC bool
}

// NewMemoryBody returns a body of the bytes of b, which the caller does
// not change until the Put returns.
func NewMemoryBody(b []byte) *MemoryBody { return &MemoryBody{b: b} }

// WithCRC32C returns a body of the same bytes that gives crc as their
// CRC32C (Castagnoli), which the caller knows (such as the encoder of an
// object, from its frames' checksums). A store that checks the checksum it
// is sent refuses an upload whose bytes do not match it.
func (m *MemoryBody) WithCRC32C(crc uint32) *MemoryBody {
	return &MemoryBody{b: m.b, crc: crc, hasCRC: true}
}

// CRC32C returns the bytes' CRC32C and true, when the body was given one
// ([MemoryBody.WithCRC32C]); otherwise false.
func (m *MemoryBody) CRC32C() (uint32, bool) { return m.crc, m.hasCRC }

// ReadAt reads from the bytes at off; at their end it returns io.EOF.
func (m *MemoryBody) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("backends: read a memory body at offset %d: negative offset", off)
	}
	if off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// SliceAt returns the n bytes at off without copying them, and true; or
// false when they are not all there. The caller does not change them.
func (m *MemoryBody) SliceAt(off, n int64) ([]byte, bool) {
	if off < 0 || n < 0 || off > int64(len(m.b)) || n > int64(len(m.b))-off {
		return nil, false
	}
	return m.b[off : off+n : off+n], true
}
