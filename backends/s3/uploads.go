package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dstlgo/dstl/dstl"
)

// IncompleteUpload is a multipart upload that was started under the
// backend's prefix and neither completed nor aborted: what a Put leaves
// when its process dies mid-upload, or when its abort fails (the service
// down). It is invisible to Get and List, but its parts are stored (and
// billed) until it is aborted, by [Backend.AbortIncompleteUpload] or by
// the bucket's lifecycle rule AbortIncompleteMultipartUpload.
type IncompleteUpload struct {
	// Name is the object the upload would have written.
	Name string
	// UploadID is the service's id of the upload.
	UploadID string
	// Initiated is when the upload was started, by the service's clock.
	Initiated time.Time
}

// ListIncompleteUploads calls fn for every incomplete multipart upload of
// an object whose name starts with prefix (see [IncompleteUpload]), in the
// service's order. Keys under the backend's prefix that are no valid
// object names are skipped.
//
// S3 lists uploads by key prefix. MinIO lists only the uploads of one
// exact key, or of the whole bucket: when the listing by prefix finds
// none, the whole bucket's uploads are listed and filtered by prefix here,
// which on S3 finds none either.
func (b *Backend) ListIncompleteUploads(ctx context.Context, prefix string, fn func(IncompleteUpload) error) error {
	if fn == nil {
		return dstl.NewBackendError("list uploads", ID, prefix, errors.New("nil callback"))
	}
	if err := b.begin("list uploads", prefix); err != nil {
		return err
	}
	defer b.calls.Leave()
	if !canMatch(prefix) {
		return b.wrap("list uploads", prefix, ctx.Err(), false)
	}
	full := b.key(prefix)
	found, err := b.listUploads(ctx, prefix, full, full, fn)
	if err == nil && found == 0 && full != "" {
		_, err = b.listUploads(ctx, prefix, "", full, fn)
	}
	return err
}

// listUploads lists the uploads whose keys start with listPrefix, calls fn
// for those whose keys start with full, and returns how many it listed.
func (b *Backend) listUploads(ctx context.Context, prefix, listPrefix, full string, fn func(IncompleteUpload) error) (int, error) {
	in := &awss3.ListMultipartUploadsInput{Bucket: &b.bucket}
	if listPrefix != "" {
		in.Prefix = &listPrefix
	}
	listed := 0
	for {
		if err := ctx.Err(); err != nil {
			return listed, b.wrap("list uploads", prefix, err, false)
		}
		var page *awss3.ListMultipartUploadsOutput
		err := b.do(ctx, func(ctx context.Context) error {
			out, err := b.client.ListMultipartUploads(ctx, in)
			page = out
			return err
		})
		if err != nil {
			return listed, b.wrap("list uploads", prefix, err, false)
		}
		for _, u := range page.Uploads {
			key := aws.ToString(u.Key)
			if !strings.HasPrefix(key, full) {
				continue
			}
			listed++
			name := strings.TrimPrefix(key, b.prefix)
			if dstl.CheckObjectName(name) != nil {
				continue
			}
			if err := fn(IncompleteUpload{Name: name, UploadID: aws.ToString(u.UploadId), Initiated: aws.ToTime(u.Initiated)}); err != nil {
				return listed, err
			}
		}
		if !aws.ToBool(page.IsTruncated) || (page.NextKeyMarker == nil && page.NextUploadIdMarker == nil) {
			return listed, nil
		}
		in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
}

// AbortIncompleteUpload aborts an upload that ListIncompleteUploads
// reported, freeing its parts. An upload that is gone already (completed
// or aborted meanwhile) is no error.
func (b *Backend) AbortIncompleteUpload(ctx context.Context, u IncompleteUpload) error {
	if err := dstl.CheckObjectName(u.Name); err != nil {
		return dstl.NewBackendError("abort upload", ID, u.Name, err)
	}
	if err := b.begin("abort upload", u.Name); err != nil {
		return err
	}
	defer b.calls.Leave()
	if err := ctx.Err(); err != nil {
		return b.wrap("abort upload", u.Name, err, false)
	}
	key := b.key(u.Name)
	err := b.do(ctx, func(ctx context.Context) error {
		_, err := b.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{
			Bucket: &b.bucket, Key: &key, UploadId: &u.UploadID,
		})
		return err
	})
	if err != nil && (apiCode(err) == "NoSuchUpload" || statusCode(err) == http.StatusNotFound && apiCode(err) != "NoSuchBucket") {
		return nil
	}
	if err != nil {
		return b.wrap("abort upload", u.Name, fmt.Errorf("upload %s: %w", u.UploadID, err), false)
	}
	return nil
}
