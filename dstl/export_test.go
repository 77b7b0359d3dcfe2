package dstl

import "github.com/dstlgo/dstl/uploader"

// WithPreparingUploader is WithUploader for tests of the encoding ahead:
// the wrapper's Prepare, when it has one, encodes the batches ahead.
func WithPreparingUploader(wrap func(uploader.Uploader) uploader.Uploader) Option {
	return func(o *options) { o.wrapUploader, o.wrapPrepares = wrap, true }
}

// SetsAhead is how many change sets a reader decodes ahead of its caller.
const SetsAhead = setsAhead

// AllCached reports whether the reader's cache holds every range h needs,
// so that reading h only decodes (and reads no set ahead).
func (r *Reader) AllCached(h Handle) bool {
	l := r.newLoader(r.backend, false, h.Entries)
	defer l.close()
	return l.cached()
}
