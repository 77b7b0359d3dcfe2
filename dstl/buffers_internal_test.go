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

// TestPooledArenas: enough arenas for a full in-flight window of sets at
// the pre-emptive threshold, two per upload thread at least, 64 at most.
func TestPooledArenas(t *testing.T) {
	for _, tc := range []struct {
		threads          int
		maxInFlight, pre int64
		want             int
	}{
		{5, 100 << 20, 5 << 20, 22}, // the defaults
		{5, 100 << 20, 0, 10},       // no pre-emptive persists
		{20, 10 << 20, 5 << 20, 40},
		{5, 10 << 30, 1 << 20, 64},
	} {
		cfg := DefaultConfig("x")
		cfg.UploadNumThreads, cfg.UploadMaxInFlight, cfg.PreemptivePersistThreshold = tc.threads, tc.maxInFlight, tc.pre
		if got := pooledArenas(cfg); got != tc.want {
			t.Errorf("%+v: %d arenas, want %d", tc, got, tc.want)
		}
	}
}
