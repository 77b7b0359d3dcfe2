package dstl

import (
	"testing"
	"time"
)

func TestWrittenBefore(t *testing.T) {
	name, err := NewObjectName("job/")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tests := []struct {
		name string
		t    time.Time
		want bool
	}{
		{name, now.Add(time.Second), true},
		{name, now.Add(-time.Second), false},
		{"job/0190a6f2-7c1e-7abc-8def-0123456789ab.dstl", now, true},  // 2024
		{"job/0190a6f2-7c1e-4abc-8def-0123456789ab.dstl", now, false}, // UUIDv4: not ours
		{"job/not-a-uuid.dstl", now, false},
		{"job/0190a6f2-7c1e-7abc-8def-0123456789ab.snap", now, false},
		{"0190a6f2-7c1e-7abc-8def-0123456789ab.dstl", now, true},
	}
	for _, tt := range tests {
		if got := writtenBefore(tt.name, tt.t); got != tt.want {
			t.Errorf("writtenBefore(%q, %v) = %v, want %v", tt.name, tt.t, got, tt.want)
		}
	}
}
