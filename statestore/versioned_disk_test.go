package statestore_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// verOp is one operation on a versioned store.
type verOp struct {
	kind   string
	key    string
	ts     int64
	val    string
	change statestore.Change
}

func (o verOp) String() string {
	switch o.kind {
	case "put":
		return fmt.Sprintf("Put(%q, %q, %d)", o.key, o.val, o.ts)
	case "del", "getAsOf":
		return fmt.Sprintf("%s(%q, %d)", o.kind, o.key, o.ts)
	case "get", "history":
		return fmt.Sprintf("%s(%q)", o.kind, o.key)
	case "apply":
		return "ApplyChange(" + formatChanges([]statestore.Change{o.change}) + ")"
	case "logging":
		return fmt.Sprintf("SetLogging(%v)", o.val == "on")
	}
	return o.kind
}

func vPut(k, v string, ts int64) verOp { return verOp{kind: "put", key: k, val: v, ts: ts} }
func vDel(k string, ts int64) verOp    { return verOp{kind: "del", key: k, ts: ts} }
func vGet(k string) verOp              { return verOp{kind: "get", key: k} }
func vAsOf(k string, ts int64) verOp   { return verOp{kind: "getAsOf", key: k, ts: ts} }
func vHistory(k string) verOp          { return verOp{kind: "history", key: k} }
func vApply(c statestore.Change) verOp { return verOp{kind: "apply", change: c} }
func vLogging(on bool) verOp           { return verOp{kind: "logging", val: map[bool]string{true: "on"}[on]} }
func vSimple(kind string) verOp        { return verOp{kind: kind} }
func vChange(k string, ts int64) verOp { return vApply(verChange(k, ts, nil)) }
func vMeta(ts int64) verOp {
	return vApply(statestore.Change{KeyGroup: dstl.MetaKeyGroup, Timestamp: ts, HasTimestamp: true})
}
func vApplyPut(k, v string, ts int64) verOp { return vApply(verChange(k, ts, []byte(v))) }

// verChange is a logged version of k (a deletion when value is nil).
func verChange(k string, ts int64, value []byte) statestore.Change {
	return statestore.Change{KeyGroup: statestore.KeyGroup([]byte(k), maxP), Key: []byte(k), Value: value,
		Tombstone: value == nil, Timestamp: ts, HasTimestamp: true}
}

var (
	vClear       = vSimple("clear")
	vRestoreMem  = vSimple("restore-mem")
	vRestoreDisk = vSimple("restore-disk")
	vCheck       = vSimple("check")
)

// verPair is a versioned store in memory and the same on disk.
type verPair struct {
	mem, disk *statestore.VersionedStore[string, string]
	hist      history
}

func newVerPair(t testing.TB, maxP int, kgr dstl.KeyGroupRange, retention int64) *verPair {
	t.Helper()
	mcp, dcp := diskCheckpointers(t, maxP, kgr)
	p := &verPair{}
	for _, x := range []struct {
		cp *statestore.Checkpointer
		s  **statestore.VersionedStore[string, string]
	}{{mcp, &p.mem}, {dcp, &p.disk}} {
		s, err := statestore.NewVersionedStore("ver", x.cp.Log(), statestore.StringCodec{}, statestore.StringCodec{}, retention,
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

func formatVersions(vs []statestore.Version[string]) string {
	var b strings.Builder
	for _, v := range vs {
		if v.Deleted {
			fmt.Fprintf(&b, "%d:deleted ", v.Timestamp)
		} else {
			fmt.Fprintf(&b, "%d:%q ", v.Timestamp, v.Value)
		}
	}
	return b.String()
}

func verResult(s *statestore.VersionedStore[string, string], o verOp, payload []byte) string {
	switch o.kind {
	case "put":
		return errClass(s.Put(o.key, o.val, o.ts))
	case "del":
		return errClass(s.Delete(o.key, o.ts))
	case "get":
		v, ts, ok, err := s.Get(o.key)
		return fmt.Sprintf("%q %d %v %s", v, ts, ok, errClass(err))
	case "getAsOf":
		v, ts, ok, err := s.GetAsOf(o.key, o.ts)
		return fmt.Sprintf("%q %d %v %s", v, ts, ok, errClass(err))
	case "history":
		vs, err := s.History(o.key)
		return fmt.Sprintf("%s%s (nil %v)", formatVersions(vs), errClass(err), vs == nil)
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

// dumpVersioned describes everything a query sees of a versioned store:
// the stream time, Len, every key's reachable versions, and what GetAsOf
// answers at each of their timestamps, just before them, and at the
// horizon and just before it.
func dumpVersioned(t testing.TB, s *statestore.VersionedStore[string, string]) string {
	t.Helper()
	var b strings.Builder
	st := s.StreamTime()
	fmt.Fprintf(&b, "stream time %d, %d keys:", st, s.Len())
	for k, vs := range s.All() {
		fmt.Fprintf(&b, "\n%q: %s|", k, formatVersions(vs))
		times := []int64{st, math.MaxInt64}
		if h := st - s.HistoryRetention(); st >= math.MinInt64+s.HistoryRetention() {
			times = append(times, h, h-1)
		}
		for _, v := range vs {
			times = append(times, v.Timestamp, v.Timestamp-1)
		}
		for _, at := range times {
			v, ts, ok, err := s.GetAsOf(k, at)
			fmt.Fprintf(&b, " @%d=%q,%d,%v,%s", at, v, ts, ok, errClass(err))
		}
	}
	return b.String()
}

func (p *verPair) do(t testing.TB, o verOp) {
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
	if m, d := verResult(p.mem, o, payload), verResult(p.disk, o, payload); m != d {
		t.Fatalf("%v: memory %s, disk %s\n%v", o, m, d, &p.hist)
	}
	if m, d := p.mem.StreamTime(), p.disk.StreamTime(); m != d {
		t.Fatalf("%v: stream time: memory %d, disk %d\n%v", o, m, d, &p.hist)
	}
	if m, d := formatChanges(p.mem.TakeChanges()), formatChanges(p.disk.TakeChanges()); m != d {
		t.Fatalf("%v: changes:\nmemory %s\ndisk   %s\n%v", o, m, d, &p.hist)
	}
}

// check compares the whole stores, their History and their snapshot
// payloads, byte for byte.
func (p *verPair) check(t testing.TB) {
	t.Helper()
	if m, d := dumpVersioned(t, p.mem), dumpVersioned(t, p.disk); m != d {
		t.Fatalf("stores differ:\nmemory %s\ndisk   %s\n%v", m, d, &p.hist)
	}
	for k := range p.mem.All() {
		if m, d := verResult(p.mem, vHistory(k), nil), verResult(p.disk, vHistory(k), nil); m != d {
			t.Fatalf("History(%q): memory %s, disk %s\n%v", k, m, d, &p.hist)
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

func TestVersionedDiskMatchesMemory(t *testing.T) {
	const r = 10
	half := dstl.KeyGroupRange{Start: 0, End: maxP/2 - 1}
	mine, foreign := keyIn("k", maxP, half, true), keyIn("k", maxP, half, false)
	var manyKeys []verOp
	for i := range 300 {
		manyKeys = append(manyKeys, vPut(fmt.Sprintf("key-%d", i), fmt.Sprint(i), int64(i%20)))
		if i%3 == 0 {
			manyKeys = append(manyKeys, vDel(fmt.Sprintf("key-%d", i), int64(i%20)+1))
		}
	}
	manyKeys = append(manyKeys, vCheck, vPut("last", "x", 40), vGet("key-0"), vAsOf("key-15", 30), vCheck)
	var oddOps []verOp
	for i, k := range oddKeys {
		oddOps = append(oddOps, vPut(k, fmt.Sprint(i), 1), vPut(k, "neg", -1), vDel(k, 2), vPut(k, k, 3))
	}
	for _, k := range oddKeys {
		oddOps = append(oddOps, vGet(k), vAsOf(k, 2), vAsOf(k, 1), vAsOf(k, 0), vHistory(k))
	}
	oddOps = append(oddOps, vCheck)

	for _, tc := range []struct {
		name      string
		kgr       dstl.KeyGroupRange
		retention int64
		ops       []verOp
		check     func(t *testing.T, s *statestore.VersionedStore[string, string])
	}{
		{name: "basic", ops: []verOp{
			vPut("a", "v1", 0), vPut("a", "v2", 5), vGet("a"), vAsOf("a", 3), vAsOf("a", 5), vAsOf("a", -1), vHistory("a"),
			vDel("a", 7), vGet("a"), vAsOf("a", 6), vHistory("a"), vPut("b", "", 2), vGet("b"), vHistory("c"), vGet("c"), vCheck,
		}, check: func(t *testing.T, s *statestore.VersionedStore[string, string]) {
			if v, ts, ok, _ := s.GetAsOf("a", 6); !ok || v != "v2" || ts != 5 || s.Len() != 2 {
				t.Errorf("GetAsOf(a, 6) = %q, %d, %v; Len %d, want v2 at 5, 2 keys", v, ts, ok, s.Len())
			}
		}},
		{name: "history retention edges", ops: []verOp{
			vPut("a", "x", 0), vPut("a", "y", 5), vPut("b", "z", 15), vAsOf("a", 4), vAsOf("a", 5), vHistory("a"), vCheck, // horizon 5
			vPut("a", "w", 16), vHistory("a"), vCheck, // prunes a@0
			vPut("c", "v", 20), vHistory("a"), vAsOf("a", 10), vAsOf("a", 9), vCheck, // horizon 10
			vPut("a", "late", 9), vPut("a", "q", 10), vHistory("a"), vAsOf("a", 10), vCheck,
			vPut("d", "far", 100), vHistory("a"), vGet("a"), vAsOf("a", 89), vAsOf("a", 90), vCheck,
		}, check: func(t *testing.T, s *statestore.VersionedStore[string, string]) {
			if vs, _ := s.History("a"); len(vs) != 1 || vs[0].Value != "w" {
				t.Errorf("History(a) = %v, want w alone", vs)
			}
		}},
		{name: "deletions", ops: []verOp{
			vDel("a", 3), vGet("a"), vHistory("a"), vPut("a", "x", 4), vDel("a", 6), vHistory("a"), vAsOf("a", 5), vCheck,
			vPut("b", "y", 30), vHistory("a"), vGet("a"), vAsOf("a", 20), vDel("a", 6), vPut("a", "again", 6), vCheck,
		}},
		{name: "replace a version", ops: []verOp{
			vPut("a", "x", 5), vPut("a", "y", 5), vGet("a"), vDel("a", 5), vGet("a"), vPut("a", "z", 5), vHistory("a"), vCheck,
		}},
		{name: "negative timestamps", ops: []verOp{
			vPut("a", "x", -100), vPut("a", "y", -95), vPut("b", "z", -85), vAsOf("a", -96), vAsOf("a", -95), vHistory("a"), vCheck,
			vPut("a", "w", -84), vHistory("a"), vPut("a", "late", -96), vCheck,
		}},
		{name: "extreme timestamps", ops: []verOp{
			vPut("a", "min", math.MinInt64), vAsOf("a", math.MinInt64), vGet("a"), vPut("a", "x", math.MinInt64+r), vHistory("a"), vCheck,
			vPut("a", "y", math.MinInt64+r+1), vPut("a", "z", math.MinInt64+r+2), vHistory("a"), vAsOf("a", math.MinInt64), vCheck,
			vPut("b", "max", math.MaxInt64), vAsOf("b", math.MaxInt64), vAsOf("b", math.MaxInt64-1), vHistory("a"),
			vPut("b", "edge", math.MaxInt64-r), vPut("b", "late", math.MaxInt64-r-1), vPut("a", "edge", math.MaxInt64-r),
			vHistory("a"), vHistory("b"), vCheck,
		}},
		{name: "no history retention", retention: -1, ops: []verOp{
			vPut("a", "x", 1), vPut("a", "y", 2), vHistory("a"), vAsOf("a", 1), vPut("a", "late", 1), vPut("a", "z", 3),
			vDel("a", 4), vHistory("a"), vPut("b", "w", 2), vCheck,
		}},
		{name: "keys with 0x00 and 0xFF", ops: oddOps, check: func(t *testing.T, s *statestore.VersionedStore[string, string]) {
			var got []string
			for k := range s.All() {
				got = append(got, k)
			}
			if want := slices.Sorted(slices.Values(oddKeys)); !slices.Equal(got, want) {
				t.Errorf("All's keys %q, want %q", got, want)
			}
		}},
		{name: "many key groups", ops: manyKeys, check: func(t *testing.T, s *statestore.VersionedStore[string, string]) {
			// The keys whose first change was not older than the stream
			// time minus the retention.
			keys, st := map[string]bool{}, int64(math.MinInt64)
			for _, o := range manyKeys {
				if o.kind == "put" || o.kind == "del" {
					if st = max(st, o.ts); o.ts >= st-r {
						keys[o.key] = true
					}
				}
			}
			if got := s.Len(); got != len(keys) || got < 100 {
				t.Errorf("Len %d, want %d", got, len(keys))
			}
		}},
		{name: "apply", kgr: half, ops: []verOp{
			vApplyPut(mine, "x", 5), vGet(mine), vApplyPut(mine, "y", 7), vChange(mine, 9), vGet(mine), vHistory(mine), vCheck,
			vMeta(30), vHistory(mine), vApplyPut(mine, "old", 3), vHistory(mine), vApplyPut(mine, "older", 19), vHistory(mine),
			vApplyPut(mine, "new", 21), vHistory(mine), vCheck, vMeta(3), vApplyPut(foreign, "z", 40), vPut(foreign, "z", 40),
			vGet(foreign), vHistory(foreign), vApply(statestore.Change{KeyGroup: statestore.KeyGroup([]byte(mine), maxP), Key: []byte(mine)}), vCheck,
		}},
		{name: "logging", ops: []verOp{
			vLogging(false), vPut("a", "x", 1), vDel("a", 2), vLogging(true), vPut("a", "y", 3), vDel("b", 3), vPut("a", "late", -20),
			vLogging(false), vPut("a", "w", 4), vLogging(true), vCheck,
		}},
		{name: "clear", ops: []verOp{
			vPut("a", "x", 100), vClear, vGet("a"), vPut("a", "y", 50), vPut("a", "z", -5), vHistory("a"), vCheck,
		}},
		{name: "restore", ops: []verOp{
			vPut("a", "x", 1), vPut("a", "y", 2), vDel("\x00", 3), vPut("b", "z", 20), vRestoreMem, vCheck, vPut("a", "w", 13),
			vRestoreDisk, vCheck, vPut("c", "v", 12), vClear, vRestoreMem, vCheck, vPut("a", "q", 30), vHistory("a"), vCheck,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kgr := tc.kgr
			if kgr == (dstl.KeyGroupRange{}) {
				kgr = allGroups
			}
			retention := tc.retention
			switch retention {
			case 0:
				retention = r
			case -1:
				retention = 0
			}
			p := newVerPair(t, maxP, kgr, retention)
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

func TestVersionedDiskRandomized(t *testing.T) {
	for _, cfg := range []struct {
		maxP      int
		kgr       dstl.KeyGroupRange
		retention int64
	}{
		{8, dstl.KeyGroupRange{Start: 0, End: 7}, 30},
		{maxP, dstl.KeyGroupRange{Start: 0, End: maxP/2 - 1}, 30}, // half the keys are foreign
		{8, dstl.KeyGroupRange{Start: 0, End: 7}, 0},
	} {
		for _, seed := range randomSeeds() {
			t.Run(fmt.Sprintf("maxP=%d/retention=%d/seed=%d", cfg.maxP, cfg.retention, seed), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(seed, 13))
				p := newVerPair(t, cfg.maxP, cfg.kgr, cfg.retention)
				now := -int64(rng.IntN(200))
				at := func() int64 { return now - int64(rng.IntN(2*int(cfg.retention)+5)) }
				for i := range 3000 {
					now += int64(rng.IntN(4))
					if rng.IntN(400) == 0 {
						now += 3*cfg.retention + 3
					}
					k := randomKey(rng)
					var o verOp
					switch x := rng.IntN(200); {
					case x < 80:
						o = vPut(k, fmt.Sprint(rng.IntN(100)), at())
					case x < 100:
						o = vDel(k, at())
					case x < 115:
						o = vGet(k)
					case x < 135:
						o = vAsOf(k, at())
					case x < 150:
						o = vHistory(k)
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
						o = vApply(c)
					case x < 174:
						o = vLogging(rng.IntN(3) > 0)
					case x < 177:
						o = vRestoreMem
					case x < 180:
						o = vRestoreDisk
					case x < 181:
						o = vClear
					case x < 185 || i%500 == 0:
						o = vCheck
					default:
						o = vGet(k)
					}
					p.hist.add(fmt.Sprintf("(operation %d, seed %d)", i, seed))
					p.do(t, o)
				}
				p.check(t)
			})
		}
	}
}

func TestVersionedDiskSnapshotRoundTrip(t *testing.T) {
	p := newVerPair(t, maxP, allGroups, 10)
	for i, k := range oddKeys {
		p.do(t, vPut(k, k+"!", int64(i)))
		p.do(t, vDel(k, int64(i+1)))
		p.do(t, vPut(k, "", int64(i+3)))
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
	for _, tc := range []struct {
		name    string
		payload []byte
	}{{"memory to disk", mp}, {"disk to disk", dp}} {
		t.Run(tc.name, func(t *testing.T) {
			q := newVerPair(t, maxP, allGroups, 10)
			for _, s := range []*statestore.VersionedStore[string, string]{q.mem, q.disk} {
				if err := s.Put("stale", "x", 1000); err != nil { // wiped by the restore
					t.Fatal(err)
				}
				if err := s.RestoreSnapshot(tc.payload); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := dumpVersioned(t, q.disk), dumpVersioned(t, p.mem); got != want {
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
