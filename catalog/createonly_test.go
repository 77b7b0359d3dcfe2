package catalog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstltest"
)

// TestJoinRefusesAStoreIgnoringConditions: Join fails, writing nothing of
// the catalog, on a store that lets a Put replace an existing object on
// either path; on a store that honours create-only it probes once per
// Bucket, however many members join.
func TestJoinRefusesAStoreIgnoringConditions(t *testing.T) {
	cfg := catalog.Config{JobID: "job", Process: 0, Instances: 2}
	for _, tc := range []struct {
		name       string
		conditions dstltest.Conditions
	}{
		{"ignored on multipart", dstltest.IgnoreOnMultipart},
		{"ignored", dstltest.IgnoreConditions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewConditionStore(tc.conditions, 1<<20)
			defer b.Close()
			for range 2 { // the verdict is kept, and given again
				m, err := catalog.Join(t.Context(), b, cfg)
				if !errors.Is(err, backends.ErrCreateOnlyIgnored) || m != nil {
					t.Fatalf("Join: %v, want ErrCreateOnlyIgnored", err)
				}
			}
			if names := listAll(t, b); len(names) != 0 {
				t.Fatalf("objects left by the refused Joins: %q", names)
			}
		})
	}

	b := dstltest.NewConditionStore(dstltest.HonourConditions, 1<<20)
	defer b.Close()
	c := counting.New(b)
	if _, err := catalog.Join(t.Context(), c, cfg); err != nil {
		t.Fatalf("Join on a store that honours create-only: %v", err)
	}
	var d *dstltest.ConditionStore
	b.As(&d)
	if got := d.Puts()["multipart"]; got != 1 {
		t.Fatalf("the first Join sent %d multipart Puts, want the probe's 1", got)
	}
	cfg.Process = 1
	if _, err := catalog.Join(t.Context(), c, cfg); err != nil {
		t.Fatalf("second member's Join: %v", err)
	}
	if got := d.Puts()["multipart"]; got != 1 {
		t.Fatalf("the second Join probed again: %d multipart Puts", got)
	}
	for _, n := range listAll(t, b) {
		if strings.Contains(n, ".create-only-") {
			t.Fatalf("probe object left: %s", n)
		}
	}
}

func listAll(t *testing.T, b backends.Backend) []string {
	t.Helper()
	var names []string
	if err := b.List(t.Context(), "", func(o backends.ObjectInfo) error { names = append(names, o.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	return names
}
