package dstl

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
)

// TestProgressReaderCounts: reads of new bytes of the body count as
// progress, through ReadAt and through SliceAt alike, re-reads do not,
// and a body not in memory hands out no slice.
func TestProgressReaderCounts(t *testing.T) {
	data := []byte(strings.Repeat("x", 100))
	for _, tc := range []struct {
		name  string
		body  io.ReaderAt
		slice bool // SliceAt hands out bytes
	}{
		{"in memory", backends.NewMemoryBody(data), true},
		{"a reader", strings.NewReader(string(data)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProgress(time.Now())
			r := p.trackBody(tc.body, int64(len(data))).(*progressReader)
			if _, err := r.ReadAt(make([]byte, 10), 0); err != nil {
				t.Fatal(err)
			}
			got, ok := r.SliceAt(5, 30) // 25 new bytes
			if ok != tc.slice || ok && len(got) != 30 {
				t.Fatalf("SliceAt = %d bytes, %v; want %v", len(got), ok, tc.slice)
			}
			want := int64(10)
			if tc.slice {
				want = 35
			}
			if n := p.bodyBytes.Load(); n != want {
				t.Errorf("%d bytes of progress, want %d", n, want)
			}
			if _, err := r.ReadAt(make([]byte, 5), 0); err != nil { // a re-read
				t.Fatal(err)
			}
			if n := p.bodyBytes.Load(); n != want {
				t.Errorf("after a re-read, %d bytes of progress, want %d", n, want)
			}
		})
	}
}
