package gcs

import (
	"context"
	"errors"
	"io"
	"net/url"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/internal/transportcase"
)

// TestClassifyTransport: the transport's errors are classified as every
// backend classifies them: the permanent ones fail for good, the others
// are retried.
func TestClassifyTransport(t *testing.T) {
	d := &bucket{}
	b := offlineBackend(t)
	for _, tc := range transportcase.TransportCases() {
		want := driver.Transient
		if tc.Permanent {
			want = driver.Permanent
		}
		if got := d.Classify(tc.Err); got != want {
			t.Errorf("%s: Classify(%v) = %v, want %v", tc.Name, tc.Err, got, want)
		}
		err := b.Run(t.Context(), "get", "x", func(context.Context, driver.Runner) error { return tc.Err })
		if errors.Is(err, backends.ErrPermanent) != tc.Permanent {
			t.Errorf("%s: %v matches ErrPermanent: %v, want %v", tc.Name, err, !tc.Permanent, tc.Permanent)
		}
	}
	for _, tc := range []struct {
		name string
		err  error
		want driver.Code
	}{
		{"unexpected EOF", &url.Error{Op: "Get", URL: "https://x/", Err: io.ErrUnexpectedEOF}, driver.Transient},
		{"cancelled", &url.Error{Op: "Get", URL: "https://x/", Err: context.Canceled}, driver.Unknown},
		{"other", errors.New("something else"), driver.Unknown},
	} {
		if got := d.Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
