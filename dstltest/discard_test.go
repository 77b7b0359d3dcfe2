package dstltest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/dstlgo/dstl/dstl"
)

func TestDiscard(t *testing.T) {
	ctx := context.Background()
	var b Discard
	for _, tc := range []struct {
		name    string
		call    func() error
		wantErr error
	}{
		{"put", func() error { return b.Put(ctx, "a/x", bytes.NewReader([]byte("abc")), 3) }, nil},
		{"get after put", func() error { _, err := b.Get(ctx, "a/x", 0, -1); return err }, dstl.ErrNotFound},
		{"delete", func() error { return b.Delete(ctx, "a/x") }, nil},
		{"list", func() error {
			return b.List(ctx, "", func(dstl.ObjectInfo) error { return errors.New("listed an object") })
		}, nil},
		{"close", b.Close, nil},
	} {
		if err := tc.call(); !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.wantErr)
		}
	}
	// Appends reach it through a storage and cost no I/O.
	s, err := dstl.New(dstl.DefaultConfig(DiscardID), Discard{})
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
