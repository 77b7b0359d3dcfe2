package dstltest

import "github.com/dstlgo/dstl/backends/discard"

// NoUploader is [discard.Uploader]: an uploader that stores nothing and
// encodes nothing, for benchmarks of the appender alone. Programs use
// [discard.Uploader]; tests may use either name.
type NoUploader = discard.Uploader
