package collect

import (
	"github.com/dstlgo/dstl/backends"
)

// UploadCollector is a backend whose incomplete uploads a collection
// lists and aborts: S3's multipart uploads, which a writer killed
// mid-upload (or whose abort failed) leaves behind. The s3 backend is one;
// see its ListIncompleteUploads for what the listing costs on S3 and on
// MinIO.
type UploadCollector = backends.IncompleteUploads

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
