package catalogv1_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
	catalog "github.com/dstlgo/dstl/internal/catalogv1"
)

// TestFenceIgnoresTheSecondLayout: the second layout's objects, under the
// same directory, are no objects of this layout: a job whose catalog is of
// the second layout alone has no catalog to fence.
func TestFenceIgnoresTheSecondLayout(t *testing.T) {
	b := dstltest.NewBackend()
	for _, name := range []string{objname.CatalogV2GenerationName("job/", 1), objname.CatalogV2ClaimName("job/", 1, 0),
		objname.CatalogV2CommitName("job/", 1, 1, 0), objname.CatalogV2FenceName("job/", 1)} {
		if err := b.Put(t.Context(), name, bytes.NewReader([]byte("x")), 1); err != nil {
			t.Fatal(err)
		}
	}
	up, err := catalog.Fence(t.Context(), b, "job", "owner", time.Now(), catalog.Aligned, 1, 0)
	if up != nil || err != nil {
		t.Fatalf("Fence: %+v, %v; want no catalog of the first layout", up, err)
	}
}
