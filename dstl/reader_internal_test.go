package dstl

import (
	"reflect"
	"slices"
	"testing"
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
