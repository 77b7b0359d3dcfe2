package statestore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

// replayCase is a key-value store of one pair of codecs, and how to make
// its keys and values from numbers.
type replayCase struct {
	name  string
	store func() (internalStore, func() map[string]string)
	put   func(s internalStore, k, v int) Change
}

func kvReplayCase[K, V any](name string, kc Codec[K], vc Codec[V], key func(int) K, value func(int) V) replayCase {
	return replayCase{
		name: name,
		store: func() (internalStore, func() map[string]string) {
			s, err := NewKeyValueStore("kv", nil, kc, vc, WithMaxParallelism(16))
			if err != nil {
				panic(err)
			}
			return s, func() map[string]string {
				m := map[string]string{}
				for k, v := range s.All() {
					m[fmt.Sprint(k)] = fmt.Sprint(v)
				}
				return m
			}
		},
		put: func(_ internalStore, k, v int) Change {
			kb, _ := kc.Encode(nil, key(k))
			c := Change{KeyGroup: KeyGroup(kb, 16), Key: kb}
			if v < 0 {
				c.Tombstone = true
				return c
			}
			c.Value, _ = vc.Encode(nil, value(v))
			return c
		},
	}
}

// TestKVReplayMatchesApplyChange: a restore's replay (replayChange, then
// endReplay) leaves a key-value store as applying the same changes one by
// one does, with string keys and values (used as their own encodings) and
// with other codecs, into an empty store and into one that a snapshot
// filled, with values that grow and shrink and keys deleted and put again.
func TestKVReplayMatchesApplyChange(t *testing.T) {
	cases := []replayCase{
		kvReplayCase("string", StringCodec{}, StringCodec{},
			func(i int) string { return fmt.Sprintf("key-%d", i) },
			func(i int) string {
				if i%13 == 0 {
					return "" // an empty value, as its first or a later one
				}
				return strings.Repeat("v", i%37) + fmt.Sprint(i)
			}),
		kvReplayCase("uint64-json", Uint64Codec{}, JSONCodec[[]int]{},
			func(i int) uint64 { return uint64(i) * 7919 },
			func(i int) []int { return make([]int, i%5) }),
		kvReplayCase("bytes", BytesCodec{}, BytesCodec{},
			func(i int) []byte { return []byte{byte(i), byte(i >> 8)} },
			func(i int) []byte { return []byte(strings.Repeat("b", i%11)) }),
	}
	for _, tc := range cases {
		for _, snapshot := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/snapshot=%v", tc.name, snapshot), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, 2))
				var changes []Change
				for range 5000 {
					v := rng.IntN(1000)
					if rng.IntN(4) == 0 {
						v = -1
					}
					changes = append(changes, tc.put(nil, rng.IntN(300), v))
				}
				want, wantDump := tc.store()
				got, gotDump := tc.store()
				if snapshot {
					for i := range 200 {
						c := tc.put(nil, i*2, i)
						for _, s := range []internalStore{want, got} {
							if err := s.ApplyChange(c); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
				for _, c := range changes {
					if err := want.ApplyChange(c); err != nil {
						t.Fatal(err)
					}
					if err := got.(replayer).replayChange(c); err != nil {
						t.Fatal(err)
					}
				}
				if err := got.(replayer).endReplay(); err != nil {
					t.Fatal(err)
				}
				w, g := wantDump(), gotDump()
				if len(w) == 0 || !maps.Equal(w, g) {
					t.Fatalf("replayed %d keys, want %d:\n got %v\nwant %v", len(g), len(w), g, w)
				}
			})
		}
	}
}

// TestKVReplayBadValue: a value that does not decode fails the replay of
// its change with ErrLogFormat, even when a later change of the key would
// replace it.
func TestKVReplayBadValue(t *testing.T) {
	s, err := NewKeyValueStore("kv", nil, StringCodec{}, Uint64Codec{}, WithMaxParallelism(16))
	if err != nil {
		t.Fatal(err)
	}
	c := Change{KeyGroup: KeyGroup([]byte("k"), 16), Key: []byte("k"), Value: []byte("short")}
	if err := s.replayChange(c); !errors.Is(err, ErrLogFormat) {
		t.Fatalf("replay of an undecodable value: %v, want ErrLogFormat", err)
	}
	other := Change{KeyGroup: 0, Key: []byte("k"), Value: make([]byte, 8)}
	s2, _ := NewKeyValueStore("kv", nil, StringCodec{}, Uint64Codec{}, WithMaxParallelism(16), WithKeyGroups(dstl.KeyGroupRange{Start: (KeyGroup([]byte("k"), 16) + 1) % 16, End: (KeyGroup([]byte("k"), 16) + 1) % 16}))
	if err := s2.replayChange(other); !errors.Is(err, dstl.ErrKeyGroup) {
		t.Fatalf("replay of a key of another key group: %v, want ErrKeyGroup", err)
	}
}

// TestKVReplayClearedOnFailure: a Clear (as a failed restore does) drops
// what a replay gathered.
func TestKVReplayClearedOnFailure(t *testing.T) {
	s, _ := NewKeyValueStore("kv", nil, StringCodec{}, StringCodec{}, WithMaxParallelism(16))
	if err := s.replayChange(Change{KeyGroup: KeyGroup([]byte("k"), 16), Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	s.Clear()
	if err := s.endReplay(); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 0 {
		t.Fatalf("%d keys after a Clear", s.Len())
	}
}

// TestBufferedChangesDoNotAlias: TakeChanges returns the buffered changes
// in order, with their key groups, values and tombstones, as copies:
// changing their bytes does not change the store (whose string keys are
// their own encodings); and it forgets them.
func TestBufferedChangesDoNotAlias(t *testing.T) {
	s, err := NewKeyValueStore("kv", nil, StringCodec{}, StringCodec{}, WithMaxParallelism(16))
	if err != nil {
		t.Fatal(err)
	}
	s.log = &dstl.Writer{} // logging needs a log; TakeChanges never uses it
	s.SetLogging(true)
	for i := range 3 {
		if err := s.Put(fmt.Sprintf("key-%d", i), fmt.Sprintf("value-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete("key-1"); err != nil {
		t.Fatal(err)
	}
	cs := s.TakeChanges()
	var got []string
	for _, c := range cs {
		got = append(got, fmt.Sprintf("%d %s=%q %v", c.KeyGroup, c.Key, c.Value, c.Tombstone))
		for i := range c.Key {
			c.Key[i] = 'X'
		}
	}
	var want []string
	for i, k := range []string{"key-0", "key-1", "key-2", "key-1"} {
		v := fmt.Sprintf("%q false", "value-"+k[4:])
		if i == 3 {
			v = `"" true`
		}
		want = append(want, fmt.Sprintf("%d %s=%s", KeyGroup([]byte(k), 16), k, v))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("buffered changes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if v, ok, _ := s.Get("key-2"); !ok || v != "value-2" {
		t.Fatalf("key-2 after its logged change was changed: %q %v", v, ok)
	}
	if len(s.TakeChanges()) != 0 {
		t.Fatal("TakeChanges did not forget the changes")
	}
}

// TestFlushKeepsUnappendedChanges: a flush whose append fails keeps
// buffered exactly the changes it did not append, in order: from the first
// that failed when it fails part-way (a log whose writer owns only some of
// the store's key groups), all of them when the log refuses every append.
func TestFlushKeepsUnappendedChanges(t *testing.T) {
	cfg := dstl.DefaultConfig("mem://test")
	cfg.JobID = "job"
	storage, err := dstl.New(cfg, dstltest.NewBackend())
	if err != nil {
		t.Fatal(err)
	}
	defer storage.Close()
	// lo keys fall in key groups 0–7, hi keys in 8–15.
	var lo, hi []string
	for i := 0; len(lo) < 4 || len(hi) < 2; i++ {
		k := fmt.Sprint("k", i)
		if KeyGroup([]byte(k), 16) < 8 {
			lo = append(lo, k)
		} else {
			hi = append(hi, k)
		}
	}
	for _, tc := range []struct {
		name   string
		writer dstl.KeyGroupRange
		closed bool // the writer is closed before the flush
		keys   []string
		left   int // the changes left buffered: the last left of keys
	}{
		{"part way", dstl.KeyGroupRange{Start: 0, End: 7}, false, []string{lo[0], lo[1], hi[0], lo[2], hi[1], lo[3]}, 4},
		{"closed log", dstl.KeyGroupRange{Start: 0, End: 15}, true, []string{lo[0], hi[0], lo[1]}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := storage.NewWriter("op-"+strings.ReplaceAll(tc.name, " ", "-"), tc.writer)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			// The store owns every key group; its log, fewer.
			s, err := NewKeyValueStore("kv", nil, StringCodec{}, StringCodec{}, WithMaxParallelism(16))
			if err != nil {
				t.Fatal(err)
			}
			s.log = w
			s.SetLogging(true)
			for _, k := range tc.keys {
				if err := s.Put(k, "v"+k); err != nil {
					t.Fatal(err)
				}
			}
			if tc.closed {
				w.Close()
			}
			err = s.Flush(context.Background())
			switch {
			case tc.closed && !errors.Is(err, dstl.ErrClosed):
				t.Fatalf("flush into a closed log: %v, want ErrClosed", err)
			case !tc.closed && !errors.Is(err, dstl.ErrKeyGroup):
				t.Fatalf("flush of a key group outside the log's: %v, want ErrKeyGroup", err)
			}
			var left, want []string
			for _, c := range s.TakeChanges() {
				left = append(left, fmt.Sprintf("%s=%s", c.Key, c.Value))
			}
			for _, k := range tc.keys[len(tc.keys)-tc.left:] {
				want = append(want, k+"=v"+k)
			}
			if g, w := strings.Join(left, " "), strings.Join(want, " "); g != w {
				t.Fatalf("left buffered: %s, want %s", g, w)
			}
		})
	}
}

// TestKVReplayEmptyValue: an empty value, first of a replay or replacing a
// longer one, is restored as an empty value, not as no value.
func TestKVReplayEmptyValue(t *testing.T) {
	s, _ := NewKeyValueStore("kv", nil, StringCodec{}, StringCodec{}, WithMaxParallelism(16))
	change := func(k, v string) Change {
		return Change{KeyGroup: KeyGroup([]byte(k), 16), Key: []byte(k), Value: []byte(v)}
	}
	for _, c := range []Change{change("a", ""), change("b", "long"), change("b", ""), change("c", "x")} {
		if err := s.replayChange(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.endReplay(); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"a": "", "b": "", "c": "x"} {
		if v, ok, err := s.Get(k); err != nil || !ok || v != want {
			t.Errorf("%s: %q %v %v, want %q", k, v, ok, err, want)
		}
	}
}

// TestKVReplayFlushesAtLimits: a replay applies what it gathered once it
// holds maxReplayOps keys, or maxReplayValueBytes bytes of string values
// (the slots that values outgrew included), in the middle of a key's
// changes, and still leaves the store as applying the changes one by one
// does, over a snapshot, with deletes on both sides of the flush. A value
// that grows in the slot that ends the values takes no new one.
func TestKVReplayFlushesAtLimits(t *testing.T) {
	change := func(k, v string, del bool) Change {
		c := Change{KeyGroup: KeyGroup([]byte(k), 16), Key: []byte(k), Tombstone: del}
		if !del {
			c.Value = []byte(v)
		}
		return c
	}
	// mixed: changes of a few keys before and after a run of new keys
	// that passes the key limit.
	mixed := func(ops int) []Change {
		cs := []Change{
			change("A", "a1", false),
			change("B", "", true), // a delete of an absent key
			change("C", "c1", false),
			change("S1", "", true),
			change("S2", "s2-log", false),
		}
		for i := len(cs); i < ops+2; i++ {
			cs = append(cs, change(fmt.Sprintf("f%07d", i), "x", false))
		}
		return append(cs,
			change("new", "n", false),
			change("A", "a2", false),
			change("A", "", true),
			change("B", "b2", false),
			change("C", "", true),
			change("C", "c3", false),
			change("S1", "s1-again", false),
			change("S2", "", true),
		)
	}
	// growing: values of two keys that grow at each change, so that each
	// takes a new slot, with deletes between.
	growing := func(n int) []Change {
		var cs []Change
		for i := 1; i <= n; i++ {
			cs = append(cs, change("A", strings.Repeat("a", i), false))
			if i%50 == 0 {
				cs = append(cs, change("B", "", true), change("S1", "", true))
			} else {
				cs = append(cs, change("B", strings.Repeat("b", i/2), false))
			}
		}
		return cs
	}
	// oneKey: the value of one key grows at each change, in its slot at
	// the end of the values.
	oneKey := func(n int) []Change {
		var cs []Change
		for i := 1; i <= n; i++ {
			cs = append(cs, change("A", strings.Repeat("x", i), false))
		}
		return cs
	}
	for _, tc := range []struct {
		name       string
		ops, bytes int // the limits
		changes    []Change
		inPlace    bool // the values held are no more than the longest
	}{
		{"keys", 8, 64 << 20, mixed(8), false},
		{"value bytes", 1 << 20, 4 << 10, growing(400), false},
		{"both", 8, 1 << 10, append(mixed(8), growing(100)...), false},
		{"one key growing", 1 << 20, 64 << 20, oneKey(4000), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(ops, bytes int) { maxReplayOps, maxReplayValueBytes = ops, bytes }(maxReplayOps, maxReplayValueBytes)
			maxReplayOps, maxReplayValueBytes = tc.ops, tc.bytes
			newStore := func() *KeyValueStore[string, string] {
				s, err := NewKeyValueStore("kv", nil, StringCodec{}, StringCodec{}, WithMaxParallelism(16))
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range []Change{change("S1", "snap", false), change("S2", "snap", false)} {
					if err := s.ApplyChange(c); err != nil {
						t.Fatal(err)
					}
				}
				return s
			}
			want, got := newStore(), newStore()
			longest := 0
			for i, c := range tc.changes {
				longest = max(longest, len(c.Value))
				if err := want.ApplyChange(c); err != nil {
					t.Fatal(err)
				}
				if err := got.replayChange(c); err != nil {
					t.Fatal(err)
				}
				held := 0
				for _, v := range got.replay.values {
					held += len(v)
				}
				if got.replay.n > tc.ops || held > tc.bytes+longest || (tc.inPlace && held > longest) {
					t.Fatalf("after change %d: gathered %d keys and %d bytes of values, limits %d keys, %d bytes",
						i, got.replay.n, held, tc.ops, tc.bytes)
				}
			}
			if err := got.endReplay(); err != nil {
				t.Fatal(err)
			}
			w, g := map[string]string{}, map[string]string{}
			for k, v := range want.All() {
				w[k] = v
			}
			for k, v := range got.All() {
				g[k] = v
			}
			if len(w) == 0 || !maps.Equal(w, g) {
				t.Fatalf("replayed %d keys, want %d:\n got %v\nwant %v", len(g), len(w), g, w)
			}
		})
	}
}
