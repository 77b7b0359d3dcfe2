package gcs

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dstlgo/dstl/backends"
)

// TestVerifyCreateOnly: the emulator refuses a Put of an existing name on
// both paths (one request, and the multipart path at its smallest size),
// so the check passes.
func TestVerifyCreateOnly(t *testing.T) {
	b := harness(t)
	t.Cleanup(func() { b.Close() })
	if err := backends.VerifyCreateOnly(t.Context(), b, "job/.create-only-check"); err != nil {
		t.Fatalf("VerifyCreateOnly: %v", err)
	}
	bk := b.(*Backend)
	size := bk.d.MinMultipartSize()
	body := bytes.Repeat([]byte{'m'}, int(size))
	if err := bk.PutMultipart(t.Context(), "job/multipart", bytes.NewReader(body), size); err != nil {
		t.Fatalf("PutMultipart of a new name: %v", err)
	}
	if err := bk.PutMultipart(t.Context(), "job/multipart", bytes.NewReader(body), size); !errors.Is(err, backends.ErrExists) {
		t.Fatalf("PutMultipart over an existing object: %v, want ErrExists", err)
	}
}
