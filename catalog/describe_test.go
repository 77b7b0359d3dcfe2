package catalog_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
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
	m, err := catalog.Join(ctx, b, catalog.Config{JobID: "job", Instances: 2, Process: 1, MaxParallelism: 8, Owner: "pod-1",
		Now: func() time.Time { return now }, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Commit(ctx, 3, []catalog.InstanceState{{Instance: 1, State: []byte("state"), Objects: []string{"job/a.dstl"},
		Metadata: map[string]string{"offset": "30"}}}); err != nil {
		t.Fatal(err)
	}
	// A restart of process 1: generation 2, and generation 1's fence.
	if _, err := catalog.Join(ctx, b, catalog.Config{JobID: "job", Instances: 2, Process: 1, MaxParallelism: 8, Owner: "pod-1b",
		Now: func() time.Time { return now }, Logger: quiet}); err != nil {
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
	genName, claimName := objname.CatalogV2GenerationName(prefix, g), objname.CatalogV2ClaimName(prefix, g, 1)
	partName, fenceName := objname.CatalogV2CommitName(prefix, g, 3, 1), objname.CatalogV2FenceName(prefix, g)

	r, err := catalog.DecodeRecord(genName, read(genName))
	if err != nil || r.Kind != catalog.GenerationRecord || r.Version != catalog.Version || r.Generation == nil ||
		r.Generation.Number != g || r.Generation.Instances() != 2 || r.Generation.MaxParallelism != 8 {
		t.Fatalf("generation: %+v, %v", r, err)
	}
	r, err = catalog.DecodeRecord(claimName, read(claimName))
	if err != nil || r.Kind != catalog.ClaimRecord || r.Owner != "pod-1" || !r.Created.Equal(now) {
		t.Fatalf("claim: %+v, %v", r, err)
	}
	r, err = catalog.DecodeRecord(fenceName, read(fenceName))
	if err != nil || r.Kind != catalog.FenceRecord || r.Next != g+1 || r.Owner != "pod-1b" {
		t.Fatalf("fence: %+v, %v", r, err)
	}
	r, err = catalog.DecodeRecord(partName, read(partName))
	if err != nil || r.Kind != catalog.CommitRecord || len(r.Parts) != 1 || r.Parts[0].Name != partName || r.Checkpoint != 3 ||
		r.Process != 1 || r.HoldFrom != 4 || r.Parts[0].Instance != 1 || string(r.Parts[0].State) != "state" ||
		r.Parts[0].Metadata["offset"] != "30" || r.Parts[0].KeyGroups != (dstl.KeyGroupRange{Start: 4, End: 7}) {
		t.Fatalf("commit: %+v, %v", r, err)
	}
	// A copy under another name (a local file, say) is read by its content.
	if r, err := catalog.DecodeRecord("copies/"+path.Base(partName), read(partName)); err != nil || r.Kind != catalog.CommitRecord {
		t.Fatalf("commit under another name: %+v, %v", r, err)
	}
	// An object of the first layout.
	v1, err := os.ReadFile("testdata/v1/aligned/_catalog/g00000000000000000002/part-00000000000000000005-00001")
	if err != nil {
		t.Fatal(err)
	}
	v1Name := objname.CatalogPartName("aligned/", 2, 5, 1)
	if r, err := catalog.DecodeRecord(v1Name, v1); err != nil || r.Kind != catalog.PartRecord || r.Version != 1 || len(r.Parts) != 1 ||
		r.Parts[0].Checkpoint != 5 || r.Parts[0].Instance != 1 || r.Parts[0].Metadata["offset"] != "50" {
		t.Fatalf("a part of the first layout: %+v, %v", r, err)
	}
	if _, err := catalog.DecodeRecord(objname.CatalogPartName("aligned/", 2, 6, 1), v1); !errors.Is(err, catalog.ErrDamaged) {
		t.Fatalf("a part of the first layout under another part's name: %v", err)
	}

	for _, tc := range []struct {
		name, object string
		data         []byte
		want         string
	}{
		{"bit flipped", partName, flip(read(partName), 20), "checksum"},
		{"truncated", genName, read(genName)[:5], "too short"},
		{"a commit under a claim's name", claimName, read(partName), "a commit of version 2 under the name of a claim"},
		{"a commit under another commit's name", objname.CatalogV2CommitName(prefix, g, 4, 1), read(partName), "under the name of generation"},
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
