package miniotest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// minPartSize is the smallest part S3 accepts in a multipart upload, except
// for the last part.
const minPartSize = 5 << 20

// TestS3RoundTrip runs the raw S3 round trip against the store at
// DSTL_S3_ENDPOINT (MinIO under `make test`): in the shared DSTL_S3_BUCKET
// and in a bucket it creates and deletes.
func TestS3RoundTrip(t *testing.T) {
	env := requireEnv(t, "DSTL_S3_ENDPOINT", "DSTL_S3_REGION", "DSTL_S3_ACCESS_KEY", "DSTL_S3_SECRET_KEY", "DSTL_S3_BUCKET")
	ctx := testContext(t)
	client := newS3Client(t, ctx, env)
	region := env["DSTL_S3_REGION"]

	t.Run("shared-bucket", func(t *testing.T) {
		bucket := env["DSTL_S3_BUCKET"]
		// The harness creates the bucket; create it here too when it does not.
		_, err := client.CreateBucket(ctx, createBucketInput(bucket, region))
		var owned *types.BucketAlreadyOwnedByYou
		if err != nil && !errors.As(err, &owned) {
			t.Fatalf("CreateBucket %s: %v", bucket, err)
		}
		s3RoundTrip(t, ctx, client, bucket)
	})

	t.Run("new-bucket", func(t *testing.T) {
		bucket := uniqueName("dstl-sdk-")
		if _, err := client.CreateBucket(ctx, createBucketInput(bucket, region)); err != nil {
			t.Fatalf("CreateBucket %s: %v", bucket, err)
		}
		t.Cleanup(func() {
			ctx, cancel := cleanupContext()
			defer cancel()
			if _, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &bucket}); err != nil {
				t.Errorf("DeleteBucket %s: %v", bucket, err)
			}
		})
		s3RoundTrip(t, ctx, client, bucket)
	})
}

// newS3Client returns a client for an S3-compatible endpoint with the
// settings an emulator needs: static credentials, a custom endpoint with
// path-style addressing (no bucket.host DNS names on 127.0.0.1), checksums
// only where the API requires them (the SDK's default CRC32 checksums,
// sent as aws-chunked trailers, break some S3-compatible stores), and no
// shared config files, so that a developer's ~/.aws cannot change the test.
//
// The HTTP client is set on the S3 client, not given to LoadDefaultConfig:
// when AWS_CA_BUNDLE is set, LoadDefaultConfig accepts only its own
// BuildableClient, whose transport it clones out of reach, so the test
// could not close the idle connections that goleak would then report.
func newS3Client(t *testing.T, ctx context.Context, env map[string]string) *s3.Client {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion(env["DSTL_S3_REGION"]),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(
			env["DSTL_S3_ACCESS_KEY"], env["DSTL_S3_SECRET_KEY"], "")),
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
		config.WithSharedConfigFiles([]string{}),
		config.WithSharedCredentialsFiles([]string{}),
	)
	if err != nil {
		t.Fatalf("LoadDefaultConfig: %v", err)
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(env["DSTL_S3_ENDPOINT"])
		o.UsePathStyle = true
		o.HTTPClient = &http.Client{Transport: newTransport(t)}
	})
}

// createBucketInput names the region as the location constraint, which S3
// requires everywhere but us-east-1.
func createBucketInput(bucket, region string) *s3.CreateBucketInput {
	in := &s3.CreateBucketInput{Bucket: aws.String(bucket)}
	if region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(region),
		}
	}
	return in
}

// s3RoundTrip puts, reads, lists, conditionally puts, uploads in parts,
// aborts an upload and deletes, under a fresh prefix of bucket.
func s3RoundTrip(t *testing.T, ctx context.Context, c *s3.Client, bucket string) {
	prefix := uniqueName("miniotest/") + "/"
	t.Cleanup(func() { s3Clean(t, c, bucket, prefix) })
	key := prefix + "object"
	data := payload(1, 64<<10)

	// Put, with a known content length.
	s3Put(t, ctx, c, bucket, key, data, nil)

	// Ranged get.
	got, contentRange := s3Get(t, ctx, c, bucket, key, "bytes=100-1099")
	if !bytes.Equal(got, data[100:1100]) {
		t.Errorf("GetObject %s bytes=100-1099: got %d bytes, not the stored range", key, len(got))
	}
	if want := fmt.Sprintf("bytes 100-1099/%d", len(data)); contentRange != want {
		t.Errorf("GetObject %s: Content-Range %q, want %q", key, contentRange, want)
	}

	// List by prefix shows the object with its size.
	if objs := s3List(t, ctx, c, bucket, prefix); !onlyObject(objs, key, int64(len(data))) {
		t.Errorf("ListObjectsV2 %s: got %v, want only %s of %d bytes", prefix, objs, key, len(data))
	}

	// If-None-Match: * refuses to replace an object, and creates a new one.
	err := s3PutErr(ctx, c, bucket, key, []byte("replacement"), aws.String("*"))
	var re *awshttp.ResponseError
	var apiErr smithy.APIError
	switch {
	case err == nil:
		t.Errorf("PutObject %s If-None-Match: * on an existing key succeeded", key)
	case !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusPreconditionFailed:
		t.Errorf("PutObject %s If-None-Match: * on an existing key: %v, want HTTP 412", key, err)
	case !errors.As(err, &apiErr) || apiErr.ErrorCode() != "PreconditionFailed":
		t.Errorf("PutObject %s If-None-Match: *: error code of %v, want PreconditionFailed", key, err)
	}
	if got, _ := s3Get(t, ctx, c, bucket, key, ""); !bytes.Equal(got, data) {
		t.Errorf("GetObject %s after the refused put: the object changed", key)
	}
	fresh := prefix + "conditional"
	s3Put(t, ctx, c, bucket, fresh, []byte("new"), aws.String("*"))

	// A multipart upload of three parts completes and reads back.
	multi := prefix + "multipart"
	whole := payload(2, 2*minPartSize+(1<<20))
	s3Multipart(t, ctx, c, bucket, multi, whole, []int{minPartSize, minPartSize, 1 << 20})
	if got, _ := s3Get(t, ctx, c, bucket, multi, ""); !bytes.Equal(got, whole) {
		t.Errorf("GetObject %s: got %d bytes, not the %d uploaded in parts", multi, len(got), len(whole))
	}
	a, b := minPartSize-10, minPartSize+9 // a range across the first part boundary
	if got, _ := s3Get(t, ctx, c, bucket, multi, fmt.Sprintf("bytes=%d-%d", a, b)); !bytes.Equal(got, whole[a:b+1]) {
		t.Errorf("GetObject %s bytes=%d-%d: not the stored range", multi, a, b)
	}

	// An aborted multipart upload is no longer listed.
	aborted := prefix + "aborted"
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &aborted})
	if err != nil {
		t.Fatalf("CreateMultipartUpload %s: %v", aborted, err)
	}
	part := payload(3, 1<<20)
	if _, err := c.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &bucket, Key: &aborted, UploadId: up.UploadId, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(part), ContentLength: aws.Int64(int64(len(part))),
	}); err != nil {
		t.Fatalf("UploadPart %s: %v", aborted, err)
	}
	if ids := s3Uploads(t, ctx, c, bucket, aborted); !slices.Contains(ids, *up.UploadId) {
		t.Errorf("ListMultipartUploads %s: %v does not hold the open upload %s", aborted, ids, *up.UploadId)
	}
	if _, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: &bucket, Key: &aborted, UploadId: up.UploadId,
	}); err != nil {
		t.Fatalf("AbortMultipartUpload %s: %v", aborted, err)
	}
	if ids := s3Uploads(t, ctx, c, bucket, aborted); slices.Contains(ids, *up.UploadId) {
		t.Errorf("ListMultipartUploads %s: the aborted upload %s is still listed", aborted, *up.UploadId)
	}

	// Delete; a get of the deleted object fails with NoSuchKey.
	for _, k := range []string{key, fresh, multi} {
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(k)}); err != nil {
			t.Errorf("DeleteObject %s: %v", k, err)
		}
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	var nsk *types.NoSuchKey
	if !errors.As(err, &nsk) {
		t.Errorf("GetObject %s after DeleteObject: %v, want *types.NoSuchKey", key, err)
	}
	if objs := s3List(t, ctx, c, bucket, prefix); len(objs) != 0 {
		t.Errorf("ListObjectsV2 %s after the deletes: %v", prefix, objs)
	}
}

// onlyObject reports whether m holds exactly key with size.
func onlyObject(m map[string]int64, key string, size int64) bool {
	s, ok := m[key]
	return len(m) == 1 && ok && s == size
}

func s3PutErr(ctx context.Context, c *s3.Client, bucket, key string, data []byte, ifNoneMatch *string) error {
	_, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &bucket, Key: &key, Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), IfNoneMatch: ifNoneMatch,
	})
	return err
}

func s3Put(t *testing.T, ctx context.Context, c *s3.Client, bucket, key string, data []byte, ifNoneMatch *string) {
	t.Helper()
	if err := s3PutErr(ctx, c, bucket, key, data, ifNoneMatch); err != nil {
		t.Fatalf("PutObject %s: %v", key, err)
	}
}

// s3Get reads key, or the range rng of it when rng is not empty, and
// returns the bytes and the Content-Range header.
func s3Get(t *testing.T, ctx context.Context, c *s3.Client, bucket, key, rng string) ([]byte, string) {
	t.Helper()
	in := &s3.GetObjectInput{Bucket: &bucket, Key: &key}
	if rng != "" {
		in.Range = &rng
	}
	out, err := c.GetObject(ctx, in)
	if err != nil {
		t.Fatalf("GetObject %s %s: %v", key, rng, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("GetObject %s %s: reading the body: %v", key, rng, err)
	}
	if out.ContentLength != nil && *out.ContentLength != int64(len(b)) {
		t.Errorf("GetObject %s %s: Content-Length %d, body %d bytes", key, rng, *out.ContentLength, len(b))
	}
	return b, aws.ToString(out.ContentRange)
}

// s3List returns the keys under prefix with their sizes.
func s3List(t *testing.T, ctx context.Context, c *s3.Client, bucket, prefix string) map[string]int64 {
	t.Helper()
	objs := map[string]int64{}
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListObjectsV2 %s: %v", prefix, err)
		}
		for _, o := range page.Contents {
			objs[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
		}
	}
	return objs
}

// s3Uploads returns the ids of the incomplete multipart uploads of key.
// The prefix is the whole key: MinIO lists uploads of one object name only.
func s3Uploads(t *testing.T, ctx context.Context, c *s3.Client, bucket, key string) []string {
	t.Helper()
	out, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket, Prefix: &key})
	if err != nil {
		t.Fatalf("ListMultipartUploads %s: %v", key, err)
	}
	var ids []string
	for _, u := range out.Uploads {
		if aws.ToString(u.Key) == key {
			ids = append(ids, aws.ToString(u.UploadId))
		}
	}
	return ids
}

// s3Multipart uploads data to key in parts of the given sizes.
func s3Multipart(t *testing.T, ctx context.Context, c *s3.Client, bucket, key string, data []byte, sizes []int) {
	t.Helper()
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key})
	if err != nil {
		t.Fatalf("CreateMultipartUpload %s: %v", key, err)
	}
	var parts []types.CompletedPart
	off := 0
	for i, n := range sizes {
		num := aws.Int32(int32(i + 1))
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &bucket, Key: &key, UploadId: up.UploadId, PartNumber: num,
			Body: bytes.NewReader(data[off : off+n]), ContentLength: aws.Int64(int64(n)),
		})
		if err != nil {
			t.Fatalf("UploadPart %s #%d: %v", key, i+1, err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: num})
		off += n
	}
	if off != len(data) {
		t.Fatalf("s3Multipart: parts of %d bytes for %d bytes of data", off, len(data))
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &bucket, Key: &key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}); err != nil {
		t.Fatalf("CompleteMultipartUpload %s: %v", key, err)
	}
}

// s3Clean deletes what a failed round trip left under prefix: objects and
// incomplete uploads.
func s3Clean(t *testing.T, c *s3.Client, bucket, prefix string) {
	ctx, cancel := cleanupContext()
	defer cancel()
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Logf("cleanup: ListObjectsV2 %s: %v", prefix, err)
			break
		}
		for _, o := range page.Contents {
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: o.Key}); err != nil {
				t.Logf("cleanup: DeleteObject %s: %v", aws.ToString(o.Key), err)
			}
		}
	}
	for _, name := range []string{"aborted", "multipart"} {
		key := prefix + name
		out, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket, Prefix: &key})
		if err != nil {
			t.Logf("cleanup: ListMultipartUploads %s: %v", key, err)
			continue
		}
		for _, u := range out.Uploads {
			if _, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
				Bucket: &bucket, Key: u.Key, UploadId: u.UploadId,
			}); err != nil {
				t.Logf("cleanup: AbortMultipartUpload %s: %v", aws.ToString(u.Key), err)
			}
		}
	}
}
