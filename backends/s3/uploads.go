package s3

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
)

// IncompleteUpload is an incomplete multipart upload, as
// [Backend.ListIncompleteUploads] reports it.
type IncompleteUpload = backends.IncompleteUpload

var _ backends.IncompleteUploads = (*Backend)(nil)

// ListIncompleteUploads calls fn for every incomplete multipart upload of
// an object whose name starts with prefix (see [IncompleteUpload]), in the
// service's order, and page, when not nil, for every page of uploads the
// service answers (also for a page of which fn sees none, as in a listing
// of the whole bucket): a caller bounding the wait for the service counts
// each as progress. Keys under the backend's prefix that are no valid
// object names are skipped, and a prefix that no valid name starts with
// lists nothing. An error of fn stops the listing and is returned as it
// is.
//
// S3 lists uploads by key prefix. MinIO lists only the uploads of one
// exact key, or of the whole bucket: for a prefix that is no exact key it
// answers none. So when the listing by prefix finds none, the service is
// asked whether it honours prefixes: it lists one upload of the whole
// bucket and, unless there is none or it is under prefix, the uploads
// under that upload's key less its last character, which S3 answers with
// that upload (at least) and MinIO with none. Only a service that ignores
// the prefix (or an upload under prefix that the listing by prefix missed,
// or an upload that ended meanwhile) makes the whole bucket's uploads
// listed and filtered here. The cost on S3: a listing by prefix, and when
// it finds nothing, two requests of at most one upload each; on MinIO,
// those and the listing of every upload in the bucket.
func (b *Backend) ListIncompleteUploads(ctx context.Context, prefix string, fn func(IncompleteUpload) error, page func()) error {
	const op = "list uploads"
	if fn == nil {
		return backends.NewError(op, ID, prefix, errors.New("nil callback"))
	}
	if page == nil {
		page = func() {}
	}
	var fnErr error
	call := func(u IncompleteUpload) error {
		fnErr = fn(u)
		return fnErr
	}
	err := b.Run(ctx, op, prefix, func(ctx context.Context, rt driver.Runner) error {
		if backends.CheckObjectName(prefix+"x") != nil {
			return nil // a complete segment of prefix is invalid: no valid name starts with it
		}
		return b.d.listIncompleteUploads(ctx, rt, b.Prefix(), prefix, call, page)
	})
	if fnErr != nil {
		return fnErr // as it is
	}
	return err
}

// listIncompleteUploads lists the uploads of the names that start with
// prefix, under the backend's key prefix root.
func (d *bucket) listIncompleteUploads(ctx context.Context, rt driver.Runner, root, prefix string, fn func(IncompleteUpload) error, page func()) error {
	full := root + prefix
	found, err := d.listUploads(ctx, rt, root, full, full, fn, page)
	if err != nil || found > 0 || full == "" {
		return err
	}
	ignored, err := d.ignoresUploadPrefix(ctx, rt, full, page)
	if err != nil || !ignored {
		return err
	}
	_, err = d.listUploads(ctx, rt, root, "", full, fn, page)
	return err
}

// ignoresUploadPrefix reports whether the service may have uploads under
// full that its listing by prefix did not answer (see
// [Backend.ListIncompleteUploads]): it lists one upload of the bucket and,
// unless there is none or it is under full, lists by a prefix of its key
// that the key extends, which a service honouring prefixes answers with an
// upload.
func (d *bucket) ignoresUploadPrefix(ctx context.Context, rt driver.Runner, full string, page func()) (bool, error) {
	one := func(p string) (string, bool, error) {
		in := &awss3.ListMultipartUploadsInput{Bucket: &d.bucket, MaxUploads: aws.Int32(1)}
		if p != "" {
			in.Prefix = &p
		}
		out, err := d.listUploadsPage(ctx, rt, in)
		if err != nil {
			return "", false, err
		}
		page()
		if len(out.Uploads) == 0 {
			return "", false, nil
		}
		return aws.ToString(out.Uploads[0].Key), true, nil
	}
	key, ok, err := one("")
	switch {
	case err != nil || !ok:
		return false, err // no upload in the bucket at all
	case strings.HasPrefix(key, full):
		return true, nil // one under the prefix that the listing by prefix did not answer
	}
	_, size := utf8.DecodeLastRuneInString(key)
	if size >= len(key) {
		return true, nil // no shorter prefix to ask by: list the bucket
	}
	_, ok, err = one(key[:len(key)-size])
	return !ok, err
}

// listUploads lists the uploads whose keys start with listPrefix, calls
// page for every page and fn for those whose keys start with full (with
// their names: their keys without root), and returns how many it listed.
func (d *bucket) listUploads(ctx context.Context, rt driver.Runner, root, listPrefix, full string, fn func(IncompleteUpload) error, page func()) (int, error) {
	in := &awss3.ListMultipartUploadsInput{Bucket: &d.bucket}
	if listPrefix != "" {
		in.Prefix = &listPrefix
	}
	listed := 0
	for {
		out, err := d.listUploadsPage(ctx, rt, in)
		if err != nil {
			return listed, err
		}
		page()
		for _, u := range out.Uploads {
			key := aws.ToString(u.Key)
			if !strings.HasPrefix(key, full) {
				continue
			}
			listed++
			name := strings.TrimPrefix(key, root)
			if backends.CheckObjectName(name) != nil {
				continue
			}
			if err := fn(IncompleteUpload{Name: name, UploadID: aws.ToString(u.UploadId), Initiated: aws.ToTime(u.Initiated)}); err != nil {
				return listed, err
			}
		}
		if !aws.ToBool(out.IsTruncated) || (out.NextKeyMarker == nil && out.NextUploadIdMarker == nil) {
			return listed, nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// listUploadsPage makes one ListMultipartUploads request.
func (d *bucket) listUploadsPage(ctx context.Context, rt driver.Runner, in *awss3.ListMultipartUploadsInput) (*awss3.ListMultipartUploadsOutput, error) {
	var out *awss3.ListMultipartUploadsOutput
	err := rt.Do(ctx, 0, func(ctx context.Context) error {
		o, err := d.client.ListMultipartUploads(ctx, in)
		out = o
		return d.explain(err)
	})
	return out, err
}

// AbortIncompleteUpload aborts an upload that ListIncompleteUploads
// reported, freeing its parts. An upload that is gone already (completed
// or aborted meanwhile) is no error.
func (b *Backend) AbortIncompleteUpload(ctx context.Context, u IncompleteUpload) error {
	const op = "abort upload"
	if err := backends.CheckObjectName(u.Name); err != nil {
		return backends.NewError(op, ID, u.Name, err)
	}
	return b.Run(ctx, op, u.Name, func(ctx context.Context, rt driver.Runner) error {
		if err := b.d.abortUpload(ctx, rt, b.Prefix()+u.Name, &u.UploadID); err != nil {
			return fmt.Errorf("upload %s: %w", u.UploadID, err)
		}
		return nil
	})
}
