package catalogv1

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/dstlgo/dstl/backends"
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
	// complete), the parts the live generation restored from while it has
	// fewer than Retain complete checkpoints of its own (in the independent
	// mode: while one of its instances has fewer than Retain parts), and,
	// until the grace has passed since they stopped being retained (or
	// needed, for restored parts), those that a generation starting from
	// an older listing may still restore.
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
// every part it keeps (once per member while kept: parts never change).
// It fails with ErrFenced when a newer generation started, so that a
// fenced member never deletes anything.
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
	return m.planFrom(ctx, c, v)
}

// planFrom computes the plan of the member's generation from v.
func (m *Member) planFrom(ctx context.Context, c *reader, v *view) (*Plan, error) {
	g := m.gen
	retained, kept := retention(v, g, m.cfg.Retain, m.recent())
	keep := map[string]bool{} // catalog parts kept
	for _, name := range kept {
		keep[name] = true
	}
	p := &Plan{Generation: g.Number, Retained: retained, Parts: kept, Keep: map[string]bool{}}
	for _, name := range p.Parts {
		part, err := m.cachedPart(ctx, c, name)
		if err != nil {
			return nil, err
		}
		for _, o := range part.Objects {
			p.Keep[o] = true
		}
	}
	// The cache holds the parts this plan keeps, not every part of the
	// member's life (a part no longer kept is not kept again, but by a
	// plan from an older listing, which reads it once more).
	m.mu.Lock()
	for name := range m.cache {
		if !keep[name] {
			delete(m.cache, name)
		}
	}
	m.mu.Unlock()
	p.Drop = m.drops(v, keep)
	return p, nil
}

// recent says whether a catalog object written at t (as listed, by the
// store's clock) is within the grace by the member's clock.
func (m *Member) recent() func(t time.Time) bool {
	cutoff := m.cfg.Now().Add(-m.cfg.Grace)
	return func(t time.Time) bool { return !t.Before(cutoff) }
}

// drops returns the catalog objects older than the grace that the plan
// does not keep: never the live generation's record or claims, and never
// the record of a generation whose parts are kept.
func (m *Member) drops(v *view, keep map[string]bool) []string {
	recent := m.recent()
	old := func(o object) bool { return !recent(o.modTime) }
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

// cachedPart reads a part once per member while plans keep it.
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
	return Drop(ctx, m.b, p)
}

// Drop deletes the catalog objects of the plan's Drop list, and returns
// how many it deleted and the errors of those it could not.
func Drop(ctx context.Context, b backends.Backend, p *Plan) (int, error) {
	var errs []error
	n := 0
	for _, name := range p.Drop {
		if err := b.Delete(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// PlanOptions configure [PlanJob].
type PlanOptions struct {
	// Retain is how many complete checkpoints are kept. Default
	// DefaultRetain.
	Retain int
	// Grace is how old a catalog object must be to be dropped. Default
	// DefaultGrace.
	Grace time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// PlanJob computes the deletion rule's plan for the live generation of a
// job from outside the job (for a garbage collector), as [Member.Plan]
// does for a member. It returns nil and no error when the job has no
// catalog.
func PlanJob(ctx context.Context, b backends.Backend, jobID string, o PlanOptions) (*Plan, error) {
	if err := ruleDefaults(&o.Retain, &o.Grace, &o.Now); err != nil {
		return nil, err
	}
	c := &reader{b: b, prefix: objname.JobPrefix(jobID)}
	v, gen, err := c.latestGeneration(ctx)
	if err != nil || v == nil {
		return nil, err
	}
	m := &Member{b: b, cfg: Config{JobID: jobID, Retain: o.Retain, Grace: o.Grace, Now: o.Now}, prefix: c.prefix, gen: gen, view: v}
	return m.planFrom(ctx, c, v)
}

// ruleDefaults sets the defaults of the deletion rule's settings given
// from outside a job (0 and nil: DefaultRetain, DefaultGrace, time.Now)
// and checks them.
func ruleDefaults(retain *int, grace *time.Duration, now *func() time.Time) error {
	if *retain == 0 {
		*retain = DefaultRetain
	}
	if *grace == 0 {
		*grace = DefaultGrace
	}
	if *now == nil {
		*now = time.Now
	}
	if *retain < 1 || *grace < 0 {
		return fmt.Errorf("catalog: retain %d, grace %v: want at least 1 and not negative", *retain, *grace)
	}
	return nil
}
