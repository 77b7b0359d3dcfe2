package local

import (
	"slices"
	"testing"

	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/conformance"
)

// TestStoredNames fixes the files of the objects: the object's name
// under the root directory, each "/" a directory, from a Config and from
// a base path alike; the backend has no key prefix.
func TestStoredNames(t *testing.T) {
	fromURL, err := New(t.Context(), "file://"+t.TempDir()+"?fsync=false")
	if err != nil {
		t.Fatal(err)
	}
	defer fromURL.Close()
	for _, b := range []*Backend{open(t), fromURL} {
		conformance.Put(t, b, "a/b", "1")
		conformance.Put(t, b, "c", "2")
		if got, want := files(t, b.Root()), []string{"a/", "a/b", "c"}; !slices.Equal(got, want) {
			t.Errorf("files %q, want %q", got, want)
		}
		var r driver.Root
		if !b.As(&r) || r != (driver.Root{Bucket: b.Root()}) || b.Prefix() != "" {
			t.Errorf("As(*driver.Root) = %+v, Prefix() = %q", r, b.Prefix())
		}
	}
}
