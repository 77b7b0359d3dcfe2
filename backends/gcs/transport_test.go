package gcs

import (
	"errors"
	"io"
	"net/url"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/request"
)

func TestRetryableTransport(t *testing.T) {
	for _, tc := range request.TransportCases() {
		if got := retryable(tc.Err); got != !tc.Permanent {
			t.Errorf("%s: retryable(%v) = %v, want %v", tc.Name, tc.Err, got, !tc.Permanent)
		}
		b := &Backend{cfg: Config{Bucket: "bkt"}}
		if err := b.wrap("get", "x", tc.Err); errors.Is(err, backends.ErrPermanent) != tc.Permanent {
			t.Errorf("%s: %v matches ErrPermanent: %v, want %v", tc.Name, err, !tc.Permanent, tc.Permanent)
		}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"unexpected EOF", &url.Error{Op: "Get", URL: "https://x/", Err: io.ErrUnexpectedEOF}, true},
		{"other", errors.New("something else"), false},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("%s: retryable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
