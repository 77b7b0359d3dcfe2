package dstl

import (
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl/objname"
)

func TestWrittenBefore(t *testing.T) {
	name, err := objname.NewLog("job/")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tests := []struct {
		prefix, name string
		t            time.Time
		want         bool
	}{
		{"job/", name, now.Add(time.Second), true},
		{"job/", name, now.Add(-time.Second), false},
		{"job/", "job/0190a6f2-7c1e-7abc-8def-0123456789ab.dstl", now, true},  // 2024
		{"job/", "job/0190a6f2-7c1e-4abc-8def-0123456789ab.dstl", now, false}, // UUIDv4: not ours
		{"job/", "job/not-a-uuid.dstl", now, false},
		{"job/", "job/0190a6f2-7c1e-7abc-8def-0123456789ab.snap", now, false},
		{"job/", "job/statestore/op/0190a6f2-7c1e-7abc-8def-0123456789ab.snap", now, false},
		{"job/", "job/x/0190a6f2-7c1e-7abc-8def-0123456789ab.dstl", now, false}, // no name of the storage's
		{"", "0190a6f2-7c1e-7abc-8def-0123456789ab.dstl", now, true},
		{"", "job/0190a6f2-7c1e-7abc-8def-0123456789ab.dstl", now, false}, // another job's
	}
	for _, tt := range tests {
		if got := writtenBefore(tt.prefix, tt.name, tt.t); got != tt.want {
			t.Errorf("writtenBefore(%q, %q, %v) = %v, want %v", tt.prefix, tt.name, tt.t, got, tt.want)
		}
	}
}
