package statestore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// The disk tests run the same operations on a store in memory and on the
// same store on disk (Config.Dir) and compare every result.

// diskCheckpointers returns two checkpointers of maxP key groups, kgr
// theirs, over one storage on the local backend: "mem" keeps its stores in
// memory, "disk" on disk.
func diskCheckpointers(t testing.TB, maxP int, kgr dstl.KeyGroupRange) (mem, disk *statestore.Checkpointer) {
	t.Helper()
	b, err := local.Open(context.Background(), local.DefaultConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	storage := newStorage(t, b)
	open := func(op, dir string) *statestore.Checkpointer {
		cp, err := statestore.NewCheckpointer(storage, statestore.Config{Operator: op, KeyGroups: kgr, MaxParallelism: maxP,
			MaterializeInterval: -1, MaterializeSize: -1, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cp.Close() })
		return cp
	}
	return open("mem", ""), open("disk", t.TempDir())
}

// errClass names the sentinel an error wraps, for comparing errors of the
// two stores.
func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, dstl.ErrKeyGroup):
		return "ErrKeyGroup"
	case errors.Is(err, statestore.ErrClosed):
		return "ErrClosed"
	case errors.Is(err, statestore.ErrSnapshotFormat):
		return "ErrSnapshotFormat"
	case errors.Is(err, statestore.ErrLogFormat):
		return "ErrLogFormat"
	}
	return "error"
}

func formatChanges(cs []statestore.Change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "[kg %d key %q value %q tombstone %v ts %d/%v] ", c.KeyGroup, c.Key, c.Value, c.Tombstone, c.Timestamp, c.HasTimestamp)
	}
	return b.String()
}

// history keeps the last operations, for failure messages.
type history struct{ ops []string }

func (h *history) add(s string) {
	if h.ops = append(h.ops, s); len(h.ops) > 12 {
		h.ops = h.ops[1:]
	}
}

func (h *history) String() string { return "last operations:\n\t" + strings.Join(h.ops, "\n\t") }

// keyIn returns a key of the form prefix%d whose key group is (or, with
// !in, is not) in kgr.
func keyIn(prefix string, maxP int, kgr dstl.KeyGroupRange, in bool) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		if kgr.Contains(statestore.KeyGroup([]byte(k), maxP)) == in {
			return k
		}
	}
}

// oddKeys are keys whose bytes test the escaping of keys on disk.
var oddKeys = []string{"", "\x00", "\x00\x00", "\x00\x01", "\x00\xff", "a", "a\x00", "a\x00\x01", "a\x00\xff", "a\x01",
	"a\xff", "a\xff\x00", "ab", "\xff", "\xff\x00", "\xff\xff", "\xff\xff\xff\x00"}

// winOp is one operation on a window store.
type winOp struct {
	kind      string
	key       string
	start, to int64
	val       string
	change    statestore.Change
}

func (o winOp) String() string {
	switch o.kind {
	case "put":
		return fmt.Sprintf("Put(%q, %d, %q)", o.key, o.start, o.val)
	case "del", "get":
		return fmt.Sprintf("%s(%q, %d)", o.kind, o.key, o.start)
	case "fetch":
		return fmt.Sprintf("Fetch(%q, %d, %d)", o.key, o.start, o.to)
	case "apply":
		return "ApplyChange(" + formatChanges([]statestore.Change{o.change}) + ")"
	case "logging":
		return fmt.Sprintf("SetLogging(%v)", o.val == "on")
	}
	return o.kind
}

func wPut(k string, start int64, v string) winOp {
	return winOp{kind: "put", key: k, start: start, val: v}
}
func wDel(k string, start int64) winOp      { return winOp{kind: "del", key: k, start: start} }
func wGet(k string, start int64) winOp      { return winOp{kind: "get", key: k, start: start} }
func wFetch(k string, from, to int64) winOp { return winOp{kind: "fetch", key: k, start: from, to: to} }
func wApply(c statestore.Change) winOp      { return winOp{kind: "apply", change: c} }
func wLogging(on bool) winOp {
	if on {
		return winOp{kind: "logging", val: "on"}
	}
	return winOp{kind: "logging"}
}

var (
	wClear       = winOp{kind: "clear"}
	wRestoreMem  = winOp{kind: "restore-mem"}  // both restore the memory store's payload
	wRestoreDisk = winOp{kind: "restore-disk"} // both restore the disk store's payload
	wCheck       = winOp{kind: "check"}        // compare the whole stores
)

// winPair is a window store in memory and the same on disk.
type winPair struct {
	maxP      int
	mem, disk *statestore.WindowStore[string, string]
	hist      history
}

func newWinPair(t testing.TB, maxP int, kgr dstl.KeyGroupRange, retention int64) *winPair {
	t.Helper()
	mcp, dcp := diskCheckpointers(t, maxP, kgr)
	p := &winPair{maxP: maxP}
	for _, x := range []struct {
		cp *statestore.Checkpointer
		s  **statestore.WindowStore[string, string]
	}{{mcp, &p.mem}, {dcp, &p.disk}} {
		s, err := statestore.NewWindowStore("win", x.cp.Log(), statestore.StringCodec{}, statestore.StringCodec{}, retention,
			statestore.WithMaxParallelism(maxP))
		if err != nil {
			t.Fatal(err)
		}
		if err := x.cp.Register(s); err != nil {
			t.Fatal(err)
		}
		*x.s = s
	}
	return p
}

// winResult runs o on s and describes the result.
func winResult(s *statestore.WindowStore[string, string], o winOp, payload []byte) string {
	switch o.kind {
	case "put":
		return errClass(s.Put(o.key, o.start, o.val))
	case "del":
		return errClass(s.Delete(o.key, o.start))
	case "get":
		v, ok, err := s.Get(o.key, o.start)
		return fmt.Sprintf("%q %v %s", v, ok, errClass(err))
	case "fetch":
		seq, err := s.Fetch(o.key, o.start, o.to)
		if err != nil {
			return errClass(err)
		}
		var b strings.Builder
		for start, v := range seq {
			fmt.Fprintf(&b, "%d=%q ", start, v)
		}
		return b.String()
	case "apply":
		return errClass(s.ApplyChange(o.change))
	case "logging":
		s.SetLogging(o.val == "on")
		return ""
	case "clear":
		s.Clear()
		return ""
	case "restore-mem", "restore-disk":
		return errClass(s.RestoreSnapshot(payload))
	}
	panic("unknown operation " + o.kind)
}

// dumpWindows describes everything a query sees of a window store.
func dumpWindows(s *statestore.WindowStore[string, string]) string {
	var b strings.Builder
	fmt.Fprintf(&b, "stream time %d, %d windows:", s.StreamTime(), s.Len())
	for w, v := range s.All() {
		fmt.Fprintf(&b, " %q@%d=%q", w.Key, w.Start, v)
	}
	return b.String()
}

// do runs o on both stores and fails t if they differ in the result, the
// stream time or the buffered changes (which it takes).
func (p *winPair) do(t testing.TB, o winOp) {
	t.Helper()
	p.hist.add(o.String())
	if o.kind == "check" {
		p.check(t)
		return
	}
	var payload []byte
	switch o.kind {
	case "restore-mem", "restore-disk":
		src := p.mem
		if o.kind == "restore-disk" {
			src = p.disk
		}
		var err error
		if payload, err = src.Snapshot(); err != nil {
			t.Fatalf("%v: snapshot: %v", o, err)
		}
	}
	if m, d := winResult(p.mem, o, payload), winResult(p.disk, o, payload); m != d {
		t.Fatalf("%v: memory %s, disk %s\n%v", o, m, d, &p.hist)
	}
	if m, d := p.mem.StreamTime(), p.disk.StreamTime(); m != d {
		t.Fatalf("%v: stream time: memory %d, disk %d\n%v", o, m, d, &p.hist)
	}
	if m, d := formatChanges(p.mem.TakeChanges()), formatChanges(p.disk.TakeChanges()); m != d {
		t.Fatalf("%v: changes:\nmemory %s\ndisk   %s\n%v", o, m, d, &p.hist)
	}
}

// check compares the whole stores: every window, Len, the stream time, the
// snapshot payloads (byte for byte) and Fetch over every key seen.
func (p *winPair) check(t testing.TB) {
	t.Helper()
	if m, d := dumpWindows(p.mem), dumpWindows(p.disk); m != d {
		t.Fatalf("stores differ:\nmemory %s\ndisk   %s\n%v", m, d, &p.hist)
	}
	keys := map[string]bool{}
	for w := range p.mem.All() {
		keys[w.Key] = true
	}
	for k := range keys {
		o := wFetch(k, math.MinInt64, math.MaxInt64)
		if m, d := winResult(p.mem, o, nil), winResult(p.disk, o, nil); m != d {
			t.Fatalf("%v: memory %s, disk %s\n%v", o, m, d, &p.hist)
		}
	}
	mp, err := p.mem.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	dp, err := p.disk.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mp, dp) {
		t.Fatalf("snapshot payloads differ:\nmemory %x\ndisk   %x\n%v", mp, dp, &p.hist)
	}
}

func TestWindowDiskMatchesMemory(t *testing.T) {
	const r = 10
	half := dstl.KeyGroupRange{Start: 0, End: maxP/2 - 1}
	mine, foreign := keyIn("k", maxP, half, true), keyIn("k", maxP, half, false)
	kgOf := func(k string) int { return statestore.KeyGroup([]byte(k), maxP) }
	put := func(k string, start int64, v string) statestore.Change {
		return statestore.Change{KeyGroup: kgOf(k), Key: []byte(k), Value: []byte(v), Timestamp: start, HasTimestamp: true}
	}
	tomb := func(k string, start int64) statestore.Change {
		return statestore.Change{KeyGroup: kgOf(k), Key: []byte(k), Tombstone: true, Timestamp: start, HasTimestamp: true}
	}
	meta := func(ts int64) statestore.Change {
		return statestore.Change{KeyGroup: dstl.MetaKeyGroup, Timestamp: ts, HasTimestamp: true}
	}
	var manyKeys []winOp
	for i := range 300 {
		manyKeys = append(manyKeys, wPut(fmt.Sprintf("key-%d", i), int64(i%20), fmt.Sprint(i)))
	}
	manyKeys = append(manyKeys, wCheck, wPut("last", 24, "x"), wGet("key-0", 0), wGet("key-15", 15), wCheck)
	var oddOps []winOp
	for i, k := range oddKeys {
		oddOps = append(oddOps, wPut(k, 1, fmt.Sprint(i)), wPut(k, -1, "neg"), wPut(k, 3, k))
	}
	for _, k := range oddKeys {
		oddOps = append(oddOps, wGet(k, 1), wGet(k, 2), wFetch(k, -1, 1), wFetch(k, 2, 3), wDel(k, -1))
	}
	oddOps = append(oddOps, wCheck)

	for _, tc := range []struct {
		name  string
		kgr   dstl.KeyGroupRange
		ops   []winOp
		check func(t *testing.T, s *statestore.WindowStore[string, string])
	}{
		{name: "basic", ops: []winOp{
			wPut("a", 0, "x"), wPut("a", 5, "y"), wPut("b", 3, "z"), wGet("a", 0), wGet("a", 5), wGet("b", 3), wGet("c", 0),
			wFetch("a", 0, 10), wFetch("a", 1, 4), wFetch("a", 5, 5), wFetch("a", 6, 1), wPut("a", 0, "x2"), wGet("a", 0),
			wDel("a", 5), wGet("a", 5), wDel("zz", 100), wPut("empty", 2, ""), wGet("empty", 2), wCheck,
		}, check: func(t *testing.T, s *statestore.WindowStore[string, string]) {
			if v, ok, _ := s.Get("a", 0); !ok || v != "x2" || s.Len() != 3 {
				t.Errorf("Get(a, 0) = %q, %v; Len %d, want x2, 3 windows", v, ok, s.Len())
			}
		}},
		{name: "expiry edges", ops: []winOp{
			wPut("a", 0, "x"), wPut("b", 9, "y"), wGet("a", 0), wCheck,
			wPut("c", 10, "z"), wGet("a", 0), wFetch("a", -5, 20), wCheck, // live from 1: a@0 expired
			wPut("a", 0, "late"), wPut("a", 1, "edge"), wGet("a", 1), wCheck,
			wPut("d", 20, "w"), wGet("c", 10), wGet("b", 9), wCheck, // live from 11
			wPut("d", 11, "edge"), wPut("d", 10, "late"), wCheck,
		}, check: func(t *testing.T, s *statestore.WindowStore[string, string]) {
			if s.Len() != 2 {
				t.Errorf("Len %d, want 2 (d@11, d@20)", s.Len())
			}
		}},
		{name: "late puts", ops: []winOp{
			wPut("a", 100, "x"), wPut("a", 50, "late"), wPut("a", 91, "edge"), wPut("a", 90, "late"), wPut("b", 95, "y"),
			wPut("a", 100, "again"), wFetch("a", 0, 200), wCheck,
		}},
		{name: "negative timestamps", ops: []winOp{
			wPut("a", -100, "x"), wPut("a", -95, "y"), wPut("b", -91, "z"), wFetch("a", -100, -90), wCheck,
			wPut("c", -89, "w"), wGet("a", -100), wGet("a", -95), wFetch("a", -1000, 0), wCheck,
			wPut("c", 5, "p"), wPut("c", -4, "q"), wPut("c", -5, "late"), wCheck,
		}},
		{name: "extreme timestamps", ops: []winOp{
			wPut("a", math.MinInt64, "min"), wGet("a", math.MinInt64), wFetch("a", math.MinInt64, math.MaxInt64),
			wPut("a", math.MinInt64+r-1, "x"), wGet("a", math.MinInt64), wCheck,
			wPut("a", math.MinInt64+r, "y"), wGet("a", math.MinInt64), wCheck,
			wPut("b", math.MaxInt64-1, "z"), wGet("a", math.MinInt64+r), wCheck,
			wPut("c", math.MaxInt64, "max"), wFetch("c", math.MaxInt64-1, math.MaxInt64), wGet("b", math.MaxInt64-1),
			wPut("d", math.MaxInt64-r+1, "edge"), wPut("d", math.MaxInt64-r, "late"), wFetch("d", math.MinInt64, math.MaxInt64), wCheck,
		}},
		{name: "keys with 0x00 and 0xFF", ops: oddOps, check: func(t *testing.T, s *statestore.WindowStore[string, string]) {
			var got []string
			for w := range s.All() {
				if w.Start == 1 {
					got = append(got, w.Key)
				}
			}
			if want := slices.Sorted(slices.Values(oddKeys)); !slices.Equal(got, want) {
				t.Errorf("All's keys %q, want %q", got, want)
			}
		}},
		{name: "many key groups", ops: manyKeys, check: func(t *testing.T, s *statestore.WindowStore[string, string]) {
			if got, want := s.Len(), 1+300*5/20; got != want { // starts 15..19 and 24 are live
				t.Errorf("Len %d, want %d", got, want)
			}
		}},
		{name: "deletions", ops: []winOp{
			wPut("a", 5, "x"), wDel("a", 5), wGet("a", 5), wPut("a", 5, "again"), wGet("a", 5), wCheck,
			wPut("b", 30, "y"), wDel("a", 5), wDel("a", -100), wPut("a", 5, "late"), wCheck,
		}},
		{name: "apply", kgr: half, ops: []winOp{
			wApply(put(mine, 5, "x")), wGet(mine, 5), wApply(put(mine, 7, "y")), wApply(tomb(mine, 5)), wGet(mine, 5), wCheck,
			wApply(meta(12)), wGet(mine, 7), wCheck, wApply(meta(18)), wGet(mine, 7), wApply(put(mine, 8, "late")), wCheck,
			wApply(meta(3)), wApply(put(foreign, 20, "z")), wApply(statestore.Change{KeyGroup: kgOf(mine), Key: []byte(mine), Value: []byte("v")}),
			wPut(foreign, 20, "z"), wGet(foreign, 20), wDel(foreign, 20), wCheck,
		}},
		{name: "logging", ops: []winOp{
			wLogging(false), wPut("a", 1, "x"), wDel("a", 1), wPut("a", 2, "y"), wLogging(true), wPut("a", 3, "z"), wDel("b", 3),
			wLogging(false), wPut("a", 4, "w"), wLogging(true), wCheck,
		}},
		{name: "clear", ops: []winOp{
			wPut("a", 100, "x"), wPut("b", 50, "late"), wClear, wGet("a", 100), wPut("b", 50, "now fine"), wPut("c", -5, "y"), wCheck,
		}},
		{name: "restore", ops: []winOp{
			wPut("a", 1, "x"), wPut("b", 2, "y"), wPut("\x00", 3, "z"), wRestoreMem, wCheck, wPut("a", 13, "w"), wRestoreDisk, wCheck,
			wPut("c", 12, "v"), wPut("c", 3, "late"), wClear, wRestoreMem, wCheck,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kgr := tc.kgr
			if kgr == (dstl.KeyGroupRange{}) {
				kgr = allGroups
			}
			p := newWinPair(t, maxP, kgr, r)
			for _, o := range tc.ops {
				p.do(t, o)
			}
			p.check(t)
			if tc.check != nil {
				tc.check(t, p.disk)
			}
		})
	}
}

// randomSeeds are the seeds of the randomized tests: fixed ones, and one
// of the moment (the test's name shows it).
func randomSeeds() []uint64 { return []uint64{1, 2, uint64(time.Now().UnixNano())} }

// randomKey picks among the odd keys and a few plain ones.
func randomKey(rng *rand.Rand) string {
	if rng.IntN(2) == 0 {
		return oddKeys[rng.IntN(len(oddKeys))]
	}
	return fmt.Sprintf("key-%d", rng.IntN(20))
}

func TestWindowDiskRandomized(t *testing.T) {
	for _, cfg := range []struct {
		maxP int
		kgr  dstl.KeyGroupRange
	}{
		{8, dstl.KeyGroupRange{Start: 0, End: 7}},
		{maxP, dstl.KeyGroupRange{Start: 0, End: maxP/2 - 1}}, // half the keys are foreign
	} {
		for _, seed := range randomSeeds() {
			t.Run(fmt.Sprintf("maxP=%d/seed=%d", cfg.maxP, seed), func(t *testing.T) {
				t.Parallel()
				const retention = 30
				rng := rand.New(rand.NewPCG(seed, 11))
				p := newWinPair(t, cfg.maxP, cfg.kgr, retention)
				now := -int64(rng.IntN(200))
				at := func() int64 { return now - int64(rng.IntN(2*retention)) }
				for i := range 3000 {
					now += int64(rng.IntN(4))
					if rng.IntN(400) == 0 {
						now += 3 * retention
					}
					k := randomKey(rng)
					var o winOp
					switch x := rng.IntN(200); {
					case x < 80:
						o = wPut(k, at(), fmt.Sprint(rng.IntN(100)))
					case x < 100:
						o = wDel(k, at())
					case x < 130:
						o = wGet(k, at())
					case x < 150:
						from := at()
						o = wFetch(k, from, from+int64(rng.IntN(retention)))
					case x < 170:
						c := statestore.Change{KeyGroup: statestore.KeyGroup([]byte(k), cfg.maxP), Key: []byte(k), Timestamp: at(), HasTimestamp: true}
						switch rng.IntN(3) {
						case 0:
							c.Value = []byte(fmt.Sprint(rng.IntN(100)))
						case 1:
							c.Tombstone = true
						default:
							c = statestore.Change{KeyGroup: dstl.MetaKeyGroup, Timestamp: now, HasTimestamp: true}
						}
						o = wApply(c)
					case x < 174:
						o = wLogging(rng.IntN(3) > 0)
					case x < 177:
						o = wRestoreMem
					case x < 180:
						o = wRestoreDisk
					case x < 181:
						o = wClear
					case x < 185 || i%500 == 0:
						o = wCheck
					default:
						o = wGet(k, at())
					}
					p.hist.add(fmt.Sprintf("(operation %d, seed %d)", i, seed))
					p.do(t, o)
				}
				p.check(t)
			})
		}
	}
}

func TestWindowDiskSnapshotRoundTrip(t *testing.T) {
	p := newWinPair(t, maxP, allGroups, 10)
	for i, k := range oddKeys {
		p.do(t, wPut(k, int64(i), k+"!"))
		p.do(t, wPut(k, int64(i-5), ""))
	}
	mp, err := p.mem.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	dp, err := p.disk.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mp, dp) {
		t.Fatalf("payloads differ:\nmemory %x\ndisk   %x", mp, dp)
	}
	// Into fresh disk stores: from memory and from disk, and disk into
	// memory; each must reproduce the store, and its own payload.
	for _, tc := range []struct {
		name    string
		payload []byte
	}{{"memory to disk", mp}, {"disk to disk", dp}} {
		t.Run(tc.name, func(t *testing.T) {
			q := newWinPair(t, maxP, allGroups, 10)
			for _, s := range []*statestore.WindowStore[string, string]{q.mem, q.disk} {
				if err := s.Put("stale", 1000, "x"); err != nil { // wiped by the restore
					t.Fatal(err)
				}
				if err := s.RestoreSnapshot(tc.payload); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := dumpWindows(q.disk), dumpWindows(p.mem); got != want {
				t.Errorf("restored:\n%s\nwant\n%s", got, want)
			}
			again, err := q.disk.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, mp) {
				t.Errorf("payload of the restored store differs")
			}
			q.check(t)
		})
	}
}

func TestWindowVersionedDiskNeedsEmptyStores(t *testing.T) {
	_, dcp := diskCheckpointers(t, maxP, allGroups)
	opt := statestore.WithMaxParallelism(maxP)
	w, err := statestore.NewWindowStore("win", dcp.Log(), statestore.StringCodec{}, statestore.StringCodec{}, 10, opt)
	if err != nil {
		t.Fatal(err)
	}
	v, err := statestore.NewVersionedStore("ver", dcp.Log(), statestore.StringCodec{}, statestore.StringCodec{}, 10, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		store  statestore.Store
		change func() error
	}{
		{"win", w, func() error { return w.Put("a", 1, "x") }},
		{"win", w, func() error { w.Clear(); return w.Delete("a", 1) }}, // a buffered change only
		{"ver", v, func() error { v.SetLogging(false); return v.Put("a", "x", 1) }},
	} {
		if err := tc.change(); err != nil {
			t.Fatal(err)
		}
		err := dcp.Register(tc.store)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.name)) {
			t.Errorf("Register of a store %q that is not empty: %v, want an error naming it", tc.name, err)
		}
	}
	w.Clear()
	v.Clear()
	if err := dcp.Register(w, v); err != nil {
		t.Fatalf("Register of the emptied stores: %v", err)
	}
	if err := w.Put("a", 1, "x"); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := w.Get("a", 1); err != nil || !ok || got != "x" {
		t.Errorf("Get = %q, %v, %v", got, ok, err)
	}
}

func TestWindowVersionedDiskClosed(t *testing.T) {
	q := newVerPair(t, maxP, allGroups, 10)
	q.do(t, vPut("a", "x", 1))
	if err := q.disk.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.disk.Put("a", "y", 2); !errors.Is(err, statestore.ErrClosed) {
		t.Errorf("versioned Put after Close: %v", err)
	}
	if _, _, _, err := q.disk.Get("a"); !errors.Is(err, statestore.ErrClosed) {
		t.Errorf("versioned Get after Close: %v", err)
	}
	if _, err := q.disk.History("a"); !errors.Is(err, statestore.ErrClosed) {
		t.Errorf("versioned History after Close: %v", err)
	}
	if _, err := q.disk.Snapshot(); !errors.Is(err, statestore.ErrClosed) {
		t.Errorf("versioned Snapshot after Close: %v", err)
	}
	for range q.disk.All() {
		t.Error("versioned All after Close yields")
	}

	p := newWinPair(t, maxP, allGroups, 10)
	p.do(t, wPut("a", 1, "x"))
	if err := p.disk.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.disk.Put("a", 2, "y"); !errors.Is(err, statestore.ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, _, err := p.disk.Get("a", 1); !errors.Is(err, statestore.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if err := p.disk.ApplyChange(statestore.Change{KeyGroup: dstl.MetaKeyGroup, Timestamp: 5, HasTimestamp: true}); !errors.Is(err, statestore.ErrClosed) {
		t.Errorf("ApplyChange after Close: %v", err)
	}
	if _, err := p.disk.Snapshot(); !errors.Is(err, statestore.ErrClosed) {
		t.Errorf("Snapshot after Close: %v", err)
	}
	if n := p.disk.Len(); n != 0 {
		t.Errorf("Len after Close: %d", n)
	}
	for range p.disk.All() {
		t.Error("All after Close yields")
	}
	p.disk.Clear() // must not touch the database
}

// TestWindowVersionedDiskConcurrent runs writers and readers of disk
// stores at once (for the race detector): loops read a snapshot while the
// stores change.
func TestWindowVersionedDiskConcurrent(t *testing.T) {
	w := newWinPair(t, maxP, allGroups, 20).disk
	v := newVerPair(t, maxP, allGroups, 20).disk
	done := make(chan struct{})
	errs := make(chan error, 4)
	for g := range 2 {
		go func() {
			var err error
			for i := range 500 {
				k := fmt.Sprintf("k%d-%d", g, i%30)
				err = errors.Join(err, w.Put(k, int64(i), "x"), v.Put(k, "x", int64(i)))
				if i%7 == 0 {
					err = errors.Join(err, w.Delete(k, int64(i-3)), v.Delete(k, int64(i)))
				}
			}
			errs <- err
		}()
	}
	go func() {
		defer close(done)
		for range 50 {
			n := 0
			for win := range w.All() {
				if n++; n%10 == 0 {
					_ = w.Put(win.Key, win.Start, "y") // the loop may change the store
				}
			}
			for k, vs := range v.All() {
				if len(vs) == 0 {
					errs <- fmt.Errorf("key %q without versions", k)
					return
				}
			}
			_, _ = w.Len(), v.Len()
			if seq, err := w.Fetch("k0-1", 0, 1000); err == nil {
				for range seq {
				}
			}
		}
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	<-done
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	// The writers share one stream time: when one runs ahead, the other's
	// puts fall behind the retention and are dropped, so only bounds hold.
	if nw, nv := w.Len(), v.Len(); nw == 0 || nv == 0 || nv > 60 {
		t.Errorf("Len: %d windows, %d keys (want some, at most 60 keys)", nw, nv)
	}
}
