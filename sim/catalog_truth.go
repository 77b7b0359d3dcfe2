package sim

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
)

// The catalog's records are framed as package catalog writes them: magic,
// version, kind, the JSON of the record, and the CRC32C of all that. The
// simulation decodes what was stored to know the truth, independently of
// what the members report.
const (
	recordMagic   = "DSTC"
	recordVersion = 1
)

var recordCRC = crc32.MakeTable(crc32.Castagnoli)

// decodeRecord decodes a catalog record of kind into v.
func decodeRecord(data []byte, kind byte, v any) error {
	head := len(recordMagic) + 2
	if len(data) < head+4 || string(data[:len(recordMagic)]) != recordMagic || data[len(recordMagic)] != recordVersion || data[len(recordMagic)+1] != kind {
		return fmt.Errorf("not a catalog record of kind %q", kind)
	}
	end := len(data) - 4
	if crc32.Checksum(data[:end], recordCRC) != binary.LittleEndian.Uint32(data[end:]) {
		return fmt.Errorf("checksum mismatch")
	}
	return json.Unmarshal(data[head:end], v)
}

// encodeRecord frames v as a catalog record of kind (for the tests of the
// checks, which forge records).
func encodeRecord(kind byte, v any) []byte {
	body, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	b := append([]byte(recordMagic), recordVersion, kind)
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, recordCRC))
}

// life is one lifetime of an object in the store, from the put that stored
// it to the delete that removed it. Seqs order every change and listing.
type life struct {
	name                   string
	data                   []byte
	ref                    objname.CatalogRef
	gen                    *catalog.Generation // decoded, for a generation record
	part                   *catalog.Part       // decoded, for a part
	created, deleted       int64               // deleted: 0 while stored
	createdBy, deletedBy   int                 // process ids
	createdTick, deletedAt int
}

func (l *life) aliveAt(q int64) bool { return l.created <= q && (l.deleted == 0 || l.deleted > q) }

// truth records every change of the store, so that the checks can ask
// what any listing saw.
type truth struct {
	s     *catSchedule
	seq   int64
	hist  map[string][]*life
	names []string // every name ever stored, in first-store order
	fresh []*life  // generation records stored since the last step
	bad   []string // records that did not decode
}

func newTruth(s *catSchedule) *truth { return &truth{s: s, hist: map[string][]*life{}} }

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
		}
		return
	}
	l := &life{name: name, data: data, ref: objname.ParseCatalog(catPrefix, name), created: t.seq, createdBy: by, createdTick: t.s.tick}
	switch l.ref.Kind {
	case objname.CatalogGeneration:
		l.gen = new(catalog.Generation)
		if err := decodeRecord(data, 'G', l.gen); err != nil {
			l.gen = nil
			t.bad = append(t.bad, fmt.Sprintf("%s: %v", name, err))
		} else {
			t.fresh = append(t.fresh, l)
		}
	case objname.CatalogPart:
		l.part = new(catalog.Part)
		if err := decodeRecord(data, 'P', l.part); err != nil {
			l.part = nil
			t.bad = append(t.bad, fmt.Sprintf("%s: %v", name, err))
		} else {
			l.part.Name = name
		}
	}
	if _, ok := t.hist[name]; !ok {
		t.names = append(t.names, name)
	}
	t.hist[name] = append(t.hist[name], l)
}

// now returns the object's current lifetime, nil when it is not stored.
func (t *truth) now(name string) *life { return t.at(name, t.seq) }

// at returns the lifetime of the object at seq q, nil when it was not
// stored then.
func (t *truth) at(name string, q int64) *life {
	for _, l := range t.hist[name] {
		if l.aliveAt(q) {
			return l
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

// last returns the object's latest lifetime, nil when it was never stored.
func (t *truth) last(name string) *life {
	if ls := t.hist[name]; len(ls) > 0 {
		return ls[len(ls)-1]
	}
	return nil
}

// fate describes what became of an object, for a failure's message.
func (t *truth) fate(name string) string {
	l := t.last(name)
	switch {
	case l == nil:
		return "never stored"
	case l.deleted == 0:
		return fmt.Sprintf("stored at tick %d by process %d", l.createdTick, l.createdBy)
	}
	return fmt.Sprintf("stored at tick %d by process %d, deleted at tick %d by process %d", l.createdTick, l.createdBy, l.deletedAt, l.deletedBy)
}

// tview is the catalog as a listing at one seq saw it.
type tview struct {
	q      int64
	gens   map[int64]*catalog.Generation
	claims map[int64]map[int]bool
	parts  map[int64]map[int64]map[int]*life // generation -> checkpoint -> instance
	maxN   int64
}

func (t *truth) viewAt(q int64) *tview {
	v := &tview{q: q, gens: map[int64]*catalog.Generation{}, claims: map[int64]map[int]bool{}, parts: map[int64]map[int64]map[int]*life{}}
	for _, name := range t.names {
		l := t.at(name, q)
		if l == nil {
			continue
		}
		switch l.ref.Kind {
		case objname.CatalogGeneration:
			if l.gen != nil {
				v.gens[l.ref.Generation] = l.gen
			}
		case objname.CatalogClaim:
			if v.claims[l.ref.Generation] == nil {
				v.claims[l.ref.Generation] = map[int]bool{}
			}
			v.claims[l.ref.Generation][l.ref.Instance] = true
		case objname.CatalogPart:
			byN := v.parts[l.ref.Generation]
			if byN == nil {
				byN = map[int64]map[int]*life{}
				v.parts[l.ref.Generation] = byN
			}
			if byN[l.ref.Checkpoint] == nil {
				byN[l.ref.Checkpoint] = map[int]*life{}
			}
			byN[l.ref.Checkpoint][l.ref.Instance] = l
			v.maxN = max(v.maxN, l.ref.Checkpoint)
		}
	}
	return v
}

func (v *tview) latest() int64 {
	var g int64
	for n := range v.gens {
		g = max(g, n)
	}
	return g
}

// checkpoints returns the checkpoint numbers of generation g with a part,
// ascending.
func (v *tview) checkpoints(g int64) []int64 {
	var ns []int64
	for n := range v.parts[g] {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// complete returns gen's complete checkpoints, ascending: in the aligned
// mode those with a part of every instance, in the independent mode every
// checkpoint with a part.
func (v *tview) complete(gen *catalog.Generation) []int64 {
	var out []int64
	for _, n := range v.checkpoints(gen.Number) {
		if gen.Mode == catalog.Independent || len(v.parts[gen.Number][n]) == gen.Instances() {
			out = append(out, n)
		}
	}
	return out
}

// ownCheckpoints returns instance i's checkpoints with a part in
// generation g, ascending.
func (v *tview) ownCheckpoints(g int64, i int) []int64 {
	var out []int64
	for _, n := range v.checkpoints(g) {
		if v.parts[g][n][i] != nil {
			out = append(out, n)
		}
	}
	return out
}

// status is what a member of gen, instance i, must learn from this
// listing.
func (v *tview) status(gen *catalog.Generation, i int) int64 {
	var ns []int64
	if gen.Mode == catalog.Independent {
		ns = v.ownCheckpoints(gen.Number, i)
	} else {
		ns = v.complete(gen)
	}
	if len(ns) == 0 {
		return 0
	}
	return ns[len(ns)-1]
}

// partNamesOf returns the names of the parts of complete checkpoint n of
// gen.
func partNamesOf(v *tview, gen *catalog.Generation, n int64) []string {
	var names []string
	for i := range gen.Instances() {
		names = append(names, v.parts[gen.Number][n][i].name)
	}
	return names
}

// restorePoint is the reference of what a generation started after
// prev's, by a process whose listing was v, restores (package catalog's
// documentation): in the aligned mode the parts of prev's latest complete
// checkpoint (or of restoreFrom), or what prev restored when it completed
// none; in the independent mode each of prev's instances' latest part, or
// the parts prev restored that overlap the key groups of an instance that
// committed none. ok is false when no start may succeed (an unknown
// restoreFrom).
func (t *truth) restorePoint(v *tview, prev *catalog.Generation, restoreFrom int64) (names []string, n int64, ok bool) {
	if prev.Mode == catalog.Aligned {
		complete := v.complete(prev)
		switch {
		case restoreFrom != 0 && slices.Contains(complete, restoreFrom):
			return partNamesOf(v, prev, restoreFrom), restoreFrom, true
		case restoreFrom != 0 && restoreFrom == prev.RestoredCheckpoint:
			return prev.Restored, restoreFrom, true
		case restoreFrom != 0:
			return nil, 0, false
		case len(complete) > 0:
			n := complete[len(complete)-1]
			return partNamesOf(v, prev, n), n, true
		}
		return prev.Restored, prev.RestoredCheckpoint, true
	}
	if restoreFrom != 0 {
		return nil, 0, false
	}
	// An instance that committed no part restores what prev restored for
	// its key groups, and so does every instance whose key groups those
	// parts also cover (to a fixpoint), so that no key group comes from
	// two parts.
	restored := make([]*catalog.Part, len(prev.Restored))
	for j, name := range prev.Restored {
		restored[j] = t.partData(name)
	}
	fallback := make([]bool, prev.Instances())
	for i := range fallback {
		fallback[i] = len(v.ownCheckpoints(prev.Number, i)) == 0
	}
	used := make([]bool, len(restored))
	for changed := true; changed; {
		changed = false
		for j, p := range restored {
			for i, kg := range prev.KeyGroups {
				if p != nil && fallback[i] && !used[j] && overlap(p.KeyGroups, kg) {
					used[j], changed = true, true
				}
			}
		}
		for i, kg := range prev.KeyGroups {
			for j, p := range restored {
				if p != nil && used[j] && !fallback[i] && overlap(p.KeyGroups, kg) {
					fallback[i], changed = true, true
				}
			}
		}
	}
	for i, kg := range prev.KeyGroups {
		if !fallback[i] {
			ns := v.ownCheckpoints(prev.Number, i)
			names = append(names, v.parts[prev.Number][ns[len(ns)-1]][i].name)
			continue
		}
		for j, p := range restored {
			if p != nil && used[j] && overlap(p.KeyGroups, kg) && !slices.Contains(names, prev.Restored[j]) {
				names = append(names, prev.Restored[j])
			}
		}
	}
	return names, 0, true
}

// partData returns the part stored under name (its latest lifetime), nil
// when none was.
func (t *truth) partData(name string) *catalog.Part {
	if l := t.last(name); l != nil {
		return l.part
	}
	return nil
}

func overlap(a, b dstl.KeyGroupRange) bool { return a.Start <= b.End && b.Start <= a.End }

// needed returns the parts whose catalog objects and data objects must be
// stored now, by the documented deletion rule, with why: the retained
// checkpoints of the live generation (the latest Retain complete ones; in
// the independent mode each instance's latest Retain parts), its pending
// parts (of checkpoints after the latest complete one, aligned mode), and
// the parts it restored as long as a member may still restore them: while
// a slot of it is unclaimed, or it completed no checkpoint (aligned), or
// an instance committed no part (independent).
func (t *truth) needed(v *tview, retain int) (names []string, why map[string]string) {
	why = map[string]string{}
	live := v.latest()
	g := v.gens[live]
	if g == nil {
		return nil, why
	}
	add := func(l *life, reason string) {
		if _, ok := why[l.name]; !ok {
			names = append(names, l.name)
			why[l.name] = reason
		}
	}
	restoredNeeded := len(v.claims[live]) < g.Instances()
	if g.Mode == catalog.Aligned {
		complete := v.complete(g)
		var last int64
		if len(complete) > 0 {
			last = complete[len(complete)-1]
		} else {
			restoredNeeded = true
		}
		retained := complete[max(0, len(complete)-retain):]
		for _, n := range v.checkpoints(live) {
			reason := ""
			switch {
			case slices.Contains(retained, n):
				reason = fmt.Sprintf("retained checkpoint %d of the live generation %d", n, live)
			case n > last:
				reason = fmt.Sprintf("pending checkpoint %d of the live generation %d", n, live)
			default:
				continue
			}
			for i := range g.Instances() {
				if l := v.parts[live][n][i]; l != nil {
					add(l, reason)
				}
			}
		}
	} else {
		for i := range g.Instances() {
			ns := v.ownCheckpoints(live, i)
			if len(ns) == 0 {
				restoredNeeded = true
			}
			for _, n := range ns[max(0, len(ns)-retain):] {
				add(v.parts[live][n][i], fmt.Sprintf("retained part of checkpoint %d of instance %d of the live generation %d", n, i, live))
			}
		}
	}
	if restoredNeeded {
		for _, name := range g.Restored {
			if l := t.at(name, v.q); l != nil {
				add(l, fmt.Sprintf("restored by the live generation %d", live))
			} else {
				names = append(names, name)
				why[name] = fmt.Sprintf("restored by the live generation %d", live)
			}
		}
	}
	sort.Strings(names)
	return names, why
}

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
