package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
)

// The checks of the catalog simulation. Their messages name the invariant
// they guard:
//
//  1. no restore of a fenced generation's part;
//  2. a restored state is exactly that of a complete checkpoint;
//  3. no deletion of a referenced object;
//  4. no hang (and no goroutine left, checked by the test).
//
// Other checks hold the members to the rest of their documentation (one
// process per slot, the status a listing gives, ErrFenced exactly when a
// newer generation was listed).

// fence returns the seq at which generation g was fenced (the first store
// of generation g+1's record), MaxInt64 while it is not.
func (s *catSchedule) fence(g int64) int64 {
	if l := s.t.first(objname.CatalogGenerationName(catPrefix, g+1)); l != nil {
		return l.created
	}
	return math.MaxInt64
}

// checkRecord checks a generation record when it is stored, against the
// listing its starter made before writing it.
func (s *catSchedule) checkRecord(l *life) {
	s.stats.Generations++
	g := l.gen
	if l.createdBy < 0 {
		s.failf("generation %d's record stored by no process", g.Number)
		return
	}
	by := s.procs[l.createdBy]
	v := s.t.viewAt(by.lastList)
	s.logf("p%d: started generation %d (%d instances) after a listing at step %d: restores checkpoint %d %s, first checkpoint %d", by.id, g.Number, g.Instances(),
		by.listTick, g.RestoredCheckpoint, shortNames(g.Restored), g.FirstCheckpoint)
	if v.latest()+1 != g.Number {
		s.failf("generation %d started by p%d after a listing whose latest generation was %d", g.Number, by.id, v.latest())
		return
	}
	if g.FirstCheckpoint != v.maxN+1 {
		s.failf("generation %d's first checkpoint is %d; its starter's listing had checkpoints up to %d", g.Number, g.FirstCheckpoint, v.maxN)
	}
	if g.Mode != by.cfg.Mode || g.Instances() != by.cfg.Instances {
		s.failf("generation %d (%s, %d instances) started by p%d of %s mode, %d instances", g.Number, g.Mode, g.Instances(), by.id, by.cfg.Mode, by.cfg.Instances)
	}
	if g.Number == 1 {
		if len(g.Restored) != 0 || g.RestoredCheckpoint != 0 {
			s.failf("generation 1 restores checkpoint %d %v", g.RestoredCheckpoint, g.Restored)
		}
		return
	}
	prev := v.gens[g.Number-1]
	if prev == nil {
		s.failf("generation %d started while generation %d's record was not listed", g.Number, g.Number-1)
		return
	}
	complete := v.complete(prev)
	for _, name := range g.Restored {
		ref := objname.ParseCatalog(catPrefix, name)
		first := s.t.first(name)
		switch {
		case ref.Kind != objname.CatalogPart:
			s.failf("invariant 1 (no restore of a fenced part): generation %d restores %q, no part's name", g.Number, name)
			continue
		case first == nil:
			s.failf("invariant 1 (no restore of a fenced part): generation %d restores part %s, never stored", g.Number, name)
			continue
		case first.created > s.fence(ref.Generation):
			s.failf("invariant 1 (no restore of a fenced part): generation %d restores part %s, committed at step %d by p%d after generation %d was fenced (%s)",
				g.Number, name, first.createdTick, first.createdBy, ref.Generation, s.t.fate(objname.CatalogGenerationName(catPrefix, ref.Generation+1)))
		case ref.Generation == prev.Number && prev.Mode == catalog.Aligned && !slices.Contains(complete, ref.Checkpoint):
			s.failf("invariant 1 (no restore of a fenced part): generation %d restores part %s of checkpoint %d, which was not complete in generation %d when its starter listed the catalog (complete: %v)",
				g.Number, name, ref.Checkpoint, prev.Number, complete)
		case ref.Generation != prev.Number && !slices.Contains(prev.Restored, name):
			s.failf("invariant 1 (no restore of a fenced part): generation %d restores part %s, neither of generation %d nor restored by it", g.Number, name, prev.Number)
		}
		s.checkStoredPart(name, fmt.Sprintf("restored by generation %d (record just written)", g.Number))
	}
	want, wantN, ok := s.t.restorePoint(v, prev, by.cfg.RestoreFrom)
	switch {
	case !ok:
		s.failf("generation %d started with restore-from %d, neither complete in generation %d nor restored by it", g.Number, by.cfg.RestoreFrom, prev.Number)
	case !sameSet(want, g.Restored) || wantN != g.RestoredCheckpoint:
		s.failf("invariant 1 (no restore of a fenced part): generation %d restores checkpoint %d %v; as of its starter's listing, generation %d's restore point was checkpoint %d %v",
			g.Number, g.RestoredCheckpoint, g.Restored, prev.Number, wantN, want)
	}
	s.checkCoverage(fmt.Sprintf("generation %d", g.Number), g.Restored, dstl.KeyGroupRange{Start: 0, End: g.MaxParallelism - 1},
		g.Mode == catalog.Aligned && len(g.Restored) > 0)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b) && len(slices.Compact(b)) == len(a)
}

// checkStoredPart checks that a part a member may restore is stored, and
// every data object it names.
func (s *catSchedule) checkStoredPart(name, why string) {
	l := s.t.now(name)
	if l == nil {
		s.failf("invariant 3 (no deletion of a referenced object): part %s (%s) is missing: %s", name, why, s.t.fate(name))
		return
	}
	if l.part == nil {
		return
	}
	for _, o := range l.part.Objects {
		ol := s.t.now(o)
		switch {
		case ol == nil:
			s.failf("invariant 3 (no deletion of a referenced object): data object %s of part %s (%s) is missing: %s", o, name, why, s.t.fate(o))
		case !bytes.Equal(ol.data, dataContent(o)):
			s.failf("data object %s of part %s holds %q", o, name, ol.data)
		}
	}
}

// checkCoverage checks that the parts give each key group of r at most
// once (and, when exact, exactly once).
func (s *catSchedule) checkCoverage(what string, names []string, r dstl.KeyGroupRange, exact bool) {
	by := map[int][]string{}
	for _, name := range names {
		p := s.t.partData(name)
		if p == nil {
			continue
		}
		for kg := max(r.Start, p.KeyGroups.Start); kg <= min(r.End, p.KeyGroups.End); kg++ {
			by[kg] = append(by[kg], fmt.Sprintf("%s %v", name, p.KeyGroups))
		}
	}
	for kg := r.Start; kg <= r.End; kg++ {
		switch n := len(by[kg]); {
		case n > 1:
			s.failf("invariant 2 (exact restored state): %s restores key group %d from %d parts: %v", what, kg, n, by[kg])
			return
		case n == 0 && exact:
			s.failf("invariant 2 (exact restored state): %s restores key group %d from no part (restored: %v)", what, kg, names)
			return
		}
	}
}

// checkMember checks a member a Join or Rejoin returned, and what it
// restores.
func (s *catSchedule) checkMember(p *proc, m *catalog.Member, what string) {
	s.stats.Restores++
	g := m.Generation()
	key := slotKey{g.Number, m.Index()}
	if h := s.holders[key]; h != nil && h != p {
		// A claim of a fenced generation may be dropped, and a process
		// whose listing predates the fence may claim the slot again: its
		// member is fenced at its first listing, and no reader restores
		// what it commits.
		if s.fence(g.Number) > s.t.seq {
			s.failf("p%d and p%d both hold instance %d of generation %d", h.id, p.id, key.index, key.gen)
		} else {
			s.logf("p%d: holds instance %d of the fenced generation %d, as p%d did: the claim was dropped (%s)", p.id, key.index, key.gen, h.id,
				s.t.fate(objname.CatalogClaimName(catPrefix, key.gen, key.index)))
		}
	}
	s.holders[key] = p
	rec := s.t.last(objname.CatalogGenerationName(catPrefix, g.Number))
	if rec == nil || rec.gen == nil {
		s.failf("p%d: %s: member of generation %d, of which no record was stored", p.id, what, g.Number)
		return
	}
	got, _ := json.Marshal(g)
	want, _ := json.Marshal(rec.gen)
	if !bytes.Equal(got, want) {
		s.failf("p%d: %s: generation %s, its record holds %s", p.id, what, got, want)
	}
	own := catalog.RangeOf(p.cfg.Index, p.cfg.Instances, s.maxPar)
	if m.Index() != p.cfg.Index || g.Instances() != p.cfg.Instances || g.Mode != p.cfg.Mode || m.KeyGroups() != own {
		s.failf("p%d: %s: instance %d %v of %d (%s mode), configured as instance %d %v of %d (%s mode)", p.id, what,
			m.Index(), m.KeyGroups(), g.Instances(), g.Mode, p.cfg.Index, own, p.cfg.Instances, p.cfg.Mode)
	}
	var wantNames, gotNames []string
	for _, name := range g.Restored {
		if part := s.t.partData(name); part != nil && overlap(part.KeyGroups, own) {
			wantNames = append(wantNames, name)
		}
	}
	parts := m.Restore()
	for i, part := range parts {
		gotNames = append(gotNames, part.Name)
		if i > 0 && parts[i-1].KeyGroups.Start > part.KeyGroups.Start {
			s.failf("p%d: %s: restored parts out of key-group order: %v", p.id, what, gotNames)
		}
	}
	if !sameSet(wantNames, gotNames) {
		s.failf("invariant 2 (exact restored state): p%d, instance %d of generation %d, restores %v; of the parts its generation restores, %v overlap its key groups %v",
			p.id, m.Index(), g.Number, gotNames, wantNames, own)
	}
	for _, part := range parts {
		why := fmt.Sprintf("restored by p%d, instance %d of generation %d", p.id, m.Index(), g.Number)
		s.checkStoredPart(part.Name, why)
		stored := s.t.partData(part.Name)
		if stored == nil {
			continue
		}
		a, _ := json.Marshal(part)
		b, _ := json.Marshal(stored)
		if !bytes.Equal(a, b) {
			s.failf("p%d: %s: part %s reads as %s, stored as %s", p.id, what, part.Name, a, b)
		}
		in := s.intents[part.Name]
		switch {
		case in == nil:
			s.failf("invariant 2 (exact restored state): p%d restores part %s, which no process committed", p.id, part.Name)
		case !bytes.Equal(part.State, in.state) || !slices.Equal(part.Objects, in.objects):
			s.failf("invariant 2 (exact restored state): p%d restores part %s with state %q and objects %v; p%d committed state %q and objects %v",
				p.id, part.Name, part.State, part.Objects, in.proc, in.state, in.objects)
		}
		if vals, err := decodeValues(part.State); err != nil {
			s.failf("invariant 2 (exact restored state): part %s: %v", part.Name, err)
		} else if len(vals) != part.KeyGroups.End-part.KeyGroups.Start+1 {
			s.failf("invariant 2 (exact restored state): part %s of key groups %v holds %d values", part.Name, part.KeyGroups, len(vals))
		}
	}
	s.checkCoverage(fmt.Sprintf("p%d, instance %d %v of generation %d,", p.id, m.Index(), own, g.Number), gotNames, own,
		g.Mode == catalog.Aligned && len(g.Restored) > 0)
	s.stats.RestoredParts += len(parts)
	p.restoreValues(parts, own)
	s.logf("p%d: %s: instance %d of generation %d, restores %s", p.id, what, m.Index(), g.Number, shortNames(gotNames))
}

// checkStored checks the part a successful Commit stored.
func (s *catSchedule) checkStored(p *proc, in *intent) {
	l := s.t.now(in.name)
	switch {
	case l == nil:
		s.failf("p%d: Commit of %s succeeded, yet no such part is stored: %s", p.id, in.name, s.t.fate(in.name))
	case l.part == nil:
	case l.createdBy != p.id:
		s.failf("p%d: Commit of %s succeeded, yet p%d stored the part", p.id, in.name, l.createdBy)
	case !bytes.Equal(l.part.State, in.state) || !slices.Equal(l.part.Objects, in.objects):
		s.failf("p%d: Commit of %s succeeded, yet the part holds state %q and objects %v, not %q and %v", p.id, in.name, l.part.State, l.part.Objects, in.state, in.objects)
	}
}

// checkStatus checks a member's status against its latest listing.
func (s *catSchedule) checkStatus(p *proc, complete int64, what string) {
	v := s.t.viewAt(p.lastList)
	g := p.m.Generation()
	if l := v.latest(); l > g.Number {
		s.failf("p%d: %s of a member of generation %d succeeded, though its listing had generation %d", p.id, what, g.Number, l)
		return
	}
	if want := v.status(g, p.m.Index()); complete != want {
		s.failf("p%d: %s says checkpoint %d is the latest complete one of generation %d; its listing says %d", p.id, what, complete, g.Number, want)
	}
}

// checkFenced checks an ErrFenced: a newer generation was listed.
func (s *catSchedule) checkFenced(p *proc, what string) {
	g := p.m.Generation().Number
	if l := s.t.viewAt(p.lastList).latest(); l <= g {
		s.failf("p%d: %s of a member of generation %d failed with ErrFenced, though the latest listing had generation %d", p.id, what, g, l)
	}
}

// checkPlan checks a plan against its listing: only the live generation
// plans, and the plan keeps every part a member may still need and the
// objects they name.
func (s *catSchedule) checkPlan(p *proc, pl *catalog.Plan) {
	v := s.t.viewAt(p.lastList)
	g := p.m.Generation().Number
	if l := v.latest(); l != g {
		s.failf("p%d: Plan of a member of generation %d succeeded, though its listing had generation %d", p.id, g, l)
		return
	}
	if pl.Generation != g {
		s.failf("p%d: a member of generation %d planned for generation %d", p.id, g, pl.Generation)
	}
	names, why := s.t.needed(v, s.retain)
	drop := map[string]bool{}
	for _, name := range pl.Drop {
		drop[name] = true
	}
	for _, name := range names {
		if drop[name] {
			s.failf("invariant 3 (no deletion of a referenced object): p%d's plan drops part %s, %s", p.id, name, why[name])
		}
		l := s.t.at(name, v.q)
		if l == nil || l.part == nil {
			continue
		}
		for _, o := range l.part.Objects {
			if !pl.Keep[o] {
				s.failf("invariant 3 (no deletion of a referenced object): p%d's plan does not keep data object %s of part %s, %s", p.id, o, name, why[name])
			}
		}
	}
}

// checkNeeded checks that every part a member may still need is stored,
// with the data objects it names.
func (s *catSchedule) checkNeeded(when string) {
	names, why := s.t.needed(s.t.viewAt(s.t.seq), s.retain)
	for _, name := range names {
		s.checkStoredPart(name, why[name]+", "+when)
	}
}
