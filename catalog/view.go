package catalog

import (
	"context"
	"slices"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/objname"
)

// genView is one generation's directory as one listing saw it: its fence,
// its claims and its commits.
type genView struct {
	gen     int64
	fence   *backends.ObjectInfo
	claims  map[int]backends.ObjectInfo
	commits map[int64]map[int]backends.ObjectInfo // checkpoint -> process -> commit
	other   []backends.ObjectInfo                 // names of no known form
	// maxCheckpoint is the highest checkpoint with a commit, and
	// maxCommit one of its commits.
	maxCheckpoint int64
	maxCommit     string
}

// listGeneration lists generation g's directory once.
func (s *store) listGeneration(ctx context.Context, g int64) (*genView, error) {
	v := &genView{gen: g, claims: map[int]backends.ObjectInfo{}, commits: map[int64]map[int]backends.ObjectInfo{}}
	err := s.list(ctx, objname.CatalogV2GenerationDir(s.prefix, g), func(oi backends.ObjectInfo) {
		v.add(s.prefix, oi)
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// add files one listed object of the generation's directory.
func (v *genView) add(prefix string, oi backends.ObjectInfo) {
	ref := objname.ParseCatalog(prefix, oi.Name)
	if ref.Version != 2 || ref.Generation != v.gen {
		v.other = append(v.other, oi)
		return
	}
	switch ref.Kind {
	case objname.CatalogFence:
		v.fence = &oi
	case objname.CatalogClaim:
		v.claims[ref.Process] = oi
	case objname.CatalogCommit:
		byP := v.commits[ref.Checkpoint]
		if byP == nil {
			byP = map[int]backends.ObjectInfo{}
			v.commits[ref.Checkpoint] = byP
		}
		byP[ref.Process] = oi
		if ref.Checkpoint > v.maxCheckpoint || v.maxCommit == "" {
			v.maxCheckpoint, v.maxCommit = ref.Checkpoint, oi.Name
		}
	default:
		v.other = append(v.other, oi)
	}
}

// complete returns gen's complete checkpoints in ascending order: those of
// which every process committed (in the independent mode, any checkpoint
// with a commit counts). A commit of a process the generation does not
// have changes nothing.
func (v *genView) complete(gen *Generation) []int64 {
	var out []int64
	for n, byP := range v.commits {
		if gen.Mode == Independent || allProcesses(byP, gen.Processes) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func allProcesses(byP map[int]backends.ObjectInfo, q int) bool {
	for p := range q {
		if _, ok := byP[p]; !ok {
			return false
		}
	}
	return true
}

// latestCommit returns process p's latest checkpoint with a commit, 0
// for none.
func (v *genView) latestCommit(p int) int64 {
	var last int64
	for n, byP := range v.commits {
		if _, ok := byP[p]; ok {
			last = max(last, n)
		}
	}
	return last
}

// commitsOf returns process p's checkpoints with a commit, ascending.
func (v *genView) commitsOf(p int) []int64 {
	var out []int64
	for n, byP := range v.commits {
		if _, ok := byP[p]; ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
