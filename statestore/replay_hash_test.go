package statestore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

// TestRestoreRejectsWrongKeyGroup: a restore fails, naming the key groups
// and the change set, on a change whose key is of another key group than
// the one the log holds it in, whether that group is the instance's or
// not; and leaves the stores empty; for a key-value store in memory or on
// disk, and for a store that is not replayed in bulk (a window store). A
// log of right key groups restores.
func TestRestoreRejectsWrongKeyGroup(t *testing.T) {
	const maxP = 128
	kgr := dstl.KeyGroupRange{Start: 0, End: 63}
	// keyOf returns a key of a key group in or out of kgr.
	keyOf := func(prefix string, in bool) (string, int) {
		for i := 0; ; i++ {
			k := fmt.Sprintf("%s-%d", prefix, i)
			if kg := KeyGroup([]byte(k), maxP); kgr.Contains(kg) == in {
				return k, kg
			}
		}
	}
	inKey, inKG := keyOf("key", true)
	outKey, outKG := keyOf("key", false)
	good, _ := keyOf("good", true)
	other := (inKG + 1) % (kgr.End + 1) // another key group of the instance
	type store struct {
		len func() int
		put func(k string) error
	}
	for _, kind := range []string{"kv", "kv on disk", "window"} {
		for _, tc := range []struct {
			name string
			key  string
			kg   int      // the key group the log holds the change in
			want []string // in the error; none: the restore succeeds
		}{
			{"right key group", inKey, inKG, nil},
			{"another key group of the instance", inKey, other, []string{fmt.Sprintf("key group %d", inKG), fmt.Sprintf("key group %d", other), "change set"}},
			{"a key group of another instance", outKey, other, []string{fmt.Sprintf("key group %d", outKG), "outside", "change set"}},
		} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				backend := dstltest.NewBackend()
				open := func() (*Checkpointer, store) {
					cfg := dstl.DefaultConfig("mem://test")
					cfg.JobID = "job"
					cfg.BatchPersistDelay = dstl.NoBatchDelay
					storage, err := dstl.New(cfg, backend)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { storage.Close() })
					ccfg := Config{Operator: "op", KeyGroups: kgr, MaxParallelism: maxP, MaterializeInterval: -1, MaterializeSize: -1}
					if kind == "kv on disk" {
						ccfg.Dir = t.TempDir()
					}
					cp, err := NewCheckpointer(storage, ccfg)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { cp.Close() })
					var s internalStore
					var st store
					if kind == "window" {
						w, err := NewWindowStore("s", cp.Log(), StringCodec{}, StringCodec{}, 1<<40, WithMaxParallelism(maxP))
						if err != nil {
							t.Fatal(err)
						}
						s, st = w, store{w.Len, func(k string) error { return w.Put(k, 0, "g") }}
					} else {
						kv, err := NewKeyValueStore("s", cp.Log(), StringCodec{}, StringCodec{}, WithMaxParallelism(maxP))
						if err != nil {
							t.Fatal(err)
						}
						s, st = kv, store{kv.Len, func(k string) error { return kv.Put(k, "g") }}
					}
					if err := cp.Register(s); err != nil {
						t.Fatal(err)
					}
					return cp, st
				}
				cp, s := open()
				if err := s.put(good); err != nil {
					t.Fatal(err)
				}
				if err := cp.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				entry := appendChange(nil, "s", Change{KeyGroup: tc.kg, Key: []byte(tc.key), Value: []byte("v"), HasTimestamp: kind == "window"})
				if err := cp.Log().Append(ctx, tc.kg, entry); err != nil {
					t.Fatal(err)
				}
				h, err := cp.SnapshotState(ctx, CheckpointInfo{OperatorID: "op", CheckpointID: 1})
				if err != nil {
					t.Fatal(err)
				}
				cp2, s2 := open()
				err = cp2.InitializeState(ctx, CheckpointInfo{}, h)
				if tc.want == nil {
					if err != nil {
						t.Fatal(err)
					}
					if n := s2.len(); n != 2 {
						t.Fatalf("restored %d entries, want 2", n)
					}
					return
				}
				if !errors.Is(err, dstl.ErrKeyGroup) {
					t.Fatalf("restore: %v, want ErrKeyGroup", err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if n := s2.len(); n != 0 {
					t.Errorf("%d entries after a failed restore", n)
				}
			})
		}
	}
}

// TestKVReplayLast: the last change of each key is found among gathered
// changes whatever their hashes: distinct, one key's, or several keys'
// (colliding), interleaved, deletes included.
func TestKVReplayLast(t *testing.T) {
	type ch struct {
		key  string
		hash uint32
		del  bool
	}
	for _, tc := range []struct {
		name    string
		changes []ch
	}{
		{"distinct hashes", []ch{{"a", 1, false}, {"b", 2, false}, {"c", 3, true}}},
		{"one key", []ch{{"a", 7, false}, {"a", 7, true}, {"a", 7, false}}},
		{"colliding keys", []ch{
			{"b", 5, false}, {"a", 5, false}, {"c", 9, false}, {"b", 5, true},
			{"a", 5, false}, {"d", 5, false}, {"a", 5, true}, {"c", 9, false}, {"b", 5, false},
		}},
		{"colliding keys of many hashes", func() []ch {
			rng := rand.New(rand.NewPCG(3, 4))
			var cs []ch
			for range 5000 {
				k := rng.IntN(400)
				cs = append(cs, ch{fmt.Sprint(k), uint32(k % 37), rng.IntN(3) == 0})
			}
			return cs
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r kvReplay[int]
			want := map[string]int{} // key: index of its last change
			for i, c := range tc.changes {
				// Each change a new one, as the index may leave them.
				r.add([]byte(c.key), c.hash, c.del, i, true)
				want[c.key] = i
			}
			got := map[string]int{}
			for _, l := range r.last() {
				if _, ok := got[l.key]; ok {
					t.Fatalf("key %q twice", l.key)
				}
				op := r.op(l.i)
				if string(r.key(op)) != l.key || op.del != tc.changes[r.vals[l.i]].del {
					t.Fatalf("key %q: change %d of key %q", l.key, l.i, r.key(op))
				}
				got[l.key] = r.vals[l.i]
			}
			if !maps.Equal(got, want) {
				t.Fatalf("last changes %v, want %v", got, want)
			}
		})
	}
}

// TestSortByHash: pairs come out sorted, few or many (the radix sort).
func TestSortByHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{0, 1, 100, 1 << 10, 5000} {
		a := make([]uint64, n)
		for i := range a {
			a[i] = uint64(rng.Uint32()>>uint(rng.IntN(32)))<<32 | uint64(i)
		}
		want := slices.Clone(a)
		slices.Sort(want)
		if got := sortByHash(a); !slices.Equal(got, want) {
			t.Fatalf("%d pairs: not sorted by hash, then index", n)
		}
	}
}

// TestDecodeDataMatchesSlow: the short path of decodeEntry decodes what it
// takes as the general one does, and leaves it the rest: long names and
// keys, metadata, damaged entries.
func TestDecodeDataMatchesSlow(t *testing.T) {
	long := strings.Repeat("n", 200)
	data := func(name string, c Change) []byte { return appendChange(nil, name, c) }
	for _, tc := range []struct {
		name  string
		b     []byte
		kg    int
		short bool // the short path takes it
	}{
		{"put", data("kv", Change{Key: []byte("k"), Value: []byte("v")}), 3, true},
		{"empty value", data("kv", Change{Key: []byte("k"), Value: []byte{}}), 3, true},
		{"empty key", data("kv", Change{Key: []byte{}, Value: []byte("v")}), 3, true},
		{"tombstone", data("kv", Change{Key: []byte("k"), Tombstone: true}), 3, true},
		{"timestamp", data("win", Change{Key: []byte("k"), Value: []byte("v"), Timestamp: -300, HasTimestamp: true}), 3, true},
		{"timestamped tombstone", data("win", Change{Key: []byte("k"), Tombstone: true, Timestamp: 1 << 40, HasTimestamp: true}), 3, true},
		{"long name", data(long, Change{Key: []byte("k"), Value: []byte("v")}), 3, false},
		{"long key", data("kv", Change{Key: []byte(long), Value: []byte("v")}), 3, false},
		{"stream time", appendChange(nil, "win", Change{KeyGroup: dstl.MetaKeyGroup, Timestamp: 5}), dstl.MetaKeyGroup, false},
		{"data in the metadata", data("kv", Change{Key: []byte("k"), Value: []byte("v")}), dstl.MetaKeyGroup, false},
		{"tombstone with trailing bytes", append(data("kv", Change{Key: []byte("k"), Tombstone: true}), 1), 3, false},
		{"truncated key", data("kv", Change{Key: []byte("key")})[:6], 3, false},
		{"truncated timestamp", append([]byte{entryVersion, flagTimestamp, 1, 'n', 1, 'k'}, 0x80), 3, false},
		{"name to the end", []byte{entryVersion, 0, 2, 'k', 'v'}, 3, false},
		{"unknown flags", []byte{entryVersion, 4, 1, 'n', 1, 'k'}, 3, false},
		{"other version", []byte{entryVersion + 1, 0, 1, 'n', 1, 'k'}, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e entry
			if short := decodeData(tc.b, tc.kg, &e); short != tc.short {
				t.Fatalf("short path took it: %v, want %v", short, tc.short)
			}
			want, werr := decodeEntrySlow(tc.b, tc.kg)
			got, gerr := decodeEntry(tc.b, tc.kg)
			if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(got, want) {
				t.Fatalf("decodeEntry %+v, %v; the general path %+v, %v", got, gerr, want, werr)
			}
			if tc.short && !reflect.DeepEqual(e, want) {
				t.Fatalf("short path %+v, the general one %+v", e, want)
			}
		})
	}
}

// TestKVReplayBadKey: a key that does not decode fails the end of the
// replay with ErrLogFormat, and leaves the store as it was.
func TestKVReplayBadKey(t *testing.T) {
	s, err := NewKeyValueStore("kv", nil, Uint64Codec{}, StringCodec{}, WithMaxParallelism(16))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(7, "seven"); err != nil {
		t.Fatal(err)
	}
	good, _ := Uint64Codec{}.Encode(nil, 8)
	for _, kb := range [][]byte{good, []byte("short")} {
		if err := s.replayChange(Change{KeyGroup: KeyGroup(kb, 16), Key: kb, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.endReplay(); !errors.Is(err, ErrLogFormat) {
		t.Fatalf("end of a replay of an undecodable key: %v, want ErrLogFormat", err)
	}
	if v, ok, _ := s.Get(7); s.Len() != 1 || !ok || v != "seven" {
		t.Fatalf("after a failed replay: %d keys, 7: %q %v", s.Len(), v, ok)
	}
}

// TestKVReplayManyKeys: with more keys than the replay's index holds at
// first (so that it grows, and keys share its slots), interleaved, deleted
// and put again, a replay leaves the store as applying the changes one by
// one does; and so it does when it applies what it gathered early.
func TestKVReplayManyKeys(t *testing.T) {
	for _, ops := range []int{maxReplayOps, 3000} {
		t.Run(fmt.Sprintf("maxReplayOps=%d", ops), func(t *testing.T) {
			defer func(o int) { maxReplayOps = o }(maxReplayOps)
			maxReplayOps = ops
			newStore := func() *KeyValueStore[string, string] {
				s, err := NewKeyValueStore("kv", nil, StringCodec{}, StringCodec{}, WithMaxParallelism(16))
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			want, got := newStore(), newStore()
			rng := rand.New(rand.NewPCG(9, 9))
			for i := range 60000 {
				k := []byte(fmt.Sprintf("k%d", rng.IntN(20000)))
				c := Change{KeyGroup: KeyGroup(k, 16), Key: k, Value: []byte(fmt.Sprint(i))}
				if rng.IntN(5) == 0 {
					c.Value, c.Tombstone = nil, true
				}
				if err := want.ApplyChange(c); err != nil {
					t.Fatal(err)
				}
				if err := got.replayChange(c); err != nil {
					t.Fatal(err)
				}
				if got.replay.n > ops {
					t.Fatalf("after change %d: %d changes gathered", i, got.replay.n)
				}
			}
			if err := got.endReplay(); err != nil {
				t.Fatal(err)
			}
			w, g := map[string]string{}, map[string]string{}
			maps.Insert(w, want.All())
			maps.Insert(g, got.All())
			if len(w) < 1000 || !maps.Equal(w, g) {
				t.Fatalf("replayed %d keys, want %d", len(g), len(w))
			}
		})
	}
}

// TestKeyGroupOf: the key group of a hash is the hash modulo the maximum
// parallelism, a power of two or not.
func TestKeyGroupOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	hashes := []uint32{0, 1, 127, 128, 1<<31 - 1, 1 << 31, 1<<32 - 1}
	for range 100 {
		hashes = append(hashes, rng.Uint32())
	}
	for _, p := range []int{1, 2, 3, 7, 100, 128, 129, 1000, 1 << 15} {
		for _, h := range hashes {
			if got, want := keyGroupOf(h, p), int(h%uint32(p)); got != want {
				t.Fatalf("keyGroupOf(%#x, %d) = %d, want %d", h, p, got, want)
			}
		}
	}
}
