package dstl

import "testing"

// TestFreeList: the value put last comes out first, and no more than the
// limit are kept.
func TestFreeList(t *testing.T) {
	f := newFreeList[int](2)
	if _, ok := f.get(); ok {
		t.Fatal("an empty list gave a value")
	}
	for _, v := range []int{1, 2, 3} {
		f.put(v) // 3 is one too many
	}
	for _, want := range []int{2, 1} {
		if v, ok := f.get(); !ok || v != want {
			t.Fatalf("get = %d, %v; want %d", v, ok, want)
		}
	}
	if v, ok := f.get(); ok {
		t.Fatalf("get = %d past the limit", v)
	}
}
