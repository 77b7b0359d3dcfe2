package storetest

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

type version = statestore.Version[string]

// verModel is what a versioned store of string keys and values must
// answer: its stream time and every version it accepted, by key. Queries
// see the versions that the history retention still reaches.
type verModel struct {
	retention int64
	st        int64
	v         map[string][]version // by timestamp
}

func newVerModel(retention int64) *verModel {
	return &verModel{retention: retention, st: math.MinInt64, v: map[string][]version{}}
}

func (m *verModel) horizon() int64 {
	if m.st < math.MinInt64+m.retention {
		return math.MinInt64
	}
	return m.st - m.retention
}

// change is VersionedStore.Put and Delete: false when the version is
// older than the history retention reaches.
func (m *verModel) change(k string, ver version) bool {
	m.st = max(m.st, ver.Timestamp)
	if ver.Timestamp < m.horizon() {
		return false
	}
	m.insert(k, ver)
	return true
}

func (m *verModel) insert(k string, ver version) {
	vs := m.v[k]
	i, found := slices.BinarySearchFunc(vs, ver.Timestamp, func(v version, ts int64) int {
		return int(min(max(v.Timestamp-ts, -1), 1))
	})
	if found {
		vs[i] = ver
	} else {
		vs = slices.Insert(vs, i, ver)
	}
	m.v[k] = vs
}

// history returns the versions of k that a query reaches: the one valid
// at the horizon and the later ones.
func (m *verModel) history(k string) []version {
	vs, h := m.v[k], m.horizon()
	i := len(vs)
	for i > 0 && vs[i-1].Timestamp > h {
		i--
	}
	if i > 0 && (i == len(vs) || vs[i].Timestamp > h) {
		i--
	}
	return slices.Clone(vs[i:])
}

// getAsOf answers GetAsOf: value, timestamp of the version, ok.
func (m *verModel) getAsOf(k string, asOf int64) (string, int64, bool) {
	if asOf < m.horizon() {
		return "", 0, false
	}
	vs := m.v[k]
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].Timestamp <= asOf {
			if vs[i].Deleted {
				return "", vs[i].Timestamp, false
			}
			return vs[i].Value, vs[i].Timestamp, true
		}
	}
	return "", 0, false
}

func (m *verModel) clone() *verModel {
	c := newVerModel(m.retention)
	c.st = m.st
	for k, vs := range m.v {
		c.v[k] = slices.Clone(vs)
	}
	return c
}

// checkVersioned checks every read of s against m.
func checkVersioned(t *testing.T, s *statestore.VersionedStore[string, string], m *verModel) {
	t.Helper()
	if got := s.StreamTime(); got != m.st {
		t.Errorf("store %q: stream time %d, want %d", s.Name(), got, m.st)
	}
	if got := s.Len(); got != len(m.v) {
		t.Errorf("store %q: Len %d, want %d", s.Name(), got, len(m.v))
	}
	type keyHistory struct {
		k  string
		vs string
	}
	var got, want []keyHistory
	for k, vs := range s.All() {
		got = append(got, keyHistory{k, fmt.Sprint(vs)})
	}
	keys := slices.Sorted(maps.Keys(m.v))
	for _, k := range keys {
		want = append(want, keyHistory{k, fmt.Sprint(m.history(k))})
	}
	sameSeq(t, fmt.Sprintf("store %q: All", s.Name()), got, want)
	h := m.horizon()
	if owned("absent", s.KeyGroups(), s.MaxParallelism()) && m.v["absent"] == nil {
		keys = append(keys, "absent")
	}
	for _, k := range keys {
		hist, err := s.History(k)
		if err != nil {
			t.Errorf("store %q: History(%q): %v", s.Name(), k, err)
		}
		sameSeq(t, fmt.Sprintf("store %q: History(%q)", s.Name(), k), hist, m.history(k))
		times := []int64{math.MaxInt64, m.st, h, h + 1, h - 1, m.st - m.retention/2, math.MinInt64}
		for _, ver := range m.v[k] {
			times = append(times, ver.Timestamp, ver.Timestamp-1)
		}
		for _, at := range times {
			v, ts, ok, err := s.GetAsOf(k, at)
			wv, wts, wok := m.getAsOf(k, at)
			if err != nil || v != wv || ts != wts || ok != wok {
				t.Errorf("store %q: GetAsOf(%q, %d) = %q, %d, %v, %v; want %q, %d, %v", s.Name(), k, at, v, ts, ok, err, wv, wts, wok)
			}
		}
		v, ts, ok, err := s.Get(k)
		wv, wts, wok := m.getAsOf(k, math.MaxInt64)
		if err != nil || v != wv || ts != wts || ok != wok {
			t.Errorf("store %q: Get(%q) = %q, %d, %v, %v; want %q, %d, %v", s.Name(), k, v, ts, ok, err, wv, wts, wok)
		}
	}
	if err := s.Err(); err != nil {
		t.Errorf("store %q: Err: %v", s.Name(), err)
	}
}

// verOp applies one random change to s and m at time now: a put or a
// deletion at a time from a little before the history retention to now.
func verOp(t *testing.T, rng *rand.Rand, s *statestore.VersionedStore[string, string], m *verModel, k string, now int64) {
	t.Helper()
	ts := now - rng.Int64N(m.retention+m.retention/4+1)
	if rng.IntN(5) == 0 {
		noErr(t, "versioned Delete", s.Delete(k, ts))
		m.change(k, version{Timestamp: ts, Deleted: true})
		return
	}
	v := fmt.Sprintf("v%d", rng.IntN(1000))
	noErr(t, "versioned Put", s.Put(k, v, ts))
	m.change(k, version{Timestamp: ts, Value: v})
}

func runVersioned(t *testing.T, newConfig func(*testing.T) statestore.Config) {
	const retention = 30
	open := func(t *testing.T) *statestore.Checkpointer {
		return newHarness(t, newConfig).checkpointer("op", allGroups, maxP)
	}

	t.Run("PutGetAsOf", func(t *testing.T) {
		rng := newRand(t, "Versioned/PutGetAsOf")
		s := newVersioned(t, open(t), "ver", retention)
		m := newVerModel(retention)
		if s.HistoryRetention() != retention {
			t.Errorf("HistoryRetention %d, want %d", s.HistoryRetention(), retention)
		}
		if st := s.StreamTime(); st != math.MinInt64 {
			t.Errorf("stream time of an empty store %d", st)
		}
		now := int64(-100) // negative times too
		for i := range 3000 {
			k := fmt.Sprintf("key-%d", rng.IntN(80))
			now += rng.Int64N(2)
			verOp(t, rng, s, m, k, now)
			if i%97 == 0 {
				at := now - rng.Int64N(retention+10)
				v, ts, ok, err := s.GetAsOf(k, at)
				wv, wts, wok := m.getAsOf(k, at)
				if err != nil || v != wv || ts != wts || ok != wok {
					t.Fatalf("after op %d: GetAsOf(%q, %d) = %q, %d, %v, %v; want %q, %d, %v", i, k, at, v, ts, ok, err, wv, wts, wok)
				}
			}
		}
		checkVersioned(t, s, m)
	})

	t.Run("HistoryRetention", func(t *testing.T) {
		s := newVersioned(t, open(t), "ver", 10)
		m := newVerModel(10)
		change := func(k, v string, ts int64, deleted, kept bool) {
			t.Helper()
			if deleted {
				noErr(t, "Delete", s.Delete(k, ts))
			} else {
				noErr(t, "Put", s.Put(k, v, ts))
			}
			if m.change(k, version{Timestamp: ts, Value: v, Deleted: deleted}) != kept {
				t.Fatalf("the model disagrees with the test on the change of %q at %d", k, ts)
			}
			checkVersioned(t, s, m)
		}
		change("a", "v1", 0, false, true)
		change("a", "v2", 5, false, true)
		change("a", "v3", 20, false, true) // horizon 10: v2 is the value at 10
		if hist, _ := s.History("a"); len(hist) != 2 || hist[0].Value != "v2" {
			t.Errorf("History(a) = %v, want v2 at 5 and v3 at 20", hist)
		}
		if _, _, ok, _ := s.GetAsOf("a", 9); ok {
			t.Error("GetAsOf(a, 9) found a value older than the history retention reaches")
		}
		s.TakeChanges()
		change("a", "old", 9, false, false) // dropped, not logged
		change("b", "x", 10, false, true)   // at the horizon: kept
		change("a", "v3'", 20, false, true) // replaces the version at 20
		change("a", "", 25, true, true)     // a deletion is a version
		if _, ts, ok, _ := s.Get("a"); ok || ts != 25 {
			t.Errorf("Get(a) after its deletion at 25: ok %v, timestamp %d", ok, ts)
		}
		kg := func(k string) int { return statestore.KeyGroup([]byte(k), maxP) }
		checkChanges(t, s.TakeChanges(), []statestore.Change{
			{KeyGroup: kg("b"), Key: []byte("b"), Value: []byte("x"), Timestamp: 10, HasTimestamp: true},
			{KeyGroup: kg("a"), Key: []byte("a"), Value: []byte("v3'"), Timestamp: 20, HasTimestamp: true},
			{KeyGroup: kg("a"), Key: []byte("a"), Tombstone: true, Timestamp: 25, HasTimestamp: true},
			{KeyGroup: dstl.MetaKeyGroup, Timestamp: 25, HasTimestamp: true},
		})
		// With no history retention, only the latest version is
		// reachable, and an older put is dropped.
		s0 := newVersioned(t, open(t), "ver0", 0)
		m0 := newVerModel(0)
		noErr(t, "Put", s0.Put("c", "1", 30))
		noErr(t, "Put", s0.Put("c", "2", 29))
		noErr(t, "Put", s0.Put("d", "3", 30))
		m0.change("c", version{Timestamp: 30, Value: "1"})
		m0.change("c", version{Timestamp: 29, Value: "2"})
		m0.change("d", version{Timestamp: 30, Value: "3"})
		checkVersioned(t, s0, m0)
	})

	t.Run("ApplyChange", func(t *testing.T) {
		rng := newRand(t, "Versioned/ApplyChange")
		cp := open(t)
		src, dst := newVersioned(t, cp, "src", retention), newVersioned(t, cp, "dst", retention)
		m := newVerModel(retention)
		now := int64(0)
		for range 1500 {
			now += rng.Int64N(2)
			verOp(t, rng, src, m, fmt.Sprintf("key-%d", rng.IntN(50)), now)
		}
		for _, c := range src.TakeChanges() {
			noErr(t, "ApplyChange", dst.ApplyChange(c))
		}
		checkVersioned(t, dst, m)
		checkChanges(t, dst.TakeChanges(), nil)
		noErr(t, "ApplyChange of a stream time", dst.ApplyChange(statestore.Change{KeyGroup: dstl.MetaKeyGroup, Timestamp: now + 7, HasTimestamp: true}))
		m.st = max(m.st, now+7)
		checkVersioned(t, dst, m)
		k := "key-1"
		err := dst.ApplyChange(statestore.Change{KeyGroup: statestore.KeyGroup([]byte(k), maxP), Key: []byte(k), Value: []byte("v")})
		wantErr(t, "ApplyChange without a timestamp", err, statestore.ErrLogFormat)
		checkVersioned(t, dst, m)
	})

	t.Run("Errors", func(t *testing.T) {
		kgr := dstl.KeyGroupRange{Start: 64, End: 127}
		cp := newHarness(t, newConfig).checkpointer("op", kgr, maxP)
		s := newVersioned(t, cp, "ver", retention)
		in, out := ownedKey("in", kgr, maxP, true), ownedKey("out", kgr, maxP, false)
		noErr(t, "Put", s.Put(in, "v", 1))
		wantErr(t, "Put outside the key groups", s.Put(out, "v", 1), dstl.ErrKeyGroup)
		wantErr(t, "Delete outside the key groups", s.Delete(out, 1), dstl.ErrKeyGroup)
		_, _, _, err := s.Get(out)
		wantErr(t, "Get outside the key groups", err, dstl.ErrKeyGroup)
		_, _, _, err = s.GetAsOf(out, 1)
		wantErr(t, "GetAsOf outside the key groups", err, dstl.ErrKeyGroup)
		_, err = s.History(out)
		wantErr(t, "History outside the key groups", err, dstl.ErrKeyGroup)
		wantErr(t, "ApplyChange outside the key groups", s.ApplyChange(statestore.Change{KeyGroup: statestore.KeyGroup([]byte(out), maxP),
			Key: []byte(out), Value: []byte("v"), Timestamp: 1, HasTimestamp: true}), dstl.ErrKeyGroup)
		m := newVerModel(retention)
		m.change(in, version{Timestamp: 1, Value: "v"})
		checkVersioned(t, s, m)

		noErr(t, "Close", s.Close())
		wantErr(t, "Put", s.Put(in, "w", 2), statestore.ErrClosed)
		wantErr(t, "Delete", s.Delete(in, 2), statestore.ErrClosed)
		_, _, _, err = s.Get(in)
		wantErr(t, "Get", err, statestore.ErrClosed)
		_, _, _, err = s.GetAsOf(in, 1)
		wantErr(t, "GetAsOf", err, statestore.ErrClosed)
		wantErr(t, "ApplyChange", s.ApplyChange(statestore.Change{KeyGroup: statestore.KeyGroup([]byte(in), maxP),
			Key: []byte(in), Value: []byte("v"), Timestamp: 1, HasTimestamp: true}), statestore.ErrClosed)
		wantErr(t, "Flush", s.Flush(ctx(t)), statestore.ErrClosed)
	})

	t.Run("Clear", func(t *testing.T) {
		rng := newRand(t, "Versioned/Clear")
		s := newVersioned(t, open(t), "ver", retention)
		m := newVerModel(retention)
		for i := range 200 {
			verOp(t, rng, s, m, fmt.Sprintf("key-%d", rng.IntN(20)), int64(i))
		}
		s.Clear()
		m = newVerModel(retention)
		checkVersioned(t, s, m)
		checkChanges(t, s.TakeChanges(), nil)
		noErr(t, "Put", s.Put("a", "x", 3))
		m.change("a", version{Timestamp: 3, Value: "x"})
		checkVersioned(t, s, m)
	})
}
