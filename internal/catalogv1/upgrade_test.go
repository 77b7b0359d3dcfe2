package catalogv1_test

import (
	"bytes"
	"slices"
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

// TestPeek: Peek returns what Fence returns, before and after the fence,
// and writes nothing.
func TestPeek(t *testing.T) {
	ctx := t.Context()
	b := dstltest.NewBackend()
	var ms []*catalog.Member
	for i := range 3 {
		m, err := catalog.Join(ctx, b, catalog.Config{JobID: "job", Instances: 3, Index: i, MaxParallelism: 3, Mode: catalog.Independent})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	for _, c := range []struct {
		m *catalog.Member
		n int64
	}{{ms[0], 1}, {ms[1], 1}, {ms[0], 2}} {
		if _, err := c.m.Commit(ctx, c.n, []byte("state"), nil, map[string]string{"offset": "7"}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(up *catalog.UpgradePoint) []string {
		var out []string
		for _, p := range up.Parts {
			out = append(out, p.Name)
		}
		return out
	}
	before := b.Len()
	peeked, err := catalog.Peek(ctx, b, "job", 1)
	if err != nil || peeked == nil {
		t.Fatalf("Peek: %+v, %v", peeked, err)
	}
	if b.Len() != before || peeked.Fence != 0 {
		t.Errorf("Peek wrote %d objects, fence %d: want none", b.Len()-before, peeked.Fence)
	}
	fenced, err := catalog.Fence(ctx, b, "job", "owner", time.Now(), catalog.Independent, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	after, err := catalog.Peek(ctx, b, "job", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{objname.CatalogPartName("job/", 1, 2, 0), objname.CatalogPartName("job/", 1, 1, 1)}
	for what, got := range map[string]*catalog.UpgradePoint{"peek before the fence": peeked, "fence": fenced, "peek after the fence": after} {
		if !slices.Equal(names(got), want) {
			t.Errorf("%s: parts %q, want %q", what, names(got), want)
		}
	}
	if after.Fence != fenced.Fence || after.Fence != 2 {
		t.Errorf("fence %d, peek after it %d: want 2", fenced.Fence, after.Fence)
	}
	if up, err := catalog.Peek(ctx, dstltest.NewBackend(), "job", 1); up != nil || err != nil {
		t.Errorf("Peek of no catalog: %+v, %v", up, err)
	}
}
