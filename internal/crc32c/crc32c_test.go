package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCombine: the combination of the checksums of the two parts of a
// byte string is the checksum of the whole, for parts of every length from
// empty to a few MiB, cut anywhere.
func TestCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 5<<20)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	cases := []struct {
		name    string
		a, b    int // lengths of A and B
		zeroesB bool
	}{
		{"both empty", 0, 0, false},
		{"empty A", 0, 17, false},
		{"empty B", 17, 0, false},
		{"one byte each", 1, 1, false},
		{"B of 3 bytes", 100, 3, false},
		{"B of 4 bytes (a frame's CRC)", 1000, 4, false},
		{"B of 7 bytes", 5, 7, false},
		{"B of 8 bytes", 64, 8, false},
		{"B of 255 bytes", 3, 255, false},
		{"B of 256 bytes", 300, 256, false},
		{"B of 4095 bytes", 1, 4095, false},
		{"B of 64 KiB", 8, 64 << 10, false},
		{"B of 1 MiB + 1", 1 << 20, 1<<20 + 1, false},
		{"B of 4 MiB", 12345, 4 << 20, false},
		{"B all zero", 50, 1000, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := data[:tc.a]
			b := data[tc.a : tc.a+tc.b]
			if tc.zeroesB {
				b = make([]byte, tc.b)
			}
			whole := crc32.Checksum(append(append([]byte{}, a...), b...), Table)
			got := Combine(crc32.Checksum(a, Table), crc32.Checksum(b, Table), int64(len(b)))
			if got != whole {
				t.Fatalf("Combine = %#08x, the checksum of the whole is %#08x", got, whole)
			}
		})
	}
	// Many parts, combined one after the other, as an object's frames are.
	var crc uint32
	var whole []byte
	for i := 0; len(whole) < 1<<20; i++ {
		n := r.IntN(70_000)
		if i%5 == 0 {
			n = r.IntN(10)
		}
		p := data[len(whole) : len(whole)+n]
		crc = Combine(crc, crc32.Checksum(p, Table), int64(len(p)))
		whole = data[:len(whole)+n]
	}
	if want := crc32.Checksum(whole, Table); crc != want {
		t.Fatalf("parts combined: %#08x, the checksum of the whole is %#08x", crc, want)
	}
}

// TestCombineIsNotIEEE: the polynomial is Castagnoli's: the same parts
// checksummed with the IEEE polynomial do not combine.
func TestCombineIsNotIEEE(t *testing.T) {
	a, b := []byte("dstl object "), []byte("and its frames")
	ieee := crc32.IEEETable
	if Combine(crc32.Checksum(a, ieee), crc32.Checksum(b, ieee), int64(len(b))) == crc32.Checksum(append(a, b...), ieee) {
		t.Fatal("IEEE checksums combine with the Castagnoli polynomial")
	}
}

func BenchmarkCombine(b *testing.B) {
	for b.Loop() {
		Combine(0x12345678, 0x9abcdef0, 4<<20)
	}
}
