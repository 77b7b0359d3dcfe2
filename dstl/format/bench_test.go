package format

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

// benchChangeSet is a typical change set: a metadata change and 32 key
// groups of 32 changes of about 100 bytes (about 100 KiB).
func benchChangeSet() *ChangeSet {
	r := rand.New(rand.NewPCG(21, 22))
	return sampleChangeSet(r, 1, 1, 32, 32, 50, true)
}

func BenchmarkWriteChangeSet(b *testing.B) {
	cs := benchChangeSet()
	for _, compression := range []bool{false, true} {
		b.Run(fmt.Sprintf("compression=%v", compression), func(b *testing.B) {
			enc := NewEncoder(io.Discard, EncoderOptions{Compression: compression})
			fi, err := enc.WriteChangeSet(cs)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(fi.LogicalSize)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.WriteChangeSet(cs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(fi.Length)/float64(fi.LogicalSize), "stored/logical")
		})
	}
}

func BenchmarkDecodeFrame(b *testing.B) {
	cs := benchChangeSet()
	for _, compression := range []bool{false, true} {
		b.Run(fmt.Sprintf("compression=%v", compression), func(b *testing.B) {
			data, infos := encode(b, EncoderOptions{Compression: compression}, cs)
			fi := infos[0]
			frame := data[fi.Offset : fi.Offset+fi.Length]
			b.SetBytes(fi.LogicalSize)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeFrame("bench", fi.Offset, frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
