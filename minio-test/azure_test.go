package miniotest

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
)

// TestAzureRoundTrip runs the raw Azure Blob round trip against the
// account at DSTL_AZURE_ENDPOINT (Azurite under `make test`): in the shared
// DSTL_AZURE_CONTAINER and in a container it creates and deletes.
func TestAzureRoundTrip(t *testing.T) {
	env := requireEnv(t, "DSTL_AZURE_ENDPOINT", "DSTL_AZURE_ACCOUNT", "DSTL_AZURE_KEY", "DSTL_AZURE_CONTAINER")
	ctx := testContext(t)
	client := newAzureClient(t, env)

	t.Run("shared-container", func(t *testing.T) {
		container := env["DSTL_AZURE_CONTAINER"]
		// The harness creates the container; create it here too when it does not.
		if _, err := client.CreateContainer(ctx, container, nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
			t.Fatalf("CreateContainer %s: %v", container, err)
		}
		azureRoundTrip(t, ctx, client, container)
	})

	t.Run("new-container", func(t *testing.T) {
		container := uniqueName("dstl-sdk-")
		if _, err := client.CreateContainer(ctx, container, nil); err != nil {
			t.Fatalf("CreateContainer %s: %v", container, err)
		}
		t.Cleanup(func() {
			ctx, cancel := cleanupContext()
			defer cancel()
			if _, err := client.DeleteContainer(ctx, container, nil); err != nil {
				t.Errorf("DeleteContainer %s: %v", container, err)
			}
		})
		azureRoundTrip(t, ctx, client, container)
	})
}

// newAzureClient returns a client for the account at DSTL_AZURE_ENDPOINT, a
// path-style service URL (http://host:port/account, as Azurite serves it),
// signed with the account's shared key. Retries are few and short, so a
// failing emulator fails the test quickly.
func newAzureClient(t *testing.T, env map[string]string) *azblob.Client {
	t.Helper()
	cred, err := azblob.NewSharedKeyCredential(env["DSTL_AZURE_ACCOUNT"], env["DSTL_AZURE_KEY"])
	if err != nil {
		t.Fatalf("NewSharedKeyCredential: %v", err)
	}
	client, err := azblob.NewClientWithSharedKeyCredential(env["DSTL_AZURE_ENDPOINT"], cred, &azblob.ClientOptions{
		ClientOptions: azcore.ClientOptions{
			Transport: &http.Client{Transport: newTransport(t)},
			Retry:     policy.RetryOptions{MaxRetries: 2},
		},
	})
	if err != nil {
		t.Fatalf("NewClientWithSharedKeyCredential: %v", err)
	}
	return client
}

// azureRoundTrip uploads (whole, and as three staged blocks), reads a
// range, lists, conditionally uploads and deletes, under a fresh prefix of
// container.
func azureRoundTrip(t *testing.T, ctx context.Context, c *azblob.Client, container string) {
	prefix := uniqueName("miniotest/") + "/"
	t.Cleanup(func() { azureClean(t, c, container, prefix) })
	cc := c.ServiceClient().NewContainerClient(container)
	key := prefix + "object"
	data := payload(1, 64<<10)

	// Upload in one request.
	if _, err := cc.NewBlockBlobClient(key).Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), nil); err != nil {
		t.Fatalf("Upload %s: %v", key, err)
	}

	// Three staged blocks, committed as one blob.
	blocks := prefix + "blocks"
	whole := payload(2, 3*(256<<10)+1000)
	bb := cc.NewBlockBlobClient(blocks)
	var ids []string
	for i, off := 0, 0; off < len(whole); i++ {
		end := min(off+256<<10, len(whole))
		// Block ids are base64, and all of a blob's have the same length.
		id := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "block-%06d", i))
		if _, err := bb.StageBlock(ctx, id, streaming.NopCloser(bytes.NewReader(whole[off:end])), nil); err != nil {
			t.Fatalf("StageBlock %s #%d: %v", blocks, i, err)
		}
		ids = append(ids, id)
		off = end
	}
	if len(ids) < 3 {
		t.Fatalf("staged %d blocks, want at least 3", len(ids))
	}
	if _, err := bb.CommitBlockList(ctx, ids, nil); err != nil {
		t.Fatalf("CommitBlockList %s: %v", blocks, err)
	}
	if got, _ := azureGet(t, ctx, c, container, blocks, azblob.HTTPRange{}); !bytes.Equal(got, whole) {
		t.Errorf("DownloadStream %s: got %d bytes, not the %d committed in blocks", blocks, len(got), len(whole))
	}

	// Ranged downloads: inside the blob, and across a block boundary.
	got, contentRange := azureGet(t, ctx, c, container, key, azblob.HTTPRange{Offset: 100, Count: 1000})
	if !bytes.Equal(got, data[100:1100]) {
		t.Errorf("DownloadStream %s [100, 1100): got %d bytes, not the stored range", key, len(got))
	}
	if want := fmt.Sprintf("bytes 100-1099/%d", len(data)); contentRange != want {
		t.Errorf("DownloadStream %s: Content-Range %q, want %q", key, contentRange, want)
	}
	a := int64(256<<10 - 10)
	if got, _ := azureGet(t, ctx, c, container, blocks, azblob.HTTPRange{Offset: a, Count: 20}); !bytes.Equal(got, whole[a:a+20]) {
		t.Errorf("DownloadStream %s [%d, %d): not the stored range", blocks, a, a+20)
	}

	// List by prefix shows both blobs with their sizes.
	objs := azureList(t, ctx, c, container, prefix)
	if len(objs) != 2 || objs[key] != int64(len(data)) || objs[blocks] != int64(len(whole)) {
		t.Errorf("listing %s: got %v, want %s (%d bytes) and %s (%d bytes)",
			prefix, objs, key, len(data), blocks, len(whole))
	}

	// If-None-Match: * refuses to replace a blob, and creates a new one.
	ifNoneMatch := &blockblob.UploadOptions{AccessConditions: &blob.AccessConditions{
		ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)},
	}}
	_, err := cc.NewBlockBlobClient(key).Upload(ctx, streaming.NopCloser(bytes.NewReader([]byte("replacement"))), ifNoneMatch)
	if err == nil {
		t.Errorf("Upload %s If-None-Match: * over an existing blob succeeded", key)
	} else if !bloberror.HasCode(err, bloberror.BlobAlreadyExists) {
		t.Errorf("Upload %s If-None-Match: * over an existing blob: %v, want BlobAlreadyExists", key, err)
	}
	if got, _ := azureGet(t, ctx, c, container, key, azblob.HTTPRange{}); !bytes.Equal(got, data) {
		t.Errorf("DownloadStream %s after the refused upload: the blob changed", key)
	}
	fresh := prefix + "conditional"
	if _, err := cc.NewBlockBlobClient(fresh).Upload(ctx, streaming.NopCloser(bytes.NewReader([]byte("new"))), ifNoneMatch); err != nil {
		t.Errorf("Upload of the new %s If-None-Match: *: %v", fresh, err)
	}

	// Delete; a download of the deleted blob fails with BlobNotFound.
	for _, k := range []string{key, blocks, fresh} {
		if _, err := c.DeleteBlob(ctx, container, k, nil); err != nil {
			t.Errorf("DeleteBlob %s: %v", k, err)
		}
	}
	if resp, err := c.DownloadStream(ctx, container, key, nil); !bloberror.HasCode(err, bloberror.BlobNotFound) {
		if err == nil {
			resp.Body.Close()
		}
		t.Errorf("DownloadStream %s after DeleteBlob: %v, want BlobNotFound", key, err)
	}
	if objs := azureList(t, ctx, c, container, prefix); len(objs) != 0 {
		t.Errorf("listing %s after the deletes: %v", prefix, objs)
	}
}

// azureGet downloads rng of blob (all of it for the zero HTTPRange) and
// returns the bytes and the Content-Range header.
func azureGet(t *testing.T, ctx context.Context, c *azblob.Client, container, name string, rng azblob.HTTPRange) ([]byte, string) {
	t.Helper()
	resp, err := c.DownloadStream(ctx, container, name, &azblob.DownloadStreamOptions{Range: rng})
	if err != nil {
		t.Fatalf("DownloadStream %s %+v: %v", name, rng, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("DownloadStream %s %+v: reading the body: %v", name, rng, err)
	}
	if resp.ContentLength != nil && *resp.ContentLength != int64(len(b)) {
		t.Errorf("DownloadStream %s %+v: Content-Length %d, body %d bytes", name, rng, *resp.ContentLength, len(b))
	}
	return b, deref(resp.ContentRange)
}

// azureList returns the blobs under prefix with their sizes.
func azureList(t *testing.T, ctx context.Context, c *azblob.Client, container, prefix string) map[string]int64 {
	t.Helper()
	objs := map[string]int64{}
	p := c.NewListBlobsFlatPager(container, &azblob.ListBlobsFlatOptions{Prefix: &prefix})
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("listing %s: %v", prefix, err)
		}
		for _, b := range page.Segment.BlobItems {
			var size int64
			if b.Properties != nil {
				size = deref(b.Properties.ContentLength)
			}
			objs[deref(b.Name)] = size
		}
	}
	return objs
}

// azureClean deletes what a failed round trip left under prefix.
func azureClean(t *testing.T, c *azblob.Client, container, prefix string) {
	ctx, cancel := cleanupContext()
	defer cancel()
	p := c.NewListBlobsFlatPager(container, &azblob.ListBlobsFlatOptions{Prefix: &prefix})
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Logf("cleanup: listing %s: %v", prefix, err)
			return
		}
		for _, b := range page.Segment.BlobItems {
			if _, err := c.DeleteBlob(ctx, container, deref(b.Name), nil); err != nil {
				t.Logf("cleanup: DeleteBlob %s: %v", deref(b.Name), err)
			}
		}
	}
}

// deref returns *p, or the zero value for a nil p.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
