package statestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/dstlgo/dstl/dstl"
)

// entryVersion is the version of the changelog entry encoding.
const entryVersion = 1

const minTime = math.MinInt64

// Changelog entries (docs/STATESTORE.md). Every integer is a varint
// (encoding/binary; unsigned for lengths, signed for timestamps):
//
//	data entry (a key group):  version=1, flags (bit 0 tombstone, bit 1 timestamp),
//	                           store name (length, bytes), key (length, bytes),
//	                           [timestamp], value (the rest)
//	descriptor (metadata):     version=1, 'D', store name, kind (length, bytes), kind version
//	stream time (metadata):    version=1, 'T', store name, timestamp
const (
	flagTombstone = 1 << 0
	flagTimestamp = 1 << 1
	typeDescr     = 'D'
	typeTime      = 'T'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendChange encodes a change of store name.
func appendChange(dst []byte, name string, c Change) []byte {
	dst = append(dst, entryVersion)
	if c.KeyGroup == dstl.MetaKeyGroup {
		dst = append(dst, typeTime)
		dst = appendString(dst, name)
		return binary.AppendVarint(dst, c.Timestamp)
	}
	var flags byte
	if c.Tombstone {
		flags |= flagTombstone
	}
	if c.HasTimestamp {
		flags |= flagTimestamp
	}
	dst = append(dst, flags)
	dst = appendString(dst, name)
	dst = appendBytes(dst, c.Key)
	if c.HasTimestamp {
		dst = binary.AppendVarint(dst, c.Timestamp)
	}
	if !c.Tombstone {
		dst = append(dst, c.Value...)
	}
	return dst
}

func appendDescriptor(dst []byte, name string, kind Kind, version int) []byte {
	dst = append(dst, entryVersion, typeDescr)
	dst = appendString(dst, name)
	dst = appendString(dst, string(kind))
	return binary.AppendUvarint(dst, uint64(version))
}

// entry is a decoded changelog entry. Its slices alias the input.
type entry struct {
	typ         byte // 0 data, typeDescr, typeTime
	name        []byte
	change      Change
	kind        Kind
	kindVersion int
}

// decodeEntry decodes a changelog entry read from key group kg.
func decodeEntry(b []byte, kg int) (entry, error) {
	var e entry
	if decodeData(b, kg, &e) {
		return e, nil
	}
	return decodeEntrySlow(b, kg)
}

// decodeData decodes into e the common data entry, whose store name and
// key are shorter than 128 bytes (one-byte lengths), as decodeEntrySlow
// does. It returns false for any other entry, a damaged one included,
// which decodeEntrySlow then decodes or rejects; e is then undefined.
func decodeData(b []byte, kg int, e *entry) bool {
	if kg == dstl.MetaKeyGroup || len(b) < 4 || b[0] != entryVersion || b[1]&^(flagTombstone|flagTimestamp) != 0 || b[2] >= 0x80 {
		return false
	}
	t := b[1]
	p := 3
	n := int(b[2])
	if n >= len(b)-p { // the name, and the key's length after it
		return false
	}
	e.typ, e.kind, e.kindVersion = 0, "", 0
	e.name = b[p : p+n : p+n]
	p += n
	if b[p] >= 0x80 {
		return false
	}
	n = int(b[p])
	p++
	if n > len(b)-p {
		return false
	}
	c := &e.change
	*c = Change{KeyGroup: kg, Key: b[p : p+n : p+n], Tombstone: t&flagTombstone != 0}
	p += n
	if t&flagTimestamp != 0 {
		ts, m := binary.Varint(b[p:])
		if m <= 0 {
			return false
		}
		c.Timestamp, c.HasTimestamp = ts, true
		p += m
	}
	switch {
	case !c.Tombstone:
		c.Value = b[p:]
	case p != len(b):
		return false // trailing bytes
	}
	return true
}

// decodeEntrySlow decodes any changelog entry read from key group kg.
func decodeEntrySlow(b []byte, kg int) (entry, error) {
	var e entry
	r := decoder{b: b}
	if v := r.byte(); r.err == nil && v != entryVersion {
		return e, fmt.Errorf("%w: entry version %d, this build reads %d", ErrLogFormat, v, entryVersion)
	}
	t := r.byte()
	e.name = r.bytes()
	switch {
	case r.err != nil:
	case t == typeDescr && kg == dstl.MetaKeyGroup:
		e.typ = typeDescr
		e.kind = Kind(r.bytes())
		e.kindVersion = int(r.uvarint())
	case t == typeTime && kg == dstl.MetaKeyGroup:
		e.typ = typeTime
		e.change = Change{KeyGroup: dstl.MetaKeyGroup, Timestamp: r.varint(), HasTimestamp: true}
	case t&^(flagTombstone|flagTimestamp) == 0 && kg != dstl.MetaKeyGroup:
		e.change = Change{KeyGroup: kg, Key: r.bytes(), Tombstone: t&flagTombstone != 0}
		if t&flagTimestamp != 0 {
			e.change.Timestamp, e.change.HasTimestamp = r.varint(), true
		}
		if !e.change.Tombstone {
			e.change.Value = r.rest()
		}
	default:
		return e, fmt.Errorf("%w: entry type %#x in key group %d", ErrLogFormat, t, kg)
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = errors.New("trailing bytes")
	}
	if r.err != nil {
		return e, fmt.Errorf("%w: entry in key group %d: %v", ErrLogFormat, kg, r.err)
	}
	return e, nil
}

// decoder reads varints and length-prefixed bytes; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

var errTruncated = errors.New("truncated")

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) < 1 {
		d.fail(errTruncated)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 { return readVarint(d, binary.Uvarint) }

// count reads a count or length that cannot exceed the bytes left.
func (d *decoder) count() int {
	v := d.uvarint()
	if d.err == nil && v > uint64(len(d.b)) {
		d.fail(fmt.Errorf("length %d past the end", v))
		return 0
	}
	return int(v)
}

func (d *decoder) varint() int64 { return readVarint(d, binary.Varint) }

// readVarint reads a varint with read (binary.Uvarint or binary.Varint).
func readVarint[T uint64 | int64](d *decoder, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.count()
	if d.err != nil {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) fixed(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.fail(errTruncated)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) rest() []byte {
	v := d.b
	d.b = nil
	return v
}

// Snapshot payloads (docs/STATESTORE.md):
//
//	magic "DSSP", kind (length, bytes), kind version (uvarint), body,
//	CRC32C (Castagnoli) of everything before it, 4 bytes little-endian
const payloadMagic = "DSSP"

func appendPayloadHeader(dst []byte, kind Kind, version int) []byte {
	dst = append(dst, payloadMagic...)
	dst = appendString(dst, string(kind))
	return binary.AppendUvarint(dst, uint64(version))
}

func finishChecksum(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// openPayload checks a payload's magic, checksum, kind and version and
// returns its body.
func openPayload(p []byte, kind Kind, version int) ([]byte, error) {
	if len(p) < len(payloadMagic)+4 || string(p[:len(payloadMagic)]) != payloadMagic {
		return nil, fmt.Errorf("%w: not a state store snapshot payload (bad magic)", ErrSnapshotFormat)
	}
	body, sum := p[:len(p)-4], binary.LittleEndian.Uint32(p[len(p)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: payload checksum mismatch", ErrSnapshotFormat)
	}
	d := decoder{b: body[len(payloadMagic):]}
	k := Kind(d.bytes())
	v := d.uvarint()
	if d.err != nil {
		return nil, fmt.Errorf("%w: payload header: %v", ErrSnapshotFormat, d.err)
	}
	if k != kind {
		return nil, fmt.Errorf("%w: payload of a %q store, not of a %q store", ErrSnapshotFormat, k, kind)
	}
	if v != uint64(version) {
		return nil, fmt.Errorf("%w: %q payload version %d, this build reads version %d", ErrSnapshotFormat, k, v, version)
	}
	return d.b, nil
}
