package catalog

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/internal/catalogv1"
)

// Errors of the catalog, checked with errors.Is.
var (
	// ErrFenced: a newer generation started, or is starting. Its member
	// confirms nothing more and deletes nothing; what it commits after
	// the fence is never restored (a commit whose put preceded the fence
	// may be: see [Member.Commit]). Rejoin (or restart) to go on.
	ErrFenced = errors.New("catalog: fenced by a newer generation")
	// ErrReplaced: another process holds this process's slot in the
	// latest generation.
	ErrReplaced = errors.New("catalog: another process holds the process's slot")
	// ErrMismatch: the latest generation has another instance set,
	// key-group assignment, process count or mode than this member's
	// configuration.
	ErrMismatch = errors.New("catalog: generation does not match the configuration")
	// ErrNoCheckpoint: the checkpoint asked for to restore from is not
	// retained (or not complete).
	ErrNoCheckpoint = errors.New("catalog: no such retained checkpoint")
)

// maxJoinRounds bounds the generations one Join may find started under it.
const maxJoinRounds = 8

// Join makes this process process cfg.Process of the job's latest
// generation, or starts a new generation when the latest one does not
// match cfg (a rescale) or the process's slot is held (a restart): a new
// generation restores the latest complete checkpoint (or cfg.RestoreFrom)
// and fences every older one. The member's Restore then names the parts
// to restore.
//
// A job whose catalog is of the first layout (releases before the second
// layout) is moved to the second one by its first Join: see
// docs/CATALOG.md, "Upgrade".
//
// Before it reads or writes the catalog, Join checks that b refuses a Put
// of an existing name on every path its Puts take, since the fencing
// rests on it ([backends.VerifyCreateOnly], once per backends.Bucket in a
// process): a store that ignores conditional writes fails Join with an
// error that wraps [backends.ErrCreateOnlyIgnored].
func Join(ctx context.Context, b backends.Backend, cfg Config) (*Member, error) {
	return join(ctx, b, cfg, true)
}

// Rejoin joins the latest generation as the same process, after the
// member was fenced (see [ErrFenced]), without starting a generation: it
// fails with ErrReplaced when another process holds the slot, with
// ErrMismatch when the latest generation is not of this configuration,
// and with ErrFenced when the latest generation is fenced and the one
// after it is not written yet (its starter is still at work, or stopped:
// try again later, or Join, which finishes such a start).
func (m *Member) Rejoin(ctx context.Context) (*Member, error) {
	return join(ctx, m.s.b, m.cfg, false)
}

func join(ctx context.Context, b backends.Backend, cfg Config, mayStart bool) (*Member, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := newStore(b, cfg.JobID, cfg.MeterProvider)
	m, outcome, err := s.join(ctx, cfg, mayStart)
	if err != nil {
		s.metrics.outcome(ctx, s.metrics.joins, "error")
		return nil, err
	}
	s.metrics.outcome(ctx, s.metrics.joins, outcome)
	return m, nil
}

func (s *store) join(ctx context.Context, cfg Config, mayStart bool) (*Member, string, error) {
	// The fencing rests on create-only puts: a store that ignores them
	// on any path is refused before anything is written (once per
	// backends.Bucket and process; see backends.VerifyCreateOnly).
	probe, err := objname.NewCreateOnlyProbe(s.prefix)
	if err != nil {
		return nil, "", err
	}
	if err := backends.VerifyCreateOnly(ctx, s.b, probe); err != nil {
		return nil, "", fmt.Errorf("catalog: job %q: %w", cfg.JobID, err)
	}
	outcome := "joined"
	for range maxJoinRounds {
		latest, err := s.latestGeneration(ctx)
		if err != nil {
			return nil, "", err
		}
		if latest == 0 {
			if !mayStart {
				return nil, "", fmt.Errorf("%w: job %q has no generation", ErrMismatch, cfg.JobID)
			}
			upgraded, err := s.startFirst(ctx, cfg)
			if err != nil {
				return nil, "", err
			}
			outcome = "started"
			if upgraded {
				outcome = "upgraded"
			}
			continue
		}
		gen, err := s.generation(ctx, latest)
		if errors.Is(err, backends.ErrNotFound) {
			continue // dropped since the listing: a newer generation started
		}
		if err != nil {
			return nil, "", err
		}
		fenced, err := s.exists(ctx, objname.CatalogV2FenceName(s.prefix, latest))
		if err != nil {
			return nil, "", err
		}
		switch {
		case fenced:
			// The generation after it is being started, or its starter
			// stopped between the fence and the record: any process may
			// finish the start.
			if !mayStart {
				return nil, "", fmt.Errorf("%w: generation %d is fenced and generation %d is not started yet", ErrFenced, latest, latest+1)
			}
			if err := s.start(ctx, cfg, gen, false); err != nil {
				return nil, "", err
			}
			outcome = "started"
			continue
		case !matches(gen, cfg):
			if !mayStart {
				return nil, "", fmt.Errorf("%w: generation %d has %d instances in %d processes (%s mode), this is process %d of %d instances in %d processes (%s mode)",
					ErrMismatch, latest, gen.Instances(), gen.Processes, gen.Mode, cfg.Process, cfg.Instances, cfg.Processes, cfg.Mode)
			}
			if err := s.start(ctx, cfg, gen, true); err != nil {
				return nil, "", err
			}
			outcome = "started"
			continue
		}
		ok, err := s.claim(ctx, latest, cfg)
		if err != nil {
			return nil, "", err
		}
		if !ok {
			if !mayStart {
				return nil, "", fmt.Errorf("%w: process %d of generation %d", ErrReplaced, cfg.Process, latest)
			}
			if err := s.start(ctx, cfg, gen, true); err != nil {
				return nil, "", err
			}
			outcome = "started"
			continue
		}
		// A join that stalled between its check of the fence and its
		// claim may have claimed a slot of a generation fenced since:
		// check again, and join the newer generation instead.
		if fenced, err := s.exists(ctx, objname.CatalogV2FenceName(s.prefix, latest)); err != nil {
			return nil, "", err
		} else if fenced {
			continue
		}
		m, err := s.member(ctx, cfg, gen)
		return m, outcome, err
	}
	return nil, "", fmt.Errorf("catalog: job %q: %d generations started while this process joined", cfg.JobID, maxJoinRounds)
}

func matches(g *Generation, cfg Config) bool {
	return g.Mode == cfg.Mode && g.MaxParallelism == cfg.MaxParallelism && g.Processes == cfg.Processes && slices.Equal(g.KeyGroups, cfg.KeyGroups)
}

// latestGeneration lists the generation records and returns the latest
// generation's number, 0 for none.
func (s *store) latestGeneration(ctx context.Context) (int64, error) {
	var latest int64
	err := s.list(ctx, objname.CatalogV2GenerationsDir(s.prefix), func(oi backends.ObjectInfo) {
		if ref := objname.ParseCatalog(s.prefix, oi.Name); ref.Kind == objname.CatalogGeneration && ref.Version == 2 {
			latest = max(latest, ref.Generation)
		}
	})
	return latest, err
}

// claim claims process cfg.Process's slot in generation g; false: another
// process holds it.
func (s *store) claim(ctx context.Context, g int64, cfg Config) (bool, error) {
	data, err := encode(kindClaim, claim{Owner: cfg.Owner, Nonce: rand.Text(), Created: cfg.Now().UTC()})
	if err != nil {
		return false, err
	}
	return s.put(ctx, objname.CatalogV2ClaimName(s.prefix, g, cfg.Process), data)
}

// startFirst starts the job's first generation of this layout: from
// nothing, or, when the job has a catalog of the first layout, from the
// latest complete checkpoint recorded there, after fencing it (see
// catalogv1.Fence). upgraded says which.
func (s *store) startFirst(ctx context.Context, cfg Config) (upgraded bool, err error) {
	gen := &Generation{Number: 1, Mode: cfg.Mode, MaxParallelism: cfg.MaxParallelism, KeyGroups: cfg.KeyGroups,
		Processes: cfg.Processes, Restored: []Restored{}, FirstCheckpoint: 1, Created: cfg.Now().UTC()}
	up, err := catalogv1.Fence(ctx, s.b, s.jobID, cfg.Owner, cfg.Now(), catalogv1.Mode(cfg.Mode), cfg.Retain, cfg.RestoreFrom)
	if err != nil {
		return false, fmt.Errorf("catalog: job %q: the upgrade from the first layout: %w", cfg.JobID, err)
	}
	switch {
	case up != nil:
		// The first layout's generations and checkpoints keep their
		// numbers: this one follows its fence.
		gen.Number = up.Fence
		gen.RestoredCheckpoint = up.Checkpoint
		gen.FirstCheckpoint = max(up.MaxCheckpoint, up.Checkpoint) + 1
		for _, p := range up.Parts {
			// One entry per object: the upgrade may restore a part for
			// the key groups of several instances.
			if i := slices.IndexFunc(gen.Restored, func(r Restored) bool { return r.Object == p.Name }); i >= 0 {
				gen.Restored[i].KeyGroups = append(gen.Restored[i].KeyGroups, p.KeyGroups)
				continue
			}
			gen.Restored = append(gen.Restored, Restored{Object: p.Name, KeyGroups: []dstl.KeyGroupRange{p.KeyGroups}})
		}
		if err := disjointRestored(gen.Restored); err != nil {
			return false, fmt.Errorf("%w: what the first layout's generation %d restores: %w", ErrDamaged, up.Latest.Number, err)
		}
	case cfg.RestoreFrom != 0:
		return false, fmt.Errorf("%w: checkpoint %d: the job has no generation yet", ErrNoCheckpoint, cfg.RestoreFrom)
	}
	if err := s.putGeneration(ctx, gen); err != nil {
		return false, err
	}
	return up != nil, nil
}

// putGeneration writes a new generation's record, create-only; another
// process's record of the same number is no error (the caller lists again
// and joins it).
func (s *store) putGeneration(ctx context.Context, gen *Generation) error {
	name := objname.CatalogV2GenerationName(s.prefix, gen.Number)
	if err := gen.validate(name, gen.Number); err != nil {
		return fmt.Errorf("catalog: a new generation's record: %w", err)
	}
	data, err := encode(kindGeneration, gen)
	if err != nil {
		return err
	}
	_, err = s.put(ctx, name, data)
	return err
}

// start starts the generation after prev: it writes prev's fence (unless
// putFence is false: it is there), lists prev's directory, chooses what
// the new generation restores (the latest complete checkpoint, or
// cfg.RestoreFrom), reads and checks every commit chosen, and writes the
// new generation's record, create-only. Another process's record of that
// number is no error: the caller lists again and joins it.
//
// The fence comes before the listing: a member of prev confirms a
// checkpoint only after it found no fence, later than every put that
// completed the checkpoint; so the listing sees every checkpoint a member
// confirmed, and the new generation never restores an older one.
func (s *store) start(ctx context.Context, cfg Config, prev *Generation, putFence bool) error {
	if prev.Number == math.MaxInt64 {
		return fmt.Errorf("%w %q: generation %d has no successor", ErrDamaged, objname.CatalogV2GenerationName(s.prefix, prev.Number), prev.Number)
	}
	if putFence {
		data, err := encode(kindFence, fence{Next: prev.Number + 1, Owner: cfg.Owner, Created: cfg.Now().UTC()})
		if err != nil {
			return err
		}
		if _, err := s.put(ctx, objname.CatalogV2FenceName(s.prefix, prev.Number), data); err != nil {
			return err
		}
		s.metrics.fenced.Add(ctx, 0) // the fence is counted by the members that find it
	}
	// Another process may have written the next record already (a
	// restart storm): then there is nothing to choose and read.
	if ok, err := s.exists(ctx, objname.CatalogV2GenerationName(s.prefix, prev.Number+1)); err != nil || ok {
		return err
	}
	v, err := s.listGeneration(ctx, prev.Number)
	if err != nil {
		return err
	}
	restored, n, err := s.restorePoint(ctx, cfg, prev, v)
	if err != nil {
		return err
	}
	maxN := max(v.maxCheckpoint, prev.FirstCheckpoint-1, prev.RestoredCheckpoint)
	if maxN == math.MaxInt64 {
		return fmt.Errorf("%w %q: checkpoint %d has no successor for a new generation's first", ErrDamaged, v.maxCommit, maxN)
	}
	gen := &Generation{Number: prev.Number + 1, Mode: cfg.Mode, MaxParallelism: cfg.MaxParallelism, KeyGroups: cfg.KeyGroups,
		Processes: cfg.Processes, Restored: restored, RestoredCheckpoint: n, FirstCheckpoint: maxN + 1, Created: cfg.Now().UTC()}
	if gen.Mode == Independent {
		gen.RestoredCheckpoint = 0
	}
	cfg.Logger.Info("catalog: starting a generation", "job", cfg.JobID, "generation", gen.Number,
		"restored_checkpoint", n, "restored_objects", len(restored), "first_checkpoint", gen.FirstCheckpoint)
	return s.putGeneration(ctx, gen)
}

// restorePoint chooses what a generation after prev restores, from v, a
// listing of prev's directory made after prev's fence: in the aligned
// mode, the commits of prev's latest complete checkpoint (or of
// cfg.RestoreFrom), or, when prev completed none, what prev restored; in
// the independent mode, each process's latest commit, or, for a process
// that committed none, what prev restored for its instances' key groups
// (a part narrowed to them where it also covers other processes' key
// groups, so that no key group is restored from two parts and no
// process's confirmed commit is rolled back). Every object chosen is read and
// checked, so that a damaged or missing one, or two parts that overlap,
// fail the start rather than a restore.
func (s *store) restorePoint(ctx context.Context, cfg Config, prev *Generation, v *genView) ([]Restored, int64, error) {
	type chosenPart struct {
		object string
		kg     dstl.KeyGroupRange
	}
	var chosen []chosenPart
	var n int64
	commitParts := func(n int64, p int) []chosenPart {
		lo, hi := InstancesOf(p, prev.Processes, prev.Instances())
		var out []chosenPart
		for i := lo; i <= hi; i++ {
			out = append(out, chosenPart{objname.CatalogV2CommitName(s.prefix, prev.Number, n, p), prev.KeyGroups[i]})
		}
		return out
	}
	restoredParts := func() []chosenPart {
		var out []chosenPart
		for _, r := range prev.Restored {
			for _, kg := range r.KeyGroups {
				out = append(out, chosenPart{r.Object, kg})
			}
		}
		return out
	}
	if prev.Mode == Aligned {
		complete := v.complete(prev)
		all := func(n int64) []chosenPart {
			var out []chosenPart
			for p := range prev.Processes {
				out = append(out, commitParts(n, p)...)
			}
			return out
		}
		switch want := cfg.RestoreFrom; {
		case want != 0:
			retained := complete[max(0, len(complete)-cfg.Retain):]
			switch {
			case slices.Contains(retained, want):
				chosen, n = all(want), want
			case want == prev.RestoredCheckpoint && len(complete) < cfg.Retain:
				chosen, n = restoredParts(), want
			default:
				return nil, 0, fmt.Errorf("%w: checkpoint %d is neither one of the last %d complete in generation %d nor the one it restored while it is kept",
					ErrNoCheckpoint, want, cfg.Retain, prev.Number)
			}
		case len(complete) > 0:
			n = complete[len(complete)-1]
			chosen = all(n)
		default:
			chosen, n = restoredParts(), prev.RestoredCheckpoint
		}
	} else {
		if cfg.RestoreFrom != 0 {
			return nil, 0, fmt.Errorf("%w: checkpoint %d: a restore by number needs the aligned mode", ErrNoCheckpoint, cfg.RestoreFrom)
		}
		// A process that committed nothing restores what prev restored,
		// for its instances' key groups only: a part prev restored may
		// also cover the key groups of a process that committed (and
		// confirmed) a later checkpoint, which must not be rolled back.
		rparts := restoredParts()
		for p := range prev.Processes {
			if n := v.latestCommit(p); n != 0 {
				chosen = append(chosen, commitParts(n, p)...)
				continue
			}
			lo, hi := InstancesOf(p, prev.Processes, prev.Instances())
			for _, rp := range rparts {
				var last *chosenPart
				for i := lo; i <= hi; i++ {
					kg, ok := intersect(rp.kg, prev.KeyGroups[i])
					switch {
					case !ok:
					case last != nil && last.kg.End+1 == kg.Start:
						last.kg.End = kg.End // adjacent instances: one range
					default:
						chosen = append(chosen, chosenPart{rp.object, kg})
						last = &chosen[len(chosen)-1]
					}
				}
			}
		}
	}
	// Every object chosen is read and checked; the parts chosen must not
	// overlap.
	idx := map[string]int{}
	var out []Restored
	var kgs []dstl.KeyGroupRange
	for _, c := range chosen {
		i, ok := idx[c.object]
		if !ok {
			i = len(out)
			idx[c.object] = i
			out = append(out, Restored{Object: c.object})
		}
		out[i].KeyGroups = append(out[i].KeyGroups, c.kg)
		kgs = append(kgs, c.kg)
	}
	if err := checkAssignment(kgs, prev.MaxParallelism); err != nil {
		return nil, 0, fmt.Errorf("%w %q: what generation %d would restore: %w", ErrDamaged, objname.CatalogV2GenerationName(s.prefix, prev.Number), prev.Number+1, err)
	}
	for _, r := range out {
		if _, err := s.readRestored(ctx, r, prev); err != nil {
			return nil, 0, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].KeyGroups[0].Start < out[j].KeyGroups[0].Start })
	return out, n, nil
}

// disjointRestored checks that restored objects' parts do not overlap.
func disjointRestored(rs []Restored) error {
	var kgs []dstl.KeyGroupRange
	for _, r := range rs {
		kgs = append(kgs, r.KeyGroups...)
	}
	for i, a := range kgs {
		for _, b := range kgs[:i] {
			if overlaps(a, b) {
				return fmt.Errorf("parts of key groups %v and %v overlap", b, a)
			}
		}
	}
	return nil
}

// readRestored reads a restored object and returns its parts whose key
// groups are among r's, each narrowed to r's range where r restores fewer
// key groups than the part holds: of a commit (gen, when known, is the
// generation it belongs to), or a part of the first layout. A range of r
// that no part of the object holds is damage.
func (s *store) readRestored(ctx context.Context, r Restored, gen *Generation) ([]*Part, error) {
	var parts []*Part
	switch ref := objname.ParseCatalog(s.prefix, r.Object); {
	case ref.Kind == objname.CatalogCommit:
		c, err := s.commit(ctx, r.Object, gen)
		if err != nil {
			return nil, err
		}
		parts = c.Parts
	case ref.Kind == objname.CatalogPart && ref.Version == 1:
		p, err := catalogv1.ReadPart(ctx, s.b, s.jobID, r.Object)
		if err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
		parts = []*Part{{Name: r.Object, Generation: p.Generation, Checkpoint: p.Checkpoint, Instance: p.Instance,
			KeyGroups: p.KeyGroups, State: p.State, Metadata: p.Metadata, Objects: p.Objects, Created: p.Created}}
	default:
		return nil, fmt.Errorf("%w %q: restored, but not the name of a commit or of a first-layout part", ErrDamaged, r.Object)
	}
	var out []*Part
	for _, kg := range r.KeyGroups {
		i := slices.IndexFunc(parts, func(p *Part) bool { return p.KeyGroups.Start <= kg.Start && kg.End <= p.KeyGroups.End })
		if i < 0 {
			return nil, fmt.Errorf("%w %q: restored for key groups %v, which it holds no part of", ErrDamaged, r.Object, kg)
		}
		p := parts[i]
		if p.KeyGroups != kg {
			narrowed := *p
			narrowed.KeyGroups = kg
			p = &narrowed
		}
		out = append(out, p)
	}
	return out, nil
}

// member makes the member of gen, reading the restored parts its
// instances need.
func (s *store) member(ctx context.Context, cfg Config, gen *Generation) (*Member, error) {
	lo, hi := InstancesOf(cfg.Process, gen.Processes, gen.Instances())
	m := &Member{s: s, cfg: cfg, gen: gen, first: lo, last: hi, restore: map[int][]*Part{},
		commitsOf: map[int64][]string{}}
	read := map[string][]*Part{}
	for _, r := range gen.Restored {
		need := false
		for i := lo; i <= hi; i++ {
			for _, kg := range r.KeyGroups {
				need = need || overlaps(kg, gen.KeyGroups[i])
			}
		}
		if !need {
			continue
		}
		parts, err := s.readRestored(ctx, r, nil)
		if err != nil {
			return nil, fmt.Errorf("catalog: generation %d restores %q: %w", gen.Number, r.Object, err)
		}
		read[r.Object] = parts
	}
	for i := lo; i <= hi; i++ {
		var parts []*Part
		for _, r := range gen.Restored {
			for _, p := range read[r.Object] {
				if overlaps(p.KeyGroups, gen.KeyGroups[i]) {
					parts = append(parts, p)
				}
			}
		}
		sort.Slice(parts, func(a, b int) bool { return parts[a].KeyGroups.Start < parts[b].KeyGroups.Start })
		m.restore[i] = parts
	}
	return m, nil
}
