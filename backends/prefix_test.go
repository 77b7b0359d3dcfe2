package backends_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/mem"
	"github.com/dstlgo/dstl/conformance"
)

// located is a driver whose errors name the key they were about.
type located struct{ driver.Bucket }

func (located) Location(key string) string { return "key " + key }

// TestPrefix: a Bucket with a key prefix gives its driver keys (the
// prefix, then the name) and its callers names: List reports the names
// under the prefix only, errors name the key, and As reports the prefix.
func TestPrefix(t *testing.T) {
	s := mem.NewStore()
	b := backends.New("prefixed", located{mem.NewDriver(s)}, backends.NoRetries, backends.WithPrefix("root/"))
	defer b.Close()
	if b.Prefix() != "root/" {
		t.Fatalf("Prefix = %q", b.Prefix())
	}
	conformance.Put(t, b, "a/b", "1")
	conformance.Put(t, b, "c", "22")
	s.SetObject("other/d", []byte("not ours"))
	s.SetObject("rootless", []byte("not ours either"))
	s.SetObject("root//e", []byte("no valid name"))
	var keys []string
	for _, o := range s.Objects("") {
		keys = append(keys, o.Name)
	}
	if want := []string{"other/d", "root//e", "root/a/b", "root/c", "rootless"}; !slices.Equal(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{{"", []string{"a/b", "c"}}, {"a", []string{"a/b"}}, {"c", []string{"c"}}, {"other", nil}} {
		var names []string
		if err := b.List(t.Context(), tc.prefix, func(o backends.ObjectInfo) error { names = append(names, o.Name); return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("List(%q) = %q, want %q", tc.prefix, names, tc.want)
		}
	}
	if got, err := conformance.Read(t.Context(), b, "c", 1, -1); err != nil || got != "2" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	err := b.Put(t.Context(), "c", strings.NewReader("x"), 1)
	conformance.CheckError(t, err, "put", "prefixed", "c", backends.ErrExists)
	if !strings.Contains(err.Error(), "key root/c") {
		t.Errorf("the error does not name the key: %v", err)
	}
	if err := b.Delete(t.Context(), "c"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Object("root/c"); ok {
		t.Fatal("Delete left the key")
	}
	var root driver.Root
	if !b.As(&root) || root != (driver.Root{Bucket: "memory", Prefix: "root/"}) {
		t.Fatalf("As(*driver.Root) = %+v", root)
	}
	if err := backends.VerifyCreateOnly(t.Context(), b, "probe"); err != nil {
		t.Fatal(err)
	}
}
