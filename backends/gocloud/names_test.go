package gocloud

import (
	"errors"
	"io"
	"slices"
	"testing"

	"gocloud.dev/blob"

	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/conformance"
)

// TestStoredNames fixes the keys of the objects in the bucket: the
// prefix, then the object's name. The path of a base path gets a slash;
// a Config's Prefix is used as it is.
func TestStoredNames(t *testing.T) {
	for _, tc := range []struct {
		open   func() (*Backend, error)
		prefix string
	}{
		{func() (*Backend, error) { return New(t.Context(), "mem://b/jobs/42") }, "jobs/42/"},
		{func() (*Backend, error) {
			cfg := DefaultConfig("mem://")
			cfg.Prefix = "jobs-"
			return Open(t.Context(), cfg)
		}, "jobs-"},
		{func() (*Backend, error) { return Open(t.Context(), DefaultConfig("mem://")) }, ""},
	} {
		b, err := tc.open()
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		for _, name := range []string{"a/b", "c"} {
			conformance.Put(t, b, name, name)
		}
		var bk *blob.Bucket
		if !b.As(&bk) {
			t.Fatal("As(**blob.Bucket) = false")
		}
		var keys []string
		it := bk.List(nil)
		for {
			o, err := it.Next(t.Context())
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, o.Key)
		}
		if want := []string{tc.prefix + "a/b", tc.prefix + "c"}; !slices.Equal(keys, want) {
			t.Errorf("keys %q, want %q", keys, want)
		}
		var r driver.Root
		if !b.As(&r) || r.Prefix != tc.prefix {
			t.Errorf("As(*driver.Root) = %+v, want the prefix %q", r, tc.prefix)
		}
	}
}
