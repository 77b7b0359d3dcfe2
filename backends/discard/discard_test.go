package discard_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/discard"
	"github.com/dstlgo/dstl/dstl"
)

func TestBackend(t *testing.T) {
	ctx := context.Background()
	b := discard.New()
	for _, tc := range []struct {
		name    string
		call    func() error
		wantErr error
	}{
		{"put", func() error { return b.Put(ctx, "a/x", bytes.NewReader([]byte("abc")), 3) }, nil},
		{"get after put", func() error { _, err := b.Get(ctx, "a/x", 0, -1); return err }, backends.ErrNotFound},
		{"delete", func() error { return b.Delete(ctx, "a/x") }, nil},
		{"list", func() error {
			return b.List(ctx, "", func(backends.ObjectInfo) error { return errors.New("listed an object") })
		}, nil},
		{"close", b.Close, nil},
	} {
		if err := tc.call(); !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.wantErr)
		}
	}
	var be *backends.Error
	if _, err := b.Get(ctx, "a/x", 0, -1); !errors.As(err, &be) || be.Backend != discard.ID || be.Object != "a/x" {
		t.Errorf("Get: %v, want a backend error naming %q and the object", err, discard.ID)
	}
}

// TestStorage checks that appends and persists reach it through a storage
// and succeed without I/O.
func TestStorage(t *testing.T) {
	ctx := context.Background()
	s, err := dstl.New(dstl.DefaultConfig(discard.ID), discard.New())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w, err := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(ctx, 0, []byte("change")); err != nil {
		t.Fatal(err)
	}
	f, err := w.Persist(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}
