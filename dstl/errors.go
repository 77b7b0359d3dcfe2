package dstl

import (
	"errors"

	"github.com/dstlgo/dstl/backends"
)

// Sentinel errors of the engine, checked with [errors.Is]. Errors of the
// backend wrap the sentinels of package
// github.com/dstlgo/dstl/backends (backends.ErrNotFound, ...).
var (
	// ErrClosed: the storage, writer or reader (or its backend) was
	// closed. It is [backends.ErrClosed].
	ErrClosed = backends.ErrClosed
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
