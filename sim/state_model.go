package sim

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// stModel is what an operator instance's three stores must hold, kept in
// maps by the rules that package statestore documents: a key-value map; a
// window store's windows, dropped once their start is not above the
// stream time (the largest start put) minus the retention, where a put
// into such a window is dropped; a versioned store's versions per key, a
// put or delete older than the stream time minus the history retention
// dropped, and only the version valid at that horizon and later ones
// reachable. Keys are the codecs' encodings (StringCodec: the bytes).
type stModel struct {
	winR, verR int64
	kv         map[string]string
	win        map[winKey]string
	winST      int64
	ver        map[string][]verEntry // by timestamp
	verST      int64
}

type winKey struct {
	key   string
	start int64
}

type verEntry struct {
	ts  int64
	val string
	del bool
}

func newStModel(winR, verR int64) *stModel {
	return &stModel{winR: winR, verR: verR, kv: map[string]string{}, win: map[winKey]string{}, ver: map[string][]verEntry{},
		winST: math.MinInt64, verST: math.MinInt64}
}

func (m *stModel) clone() *stModel {
	c := *m
	c.kv = maps.Clone(m.kv)
	c.win = maps.Clone(m.win)
	c.ver = make(map[string][]verEntry, len(m.ver))
	for k, vs := range m.ver {
		c.ver[k] = slices.Clone(vs)
	}
	return &c
}

// liveFrom is the smallest live window start at stream time st.
func liveFrom(st, retention int64) int64 {
	if st < math.MinInt64+retention {
		return math.MinInt64
	}
	return st - retention + 1
}

// horizon is the oldest time a versioned query reaches at stream time st.
func horizon(st, retention int64) int64 {
	if st < math.MinInt64+retention {
		return math.MinInt64
	}
	return st - retention
}

// reachable returns the versions a query can reach at horizon h: the one
// valid at h and every later one.
func reachable(vs []verEntry, h int64) []verEntry {
	i, _ := slices.BinarySearchFunc(vs, h, func(e verEntry, t int64) int { return cmp.Compare(e.ts, t) })
	if i > 0 && (i == len(vs) || vs[i].ts > h) {
		i--
	}
	return vs[i:]
}

// stOp is one write to a store: 'k' key-value, 'w' window (ts is the
// window start), 'v' versioned.
type stOp struct {
	store byte
	del   bool
	key   string
	ts    int64
	val   string
}

func (op stOp) String() string {
	if op.del {
		return fmt.Sprintf("%c del %q@%d", op.store, op.key, op.ts)
	}
	return fmt.Sprintf("%c put %q@%d (%d bytes)", op.store, op.key, op.ts, len(op.val))
}

func (m *stModel) apply(op stOp) {
	switch op.store {
	case 'k':
		if op.del {
			delete(m.kv, op.key)
		} else {
			m.kv[op.key] = op.val
		}
	case 'w':
		if op.del {
			delete(m.win, winKey{op.key, op.ts})
			return
		}
		if op.ts > m.winST {
			m.winST = op.ts
			m.expire()
		}
		if op.ts < liveFrom(m.winST, m.winR) {
			return
		}
		m.win[winKey{op.key, op.ts}] = op.val
	case 'v':
		m.verST = max(m.verST, op.ts)
		h := horizon(m.verST, m.verR)
		if op.ts < h {
			return
		}
		e := verEntry{ts: op.ts, val: op.val, del: op.del}
		vs := m.ver[op.key]
		i, found := slices.BinarySearchFunc(vs, op.ts, func(e verEntry, t int64) int { return cmp.Compare(e.ts, t) })
		if found {
			vs = slices.Clone(vs)
			vs[i] = e
		} else {
			vs = slices.Insert(slices.Clone(vs), i, e)
		}
		m.ver[op.key] = slices.Clone(reachable(vs, h))
	}
}

// expire drops the windows expired at the stream time.
func (m *stModel) expire() {
	live := liveFrom(m.winST, m.winR)
	for k := range m.win {
		if k.start < live {
			delete(m.win, k)
		}
	}
}

// modelPart is the state of one part of a checkpoint: the model of an
// instance when it took the checkpoint, and its key groups.
type modelPart struct {
	m   *stModel
	kgr dstl.KeyGroupRange
}

// restoredModel is what restoring the parts into key groups r yields: of
// each part whose key groups meet r, the keys of the key groups both hold;
// the stream times are the largest of those parts', at which windows
// expire and versions stop being reachable.
func restoredModel(parts []modelPart, r dstl.KeyGroupRange, maxP int, winR, verR int64) *stModel {
	out := newStModel(winR, verR)
	for _, p := range parts {
		in, ok := intersectKG(p.kgr, r)
		if !ok {
			continue
		}
		own := func(k string) bool { return in.Contains(statestore.KeyGroup([]byte(k), maxP)) }
		out.winST = max(out.winST, p.m.winST)
		out.verST = max(out.verST, p.m.verST)
		for k, v := range p.m.kv {
			if own(k) {
				out.kv[k] = v
			}
		}
		for k, v := range p.m.win {
			if own(k.key) {
				out.win[k] = v
			}
		}
		for k, vs := range p.m.ver {
			if own(k) {
				out.ver[k] = slices.Clone(vs)
			}
		}
	}
	out.expire()
	h := horizon(out.verST, verR)
	for k, vs := range out.ver {
		out.ver[k] = slices.Clone(reachable(vs, h))
	}
	return out
}

func intersectKG(a, b dstl.KeyGroupRange) (dstl.KeyGroupRange, bool) {
	r := dstl.KeyGroupRange{Start: max(a.Start, b.Start), End: min(a.End, b.End)}
	return r, r.Start <= r.End
}

// stDump is what queries see of the three stores, as text.
type stDump struct {
	kv, win, ver map[string]string
	winST, verST int64
}

func (m *stModel) dump() stDump {
	d := stDump{kv: maps.Clone(m.kv), win: map[string]string{}, ver: map[string]string{}, winST: m.winST, verST: m.verST}
	live := liveFrom(m.winST, m.winR)
	for k, v := range m.win {
		if k.start >= live {
			d.win[fmt.Sprintf("%q@%d", k.key, k.start)] = v
		}
	}
	h := horizon(m.verST, m.verR)
	for k, vs := range m.ver {
		d.ver[k] = formatVersions(reachable(vs, h))
	}
	return d
}

func formatVersions(vs []verEntry) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(' ')
		}
		if v.del {
			fmt.Fprintf(&b, "%d:-", v.ts)
		} else {
			fmt.Fprintf(&b, "%d:%q", v.ts, brief1(v.val))
		}
	}
	return b.String()
}

// brief1 shortens a long value for a message, keeping it distinct.
func brief1(v string) string {
	if len(v) <= 24 {
		return v
	}
	return fmt.Sprintf("%s...(%d bytes, %08x)", v[:16], len(v), fnv32(v))
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// stStores are the three stores of an operator instance.
type stStores struct {
	kv  *statestore.KeyValueStore[string, string]
	win *statestore.WindowStore[string, string]
	ver *statestore.VersionedStore[string, string]
}

// dump reads the stores whole; it also checks that each loop yields in
// order and that no store kept an error.
func (ss stStores) dump() (stDump, []string) {
	var bad []string
	d := stDump{kv: map[string]string{}, win: map[string]string{}, ver: map[string]string{}}
	prev, first := "", true
	for k, v := range ss.kv.All() {
		if !first && k <= prev {
			bad = append(bad, fmt.Sprintf("kv: All yielded %q after %q", k, prev))
		}
		prev, first = k, false
		d.kv[k] = v
	}
	var pw statestore.Windowed[string]
	first = true
	for w, v := range ss.win.All() {
		if !first && (w.Key < pw.Key || w.Key == pw.Key && w.Start <= pw.Start) {
			bad = append(bad, fmt.Sprintf("window: All yielded %q@%d after %q@%d", w.Key, w.Start, pw.Key, pw.Start))
		}
		pw, first = w, false
		d.win[fmt.Sprintf("%q@%d", w.Key, w.Start)] = v
	}
	first = true
	for k, vs := range ss.ver.All() {
		if !first && k <= prev {
			bad = append(bad, fmt.Sprintf("versioned: All yielded %q after %q", k, prev))
		}
		prev, first = k, false
		d.ver[k] = formatVersions(fromVersions(vs))
	}
	d.winST, d.verST = ss.win.StreamTime(), ss.ver.StreamTime()
	for _, e := range []struct {
		name string
		err  error
	}{{"kv", ss.kv.Err()}, {"window", ss.win.Err()}, {"versioned", ss.ver.Err()}} {
		if e.err != nil {
			bad = append(bad, fmt.Sprintf("%s store keeps an error: %v", e.name, e.err))
		}
	}
	return d, bad
}

func fromVersions(vs []statestore.Version[string]) []verEntry {
	out := make([]verEntry, len(vs))
	for i, v := range vs {
		out[i] = verEntry{ts: v.Timestamp, val: v.Value, del: v.Deleted}
	}
	return out
}

// empty reports whether a dump holds nothing: no entry and no stream time.
func (d stDump) empty() bool {
	return len(d.kv) == 0 && len(d.win) == 0 && len(d.ver) == 0 && d.winST == math.MinInt64 && d.verST == math.MinInt64
}

// diffDumps describes how got differs from want ("" when it does not).
func diffDumps(want, got stDump) string {
	var bad []string
	cmpMaps := func(what string, w, g map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if gv, ok := g[k]; !ok {
				bad = append(bad, fmt.Sprintf("%s %q: missing, want %q", what, k, brief1(w[k])))
			} else if gv != w[k] {
				bad = append(bad, fmt.Sprintf("%s %q: got %q, want %q", what, k, brief1(gv), brief1(w[k])))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(g)) {
			if _, ok := w[k]; !ok {
				bad = append(bad, fmt.Sprintf("%s %q: unexpected %q", what, k, brief1(g[k])))
			}
		}
	}
	cmpMaps("kv", want.kv, got.kv)
	cmpMaps("window", want.win, got.win)
	cmpMaps("versioned", want.ver, got.ver)
	if want.winST != got.winST {
		bad = append(bad, fmt.Sprintf("window stream time %d, want %d", got.winST, want.winST))
	}
	if want.verST != got.verST {
		bad = append(bad, fmt.Sprintf("versioned stream time %d, want %d", got.verST, want.verST))
	}
	if len(bad) == 0 {
		return ""
	}
	n := len(bad)
	if n > 10 {
		bad = append(bad[:10], fmt.Sprintf("... %d more", n-10))
	}
	return fmt.Sprintf("%d differences (want %d kv, %d windows, %d versioned keys; got %d, %d, %d):\n      %s",
		n, len(want.kv), len(want.win), len(want.ver), len(got.kv), len(got.win), len(got.ver), strings.Join(bad, "\n      "))
}

// checkReads compares point reads of the stores (Get, Range, Fetch,
// GetAsOf, History) for some of keys with the model; it returns the
// differences.
func (ss stStores) checkReads(m *stModel, keys []string, pickIdx func(n int) int) []string {
	var bad []string
	if len(keys) == 0 {
		return nil
	}
	for range 6 {
		k := keys[pickIdx(len(keys))]
		// key-value
		v, ok, err := ss.kv.Get(k)
		wv, wok := m.kv[k]
		if err != nil || ok != wok || v != wv {
			bad = append(bad, fmt.Sprintf("kv Get(%q) = %q, %v, %v; want %q, %v", k, brief1(v), ok, err, brief1(wv), wok))
		}
		// window: the windows of k
		live := liveFrom(m.winST, m.winR)
		var starts []int64
		for wk := range m.win {
			if wk.key == k && wk.start >= live {
				starts = append(starts, wk.start)
			}
		}
		slices.Sort(starts)
		from, to := int64(math.MinInt64), int64(math.MaxInt64)
		if len(starts) > 0 && pickIdx(2) == 0 {
			from = starts[pickIdx(len(starts))]
			to = from + int64(pickIdx(50))
		}
		var want []string
		for _, st := range starts {
			if st >= from && st <= to {
				want = append(want, fmt.Sprintf("%d=%s", st, brief1(m.win[winKey{k, st}])))
			}
		}
		seq, err := ss.win.Fetch(k, from, to)
		var got []string
		if err == nil {
			for st, v := range seq {
				got = append(got, fmt.Sprintf("%d=%s", st, brief1(v)))
			}
		}
		if err != nil || !slices.Equal(got, want) {
			bad = append(bad, fmt.Sprintf("window Fetch(%q, %d, %d) = %v, %v; want %v", k, from, to, got, err, want))
		}
		if len(starts) > 0 {
			st := starts[pickIdx(len(starts))]
			if v, ok, err := ss.win.Get(k, st); err != nil || !ok || v != m.win[winKey{k, st}] {
				bad = append(bad, fmt.Sprintf("window Get(%q, %d) = %q, %v, %v; want %q", k, st, brief1(v), ok, err, brief1(m.win[winKey{k, st}])))
			}
		}
		// versioned
		h := horizon(m.verST, m.verR)
		vs := reachable(m.ver[k], h)
		hist, err := ss.ver.History(k)
		if g, w := formatVersions(fromVersions(hist)), formatVersions(vs); err != nil || g != w {
			bad = append(bad, fmt.Sprintf("versioned History(%q) = %s, %v; want %s", k, g, err, w))
		}
		ats := []int64{math.MaxInt64}
		if h > math.MinInt64 {
			ats = append(ats, h-1, h, m.verST-int64(pickIdx(int(m.verR)+2)), m.verST)
		}
		for _, at := range ats {
			v, ts, ok, err := ss.ver.GetAsOf(k, at)
			wv, wts, wok := "", int64(0), false
			if at >= h {
				for i := len(vs) - 1; i >= 0; i-- {
					if vs[i].ts <= at {
						wts, wok = vs[i].ts, !vs[i].del
						if wok {
							wv = vs[i].val
						}
						break
					}
				}
			}
			if err != nil || v != wv || ts != wts || ok != wok {
				bad = append(bad, fmt.Sprintf("versioned GetAsOf(%q, %d) = %q, %d, %v, %v; want %q, %d, %v", k, at, brief1(v), ts, ok, err, brief1(wv), wts, wok))
			}
		}
	}
	// a range of the key-value store
	a, b := keys[pickIdx(len(keys))], keys[pickIdx(len(keys))]
	if b < a {
		a, b = b, a
	}
	var want, got []string
	for _, k := range slices.Sorted(maps.Keys(m.kv)) {
		if k >= a && k < b {
			want = append(want, k)
		}
	}
	seq, err := ss.kv.Range(a, b)
	if err == nil {
		for k := range seq {
			got = append(got, k)
		}
	}
	if err != nil || !slices.Equal(got, want) {
		bad = append(bad, fmt.Sprintf("kv Range(%q, %q) = %q, %v; want %q", a, b, got, err, want))
	}
	return bad
}
