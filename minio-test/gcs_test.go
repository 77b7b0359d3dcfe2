package miniotest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
)

// gcsChunkSize is the smallest chunk of a resumable upload: the client
// rounds ChunkSize up to a multiple of 256 KiB.
const gcsChunkSize = 256 << 10

// TestGCSRoundTrip runs the raw GCS round trip against the store at
// DSTL_GCS_ENDPOINT (fake-gcs-server under `make test`): in the shared
// DSTL_GCS_BUCKET and in a bucket it creates and deletes.
func TestGCSRoundTrip(t *testing.T) {
	env := requireEnv(t, "DSTL_GCS_ENDPOINT", "DSTL_GCS_BUCKET")
	// The client is pointed at the emulator by its options alone, not by
	// STORAGE_EMULATOR_HOST; make sure the variable does not help.
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	ctx := testContext(t)
	client := newGCSClient(t, ctx, env["DSTL_GCS_ENDPOINT"])

	t.Run("shared-bucket", func(t *testing.T) {
		bucket := client.Bucket(env["DSTL_GCS_BUCKET"])
		// The harness creates the bucket; create it here too when it does not.
		if _, err := bucket.Attrs(ctx); errors.Is(err, storage.ErrBucketNotExist) {
			if err := bucket.Create(ctx, "dstl-test", nil); err != nil {
				t.Fatalf("creating bucket %s: %v", env["DSTL_GCS_BUCKET"], err)
			}
		} else if err != nil {
			t.Fatalf("bucket %s: %v", env["DSTL_GCS_BUCKET"], err)
		}
		gcsRoundTrip(t, ctx, bucket)
	})

	t.Run("new-bucket", func(t *testing.T) {
		name := uniqueName("dstl-sdk-")
		bucket := client.Bucket(name)
		if err := bucket.Create(ctx, "dstl-test", nil); err != nil {
			t.Fatalf("creating bucket %s: %v", name, err)
		}
		t.Cleanup(func() {
			ctx, cancel := cleanupContext()
			defer cancel()
			if err := bucket.Delete(ctx); err != nil {
				t.Errorf("deleting bucket %s: %v", name, err)
			}
		})
		gcsRoundTrip(t, ctx, bucket)
	})
}

// newGCSClient returns a JSON API client for the emulator at endpoint,
// without credentials. Reads go to the endpoint's host too: the client
// derives its XML read host from the endpoint. The client's Close closes
// its transport's idle connections.
func newGCSClient(t *testing.T, ctx context.Context, endpoint string) *storage.Client {
	t.Helper()
	client, err := storage.NewClient(ctx,
		option.WithEndpoint(strings.TrimSuffix(endpoint, "/")+"/storage/v1/"),
		option.WithoutAuthentication(),
	)
	if err != nil {
		t.Fatalf("storage.NewClient: %v", err)
	}
	t.Cleanup(func() {
		if err := client.Close(); err != nil {
			t.Errorf("closing the GCS client: %v", err)
		}
	})
	return client
}

// gcsRoundTrip puts (in one request and resumably in chunks), reads a
// range, lists, conditionally puts and deletes, under a fresh prefix of
// bucket.
func gcsRoundTrip(t *testing.T, ctx context.Context, bucket *storage.BucketHandle) {
	prefix := uniqueName("miniotest/") + "/"
	t.Cleanup(func() { gcsClean(t, bucket, prefix) })
	key := prefix + "object"
	data := payload(1, 64<<10)

	// Put in one request.
	if err := gcsPut(ctx, bucket.Object(key), data, 0, nil); err != nil {
		t.Fatalf("writing %s: %v", key, err)
	}

	// A resumable upload in at least three chunks.
	chunked := prefix + "chunked"
	whole := payload(2, 3*gcsChunkSize+1000)
	var progress []int64
	if err := gcsPut(ctx, bucket.Object(chunked), whole, gcsChunkSize, func(n int64) { progress = append(progress, n) }); err != nil {
		t.Fatalf("writing %s in chunks: %v", chunked, err)
	}
	if len(progress) < 3 {
		t.Errorf("writing %s: %d chunks reported (%v), want at least 3", chunked, len(progress), progress)
	}
	if got := gcsRead(t, ctx, bucket.Object(chunked), 0, -1); !bytes.Equal(got, whole) {
		t.Errorf("reading %s: got %d bytes, not the %d uploaded in chunks", chunked, len(got), len(whole))
	}

	// Ranged reads: inside the object, and across a chunk boundary.
	if got := gcsRead(t, ctx, bucket.Object(key), 100, 1000); !bytes.Equal(got, data[100:1100]) {
		t.Errorf("reading %s [100, 1100): got %d bytes, not the stored range", key, len(got))
	}
	a := int64(gcsChunkSize - 10)
	if got := gcsRead(t, ctx, bucket.Object(chunked), a, 20); !bytes.Equal(got, whole[a:a+20]) {
		t.Errorf("reading %s [%d, %d): not the stored range", chunked, a, a+20)
	}

	// List by prefix shows both objects with their sizes.
	objs := gcsList(t, ctx, bucket, prefix)
	if len(objs) != 2 || objs[key] != int64(len(data)) || objs[chunked] != int64(len(whole)) {
		t.Errorf("listing %s: got %v, want %s (%d bytes) and %s (%d bytes)",
			prefix, objs, key, len(data), chunked, len(whole))
	}

	// DoesNotExist refuses to replace an object, and creates a new one.
	err := gcsPut(ctx, bucket.Object(key).If(storage.Conditions{DoesNotExist: true}), []byte("replacement"), 0, nil)
	var gerr *googleapi.Error
	if err == nil {
		t.Errorf("writing %s with DoesNotExist over an existing object succeeded", key)
	} else if !errors.As(err, &gerr) || gerr.Code != http.StatusPreconditionFailed {
		t.Errorf("writing %s with DoesNotExist over an existing object: %v, want HTTP 412", key, err)
	}
	if got := gcsRead(t, ctx, bucket.Object(key), 0, -1); !bytes.Equal(got, data) {
		t.Errorf("reading %s after the refused write: the object changed", key)
	}
	fresh := prefix + "conditional"
	if err := gcsPut(ctx, bucket.Object(fresh).If(storage.Conditions{DoesNotExist: true}), []byte("new"), 0, nil); err != nil {
		t.Errorf("writing the new %s with DoesNotExist: %v", fresh, err)
	}

	// Delete; a read of the deleted object fails with ErrObjectNotExist.
	for _, k := range []string{key, chunked, fresh} {
		if err := bucket.Object(k).Delete(ctx); err != nil {
			t.Errorf("deleting %s: %v", k, err)
		}
	}
	if r, err := bucket.Object(key).NewReader(ctx); !errors.Is(err, storage.ErrObjectNotExist) {
		if err == nil {
			r.Close()
		}
		t.Errorf("reading %s after deleting it: %v, want storage.ErrObjectNotExist", key, err)
	}
	if objs := gcsList(t, ctx, bucket, prefix); len(objs) != 0 {
		t.Errorf("listing %s after the deletes: %v", prefix, objs)
	}
}

// gcsPut writes data to o. A chunkSize of 0 sends it in one request;
// otherwise the upload is resumable, in chunks of chunkSize, and progress
// is called after each chunk.
func gcsPut(ctx context.Context, o *storage.ObjectHandle, data []byte, chunkSize int, progress func(int64)) error {
	w := o.NewWriter(ctx)
	w.ChunkSize = chunkSize
	w.ProgressFunc = progress
	if _, err := w.Write(data); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// gcsRead reads length bytes of o from offset (all of it for a length of
// -1).
func gcsRead(t *testing.T, ctx context.Context, o *storage.ObjectHandle, offset, length int64) []byte {
	t.Helper()
	r, err := o.NewRangeReader(ctx, offset, length)
	if err != nil {
		t.Fatalf("reading %s [%d, +%d): %v", o.ObjectName(), offset, length, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading %s [%d, +%d): %v", o.ObjectName(), offset, length, err)
	}
	if r.Attrs.StartOffset != offset {
		t.Errorf("reading %s from %d: the reader starts at %d", o.ObjectName(), offset, r.Attrs.StartOffset)
	}
	return b
}

// gcsList returns the objects under prefix with their sizes.
func gcsList(t *testing.T, ctx context.Context, bucket *storage.BucketHandle, prefix string) map[string]int64 {
	t.Helper()
	objs := map[string]int64{}
	it := bucket.Objects(ctx, &storage.Query{Prefix: prefix})
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return objs
		}
		if err != nil {
			t.Fatalf("listing %s: %v", prefix, err)
		}
		objs[a.Name] = a.Size
	}
}

// gcsClean deletes what a failed round trip left under prefix.
func gcsClean(t *testing.T, bucket *storage.BucketHandle, prefix string) {
	ctx, cancel := cleanupContext()
	defer cancel()
	it := bucket.Objects(ctx, &storage.Query{Prefix: prefix})
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return
		}
		if err != nil {
			t.Logf("cleanup: listing %s: %v", prefix, err)
			return
		}
		if err := bucket.Object(a.Name).Delete(ctx); err != nil {
			t.Logf("cleanup: deleting %s: %v", a.Name, err)
		}
	}
}
