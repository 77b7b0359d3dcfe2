package statestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/dstlgo/dstl/dstl"
)

// murmurCollisions returns pairs of distinct uint64 keys (Uint64Codec
// encoding) whose murmur3 hashes are equal.
func murmurCollisions(n int, enc func(i uint64) []byte) [][2][]byte {
	seen := map[uint32][]byte{}
	var out [][2][]byte
	for i := uint64(0); len(out) < n; i++ {
		k := enc(i)
		h := murmur3(k, 0)
		if o, ok := seen[h]; ok && !bytes.Equal(o, k) {
			out = append(out, [2][]byte{o, k})
			delete(seen, h)
			continue
		}
		seen[h] = k
	}
	return out
}

// TestReplayMatchesModelString: a replay of random puts and deletes, with
// murmur3-colliding keys, tiny limits forcing early flushes, a prefilled
// store or not, leaves the store as a map model of the log says.
func TestReplayMatchesModelString(t *testing.T) {
	coll := murmurCollisions(6, func(i uint64) []byte { return []byte(fmt.Sprintf("c%d", i)) })
	defer func(o, b int) { maxReplayOps, maxReplayValueBytes = o, b }(maxReplayOps, maxReplayValueBytes)
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 77))
		maxReplayOps = []int{1, 2, 3, 5, 17, 1 << 20}[rng.IntN(6)]
		maxReplayValueBytes = []int{1, 4, 16, 100, 64 << 20}[rng.IntN(5)]
		var universe [][]byte
		for _, c := range coll[:1+rng.IntN(len(coll))] {
			universe = append(universe, c[0], c[1])
		}
		for i := range rng.IntN(300) {
			universe = append(universe, []byte(fmt.Sprintf("k%d", i)))
		}
		s, err := NewKeyValueStore("kv", nil, StringCodec{}, StringCodec{}, WithMaxParallelism(8))
		if err != nil {
			t.Fatal(err)
		}
		model := map[string]string{}
		if rng.IntN(2) == 0 {
			for _, k := range universe {
				if rng.IntN(2) == 0 {
					if err := s.Put(string(k), "pre"); err != nil {
						t.Fatal(err)
					}
					model[string(k)] = "pre"
				}
			}
		}
		nops := rng.IntN(3000)
		for i := range nops {
			k := universe[rng.IntN(len(universe))]
			c := Change{KeyGroup: KeyGroup(k, 8), Key: k}
			if rng.IntN(3) == 0 {
				c.Tombstone = true
				delete(model, string(k))
			} else {
				v := fmt.Sprintf("%d-%s", i, bytes.Repeat([]byte{'x'}, rng.IntN(12)))
				if rng.IntN(10) == 0 {
					v = ""
				}
				c.Value = []byte(v)
				model[string(k)] = v
			}
			if err := s.replayChange(c); err != nil {
				t.Fatal(err)
			}
			if s.replay.n > maxReplayOps {
				t.Fatalf("seed %d: %d gathered > %d", seed, s.replay.n, maxReplayOps)
			}
		}
		if err := s.endReplay(); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		maps.Insert(got, s.All())
		if !maps.Equal(got, model) {
			t.Fatalf("seed %d (ops %d, maxOps %d, maxBytes %d): %d keys, want %d", seed, nops, maxReplayOps, maxReplayValueBytes, len(got), len(model))
		}
	}
}

// TestReplayMatchesModelUint64: the same with decoded keys and values
// (not strings): the vals path and the end-time key decoding.
func TestReplayMatchesModelUint64(t *testing.T) {
	enc := func(i uint64) []byte { b, _ := Uint64Codec{}.Encode(nil, i); return b }
	coll := murmurCollisions(6, func(i uint64) []byte { return enc(i * 0x9E3779B97F4A7C15) })
	defer func(o, b int) { maxReplayOps, maxReplayValueBytes = o, b }(maxReplayOps, maxReplayValueBytes)
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 78))
		maxReplayOps = []int{1, 2, 3, 5, 17, 1 << 20}[rng.IntN(6)]
		maxReplayValueBytes = []int{1, 8, 40, 64 << 20}[rng.IntN(4)]
		var universe [][]byte
		for _, c := range coll {
			universe = append(universe, c[0], c[1])
		}
		for i := range rng.IntN(200) {
			universe = append(universe, enc(uint64(1<<40+i)))
		}
		s, err := NewKeyValueStore("kv", nil, Uint64Codec{}, Int64Codec{}, WithMaxParallelism(1))
		if err != nil {
			t.Fatal(err)
		}
		model := map[uint64]int64{}
		for i := range 2000 {
			kb := universe[rng.IntN(len(universe))]
			k, _ := Uint64Codec{}.Decode(kb)
			c := Change{KeyGroup: 0, Key: kb}
			if rng.IntN(3) == 0 {
				c.Tombstone = true
				delete(model, k)
			} else {
				c.Value, _ = Int64Codec{}.Encode(nil, int64(i))
				model[k] = int64(i)
			}
			if err := s.replayChange(c); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.endReplay(); err != nil {
			t.Fatal(err)
		}
		got := map[uint64]int64{}
		maps.Insert(got, s.All())
		if !maps.Equal(got, model) {
			t.Fatalf("seed %d: %d keys, want %d", seed, len(got), len(model))
		}
	}
}

// TestDecodeDataMatchesSlowMutated: decodeData, when it takes an entry, decodes it
// as decodeEntrySlow does; and decodeEntry agrees with decodeEntrySlow on
// random and mutated entries.
func TestDecodeDataMatchesSlowMutated(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	for it := range 200_000 {
		var b []byte
		kg := rng.IntN(4)
		if rng.IntN(8) == 0 {
			kg = dstl.MetaKeyGroup
		}
		switch rng.IntN(3) {
		case 0:
			b = randBytes(rng.IntN(12))
			if len(b) > 0 && rng.IntN(2) == 0 {
				b[0] = entryVersion
			}
			if len(b) > 1 && rng.IntN(2) == 0 {
				b[1] &= 3
			}
		default:
			c := Change{KeyGroup: kg, Key: randBytes(rng.IntN(140)), Tombstone: rng.IntN(2) == 0, HasTimestamp: rng.IntN(2) == 0, Timestamp: int64(rng.Uint64())}
			if !c.Tombstone {
				c.Value = randBytes(rng.IntN(5))
			}
			b = appendChange(nil, string(randBytes(rng.IntN(130))), c)
			for range rng.IntN(3) {
				switch rng.IntN(4) {
				case 0:
					if len(b) > 0 {
						b[rng.IntN(len(b))] = byte(rng.UintN(256))
					}
				case 1:
					b = b[:rng.IntN(len(b)+1)]
				case 2:
					b = append(b, byte(rng.UintN(256)))
				case 3:
					// a non-minimal varint length
					if len(b) > 3 && b[2] < 0x80 {
						b = append(append(append([]byte{}, b[:2]...), b[2]|0x80, 0), b[3:]...)
					}
				}
			}
		}
		want, werr := decodeEntrySlow(b, kg)
		var e entry
		if decodeData(b, kg, &e) {
			if werr != nil {
				t.Fatalf("iter %d: % x kg %d: short path took an entry the general one rejects: %v", it, b, kg, werr)
			}
			if !reflect.DeepEqual(e, want) {
				t.Fatalf("iter %d: % x: short %+v, general %+v", it, b, e, want)
			}
		}
		got, gerr := decodeEntry(b, kg)
		if (gerr == nil) != (werr == nil) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("iter %d: % x: %+v %v vs %+v %v", it, b, got, gerr, want, werr)
		}
	}
}

var _ = binary.AppendUvarint
