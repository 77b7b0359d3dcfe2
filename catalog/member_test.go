package catalog

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// TestPlanCacheBounded: a member that plans after every checkpoint holds
// the parts the plan keeps, not every part it ever read.
func TestPlanCacheBounded(t *testing.T) {
	b := dstltest.NewBackend()
	now := time.Now()
	m, err := Join(t.Context(), b, Config{JobID: "job", Instances: 1, Index: 0, Grace: time.Minute,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for n := int64(1); n <= 30; n++ {
		if _, err := m.Commit(t.Context(), n, []byte("state"), []string{"job/x.dstl"}, nil); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Hour) // every plan is past the grace of the checkpoints before
		p, err := m.Plan(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(m.cache) > len(p.Parts) {
			t.Fatalf("after checkpoint %d: %d parts held, the plan keeps %d", n, len(m.cache), len(p.Parts))
		}
	}
}

// TestMalformedRecords: records that decode but that no member writes are
// errors that name them, never a restore.
func TestMalformedRecords(t *testing.T) {
	put := func(t *testing.T, b *dstltest.Backend, name string, kind byte, v any) {
		t.Helper()
		data, err := encode(kind, v)
		if err != nil {
			t.Fatal(err)
		}
		b.SetObjectBytes(name, data)
	}
	kg := func(s, e int) dstl.KeyGroupRange { return dstl.KeyGroupRange{Start: s, End: e} }
	cfg := Config{JobID: "job", Instances: 1, Index: 0, MaxParallelism: 4}
	for _, tc := range []struct {
		name  string
		build func(t *testing.T, b *dstltest.Backend) string // returns the object the error names
	}{
		{"generation number with no successor", func(t *testing.T, b *dstltest.Backend) string {
			name := objname.CatalogGenerationName("job/", math.MaxInt64)
			put(t, b, name, kindGeneration, &Generation{Number: math.MaxInt64, Mode: Aligned, MaxParallelism: 8,
				KeyGroups: []dstl.KeyGroupRange{kg(0, 7)}, Restored: []string{}, FirstCheckpoint: 1})
			return name
		}},
		{"restored part of invalid key groups", func(t *testing.T, b *dstltest.Backend) string {
			part := objname.CatalogPartName("job/", 1, 1, 0)
			put(t, b, part, kindPart, &Part{Generation: 1, Checkpoint: 1, Instance: 0, KeyGroups: kg(3, 1), Objects: []string{}})
			put(t, b, objname.CatalogGenerationName("job/", 2), kindGeneration, &Generation{Number: 2, Mode: Aligned, MaxParallelism: 4,
				KeyGroups: []dstl.KeyGroupRange{kg(0, 3)}, Restored: []string{part}, RestoredCheckpoint: 1, FirstCheckpoint: 2})
			return part
		}},
		{"restored parts that overlap", func(t *testing.T, b *dstltest.Backend) string {
			var restored []string
			for i, r := range []dstl.KeyGroupRange{kg(0, 3), kg(0, 1)} {
				part := objname.CatalogPartName("job/", 1, 1, i)
				put(t, b, part, kindPart, &Part{Generation: 1, Checkpoint: 1, Instance: i, KeyGroups: r, Objects: []string{}})
				restored = append(restored, part)
			}
			name := objname.CatalogGenerationName("job/", 2)
			put(t, b, name, kindGeneration, &Generation{Number: 2, Mode: Aligned, MaxParallelism: 4,
				KeyGroups: []dstl.KeyGroupRange{kg(0, 3)}, Restored: restored, RestoredCheckpoint: 1, FirstCheckpoint: 2})
			return name
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			named := tc.build(t, b)
			m, err := Join(t.Context(), b, cfg)
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), named) {
				t.Fatalf("Join = %+v, %v; want ErrDamaged naming %s", m, err, named)
			}
		})
	}
}
