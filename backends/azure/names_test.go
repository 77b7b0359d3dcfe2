package azure

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/conformance"
)

// TestStoredNames fixes the names of the blobs in the container: the
// prefix, with a slash added, then the object's name, on both paths of
// a Put.
func TestStoredNames(t *testing.T) {
	cfg := testConfig(t, "")
	root := cfg.Prefix
	cfg.Prefix = root + "p" // a slash is added
	b := open(t, cfg)
	// "big" takes the multipart path.
	for name, data := range map[string]string{"a/b": "1", "c": "2", "big": strings.Repeat("x", testPartSize+1)} {
		conformance.Put(t, b, name, data)
		t.Cleanup(func() {
			if err := b.Delete(context.Background(), name); err != nil {
				t.Errorf("Delete(%q): %v", name, err)
			}
		})
	}
	var blobs []string
	pager := client(t, b).NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: to.Ptr(root)})
	for pager.More() {
		page, err := pager.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page.Segment.BlobItems {
			blobs = append(blobs, deref(item.Name))
		}
	}
	if want := []string{root + "p/a/b", root + "p/big", root + "p/c"}; !slices.Equal(blobs, want) {
		t.Fatalf("blobs %q, want %q", blobs, want)
	}
	var r driver.Root
	if !b.As(&r) || r != (driver.Root{Bucket: cfg.Container, Prefix: root + "p/"}) || b.Prefix() != r.Prefix {
		t.Fatalf("As(*driver.Root) = %+v, Prefix() = %q", r, b.Prefix())
	}
	if !strings.HasSuffix(root, "/") {
		t.Fatalf("the test's prefix %q", root)
	}
}
