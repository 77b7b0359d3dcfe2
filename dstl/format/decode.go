package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Offsets of the fields of a frame's fixed header. The length, the version
// and the trailing CRC32C keep their places in every format version.
const (
	frameOffVersion     = 4
	frameOffCodec       = 5
	frameOffReserved    = 6 // 2 bytes
	frameOffLogID       = 8
	frameOffSQN         = 24
	frameOffPayloadSize = 32
	frameOffGroups      = 36
)

// frameView is a frame whose header, checksum and directory were validated.
type frameView struct {
	version byte
	logID   [16]byte
	sqn     uint64
	codec   Codec
	logical int    // uncompressed payload size
	groups  int    // number of directory entries
	dir     []byte // the directory
	payload []byte // the stored payload
	payOff  int64  // absolute offset of the stored payload
}

// checkFrameLength checks that a frame's length field matches its bytes.
func checkFrameLength(object string, offset int64, frame []byte) error {
	if len(frame) < 4 {
		return errorf(object, offset, ErrCorrupt, "frame truncated to %d bytes, shorter than its length field", len(frame))
	}
	n := binary.LittleEndian.Uint32(frame)
	switch {
	case n < MinFrameSize || n > MaxFrameSize:
		return errorf(object, offset, ErrCorrupt, "frame length %d out of range [%d, %d]", n, MinFrameSize, MaxFrameSize)
	case uint64(n) > uint64(len(frame)):
		return errorf(object, offset, ErrCorrupt, "frame truncated: length field says %d bytes, have %d", n, len(frame))
	case uint64(n) < uint64(len(frame)):
		return errorf(object, offset, ErrCorrupt, "frame length field says %d bytes, but the frame is %d bytes", n, len(frame))
	}
	return nil
}

// VerifyFrame checks a frame's length field and CRC32C, the first checks
// of [DecodeFrame], and returns the error DecodeFrame would return for
// them. frame must be exactly the frame's bytes and offset its offset in
// the object; object and offset serve error messages. A frame that passed
// can be decoded by [FrameDecoder.DecodeVerified] while its bytes stay
// unchanged.
func VerifyFrame(object string, offset int64, frame []byte) error {
	if err := checkFrameLength(object, offset, frame); err != nil {
		return err
	}
	crcAt := len(frame) - FrameCRCSize
	want := binary.LittleEndian.Uint32(frame[crcAt:])
	if got := crc32.Checksum(frame[:crcAt], castagnoli); got != want {
		return errorf(object, offset+int64(crcAt), ErrChecksum, "frame CRC32C is %#08x, computed %#08x over %d bytes from offset %d", want, got, crcAt, offset)
	}
	return nil
}

// parseFrame checks a frame's length, CRC32C (unless verified says that
// [VerifyFrame] passed on these bytes), header and directory. frame must be
// exactly the frame's bytes; offset is its offset in the object.
func parseFrame(object string, offset int64, frame []byte, verified bool) (frameView, error) {
	var v frameView
	check := VerifyFrame
	if verified {
		check = checkFrameLength
	}
	if err := check(object, offset, frame); err != nil {
		return v, err
	}
	crcAt := len(frame) - FrameCRCSize

	v.version = frame[frameOffVersion]
	if v.version != Version1 && v.version != Version2 {
		return v, errorf(object, offset+frameOffVersion, ErrVersion, "frame version %d, this reader supports %d and %d", v.version, Version1, Version2)
	}
	dirEntry := dirEntrySize(v.version)
	v.codec = Codec(frame[frameOffCodec])
	if v.codec != CodecNone && v.codec != CodecZstd {
		return v, errorf(object, offset+frameOffCodec, ErrCorrupt, "unknown codec %d", frame[frameOffCodec])
	}
	for i := frameOffReserved; i < frameOffLogID; i++ {
		if frame[i] != 0 {
			return v, errorf(object, offset+int64(i), ErrCorrupt, "reserved frame header byte is %#02x, want 0", frame[i])
		}
	}
	copy(v.logID[:], frame[frameOffLogID:])
	v.sqn = binary.LittleEndian.Uint64(frame[frameOffSQN:])
	logical := binary.LittleEndian.Uint32(frame[frameOffPayloadSize:])
	if logical > MaxPayloadSize {
		return v, errorf(object, offset+frameOffPayloadSize, ErrCorrupt, "payload size %d exceeds %d", logical, MaxPayloadSize)
	}
	v.logical = int(logical)
	groups := binary.LittleEndian.Uint32(frame[frameOffGroups:])
	if uint64(groups) > uint64(crcAt-FrameHeaderSize)/uint64(dirEntry) {
		return v, errorf(object, offset+frameOffGroups, ErrCorrupt, "%d groups do not fit in a %d-byte frame", groups, len(frame))
	}
	v.groups = int(groups)
	dirEnd := FrameHeaderSize + v.groups*dirEntry
	v.dir = frame[FrameHeaderSize:dirEnd]
	v.payload = frame[dirEnd:crcAt]
	v.payOff = offset + int64(dirEnd)
	switch v.codec {
	case CodecNone:
		if len(v.payload) != v.logical {
			return v, errorf(object, offset+frameOffPayloadSize, ErrCorrupt, "payload size %d, but %d payload bytes are stored raw", v.logical, len(v.payload))
		}
	case CodecZstd:
		if uint64(v.logical) > uint64(len(v.payload))*zstdMaxRatio {
			return v, errorf(object, offset+frameOffPayloadSize, ErrCorrupt, "payload size %d is impossible for %d bytes of zstd", v.logical, len(v.payload))
		}
	}
	if v.version == Version2 {
		return v, checkDirectoryV2(object, offset, &v)
	}

	prev := int64(MetaKeyGroup) - 1
	var sum uint64
	for i := 0; i < v.groups; i++ {
		d := v.dir[i*DirEntrySize:]
		at := offset + FrameHeaderSize + int64(i*DirEntrySize)
		kg := int64(int32(binary.LittleEndian.Uint32(d[0:])))
		count := binary.LittleEndian.Uint32(d[4:])
		off := binary.LittleEndian.Uint32(d[8:])
		size := binary.LittleEndian.Uint32(d[12:])
		switch {
		case kg < MetaKeyGroup:
			return v, errorf(object, at, ErrCorrupt, "group %d has invalid key group %d", i, kg)
		case kg <= prev:
			return v, errorf(object, at, ErrCorrupt, "group %d has key group %d after %d; key groups must ascend strictly", i, kg, prev)
		case uint64(off) != sum:
			return v, errorf(object, at+8, ErrCorrupt, "group %d (key group %d) starts at payload byte %d, want %d", i, kg, off, sum)
		case sum+uint64(size) > uint64(v.logical):
			return v, errorf(object, at+12, ErrCorrupt, "group %d (key group %d) of %d bytes at payload byte %d overruns the %d-byte payload", i, kg, size, off, v.logical)
		case count > size:
			return v, errorf(object, at+4, ErrCorrupt, "group %d (key group %d) claims %d changes in %d bytes", i, kg, count, size)
		}
		prev = kg
		sum += uint64(size)
	}
	if sum != uint64(v.logical) {
		return v, errorf(object, offset+frameOffPayloadSize, ErrCorrupt, "payload size %d, but the groups cover %d bytes", v.logical, sum)
	}
	return v, nil
}

// ReadFrameHeader parses a frame's header and key-group directory without
// decompressing its payload, after verifying the frame's length and CRC32C.
// frame must be exactly the frame's bytes and offset its offset in the
// object; object and offset serve error messages.
func ReadFrameHeader(object string, offset int64, frame []byte) (*FrameHeader, error) {
	v, err := parseFrame(object, offset, frame, false)
	if err != nil {
		return nil, err
	}
	h := &FrameHeader{
		Version:        int(v.version),
		LogID:          v.logID,
		SequenceNumber: v.sqn,
		Codec:          v.codec,
		LogicalSize:    int64(v.logical),
		StoredSize:     int64(len(v.payload)),
	}
	if v.groups > 0 {
		h.Groups = make([]GroupInfo, v.groups)
	}
	entry, sizeAt := DirEntrySize, 12
	if v.version == Version2 {
		entry, sizeAt = DirEntrySizeV2, 8
	}
	for i := range h.Groups {
		d := v.dir[i*entry:]
		h.Groups[i] = GroupInfo{
			KeyGroup: int32(binary.LittleEndian.Uint32(d[0:])),
			Count:    int(binary.LittleEndian.Uint32(d[4:])),
			Size:     int64(binary.LittleEndian.Uint32(d[sizeAt:])),
		}
	}
	return h, nil
}

// DecodeFrame decodes one frame. frame must be exactly the frame's bytes, as
// located by the footer index or a [FrameInfo]; offset is its offset in the
// object. object and offset serve error messages only. The changes returned
// share one newly allocated buffer and never alias frame.
func DecodeFrame(object string, offset int64, frame []byte) (*ChangeSet, error) {
	var d FrameDecoder
	if err := d.decode(object, offset, frame, true, false); err != nil {
		return nil, err
	}
	return &d.cs, nil
}

// A FrameDecoder decodes frames one after another, as [DecodeFrame] does,
// but reuses its memory, and the changes of an uncompressed frame alias
// the frame instead of a copy. The zero FrameDecoder is ready to use; it
// is not safe for concurrent use.
type FrameDecoder struct {
	cs      ChangeSet
	changes [][]byte
	used    int       // changes[:used] may alias frames decoded since the last Reset
	v2      []v2Group // scratch of frames of version 2
}

// Reset drops the decoder's references to the frames it decoded (its
// change set aliases them, or a buffer it decompressed into), so that a
// decoder kept for later, as in a pool, does not keep them alive. The
// memory it grew is kept for the next Decode. The last change set
// returned is no longer valid.
func (d *FrameDecoder) Reset() {
	clear(d.changes[:d.used])
	clear(d.cs.Groups[:cap(d.cs.Groups)])
	d.cs = ChangeSet{Groups: d.cs.Groups[:0]}
	d.used = 0
}

// Decode decodes one frame (see [DecodeFrame]). The change set returned is
// valid while frame is not changed and until the next Decode.
func (d *FrameDecoder) Decode(object string, offset int64, frame []byte) (*ChangeSet, error) {
	if err := d.decode(object, offset, frame, false, false); err != nil {
		return nil, err
	}
	return &d.cs, nil
}

// DecodeVerified decodes a frame that passed [VerifyFrame] and has not
// changed since, as Decode does but without computing its CRC32C again:
// a reader that verified the frames of a fetched range at once, in
// parallel, decodes them later. Every other check of Decode is made.
// The caller answers for "has not changed": bytes overwritten after the
// verification (a buffer released and reused too early) decode without an
// error, so the memory must be owned until the changes are consumed.
func (d *FrameDecoder) DecodeVerified(object string, offset int64, frame []byte) (*ChangeSet, error) {
	if err := d.decode(object, offset, frame, false, true); err != nil {
		return nil, err
	}
	return &d.cs, nil
}

func (d *FrameDecoder) decode(object string, offset int64, frame []byte, copyPayload, verified bool) error {
	v, err := parseFrame(object, offset, frame, verified)
	if err != nil {
		return err
	}
	var payload []byte
	switch v.codec {
	case CodecNone:
		payload = v.payload
		if copyPayload {
			payload = bytes.Clone(v.payload)
		}
	case CodecZstd:
		dec, err := zstdDecoder()
		if err != nil {
			return fmt.Errorf("dstl/format: create zstd decoder: %w", err)
		}
		buf := make([]byte, 0, v.logical)
		payload, err = dec.DecodeAll(v.payload, buf)
		if err != nil {
			return errorf(object, v.payOff, ErrCorrupt, "zstd payload of %d bytes: %v", len(v.payload), err)
		}
		if len(payload) != v.logical || (v.logical > 0 && &payload[0] != &buf[:1][0]) {
			return errorf(object, v.payOff, ErrCorrupt, "zstd payload decodes to %d bytes, want %d", len(payload), v.logical)
		}
	}

	cs := &d.cs
	groups := cs.Groups[:0]
	*cs = ChangeSet{LogID: v.logID, SequenceNumber: v.sqn, Groups: groups}
	if v.version == Version2 {
		return d.decodeV2(object, v, payload)
	}
	if v.groups == 0 {
		cs.Groups = nil
		return nil
	}
	changes := d.readyGroups(v, DirEntrySize)
	for i := range cs.Groups {
		d := v.dir[i*DirEntrySize:]
		count := int(binary.LittleEndian.Uint32(d[4:]))
		pos := int(binary.LittleEndian.Uint32(d[8:]))
		end := pos + int(binary.LittleEndian.Uint32(d[12:]))
		g := &cs.Groups[i]
		*g = Group{KeyGroup: int32(binary.LittleEndian.Uint32(d[0:]))}
		if count > 0 {
			g.Changes = changes[:count:count]
			changes = changes[count:]
		}
		for j := range g.Changes {
			var n uint64
			var k int
			if pos < end && payload[pos] < 0x80 {
				n, k = uint64(payload[pos]), 1 // a change under 128 bytes
			} else {
				n, k = binary.Uvarint(payload[pos:end])
			}
			if k <= 0 || n > uint64(end-pos-k) {
				return payloadError(object, v, pos, "change %d of group %d (key group %d) has a bad length prefix or overruns the group", j, i, g.KeyGroup)
			}
			pos += k
			g.Changes[j] = payload[pos : pos+int(n) : pos+int(n)]
			pos += int(n)
		}
		if pos != end {
			return payloadError(object, v, pos, "group %d (key group %d) has %d bytes after its %d changes", i, g.KeyGroup, end-pos, count)
		}
	}
	return nil
}

// readyGroups sets d.cs.Groups to the v.groups groups of the directory
// (reusing its array when large enough) and returns the changes of all of
// them, in d.changes; the directory's entries are entrySize bytes long,
// each with its group's count of changes at byte 4.
func (d *FrameDecoder) readyGroups(v frameView, entrySize int) [][]byte {
	total := 0
	for i := 0; i < v.groups; i++ {
		total += int(binary.LittleEndian.Uint32(v.dir[i*entrySize+4:]))
	}
	groups := d.cs.Groups[:0]
	if cap(groups) < v.groups {
		groups = make([]Group, v.groups)
	}
	d.cs.Groups = groups[:v.groups]
	if cap(d.changes) < total {
		d.changes = make([][]byte, total)
	}
	d.used = max(d.used, total)
	return d.changes[:total]
}

// payloadError reports a problem at byte pos of the uncompressed payload: at
// its absolute offset for a raw payload, at the payload's start otherwise.
func payloadError(object string, v frameView, pos int, format string, args ...any) *Error {
	e := errorf(object, v.payOff, ErrCorrupt, format, args...)
	if v.codec == CodecNone {
		e.Offset += int64(pos)
	} else {
		e.Detail += fmt.Sprintf(" (uncompressed payload byte %d)", pos)
	}
	return e
}

// indexReadAhead is how many bytes ReadIndex reads from the end of the
// object at first, hoping that the whole index fits.
const indexReadAhead = 64 << 10

// ReadIndex reads and validates the header and the footer index of an object
// of size bytes: with one read for objects up to 64 KiB, two for larger
// ones (three if the index exceeds 64 KiB). The entries it returns are validated to be contiguous frames from HeaderSize to
// the index. Corruption and truncation are reported as an [*Error]; an error
// of r other than io.EOF is returned wrapped as it is.
func ReadIndex(object string, r io.ReaderAt, size int64) ([]IndexEntry, error) {
	if size < HeaderSize {
		return nil, errorf(object, max(size, 0), ErrCorrupt, "object of %d bytes is shorter than the %d-byte header (truncated?)", size, HeaderSize)
	}
	var hdr [HeaderSize]byte
	tailLen := min(size-HeaderSize, indexReadAhead)
	var tail []byte
	if size <= indexReadAhead {
		all := make([]byte, size)
		if err := readAt(object, r, all, 0); err != nil {
			return nil, err
		}
		copy(hdr[:], all)
		tail = all[HeaderSize:]
	} else {
		if err := readAt(object, r, hdr[:], 0); err != nil {
			return nil, err
		}
		tail = make([]byte, tailLen)
		if err := readAt(object, r, tail, size-tailLen); err != nil {
			return nil, err
		}
	}
	if err := checkHeader(object, hdr[:]); err != nil {
		return nil, err
	}
	count, indexOffset, err := parseTrailer(object, size, tail[len(tail)-min(len(tail), TrailerSize):])
	if err != nil {
		return nil, err
	}
	// The checksummed region: the entries, the count and the index offset.
	region := size - indexOffset - 8
	var idx []byte
	if region+8 <= int64(len(tail)) {
		idx = tail[int64(len(tail))-region-8 : len(tail)-8]
	} else {
		idx = make([]byte, region)
		if err := readAt(object, r, idx, indexOffset); err != nil {
			return nil, err
		}
	}
	return parseIndex(object, size, count, indexOffset, idx, binary.LittleEndian.Uint32(tail[len(tail)-8:]))
}

func readAt(object string, r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errorf(object, off+int64(n), ErrCorrupt, "object ends at offset %d, before its declared size (truncated?)", off+int64(n))
	}
	return fmt.Errorf("dstl/format: object %q: read %d bytes at offset %d: %w", object, len(p), off, err)
}

func checkHeader(object string, h []byte) error {
	if string(h[:4]) != Magic {
		return errorf(object, 0, ErrCorrupt, "magic is %q, want %q: not a dstl object", h[:4], Magic)
	}
	if h[4] != Version1 && h[4] != Version2 {
		return errorf(object, 4, ErrVersion, "version %d, this reader supports %d and %d", h[4], Version1, Version2)
	}
	if h[5] != 0 {
		return errorf(object, 5, ErrVersion, "unknown header flags %#02x", h[5])
	}
	if h[6] != 0 || h[7] != 0 {
		return errorf(object, 6, ErrCorrupt, "reserved header bytes are %#02x %#02x, want 0", h[6], h[7])
	}
	return nil
}

// parseTrailer validates the trailer t (the last TrailerSize bytes, or fewer
// if the object is shorter) of an object of size bytes and returns the number
// of index entries and the index offset.
func parseTrailer(object string, size int64, t []byte) (count uint32, indexOffset int64, err error) {
	if size < MinObjectSize || len(t) < TrailerSize {
		return 0, 0, errorf(object, size, ErrCorrupt, "object of %d bytes is too short for its footer (truncated?)", size)
	}
	at := size - TrailerSize
	if string(t[16:20]) != FooterMagic {
		return 0, 0, errorf(object, size-4, ErrCorrupt, "footer magic is %q, want %q (truncated or not closed?)", t[16:20], FooterMagic)
	}
	count = binary.LittleEndian.Uint32(t[0:])
	if uint64(count) > uint64(size-MinObjectSize)/IndexEntrySize {
		return 0, 0, errorf(object, at, ErrCorrupt, "index of %d entries does not fit in a %d-byte object", count, size)
	}
	off := binary.LittleEndian.Uint64(t[4:])
	want := uint64(size) - TrailerSize - uint64(count)*IndexEntrySize
	if off != want {
		return 0, 0, errorf(object, at+4, ErrCorrupt, "index offset is %d, want %d for %d entries", off, want, count)
	}
	return count, int64(off), nil
}

// parseIndex checks the index CRC32C and the entries. idx holds the bytes
// from indexOffset to the CRC field.
func parseIndex(object string, size int64, count uint32, indexOffset int64, idx []byte, crc uint32) ([]IndexEntry, error) {
	if got := crc32.Checksum(idx, castagnoli); got != crc {
		return nil, errorf(object, size-8, ErrChecksum, "index CRC32C is %#08x, computed %#08x over %d bytes from offset %d", crc, got, len(idx), indexOffset)
	}
	if count == 0 {
		return nil, nil
	}
	entries := make([]IndexEntry, count)
	next := int64(HeaderSize)
	for i := range entries {
		b := idx[i*IndexEntrySize:]
		at := indexOffset + int64(i*IndexEntrySize)
		e := &entries[i]
		off := binary.LittleEndian.Uint64(b[0:])
		n := binary.LittleEndian.Uint32(b[8:])
		if off != uint64(next) {
			return nil, errorf(object, at, ErrCorrupt, "index entry %d says frame at offset %d, want %d (frames are contiguous)", i, off, next)
		}
		if n < MinFrameSize || n > MaxFrameSize || int64(n) > indexOffset-next {
			return nil, errorf(object, at+8, ErrCorrupt, "index entry %d has frame length %d at offset %d, index at %d", i, n, off, indexOffset)
		}
		e.Offset, e.Length = next, int64(n)
		copy(e.LogID[:], b[12:28])
		e.SequenceNumber = binary.LittleEndian.Uint64(b[28:])
		next += int64(n)
	}
	if next != indexOffset {
		return nil, errorf(object, indexOffset, ErrCorrupt, "frames end at offset %d, but the index starts at %d", next, indexOffset)
	}
	return entries, nil
}

// DecodeObject validates and decodes a whole object: its header, footer
// index and every frame, and checks that the index matches the frames (each
// frame's length, log id and sequence number). It returns the index and the
// change sets in object order.
func DecodeObject(object string, data []byte) ([]IndexEntry, []*ChangeSet, error) {
	index, err := ReadIndex(object, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, nil, err
	}
	indexOffset := int64(len(data)) - TrailerSize - int64(len(index))*IndexEntrySize
	sets := make([]*ChangeSet, len(index))
	for i, e := range index {
		cs, err := DecodeFrame(object, e.Offset, data[e.Offset:e.Offset+e.Length])
		if err != nil {
			return nil, nil, err
		}
		if v := data[e.Offset+frameOffVersion]; v != data[4] {
			return nil, nil, errorf(object, e.Offset+frameOffVersion, ErrCorrupt, "frame %d is of format version %d, its object of version %d", i, v, data[4])
		}
		at := indexOffset + int64(i*IndexEntrySize)
		if cs.LogID != e.LogID {
			return nil, nil, errorf(object, at+12, ErrCorrupt, "index entry %d has log id %x, frame at offset %d has %x", i, e.LogID, e.Offset, cs.LogID)
		}
		if cs.SequenceNumber != e.SequenceNumber {
			return nil, nil, errorf(object, at+28, ErrCorrupt, "index entry %d has sequence number %d, frame at offset %d has %d", i, e.SequenceNumber, e.Offset, cs.SequenceNumber)
		}
		sets[i] = cs
	}
	return index, sets, nil
}
