package dstl

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/mem"
)

func TestPlanRanges(t *testing.T) {
	e := func(obj string, off, n int64) HandleEntry { return HandleEntry{Object: obj, Offset: off, Length: n} }
	// r is a planned range; its frames are fs, or the range itself.
	r := func(obj string, off, n int64, fs ...frameSpan) fetchRange {
		if len(fs) == 0 {
			fs = []frameSpan{{off, n}}
		}
		return fetchRange{object: obj, off: off, len: n, frames: fs}
	}
	for _, tc := range []struct {
		name    string
		entries []HandleEntry
		want    []fetchRange
	}{
		{"one", []HandleEntry{e("a", 8, 10)}, []fetchRange{r("a", 8, 10)}},
		{"adjacent merge", []HandleEntry{e("a", 8, 10), e("a", 18, 5)}, []fetchRange{r("a", 8, 15, frameSpan{8, 10}, frameSpan{18, 5})}},
		{"gap stays apart", []HandleEntry{e("a", 8, 10), e("a", 19, 5)}, []fetchRange{r("a", 8, 10), r("a", 19, 5)}},
		{"out of order", []HandleEntry{e("a", 18, 5), e("a", 8, 10)}, []fetchRange{r("a", 8, 15, frameSpan{8, 10}, frameSpan{18, 5})}},
		{"overlap and duplicate", []HandleEntry{e("a", 8, 10), e("a", 8, 10), e("a", 12, 2)}, []fetchRange{r("a", 8, 10, frameSpan{8, 10}, frameSpan{12, 2})}},
		{"two objects", []HandleEntry{e("b", 8, 4), e("a", 8, 4), e("b", 12, 4)}, []fetchRange{r("a", 8, 4), r("b", 8, 8, frameSpan{8, 4}, frameSpan{12, 4})}},
		{"touching up to the cap", []HandleEntry{e("a", 0, maxCoalesced/2), e("a", maxCoalesced/2, maxCoalesced/2), e("a", maxCoalesced, 10)},
			[]fetchRange{r("a", 0, maxCoalesced, frameSpan{0, maxCoalesced / 2}, frameSpan{maxCoalesced / 2, maxCoalesced / 2}), r("a", maxCoalesced, 10)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planRanges(tc.entries)
			if !slices.EqualFunc(got, tc.want, func(a, b fetchRange) bool { return reflect.DeepEqual(a, b) }) {
				t.Fatalf("planRanges = %+v, want %+v", got, tc.want)
			}
			for _, en := range tc.entries {
				i := findRange(got, en)
				if i < 0 || got[i].object != en.Object || en.Offset < got[i].off || en.Offset+en.Length > got[i].off+got[i].len {
					t.Fatalf("findRange(%+v) = %d in %+v", en, i, got)
				}
			}
		})
	}
}

// TestReaderOptions: a zero ReaderOptions field is its default, a
// negative one is an error naming it, and a reader with a StorageID reads
// only the handles of that storage.
func TestReaderOptions(t *testing.T) {
	b, err := mem.Open(t.Context(), mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	groups := KeyGroupRange{Start: 0, End: 127}
	for _, tc := range []struct {
		name      string
		opts      ReaderOptions
		idle      time.Duration
		size      int64
		storageID string
		err       string // part of the error, if one
	}{
		{name: "zero: the defaults", idle: DefaultCacheIdleTimeout, size: DefaultReaderCacheSize},
		{name: "idle set", opts: ReaderOptions{CacheIdleTimeout: time.Second}, idle: time.Second, size: DefaultReaderCacheSize},
		{name: "size set", opts: ReaderOptions{CacheSize: 1 << 20}, idle: DefaultCacheIdleTimeout, size: 1 << 20},
		{name: "storage set", opts: ReaderOptions{StorageID: "s3"}, idle: DefaultCacheIdleTimeout, size: DefaultReaderCacheSize, storageID: "s3"},
		{name: "negative idle", opts: ReaderOptions{CacheIdleTimeout: -1}, err: "CacheIdleTimeout"},
		{name: "negative size", opts: ReaderOptions{CacheSize: -1}, err: "CacheSize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReader(b, groups, tc.opts)
			if tc.err != "" {
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v: want one wrapping ErrInvalidConfig naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.cache.idle != tc.idle || r.cache.limit != tc.size || r.storageID != tc.storageID {
				t.Errorf("idle %v, size %d, storage %q; want %v, %d, %q", r.cache.idle, r.cache.limit, r.storageID, tc.idle, tc.size, tc.storageID)
			}
		})
	}
	r, err := NewReader(b, groups, ReaderOptions{StorageID: "s3"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := Handle{StorageID: "gcs", LogID: NewLogID(), KeyGroups: groups}
	if err := r.Read(t.Context(), h, func(Change) error { return nil }); !errors.Is(err, ErrInvalidHandle) {
		t.Errorf("reading a handle of another storage: %v, want ErrInvalidHandle", err)
	}
	h.StorageID = "s3"
	if err := r.Read(t.Context(), h, func(Change) error { return nil }); err != nil {
		t.Errorf("reading an empty handle of the reader's storage: %v", err)
	}
}
