package objname

import (
	"fmt"
	"strconv"
	"strings"
)

// CatalogDir is the directory, under a job's prefix, of the job's
// checkpoint catalog (package github.com/dstlgo/dstl/catalog):
//
//	PREFIX/_catalog/gGGGGGGGGGGGGGGGGGGGG/generation            a generation's record
//	PREFIX/_catalog/gGGGGGGGGGGGGGGGGGGGG/claim-IIIII           an instance slot's claim
//	PREFIX/_catalog/gGGGGGGGGGGGGGGGGGGGG/part-NNNNNNNNNNNNNNNNNNNN-IIIII
//	                                                             an instance's part of checkpoint N
//
// Numbers are zero-padded decimals (20 digits for generations and
// checkpoints, 5 for instances), so that names sort by number.
const CatalogDir = "_catalog/"

// CatalogRef says what a name under the catalog directory is.
type CatalogRef struct {
	Kind       CatalogKind
	Generation int64
	Checkpoint int64 // of a part
	Instance   int   // of a claim or a part
}

// CatalogKind is the kind of a catalog object.
type CatalogKind uint8

// The kinds of catalog objects.
const (
	CatalogOther      CatalogKind = iota // not a catalog name
	CatalogGeneration                    // gG/generation
	CatalogClaim                         // gG/claim-I
	CatalogPart                          // gG/part-N-I
)

// MaxInstances bounds the instances of a generation: an instance index
// has five digits.
const MaxInstances = 100000

// CatalogGenerationName returns the name of generation g's record.
func CatalogGenerationName(prefix string, g int64) string {
	return catalogGen(prefix, g) + "generation"
}

// CatalogClaimName returns the name of the claim of instance i of
// generation g.
func CatalogClaimName(prefix string, g int64, i int) string {
	return fmt.Sprintf("%sclaim-%05d", catalogGen(prefix, g), i)
}

// CatalogPartName returns the name of instance i's part of checkpoint n of
// generation g.
func CatalogPartName(prefix string, g, n int64, i int) string {
	return fmt.Sprintf("%spart-%020d-%05d", catalogGen(prefix, g), n, i)
}

func catalogGen(prefix string, g int64) string {
	return fmt.Sprintf("%s%sg%020d/", prefix, CatalogDir, g)
}

// ParseCatalog returns what name, an object name under prefix, is in the
// catalog; its Kind is CatalogOther for any other name, and for numbers
// that are negative, not zero-padded to their width, or out of range.
func ParseCatalog(prefix, name string) CatalogRef {
	rest, ok := strings.CutPrefix(name, prefix+CatalogDir+"g")
	if !ok {
		return CatalogRef{}
	}
	gs, base, ok := strings.Cut(rest, "/")
	g, okG := number(gs, 20)
	if !ok || !okG {
		return CatalogRef{}
	}
	switch {
	case base == "generation":
		return CatalogRef{Kind: CatalogGeneration, Generation: g}
	case strings.HasPrefix(base, "claim-"):
		if i, ok := number(strings.TrimPrefix(base, "claim-"), 5); ok {
			return CatalogRef{Kind: CatalogClaim, Generation: g, Instance: int(i)}
		}
	case strings.HasPrefix(base, "part-"):
		ns, is, ok := strings.Cut(strings.TrimPrefix(base, "part-"), "-")
		n, okN := number(ns, 20)
		i, okI := number(is, 5)
		if ok && okN && okI {
			return CatalogRef{Kind: CatalogPart, Generation: g, Checkpoint: n, Instance: int(i)}
		}
	}
	return CatalogRef{}
}

// number parses s, a zero-padded decimal of exactly width digits.
func number(s string, width int) (int64, bool) {
	if len(s) != width {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}
