package catalog_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// TestDecodeRecord: DecodeRecord reads each kind of catalog object alone,
// without joining the job, checks it against its name when it has a
// catalog object's name, and calls a damaged one damaged.
func TestDecodeRecord(t *testing.T) {
	ctx := context.Background()
	b := dstltest.NewBackend()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	m, err := catalog.Join(ctx, b, catalog.Config{JobID: "job", Instances: 2, Index: 1, MaxParallelism: 8, Owner: "pod-1",
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Commit(ctx, 3, []byte("state"), []string{"job/a.dstl"}, map[string]string{"offset": "30"}); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		rc, err := b.Get(ctx, name, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		data, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	g := m.Generation().Number
	prefix := objname.JobPrefix("job")
	genName, claimName := objname.CatalogGenerationName(prefix, g), objname.CatalogClaimName(prefix, g, 1)
	partName := objname.CatalogPartName(prefix, g, 3, 1)

	r, err := catalog.DecodeRecord(genName, read(genName))
	if err != nil || r.Kind != catalog.GenerationRecord || r.Version != catalog.Version || r.Generation == nil ||
		r.Generation.Number != g || r.Generation.Instances() != 2 || r.Generation.MaxParallelism != 8 {
		t.Fatalf("generation: %+v, %v", r, err)
	}
	r, err = catalog.DecodeRecord(claimName, read(claimName))
	if err != nil || r.Kind != catalog.ClaimRecord || r.Owner != "pod-1" || !r.Created.Equal(now) {
		t.Fatalf("claim: %+v, %v", r, err)
	}
	r, err = catalog.DecodeRecord(partName, read(partName))
	if err != nil || r.Kind != catalog.PartRecord || r.Part == nil || r.Part.Name != partName || r.Part.Checkpoint != 3 ||
		r.Part.Instance != 1 || string(r.Part.State) != "state" || r.Part.Metadata["offset"] != "30" ||
		r.Part.KeyGroups != (dstl.KeyGroupRange{Start: 4, End: 7}) {
		t.Fatalf("part: %+v, %v", r, err)
	}
	// A copy under another name (a local file, say) is read by its content.
	if r, err := catalog.DecodeRecord("copies/"+path.Base(partName), read(partName)); err != nil || r.Kind != catalog.PartRecord {
		t.Fatalf("part under another name: %+v, %v", r, err)
	}

	for _, tc := range []struct {
		name, object string
		data         []byte
		want         string
	}{
		{"bit flipped", partName, flip(read(partName), 20), "checksum"},
		{"truncated", genName, read(genName)[:5], "too short"},
		{"a part under a claim's name", claimName, read(partName), "a part under the name of a claim"},
		{"a part under another part's name", objname.CatalogPartName(prefix, g, 4, 1), read(partName), "under the name of generation"},
		{"not a catalog object", partName, []byte("DSTL and more bytes"), "bad magic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := catalog.DecodeRecord(tc.object, tc.data)
			if !errors.Is(err, catalog.ErrDamaged) || !strings.Contains(err.Error(), tc.object) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrDamaged naming %s and saying %q", err, tc.object, tc.want)
			}
		})
	}
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 1
	return b
}
