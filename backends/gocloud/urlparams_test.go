package gocloud

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/dstlgo/dstl/backends/internal/urlparam"
)

// TestURLParameters: ParseURL takes every parameter URLParameters lists, at
// its example value, for itself (it is not handed to the driver); a
// parameter it does not list goes to the driver, and opening the bucket
// fails naming it (memblob knows no such parameter).
func TestURLParameters(t *testing.T) {
	open := func(s string) error {
		cfg, err := ParseURL(s)
		if err != nil {
			return err
		}
		u, err := url.Parse(cfg.URL)
		if err != nil {
			return err
		}
		for _, p := range URLParameters {
			if u.Query().Has(p.Name) {
				return fmt.Errorf("parameter %q handed to the driver: %s", p.Name, cfg.URL)
			}
		}
		b, err := New(t.Context(), s)
		if err != nil {
			return err
		}
		return b.Close()
	}
	if err := urlparam.CheckDocumented("mem://bucket/p", URLParameters, open, nil); err != nil {
		t.Error(err)
	}
}
