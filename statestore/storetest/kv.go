package storetest

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// kvModel is what a key-value store must hold: the entries by encoded key.
type kvModel[K, V comparable] struct {
	kc statestore.Codec[K]
	m  map[string]pair[K, V]
}

func newKVModel[K, V comparable](kc statestore.Codec[K]) *kvModel[K, V] {
	return &kvModel[K, V]{kc: kc, m: map[string]pair[K, V]{}}
}

func (m *kvModel[K, V]) enc(k K) string {
	b, err := m.kc.Encode(nil, k)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (m *kvModel[K, V]) put(k K, v V) { m.m[m.enc(k)] = pair[K, V]{k, v} }
func (m *kvModel[K, V]) del(k K)      { delete(m.m, m.enc(k)) }

// between returns the entries whose encoded key is in [lo, hi), hi nil
// meaning no bound, in the order of the encoded keys.
func (m *kvModel[K, V]) between(lo string, hi *string) []pair[K, V] {
	var ps []pair[K, V]
	for _, e := range slices.Sorted(maps.Keys(m.m)) {
		if e >= lo && (hi == nil || e < *hi) {
			ps = append(ps, m.m[e])
		}
	}
	return ps
}

func (m *kvModel[K, V]) withPrefix(p string) []pair[K, V] {
	var ps []pair[K, V]
	for _, e := range slices.Sorted(maps.Keys(m.m)) {
		if strings.HasPrefix(e, p) {
			ps = append(ps, m.m[e])
		}
	}
	return ps
}

// checkKV checks every read of s against m: Len, All, Get of every key.
func checkKV[K, V comparable](t *testing.T, s *statestore.KeyValueStore[K, V], m *kvModel[K, V]) {
	t.Helper()
	if got := s.Len(); got != len(m.m) {
		t.Errorf("store %q: Len %d, want %d", s.Name(), got, len(m.m))
	}
	sameSeq(t, fmt.Sprintf("store %q: All", s.Name()), collect(s.All()), m.between("", nil))
	for _, p := range m.m {
		v, ok, err := s.Get(p.K)
		if err != nil || !ok || v != p.V {
			t.Errorf("store %q: Get(%v) = %v, %v, %v; want %v", s.Name(), p.K, v, ok, err, p.V)
		}
	}
	if err := s.Err(); err != nil {
		t.Errorf("store %q: Err: %v", s.Name(), err)
	}
}

func runKeyValue(t *testing.T, newConfig func(*testing.T) statestore.Config) {
	// open returns a checkpointer owning every key group.
	open := func(t *testing.T) *statestore.Checkpointer {
		return newHarness(t, newConfig).checkpointer("op", allGroups, maxP)
	}
	str := statestore.StringCodec{}

	t.Run("PutGetDelete", func(t *testing.T) {
		rng := newRand(t, "KeyValue/PutGetDelete")
		s := newKV(t, open(t), "kv", str, str)
		m := newKVModel[string, string](str)
		if _, ok, err := s.Get("absent"); ok || err != nil {
			t.Errorf("Get of an absent key: %v, %v", ok, err)
		}
		noErr(t, "Delete of an absent key", s.Delete("absent"))
		for i := range 3000 {
			k := fmt.Sprintf("key-%d", rng.IntN(400))
			if rng.IntN(4) == 0 {
				noErr(t, "Delete", s.Delete(k))
				m.del(k)
			} else {
				v := fmt.Sprintf("v%d-%d", i, rng.IntN(100))
				noErr(t, "Put", s.Put(k, v))
				m.put(k, v)
			}
			if i%97 == 0 {
				want, wok := m.m[k]
				got, ok, err := s.Get(k)
				if err != nil || ok != wok || got != want.V {
					t.Fatalf("after op %d: Get(%q) = %q, %v, %v; want %q, %v", i, k, got, ok, err, want.V, wok)
				}
			}
		}
		checkKV(t, s, m)
		// Overwriting a key keeps one entry, with the last value.
		noErr(t, "Put", s.Put("same", "1"))
		noErr(t, "Put", s.Put("same", "2"))
		m.put("same", "2")
		checkKV(t, s, m)
	})

	t.Run("Order", func(t *testing.T) {
		rng := newRand(t, "KeyValue/Order")
		s := newKV(t, open(t), "kv", str, str)
		m := newKVModel[string, string](str)
		// Keys of every length and of the edge bytes, over many key
		// groups: the order is the encodings' across key groups.
		keys := []string{"", "\x00", "\x00\x00", "\x00\x01", "\x01", "a", "a\x00", "a\x00b", "a\xff", "a\xff\xff", "ab",
			"\xff", "\xff\x00", "\xff\xff", "\xff\xff\xff"}
		alphabet := "\x00\x01ab\xfe\xff"
		for range 600 {
			b := make([]byte, 1+rng.IntN(6))
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
			keys = append(keys, string(b))
		}
		groups := map[int]bool{}
		for i, k := range keys {
			noErr(t, "Put", s.Put(k, fmt.Sprint(i)))
			m.put(k, fmt.Sprint(i))
			groups[statestore.KeyGroup([]byte(k), maxP)] = true
		}
		if len(groups) < maxP/2 {
			t.Fatalf("the keys fall in %d key groups only", len(groups))
		}
		checkKV(t, s, m)
		bounds := append([]string{"", "\x00", "a", "a\xff", "b", "\xff", "\xff\xff\xff\xff"}, keys[:40]...)
		for range 60 {
			from, to := bounds[rng.IntN(len(bounds))], bounds[rng.IntN(len(bounds))]
			seq, err := s.Range(from, to)
			noErr(t, "Range", err)
			sameSeq(t, fmt.Sprintf("Range(%q, %q)", from, to), collect(seq), m.between(from, &to))
		}
		prefixes := []string{"", "\x00", "\x00\x00", "a", "a\x00", "a\xff", "ab", "\xff", "\xff\xff", "\xff\xff\xff\xff", "zz"}
		for _, k := range keys[20:60] {
			prefixes = append(prefixes, k[:rng.IntN(len(k)+1)])
		}
		for _, p := range prefixes {
			seq, err := s.PrefixScan(p)
			noErr(t, "PrefixScan", err)
			sameSeq(t, fmt.Sprintf("PrefixScan(%q)", p), collect(seq), m.withPrefix(p))
		}
		// A loop may stop early.
		n := 0
		for range s.All() {
			if n++; n == 10 {
				break
			}
		}
		if n != 10 {
			t.Errorf("a loop that breaks after 10 keys saw %d", n)
		}
	})

	t.Run("IterateWhileWriting", func(t *testing.T) {
		s := newKV(t, open(t), "kv", str, str)
		m := newKVModel[string, string](str)
		for i := range 300 {
			k := fmt.Sprintf("k%03d", i)
			noErr(t, "Put", s.Put(k, "v"))
			m.put(k, "v")
		}
		before := m.between("", nil)
		// The loop sees the store as it was when it began, whatever it
		// writes, and may read and write the store in its body.
		var got []pair[string, string]
		for k, v := range s.All() {
			got = append(got, pair[string, string]{k, v})
			noErr(t, "Delete", s.Delete(k))
			m.del(k)
			noErr(t, "Put", s.Put(k+"/new", "w"))
			m.put(k+"/new", "w")
			if _, ok, err := s.Get(k); ok || err != nil {
				t.Fatalf("Get(%q) in the loop after its Delete: %v, %v", k, ok, err)
			}
		}
		sameSeq(t, "All while writing", got, before)
		checkKV(t, s, m)
		before = m.withPrefix("k1")
		seq, err := s.PrefixScan("k1")
		noErr(t, "PrefixScan", err)
		got = nil
		for k, v := range seq {
			got = append(got, pair[string, string]{k, v})
			noErr(t, "Put", s.Put("k1"+k, "x")) // sorts after k, in the prefix
			m.put("k1"+k, "x")
		}
		sameSeq(t, "PrefixScan while writing", got, before)
		checkKV(t, s, m)
	})

	t.Run("Codecs", func(t *testing.T) {
		rng := newRand(t, "KeyValue/Codecs")
		cp := open(t)
		t.Run("Int64", func(t *testing.T) {
			s := newKV(t, cp, "int64", statestore.Int64Codec{}, statestore.Int64Codec{})
			m := newKVModel[int64, int64](statestore.Int64Codec{})
			for _, k := range []int64{math.MinInt64, -1 << 40, -3, -1, 0, 1, 2, 1 << 40, math.MaxInt64} {
				noErr(t, "Put", s.Put(k, -k))
				m.put(k, -k)
			}
			for range 300 {
				k := rng.Int64N(2000) - 1000
				noErr(t, "Put", s.Put(k, k*k))
				m.put(k, k*k)
			}
			checkKV(t, s, m)
			// The encodings sort like the numbers.
			prev := int64(math.MinInt64)
			for k := range s.All() {
				if k < prev {
					t.Fatalf("All yields %d after %d", k, prev)
				}
				prev = k
			}
			seq, err := s.Range(-5, 5)
			noErr(t, "Range", err)
			hi := m.enc(5)
			sameSeq(t, "Range(-5, 5)", collect(seq), m.between(m.enc(-5), &hi))
		})
		t.Run("Uint64", func(t *testing.T) {
			s := newKV(t, cp, "uint64", statestore.Uint64Codec{}, str)
			m := newKVModel[uint64, string](statestore.Uint64Codec{})
			for _, k := range []uint64{0, 1, 255, 256, 1 << 32, math.MaxUint64} {
				noErr(t, "Put", s.Put(k, fmt.Sprint(k)))
				m.put(k, fmt.Sprint(k))
			}
			for range 300 {
				k := rng.Uint64()
				noErr(t, "Put", s.Put(k, fmt.Sprint(k)))
				m.put(k, fmt.Sprint(k))
			}
			checkKV(t, s, m)
			seq, err := s.Range(1, 1<<32)
			noErr(t, "Range", err)
			hi := m.enc(1 << 32)
			sameSeq(t, "Range(1, 1<<32)", collect(seq), m.between(m.enc(1), &hi))
		})
		t.Run("JSON", func(t *testing.T) {
			type key struct {
				Tenant string
				ID     int
			}
			type value struct {
				Name  string
				Count int64
				OK    bool
			}
			kc := statestore.JSONCodec[key]{}
			s := newKV(t, cp, "json", kc, statestore.JSONCodec[value]{})
			m := newKVModel[key, value](kc)
			for i := range 300 {
				k := key{Tenant: fmt.Sprintf("t%d", rng.IntN(5)), ID: rng.IntN(100)}
				v := value{Name: fmt.Sprintf("n%d", i), Count: rng.Int64(), OK: i%2 == 0}
				noErr(t, "Put", s.Put(k, v))
				m.put(k, v)
			}
			checkKV(t, s, m)
			// Prefix scans follow the encodings: {"Tenant":"t1",...
			// PrefixScan takes a key, whose whole encoding is the
			// prefix: {"Tenant":"t1","ID":7} matches that key only.
			p := key{Tenant: "t1", ID: 7}
			noErr(t, "Put", s.Put(p, value{Name: "p"}))
			m.put(p, value{Name: "p"})
			seq, err := s.PrefixScan(p)
			noErr(t, "PrefixScan", err)
			want := m.withPrefix(m.enc(p))
			if len(want) != 1 {
				t.Fatalf("the model has %d keys of prefix %s", len(want), m.enc(p))
			}
			sameSeq(t, "PrefixScan of a whole key", collect(seq), want)
		})
	})

	t.Run("KeyGroups", func(t *testing.T) {
		kgr := dstl.KeyGroupRange{Start: 10, End: 20}
		cp := newHarness(t, newConfig).checkpointer("op", kgr, maxP)
		s := newKV(t, cp, "kv", str, str)
		m := newKVModel[string, string](str)
		for i := range 400 {
			k := fmt.Sprintf("k%d", i)
			err := s.Put(k, "v")
			if kgr.Contains(statestore.KeyGroup([]byte(k), maxP)) {
				noErr(t, "Put of an owned key", err)
				m.put(k, "v")
				continue
			}
			wantErr(t, fmt.Sprintf("Put(%q) of key group %d", k, statestore.KeyGroup([]byte(k), maxP)), err, dstl.ErrKeyGroup)
		}
		if len(m.m) == 0 {
			t.Fatal("no key in the key groups")
		}
		out := ownedKey("out", kgr, maxP, false)
		_, _, err := s.Get(out)
		wantErr(t, "Get of a key outside", err, dstl.ErrKeyGroup)
		wantErr(t, "Delete of a key outside", s.Delete(out), dstl.ErrKeyGroup)
		kg := statestore.KeyGroup([]byte(out), maxP)
		wantErr(t, "ApplyChange of a key outside",
			s.ApplyChange(statestore.Change{KeyGroup: kg, Key: []byte(out), Value: []byte("v")}), dstl.ErrKeyGroup)
		checkKV(t, s, m)
		for _, c := range s.TakeChanges() {
			if !kgr.Contains(c.KeyGroup) {
				t.Errorf("logged a change of key group %d", c.KeyGroup)
			}
		}
	})

	t.Run("Closed", func(t *testing.T) {
		s := newKV(t, open(t), "kv", str, str)
		noErr(t, "Put", s.Put("a", "1"))
		noErr(t, "Close", s.Close())
		wantErr(t, "Put", s.Put("b", "2"), statestore.ErrClosed)
		_, _, err := s.Get("a")
		wantErr(t, "Get", err, statestore.ErrClosed)
		wantErr(t, "Delete", s.Delete("a"), statestore.ErrClosed)
		wantErr(t, "ApplyChange", s.ApplyChange(statestore.Change{KeyGroup: statestore.KeyGroup([]byte("c"), maxP), Key: []byte("c"), Value: []byte("3")}), statestore.ErrClosed)
		wantErr(t, "Flush", s.Flush(ctx(t)), statestore.ErrClosed)
		if c := s.TakeChanges(); len(c) != 0 {
			t.Errorf("a closed store holds %d changes", len(c))
		}
	})

	t.Run("Logging", func(t *testing.T) {
		s := newKV(t, open(t), "kv", str, statestore.Int64Codec{})
		if !s.Logging() {
			t.Fatal("a store with a log does not log")
		}
		change := func(k string, v int64, tomb bool) statestore.Change {
			c := statestore.Change{KeyGroup: statestore.KeyGroup([]byte(k), maxP), Key: []byte(k), Tombstone: tomb}
			if !tomb {
				c.Value = int64Bytes(v)
			}
			return c
		}
		noErr(t, "Put", s.Put("a", 1))
		noErr(t, "Put", s.Put("b", 2))
		noErr(t, "Delete", s.Delete("a"))
		noErr(t, "Put", s.Put("b", 3))
		noErr(t, "Delete", s.Delete("never"))
		checkChanges(t, s.TakeChanges(), []statestore.Change{change("a", 1, false), change("b", 2, false), change("a", 0, true),
			change("b", 3, false), change("never", 0, true)})
		checkChanges(t, s.TakeChanges(), nil)
		s.SetLogging(false)
		if s.Logging() {
			t.Fatal("Logging after SetLogging(false)")
		}
		noErr(t, "Put", s.Put("c", 4))
		noErr(t, "Delete", s.Delete("b"))
		checkChanges(t, s.TakeChanges(), nil)
		m := newKVModel[string, int64](str)
		m.put("c", 4)
		checkKV(t, s, m)
		s.SetLogging(true)
		noErr(t, "Put", s.Put("d", 5))
		m.put("d", 5)
		checkChanges(t, s.TakeChanges(), []statestore.Change{change("d", 5, false)})
		// Flush appends and forgets the buffered changes.
		noErr(t, "Put", s.Put("e", 6))
		m.put("e", 6)
		noErr(t, "Flush", s.Flush(ctx(t)))
		checkChanges(t, s.TakeChanges(), nil)
		checkKV(t, s, m)
	})

	t.Run("ApplyChange", func(t *testing.T) {
		rng := newRand(t, "KeyValue/ApplyChange")
		cp := open(t)
		src := newKV(t, cp, "src", str, statestore.Int64Codec{})
		dst := newKV(t, cp, "dst", str, statestore.Int64Codec{})
		m := newKVModel[string, int64](str)
		for i := range 1000 {
			k := fmt.Sprintf("key-%d", rng.IntN(200))
			if rng.IntN(3) == 0 {
				noErr(t, "Delete", src.Delete(k))
				m.del(k)
				continue
			}
			noErr(t, "Put", src.Put(k, int64(i)))
			m.put(k, int64(i))
		}
		// What src logged, applied to dst, makes the same store, and
		// logs nothing again.
		for _, c := range src.TakeChanges() {
			noErr(t, "ApplyChange", dst.ApplyChange(c))
		}
		checkKV(t, dst, m)
		checkKV(t, src, m)
		checkChanges(t, dst.TakeChanges(), nil)
		// A stream time (metadata) means nothing to a key-value store.
		noErr(t, "ApplyChange of a stream time", dst.ApplyChange(statestore.Change{KeyGroup: dstl.MetaKeyGroup, Timestamp: 5, HasTimestamp: true}))
		// A value the codec does not decode is a log format error, and
		// changes nothing.
		k := "key-1"
		err := dst.ApplyChange(statestore.Change{KeyGroup: statestore.KeyGroup([]byte(k), maxP), Key: []byte(k), Value: []byte("bad")})
		wantErr(t, "ApplyChange of a bad value", err, statestore.ErrLogFormat)
		checkKV(t, dst, m)
		// Logging off changes nothing to ApplyChange.
		dst.SetLogging(false)
		noErr(t, "ApplyChange", dst.ApplyChange(statestore.Change{KeyGroup: statestore.KeyGroup([]byte(k), maxP), Key: []byte(k), Tombstone: true}))
		m.del(k)
		checkKV(t, dst, m)
	})

	t.Run("Clear", func(t *testing.T) {
		cp := open(t)
		s := newKV(t, cp, "kv", str, str)
		other := newKV(t, cp, "kv2", str, str)
		for i := range 200 {
			noErr(t, "Put", s.Put(fmt.Sprint(i), "v"))
			noErr(t, "Put", other.Put(fmt.Sprint(i), "w"))
		}
		s.Clear()
		m := newKVModel[string, string](str)
		checkKV(t, s, m)
		checkChanges(t, s.TakeChanges(), nil)
		noErr(t, "Put", s.Put("after", "x"))
		m.put("after", "x")
		checkKV(t, s, m)
		// Clearing one store leaves the others of the checkpointer.
		if n := other.Len(); n != 200 {
			t.Errorf("the other store holds %d keys after Clear, want 200", n)
		}
	})

	t.Run("Stores", func(t *testing.T) {
		// Stores of one checkpointer hold the same keys apart, whatever
		// their names (one a prefix of the other).
		cp := open(t)
		a, ab := newKV(t, cp, "a", str, str), newKV(t, cp, "ab", str, str)
		ma, mab := newKVModel[string, string](str), newKVModel[string, string](str)
		for i := range 100 {
			k := fmt.Sprint(i)
			noErr(t, "Put", a.Put(k, "a"+k))
			ma.put(k, "a"+k)
			if i%2 == 0 {
				noErr(t, "Put", ab.Put(k, "ab"+k))
				mab.put(k, "ab"+k)
			}
		}
		checkKV(t, a, ma)
		checkKV(t, ab, mab)
	})
}

// checkChanges compares logged changes, in order.
func checkChanges(t *testing.T, got, want []statestore.Change) {
	t.Helper()
	str := func(cs []statestore.Change) []string {
		var s []string
		for _, c := range cs {
			s = append(s, fmt.Sprintf("kg %d key %q value %q tombstone %v timestamp %d/%v",
				c.KeyGroup, c.Key, c.Value, c.Tombstone, c.Timestamp, c.HasTimestamp))
		}
		return s
	}
	sameSeq(t, "changes", str(got), str(want))
}

// fillKV fills s and a model with n random changes over a key space.
func fillKV(t *testing.T, rng *rand.Rand, s *statestore.KeyValueStore[string, string], m *kvModel[string, string], n, space int) {
	t.Helper()
	for i := range n {
		k := fmt.Sprintf("key-%d", rng.IntN(space))
		if rng.IntN(5) == 0 {
			noErr(t, "Delete", s.Delete(k))
			m.del(k)
			continue
		}
		v := strings.Repeat("v", rng.IntN(20)) + fmt.Sprint(i)
		noErr(t, "Put", s.Put(k, v))
		m.put(k, v)
	}
}
