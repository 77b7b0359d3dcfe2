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

// winModel is what a window store of string keys and int64 values must
// hold: its stream time and the windows that are not expired.
type winModel struct {
	retention int64
	st        int64
	w         map[string]map[int64]int64 // key, window start: value
}

func newWinModel(retention int64) *winModel {
	return &winModel{retention: retention, st: math.MinInt64, w: map[string]map[int64]int64{}}
}

func (m *winModel) liveFrom() int64 {
	if m.st < math.MinInt64+m.retention {
		return math.MinInt64
	}
	return m.st - m.retention + 1
}

// advance raises the stream time and drops the expired windows.
func (m *winModel) advance(ts int64) {
	if ts <= m.st {
		return
	}
	m.st = ts
	live := m.liveFrom()
	for k, ws := range m.w {
		maps.DeleteFunc(ws, func(start int64, _ int64) bool { return start < live })
		if len(ws) == 0 {
			delete(m.w, k)
		}
	}
}

// put is WindowStore.Put: false when the window is expired.
func (m *winModel) put(k string, start, v int64) bool {
	m.advance(start)
	if start < m.liveFrom() {
		return false
	}
	if m.w[k] == nil {
		m.w[k] = map[int64]int64{}
	}
	m.w[k][start] = v
	return true
}

func (m *winModel) del(k string, start int64) {
	delete(m.w[k], start)
	if len(m.w[k]) == 0 {
		delete(m.w, k)
	}
}

func (m *winModel) get(k string, start int64) (int64, bool) {
	v, ok := m.w[k][start]
	return v, ok
}

// winEntry is one window, as All yields it.
type winEntry struct {
	Key   string
	Start int64
	V     int64
}

// sorted returns the windows by key then start; fetch those of one key in
// [from, to].
func (m *winModel) sorted() []winEntry {
	var es []winEntry
	for _, k := range slices.Sorted(maps.Keys(m.w)) {
		es = append(es, m.fetch(k, math.MinInt64, math.MaxInt64)...)
	}
	return es
}

func (m *winModel) fetch(k string, from, to int64) []winEntry {
	var es []winEntry
	for _, start := range slices.Sorted(maps.Keys(m.w[k])) {
		if start >= from && start <= to {
			es = append(es, winEntry{k, start, m.w[k][start]})
		}
	}
	return es
}

func (m *winModel) len() int {
	n := 0
	for _, ws := range m.w {
		n += len(ws)
	}
	return n
}

func (m *winModel) clone() *winModel {
	c := newWinModel(m.retention)
	c.st = m.st
	for k, ws := range m.w {
		c.w[k] = maps.Clone(ws)
	}
	return c
}

// checkWindow checks every read of s against m.
func checkWindow(t *testing.T, s *statestore.WindowStore[string, int64], m *winModel, rng *rand.Rand) {
	t.Helper()
	if got := s.StreamTime(); got != m.st {
		t.Errorf("store %q: stream time %d, want %d", s.Name(), got, m.st)
	}
	if got := s.Len(); got != m.len() {
		t.Errorf("store %q: Len %d, want %d", s.Name(), got, m.len())
	}
	var all []winEntry
	for w, v := range s.All() {
		all = append(all, winEntry{w.Key, w.Start, v})
	}
	sameSeq(t, fmt.Sprintf("store %q: All", s.Name()), all, m.sorted())
	for _, e := range m.sorted() {
		v, ok, err := s.Get(e.Key, e.Start)
		if err != nil || !ok || v != e.V {
			t.Errorf("store %q: Get(%q, %d) = %d, %v, %v; want %d", s.Name(), e.Key, e.Start, v, ok, err, e.V)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.w)) {
		from, to := int64(math.MinInt64), int64(math.MaxInt64)
		if rng != nil && rng.IntN(2) == 0 {
			from = m.st - rng.Int64N(m.retention+5)
			to = from + rng.Int64N(m.retention)
		}
		seq, err := s.Fetch(k, from, to)
		if err != nil {
			t.Errorf("store %q: Fetch(%q): %v", s.Name(), k, err)
			continue
		}
		var got []winEntry
		for start, v := range seq {
			got = append(got, winEntry{k, start, v})
		}
		sameSeq(t, fmt.Sprintf("store %q: Fetch(%q, %d, %d)", s.Name(), k, from, to), got, m.fetch(k, from, to))
	}
	if err := s.Err(); err != nil {
		t.Errorf("store %q: Err: %v", s.Name(), err)
	}
}

// winOp applies one random change to s and m, at time now: a put into a
// window from a little before the retention to now, or the deletion of a
// window that is there (or not).
func winOp(t *testing.T, rng *rand.Rand, s *statestore.WindowStore[string, int64], m *winModel, k string, now int64) {
	t.Helper()
	start := (now - rng.Int64N(m.retention+m.retention/4+1)) / 5 * 5
	if rng.IntN(4) == 0 {
		if ws := m.w[k]; len(ws) > 0 && rng.IntN(2) == 0 {
			start = slices.Sorted(maps.Keys(ws))[rng.IntN(len(ws))]
		}
		noErr(t, "window Delete", s.Delete(k, start))
		m.del(k, start)
		return
	}
	v := rng.Int64N(1000)
	noErr(t, "window Put", s.Put(k, start, v))
	m.put(k, start, v)
}

func runWindow(t *testing.T, newConfig func(*testing.T) statestore.Config) {
	const retention = 40
	open := func(t *testing.T) *statestore.Checkpointer {
		return newHarness(t, newConfig).checkpointer("op", allGroups, maxP)
	}

	t.Run("PutGetFetch", func(t *testing.T) {
		rng := newRand(t, "Window/PutGetFetch")
		s := newWindow(t, open(t), "win", retention)
		m := newWinModel(retention)
		if got := s.StreamTime(); got != math.MinInt64 {
			t.Errorf("stream time of an empty store %d", got)
		}
		if s.Retention() != retention {
			t.Errorf("Retention %d, want %d", s.Retention(), retention)
		}
		now := int64(0)
		for i := range 3000 {
			k := fmt.Sprintf("key-%d", rng.IntN(60))
			now += rng.Int64N(2)
			winOp(t, rng, s, m, k, now)
			if i%101 == 0 {
				start := (now - rng.Int64N(retention)) / 5 * 5
				want, wok := m.get(k, start)
				got, ok, err := s.Get(k, start)
				if err != nil || ok != wok || got != want {
					t.Fatalf("after op %d: Get(%q, %d) = %d, %v, %v; want %d, %v", i, k, start, got, ok, err, want, wok)
				}
			}
		}
		checkWindow(t, s, m, rng)
	})

	t.Run("Retention", func(t *testing.T) {
		s := newWindow(t, open(t), "win", 10)
		m := newWinModel(10)
		put := func(k string, start int64, kept bool) {
			t.Helper()
			noErr(t, "Put", s.Put(k, start, start))
			if m.put(k, start, start) != kept {
				t.Fatalf("the model disagrees with the test on Put(%q, %d)", k, start)
			}
			checkWindow(t, s, m, nil)
		}
		put("a", 0, true)
		put("a", 5, true)
		put("b", 9, true) // stream time 9: windows from 0 on live
		put("c", 10, true)
		if _, ok, _ := s.Get("a", 0); ok {
			t.Error("window a@0 kept past the retention (stream time 10, retention 10)")
		}
		s.TakeChanges()
		put("d", 0, false) // expired: dropped, not logged
		put("e", 1, true)
		checkChanges(t, s.TakeChanges(), []statestore.Change{{KeyGroup: statestore.KeyGroup([]byte("e"), maxP),
			Key: []byte("e"), Value: int64Bytes(1), Timestamp: 1, HasTimestamp: true}})
		// A put far ahead expires every window before it.
		put("f", 1000, true)
		if n := s.Len(); n != 1 {
			t.Errorf("Len %d after the stream time jumped, want 1", n)
		}
		// Delete does not move the stream time.
		noErr(t, "Delete", s.Delete("g", 5000))
		if st := s.StreamTime(); st != 1000 {
			t.Errorf("stream time %d after a Delete, want 1000", st)
		}
	})

	t.Run("Logging", func(t *testing.T) {
		s := newWindow(t, open(t), "win", retention)
		kg := func(k string) int { return statestore.KeyGroup([]byte(k), maxP) }
		noErr(t, "Put", s.Put("a", 10, 1))
		noErr(t, "Delete", s.Delete("b", 5))
		noErr(t, "Put", s.Put("a", 20, 2))
		checkChanges(t, s.TakeChanges(), []statestore.Change{
			{KeyGroup: kg("a"), Key: []byte("a"), Value: int64Bytes(1), Timestamp: 10, HasTimestamp: true},
			{KeyGroup: kg("b"), Key: []byte("b"), Tombstone: true, Timestamp: 5, HasTimestamp: true},
			{KeyGroup: kg("a"), Key: []byte("a"), Value: int64Bytes(2), Timestamp: 20, HasTimestamp: true},
			{KeyGroup: dstl.MetaKeyGroup, Timestamp: 20, HasTimestamp: true},
		})
		// An older window: logged, and the stream time is not again.
		noErr(t, "Put", s.Put("c", 15, 3))
		checkChanges(t, s.TakeChanges(), []statestore.Change{
			{KeyGroup: kg("c"), Key: []byte("c"), Value: int64Bytes(3), Timestamp: 15, HasTimestamp: true},
		})
		s.SetLogging(false)
		noErr(t, "Put", s.Put("d", 17, 4))
		noErr(t, "Delete", s.Delete("a", 10))
		checkChanges(t, s.TakeChanges(), nil)
		m := newWinModel(retention)
		m.put("a", 20, 2)
		m.put("c", 15, 3)
		m.put("d", 17, 4)
		checkWindow(t, s, m, nil)
	})

	t.Run("ApplyChange", func(t *testing.T) {
		rng := newRand(t, "Window/ApplyChange")
		cp := open(t)
		src, dst := newWindow(t, cp, "src", retention), newWindow(t, cp, "dst", retention)
		m := newWinModel(retention)
		now := int64(0)
		for range 1500 {
			now += rng.Int64N(2)
			winOp(t, rng, src, m, fmt.Sprintf("key-%d", rng.IntN(50)), now)
		}
		for _, c := range src.TakeChanges() {
			noErr(t, "ApplyChange", dst.ApplyChange(c))
		}
		checkWindow(t, dst, m, rng)
		checkChanges(t, dst.TakeChanges(), nil)
		// A stream time read back from the log expires windows.
		noErr(t, "ApplyChange of a stream time", dst.ApplyChange(statestore.Change{KeyGroup: dstl.MetaKeyGroup, Timestamp: now + 20, HasTimestamp: true}))
		m.advance(now + 20)
		checkWindow(t, dst, m, rng)
		// A put into an expired window is dropped here too.
		k := "key-1"
		noErr(t, "ApplyChange of an expired put", dst.ApplyChange(statestore.Change{KeyGroup: statestore.KeyGroup([]byte(k), maxP),
			Key: []byte(k), Value: int64Bytes(7), Timestamp: now - retention, HasTimestamp: true}))
		checkWindow(t, dst, m, rng)
		// A window change without a timestamp is not a window change.
		err := dst.ApplyChange(statestore.Change{KeyGroup: statestore.KeyGroup([]byte(k), maxP), Key: []byte(k), Value: int64Bytes(7)})
		wantErr(t, "ApplyChange without a timestamp", err, statestore.ErrLogFormat)
		err = dst.ApplyChange(statestore.Change{KeyGroup: statestore.KeyGroup([]byte(k), maxP), Key: []byte(k), Value: []byte("bad"),
			Timestamp: now + 20, HasTimestamp: true})
		wantErr(t, "ApplyChange of a bad value", err, statestore.ErrLogFormat)
		checkWindow(t, dst, m, rng)
	})

	t.Run("Errors", func(t *testing.T) {
		kgr := dstl.KeyGroupRange{Start: 0, End: 63}
		cp := newHarness(t, newConfig).checkpointer("op", kgr, maxP)
		s := newWindow(t, cp, "win", retention)
		in, out := ownedKey("in", kgr, maxP, true), ownedKey("out", kgr, maxP, false)
		noErr(t, "Put", s.Put(in, 1, 1))
		wantErr(t, "Put outside the key groups", s.Put(out, 1, 1), dstl.ErrKeyGroup)
		wantErr(t, "Delete outside the key groups", s.Delete(out, 1), dstl.ErrKeyGroup)
		_, _, err := s.Get(out, 1)
		wantErr(t, "Get outside the key groups", err, dstl.ErrKeyGroup)
		_, err = s.Fetch(out, 0, 10)
		wantErr(t, "Fetch outside the key groups", err, dstl.ErrKeyGroup)
		wantErr(t, "ApplyChange outside the key groups", s.ApplyChange(statestore.Change{KeyGroup: statestore.KeyGroup([]byte(out), maxP),
			Key: []byte(out), Value: int64Bytes(1), Timestamp: 1, HasTimestamp: true}), dstl.ErrKeyGroup)
		m := newWinModel(retention)
		m.put(in, 1, 1)
		checkWindow(t, s, m, nil)

		noErr(t, "Close", s.Close())
		wantErr(t, "Put", s.Put(in, 2, 2), statestore.ErrClosed)
		wantErr(t, "Delete", s.Delete(in, 1), statestore.ErrClosed)
		_, _, err = s.Get(in, 1)
		wantErr(t, "Get", err, statestore.ErrClosed)
		wantErr(t, "ApplyChange", s.ApplyChange(statestore.Change{KeyGroup: statestore.KeyGroup([]byte(in), maxP),
			Key: []byte(in), Value: int64Bytes(1), Timestamp: 1, HasTimestamp: true}), statestore.ErrClosed)
		wantErr(t, "Flush", s.Flush(ctx(t)), statestore.ErrClosed)
	})

	t.Run("Clear", func(t *testing.T) {
		rng := newRand(t, "Window/Clear")
		s := newWindow(t, open(t), "win", retention)
		m := newWinModel(retention)
		for i := range 200 {
			winOp(t, rng, s, m, fmt.Sprintf("key-%d", rng.IntN(20)), int64(i))
		}
		s.Clear()
		m = newWinModel(retention)
		checkWindow(t, s, m, nil)
		checkChanges(t, s.TakeChanges(), nil)
		noErr(t, "Put", s.Put("a", 3, 3))
		m.put("a", 3, 3)
		checkWindow(t, s, m, nil)
	})
}
