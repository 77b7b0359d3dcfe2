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
	s.checkRecordCoverage(g)
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

// winners returns, for each key group of r that the named parts hold, the
// part a restore takes it from: the one of the newest generation among
// those that hold it. A generation's parts hold disjoint key groups, and
// an older part is one that a newer generation restored from, superseded
// where a newer part holds the key group. clash names a key group that two
// parts of one generation hold.
func (s *catSchedule) winners(names []string, r dstl.KeyGroupRange) (win map[int]*catalog.Part, clash string) {
	win = map[int]*catalog.Part{}
	for _, name := range names {
		p := s.t.partData(name)
		if p == nil {
			continue
		}
		for kg := max(r.Start, p.KeyGroups.Start); kg <= min(r.End, p.KeyGroups.End); kg++ {
			switch w := win[kg]; {
			case w == nil || w.Generation < p.Generation:
				win[kg] = p
			case w.Generation == p.Generation && clash == "":
				clash = fmt.Sprintf("key group %d from two parts of generation %d: %s %v and %s %v", kg, p.Generation, w.Name, w.KeyGroups, p.Name, p.KeyGroups)
			}
		}
	}
	return win, clash
}

// checkRecordCoverage checks that a generation's restored parts give each
// key group at most once by generation (exactly once in the aligned mode).
func (s *catSchedule) checkRecordCoverage(g *catalog.Generation) {
	all := dstl.KeyGroupRange{Start: 0, End: g.MaxParallelism - 1}
	win, clash := s.winners(g.Restored, all)
	if clash != "" {
		s.failf("invariant 2 (exact restored state): generation %d restores %s", g.Number, clash)
	}
	if g.Mode == catalog.Aligned && len(g.Restored) > 0 {
		for kg := all.Start; kg <= all.End; kg++ {
			if win[kg] == nil {
				s.failf("invariant 2 (exact restored state): generation %d restores key group %d from no part (restored: %s)", g.Number, kg, shortNames(g.Restored))
				return
			}
		}
	}
}

// checkRestore checks what a member restores: each key group of its range
// from exactly one part, the one its generation restores it from, with the
// value its committer committed.
func (s *catSchedule) checkRestore(p *proc, m *catalog.Member, own dstl.KeyGroupRange) {
	g := m.Generation()
	what := fmt.Sprintf("p%d, instance %d %v of generation %d,", p.id, m.Index(), own, g.Number)
	win, _ := s.winners(g.Restored, own)
	got := map[int][]*catalog.Part{}
	for _, part := range m.Restore() {
		for kg := max(own.Start, part.KeyGroups.Start); kg <= min(own.End, part.KeyGroups.End); kg++ {
			got[kg] = append(got[kg], part)
		}
	}
	for kg := own.Start; kg <= own.End; kg++ {
		w := win[kg]
		switch ps := got[kg]; {
		case len(ps) > 1:
			var names []string
			for _, part := range ps {
				names = append(names, fmt.Sprintf("%s %v", part.Name, part.KeyGroups))
			}
			s.failf("invariant 2 (exact restored state): %s restores key group %d from %d parts: %v", what, kg, len(ps), names)
			return
		case len(ps) == 0 && w != nil:
			s.failf("invariant 2 (exact restored state): %s restores key group %d from no part; its generation restores it from %s", what, kg, w.Name)
			return
		case len(ps) == 0:
		case w == nil:
			s.failf("invariant 2 (exact restored state): %s restores key group %d from %s; its generation restores it from none", what, kg, ps[0].Name)
			return
		default:
			gv, _ := decodeValues(ps[0].State)
			wv, _ := decodeValues(w.State)
			if ps[0].Name != w.Name || gv[kg] != wv[kg] {
				s.failf("invariant 2 (exact restored state): %s restores key group %d = %d from %s; its generation restores it from %s, where it is %d",
					what, kg, gv[kg], ps[0].Name, w.Name, wv[kg])
				return
			}
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
	var gotNames []string
	parts := m.Restore()
	for i, part := range parts {
		gotNames = append(gotNames, part.Name)
		if i > 0 && parts[i-1].KeyGroups.Start > part.KeyGroups.Start {
			s.failf("p%d: %s: restored parts out of key-group order: %v", p.id, what, gotNames)
		}
		if !slices.Contains(g.Restored, part.Name) {
			s.failf("invariant 2 (exact restored state): p%d restores part %s, which its generation %d does not restore", p.id, part.Name, g.Number)
		}
	}
	for _, part := range parts {
		why := fmt.Sprintf("restored by p%d, instance %d of generation %d", p.id, m.Index(), g.Number)
		s.checkStoredPart(part.Name, why)
		stored := s.t.partData(part.Name)
		if stored == nil {
			continue
		}
		// A member may restore a part for some of its key groups only.
		narrowed := *stored
		narrowed.KeyGroups = part.KeyGroups
		a, _ := json.Marshal(part)
		b, _ := json.Marshal(&narrowed)
		if !bytes.Equal(a, b) || part.KeyGroups.Start < stored.KeyGroups.Start || part.KeyGroups.End > stored.KeyGroups.End {
			s.failf("p%d: %s: part %s reads as %s, stored as %s (key groups %v)", p.id, what, part.Name, a, b, stored.KeyGroups)
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
		} else if len(vals) != stored.KeyGroups.End-stored.KeyGroups.Start+1 {
			s.failf("invariant 2 (exact restored state): part %s of key groups %v holds %d values", part.Name, stored.KeyGroups, len(vals))
		}
	}
	s.checkRestore(p, m, own)
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
