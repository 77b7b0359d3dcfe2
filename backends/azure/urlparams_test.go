package azure

import (
	"testing"

	"github.com/dstlgo/dstl/backends/internal/urlparam"
)

// TestURLParameters: ParseURL takes every parameter URLParameters lists, at
// its example value, and rejects one it does not list.
func TestURLParameters(t *testing.T) {
	// The account comes from the environment when the URL names none.
	env := func(k string) string {
		if k == "AZURE_STORAGE_ACCOUNT" {
			return "devstoreaccount1"
		}
		return ""
	}
	parse := func(s string) error { _, err := parseURL(s, env); return err }
	if err := urlparam.CheckDocumented("azblob://container/p", URLParameters, parse, nil); err != nil {
		t.Error(err)
	}
}
