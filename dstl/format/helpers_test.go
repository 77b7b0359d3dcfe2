package format

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func logID(b byte) [16]byte {
	var id [16]byte
	for i := range id {
		id[i] = b + byte(i)
	}
	return id
}

// encode writes sets into one object.
func encode(t testing.TB, opts EncoderOptions, sets ...*ChangeSet) ([]byte, []FrameInfo) {
	t.Helper()
	var buf bytes.Buffer
	enc := NewEncoder(&buf, opts)
	var infos []FrameInfo
	for _, cs := range sets {
		fi, err := enc.WriteChangeSet(cs)
		if err != nil {
			t.Fatalf("WriteChangeSet: %v", err)
		}
		infos = append(infos, fi)
	}
	if err := enc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if enc.Size() != int64(buf.Len()) {
		t.Fatalf("Size() = %d, wrote %d", enc.Size(), buf.Len())
	}
	// Built in memory, the object is the same, in a buffer of EncodedSize
	// that never grows (or fits, compressed), and in one that grows.
	size, err := opts.EncodedSize(sets...)
	if err != nil {
		t.Fatalf("EncodedSize: %v", err)
	}
	if !opts.Compression && size != int64(buf.Len()) || size < int64(buf.Len()) {
		t.Fatalf("EncodedSize = %d, the object is %d bytes", size, buf.Len())
	}
	for _, dst := range [][]byte{make([]byte, 0, size), nil} {
		enc.ResetBuffer(dst, opts)
		for i, cs := range sets {
			fi, err := enc.WriteChangeSet(cs)
			if err != nil || fi != infos[i] {
				t.Fatalf("in memory, set %d: %+v, %v; want %+v", i, fi, err, infos[i])
			}
		}
		if err := enc.Close(); err != nil {
			t.Fatalf("in memory, Close: %v", err)
		}
		got := enc.Bytes()
		if !bytes.Equal(got, buf.Bytes()) || enc.Size() != int64(len(got)) {
			t.Fatalf("in memory (capacity %d): %d bytes, Size %d, differ from the %d written", cap(dst), len(got), enc.Size(), buf.Len())
		}
		if dst != nil && &got[:1][0] != &dst[:1][0] {
			t.Fatalf("the object outgrew a buffer of EncodedSize %d", size)
		}
	}
	// Measured first, then written from what the measuring learnt, twice
	// (as a retry would), the object is the same again.
	var m Measured
	if err := m.Reset(opts, sets...); err != nil || m.Size() != size || m.Len() != len(sets) {
		t.Fatalf("Measured.Reset: %v, size %d of %d sets; want size %d of %d", err, m.Size(), m.Len(), size, len(sets))
	}
	for range 2 {
		enc.ResetBuffer(make([]byte, 0, size), opts)
		for i := range sets {
			fi, err := enc.WriteMeasured(&m, i)
			if err != nil || fi != infos[i] {
				t.Fatalf("measured, set %d: %+v, %v; want %+v", i, fi, err, infos[i])
			}
		}
		if err := enc.Close(); err != nil {
			t.Fatalf("measured, Close: %v", err)
		}
		if got := enc.Bytes(); !bytes.Equal(got, buf.Bytes()) {
			t.Fatalf("measured: %d bytes differ from the %d written", len(got), buf.Len())
		}
	}
	m.Clear()
	if m.Len() != 0 || m.Size() != 0 {
		t.Fatalf("after Clear: %d sets, size %d", m.Len(), m.Size())
	}
	return buf.Bytes(), infos
}

// equalChangeSet compares change sets, treating nil and empty slices alike.
func equalChangeSet(a, b *ChangeSet) error {
	if a.LogID != b.LogID || a.SequenceNumber != b.SequenceNumber {
		return fmt.Errorf("id %x/%d != %x/%d", a.LogID, a.SequenceNumber, b.LogID, b.SequenceNumber)
	}
	if len(a.Groups) != len(b.Groups) {
		return fmt.Errorf("%d groups != %d", len(a.Groups), len(b.Groups))
	}
	for i := range a.Groups {
		ga, gb := a.Groups[i], b.Groups[i]
		if ga.KeyGroup != gb.KeyGroup || len(ga.Changes) != len(gb.Changes) {
			return fmt.Errorf("group %d: kg %d/%d changes %d/%d", i, ga.KeyGroup, gb.KeyGroup, len(ga.Changes), len(gb.Changes))
		}
		for j := range ga.Changes {
			if !bytes.Equal(ga.Changes[j], gb.Changes[j]) {
				return fmt.Errorf("group %d change %d differs", i, j)
			}
		}
	}
	return nil
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// textBytes returns compressible bytes.
func textBytes(r *rand.Rand, n int) []byte {
	words := []string{"key", "value", "state", "window", "count=", "sum=", "42", "user-", "\n"}
	var b []byte
	for len(b) < n {
		b = append(b, words[r.IntN(len(words))]...)
	}
	return b[:n]
}

// sampleChangeSet returns a change set with a metadata group and nGroups key
// groups of nChanges changes of about size bytes each.
func sampleChangeSet(r *rand.Rand, id byte, sqn uint64, nGroups, nChanges, size int, compressible bool) *ChangeSet {
	cs := &ChangeSet{LogID: logID(id), SequenceNumber: sqn}
	cs.Groups = append(cs.Groups, Group{KeyGroup: MetaKeyGroup, Changes: [][]byte{[]byte("meta")}})
	for g := 0; g < nGroups; g++ {
		grp := Group{KeyGroup: int32(g * 3)}
		for c := 0; c < nChanges; c++ {
			n := r.IntN(2*size + 1)
			if compressible {
				grp.Changes = append(grp.Changes, textBytes(r, n))
			} else {
				grp.Changes = append(grp.Changes, randomBytes(r, n))
			}
		}
		cs.Groups = append(cs.Groups, grp)
	}
	return cs
}

// fixFrameCRC recomputes the CRC32C at the end of frame.
func fixFrameCRC(frame []byte) {
	if len(frame) < FrameCRCSize {
		return
	}
	n := len(frame) - FrameCRCSize
	binary.LittleEndian.PutUint32(frame[n:], crc32.Checksum(frame[:n], castagnoli))
}

// fixChecksums recomputes, as far as the structure allows, every frame CRC
// and the index CRC of data, so that fuzzing and tests reach the checks
// behind the checksums.
func fixChecksums(data []byte) {
	end := int64(len(data))
	indexOffset := end
	if end >= MinObjectSize && string(data[end-4:]) == FooterMagic {
		off := binary.LittleEndian.Uint64(data[end-16:])
		if off >= HeaderSize && off <= uint64(end-TrailerSize) {
			indexOffset = int64(off)
			binary.LittleEndian.PutUint32(data[end-8:], crc32.Checksum(data[off:end-8], castagnoli))
		}
	}
	pos := int64(HeaderSize)
	for pos+4 <= indexOffset {
		n := int64(binary.LittleEndian.Uint32(data[pos:]))
		if n < MinFrameSize || pos+n > indexOffset {
			break
		}
		fixFrameCRC(data[pos : pos+n])
		pos += n
	}
}
