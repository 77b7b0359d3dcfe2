package format

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

// benchVersion is the format version the benchmarks encode: run them with
// -bench.format=2 for version 2, under the same names, so that benchstat
// compares the two files.
var benchVersion = flag.Int("bench.format", 1, "the format version the benchmarks encode (1 or 2)")

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
			enc := NewEncoder(io.Discard, EncoderOptions{Compression: compression, Version: *benchVersion})
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

// BenchmarkEncodeObject builds an object in memory, as the engine's
// uploader does: change sets of 100-byte changes, two key groups each,
// of about 64 KiB, 1 MiB and 4 MiB, one per object.
func BenchmarkEncodeObject(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("set=%dKiB", size>>10), func(b *testing.B) {
			r := rand.New(rand.NewPCG(23, 24))
			n := size / 101
			cs := &ChangeSet{LogID: logID(1), SequenceNumber: 1}
			arena := make([]byte, n*100)
			for i := range arena {
				arena[i] = byte(r.Uint32())
			}
			for g := range 2 {
				grp := Group{KeyGroup: int32(g)}
				for i := g; i < n; i += 2 { // interleaved, as appended
					grp.Changes = append(grp.Changes, arena[i*100:(i+1)*100])
				}
				cs.Groups = append(cs.Groups, grp)
			}
			opts := EncoderOptions{Version: *benchVersion}
			total, err := opts.EncodedSize(cs)
			if err != nil {
				b.Fatal(err)
			}
			var enc Encoder
			dst := make([]byte, 0, total)
			b.SetBytes(int64(n * 100))
			b.ReportAllocs()
			for b.Loop() {
				enc.ResetBuffer(dst, opts)
				if _, err := enc.WriteChangeSet(cs); err != nil {
					b.Fatal(err)
				}
				if err := enc.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeFrame(b *testing.B) {
	cs := benchChangeSet()
	for _, compression := range []bool{false, true} {
		b.Run(fmt.Sprintf("compression=%v", compression), func(b *testing.B) {
			data, infos := encode(b, EncoderOptions{Compression: compression, Version: *benchVersion}, cs)
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

// BenchmarkEncodeAppended builds an object in memory from a change set in
// append order read through a ChangeReader, as the engine's uploader
// does: 100-byte changes of random bytes over 128 key groups in turn, of
// about 64 KiB, 1 MiB and 4 MiB, measured first (EncodedSize, as an
// upload does before it encodes), then encoded.
func BenchmarkEncodeAppended(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("set=%dKiB", size>>10), func(b *testing.B) {
			r := rand.New(rand.NewPCG(25, 26))
			n := size / 102
			arena := randomBytes(r, n*100)
			list := make(changeList, n)
			for i := range list {
				list[i] = KeyedChange{KeyGroup: int32(i % 128), Data: arena[i*100 : (i+1)*100]}
			}
			cs := &ChangeSet{LogID: logID(1), SequenceNumber: 1, AppendedFrom: list}
			opts := EncoderOptions{Version: *benchVersion}
			total, err := opts.EncodedSize(cs)
			if err != nil {
				b.Fatal(err)
			}
			var enc Encoder
			dst := make([]byte, 0, total)
			b.SetBytes(int64(n * 100))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := opts.EncodedSize(cs); err != nil {
					b.Fatal(err)
				}
				enc.ResetBuffer(dst, opts)
				if _, err := enc.WriteChangeSet(cs); err != nil {
					b.Fatal(err)
				}
				if err := enc.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
