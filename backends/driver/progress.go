package driver

import "context"

// MinThroughput is the slowest rate, in bytes per second, at which an
// upload is still taken to be on its way. The engine gives an upload
// attempt upload.timeout plus its bytes at this rate, and the portable
// layer gives a request with a body its request timeout plus the body at
// this rate, so that a slow but progressing upload is never cut while a
// trickle is given up in bounded time.
const MinThroughput = 256 << 10

type reporterKey struct{}

// ReportProgress reports that n more bytes of an upload left for the
// storage service, to the upload attempt that ctx belongs to (ctx derives
// from the context the engine passed to Put). It does nothing when ctx
// belongs to no attempt or n <= 0, and is safe for concurrent use.
//
// A driver reports the bytes it actually sent: the HTTP transport of
// [Transport] does so for every request body. Once an attempt has a
// report, the engine judges it by its reports alone, and it counts as
// stalled when no report came for upload.timeout while some of the body
// was unsent. A driver that reports nothing is judged by its reads of the
// body, which must then move with the upload (as a driver that streams
// the body does).
func ReportProgress(ctx context.Context, n int64) {
	if p := ProgressFrom(ctx); p != nil {
		p(n)
	}
}

// ProgressFrom returns the function that reports progress (as
// [ReportProgress]) to the upload attempt ctx belongs to, or nil when it
// belongs to none, so that a caller can skip counting.
func ProgressFrom(ctx context.Context) func(n int64) {
	f, _ := ctx.Value(reporterKey{}).(func(n int64))
	return f
}

// WithProgress returns ctx carrying report as the receiver of
// [ReportProgress], in place of any the context carried. The engine sets
// one for every upload attempt; a test of a driver's reports may set its
// own.
func WithProgress(ctx context.Context, report func(n int64)) context.Context {
	return context.WithValue(ctx, reporterKey{}, report)
}
