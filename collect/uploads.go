package collect

import (
	"context"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/s3"
)

// UploadCollector is a backend whose incomplete uploads a collection
// lists and aborts: S3's multipart uploads, which a writer killed
// mid-upload (or whose abort failed) leaves behind. *s3.Backend is one;
// see [s3.Backend.ListIncompleteUploads] for what its listing costs on S3
// and on MinIO.
type UploadCollector interface {
	// ListIncompleteUploads calls fn for every incomplete upload of an
	// object whose name starts with prefix, and page, when not nil, for
	// every page of uploads the storage answers (each is progress).
	ListIncompleteUploads(ctx context.Context, prefix string, fn func(s3.IncompleteUpload) error, page func()) error
	// AbortIncompleteUpload aborts an upload that ListIncompleteUploads
	// reported; one that is gone already is no error.
	AbortIncompleteUpload(ctx context.Context, u s3.IncompleteUpload) error
}

var _ UploadCollector = (*s3.Backend)(nil)

// FindUploadCollector returns the incomplete uploads of b, or nil when it
// has none: b itself when it is an [UploadCollector] (as *s3.Backend
// is), or else what b's As method (see [backends.Bucket.As]) sets a
// *UploadCollector target to, for a wrapper that hands its backend's
// calls on.
func FindUploadCollector(b backends.Backend) UploadCollector {
	if uc, ok := b.(UploadCollector); ok {
		return uc
	}
	var uc UploadCollector
	if a, ok := b.(interface{ As(target any) bool }); ok && a.As(&uc) && uc != nil {
		return uc
	}
	return nil
}
