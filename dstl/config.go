package dstl

import "time"

// FlinkKeyPrefix is the prefix of Flink's option keys for its changelog
// storage. [ParseConfig] accepts every key both bare and with this prefix.
const FlinkKeyPrefix = "state.changelog.dstl.dfs."

// Config configures a [Storage]. Start from [DefaultConfig]; the comment of
// each field gives its option key (see [ParseConfig]) and its default.
type Config struct {
	// BasePath is where objects go: a URL whose scheme selects the backend
	// (file:///var/dstl, s3://bucket/prefix, ...) or a local path.
	// Key "base-path". Required.
	BasePath string
	// Storage selects the backend by identifier; empty means by the scheme
	// of BasePath. Key "storage" (also Flink's "state.changelog.storage").
	Storage string
	// JobID, when set, is the prefix of every object name ("JobID/..."), so
	// that the garbage collector can list one job's objects.
	// Key "job-id". Default: empty (objects directly under BasePath).
	JobID string
	// CompressionEnabled compresses each change set on its own (zstd).
	// Key "compression.enabled". Default false.
	CompressionEnabled bool
	// PreemptivePersistThreshold: once this many bytes were appended since
	// the last persist, the writer persists on its own.
	// Key "preemptive-persist-threshold". Default 5 MiB.
	PreemptivePersistThreshold int64
	// BatchPersistDelay: upload tasks that arrive within this window go
	// into one object. Zero uploads every task at once.
	// Key "batch.persist-delay". Default 10 ms.
	BatchPersistDelay time.Duration
	// BatchPersistSizeThreshold: a batch is uploaded without waiting for
	// the window once its tasks hold this many bytes.
	// Key "batch.persist-size-threshold". Default 10 MiB.
	BatchPersistSizeThreshold int64
	// UploadBufferSize is the initial size of the buffer an object is
	// encoded into. Key "upload.buffer-size". Default 1 MiB.
	UploadBufferSize int64
	// UploadNumThreads bounds the batches uploaded at once.
	// Key "upload.num-threads". Default 5.
	UploadNumThreads int
	// DiscardNumThreads is the number of goroutines deleting released
	// objects. Key "discard.num-threads". Default 1.
	DiscardNumThreads int
	// UploadMaxInFlight bounds the bytes queued or being uploaded; past it,
	// Append and Persist wait and [Storage.Available] reports unavailable.
	// Key "upload.max-in-flight". Default 100 MiB.
	UploadMaxInFlight int64
	// RetryPolicy is "fixed" (up to UploadMaxAttempts attempts, hedged
	// after UploadTimeout, UploadNextAttemptDelay after an error) or "none"
	// (one attempt, no timeout). Key "upload.retry-policy". Default "fixed".
	RetryPolicy string
	// UploadTimeout: an attempt that has not ended after this long is not
	// cancelled, but another attempt starts beside it.
	// Key "upload.timeout". Default 1 s.
	UploadTimeout time.Duration
	// UploadMaxAttempts is the number of attempts, the first included.
	// Key "upload.max-attempts". Default 3.
	UploadMaxAttempts int
	// UploadNextAttemptDelay is the wait after a failed attempt.
	// Key "upload.next-attempt-delay". Default 500 ms.
	UploadNextAttemptDelay time.Duration
	// CacheIdleTimeout: the reader's cache drops fetched ranges unused for
	// this long. Key "download.local-cache.idle-timeout-ms". Default 10 min.
	CacheIdleTimeout time.Duration
}

// Retry policies.
const (
	RetryFixed = "fixed"
	RetryNone  = "none"
)

// DefaultConfig returns the defaults, with basePath as the base path.
func DefaultConfig(basePath string) Config {
	return Config{
		BasePath:                   basePath,
		PreemptivePersistThreshold: 5 << 20,
		BatchPersistDelay:          10 * time.Millisecond,
		BatchPersistSizeThreshold:  10 << 20,
		UploadBufferSize:           1 << 20,
		UploadNumThreads:           5,
		DiscardNumThreads:          1,
		UploadMaxInFlight:          100 << 20,
		RetryPolicy:                RetryFixed,
		UploadTimeout:              time.Second,
		UploadMaxAttempts:          3,
		UploadNextAttemptDelay:     500 * time.Millisecond,
		CacheIdleTimeout:           10 * time.Minute,
	}
}
