package gcs

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/conformance"
)

// TestStoredNames fixes the names of the objects in the bucket: the
// prefix, with a slash added, then the object's name, on both paths of
// a Put.
func TestStoredNames(t *testing.T) {
	cfg := testConfig(t)
	root := cfg.Prefix
	cfg.Prefix = root + "p" // a slash is added
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// "big" takes the multipart path.
	for name, data := range map[string]string{"a/b": "1", "c": "2", "big": strings.Repeat("x", testPartSize+1)} {
		conformance.Put(t, b, name, data)
		defer func() {
			if err := b.Delete(context.Background(), name); err != nil {
				t.Errorf("Delete(%q): %v", name, err)
			}
		}()
	}
	if got, want := rawNames(t, cfg.Endpoint, cfg.Bucket, root), []string{root + "p/a/b", root + "p/big", root + "p/c"}; !slices.Equal(got, want) {
		t.Fatalf("objects %q, want %q", got, want)
	}
	var r driver.Root
	if !b.As(&r) || r != (driver.Root{Bucket: cfg.Bucket, Prefix: root + "p/"}) || b.Config().Prefix != r.Prefix {
		t.Fatalf("As(*driver.Root) = %+v, Config().Prefix = %q", r, b.Config().Prefix)
	}
}
