package dstl

import (
	"fmt"
	"testing"
)

// BenchmarkGroup measures ordering a closed set's changes by key group for
// the encoder: a set of 100-byte changes round-robin over 128 key groups.
func BenchmarkGroup(b *testing.B) {
	for _, n := range []int{626, 10359, 41504} {
		b.Run(fmt.Sprintf("changes=%d", n), func(b *testing.B) {
			chunk := make([]byte, n*100)
			cs := &changeSet{chunks: [][]byte{chunk}}
			for i := range n {
				cs.refs = append(cs.refs, changeRef{kg: int32(i & 127), n: 100, off: uint32(i * 100)})
			}
			kgr := KeyGroupRange{Start: 0, End: 127}
			b.SetBytes(int64(n * 100))
			for b.Loop() {
				cs.group(LogID{}, kgr)
			}
		})
	}
}
