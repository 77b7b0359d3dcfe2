package objname

import (
	"math"
	"testing"
)

func TestCatalogNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		want CatalogRef
	}{
		{CatalogGenerationName("job/", 7), CatalogRef{Kind: CatalogGeneration, Version: 1, Generation: 7}},
		{CatalogClaimName("job/", 7, 3), CatalogRef{Kind: CatalogClaim, Version: 1, Generation: 7, Instance: 3}},
		{CatalogPartName("job/", 7, 42, 99999), CatalogRef{Kind: CatalogPart, Version: 1, Generation: 7, Checkpoint: 42, Instance: 99999}},
		{CatalogPartName("job/", math.MaxInt64, math.MaxInt64, 0), CatalogRef{Kind: CatalogPart, Version: 1, Generation: math.MaxInt64, Checkpoint: math.MaxInt64}},
		{CatalogGenerationName("", 0), CatalogRef{Kind: CatalogGeneration, Version: 1}},

		{CatalogV2GenerationName("job/", 7), CatalogRef{Kind: CatalogGeneration, Version: 2, Generation: 7}},
		{CatalogV2FenceName("job/", 7), CatalogRef{Kind: CatalogFence, Version: 2, Generation: 7}},
		{CatalogV2ClaimName("job/", 7, 3), CatalogRef{Kind: CatalogClaim, Version: 2, Generation: 7, Process: 3}},
		{CatalogV2CommitName("job/", 7, 42, 99999), CatalogRef{Kind: CatalogCommit, Version: 2, Generation: 7, Checkpoint: 42, Process: 99999}},
		{CatalogV2CommitName("job/", math.MaxInt64, math.MaxInt64, 0), CatalogRef{Kind: CatalogCommit, Version: 2, Generation: math.MaxInt64, Checkpoint: math.MaxInt64}},
		{"job/_catalog/v2/gen/7", CatalogRef{}},
		{"job/_catalog/v2/gen/00000000000000000007/x", CatalogRef{}},
		{"job/_catalog/v2/00000000000000000007/fence/x", CatalogRef{}},
		{"job/_catalog/v2/00000000000000000007/claim-3", CatalogRef{}},
		{"job/_catalog/v2/00000000000000000007/00000000000000000042", CatalogRef{}},
		{"job/_catalog/v2/00000000000000000007/00000000000000000042/7", CatalogRef{}},
		{"job/_catalog/v2/00000000000000000007/00000000000000000042/00007/x", CatalogRef{}},
		{"job/_catalog/v2/x/00000000000000000042/00007", CatalogRef{}},
		{"job/_catalog/g7/generation", CatalogRef{}},
		{"job/_catalog/g0000000000000000000x/generation", CatalogRef{}},
		{"job/_catalog/g00000000000000000007/claim-3", CatalogRef{}},
		{"job/_catalog/g00000000000000000007/part-00000000000000000042", CatalogRef{}},
		{"job/_catalog/g00000000000000000007/other", CatalogRef{}},
		{"job/_catalog/g99999999999999999999/generation", CatalogRef{}}, // past int64
		{"other/_catalog/g00000000000000000007/generation", CatalogRef{}},
	} {
		if got := ParseCatalog("job/", tc.name); got != tc.want {
			if tc.name == CatalogGenerationName("", 0) {
				got = ParseCatalog("", tc.name)
			}
			if got != tc.want {
				t.Errorf("ParseCatalog(%q) = %+v, want %+v", tc.name, got, tc.want)
			}
		}
	}
	// Catalog names are no log or snapshot names.
	if k := Parse("job/", CatalogGenerationName("job/", 1)).Kind; k != Other {
		t.Errorf("a catalog name parses as %s", k)
	}
}
