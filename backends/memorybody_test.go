package backends_test

import (
	"errors"
	"io"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
)

// TestMemoryBody: ReadAt reads as an io.ReaderAt does, SliceAt hands out
// the bytes themselves or says they are not all there, and a driver's
// Body passes SliceAt on within its size.
func TestMemoryBody(t *testing.T) {
	data := []byte("abcdef")
	m := backends.NewMemoryBody(data)
	for _, tc := range []struct {
		off, n  int64
		want    string
		ok      bool
		readErr error // of ReadAt into n bytes
	}{
		{0, 6, "abcdef", true, nil},
		{2, 3, "cde", true, nil},
		{6, 0, "", true, io.EOF},
		{4, 3, "", false, io.EOF},
		{7, 0, "", false, io.EOF},
		{-1, 2, "", false, errors.New("negative offset")},
	} {
		p, ok := m.SliceAt(tc.off, tc.n)
		if ok != tc.ok || string(p) != tc.want {
			t.Errorf("SliceAt(%d, %d) = %q, %v; want %q, %v", tc.off, tc.n, p, ok, tc.want, tc.ok)
		}
		if ok && tc.n > 0 && &p[0] != &data[tc.off] {
			t.Errorf("SliceAt(%d, %d) copied the bytes", tc.off, tc.n)
		}
		buf := make([]byte, tc.n)
		n, err := m.ReadAt(buf, tc.off)
		switch {
		case tc.readErr == nil && (err != nil || n != int(tc.n) || string(buf) != tc.want):
			t.Errorf("ReadAt(%d bytes, %d) = %d, %v", tc.n, tc.off, n, err)
		case tc.readErr != nil && err == nil:
			t.Errorf("ReadAt(%d bytes, %d) = %d, nil; want an error", tc.n, tc.off, n)
		}
	}
	b := driver.NewBody(m, 4) // a Put of the first 4 bytes
	if p, ok := b.SliceAt(1, 3); !ok || string(p) != "bcd" {
		t.Errorf("Body.SliceAt(1, 3) = %q, %v", p, ok)
	}
	if _, ok := b.SliceAt(2, 3); ok {
		t.Error("Body.SliceAt past the Put's size succeeded")
	}
	if _, ok := driver.NewBody(io.NewSectionReader(m, 0, 6), 6).SliceAt(0, 1); ok {
		t.Error("Body.SliceAt of a body not in memory succeeded")
	}
	if p, ok := driver.NewBody(shortSlices{m}, 6).SliceAt(0, 4); ok {
		t.Errorf("Body.SliceAt passed on a slice of %d bytes for 4", len(p))
	}
}

// shortSlices hands out one byte less than asked.
type shortSlices struct{ *backends.MemoryBody }

func (s shortSlices) SliceAt(off, n int64) ([]byte, bool) {
	p, ok := s.MemoryBody.SliceAt(off, n)
	if ok && len(p) > 0 {
		p = p[:len(p)-1]
	}
	return p, ok
}

// TestMemoryBodyCRC32C: a memory body gives a CRC32C only when given one,
// without changing its bytes, and a driver's Body passes it on; a body
// of another kind gives none.
func TestMemoryBodyCRC32C(t *testing.T) {
	m := backends.NewMemoryBody([]byte("abc"))
	if _, ok := m.CRC32C(); ok {
		t.Error("a memory body gives a CRC32C it was not given")
	}
	c := m.WithCRC32C(0x1234)
	if crc, ok := c.CRC32C(); !ok || crc != 0x1234 {
		t.Errorf("CRC32C = %#x, %v; want 0x1234, true", crc, ok)
	}
	if _, ok := m.CRC32C(); ok {
		t.Error("WithCRC32C changed the body it was called on")
	}
	if p, ok := c.SliceAt(0, 3); !ok || string(p) != "abc" {
		t.Errorf("SliceAt = %q, %v", p, ok)
	}
	if crc, ok := driver.NewBody(c, 3).CRC32C(); !ok || crc != 0x1234 {
		t.Errorf("Body.CRC32C = %#x, %v; want 0x1234, true", crc, ok)
	}
	if _, ok := driver.NewBody(m, 3).CRC32C(); ok {
		t.Error("Body.CRC32C of a body without one succeeded")
	}
	if _, ok := driver.NewBody(io.NewSectionReader(c, 0, 3), 3).CRC32C(); ok {
		t.Error("Body.CRC32C of a body of another kind succeeded")
	}
}
