// Package crc32c combines CRC-32C checksums (the Castagnoli polynomial,
// as hash/crc32 computes them with crc32.Castagnoli): the checksum of two
// byte strings one after the other, from the checksum of each and the
// length of the second, without the bytes. hash/crc32 has no such
// function.
package crc32c

import "hash/crc32"

// Table is the table of the Castagnoli polynomial, for hash/crc32.
var Table = crc32.MakeTable(crc32.Castagnoli)

// poly is the Castagnoli polynomial, bit-reversed, as hash/crc32 computes
// with it.
const poly = crc32.Castagnoli

// x2n[k] is x^(2^k) modulo the polynomial, in the bit-reversed form of the
// checksums (x^0 is 1<<31).
var x2n = func() [64]uint32 {
	var t [64]uint32
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = multModP(p, p)
	}
	return t
}()

// multModP returns a(x)·b(x) modulo the polynomial, both in bit-reversed
// form.
func multModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
}

// xPow8n returns x^(8n) modulo the polynomial: the factor that appending n
// zero bytes applies to a checksum's register.
func xPow8n(n uint64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; k++ {
		if n&1 != 0 {
			p = multModP(x2n[k&63], p)
		}
		n >>= 1
	}
	return p
}

// Combine returns the CRC-32C of A followed by B, given crcA of A, crcB of
// B and the length of B in bytes (at least 0): crc32.Checksum(A‖B,
// Table) from crc32.Checksum(A, Table), crc32.Checksum(B, Table) and
// len(B). It costs a few dozen multiplications of 32 bits by 32 bits,
// whatever the lengths.
func Combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	return multModP(xPow8n(uint64(lenB)), crcA) ^ crcB
}
