package discard_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/discard"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/uploader"
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

// TestUploader: through a storage, the uploader confirms every persist
// with a handle of an object that is not there, and stores nothing; a
// batch's change sets get increasing offsets; a nil change set is an
// error.
func TestUploader(t *testing.T) {
	ctx := context.Background()
	s, err := dstl.New(dstl.DefaultConfig(discard.ID), discard.New(),
		dstl.WithUploader(func(uploader.Uploader) uploader.Uploader { return discard.Uploader{} }))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w, err := s.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: 1})
	if err != nil {
		t.Fatal(err)
	}
	var r dstl.PersistResult
	for cp := range int64(3) {
		if err := w.Append(ctx, int(cp%2), []byte("change")); err != nil {
			t.Fatal(err)
		}
		f, err := w.Persist(ctx, 0, cp+1)
		if err != nil {
			t.Fatal(err)
		}
		if r, err = f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.Remote.Entries) != 3 || slices.ContainsFunc(r.Remote.Entries, func(e dstl.HandleEntry) bool { return e.Object != "nowhere" }) {
		t.Errorf("handle %+v, want 3 entries of object nowhere", r.Remote.Entries)
	}

	var u discard.Uploader
	out, err := u.Upload(ctx, []*uploader.Task{{ChangeSets: []*format.ChangeSet{{SequenceNumber: 4}, {SequenceNumber: 5}}}, {ChangeSets: []*format.ChangeSet{{SequenceNumber: 9}}}})
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	for _, tr := range out.Tasks {
		for _, res := range tr.Results {
			offsets = append(offsets, res.Offset)
		}
	}
	if !slices.Equal(offsets, []int64{0, 1, 2}) || len(out.Objects) != 1 {
		t.Errorf("offsets %v, objects %+v; want 0, 1, 2 in one object", offsets, out.Objects)
	}
	if _, err := u.Upload(ctx, []*uploader.Task{{ChangeSets: []*format.ChangeSet{nil}}}); err == nil {
		t.Error("Upload of a nil change set succeeded")
	}
	if err := u.Discard(ctx, out.Objects[0]); err != nil {
		t.Errorf("Discard: %v", err)
	}
}
