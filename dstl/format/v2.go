package format

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Format version 2 keeps a frame's changes in the order they were
// appended, each preceded, when the frame has more than one group, by its
// group's index in the directory; see docs/FORMAT.md.

// v2Chunk is how many bytes of a frame of version 2 an encoder writes
// between two updates of the frame's CRC32C and of the progress (see
// [Encoder.SetProgress]): few enough that the checksum reads them from the
// CPU's caches, just after they were written.
const v2Chunk = 64 << 10

// setTags sets lay.tags, the bytes that give the changes of cs their
// groups in a frame of version 2: the index of each change's group in the
// directory, as an unsigned varint, when there is more than one group. cs
// is the change set that plan returned with lay.
func (lay *layout) setTags(cs *ChangeSet) {
	lay.tags = 0
	if lay.groups <= 1 {
		return
	}
	if cs.appendOrder() {
		d := 0
		for k := range lay.slots {
			if c := lay.slots[k].count; c > 0 {
				lay.tags += c * int64(uvarintLen(uint64(d)))
				d++
			}
		}
		return
	}
	for i := range cs.Groups {
		lay.tags += int64(len(cs.Groups[i].Changes) * uvarintLen(uint64(i)))
	}
}

// putDirEntryV2 writes a directory entry of version 2: the key group, its
// number of changes and their bytes with their length prefixes.
func putDirEntryV2(d []byte, kg int32, count, n uint32) {
	binary.LittleEndian.PutUint32(d[0:], uint32(kg))
	binary.LittleEndian.PutUint32(d[4:], count)
	binary.LittleEndian.PutUint32(d[8:], n)
}

// frameWriter checksums a frame of version 2 as it is written, and tells
// the encoder's progress, a chunk at a time, when the frame is final as
// written (not compressed).
type frameWriter struct {
	e      *Encoder
	stream bool   // the frame is final as written
	crc    uint32 // of buf[base:at)
	base   int    // where the frame starts in buf
	at     int    // what crc covers, up to
	next   int    // where the next chunk ends
}

// flush checksums buf[w.at:] and tells the progress that buf is final.
func (w *frameWriter) flush(buf []byte) {
	if !w.stream {
		return
	}
	w.crc = crc32.Update(w.crc, castagnoli, buf[w.at:])
	w.at, w.next = len(buf), len(buf)+v2Chunk
	if w.e.inBuffer {
		w.e.publish(len(buf))
	}
}

// appendFrameV2 appends cs as one frame of version 2 to dst (whose
// capacity it grows as needed) and returns it with the frame's length and
// its CRC32C. cs is planned and valid: lay is its layout, with its tags.
func (e *Encoder) appendFrameV2(dst []byte, cs *ChangeSet, lay *layout) ([]byte, int, uint32, error) {
	base := len(dst)
	groups := lay.groups
	dirEnd := FrameHeaderSize + groups*DirEntrySizeV2
	payloadSize := lay.payload + lay.tags
	frameLen := dirEnd + int(payloadSize) + FrameCRCSize
	dst = growFrame(dst, frameLen)
	end := base + dirEnd + int(payloadSize)
	buf := dst[:end]
	clear(buf[base : base+FrameHeaderSize])
	putFrameHeader(buf[base:], Version2, CodecNone, cs, payloadSize, groups, frameLen)
	dir := buf[base+FrameHeaderSize : base+dirEnd]
	w := frameWriter{e: e, stream: !e.opts.Compression || payloadSize == 0, base: base, at: base}
	w.next = base + v2Chunk
	tagged := groups > 1
	p := base + dirEnd
	if cs.appendOrder() {
		// The directory from the counts, then the changes as read again:
		// each must be of a group the first read counted, within its
		// count and bytes.
		d := 0
		for k := range lay.slots {
			sl := &lay.slots[k]
			if sl.count == 0 {
				continue
			}
			putDirEntryV2(dir[d*DirEntrySizeV2:], lay.base+int32(k), uint32(sl.count), uint32(sl.size))
			sl.pos, sl.end, sl.left = d, int(sl.size), sl.count
			d++
		}
		n := 0
		for {
			changes := cs.appendedBatch(n, e.batch)
			if len(changes) == 0 {
				break
			}
			for j, c := range changes {
				k := int64(c.KeyGroup) - int64(lay.base)
				if k < 0 || k >= int64(len(lay.slots)) {
					return dst[:base], 0, 0, changedError(cs, n+j)
				}
				sl := &lay.slots[k]
				need := len(c.Data) + 1
				if len(c.Data) >= 0x80 {
					need = len(c.Data) + uvarintLen(uint64(len(c.Data)))
				}
				if sl.left == 0 || sl.end < need {
					return dst[:base], 0, 0, changedError(cs, n+j)
				}
				sl.left--
				sl.end -= need
				if tagged {
					if sl.pos < 0x80 {
						buf[p] = byte(sl.pos)
						p++
					} else {
						p += binary.PutUvarint(buf[p:], uint64(sl.pos))
					}
				}
				if len(c.Data) < 0x80 {
					buf[p] = byte(len(c.Data))
					p++
				} else {
					p += binary.PutUvarint(buf[p:], uint64(len(c.Data)))
				}
				p += copy(buf[p:], c.Data)
				if p >= w.next {
					w.flush(buf[:p])
				}
			}
			n += len(changes)
		}
		for k := range lay.slots {
			if sl := &lay.slots[k]; sl.left != 0 || sl.end != 0 {
				return dst[:base], 0, 0, changedError(cs, n)
			}
		}
	} else {
		for i := range cs.Groups {
			g := &cs.Groups[i]
			var size int
			for _, c := range g.Changes {
				size += uvarintLen(uint64(len(c))) + len(c)
			}
			putDirEntryV2(dir[i*DirEntrySizeV2:], g.KeyGroup, uint32(len(g.Changes)), uint32(size))
		}
		for i := range cs.Groups {
			for _, c := range cs.Groups[i].Changes {
				if tagged {
					p += binary.PutUvarint(buf[p:], uint64(i))
				}
				if len(c) < 0x80 {
					buf[p] = byte(len(c))
					p++
				} else {
					p += binary.PutUvarint(buf[p:], uint64(len(c)))
				}
				p += copy(buf[p:], c)
				if p >= w.next {
					w.flush(buf[:p])
				}
			}
		}
	}
	if p != end {
		// The plan and the writing disagree: a bug, not the caller's.
		panic(fmt.Sprintf("dstl/format: a frame of version 2 planned to end at %d ends at %d", end, p))
	}
	if w.stream {
		w.crc = crc32.Update(w.crc, castagnoli, buf[w.at:end])
		return binary.LittleEndian.AppendUint32(buf, w.crc), frameLen, w.crc, nil
	}
	buf, codec, err := e.compress(buf, base+dirEnd, payloadSize)
	if err != nil {
		return dst[:base], 0, 0, err
	}
	frame := buf[base:]
	frameLen = len(frame) + FrameCRCSize
	putFrameHeader(frame, Version2, codec, cs, payloadSize, groups, frameLen)
	crc := crc32.Checksum(frame, castagnoli)
	return binary.LittleEndian.AppendUint32(buf, crc), frameLen, crc, nil
}

// checkDirectoryV2 checks the directory of a frame of version 2 (see
// parseFrame): key groups at least the metadata group's, strictly
// ascending; no group with more changes than bytes; and the groups'
// bytes with the changes' tags making the payload's size.
func checkDirectoryV2(object string, offset int64, v *frameView) error {
	prev := int64(MetaKeyGroup) - 1
	var sum uint64
	tagged := v.groups > 1
	for i := 0; i < v.groups; i++ {
		d := v.dir[i*DirEntrySizeV2:]
		at := offset + FrameHeaderSize + int64(i*DirEntrySizeV2)
		kg := int64(int32(binary.LittleEndian.Uint32(d[0:])))
		count := binary.LittleEndian.Uint32(d[4:])
		size := binary.LittleEndian.Uint32(d[8:])
		switch {
		case kg < MetaKeyGroup:
			return errorf(object, at, ErrCorrupt, "group %d has invalid key group %d", i, kg)
		case kg <= prev:
			return errorf(object, at, ErrCorrupt, "group %d has key group %d after %d; key groups must ascend strictly", i, kg, prev)
		case count > size:
			return errorf(object, at+4, ErrCorrupt, "group %d (key group %d) claims %d changes in %d bytes", i, kg, count, size)
		}
		prev = kg
		sum += uint64(size)
		if tagged {
			sum += uint64(count) * uint64(uvarintLen(uint64(i)))
		}
	}
	if sum != uint64(v.logical) {
		return errorf(object, offset+frameOffPayloadSize, ErrCorrupt, "payload size %d, but the groups and their changes' tags make %d bytes", v.logical, sum)
	}
	return nil
}

// v2Group is a group's state while a frame of version 2 is decoded: where
// its next change goes in the decoder's changes, where its changes end
// there, and its bytes still to come.
type v2Group struct {
	next, end int
	left      int64
}

// decodeV2 decodes the payload of a frame of version 2 into d.cs, whose
// header is set: the groups of the directory, each with its changes in
// the payload's order.
func (d *FrameDecoder) decodeV2(object string, v frameView, payload []byte) error {
	if v.groups == 0 {
		d.cs.Groups = nil
		return nil
	}
	changes := d.readyGroups(v, DirEntrySizeV2)
	groups := d.cs.Groups
	if cap(d.v2) < v.groups {
		d.v2 = make([]v2Group, v.groups)
	}
	st := d.v2[:v.groups]
	start := 0
	for i := range groups {
		e := v.dir[i*DirEntrySizeV2:]
		count := int(binary.LittleEndian.Uint32(e[4:]))
		groups[i] = Group{KeyGroup: int32(binary.LittleEndian.Uint32(e[0:]))}
		if count > 0 {
			groups[i].Changes = changes[start : start+count : start+count]
		}
		st[i] = v2Group{next: start, end: start + count, left: int64(binary.LittleEndian.Uint32(e[8:]))}
		start += count
	}
	tagged := v.groups > 1
	pos := 0
	for n := 0; pos < len(payload); n++ {
		at := pos // where the change starts, which errors name
		g := 0
		if tagged {
			t, k := uint64(0), 0
			if payload[pos] < 0x80 {
				t, k = uint64(payload[pos]), 1
			} else {
				t, k = binary.Uvarint(payload[pos:])
			}
			if k <= 0 || t >= uint64(v.groups) {
				return payloadError(object, v, at, "change %d has a bad group tag (the frame has %d groups)", n, v.groups)
			}
			g = int(t)
			pos += k
		}
		var c uint64
		var k int
		if pos < len(payload) && payload[pos] < 0x80 {
			c, k = uint64(payload[pos]), 1 // a change under 128 bytes
		} else {
			c, k = binary.Uvarint(payload[pos:])
		}
		if k <= 0 || c > uint64(len(payload)-pos-k) {
			return payloadError(object, v, at, "change %d (of group %d) has a bad length prefix or overruns the payload", n, g)
		}
		s := &st[g]
		if s.next == s.end || int64(k)+int64(c) > s.left {
			return payloadError(object, v, at, "change %d overruns group %d (key group %d): more changes or bytes than its directory entry says", n, g, groups[g].KeyGroup)
		}
		s.left -= int64(k) + int64(c)
		pos += k
		changes[s.next] = payload[pos : pos+int(c) : pos+int(c)]
		s.next++
		pos += int(c)
	}
	for i := range st {
		if s := &st[i]; s.next != s.end || s.left != 0 {
			return payloadError(object, v, pos, "group %d (key group %d) has %d of its %d changes and %d bytes left over", i, groups[i].KeyGroup,
				s.end-s.next, len(groups[i].Changes), s.left)
		}
	}
	return nil
}
