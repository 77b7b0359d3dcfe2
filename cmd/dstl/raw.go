package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/local"
)

// rawStore puts and gets whole objects with a backend's SDK called
// directly, through the same client (or, for local disk, under the same
// root), for the baseline "dstl bench" sets the engine against: no
// retries, no preconditions, no checks. Names are relative to the
// backend's root, as the backend's are.
type rawStore interface {
	put(ctx context.Context, name string, body []byte) error
	get(ctx context.Context, name string) (int64, error) // reads the whole object, returns its size
	delete(ctx context.Context, name string) error
	// describe says what put and get do, for the report.
	describe() (put, get string)
	// removePrefix removes what is left of prefix (a "directory" ending in
	// "/") once its objects are deleted: a local directory; nothing in a
	// bucket.
	removePrefix(prefix string) error
}

// newRawStore returns the raw store beside backend b, opened from
// basePath: it takes the SDK client that b's As hands out, and the root
// (bucket and key prefix) that every backend's As gives.
func newRawStore(b backends.Backend, basePath string) (rawStore, error) {
	bk, ok := b.(interface{ As(target any) bool })
	var root driver.Root
	if !ok || !bk.As(&root) {
		return nil, fmt.Errorf("no raw SDK baseline for a backend of type %T", b)
	}
	var (
		dir       *os.Root
		s3Client  *awss3.Client
		gcsBucket *storage.BucketHandle
		azure     *container.Client
		bucket    *blob.Bucket
	)
	switch {
	case bk.As(&dir):
		cfg, err := local.ParseURL(basePath)
		if err != nil {
			return nil, err
		}
		return rawLocal{root: dir.Name(), sync: !cfg.NoSync}, nil
	case bk.As(&bucket): // before the SDK clients, which a gocloud bucket hands out too
		return rawGocloud{bucket: bucket, prefix: root.Prefix}, nil
	case bk.As(&s3Client):
		return rawS3{client: s3Client, bucket: root.Bucket, prefix: root.Prefix}, nil
	case bk.As(&gcsBucket):
		return rawGCS{bucket: gcsBucket, prefix: root.Prefix}, nil
	case bk.As(&azure):
		return rawAzure{client: azure, prefix: root.Prefix}, nil
	}
	return nil, fmt.Errorf("no raw SDK baseline for a backend of type %T", b)
}

// rawLocal puts an object as a plain durable create does: it creates the
// file, writes it, fsyncs it and fsyncs its directory, so that the file
// and its name survive a crash, as the backend's objects do (the backend
// writes a temporary file, fsyncs it, links it under the object's name and
// fsyncs the directory). With fsync=false in the base path, it fsyncs
// nothing, like the backend. It reads a file.
type rawLocal struct {
	root string
	sync bool
}

func (r rawLocal) describe() (put, get string) {
	if !r.sync {
		return "create, write and close the file (fsync=false: no fsync, like the backend)", "open and read the file"
	}
	return "create, write, fsync and close the file, then fsync its directory", "open and read the file"
}

func (r rawLocal) put(_ context.Context, name string, body []byte) error {
	p := filepath.Join(r.root, filepath.FromSlash(name))
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(body)
	if err == nil && r.sync {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil || !r.sync {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

func (r rawLocal) removePrefix(prefix string) error {
	return os.Remove(filepath.Join(r.root, filepath.FromSlash(prefix))) // only when empty
}

func (r rawLocal) get(_ context.Context, name string) (int64, error) {
	f, err := os.Open(filepath.Join(r.root, filepath.FromSlash(name)))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.Copy(io.Discard, f)
}

func (r rawLocal) delete(_ context.Context, name string) error {
	return os.Remove(filepath.Join(r.root, filepath.FromSlash(name)))
}

// rawS3 calls PutObject and GetObject.
type rawS3 struct {
	client         *awss3.Client
	bucket, prefix string
}

func (rawS3) describe() (put, get string) { return "PutObject", "GetObject" }

func (rawS3) removePrefix(string) error { return nil }

func (r rawS3) put(ctx context.Context, name string, body []byte) error {
	_, err := r.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket: &r.bucket, Key: aws.String(r.prefix + name), Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
	})
	return err
}

func (r rawS3) get(ctx context.Context, name string) (int64, error) {
	out, err := r.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &r.bucket, Key: aws.String(r.prefix + name)})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	return io.Copy(io.Discard, out.Body)
}

func (r rawS3) delete(ctx context.Context, name string) error {
	_, err := r.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &r.bucket, Key: aws.String(r.prefix + name)})
	return err
}

// rawGCS writes with one request (no resumable session) and reads with a
// range reader.
type rawGCS struct {
	bucket *storage.BucketHandle
	prefix string
}

func (rawGCS) describe() (put, get string) {
	return "a single-request object write (no resumable session)", "a range reader over the whole object"
}

func (rawGCS) removePrefix(string) error { return nil }

func (r rawGCS) put(ctx context.Context, name string, body []byte) error {
	w := r.bucket.Object(r.prefix + name).NewWriter(ctx)
	w.ChunkSize = 0
	if _, err := w.Write(body); err != nil {
		w.CloseWithError(err)
		return err
	}
	return w.Close()
}

func (r rawGCS) get(ctx context.Context, name string) (int64, error) {
	rd, err := r.bucket.Object(r.prefix+name).NewRangeReader(ctx, 0, -1)
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	return io.Copy(io.Discard, rd)
}

func (r rawGCS) delete(ctx context.Context, name string) error {
	return r.bucket.Object(r.prefix + name).Delete(ctx)
}

// rawAzure calls UploadBuffer and DownloadStream.
type rawAzure struct {
	client *container.Client
	prefix string
}

func (rawAzure) describe() (put, get string) { return "UploadBuffer", "DownloadStream" }

func (rawAzure) removePrefix(string) error { return nil }

func (r rawAzure) put(ctx context.Context, name string, body []byte) error {
	_, err := r.client.NewBlockBlobClient(r.prefix+name).UploadBuffer(ctx, body, nil)
	return err
}

func (r rawAzure) get(ctx context.Context, name string) (int64, error) {
	resp, err := r.client.NewBlobClient(r.prefix+name).DownloadStream(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(io.Discard, resp.Body)
}

func (r rawAzure) delete(ctx context.Context, name string) error {
	_, err := r.client.NewBlobClient(r.prefix+name).Delete(ctx, nil)
	return err
}

// rawGocloud calls the bucket's WriteAll and NewReader.
type rawGocloud struct {
	bucket *blob.Bucket
	prefix string
}

func (rawGocloud) describe() (put, get string) {
	return "the bucket's WriteAll", "the bucket's NewReader"
}

func (rawGocloud) removePrefix(string) error { return nil }

func (r rawGocloud) put(ctx context.Context, name string, body []byte) error {
	return r.bucket.WriteAll(ctx, r.prefix+name, body, nil)
}

func (r rawGocloud) get(ctx context.Context, name string) (int64, error) {
	rd, err := r.bucket.NewReader(ctx, r.prefix+name, nil)
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	return io.Copy(io.Discard, rd)
}

func (r rawGocloud) delete(ctx context.Context, name string) error {
	return r.bucket.Delete(ctx, r.prefix+name)
}
