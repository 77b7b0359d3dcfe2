package catalogv1

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/objname"
)

// object is a catalog object as a listing reports it.
type object struct {
	name    string
	size    int64
	modTime time.Time
}

// view is the catalog as one listing saw it.
type view struct {
	gens          map[int64]object                   // generation records
	claims        map[int64]map[int]object           // generation -> instance -> claim
	parts         map[int64]map[int64]map[int]object // generation -> checkpoint -> instance -> part
	other         []object                           // names under the catalog of no known form
	maxCheckpoint int64
	maxPart       string // a part of checkpoint maxCheckpoint
}

// list lists the catalog once.
func (c *reader) list(ctx context.Context) (*view, error) {
	v := &view{gens: map[int64]object{}, claims: map[int64]map[int]object{}, parts: map[int64]map[int64]map[int]object{}}
	err := c.b.List(ctx, c.prefix+objname.CatalogDir, func(oi backends.ObjectInfo) error {
		o := object{name: oi.Name, size: oi.Size, modTime: oi.ModTime}
		ref := objname.ParseCatalog(c.prefix, oi.Name)
		if ref.Version == 2 {
			return nil // the second layout's, under the same directory
		}
		switch ref.Kind {
		case objname.CatalogGeneration:
			v.gens[ref.Generation] = o
		case objname.CatalogClaim:
			if v.claims[ref.Generation] == nil {
				v.claims[ref.Generation] = map[int]object{}
			}
			v.claims[ref.Generation][ref.Instance] = o
		case objname.CatalogPart:
			byN := v.parts[ref.Generation]
			if byN == nil {
				byN = map[int64]map[int]object{}
				v.parts[ref.Generation] = byN
			}
			if byN[ref.Checkpoint] == nil {
				byN[ref.Checkpoint] = map[int]object{}
			}
			byN[ref.Checkpoint][ref.Instance] = o
			if ref.Checkpoint > v.maxCheckpoint || v.maxPart == "" {
				v.maxCheckpoint, v.maxPart = ref.Checkpoint, o.name
			}
		default:
			v.other = append(v.other, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list %q: %w", c.prefix+objname.CatalogDir, err)
	}
	return v, nil
}

// latest returns the latest generation's number, 0 for none.
func (v *view) latest() int64 {
	var g int64
	for n := range v.gens {
		g = max(g, n)
	}
	return g
}

// complete returns gen's complete checkpoints in ascending order: those of
// which every instance committed a part (in the independent mode, any
// checkpoint with a part counts). A part of an instance the generation
// does not have changes nothing (reading it is an error that names it).
func (v *view) complete(gen *Generation) []int64 {
	var out []int64
	for n, parts := range v.parts[gen.Number] {
		if gen.Mode == Independent || allInstances(parts, gen.Instances()) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func allInstances(parts map[int]object, p int) bool {
	for i := range p {
		if _, ok := parts[i]; !ok {
			return false
		}
	}
	return true
}

// latestPart returns instance i's latest checkpoint with a part in
// generation g, 0 for none.
func (v *view) latestPart(g int64, i int) int64 {
	var last int64
	for n, parts := range v.parts[g] {
		if _, ok := parts[i]; ok {
			last = max(last, n)
		}
	}
	return last
}
