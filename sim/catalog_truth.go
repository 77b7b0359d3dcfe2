package sim

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/internal/catalogv1"
)

// The catalog's objects are framed as packages catalog and catalogv1
// write them: magic, version, kind, the JSON of the record, and the
// CRC32C of all that. The simulation decodes what was stored, strictly,
// to know the truth independently of what the members report.
const recordMagic = "DSTC"

var recordCRC = crc32.MakeTable(crc32.Castagnoli)

// decodeRecord decodes a catalog record of version and kind into v,
// refusing unknown fields and trailing data.
func decodeRecord(data []byte, version, kind byte, v any) error {
	head := len(recordMagic) + 2
	if len(data) < head+4 || string(data[:len(recordMagic)]) != recordMagic || data[len(recordMagic)] != version || data[len(recordMagic)+1] != kind {
		return fmt.Errorf("not a catalog record of version %d, kind %q", version, kind)
	}
	end := len(data) - 4
	if crc32.Checksum(data[:end], recordCRC) != binary.LittleEndian.Uint32(data[end:]) {
		return fmt.Errorf("checksum mismatch")
	}
	dec := json.NewDecoder(bytes.NewReader(data[head:end]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the record")
	}
	return nil
}

// encodeRecord frames v as a catalog record of version and kind (for the
// tests of the checks, which forge records).
func encodeRecord(version, kind byte, v any) []byte {
	body, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	b := append([]byte(recordMagic), version, kind)
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, recordCRC))
}

// commitRec is a process's commit of a checkpoint, as the second layout
// stores it (docs/CATALOG.md, "Objects").
type commitRec struct {
	Generation int64     `json:"generation"`
	Checkpoint int64     `json:"checkpoint"`
	Process    int       `json:"process"`
	Parts      []partRec `json:"parts"`
	HoldFrom   int64     `json:"hold_from"`
	Complete   int64     `json:"complete,omitempty"`
	Created    time.Time `json:"created"`
}

// partRec is one instance's part in a commit.
type partRec struct {
	Instance  int                `json:"instance"`
	KeyGroups dstl.KeyGroupRange `json:"key_groups"`
	State     []byte             `json:"state"`
	Metadata  map[string]string  `json:"metadata,omitempty"`
	Objects   []string           `json:"objects"`
}

// fenceRec is a generation's fence.
type fenceRec struct {
	Next    int64     `json:"next"`
	Owner   string    `json:"owner"`
	Created time.Time `json:"created"`
}

// objClass says what an object under the job's prefix is.
type objClass uint8

const (
	classOther   objClass = iota
	classGen2             // a generation record of the second layout
	classFence2           // a fence
	classClaim2           // a claim of the second layout
	classCommit2          // a commit
	classGen1             // a generation record of the first layout
	classClaim1           // a claim of the first layout
	classPart1            // a part of the first layout
	classData             // a log object
	classProbe            // a collection's clock probe
)

func classify(name string) (objClass, objname.CatalogRef) {
	ref := objname.ParseCatalog(catPrefix, name)
	switch {
	case ref.Kind == objname.CatalogGeneration && ref.Version == 2:
		return classGen2, ref
	case ref.Kind == objname.CatalogFence:
		return classFence2, ref
	case ref.Kind == objname.CatalogClaim && ref.Version == 2:
		return classClaim2, ref
	case ref.Kind == objname.CatalogCommit:
		return classCommit2, ref
	case ref.Kind == objname.CatalogGeneration:
		return classGen1, ref
	case ref.Kind == objname.CatalogClaim:
		return classClaim1, ref
	case ref.Kind == objname.CatalogPart:
		return classPart1, ref
	}
	switch objname.Parse(catPrefix, name).Kind {
	case objname.Log:
		return classData, ref
	case objname.ClockProbe:
		return classProbe, ref
	}
	return classOther, ref
}

// life is one lifetime of an object in the store, from the put that stored
// it to the delete that removed it. Seqs order every change of the store.
type life struct {
	name    string
	data    []byte
	class   objClass
	ref     objname.CatalogRef
	gen     *catalog.Generation   // a decoded generation record
	commit  *commitRec            // a decoded commit
	gen1    *catalogv1.Generation // a decoded first-layout generation record
	part1   *catalogv1.Part       // a decoded first-layout part
	madeFor int64                 // the checkpoint a data object was made for
	// damaged: the simulation damaged the object on purpose (or a check's
	// test forged it).
	damaged                bool
	created, deleted       int64 // deleted: 0 while stored
	createdBy, deletedBy   int   // process ids, -1 for the simulation itself
	createdTick, deletedAt int
}

func (l *life) aliveAt(q int64) bool { return l.created <= q && (l.deleted == 0 || l.deleted > q) }

// ckKey names a checkpoint of a generation.
type ckKey struct {
	gen int64
	n   int64
}

// confirmation is a member's confirmation of checkpoints: a Commit or
// Refresh that returned a status without an error, after which the
// member confirms what it committed up to Status.Complete. In the aligned
// mode the whole job's checkpoint n is confirmed; in the independent
// mode, the key groups of the process's instances.
type confirmation struct {
	v1   bool // by a process of the first layout
	gen  int64
	n    int64
	kgs  []dstl.KeyGroupRange
	seq  int64
	proc int
}

// truth records every change of the store, decodes every catalog record,
// and answers what any listing saw, which checkpoints were complete when,
// what was confirmed, and what the deletion rule must keep.
type truth struct {
	s     *catSchedule
	seq   int64
	hist  map[string][]*life
	gens2 []int64            // second-layout generation numbers ever stored, ascending
	cmts  map[int64][]string // second-layout generation -> its commits' names, in first-store order
	// completed holds, for each checkpoint of an aligned generation of
	// the second layout, the seq at which a commit of every process was
	// stored at once for the first time.
	completed map[ckKey]int64
	gens1     []int64            // first-layout generation numbers ever stored, ascending
	parts1    map[int64][]string // first-layout generation -> its parts' names
	// fences1 holds the first-layout generation records that fence the
	// first layout (catalogv1.IsFence), by number, with the seq of their
	// first store.
	fences1  map[int64]int64
	confirms []confirmation
	damaged  map[string]bool
	// firstDamage is the seq of the schedule's first damage, 0 for none:
	// from then on, the deletion rule keeps by listings that the damage
	// changed (a removed commit makes an older one the latest), and what
	// is stored is no longer checked against what the truth says it
	// keeps.
	firstDamage int64
	fresh       []*life  // records and commits stored since the last check
	bad         []string // records that did not decode
}

func newTruth(s *catSchedule) *truth {
	return &truth{s: s, hist: map[string][]*life{}, cmts: map[int64][]string{}, completed: map[ckKey]int64{},
		parts1: map[int64][]string{}, fences1: map[int64]int64{}, damaged: map[string]bool{}}
}

// change is the store's onChange hook.
func (t *truth) change(name string, data []byte, deleted bool) {
	t.seq++
	by := -1
	if p := t.s.running; p != nil {
		by = p.id
	}
	if deleted {
		if l := t.now(name); l != nil {
			l.deleted, l.deletedBy, l.deletedAt = t.seq, by, t.s.tick
			switch {
			case by < 0:
			case l.class == classData:
				t.s.stats.DeletedData++
			case l.class != classOther && l.class != classProbe:
				t.s.stats.DroppedCatalog++
			}
		}
		return
	}
	class, ref := classify(name)
	l := &life{name: name, data: slices.Clone(data), class: class, ref: ref, created: t.seq, createdBy: by, createdTick: t.s.tick, damaged: t.damaged[name]}
	first := len(t.hist[name]) == 0
	t.hist[name] = append(t.hist[name], l)
	bad := func(err error) {
		if !l.damaged {
			t.bad = append(t.bad, fmt.Sprintf("%s: %v", name, err))
		}
	}
	switch class {
	case classGen2:
		g := new(catalog.Generation)
		if err := decodeRecord(data, 2, 'G', g); err != nil {
			bad(err)
			return
		}
		l.gen = g
		if first {
			t.gens2 = append(t.gens2, ref.Generation)
			slices.Sort(t.gens2)
		}
		t.fresh = append(t.fresh, l)
	case classFence2:
		var f fenceRec
		if err := decodeRecord(data, 2, 'F', &f); err != nil {
			bad(err)
		} else if f.Next != ref.Generation+1 {
			bad(fmt.Errorf("the fence of generation %d names generation %d", ref.Generation, f.Next))
		}
	case classCommit2:
		if first {
			t.cmts[ref.Generation] = append(t.cmts[ref.Generation], name)
		}
		c := new(commitRec)
		if err := decodeRecord(data, 2, 'M', c); err != nil {
			bad(err)
			return
		}
		if c.Generation != ref.Generation || c.Checkpoint != ref.Checkpoint || c.Process != ref.Process {
			bad(fmt.Errorf("a commit of generation %d, checkpoint %d, process %d", c.Generation, c.Checkpoint, c.Process))
			return
		}
		l.commit = c
		t.fresh = append(t.fresh, l)
	case classGen1:
		g := new(catalogv1.Generation)
		if err := decodeRecord(data, 1, 'G', g); err != nil {
			bad(err)
			return
		}
		l.gen1 = g
		if first {
			t.gens1 = append(t.gens1, ref.Generation)
			slices.Sort(t.gens1)
			if catalogv1.IsFence(catPrefix, g) {
				t.fences1[g.Number] = t.seq
			}
		}
		t.fresh = append(t.fresh, l)
	case classPart1:
		if first {
			t.parts1[ref.Generation] = append(t.parts1[ref.Generation], name)
		}
		p := new(catalogv1.Part)
		if err := decodeRecord(data, 1, 'P', p); err != nil {
			bad(err)
			return
		}
		p.Name = name
		l.part1 = p
	case classData:
		l.madeFor = objname.Parse(catPrefix, name).Checkpoint
	}
}

// now returns the object's current lifetime, nil when it is not stored.
func (t *truth) now(name string) *life { return t.at(name, t.seq) }

// at returns the lifetime of the object at seq q, nil when it was not
// stored then.
func (t *truth) at(name string, q int64) *life {
	ls := t.hist[name]
	for i := len(ls) - 1; i >= 0; i-- {
		if ls[i].aliveAt(q) {
			return ls[i]
		}
	}
	return nil
}

// first returns the object's first lifetime, nil when it was never stored.
func (t *truth) first(name string) *life {
	if ls := t.hist[name]; len(ls) > 0 {
		return ls[0]
	}
	return nil
}

// fate describes what became of an object, for a failure's message.
func (t *truth) fate(name string) string {
	ls := t.hist[name]
	if len(ls) == 0 {
		return "never stored"
	}
	var out []string
	for _, l := range ls {
		s := fmt.Sprintf("stored at step %d (seq %d) by %s", l.createdTick, l.created, procName(l.createdBy))
		if l.deleted != 0 {
			s += fmt.Sprintf(", deleted at step %d (seq %d) by %s", l.deletedAt, l.deleted, procName(l.deletedBy))
		}
		if l.damaged {
			s += " (damaged on purpose)"
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

func procName(id int) string {
	if id < 0 {
		return "the simulation"
	}
	return "p" + strconv.Itoa(id)
}

// gen2 returns the record of second-layout generation g as first stored
// (nil when none was, or it did not decode).
func (t *truth) gen2(g int64) *catalog.Generation {
	if l := t.first(objname.CatalogV2GenerationName(catPrefix, g)); l != nil {
		return l.gen
	}
	return nil
}

// gen1 returns the record of first-layout generation g as first stored.
func (t *truth) gen1(g int64) *catalogv1.Generation {
	if l := t.first(objname.CatalogGenerationName(catPrefix, g)); l != nil {
		return l.gen1
	}
	return nil
}

// live returns the latest second-layout generation whose record is
// stored now, 0 for none.
func (t *truth) live() int64 {
	for i := len(t.gens2) - 1; i >= 0; i-- {
		if t.now(objname.CatalogV2GenerationName(catPrefix, t.gens2[i])) != nil {
			return t.gens2[i]
		}
	}
	return 0
}

// successorAt reports whether generation g of the second layout had a
// successor's record stored by seq q.
func (t *truth) successorAt(g int64, q int64) bool {
	l := t.first(objname.CatalogV2GenerationName(catPrefix, g+1))
	return l != nil && l.created <= q
}

// fenceSeq returns the seq of the first store of generation g's fence,
// 0 when none was stored.
func (t *truth) fenceSeq(g int64) int64 {
	if l := t.first(objname.CatalogV2FenceName(catPrefix, g)); l != nil {
		return l.created
	}
	return 0
}

// commitsAt returns, for each checkpoint of second-layout generation g,
// the commits stored at seq q, by process (as a listing shows them: a
// damaged one too).
func (t *truth) commitsAt(g int64, q int64) map[int64]map[int]*life {
	return t.byCheckpointAt(t.cmts[g], q, func(l *life) int { return l.ref.Process })
}

// byCheckpointAt returns, for each checkpoint, the objects of names
// stored at seq q, by the index that who returns of each (its process or
// instance).
func (t *truth) byCheckpointAt(names []string, q int64, who func(*life) int) map[int64]map[int]*life {
	out := map[int64]map[int]*life{}
	for _, name := range names {
		l := t.at(name, q)
		if l == nil {
			continue
		}
		if out[l.ref.Checkpoint] == nil {
			out[l.ref.Checkpoint] = map[int]*life{}
		}
		out[l.ref.Checkpoint][who(l)] = l
	}
	return out
}

// completeIn returns the checkpoints of gen that a listing of its
// directory at seq q shows complete, ascending: those with a commit of
// every process (in the independent mode, every checkpoint with a
// commit).
func completeIn(gen *catalog.Generation, byN map[int64]map[int]*life) []int64 {
	var out []int64
	for n, byP := range byN {
		all := true
		for p := range gen.Processes {
			all = all && byP[p] != nil
		}
		if all || gen.Mode == catalog.Independent {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// everComplete returns the checkpoints of aligned generation g that were
// complete at some seq up to now, ascending.
func (t *truth) everComplete(g int64) []int64 {
	var out []int64
	for k := range t.completed {
		if k.gen == g {
			out = append(out, k.n)
		}
	}
	slices.Sort(out)
	return out
}

// latestOf returns process p's latest checkpoint with a commit in byN, 0
// for none.
func latestOf(byN map[int64]map[int]*life, p int) int64 {
	var last int64
	for n, byP := range byN {
		if byP[p] != nil {
			last = max(last, n)
		}
	}
	return last
}

// unit is one part a generation restores: a catalog object and the key
// groups of its part.
type unit struct {
	object string
	kgs    dstl.KeyGroupRange
}

// unitsOf returns a generation's restored parts.
func unitsOf(rs []catalog.Restored) []unit {
	var out []unit
	for _, r := range rs {
		for _, kg := range r.KeyGroups {
			out = append(out, unit{r.Object, kg})
		}
	}
	return out
}

// sameUnits reports whether two lists of restored parts hold the same
// parts.
func sameUnits(a, b []unit) bool {
	key := func(us []unit) []string {
		var out []string
		for _, u := range us {
			out = append(out, fmt.Sprintf("%s %v", u.object, u.kgs))
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}

// restorePoint is the reference of what a generation started after prev,
// by a starter whose listing of prev's directory was at seq q, restores
// (docs/CATALOG.md, "Join"): in the aligned mode the commits of prev's
// latest complete checkpoint (or of restoreFrom, one of the last retain
// complete ones, or the one prev restored while prev has fewer than
// retain complete ones), or what prev restored when it completed none;
// in the independent mode each process's latest commit, or, for a
// process that committed none, what prev restored narrowed to its
// instances' key groups. ok is false when no start may
// succeed (restoreFrom not retained).
func (t *truth) restorePoint(prev *catalog.Generation, q int64, restoreFrom int64, retain int) (units []unit, n int64, ok bool) {
	byN := t.commitsAt(prev.Number, q)
	commitUnits := func(n int64, p int) []unit {
		var out []unit
		lo, hi := catalog.InstancesOf(p, prev.Processes, prev.Instances())
		for i := lo; i <= hi; i++ {
			out = append(out, unit{objname.CatalogV2CommitName(catPrefix, prev.Number, n, p), prev.KeyGroups[i]})
		}
		return out
	}
	restored := unitsOf(prev.Restored)
	if prev.Mode == catalog.Aligned {
		complete := completeIn(prev, byN)
		all := func(n int64) []unit {
			var out []unit
			for p := range prev.Processes {
				out = append(out, commitUnits(n, p)...)
			}
			return out
		}
		switch {
		case restoreFrom != 0 && slices.Contains(complete[max(0, len(complete)-retain):], restoreFrom):
			return all(restoreFrom), restoreFrom, true
		case restoreFrom != 0 && restoreFrom == prev.RestoredCheckpoint && len(complete) < retain:
			return restored, restoreFrom, true
		case restoreFrom != 0:
			return nil, 0, false
		case len(complete) > 0:
			n := complete[len(complete)-1]
			return all(n), n, true
		}
		return restored, prev.RestoredCheckpoint, true
	}
	if restoreFrom != 0 {
		return nil, 0, false
	}
	for p := range prev.Processes {
		if n := latestOf(byN, p); n != 0 {
			units = append(units, commitUnits(n, p)...)
			continue
		}
		// A process that committed nothing: what prev restored, for its
		// instances' key groups only (one range per part where its
		// instances' ranges meet).
		lo, hi := catalog.InstancesOf(p, prev.Processes, prev.Instances())
		for _, u := range restored {
			var pieces []dstl.KeyGroupRange
			for i := lo; i <= hi; i++ {
				r := dstl.KeyGroupRange{Start: max(u.kgs.Start, prev.KeyGroups[i].Start), End: min(u.kgs.End, prev.KeyGroups[i].End)}
				if r.Start > r.End {
					continue
				}
				if k := len(pieces) - 1; k >= 0 && pieces[k].End+1 == r.Start {
					pieces[k].End = r.End
					continue
				}
				pieces = append(pieces, r)
			}
			for _, r := range pieces {
				units = append(units, unit{u.object, r})
			}
		}
	}
	return units, 0, true
}

// maxCheckpointAt returns the highest checkpoint of second-layout
// generation g with a commit stored at seq q.
func (t *truth) maxCheckpointAt(g int64, q int64) int64 {
	var out int64
	for n := range t.commitsAt(g, q) {
		out = max(out, n)
	}
	return out
}

// parts1At returns, for each checkpoint of first-layout generation g, the
// parts stored at seq q, by instance.
func (t *truth) parts1At(g int64, q int64) map[int64]map[int]*life {
	return t.byCheckpointAt(t.parts1[g], q, func(l *life) int { return l.ref.Instance })
}

// latestGen1At returns the latest first-layout generation whose record
// was stored at seq q, 0 for none.
func (t *truth) latestGen1At(q int64) int64 {
	for i := len(t.gens1) - 1; i >= 0; i-- {
		if t.at(objname.CatalogGenerationName(catPrefix, t.gens1[i]), q) != nil {
			return t.gens1[i]
		}
	}
	return 0
}

// upgradePoint is the reference of what the upgrade from the first
// layout restores, from a listing of the first layout at seq q made after
// its fence (docs/CATALOG.md, "Upgrade"): as the first layout's Join
// would choose it after the generation the fence follows, but that in the
// independent mode an instance that committed no part restores what that
// generation restored for its own key groups only. It returns the
// fence's number, the parts, their checkpoint (aligned) and the highest
// checkpoint of the first layout's listing.
func (t *truth) upgradePoint(q int64) (fence int64, units []unit, n, maxN int64, err error) {
	fence = t.latestGen1At(q)
	if fence == 0 {
		return 0, nil, 0, 0, fmt.Errorf("no generation of the first layout at seq %d", q)
	}
	fl := t.at(objname.CatalogGenerationName(catPrefix, fence), q)
	if fl.gen1 == nil || !catalogv1.IsFence(catPrefix, fl.gen1) {
		return 0, nil, 0, 0, fmt.Errorf("the latest generation of the first layout, %d, is no fence at seq %d", fence, q)
	}
	prev := t.gen1(fence - 1)
	if prev == nil {
		return 0, nil, 0, 0, fmt.Errorf("no generation %d of the first layout before the fence", fence-1)
	}
	for _, g := range t.gens1 {
		for ck := range t.parts1At(g, q) {
			maxN = max(maxN, ck)
		}
	}
	byN := t.parts1At(prev.Number, q)
	partUnit := func(name string) unit {
		if l := t.first(name); l != nil && l.part1 != nil {
			return unit{name, l.part1.KeyGroups}
		}
		return unit{name, dstl.KeyGroupRange{Start: -1, End: -1}}
	}
	var restored []unit
	for _, name := range prev.Restored {
		restored = append(restored, partUnit(name))
	}
	if prev.Mode == catalogv1.Aligned {
		var complete []int64
		for ck, byI := range byN {
			if len(byI) == prev.Instances() {
				complete = append(complete, ck)
			}
		}
		slices.Sort(complete)
		if len(complete) == 0 {
			return fence, restored, prev.RestoredCheckpoint, maxN, nil
		}
		n = complete[len(complete)-1]
		for i := range prev.Instances() {
			units = append(units, partUnit(objname.CatalogPartName(catPrefix, prev.Number, n, i)))
		}
		return fence, units, n, maxN, nil
	}
	latest := func(i int) int64 {
		var last int64
		for ck, byI := range byN {
			if byI[i] != nil {
				last = max(last, ck)
			}
		}
		return last
	}
	// Each instance's latest part, or, for one that committed none, what
	// prev restored narrowed to its key groups.
	for i, kg := range prev.KeyGroups {
		if n := latest(i); n != 0 {
			units = append(units, partUnit(objname.CatalogPartName(catPrefix, prev.Number, n, i)))
			continue
		}
		for _, u := range restored {
			if r := (dstl.KeyGroupRange{Start: max(u.kgs.Start, kg.Start), End: min(u.kgs.End, kg.End)}); r.Start <= r.End {
				units = append(units, unit{u.object, r})
			}
		}
	}
	return fence, units, 0, maxN, nil
}

// partOf returns the part a restored unit names, as its committer
// stored it: from a commit of the second layout, or a part of the first
// layout. what names it for a failure; nil when the object was never
// stored or holds no such part.
func (t *truth) partOf(u unit) (p *partRec, n int64, what string) {
	l := t.first(u.object)
	switch {
	case l == nil:
		return nil, 0, "never stored"
	case l.commit != nil:
		for i := range l.commit.Parts {
			if kg := l.commit.Parts[i].KeyGroups; kg.Start <= u.kgs.Start && u.kgs.End <= kg.End {
				return &l.commit.Parts[i], l.commit.Checkpoint, ""
			}
		}
		return nil, 0, fmt.Sprintf("a commit with no part of key groups %v", u.kgs)
	case l.part1 != nil:
		if kg := l.part1.KeyGroups; u.kgs.Start < kg.Start || kg.End < u.kgs.End {
			return nil, 0, fmt.Sprintf("a first-layout part of key groups %v", l.part1.KeyGroups)
		}
		return &partRec{Instance: l.part1.Instance, KeyGroups: l.part1.KeyGroups, State: l.part1.State,
			Metadata: l.part1.Metadata, Objects: l.part1.Objects}, l.part1.Checkpoint, ""
	}
	return nil, 0, "no commit or part"
}

// neededNow returns what the deletion rule must keep stored now, by the
// documented rule (docs/CATALOG.md, "Deletion rule"), with why: of the
// live generation of the second layout, the commits of its last retain
// complete checkpoints, every commit of a checkpoint newer than its
// latest complete one (pending), and, while it has fewer than retain
// complete checkpoints, what it restored (in the independent mode: each
// process's last retain commits, and what it restored while a process
// has fewer). Every object named here must be stored with every data
// object its parts name.
func (t *truth) neededNow(retain int) (names []string, why map[string]string) {
	why = map[string]string{}
	live := t.live()
	if live == 0 {
		return nil, why
	}
	g := t.gen2(live)
	if g == nil {
		return nil, why
	}
	add := func(name, reason string) {
		if _, ok := why[name]; !ok {
			names = append(names, name)
			why[name] = reason
		}
	}
	created := map[int64]map[int]bool{}
	for _, name := range t.cmts[live] {
		ref := objname.ParseCatalog(catPrefix, name)
		if created[ref.Checkpoint] == nil {
			created[ref.Checkpoint] = map[int]bool{}
		}
		created[ref.Checkpoint][ref.Process] = true
	}
	restoredNeeded := false
	if g.Mode == catalog.Aligned {
		complete := t.everComplete(live)
		retained := complete[max(0, len(complete)-retain):]
		latest := g.RestoredCheckpoint
		if len(complete) > 0 {
			latest = complete[len(complete)-1]
		}
		for n, byP := range created {
			for p := range byP {
				name := objname.CatalogV2CommitName(catPrefix, live, n, p)
				switch {
				case slices.Contains(retained, n):
					add(name, fmt.Sprintf("a commit of the retained checkpoint %d of the live generation %d", n, live))
				case n > latest:
					add(name, fmt.Sprintf("a commit of the pending checkpoint %d of the live generation %d (latest complete %d)", n, live, latest))
				}
			}
		}
		restoredNeeded = len(complete) < retain
	} else {
		for p := range g.Processes {
			var ns []int64
			for n, byP := range created {
				if byP[p] {
					ns = append(ns, n)
				}
			}
			slices.Sort(ns)
			restoredNeeded = restoredNeeded || len(ns) < retain
			for _, n := range ns[max(0, len(ns)-retain):] {
				add(objname.CatalogV2CommitName(catPrefix, live, n, p), fmt.Sprintf("one of process %d's last %d commits in the live generation %d", p, retain, live))
			}
		}
	}
	if restoredNeeded {
		for _, r := range g.Restored {
			add(r.Object, fmt.Sprintf("restored by the live generation %d, which does not have %d complete checkpoints of its own", live, retain))
		}
	}
	slices.Sort(names)
	return names, why
}

// confirm records a confirmation.
func (t *truth) confirm(c confirmation) {
	c.seq = t.seq
	t.confirms = append(t.confirms, c)
}

// floorOf returns, for key group kg, the highest checkpoint confirmed
// that a generation restoring now must not roll back past, and the
// confirmation that set it: confirmations by members of the second
// layout's generations since the latest one started with RestoreFrom (a
// rollback asked for), before gen; and, unless such a generation came
// after the upgrade, those of the first layout's generation the upgrade
// followed.
func (t *truth) floorOf(kg int, gen int64, resetGen int64, upgradedFrom int64) (int64, *confirmation) {
	var floor int64
	var by *confirmation
	for i := range t.confirms {
		c := &t.confirms[i]
		switch {
		case c.v1 && (resetGen != 0 || c.gen != upgradedFrom):
			continue
		case !c.v1 && (c.gen < resetGen || c.gen >= gen):
			continue
		}
		for _, r := range c.kgs {
			if r.Contains(kg) && c.n > floor {
				floor, by = c.n, c
			}
		}
	}
	return floor, by
}

func overlap(a, b dstl.KeyGroupRange) bool { return a.Start <= b.End && b.Start <= a.End }

// The state of a part: every key group of the instance's range with its
// value, as "kg=value" separated by spaces.
func encodeValues(vals map[int]uint64, r dstl.KeyGroupRange) []byte {
	var b bytes.Buffer
	for kg := r.Start; kg <= r.End; kg++ {
		if kg > r.Start {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d=%d", kg, vals[kg])
	}
	return b.Bytes()
}

func decodeValues(state []byte) (map[int]uint64, error) {
	vals := map[int]uint64{}
	for _, f := range strings.Fields(string(state)) {
		k, v, ok := strings.Cut(f, "=")
		kg, err1 := strconv.Atoi(k)
		val, err2 := strconv.ParseUint(v, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("state %q: bad field %q", state, f)
		}
		if _, dup := vals[kg]; dup {
			return nil, fmt.Errorf("state %q: key group %d twice", state, kg)
		}
		vals[kg] = val
	}
	return vals, nil
}

// dataContent is what the simulation stores in its data object name.
func dataContent(name string) []byte { return []byte("data of " + name) }

// sortedKeys returns a map's keys, ascending.
func sortedKeys[V any](m map[int]V) []int { return slices.Sorted(maps.Keys(m)) }
