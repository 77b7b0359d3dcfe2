package objname

import (
	"fmt"
	"strconv"
	"strings"
)

// CatalogDir is the directory, under a job's prefix, of the job's
// checkpoint catalog (package github.com/dstlgo/dstl/catalog). The
// catalog's first layout, which releases before the second wrote, keeps
// one directory per generation:
//
//	PREFIX/_catalog/gGGGGGGGGGGGGGGGGGGGG/generation            a generation's record
//	PREFIX/_catalog/gGGGGGGGGGGGGGGGGGGGG/claim-IIIII           an instance slot's claim
//	PREFIX/_catalog/gGGGGGGGGGGGGGGGGGGGG/part-NNNNNNNNNNNNNNNNNNNN-IIIII
//	                                                             an instance's part of checkpoint N
//
// The second layout is under [CatalogV2Dir]:
//
//	PREFIX/_catalog/v2/gen/GGGGGGGGGGGGGGGGGGGG                  generation G's record
//	PREFIX/_catalog/v2/GGGGGGGGGGGGGGGGGGGG/fence                G's fence: a newer generation starts
//	PREFIX/_catalog/v2/GGGGGGGGGGGGGGGGGGGG/claim-SSSSS          process S's claim of its slot in G
//	PREFIX/_catalog/v2/GGGGGGGGGGGGGGGGGGGG/NNNNNNNNNNNNNNNNNNNN/SSSSS
//	                                                              process S's commit of checkpoint N in G
//
// Numbers are zero-padded decimals (20 digits for generations and
// checkpoints, 5 for instances and processes), so that names sort by
// number and a listing of one checkpoint's directory returns its commits
// alone.
const CatalogDir = "_catalog/"

// CatalogV2Dir is the directory, under a job's prefix, of the catalog's
// second layout.
const CatalogV2Dir = CatalogDir + "v2/"

// catalogV2Gens is the directory of the second layout's generation
// records, under CatalogV2Dir.
const catalogV2Gens = "gen/"

// CatalogRef says what a name under the catalog directory is.
type CatalogRef struct {
	Kind CatalogKind
	// Version is the layout: 1 or 2 (0 for CatalogOther).
	Version    int
	Generation int64
	Checkpoint int64 // of a part or a commit
	Instance   int   // of a first-layout claim or part
	Process    int   // of a second-layout claim or commit
}

// CatalogKind is the kind of a catalog object.
type CatalogKind uint8

// The kinds of catalog objects.
const (
	CatalogOther      CatalogKind = iota // not a catalog name
	CatalogGeneration                    // gG/generation, v2/gen/G
	CatalogClaim                         // gG/claim-I, v2/G/claim-S
	CatalogPart                          // gG/part-N-I
	CatalogFence                         // v2/G/fence
	CatalogCommit                        // v2/G/N/S
)

// String returns the kind's name: "generation", "claim", "part",
// "fence", "commit" or "other".
func (k CatalogKind) String() string {
	switch k {
	case CatalogGeneration:
		return "generation"
	case CatalogClaim:
		return "claim"
	case CatalogPart:
		return "part"
	case CatalogFence:
		return "fence"
	case CatalogCommit:
		return "commit"
	}
	return "other"
}

// MaxInstances bounds the instances (and the processes) of a
// generation: an instance or process index has five digits.
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

// CatalogV2GenerationsDir returns the directory of the second layout's
// generation records: one listing of it finds the latest generation.
func CatalogV2GenerationsDir(prefix string) string {
	return prefix + CatalogV2Dir + catalogV2Gens
}

// CatalogV2GenerationName returns the name of generation g's record in
// the second layout.
func CatalogV2GenerationName(prefix string, g int64) string {
	return fmt.Sprintf("%s%020d", CatalogV2GenerationsDir(prefix), g)
}

// CatalogV2GenerationDir returns the directory of generation g's fence, claims and
// commits in the second layout.
func CatalogV2GenerationDir(prefix string, g int64) string {
	return fmt.Sprintf("%s%s%020d/", prefix, CatalogV2Dir, g)
}

// CatalogV2FenceName returns the name of generation g's fence.
func CatalogV2FenceName(prefix string, g int64) string {
	return CatalogV2GenerationDir(prefix, g) + "fence"
}

// CatalogV2ClaimName returns the name of process p's claim in generation
// g.
func CatalogV2ClaimName(prefix string, g int64, p int) string {
	return fmt.Sprintf("%sclaim-%05d", CatalogV2GenerationDir(prefix, g), p)
}

// CatalogV2CheckpointDir returns the directory of the commits of
// checkpoint n in generation g: one listing of it returns them alone.
func CatalogV2CheckpointDir(prefix string, g, n int64) string {
	return fmt.Sprintf("%s%020d/", CatalogV2GenerationDir(prefix, g), n)
}

// CatalogV2CommitName returns the name of process p's commit of
// checkpoint n in generation g.
func CatalogV2CommitName(prefix string, g, n int64, p int) string {
	return fmt.Sprintf("%s%05d", CatalogV2CheckpointDir(prefix, g, n), p)
}

// ParseCatalog returns what name, an object name under prefix, is in the
// catalog, in either layout; its Kind is CatalogOther for any other name,
// and for numbers that are negative, not zero-padded to their width, or
// out of range.
func ParseCatalog(prefix, name string) CatalogRef {
	if rest, ok := strings.CutPrefix(name, prefix+CatalogV2Dir); ok {
		return parseCatalogV2(rest)
	}
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
		return CatalogRef{Kind: CatalogGeneration, Version: 1, Generation: g}
	case strings.HasPrefix(base, "claim-"):
		if i, ok := number(strings.TrimPrefix(base, "claim-"), 5); ok {
			return CatalogRef{Kind: CatalogClaim, Version: 1, Generation: g, Instance: int(i)}
		}
	case strings.HasPrefix(base, "part-"):
		ns, is, ok := strings.Cut(strings.TrimPrefix(base, "part-"), "-")
		n, okN := number(ns, 20)
		i, okI := number(is, 5)
		if ok && okN && okI {
			return CatalogRef{Kind: CatalogPart, Version: 1, Generation: g, Checkpoint: n, Instance: int(i)}
		}
	}
	return CatalogRef{}
}

// parseCatalogV2 parses a name under the second layout's directory.
func parseCatalogV2(rest string) CatalogRef {
	if gs, ok := strings.CutPrefix(rest, catalogV2Gens); ok {
		if g, ok := number(gs, 20); ok {
			return CatalogRef{Kind: CatalogGeneration, Version: 2, Generation: g}
		}
		return CatalogRef{}
	}
	parts := strings.Split(rest, "/")
	g, ok := number(parts[0], 20)
	if !ok {
		return CatalogRef{}
	}
	switch {
	case len(parts) == 2 && parts[1] == "fence":
		return CatalogRef{Kind: CatalogFence, Version: 2, Generation: g}
	case len(parts) == 2 && strings.HasPrefix(parts[1], "claim-"):
		if p, ok := number(strings.TrimPrefix(parts[1], "claim-"), 5); ok {
			return CatalogRef{Kind: CatalogClaim, Version: 2, Generation: g, Process: int(p)}
		}
	case len(parts) == 3:
		n, okN := number(parts[1], 20)
		p, okP := number(parts[2], 5)
		if okN && okP {
			return CatalogRef{Kind: CatalogCommit, Version: 2, Generation: g, Checkpoint: n, Process: int(p)}
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
