package backends_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"s3://AKIA:SECRET@b/a%zz", "s3://REDACTED@b/a%zz"},
		{"s3://AKIA@b/job", "s3://REDACTED@b/job"},
		{"azblob://c/job?account=a&sig=abc%2Fdef&se=2030", "azblob://c/job?account=a&sig=REDACTED&se=2030"},
		{"https://a.blob.core.windows.net/c/x?sv=1&SIG=s", "https://a.blob.core.windows.net/c/x?sv=1&SIG=REDACTED"},
		{"s3://b/p?region=r&X-Amz-Signature=s&x-amz-security-token=t", "s3://b/p?region=r&X-Amz-Signature=REDACTED&x-amz-security-token=REDACTED"},
		{"gs://b/p?credentials_file=/k.json#f", "gs://b/p?credentials_file=REDACTED#f"},
		{"/var/log/dstl", "/var/log/dstl"},
		{"s3://b/x@y", "s3://b/x@y"}, // an @ in the path is no user information
	} {
		if got := backends.RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestOpenBackendHidesSecrets: errors of OpenBackend never show the user
// information or the signature of a base path.
func TestOpenBackendHidesSecrets(t *testing.T) {
	for _, bp := range []string{
		"s3://AKIA:SECRET@b/a%zz",             // does not parse
		"nosuch://AKIA:SECRET@b/x?sig=SECRET", // no backend serves it
		"file://AKIA:SECRET@h/x?sig=SECRET",   // the backend refuses it
	} {
		_, _, err := backends.Open(context.Background(), "", bp)
		if err == nil {
			t.Fatalf("%s: opened", bp)
		}
		if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "AKIA") {
			t.Errorf("%s: error shows a secret: %v", bp, err)
		}
	}
}

// TestOpenBackendExplicitIDTakesAnyBasePath: with the backend named, a base
// path that looks like a URL but does not parse as one is the backend's to
// judge (a local directory "logs:/a%zz"); without, it is an error.
func TestOpenBackendExplicitIDTakesAnyBasePath(t *testing.T) {
	t.Chdir(t.TempDir())
	b, id, err := backends.Open(context.Background(), "local", "logs:/a%zz")
	if err != nil {
		t.Fatalf("local backend at logs:/a%%zz: %v", err)
	}
	b.Close()
	if id != "local" {
		t.Errorf("id %q, want local", id)
	}
	if _, _, err := backends.Open(context.Background(), "", "s3://b/a%zz"); !errors.Is(err, dstl.ErrInvalidConfig) {
		t.Errorf("s3://b/a%%zz without a backend named: err %v, want ErrInvalidConfig", err)
	}
}
