package catalogv1

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
)

// UpgradePoint is what a job whose catalog is of this layout restores
// from when it moves to the second layout.
type UpgradePoint struct {
	// Latest is the latest generation's record: the one the fence
	// follows.
	Latest *Generation
	// Fence is the number of the fence's generation record, Latest's
	// plus one.
	Fence int64
	// Parts are the parts to restore: those of Latest's latest complete
	// checkpoint (or of the retained one asked for), or what Latest
	// restored when it completed none; in the independent mode each
	// instance's latest part, or what Latest restored narrowed to the key
	// groups of an instance that committed none (KeyGroups says which).
	// Checkpoint is their checkpoint in the aligned mode, 0 otherwise.
	Parts      []*Part
	Checkpoint int64
	// MaxCheckpoint is the highest checkpoint number of the catalog.
	MaxCheckpoint int64
}

// FenceMarker returns the name that a fence record of generation g
// restores: the name of a part that is never written, so that a process of
// this layout can neither join the fence's generation nor start one after
// it (each would read that part first, and fail).
func FenceMarker(prefix string, g int64) string {
	return objname.CatalogPartName(prefix, g, math.MaxInt64, 0)
}

// IsFence reports whether gen is a fence record that Fence wrote.
func IsFence(prefix string, gen *Generation) bool {
	return slices.Equal(gen.Restored, []string{FenceMarker(prefix, gen.Number)})
}

// Fence ends a job's catalog of this layout, for the move to the second
// layout. After the latest generation it writes a generation record that
// the members of this layout read as a newer generation (so they are
// fenced: their commits fail with ErrFenced, their plans too) and that no
// process of this layout can join or start a generation after (it
// restores a part that is never written). Then it lists the catalog again
// and returns what a generation after the latest restores: the latest
// complete checkpoint (or, with restoreFrom, that retained one), as Join
// would choose it, with every part read and checked. The fence comes
// before the listing, so that no member of this layout confirms a
// checkpoint that the listing misses.
//
// It returns nil and no error when the job has no catalog of this layout.
// A fence written before (by another process moving the job) is reused.
func Fence(ctx context.Context, b backends.Backend, jobID, owner string, now time.Time, mode Mode, retain int, restoreFrom int64) (*UpgradePoint, error) {
	c := &reader{b: b, prefix: objname.JobPrefix(jobID)}
	cfg := Config{Mode: mode, Retain: retain, RestoreFrom: restoreFrom}
	return c.upgradeLoop(ctx, cfg, jobID, "fenced", func(v *view, gen *Generation, latest int64) (*UpgradePoint, bool, error) {
		if latest == math.MaxInt64 || v.maxCheckpoint == math.MaxInt64 {
			return nil, false, fmt.Errorf("%w: generation %d or checkpoint %d has no successor", ErrDamaged, latest, v.maxCheckpoint)
		}
		f := &Generation{Number: latest + 1, Mode: gen.Mode, MaxParallelism: gen.MaxParallelism, KeyGroups: gen.KeyGroups,
			Restored: []string{FenceMarker(c.prefix, latest+1)}, FirstCheckpoint: v.maxCheckpoint + 1, Created: now.UTC()}
		data, err := encode(kindGeneration, f)
		if err != nil {
			return nil, false, err
		}
		if _, err := c.put(ctx, objname.CatalogGenerationName(c.prefix, f.Number), data); err != nil {
			return nil, false, err
		}
		return nil, true, nil // list again: the fence is ours, another mover's, or an older release's new generation
	})
}

// upgradeLoop is the loop Fence and Peek share. It lists the catalog and
// reads the latest generation's record (listing again when the record is
// gone by then). When that record is a fence, it returns what a
// generation after the one the fence follows restores. Otherwise it calls
// unfenced, which returns the result, or again to list once more. It
// returns nil and no error when the job has no catalog of this layout;
// state names the catalog's state in the error after maxJoinRounds.
func (c *reader) upgradeLoop(ctx context.Context, cfg Config, jobID, state string, unfenced func(v *view, gen *Generation, latest int64) (up *UpgradePoint, again bool, err error)) (*UpgradePoint, error) {
	for range maxJoinRounds {
		v, gen, err := c.latestGeneration(ctx)
		if v != nil && errors.Is(err, backends.ErrNotFound) {
			continue
		}
		if err != nil || v == nil {
			return nil, err
		}
		latest := v.latest()
		if !IsFence(c.prefix, gen) {
			up, again, err := unfenced(v, gen, latest)
			if again {
				continue
			}
			return up, err
		}
		// The fence is the latest record: restore from the generation
		// before it.
		if latest < 2 {
			return nil, fmt.Errorf("%w %q: a fence with no generation before it", ErrDamaged, objname.CatalogGenerationName(c.prefix, latest))
		}
		prev, err := c.generation(ctx, latest-1)
		if err != nil {
			return nil, fmt.Errorf("catalogv1: the generation the fence follows: %w", err)
		}
		return c.upgradePoint(ctx, cfg, v, prev, latest)
	}
	return nil, fmt.Errorf("catalogv1: job %q: %d generations started while its catalog was %s", jobID, maxJoinRounds, state)
}

// latestGeneration lists the catalog and reads the latest generation's
// record. The view is nil when the listing fails or finds no generation
// (with no error then); with the view and an error, the record's read
// failed.
func (c *reader) latestGeneration(ctx context.Context) (*view, *Generation, error) {
	v, err := c.list(ctx)
	if err != nil {
		return nil, nil, err
	}
	latest := v.latest()
	if latest == 0 {
		return nil, nil, nil
	}
	gen, err := c.generation(ctx, latest)
	return v, gen, err
}

// upgradePoint returns what a generation after prev restores, as v lists
// the catalog, with every part read and checked; fence is the number of
// the fence record that follows prev, 0 for none.
func (c *reader) upgradePoint(ctx context.Context, cfg Config, v *view, prev *Generation, fence int64) (*UpgradePoint, error) {
	cfg.Mode = prev.Mode
	if prev.Mode == Independent {
		if cfg.RestoreFrom != 0 {
			return nil, fmt.Errorf("%w: checkpoint %d: a restore by number needs the aligned mode", ErrNoCheckpoint, cfg.RestoreFrom)
		}
		parts, err := c.upgradeIndependent(ctx, prev, v)
		if err != nil {
			return nil, err
		}
		return &UpgradePoint{Latest: prev, Fence: fence, Parts: parts, MaxCheckpoint: v.maxCheckpoint}, nil
	}
	names, n, err := c.restorePoint(ctx, cfg, prev, v)
	if err != nil {
		return nil, err
	}
	up := &UpgradePoint{Latest: prev, Fence: fence, Checkpoint: n, MaxCheckpoint: v.maxCheckpoint}
	for _, name := range names {
		var g *Generation
		if objname.ParseCatalog(c.prefix, name).Generation == prev.Number {
			g = prev
		}
		p, err := c.part(ctx, name, g)
		if err != nil {
			return nil, err
		}
		up.Parts = append(up.Parts, p)
	}
	return up, nil
}

// Peek returns what Fence would return, and writes nothing: what a
// generation after the latest one restores (after the one a fence
// follows, when the catalog is fenced already), with every part read and
// checked. Its Fence is 0 when no fence was written. It returns nil and
// no error when the job has no catalog of this layout. It is for tools
// that read a job without moving it: what it returns of a catalog whose
// processes still run may be older than what they commit next.
func Peek(ctx context.Context, b backends.Backend, jobID string, retain int) (*UpgradePoint, error) {
	c := &reader{b: b, prefix: objname.JobPrefix(jobID)}
	cfg := Config{Retain: retain}
	return c.upgradeLoop(ctx, cfg, jobID, "read", func(v *view, gen *Generation, _ int64) (*UpgradePoint, bool, error) {
		up, err := c.upgradePoint(ctx, cfg, v, gen, 0)
		return up, false, err
	})
}

// upgradeIndependent returns the parts the upgrade restores from prev, a
// generation of the independent mode: each instance's latest part, or,
// for an instance that committed none, the parts prev restored, narrowed
// to the instance's key groups (KeyGroups of a copy). Unlike this layout's
// Join, which restores such a part for every instance whose key groups it
// also covers, it never rolls back an instance's confirmed part.
func (c *reader) upgradeIndependent(ctx context.Context, prev *Generation, v *view) ([]*Part, error) {
	var parts, restored []*Part
	for i, kg := range prev.KeyGroups {
		if n := v.latestPart(prev.Number, i); n != 0 {
			p, err := c.part(ctx, objname.CatalogPartName(c.prefix, prev.Number, n, i), prev)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
			continue
		}
		if restored == nil {
			for _, name := range prev.Restored {
				p, err := c.part(ctx, name, nil)
				if err != nil {
					return nil, err
				}
				restored = append(restored, p)
			}
		}
		for _, r := range restored {
			if lo, hi := max(r.KeyGroups.Start, kg.Start), min(r.KeyGroups.End, kg.End); lo <= hi {
				narrowed := *r
				narrowed.KeyGroups = dstl.KeyGroupRange{Start: lo, End: hi}
				parts = append(parts, &narrowed)
			}
		}
	}
	if err := disjoint(parts); err != nil {
		return nil, fmt.Errorf("%w %q: what the upgrade would restore: %w", ErrDamaged, objname.CatalogGenerationName(c.prefix, prev.Number), err)
	}
	return parts, nil
}

// ReadPart reads and checks the part of the name in the job's catalog.
func ReadPart(ctx context.Context, b backends.Backend, jobID, name string) (*Part, error) {
	return (&reader{b: b, prefix: objname.JobPrefix(jobID)}).part(ctx, name, nil)
}
