package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/dstlgo/dstl/dstl/objname"
)

// Plan is what the deletion rule keeps and drops, as of one listing of the
// catalog by a member of the live generation.
type Plan struct {
	// Generation is the live generation.
	Generation int64
	// Retained lists the retained complete checkpoints, oldest first (in
	// the independent mode: every checkpoint with a retained part).
	Retained []int64
	// Parts names the catalog parts whose objects are kept: retained ones,
	// pending ones of the live generation (of checkpoints that may still
	// complete), and the parts the live generation restored from while it
	// has fewer than Retain complete checkpoints of its own.
	Parts []string
	// Keep holds every object those parts refer to.
	Keep map[string]bool
	// Drop names the catalog objects no reader needs any more and older
	// than the grace: parts of dropped checkpoints and of checkpoints that
	// never completed, and everything of fenced generations but the parts
	// the live generation restores.
	Drop []string
}

// Plan lists the catalog and computes the deletion rule's plan; it reads
// every part it keeps (once per member: parts never change). It fails
// with ErrFenced when a newer generation started, so that a fenced
// member never deletes anything.
func (m *Member) Plan(ctx context.Context) (*Plan, error) {
	c := &reader{b: m.b, prefix: m.prefix}
	v, err := c.list(ctx)
	if err != nil {
		return nil, err
	}
	if v.latest() > m.gen.Number {
		m.mu.Lock()
		m.fenced, m.view = true, v
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: generation %d started after %d", ErrFenced, v.latest(), m.gen.Number)
	}
	g := m.gen
	keep := map[string]bool{} // catalog parts kept
	var retained []int64
	restoredNeeded := false
	if g.Mode == Aligned {
		complete := v.complete(g)
		if len(complete) > m.cfg.Retain {
			retained = complete[len(complete)-m.cfg.Retain:]
		} else {
			retained = complete
			restoredNeeded = true
		}
		var last int64
		if len(complete) > 0 {
			last = complete[len(complete)-1]
		}
		for n, parts := range v.parts[g.Number] {
			if slices.Contains(retained, n) || n > last {
				for _, o := range parts {
					keep[o.name] = true
				}
			}
		}
	} else {
		seen := map[int64]bool{}
		for i := range g.Instances() {
			var ns []int64
			for n, parts := range v.parts[g.Number] {
				if _, ok := parts[i]; ok {
					ns = append(ns, n)
				}
			}
			slices.Sort(ns)
			if len(ns) < m.cfg.Retain {
				restoredNeeded = true
			}
			for _, n := range ns[max(0, len(ns)-m.cfg.Retain):] {
				keep[v.parts[g.Number][n][i].name] = true
				seen[n] = true
			}
		}
		for n := range seen {
			retained = append(retained, n)
		}
		slices.Sort(retained)
	}
	if restoredNeeded {
		for _, name := range g.Restored {
			keep[name] = true
		}
	}
	p := &Plan{Generation: g.Number, Retained: retained, Keep: map[string]bool{}}
	for name := range keep {
		p.Parts = append(p.Parts, name)
	}
	sort.Strings(p.Parts)
	for _, name := range p.Parts {
		part, err := m.cachedPart(ctx, c, name)
		if err != nil {
			return nil, err
		}
		for _, o := range part.Objects {
			p.Keep[o] = true
		}
	}
	p.Drop = m.drops(v, keep)
	return p, nil
}

// drops returns the catalog objects older than the grace that the plan
// does not keep: never the live generation's record or claims, and never
// the record of a generation whose parts are kept.
func (m *Member) drops(v *view, keep map[string]bool) []string {
	cutoff := m.cfg.Now().Add(-m.cfg.Grace)
	old := func(o object) bool { return o.modTime.Before(cutoff) }
	keptGen := map[int64]bool{m.gen.Number: true}
	for name := range keep {
		keptGen[objname.ParseCatalog(m.prefix, name).Generation] = true
	}
	var drop []string
	for g, byN := range v.parts {
		for _, parts := range byN {
			for _, o := range parts {
				if !keep[o.name] && old(o) {
					drop = append(drop, o.name)
				}
			}
		}
		_ = g
	}
	for g, o := range v.gens {
		if !keptGen[g] && g < m.gen.Number && old(o) {
			drop = append(drop, o.name)
		}
	}
	for g, claims := range v.claims {
		if g < m.gen.Number {
			for _, o := range claims {
				if old(o) {
					drop = append(drop, o.name)
				}
			}
		}
	}
	sort.Strings(drop)
	return drop
}

// cachedPart reads a part once per member.
func (m *Member) cachedPart(ctx context.Context, c *reader, name string) (*Part, error) {
	m.mu.Lock()
	p, ok := m.cache[name]
	m.mu.Unlock()
	if ok {
		return p, nil
	}
	var gen *Generation
	if objname.ParseCatalog(m.prefix, name).Generation == m.gen.Number {
		gen = m.gen
	}
	p, err := c.part(ctx, name, gen)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.cache == nil {
		m.cache = map[string]*Part{}
	}
	m.cache[name] = p
	m.mu.Unlock()
	return p, nil
}

// DropCatalog deletes the catalog objects of the plan's Drop list, and
// returns how many it deleted and the errors of those it could not.
func (m *Member) DropCatalog(ctx context.Context, p *Plan) (int, error) {
	var errs []error
	n := 0
	for _, name := range p.Drop {
		if err := m.b.Delete(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
