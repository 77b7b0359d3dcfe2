package statestore

import (
	"encoding/binary"
	"math/bits"
)

// DefaultMaxParallelism is the number of key groups when a store or a
// checkpointer is not given one (Flink's default for small jobs).
const DefaultMaxParallelism = 128

// KeyGroup returns the key group of an encoded key among maxParallelism key
// groups: the 32-bit MurmurHash3 (x86_32, seed 0) of the key's bytes, taken
// as an unsigned number, modulo maxParallelism.
//
// Like Flink's key-group assignment (a murmur hash modulo the maximum
// parallelism), it is stable: it depends on nothing but the bytes, so every
// process and every version of this package puts a key in the same group,
// and an operator instance owning a range of key groups owns the same keys
// after a restart with another parallelism. (Flink hashes the key's
// hashCode(); we hash the codec's encoding.) maxParallelism must be at
// least 1.
func KeyGroup(key []byte, maxParallelism int) int {
	return keyGroupOf(murmur3(key, 0), maxParallelism)
}

// keyGroupOf returns the key group of a key of murmur3 hash h: h modulo
// maxParallelism, a mask when maxParallelism is a power of two (the
// default), which is cheaper than a division.
func keyGroupOf(h uint32, maxParallelism int) int {
	if m := uint32(maxParallelism); m&(m-1) == 0 {
		return int(h & (m - 1))
	}
	return int(h % uint32(maxParallelism))
}

// murmur3 is MurmurHash3_x86_32 (Austin Appleby's reference, public domain).
func murmur3(data []byte, seed uint32) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	h := seed
	n := len(data)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch n - i {
	case 3:
		k ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		k ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		k ^= uint32(data[i])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
