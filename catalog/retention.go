package catalog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl/objname"
)

// Plan is what the deletion rule keeps and drops, as of one listing of
// the live generation's directory.
type Plan struct {
	// Generation is the live generation.
	Generation int64
	// Retained lists the retained complete checkpoints, oldest first (in
	// the independent mode: every checkpoint with a retained commit).
	Retained []int64
	// Commits names the catalog objects whose parts are kept: the
	// retained checkpoints' commits, the commits of the live generation's
	// checkpoints after its latest complete one (they may still
	// complete), and what the live generation restored while it has
	// fewer than Retain complete checkpoints of its own (in the
	// independent mode: while a process has fewer than Retain commits).
	Commits []string
	// Keep holds every object those parts refer to.
	Keep map[string]bool
	// HoldFrom is the lowest checkpoint that an object a checkpoint that
	// may still complete references was made for: every object made for
	// it or later is kept, however old (see objname.Name.Checkpoint). It
	// is the checkpoint after the latest complete one (or after the one
	// the generation restored), or lower while a process's latest commit
	// holds an earlier one (a materialisation in progress).
	HoldFrom int64
	// Drop names the live generation's commits that no reader needs any
	// more: of checkpoints before the latest complete one that are not
	// retained.
	Drop []string
}

// kept is what the deletion rule keeps of a generation as of a listing of
// its directory, before anything is read.
type kept struct {
	// retained lists the retained checkpoints, ascending.
	retained []int64
	// commits holds the kept commits: checkpoint -> processes.
	commits map[int64]map[int]bool
	// restoredNeeded says that what the generation restored is kept.
	restoredNeeded bool
	// floor is the checkpoint after the latest complete one (or after
	// the restored one) in the aligned mode; math.MaxInt64 in the
	// independent mode.
	floor int64
}

func (k *kept) has(n int64, proc int) bool { return k.commits[n][proc] }

// keptOf applies the deletion rule's choice of commits to a listing of
// gen's directory.
func keptOf(gen *Generation, v *genView, retain int) *kept {
	k := &kept{commits: map[int64]map[int]bool{}, floor: math.MaxInt64}
	add := func(n int64, proc int) {
		if k.commits[n] == nil {
			k.commits[n] = map[int]bool{}
		}
		k.commits[n][proc] = true
	}
	if gen.Mode == Aligned {
		complete := v.complete(gen)
		k.retained = complete[max(0, len(complete)-retain):]
		latest := gen.RestoredCheckpoint
		if len(complete) > 0 {
			latest = complete[len(complete)-1]
		}
		for n, byP := range v.commits {
			if n > latest || slices.Contains(k.retained, n) {
				for proc := range byP {
					add(n, proc)
				}
			}
		}
		k.restoredNeeded = len(complete) < retain
		k.floor = latest + 1
		return k
	}
	retained := map[int64]bool{}
	for proc := range gen.Processes {
		ns := v.commitsOf(proc)
		if len(ns) < retain {
			k.restoredNeeded = true
		}
		for _, n := range ns[max(0, len(ns)-retain):] {
			add(n, proc)
			retained[n] = true
		}
	}
	for n := range retained {
		k.retained = append(k.retained, n)
	}
	slices.Sort(k.retained)
	return k
}

// planGeneration applies the deletion rule to a listing of the live
// generation gen's directory: it reads every commit it keeps (through
// cache, by name: commits never change) and returns the plan.
func (s *store) planGeneration(ctx context.Context, gen *Generation, v *genView, retain int, cache map[string]*commit) (*Plan, error) {
	k := keptOf(gen, v, retain)
	p := &Plan{Generation: gen.Number, Keep: map[string]bool{}, Retained: k.retained}
	restoredNeeded, floor := k.restoredNeeded, k.floor
	for n, byP := range k.commits {
		for proc := range byP {
			p.Commits = append(p.Commits, objname.CatalogV2CommitName(s.prefix, gen.Number, n, proc))
		}
	}
	sort.Strings(p.Commits)
	read := map[string]bool{}
	for _, name := range p.Commits {
		c, err := s.cachedCommit(ctx, name, gen, cache)
		if err != nil {
			return nil, err
		}
		read[name] = true
		for _, part := range c.Parts {
			for _, o := range part.Objects {
				p.Keep[o] = true
			}
		}
	}
	// What a process's latest commit holds: its objects made for a
	// checkpoint from HoldFrom on may be referenced by its next commit.
	// A process that committed nothing yet in gen may reference objects
	// made for the checkpoint after the restored one.
	hold := floor
	for proc := range gen.Processes {
		n := v.latestCommit(proc)
		if n == 0 {
			hold = min(hold, gen.RestoredCheckpoint+1)
			continue
		}
		c, err := s.cachedCommit(ctx, objname.CatalogV2CommitName(s.prefix, gen.Number, n, proc), gen, cache)
		if err != nil {
			return nil, err
		}
		hold = min(hold, c.HoldFrom)
	}
	p.HoldFrom = max(hold, 1)
	if restoredNeeded {
		for _, r := range gen.Restored {
			parts, err := s.readRestored(ctx, r, nil)
			if err != nil {
				return nil, fmt.Errorf("catalog: generation %d restores %q: %w", gen.Number, r.Object, err)
			}
			p.Commits = append(p.Commits, r.Object)
			for _, part := range parts {
				for _, o := range part.Objects {
					p.Keep[o] = true
				}
			}
		}
	}
	for n, byP := range v.commits {
		for proc, oi := range byP {
			if !k.has(n, proc) && (gen.Mode == Independent || n < floor) {
				p.Drop = append(p.Drop, oi.Name)
			}
		}
	}
	sort.Strings(p.Drop)
	// The cache holds the commits this plan reads, not every commit of
	// the member's life.
	for name := range cache {
		if !read[name] {
			delete(cache, name)
		}
	}
	return p, nil
}

// cachedCommit reads a commit once while the plans keep it.
func (s *store) cachedCommit(ctx context.Context, name string, gen *Generation, cache map[string]*commit) (*commit, error) {
	if c, ok := cache[name]; ok {
		return c, nil
	}
	c, err := s.commit(ctx, name, gen)
	if err != nil {
		return nil, err
	}
	cache[name] = c
	return c, nil
}

// Collect applies the deletion rule, on the leader (process 0; another
// member collects nothing and returns nil). At every call it deletes the
// commits of the checkpoints that are no longer retained by those it saw
// complete before a read that found no fence (they are known from its
// commits' listings: no request but the deletes). Once per
// Config.SweepInterval it also sweeps: it lists the live generation's
// directory, reads the commits it keeps (each once while kept), and
// deletes, through package collect, every log and snapshot object under
// the job's prefix that no kept part refers to, that no checkpoint that
// may still complete may reference (by the checkpoint its name records,
// Plan.HoldFrom) and that is older than the grace by both clocks (the
// time in its name and the store's); and the catalog objects of fenced
// generations (but their fences), and of the first layout after an
// upgrade, that no one needs and that are older than the grace.
//
// opts sets collect's options, their zero fields collect's defaults, but
// for the job, the grace, the keep set, the hold and the kinds, which the
// catalog sets; a dry run (opts.DryRun) deletes nothing, not even catalog
// objects, and always sweeps. A fenced member collects nothing
// (ErrFenced). The plan is nil when nothing was
// planned (no sweep due and nothing to drop); the report is nil without
// a sweep.
func (m *Member) Collect(ctx context.Context, opts collect.Options) (*Plan, *collect.Report, error) {
	if !m.Leader() {
		return nil, nil, nil
	}
	m.mu.Lock()
	if m.fenced {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: generation %d", ErrFenced, m.gen.Number)
	}
	// What no retained checkpoint needs any more, from the listings of
	// the leader's commits: by the checkpoints it saw complete before a
	// read that found no fence. A starter of the next generation puts
	// the fence before it lists, so it sees them complete too; a
	// checkpoint decided later (the read of the fence after it failed)
	// may have completed after the starter's listing, which then
	// restores an older one.
	var drop []string
	checked := 0
	for checked < len(m.decided) && m.decided[checked] <= m.fenceChecked {
		checked++
	}
	if m.gen.Mode == Aligned && checked >= m.cfg.Retain {
		oldest := m.decided[checked-m.cfg.Retain]
		for n, names := range m.commitsOf {
			if n < oldest {
				drop = append(drop, names...)
				if !opts.DryRun {
					delete(m.commitsOf, n)
				}
			}
		}
		m.decided = m.decided[checked-m.cfg.Retain:]
	}
	now := m.cfg.Now()
	sweep := opts.DryRun || m.lastSweep.IsZero() || now.Sub(m.lastSweep) >= m.cfg.SweepInterval
	if m.cache == nil {
		m.cache = map[string]*commit{}
	}
	cache := m.cache
	m.mu.Unlock()
	sort.Strings(drop)
	var plan *Plan
	if len(drop) > 0 {
		plan = &Plan{Generation: m.gen.Number, Drop: drop}
	}
	if !opts.DryRun {
		if err := m.s.dropAll(ctx, drop); err != nil {
			return plan, nil, err
		}
	}
	if !sweep {
		return plan, nil, nil
	}
	if opts.Now == nil {
		opts.Now = m.cfg.Now
	}
	m.mu.Lock()
	defer m.mu.Unlock() // a sweep and the cache are one at a time
	opts.Grace = m.cfg.Grace
	p, rep, err := m.s.sweep(ctx, m.gen, m.cfg.Retain, cache, opts)
	if errors.Is(err, ErrFenced) {
		m.fenced = true
	}
	if err == nil && !opts.DryRun {
		m.lastSweep = now
	}
	if p != nil {
		p.Drop = append(drop, p.Drop...)
		sort.Strings(p.Drop)
		p.Drop = slices.Compact(p.Drop)
	}
	return p, rep, err
}

// sweep plans from a listing of gen's directory and applies the plan: the
// data objects through collect.Run, with opts' grace, then the catalog
// objects, with the grace collect.Run applied. It fails with ErrFenced,
// deleting nothing, when the listing shows gen's fence.
func (s *store) sweep(ctx context.Context, gen *Generation, retain int, cache map[string]*commit, opts collect.Options) (*Plan, *collect.Report, error) {
	v, err := s.listGeneration(ctx, gen.Number)
	if err != nil {
		return nil, nil, err
	}
	if v.fence != nil {
		return nil, nil, fmt.Errorf("%w: generation %d is fenced: generation %d is starting", ErrFenced, gen.Number, gen.Number+1)
	}
	p, err := s.planGeneration(ctx, gen, v, retain, cache)
	if err != nil {
		return nil, nil, err
	}
	var keep collect.Keep
	for o := range p.Keep {
		keep.AddObject(o)
	}
	opts.JobID, opts.Keep, opts.HoldFrom = s.jobID, &keep, p.HoldFrom
	opts.Kinds, opts.AllOperators = collect.Logs|collect.Snapshots, true
	rep, err := collect.Run(ctx, s.b, opts)
	if rep != nil {
		s.metrics.deletions.Add(ctx, int64(rep.Deleted.Objects), metric.WithAttributes(attribute.String("kind", "data")))
	}
	if err != nil {
		return p, rep, err
	}
	p.Drop = append(p.Drop, s.staleCatalog(gen, rep, p)...)
	sort.Strings(p.Drop)
	if opts.DryRun {
		return p, rep, nil
	}
	return p, rep, s.dropAll(ctx, p.Drop)
}

// staleCatalog returns the catalog objects of other generations than gen
// (older ones) and of the first layout that rep listed, that no one needs
// and that are older than rep's grace by the store's clock: everything but
// the objects gen restores while it needs them, every object of a
// generation after gen (one that started since), the fences, which fence
// their generations' members however long they stalled, and the first
// layout's latest generation record, which keeps the processes of
// releases before the second layout from starting.
func (s *store) staleCatalog(gen *Generation, rep *collect.Report, p *Plan) []string {
	needed := map[string]bool{}
	for _, name := range p.Commits {
		needed[name] = true
	}
	var v1Latest int64
	for _, o := range rep.Objects {
		if ref := objname.ParseCatalog(s.prefix, o.Name); ref.Kind == objname.CatalogGeneration && ref.Version == 1 {
			v1Latest = max(v1Latest, ref.Generation)
		}
	}
	var out []string
	for _, o := range rep.Objects {
		ref := objname.ParseCatalog(s.prefix, o.Name)
		switch {
		case ref.Kind == objname.CatalogOther, needed[o.Name], ref.Version == 2 && ref.Generation >= gen.Number:
			continue
		case ref.Version == 1 && ref.Kind == objname.CatalogGeneration && ref.Generation == v1Latest:
			continue
		case ref.Version == 2 && ref.Kind == objname.CatalogFence:
			// A member of the fenced generation that stalled (past the
			// grace, for as long as it likes) learns that it is fenced
			// from the fence alone: without it, its commits would confirm
			// and its sweep would plan from its own generation and delete
			// the live one's objects.
			continue
		case o.ModTime.IsZero() || rep.Now.Sub(o.ModTime) <= rep.Grace:
			continue
		}
		out = append(out, o.Name)
	}
	return out
}

// dropAll deletes catalog objects, counting them.
func (s *store) dropAll(ctx context.Context, names []string) error {
	var errs []error
	n := 0
	for _, name := range names {
		if err := s.delete(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	s.metrics.deletions.Add(ctx, int64(n), metric.WithAttributes(attribute.String("kind", "catalog")))
	return errors.Join(errs...)
}

// PlanOptions configure [CollectJob]. The zero value of every field is
// its default.
type PlanOptions struct {
	// Retain is how many complete checkpoints are kept, at least 1. The
	// default is [DefaultRetain].
	Retain int
	// MeterProvider receives the catalog's metrics. The default is the
	// global provider of go.opentelemetry.io/otel.
	MeterProvider metric.MeterProvider
}

// CollectJob applies the deletion rule to the job opts.JobID from
// outside it (a garbage collector such as `dstl gc`), as the leader's
// sweep does (see [Member.Collect]), for the job's live generation, with
// the grace of opts (the default, a day, when it is 0; none for
// [NoGrace]). It returns a nil plan and report, and no error, when the job
// has no catalog of the second layout, and fails with ErrFenced when the
// live generation is fenced (a newer one is starting: collect again once
// it started). The catalog sets opts' keep set, hold and kinds, as for
// Member.Collect.
func CollectJob(ctx context.Context, b backends.Backend, o PlanOptions, opts collect.Options) (*Plan, *collect.Report, error) {
	if o.Retain == 0 {
		o.Retain = DefaultRetain
	}
	if o.Retain < 1 {
		return nil, nil, fmt.Errorf("catalog: retain %d: want at least 1", o.Retain)
	}
	s := newStore(b, opts.JobID, o.MeterProvider)
	latest, err := s.latestGeneration(ctx)
	if err != nil || latest == 0 {
		return nil, nil, err
	}
	gen, err := s.generation(ctx, latest)
	if err != nil {
		return nil, nil, err
	}
	return s.sweep(ctx, gen, o.Retain, map[string]*commit{}, opts)
}
