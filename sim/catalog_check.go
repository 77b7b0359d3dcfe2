package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/internal/catalogv1"
)

// The checks of the catalog simulation. Their messages name the invariant
// they guard (see the package documentation):
//
//  1. every restore is of a complete checkpoint, or of what the generation
//     before restored, as the documentation chooses it, and never of two
//     parts of one key group;
//  2. no rollback past a confirmed checkpoint;
//  3. no complete checkpoint, and no restored part, names a deleted object;
//  4. no commit written after its generation's successor listed it is
//     restored, and a fenced member confirms nothing;
//  5. a damaged or missing object gives an error naming it, never a wrong
//     restore;
//  6. the first layout's processes are fenced by the upgrade.
//
// Other checks hold the members to the rest of their documentation.

// settle runs the checks of what the store recorded since the last call:
// new generation records and commits.
func (s *catSchedule) settle() {
	for len(s.t.fresh) > 0 {
		l := s.t.fresh[0]
		s.t.fresh = s.t.fresh[1:]
		switch l.class {
		case classGen2:
			s.checkRecord(l)
		case classGen1:
			s.checkRecord1(l)
		case classCommit2:
			s.checkCommitStored(l)
		}
	}
	for _, b := range s.t.bad {
		s.failf("a catalog object does not decode: %s", b)
	}
	s.t.bad = nil
}

// starterListing returns the seq of the listing of prefix that the
// starter of a generation made last before it wrote the record.
func (s *catSchedule) starterListing(l *life, prefix string) (*proc, int64, bool) {
	if l.createdBy < 0 {
		return nil, 0, false
	}
	p := s.procs[l.createdBy]
	q, ok := p.listings[prefix]
	return p, q, ok
}

// checkRecord checks a generation record of the second layout when it is
// stored, against the listing its starter made before writing it.
func (s *catSchedule) checkRecord(l *life) {
	if l.damaged || l.created != s.t.first(l.name).created {
		return
	}
	s.stats.Generations++
	g := l.gen
	first := len(s.t.gens2) == 0 || s.t.gens2[0] == g.Number
	if l.createdBy < 0 {
		s.failf("generation %d's record stored by no process", g.Number)
		return
	}
	by := s.procs[l.createdBy]
	if by.old {
		s.failf("generation %d of the second layout stored by p%d, a process of the first layout", g.Number, by.id)
		return
	}
	if g.Mode != by.cfg.Mode || g.Instances() != by.cfg.Instances || g.Processes != by.cfg.Processes || g.MaxParallelism != s.maxPar {
		s.failf("generation %d (%d instances in %d processes, %s) started by p%d of %d instances in %d processes (%s)",
			g.Number, g.Instances(), g.Processes, g.Mode, by.id, by.cfg.Instances, by.cfg.Processes, by.cfg.Mode)
	}
	var q int64
	var want []unit
	var wantN, wantFirst int64
	rf := by.cfg.RestoreFrom
	switch {
	case first && len(s.t.gens1) == 0:
		if g.Number != 1 || len(g.Restored) != 0 || g.RestoredCheckpoint != 0 || g.FirstCheckpoint != 1 {
			s.failf("the first generation's record: number %d, restores checkpoint %d %v, first checkpoint %d", g.Number, g.RestoredCheckpoint, g.Restored, g.FirstCheckpoint)
		}
		s.logf("p%d: started generation %d (first start)", by.id, g.Number)
		return
	case first:
		// The upgrade from the first layout.
		var ok bool
		if _, q, ok = s.starterListing(l, catPrefix+objname.CatalogDir); !ok {
			s.failf("invariant 6 (the upgrade fences the first layout): generation %d, the upgrade, started by p%d, which never listed the first layout", g.Number, by.id)
			return
		}
		fence, units, n, maxN, err := s.t.upgradePoint(q)
		if err != nil {
			s.failf("invariant 6 (the upgrade fences the first layout): generation %d, the upgrade, started by p%d after a listing at seq %d: %v", g.Number, by.id, q, err)
			return
		}
		if g.Number != fence {
			s.failf("invariant 6 (the upgrade fences the first layout): the upgrade's generation is %d; the first layout's fence is generation %d", g.Number, fence)
		}
		if fs := s.t.fences1[fence]; fs == 0 || fs > q {
			s.failf("invariant 6 (the upgrade fences the first layout): the upgrade's listing (seq %d) was not after its fence (seq %d)", q, fs)
		}
		s.fromOld = fence - 1
		want, wantN, wantFirst = units, n, max(maxN, n)+1
		if rf != 0 {
			s.logf("p%d: the upgrade with restore-from %d: not checked against the first layout's retention", by.id, rf)
			want, wantN = unitsOf(g.Restored), g.RestoredCheckpoint
		}
	default:
		prev := s.t.gen2(g.Number - 1)
		if prev == nil {
			s.failf("generation %d started with no record of generation %d", g.Number, g.Number-1)
			return
		}
		var ok bool
		if _, q, ok = s.starterListing(l, objname.CatalogV2GenerationDir(catPrefix, prev.Number)); !ok {
			s.failf("invariant 1 (restores what is complete): generation %d started by p%d, which never listed generation %d's directory", g.Number, by.id, prev.Number)
			return
		}
		if fs := s.t.fenceSeq(prev.Number); fs == 0 || fs > q {
			s.failf("invariant 2 (no rollback): generation %d's starter p%d listed generation %d's directory at seq %d, before its fence (seq %d)", g.Number, by.id, prev.Number, q, fs)
		}
		units, n, ok := s.t.restorePoint(prev, q, rf, s.retain)
		if !ok {
			s.failf("invariant 1 (restores what is complete): generation %d started with restore-from %d, not retained in generation %d as of its starter's listing", g.Number, rf, prev.Number)
			return
		}
		want, wantN = units, n
		wantFirst = max(s.t.maxCheckpointAt(prev.Number, q), prev.FirstCheckpoint-1, prev.RestoredCheckpoint) + 1
	}
	got := unitsOf(g.Restored)
	whole := false // the record restores a complete checkpoint of the aligned mode: every key group
	if first {
		prev := s.t.gen1(s.fromOld)
		whole = prev != nil && prev.Mode == catalogv1.Aligned && len(got) > 0 && !slices.ContainsFunc(got, func(u unit) bool {
			return objname.ParseCatalog(catPrefix, u.object).Generation != prev.Number
		})
	} else if prev := s.t.gen2(g.Number - 1); prev.Mode == catalog.Aligned && len(got) > 0 {
		whole = objname.ParseCatalog(catPrefix, got[0].object).Generation == prev.Number && objname.ParseCatalog(catPrefix, got[0].object).Kind == objname.CatalogCommit
	}
	s.logf("p%d: started generation %d (%s) after a listing at seq %d: restores checkpoint %d %s, first checkpoint %d%s", by.id, g.Number, catConfig{g.Mode, g.Instances(), g.Processes},
		q, g.RestoredCheckpoint, unitNames(got), g.FirstCheckpoint, map[bool]string{true: fmt.Sprintf(" (restore-from %d)", rf)}[rf != 0])
	switch {
	case rf != 0:
		s.stats.RestoredFrom++
		s.resetGen = g.Number
	case s.stats.Damaged == 0:
		// (A damaged or removed commit may undo a complete checkpoint.)
		s.checkRollback(g, got)
	}
	if g.Mode == catalog.Independent && !first {
		// (The upgrade records the first layout's restored checkpoint,
		// whatever the new generation's mode.)
		wantN = 0
	}
	if !sameUnits(want, got) || wantN != g.RestoredCheckpoint {
		s.failf("invariant 1 (restores what is complete): generation %d restores checkpoint %d %s; as of its starter p%d's listing (seq %d), the restore point was checkpoint %d %s",
			g.Number, g.RestoredCheckpoint, unitNames(got), by.id, q, wantN, unitNames(want))
	}
	if g.FirstCheckpoint != wantFirst {
		s.failf("generation %d's first checkpoint is %d; as of its starter's listing, it is %d", g.Number, g.FirstCheckpoint, wantFirst)
	}
	s.checkUnits(g, got, whole, q, l.created)
}

// checkUnits checks the parts a new generation restores: each stored
// before its starter's listing at seq q (never one written after; for a
// commit stored after its generation's fence, counted), stored now with
// the objects it names, and no two of one key group (every key group in
// the aligned mode, when the record restores a complete checkpoint:
// whole).
func (s *catSchedule) checkUnits(g *catalog.Generation, units []unit, whole bool, q, now int64) {
	held := map[int]string{}
	for _, u := range units {
		f := s.t.first(u.object)
		switch {
		case f == nil:
			s.failf("invariant 1 (restores what is complete): generation %d restores %s, never stored", g.Number, shortName(u.object))
			continue
		case f.created > q:
			s.failf("invariant 4 (nothing written after the fence's listing is restored): generation %d restores %s, stored at seq %d by %s after its starter's listing (seq %d)",
				g.Number, shortName(u.object), f.created, procName(f.createdBy), q)
		case f.class == classCommit2 && s.t.fenceSeq(f.ref.Generation) != 0 && f.created > s.t.fenceSeq(f.ref.Generation):
			s.stats.LateRestored++
			s.logf("generation %d restores %s, stored by %s after generation %d's fence and before its starter's listing", g.Number, shortName(u.object), procName(f.createdBy), f.ref.Generation)
		}
		if _, _, why := s.t.partOf(u); why != "" {
			s.failf("invariant 1 (restores what is complete): generation %d restores %s for key groups %v: %s", g.Number, shortName(u.object), u.kgs, why)
			continue
		}
		s.checkStoredUnit(u, now, fmt.Sprintf("restored by generation %d (its record just stored)", g.Number))
		for kg := u.kgs.Start; kg <= u.kgs.End; kg++ {
			if o, ok := held[kg]; ok {
				s.failf("invariant 1 (no two parts of one key group): generation %d restores key group %d from %s and from %s", g.Number, kg, shortName(o), shortName(u.object))
				return
			}
			held[kg] = u.object
		}
	}
	if whole {
		for kg := range g.MaxParallelism {
			if _, ok := held[kg]; !ok {
				s.failf("invariant 1 (restores what is complete): generation %d restores key group %d from no part (restored: %s)", g.Number, kg, unitNames(units))
				return
			}
		}
	}
}

// checkRollback checks that a generation restores, for each key group, a
// checkpoint no older than one a member confirmed before.
func (s *catSchedule) checkRollback(g *catalog.Generation, units []unit) {
	for kg := range g.MaxParallelism {
		var got int64
		var from string
		for _, u := range units {
			if u.kgs.Contains(kg) {
				_, got, _ = s.t.partOf(u)
				from = shortName(u.object)
			}
		}
		floor, by := s.t.floorOf(kg, g.Number, s.resetGen, s.fromOld)
		if got < floor {
			layout := ""
			if by.v1 {
				layout = " of the first layout"
			}
			msg := fmt.Sprintf("invariant 2 (no rollback): generation %d restores key group %d from checkpoint %d (%s); p%d, a member of generation %d%s, confirmed checkpoint %d (seq %d)",
				g.Number, kg, got, from, by.proc, by.gen, layout, by.n, by.seq)
			if s.fallbackUnit(g, from) || from == "" && slices.ContainsFunc(units, func(u unit) bool { return s.fallbackUnit(g, shortName(u.object)) }) {
				s.defect(defectIndependentFallback, "%s: in the independent mode, the process's key groups fell back to what generation %d restored, for a process that committed nothing", msg, g.Number-1)
				// The generation rolled back: what was confirmed before it
				// no longer bounds what comes after, as after RestoreFrom.
				s.resetGen = g.Number
			} else {
				s.failf("%s", msg)
			}
			return
		}
	}
}

// fallbackUnit reports whether the object a generation restores a key
// group from is one that the generation before it restored, in the
// independent mode: the documented choice for a process that committed
// nothing, and for every process whose instances those parts also cover.
func (s *catSchedule) fallbackUnit(g *catalog.Generation, object string) bool {
	if prev := s.t.gen2(g.Number - 1); prev != nil {
		return prev.Mode == catalog.Independent && slices.ContainsFunc(prev.Restored, func(r catalog.Restored) bool { return shortName(r.Object) == object })
	}
	prev := s.t.gen1(s.fromOld)
	return prev != nil && prev.Mode == catalogv1.Independent && slices.ContainsFunc(prev.Restored, func(name string) bool { return shortName(name) == object })
}

// checkRecord1 checks a generation record of the first layout when it is
// stored: after the upgrade's fence, no process of the first layout
// starts a generation.
func (s *catSchedule) checkRecord1(l *life) {
	if l.damaged || l.created != s.t.first(l.name).created {
		return
	}
	if catalogv1.IsFence(catPrefix, l.gen1) {
		s.logf("%s: the first layout's fence, generation %d, stored by %s", shortName(l.name), l.gen1.Number, procName(l.createdBy))
		return
	}
	s.logf("%s: the first layout's generation %d stored by %s", shortName(l.name), l.gen1.Number, procName(l.createdBy))
	for f, seq := range s.t.fences1 {
		if f < l.gen1.Number && seq < l.created {
			s.failf("invariant 6 (the upgrade fences the first layout): %s started generation %d of the first layout after the upgrade's fence, generation %d",
				procName(l.createdBy), l.gen1.Number, f)
		}
	}
	if len(s.t.gens2) > 0 {
		s.failf("invariant 6 (the upgrade fences the first layout): %s started generation %d of the first layout after the second layout's generation %d",
			procName(l.createdBy), l.gen1.Number, s.t.gens2[0])
	}
}

// checkCommitStored records when a commit completes its checkpoint, and
// checks that a checkpoint of a generation with no successor never
// completes with an object that is gone (the stalled committer).
func (s *catSchedule) checkCommitStored(l *life) {
	if l.damaged || l.commit == nil {
		return
	}
	g := s.t.gen2(l.ref.Generation)
	if g == nil {
		s.failf("commit %s stored in generation %d, of which no record was stored", shortName(l.name), l.ref.Generation)
		return
	}
	if l.ref.Process >= g.Processes {
		s.failf("commit %s stored for process %d of a generation of %d processes", shortName(l.name), l.ref.Process, g.Processes)
		return
	}
	live := !s.t.successorAt(g.Number, l.created)
	if g.Mode == catalog.Independent {
		if live {
			s.checkStoredUnits(l.name, l.created, fmt.Sprintf("committed by %s in the independent mode", procName(l.createdBy)))
		}
		return
	}
	k := ckKey{g.Number, l.ref.Checkpoint}
	if s.t.completed[k] != 0 {
		return
	}
	var names []string
	for p := range g.Processes {
		name := objname.CatalogV2CommitName(catPrefix, g.Number, l.ref.Checkpoint, p)
		if s.t.at(name, l.created) == nil {
			return
		}
		names = append(names, name)
	}
	s.t.completed[k] = l.created
	s.stats.Completed++
	s.logf("checkpoint %d of generation %d complete (commit of p%d)", k.n, k.gen, l.createdBy)
	if !live {
		return
	}
	for _, name := range names {
		s.checkStoredUnits(name, l.created, fmt.Sprintf("a commit of checkpoint %d of generation %d, complete at seq %d", k.n, k.gen, l.created))
	}
}

// checkStoredUnits checks that every data object a commit's parts name
// is stored at seq q.
func (s *catSchedule) checkStoredUnits(name string, q int64, why string) {
	if s.t.firstDamage != 0 {
		return
	}
	l := s.t.at(name, q)
	if l == nil || l.commit == nil {
		return
	}
	for _, part := range l.commit.Parts {
		s.checkObjects(part.Objects, q, name, why)
	}
}

// checkStoredUnit checks that the object of a restored part is stored at
// seq q, and every data object the part names.
func (s *catSchedule) checkStoredUnit(u unit, q int64, why string) {
	if s.t.firstDamage != 0 {
		return
	}
	if s.t.at(u.object, q) == nil {
		s.missing(u.object, "invariant 3 (no restored part is deleted): %s (%s) is missing: %s", shortName(u.object), why, s.t.fate(u.object))
		return
	}
	if p, _, _ := s.t.partOf(u); p != nil {
		s.checkObjects(p.Objects, q, u.object, why)
	}
}

// missing reports an object the rule keeps that is gone: a known defect
// when the member that deleted it is a fenced generation's leader that
// dropped commits by a decision no read of the fence followed, or a member
// of a fenced generation whose fence was deleted before; a failure
// otherwise.
func (s *catSchedule) missing(name, format string, args ...any) {
	switch {
	case s.droppedByFencedLeader(name):
		s.defect(defectUnfencedDrop, format, args...)
	case s.deletedByZombie(name):
		s.defect(defectFenceCollected, format, args...)
	default:
		s.failf(format, args...)
	}
}

// deletedByZombie reports whether an object was deleted by a member of a
// generation whose fence had been deleted before.
func (s *catSchedule) deletedByZombie(name string) bool {
	ls := s.t.hist[name]
	if len(ls) == 0 {
		return false
	}
	l := ls[len(ls)-1]
	if l.deleted == 0 || l.deletedBy < 0 {
		return false
	}
	g := s.procs[l.deletedBy].generation()
	f := s.t.first(objname.CatalogV2FenceName(catPrefix, g))
	return g != 0 && !s.procs[l.deletedBy].old && f != nil && f.deleted != 0 && f.deleted < l.deleted
}

// droppedByFencedLeader reports whether a commit was deleted by a member
// of its own generation after the generation's successor's record was
// stored: the leader's drop by a decision no read of the fence followed.
func (s *catSchedule) droppedByFencedLeader(name string) bool {
	l := s.t.first(name)
	if l == nil || l.class != classCommit2 || l.deleted == 0 || l.deletedBy < 0 {
		return false
	}
	next := s.t.first(objname.CatalogV2GenerationName(catPrefix, l.ref.Generation+1))
	by := s.procs[l.deletedBy]
	return next != nil && next.created < l.deleted && by.m != nil && by.m.Generation().Number == l.ref.Generation
}

// checkObjects checks that the data objects of, named by the commit or
// part of, are stored at seq q.
func (s *catSchedule) checkObjects(objects []string, q int64, of, why string) {
	if s.t.firstDamage != 0 {
		return
	}
	for _, o := range objects {
		switch ol := s.t.at(o, q); {
		case ol == nil:
			s.missing(o, "invariant 3 (no complete checkpoint or restored part names a deleted object): data object %s of %s (%s) is missing: %s", shortName(o), shortName(of), why, s.t.fate(o))
		case !bytes.Equal(ol.data, dataContent(o)):
			s.failf("data object %s of %s holds %q", shortName(o), shortName(of), ol.data)
		}
	}
}

// damagedGen reports whether the schedule damaged the object name, or,
// for a commit or a first-layout part, an object of its generation: a
// damaged or removed commit or part changes what the rule's listings show
// complete and latest, and the rule keeps by its listings, not by the
// truth.
func (s *catSchedule) damagedGen(name string) bool {
	if s.t.damaged[name] {
		return true
	}
	g := objname.ParseCatalog(catPrefix, name)
	if g.Kind != objname.CatalogCommit && g.Kind != objname.CatalogPart {
		return false
	}
	for d := range s.t.damaged {
		if ref := objname.ParseCatalog(catPrefix, d); ref.Version == g.Version && ref.Generation == g.Generation {
			return true
		}
	}
	return false
}

// checkNeeded checks that everything the deletion rule must keep is
// stored (docs/CATALOG.md, "Deletion rule").
func (s *catSchedule) checkNeeded(when string) {
	if s.t.firstDamage != 0 {
		return
	}
	names, why := s.t.neededNow(s.retain)
	g := s.t.gen2(s.t.live())
	restored := map[string][]unit{}
	if g != nil {
		for _, u := range unitsOf(g.Restored) {
			restored[u.object] = append(restored[u.object], u)
		}
	}
	for _, name := range names {
		if us, ok := restored[name]; ok && objname.ParseCatalog(catPrefix, name).Generation != g.Number {
			for _, u := range us {
				s.checkStoredUnit(u, s.t.seq, why[name]+", "+when)
			}
			continue
		}
		if s.t.now(name) == nil {
			s.missing(name, "invariant 3 (no deletion of what the rule keeps): %s (%s, %s) is missing: %s", shortName(name), why[name], when, s.t.fate(name))
			continue
		}
		s.checkStoredUnits(name, s.t.seq, why[name]+", "+when)
	}
}

// checkMember checks a member a Join or Rejoin returned, and what it
// restores, and sets the process's state from it.
func (s *catSchedule) checkMember(p *proc, m *catalog.Member, what string) {
	s.stats.Restores++
	g := m.Generation()
	if fs := s.t.fenceSeq(g.Number); fs != 0 {
		if fr, ok := p.fences[g.Number]; !ok || fr.seq >= fs {
			s.fencedMember(p, g.Number, fr.seq, "invariant 4 (a fenced generation is not joined): p%d joined generation %d, whose fence was stored at seq %d, before its latest read of the fence (%s): %s",
				p.id, g.Number, fs, fenceReadString(fr, ok), s.t.fate(objname.CatalogV2FenceName(catPrefix, g.Number)))
			return
		}
	}
	key := slotKey{g.Number, m.Process()}
	if h := s.holders[key]; h != nil && h != p {
		if s.t.fenceSeq(g.Number) == 0 {
			s.failf("p%d and p%d both hold process %d of generation %d, which is not fenced", h.id, p.id, key.slot, key.gen)
		} else {
			s.logf("p%d: holds process %d of the fenced generation %d, as p%d did (%s)", p.id, key.slot, key.gen, h.id,
				s.t.fate(objname.CatalogV2ClaimName(catPrefix, key.gen, key.slot)))
		}
	}
	s.holders[key] = p
	rec := s.t.first(objname.CatalogV2GenerationName(catPrefix, g.Number))
	if rec == nil || rec.gen == nil {
		s.failf("p%d: %s: member of generation %d, of which no record was stored", p.id, what, g.Number)
		return
	}
	got, _ := json.Marshal(g)
	want, _ := json.Marshal(rec.gen)
	if !bytes.Equal(got, want) {
		s.failf("invariant 5 (no wrong restore): p%d: %s: generation %s, its record holds %s", p.id, what, got, want)
	}
	lo, hi := catalog.InstancesOf(p.cfg.Process, p.cfg.Processes, p.cfg.Instances)
	if m.Process() != p.cfg.Process || g.Instances() != p.cfg.Instances || g.Processes != p.cfg.Processes || g.Mode != p.cfg.Mode ||
		!slices.Equal(m.Instances(), seq(lo, hi)) {
		s.failf("p%d: %s: process %d of %d instances in %d processes (%s), instances %v; configured as process %d of %s", p.id, what,
			m.Process(), g.Instances(), g.Processes, g.Mode, m.Instances(), p.cfg.Process, p.conf)
		return
	}
	units := unitsOf(rec.gen.Restored)
	p.inst = map[int]*instState{}
	var names []string
	for _, i := range m.Instances() {
		own := g.KeyGroups[i]
		if own != catalog.RangeOf(i, g.Instances(), s.maxPar) {
			s.failf("p%d: instance %d has key groups %v", p.id, i, own)
		}
		st := &instState{kgs: own, values: map[int]uint64{}}
		p.inst[i] = st
		var wantUnits []unit
		for _, u := range units {
			if overlap(u.kgs, own) {
				wantUnits = append(wantUnits, u)
			}
		}
		slices.SortFunc(wantUnits, func(a, b unit) int { return a.kgs.Start - b.kgs.Start })
		parts := m.Restore(i)
		var gotUnits []unit
		for _, part := range parts {
			gotUnits = append(gotUnits, unit{part.Name, part.KeyGroups})
		}
		if !slices.Equal(gotUnits, wantUnits) {
			s.failf("invariant 5 (no wrong restore): p%d: %s: instance %d restores %s; its generation %d restores %s for its key groups", p.id, what, i,
				unitNames(gotUnits), g.Number, unitNames(wantUnits))
			continue
		}
		for _, part := range parts {
			names = append(names, part.Name)
			s.checkStoredUnit(unit{part.Name, part.KeyGroups}, s.t.seq, fmt.Sprintf("restored by p%d, instance %d of generation %d", p.id, i, g.Number))
			stored, n, why := s.t.partOf(unit{part.Name, part.KeyGroups})
			if stored == nil {
				s.failf("invariant 5 (no wrong restore): p%d restores %s: %s", p.id, shortName(part.Name), why)
				continue
			}
			if part.Checkpoint != n || !bytes.Equal(part.State, stored.State) || !slices.Equal(part.Objects, stored.Objects) || !maps.Equal(part.Metadata, stored.Metadata) {
				s.failf("invariant 5 (no wrong restore): p%d restores %s of checkpoint %d, state %q, objects %v; stored: checkpoint %d, state %q, objects %v",
					p.id, shortName(part.Name), part.Checkpoint, part.State, part.Objects, n, stored.State, stored.Objects)
				continue
			}
			if !s.matchesIntent(part.Name, stored) {
				s.failf("invariant 5 (no wrong restore): p%d restores %s for key groups %v with state %q and objects %v, not the committed state and objects",
					p.id, shortName(part.Name), part.KeyGroups, stored.State, stored.Objects)
				continue
			}
			vals, err := decodeValues(stored.State)
			if err != nil {
				s.failf("invariant 5 (no wrong restore): %s: %v", shortName(part.Name), err)
				continue
			}
			for kg := max(own.Start, part.KeyGroups.Start); kg <= min(own.End, part.KeyGroups.End); kg++ {
				if _, dup := st.values[kg]; dup {
					s.failf("invariant 1 (no two parts of one key group): p%d restores key group %d twice", p.id, kg)
				}
				st.values[kg] = vals[kg]
			}
			for _, o := range stored.Objects {
				if !slices.Contains(st.objects, o) {
					st.objects = append(st.objects, o)
				}
			}
		}
	}
	s.stats.RestoredParts += len(names)
	s.logf("p%d: %s: process %d of generation %d, restores %s", p.id, what, m.Process(), g.Number, shortNames(names))
}

// matchesIntent reports whether a stored part is what its committer
// committed.
func (s *catSchedule) matchesIntent(name string, stored *partRec) bool {
	in := s.intents[name]
	if in == nil {
		return false
	}
	if in.parts == nil {
		return bytes.Equal(stored.State, in.state) && slices.Equal(stored.Objects, in.object)
	}
	for _, is := range in.parts {
		if is.Instance == stored.Instance {
			return bytes.Equal(stored.State, is.State) && slices.Equal(stored.Objects, is.Objects) && maps.Equal(stored.Metadata, is.Metadata)
		}
	}
	return false
}

func seq(lo, hi int) []int {
	var out []int
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

// checkStored checks the commit a successful Commit stored.
func (s *catSchedule) checkStored(p *proc, in *intent) {
	l := s.t.now(in.name)
	switch {
	case s.t.damaged[in.name]:
		return
	case l == nil:
		s.failf("p%d: Commit of %s succeeded, yet no such commit is stored: %s", p.id, shortName(in.name), s.t.fate(in.name))
		return
	case l.commit == nil:
		return
	case l.createdBy != p.id:
		s.failf("p%d: Commit of %s succeeded, yet p%d stored the commit", p.id, shortName(in.name), l.createdBy)
		return
	}
	c := l.commit
	wantHold := in.n + 1
	if in.hold != 0 {
		wantHold = in.hold
	}
	if c.HoldFrom != wantHold || len(c.Parts) != len(in.parts) {
		s.failf("p%d: Commit of %s succeeded, yet the commit holds %d parts and holds from %d, not %d and %d", p.id, shortName(in.name), len(c.Parts), c.HoldFrom, len(in.parts), wantHold)
		return
	}
	for i, part := range c.Parts {
		want := in.parts[i]
		if part.Instance != want.Instance || !bytes.Equal(part.State, want.State) || !slices.Equal(part.Objects, want.Objects) || !maps.Equal(part.Metadata, want.Metadata) ||
			part.KeyGroups != p.m.KeyGroups(want.Instance) {
			s.failf("p%d: Commit of %s succeeded, yet instance %d's part holds state %q and objects %v, not %q and %v", p.id, shortName(in.name), part.Instance,
				part.State, part.Objects, want.State, want.Objects)
		}
	}
}

// checkStatus checks a member's status and records what it confirms: in
// the aligned mode, a complete checkpoint (no later than the member's
// commits), never going back; in the independent mode, a checkpoint the
// process committed. The member read its generation's fence and found
// none: the fence was not stored before that read.
func (s *catSchedule) checkStatus(p *proc, complete int64, what string) {
	s.settle()
	g := p.m.Generation()
	if p.sawFence {
		s.failf("p%d: %s of a member of generation %d succeeded, though a read in it found the generation's fence", p.id, what, g.Number)
	}
	if fs := s.t.fenceSeq(g.Number); fs != 0 {
		if fr, ok := p.fences[g.Number]; !ok || fr.seq >= fs {
			s.fencedMember(p, g.Number, fr.seq, "invariant 4 (a fenced member confirms nothing): p%d: %s of a member of generation %d said checkpoint %d is complete, though the fence was stored at seq %d, before its latest read of the fence (%s): %s",
				p.id, what, g.Number, complete, fs, fenceReadString(fr, ok), s.t.fate(objname.CatalogV2FenceName(catPrefix, g.Number)))
			return
		}
	}
	switch {
	case complete == 0:
	case g.Mode == catalog.Aligned && s.t.completed[ckKey{g.Number, complete}] == 0 && !s.damagedGen(objname.CatalogV2CommitName(catPrefix, g.Number, complete, 0)):
		s.failf("p%d: %s says checkpoint %d of generation %d is complete; it is not (complete: %v)", p.id, what, complete, g.Number, s.t.everComplete(g.Number))
	case g.Mode == catalog.Independent && s.t.first(objname.CatalogV2CommitName(catPrefix, g.Number, complete, p.cfg.Process)) == nil:
		s.failf("p%d: %s says checkpoint %d is complete in the independent mode; the process has no commit of it", p.id, what, complete)
	case complete > p.last:
		s.failf("p%d: %s says checkpoint %d is complete, after the process's latest commit, %d", p.id, what, complete, p.last)
	}
	if complete < p.confirmed {
		s.failf("p%d: %s says checkpoint %d is complete, after it said %d", p.id, what, complete, p.confirmed)
	}
	if complete <= p.confirmed {
		return
	}
	p.confirmed = complete
	s.stats.Confirmed++
	c := confirmation{gen: g.Number, n: complete, proc: p.id}
	if g.Mode == catalog.Aligned {
		c.kgs = slices.Clone(g.KeyGroups)
	} else {
		for _, i := range p.m.Instances() {
			c.kgs = append(c.kgs, g.KeyGroups[i])
		}
	}
	s.t.confirm(c)
	s.logf("p%d: confirms up to checkpoint %d of generation %d", p.id, complete, g.Number)
}

func fenceReadString(fr fenceRead, ok bool) string {
	if !ok {
		return "none found it"
	}
	return fmt.Sprintf("at seq %d, found %v", fr.seq, fr.found)
}

// fencedMember reports a member that went on in a fenced generation: the
// known defect when the fence was deleted before the member read it, a
// failure otherwise.
func (s *catSchedule) fencedMember(p *proc, g int64, read int64, format string, args ...any) {
	if l := s.t.first(objname.CatalogV2FenceName(catPrefix, g)); l != nil && l.deleted != 0 && l.deleted <= read && l.deletedBy >= 0 {
		s.defect(defectFenceCollected, format, args...)
		return
	}
	s.failf(format, args...)
}

// checkStatus1 checks a first-layout member's status: the member's
// listing came before the upgrade's fence; and records what it confirms.
func (s *catSchedule) checkStatus1(p *proc, complete int64, what string) {
	g := p.m1.Generation()
	q, ok := p.listings[catPrefix+objname.CatalogDir]
	for f, fs := range s.t.fences1 {
		if f > g.Number && (!ok || q >= fs) {
			s.failf("invariant 6 (the upgrade fences the first layout): p%d, a member of the first layout's generation %d: %s said checkpoint %d is complete after a listing at seq %d, after the fence (generation %d, seq %d)",
				p.id, g.Number, what, complete, q, f, fs)
		}
	}
	if complete <= p.confirmed {
		return
	}
	p.confirmed = complete
	c := confirmation{v1: true, gen: g.Number, n: complete, proc: p.id}
	if g.Mode == catalogv1.Aligned {
		c.kgs = slices.Clone(g.KeyGroups)
	} else {
		c.kgs = []dstl.KeyGroupRange{g.KeyGroups[p.cfg1.Index]}
	}
	s.t.confirm(c)
}

// checkMember1 checks a member of the first layout that a Join or Rejoin
// returned: not of the upgrade's fence, nor after it; what it restores is
// what was committed.
func (s *catSchedule) checkMember1(p *proc, m *catalogv1.Member, what string) {
	g := m.Generation()
	if catalogv1.IsFence(catPrefix, g) {
		s.failf("invariant 6 (the upgrade fences the first layout): p%d joined the fence, generation %d", p.id, g.Number)
		return
	}
	q, ok := p.listings[catPrefix+objname.CatalogDir]
	for f, fs := range s.t.fences1 {
		if f > g.Number && (!ok || q >= fs) {
			s.failf("invariant 6 (the upgrade fences the first layout): p%d joined the first layout's generation %d after a listing at seq %d, after the fence (generation %d, seq %d)",
				p.id, g.Number, q, f, fs)
		}
	}
	own := g.KeyGroups[p.cfg1.Index]
	st := &instState{kgs: own, values: map[int]uint64{}, uploaded: map[string]time.Time{}}
	p.inst = map[int]*instState{p.cfg1.Index: st}
	var names []string
	for _, part := range m.Restore() {
		names = append(names, part.Name)
		u := unit{part.Name, part.KeyGroups}
		s.checkStoredUnit(u, s.t.seq, fmt.Sprintf("restored by p%d, of the first layout's generation %d", p.id, g.Number))
		stored, _, why := s.t.partOf(u)
		if stored == nil || !s.matchesIntent(part.Name, stored) || !bytes.Equal(part.State, stored.State) {
			s.failf("invariant 5 (no wrong restore): p%d of the first layout restores %s with state %q (%s)", p.id, shortName(part.Name), part.State, why)
			continue
		}
		vals, _ := decodeValues(stored.State)
		for kg := max(own.Start, part.KeyGroups.Start); kg <= min(own.End, part.KeyGroups.End); kg++ {
			st.values[kg] = vals[kg]
		}
		st.objects = append(st.objects, stored.Objects...)
	}
	s.stats.Restores++
	s.logf("p%d: first layout: %s: instance %d of generation %d, restores %s", p.id, what, p.cfg1.Index, g.Number, shortNames(names))
}

// checkFenced checks an ErrFenced: a read or listing of the member's
// operation found its generation's fence.
func (s *catSchedule) checkFenced(p *proc, what string) {
	if !p.sawFence {
		s.failf("p%d: %s of a member of generation %d failed with ErrFenced, though no read of its operation found the fence", p.id, what, p.generation())
	}
}

// checkReplaced checks an ErrReplaced of a commit: the commit stored
// under its name is another process's, or other parts.
func (s *catSchedule) checkReplaced(p *proc, in *intent, err error) {
	l := s.t.now(in.name)
	switch {
	case l == nil:
		s.failf("p%d: Commit of %s failed with ErrReplaced, though no such commit is stored: %v", p.id, shortName(in.name), err)
	case l.createdBy == p.id && l.commit != nil && s.matchesIntentCommit(l.commit, in):
		s.failf("p%d: Commit of %s failed with ErrReplaced, though the commit is its own, stored at step %d with the same parts: %v", p.id, shortName(in.name), l.createdTick, err)
	}
}

func (s *catSchedule) matchesIntentCommit(c *commitRec, in *intent) bool {
	if len(c.Parts) != len(in.parts) {
		return false
	}
	for i := range c.Parts {
		if !bytes.Equal(c.Parts[i].State, in.parts[i].State) || !slices.Equal(c.Parts[i].Objects, in.parts[i].Objects) {
			return false
		}
	}
	return true
}

// checkErrorCause checks an error that says an object is missing or
// damaged: it must name an object the schedule damaged, or something the
// deletion rule may delete; checkNeeded finds the rest.
func (s *catSchedule) checkErrorCause(p *proc, err error, what string) {
	if causeOf(err) == "damaged" {
		for name := range s.t.damaged {
			if strings.Contains(err.Error(), name) {
				return
			}
		}
		s.failf("invariant 5 (a damaged object is an error naming it): p%d: %s failed with ErrDamaged naming no object the schedule damaged: %v", p.id, what, err)
		return
	}
	s.checkNeeded(fmt.Sprintf("after p%d's %s met a missing object: %v", p.id, what, err))
}

// finalJoinFailed judges a fresh process's join that failed at the end,
// with faults off: only an object the schedule damaged may stop it, and
// the error names it.
func (s *catSchedule) finalJoinFailed(p *proc) {
	err := p.lastErr
	if err == nil {
		s.failf("final: p%d did not join, with no error", p.id)
		return
	}
	for name := range s.t.damaged {
		if strings.Contains(err.Error(), name) {
			s.logf("final: p%d cannot join: %v", p.id, err)
			return
		}
	}
	if c := causeOf(err); s.stats.Damaged > 0 && c == "not-found" {
		// A removed commit can make the rule need again what a
		// generation restored, after it deleted it.
		s.logf("final: p%d cannot join after the schedule damaged the catalog: %v", p.id, err)
		return
	}
	s.failf("invariant 3 (no deletion of what the rule keeps): final: p%d could not join, with faults off: %v", p.id, err)
}

// checkLeftovers checks what is left after the final collection, past the
// grace, with faults off: every data object the plan keeps, or holds; of
// the catalog, the live generation's record, claims and kept commits, the
// commits it restores while it needs them, and the first layout's latest
// record.
func (s *catSchedule) checkLeftovers(pl *catalog.Plan) {
	live := s.t.live()
	kept := map[string]bool{}
	for _, name := range pl.Commits {
		kept[name] = true
	}
	latest1 := s.t.latestGen1At(s.t.seq)
	for _, name := range s.cl.st.names() {
		class, ref := classify(name)
		l := s.t.now(name)
		switch {
		case l != nil && l.damaged:
		case class == classData:
			s.stats.FinalObjects++
			if !pl.Keep[name] && (l == nil || l.madeFor < pl.HoldFrom || l.madeFor == 0) {
				s.failf("final: data object %s (made for checkpoint %d) left after the collection: neither kept nor held from %d by the plan", shortName(name), objname.Parse(catPrefix, name).Checkpoint, pl.HoldFrom)
			}
		case class == classCommit2:
			s.stats.FinalCommits++
			if !kept[name] {
				s.failf("final: commit %s left after the collection, not kept by the plan", shortName(name))
			}
		case class == classGen2 || class == classClaim2 || class == classFence2:
			if ref.Generation < live {
				s.failf("final: %s of the fenced generation %d left after the collection", shortName(name), ref.Generation)
			}
		case class == classPart1 || class == classClaim1:
			if !kept[name] {
				s.failf("final: %s of the first layout left after the collection", shortName(name))
			}
		case class == classGen1:
			if ref.Generation != latest1 {
				s.failf("final: %s of the first layout left after the collection", shortName(name))
			}
		case class == classProbe:
			s.failf("final: a clock probe left, with faults off")
		}
	}
}

func unitNames(us []unit) string {
	var out []string
	for _, u := range us {
		out = append(out, fmt.Sprintf("%s%v", shortName(u.object), u.kgs))
	}
	return "[" + strings.Join(out, " ") + "]"
}
