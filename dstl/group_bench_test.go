package dstl

import (
	"fmt"
	"testing"

	"github.com/dstlgo/dstl/dstl/format"
)

// BenchmarkGroup measures one pass of the encoder over a closed set's
// changes, read through the set's ReadChanges a batch of 256 at a time (it
// makes two): a set of 100-byte changes round-robin over 128 key groups.
func BenchmarkGroup(b *testing.B) {
	for _, n := range []int{626, 10359, 41504} {
		b.Run(fmt.Sprintf("changes=%d", n), func(b *testing.B) {
			chunk := make([]byte, n*100)
			cs := &changeSet{chunks: [][]byte{chunk}}
			for i := range n {
				cs.refs = append(cs.refs, changeRef{kg: int32(i & 127), n: 100, off: uint32(i * 100)})
			}
			b.SetBytes(int64(n * 100))
			batch := make([]format.KeyedChange, 256)
			for b.Loop() {
				for i := 0; ; {
					n := cs.ReadChanges(i, batch)
					if n == 0 {
						break
					}
					i += n
				}
			}
		})
	}
}
