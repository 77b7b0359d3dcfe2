package gcs

import (
	"testing"

	"github.com/dstlgo/dstl/backends/internal/urlparam"
)

// TestURLParameters: ParseURL takes every parameter URLParameters lists, at
// its example value, and rejects one it does not list.
func TestURLParameters(t *testing.T) {
	parse := func(s string) error { _, err := ParseURL(s); return err }
	if err := urlparam.CheckDocumented("gs://bucket/p", URLParameters, parse, nil); err != nil {
		t.Error(err)
	}
}
