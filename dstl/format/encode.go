package format

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sync"

	"github.com/dstlgo/dstl/internal/crc32c"
)

// EncoderOptions configures an [Encoder].
type EncoderOptions struct {
	// Compression compresses each frame's payload with zstd, unless the
	// compressed form is not smaller, in which case the frame is stored raw.
	Compression bool
	// Version is the format version written: [Version1] (0 means it too)
	// or [Version2]. Readers of this package read both; a reader of an
	// earlier release reads only version 1 (see docs/FORMAT.md).
	Version int
}

// version returns the version byte that o writes.
func (o EncoderOptions) version() (byte, error) {
	switch o.Version {
	case 0, Version1:
		return Version1, nil
	case Version2:
		return Version2, nil
	}
	return 0, fmt.Errorf("dstl/format: encoder options: format version %d: %w (this package writes %d and %d)", o.Version, ErrVersion, Version1, Version2)
}

// maxRetainedBuffer bounds the scratch buffers an Encoder keeps between
// frames (and across [Encoder.Reset]), so that one huge change set does not
// pin its memory. It is above the default pre-emptive persist threshold of
// the engine (5 MiB), so steady writers reuse their buffers.
const maxRetainedBuffer = 16 << 20

// Encoder writes one object: a header, one frame per change set and a footer
// index. It buffers one frame at a time and writes each frame with a single
// Write call. An Encoder is not safe for concurrent use.
type Encoder struct {
	w      io.Writer
	opts   EncoderOptions
	size   int64
	header bool
	closed bool
	err    error // sticky write error, or the result of Close

	buf   []byte // the frame being built; reused across frames
	zbuf  []byte // compressed payload scratch; reused across frames
	slots []groupSlot
	batch []KeyedChange // changes read from a ChangeSet's AppendedFrom; cleared after each
	index []IndexEntry

	// inBuffer: the object is built in out, not written to w (see
	// [Encoder.ResetBuffer]).
	inBuffer bool
	out      []byte

	version byte
	// progress, when not nil, is told how much of the object built in
	// out is final (see [Encoder.SetProgress]); progressed is the last
	// length it was told.
	progress   func(n int64)
	progressed int64
	// crc is the CRC32C of the object's bytes written so far, and
	// crcDone whether it covers the whole object (after Close).
	crc     uint32
	crcDone bool
}

// NewEncoder returns an encoder writing to w. The header is written with the
// first frame, or by Close if there is none.
// An options' version that this package does not write fails every
// later call with an error wrapping [ErrVersion].
func NewEncoder(w io.Writer, opts EncoderOptions) *Encoder {
	e := &Encoder{}
	e.Reset(w, opts)
	return e
}

// Reset makes the encoder write a new object to w with opts, keeping its
// scratch buffers, so that a pooled encoder encodes without allocating.
func (e *Encoder) Reset(w io.Writer, opts EncoderOptions) {
	*e = Encoder{w: w, opts: opts, buf: e.buf[:0], zbuf: e.zbuf[:0], slots: e.slots[:0], batch: e.batch, index: e.index[:0]}
	e.version, e.err = opts.version()
}

// ResetBuffer makes the encoder build a new object in memory, appended to
// dst[:0], with opts: each frame is built in place, with no copy from a
// frame buffer to the object. [Encoder.Bytes] returns the object. Give dst
// the capacity of [EncoderOptions.EncodedSize] and the object never grows
// (never copies itself); a smaller dst grows as a slice does.
func (e *Encoder) ResetBuffer(dst []byte, opts EncoderOptions) {
	*e = Encoder{opts: opts, buf: e.buf[:0], zbuf: e.zbuf[:0], slots: e.slots[:0], batch: e.batch, index: e.index[:0], inBuffer: true, out: dst[:0]}
	e.version, e.err = opts.version()
}

// SetProgress makes an encoder reset with [Encoder.ResetBuffer] call fn
// with n each time the first n bytes of the object it builds are final:
// no later call writes them again, so another goroutine may read them
// (such as a Put of the object that starts before it is complete) while
// the encoder writes the bytes after them. Without compression, a frame
// of format version 2 becomes final a chunk of its changes at a time, as
// they are written in the order they were appended; a frame of version 1,
// whose changes are placed in their key groups, or a compressed frame,
// once whole; the index with Close. The object never grows past the
// capacity of the buffer ResetBuffer was given (a change set that would
// grow it is rejected with [ErrInvalidChangeSet], and nothing of it is
// written), so bytes told final stay where they are. fn is called on the
// goroutine that calls the encoder; nil stops the calls. The next Reset
// or ResetBuffer forgets fn.
func (e *Encoder) SetProgress(fn func(n int64)) { e.progress = fn }

// publish tells the progress function, if any, that the object's bytes
// up to n are final.
func (e *Encoder) publish(n int) {
	if e.progress != nil && int64(n) > e.progressed {
		e.progressed = int64(n)
		e.progress(int64(n))
	}
}

// ObjectCRC32C returns the CRC32C (Castagnoli) of the whole object, and
// true, once [Encoder.Close] returned nil; before, or after a failure,
// false. It comes from the frames' own checksums, combined, not from
// another pass over the object's bytes.
func (e *Encoder) ObjectCRC32C() (uint32, bool) { return e.crc, e.crcDone }

// Bytes returns the object built so far by an encoder reset with
// [Encoder.ResetBuffer] (complete once [Encoder.Close] returned nil), or
// nil for an encoder that writes to an io.Writer. It aliases the
// encoder's buffer until the next Reset or ResetBuffer.
func (e *Encoder) Bytes() []byte { return e.out }

// Size returns the number of bytes written to the underlying writer so far.
func (e *Encoder) Size() int64 { return e.size }

// WriteChangeSet appends cs to the object as one frame and returns where the
// frame is. The groups of cs must have strictly ascending key groups, the
// metadata group ([MetaKeyGroup]) first if present; other negative key
// groups and duplicates are rejected with [ErrInvalidChangeSet]. A change
// set given in append order ([ChangeSet.Appended] or
// [ChangeSet.AppendedFrom]) is stored by key group, as the same changes by
// group would be; a key group below the metadata group's is rejected, as
// is a change set in more than one form. So are change sets whose payload
// exceeds [MaxPayloadSize]. Such a rejection writes nothing and leaves the
// encoder usable; a write error is returned by every later call. The
// encoder does not retain cs, nor anything AppendedFrom gave it.
func (e *Encoder) WriteChangeSet(cs *ChangeSet) (FrameInfo, error) {
	if e.closed {
		return FrameInfo{}, fmt.Errorf("dstl/format: write change set: %w", ErrClosed)
	}
	if e.err != nil {
		return FrameInfo{}, e.err
	}
	if cs == nil {
		return FrameInfo{}, fmt.Errorf("dstl/format: nil change set: %w", ErrInvalidChangeSet)
	}
	if cs.AppendedFrom != nil {
		if e.batch == nil {
			e.batch = make([]KeyedChange, appendedBatchSize)
		}
		// The batch must not keep the caller's bytes reachable.
		defer clear(e.batch)
	}
	cs, lay, err := plan(cs, e.slots, e.batch)
	if err != nil {
		return FrameInfo{}, err
	}
	if lay.slots != nil && cap(lay.slots) <= maxRetainedSlots {
		e.slots = lay.slots[:0]
	}
	if e.version == Version2 {
		lay.setTags(cs)
	}
	return e.writePlanned(cs, lay)
}

// WriteMeasured appends the change set i of m (the i-th given to
// [Measured.Reset]) to the object as one frame and returns where the
// frame is, as [Encoder.WriteChangeSet] does, without measuring it again:
// it reads the set's changes once, checking that they are those m
// measured (for a set given by group, their number and lengths, read
// again). m must have been measured with the encoder's format version.
// WriteMeasured uses m's scratch: two encoders must not write from the
// same m at once. The encoder does not retain m.
func (e *Encoder) WriteMeasured(m *Measured, i int) (FrameInfo, error) {
	if e.closed {
		return FrameInfo{}, fmt.Errorf("dstl/format: write change set: %w", ErrClosed)
	}
	if e.err != nil {
		return FrameInfo{}, e.err
	}
	if i < 0 || i >= len(m.sets) {
		return FrameInfo{}, fmt.Errorf("dstl/format: change set %d of %d measured: %w", i, len(m.sets), ErrInvalidChangeSet)
	}
	if m.version != e.version {
		return FrameInfo{}, fmt.Errorf("dstl/format: change sets measured for format version %d, written in version %d: %w", m.version, e.version, ErrInvalidChangeSet)
	}
	cs, lay := m.sets[i], m.lays[i]
	if !cs.appendOrder() {
		// Laid out from the groups' lengths, which the caller may have
		// changed since: measured again (it reads only lengths), as
		// WriteChangeSet does. A set in append order is checked as it is
		// written.
		payload, logical, err := measure(cs)
		if err != nil {
			return FrameInfo{}, err
		}
		again := layout{payload: payload, logical: logical, groups: len(cs.Groups)}
		if m.version == Version2 {
			again.setTags(cs)
		}
		if again.payload != lay.payload || again.logical != lay.logical || again.groups != lay.groups || again.tags != lay.tags {
			return FrameInfo{}, changedError(cs, 0)
		}
	}
	if cs.AppendedFrom != nil {
		if e.batch == nil {
			e.batch = make([]KeyedChange, appendedBatchSize)
		}
		defer clear(e.batch)
	}
	return e.writePlanned(cs, lay)
}

// writePlanned appends cs, whose layout plan found (with its tags, in
// version 2), as one frame.
func (e *Encoder) writePlanned(cs *ChangeSet, lay layout) (FrameInfo, error) {
	payloadSize, logical := lay.payload+lay.tags, lay.logical
	dirEnd := FrameHeaderSize + lay.groups*dirEntrySize(e.version)
	if payloadSize > MaxPayloadSize {
		return FrameInfo{}, fmt.Errorf("dstl/format: change set %x/%d: payload of %d bytes exceeds %d bytes: %w",
			cs.LogID, cs.SequenceNumber, payloadSize, MaxPayloadSize, ErrInvalidChangeSet)
	}
	if int64(dirEnd)+payloadSize+FrameCRCSize > MaxFrameSize {
		return FrameInfo{}, fmt.Errorf("dstl/format: change set %x/%d: frame of %d groups and %d payload bytes exceeds %d bytes: %w",
			cs.LogID, cs.SequenceNumber, lay.groups, payloadSize, MaxFrameSize, ErrInvalidChangeSet)
	}
	var offset int64
	var frameLen int
	var frameCRC uint32
	if e.inBuffer {
		// Built where it goes: at the end of the object.
		header := 0
		if !e.header {
			header = HeaderSize
		}
		if e.progress != nil && int64(cap(e.out)-len(e.out)) < int64(header+dirEnd)+payloadSize+FrameCRCSize {
			return FrameInfo{}, fmt.Errorf("dstl/format: change set %x/%d: a frame of %d bytes does not fit in the %d bytes left of the object's buffer: %w",
				cs.LogID, cs.SequenceNumber, int64(dirEnd)+payloadSize+FrameCRCSize, cap(e.out)-len(e.out), ErrInvalidChangeSet)
		}
		if err := e.writeHeader(); err != nil {
			return FrameInfo{}, err
		}
		offset = e.size
		out, n, crc, err := e.appendFrame(e.out, cs, &lay)
		if err != nil {
			return FrameInfo{}, err
		}
		e.out, frameLen, frameCRC, e.size = out, n, crc, int64(len(out))
		e.publish(len(out))
	} else {
		buf, n, crc, err := e.appendFrame(e.buf[:0], cs, &lay)
		if err != nil {
			return FrameInfo{}, err
		}
		frameLen, frameCRC = n, crc
		if cap(buf) <= maxRetainedBuffer {
			e.buf = buf[:0]
		} else {
			e.buf = nil
		}
		if err := e.writeHeader(); err != nil {
			return FrameInfo{}, err
		}
		offset = e.size
		if err := e.write(buf); err != nil {
			return FrameInfo{}, err
		}
	}
	e.index = append(e.index, IndexEntry{
		Offset:         offset,
		Length:         int64(frameLen),
		LogID:          cs.LogID,
		SequenceNumber: cs.SequenceNumber,
	})
	e.crc = crc32c.Combine(e.crc, withCRCField(frameCRC), int64(frameLen))
	return FrameInfo{Offset: offset, Length: int64(frameLen), LogicalSize: logical}, nil
}

// withCRCField returns the CRC32C of a whole frame from crc, that of the
// frame without its CRC field: crc continued over the field, crc's four
// bytes, little-endian (by hand: a slice handed to crc32.Update escapes).
func withCRCField(crc uint32) uint32 {
	c := ^crc
	for v, i := crc, 0; i < FrameCRCSize; i++ {
		c = castagnoli[byte(c)^byte(v)] ^ c>>8
		v >>= 8
	}
	return ^c
}

// dirEntrySize is the size of a directory entry of the version.
func dirEntrySize(version byte) int {
	if version == Version2 {
		return DirEntrySizeV2
	}
	return DirEntrySize
}

// growFrame returns dst with room for need more bytes: dst itself, or,
// for an object that may grow (no progress function), a copy with
// headroom (the next frame is often a little larger; and an object built
// in memory grows geometrically, as a slice does).
func growFrame(dst []byte, need int) []byte {
	base := len(dst)
	if cap(dst)-base >= need {
		return dst
	}
	grown := make([]byte, base, max(base+need+need/8, 2*cap(dst)))
	copy(grown, dst)
	return grown
}

// appendFrame appends cs as one frame to dst (whose capacity it grows as
// needed) and returns it with the frame's length and its CRC32C. cs is
// planned and valid: lay is its layout.
func (e *Encoder) appendFrame(dst []byte, cs *ChangeSet, lay *layout) ([]byte, int, uint32, error) {
	if e.version == Version2 {
		return e.appendFrameV2(dst, cs, lay)
	}
	base := len(dst)
	dirEnd := FrameHeaderSize + lay.groups*DirEntrySize
	payloadSize := lay.payload
	dst = growFrame(dst, dirEnd+int(payloadSize)+FrameCRCSize)
	buf := dst[:base+dirEnd]
	clear(buf[base : base+FrameHeaderSize])
	if cs.appendOrder() {
		var err error
		if buf, err = appendScattered(buf, base, cs, e.batch, lay); err != nil {
			return dst[:base], 0, 0, err
		}
	} else {
		var off uint32
		for i := range cs.Groups {
			g := &cs.Groups[i]
			start := len(buf)
			for _, c := range g.Changes {
				if len(c) < 0x80 {
					buf = append(buf, byte(len(c)))
				} else {
					buf = binary.AppendUvarint(buf, uint64(len(c)))
				}
				buf = append(buf, c...)
			}
			n := uint32(len(buf) - start)
			putDirEntry(buf[base+FrameHeaderSize+i*DirEntrySize:], g.KeyGroup, uint32(len(g.Changes)), off, n)
			off += n
		}
	}

	buf, codec, err := e.compress(buf, base+dirEnd, payloadSize)
	if err != nil {
		return dst[:base], 0, 0, err
	}
	frame := buf[base:]
	frameLen := len(frame) + FrameCRCSize
	putFrameHeader(frame, Version1, codec, cs, payloadSize, lay.groups, frameLen)
	crc := crc32.Checksum(frame, castagnoli)
	return binary.LittleEndian.AppendUint32(buf, crc), frameLen, crc, nil
}

// compress replaces the payload at buf[at:], of payloadSize bytes, with
// its zstd form when the encoder compresses and that is smaller, and
// returns buf with the payload's codec.
func (e *Encoder) compress(buf []byte, at int, payloadSize int64) ([]byte, Codec, error) {
	if !e.opts.Compression || payloadSize == 0 {
		return buf, CodecNone, nil
	}
	enc, err := zstdEncoder()
	if err != nil {
		return buf, CodecNone, fmt.Errorf("dstl/format: create zstd encoder: %w", err)
	}
	codec := CodecNone
	z := enc.EncodeAll(buf[at:], e.zbuf[:0])
	if len(z) < int(payloadSize) {
		buf = append(buf[:at], z...)
		codec = CodecZstd
	}
	if cap(z) <= maxRetainedBuffer {
		e.zbuf = z[:0]
	}
	return buf, codec, nil
}

// putFrameHeader writes the fixed header of a frame of the version: all
// but the reserved bytes, which the caller cleared.
func putFrameHeader(frame []byte, version byte, codec Codec, cs *ChangeSet, payloadSize int64, groups, frameLen int) {
	binary.LittleEndian.PutUint32(frame[0:], uint32(frameLen))
	frame[frameOffVersion] = version
	frame[frameOffCodec] = byte(codec)
	copy(frame[frameOffLogID:], cs.LogID[:])
	binary.LittleEndian.PutUint64(frame[frameOffSQN:], cs.SequenceNumber)
	binary.LittleEndian.PutUint32(frame[frameOffPayloadSize:], uint32(payloadSize))
	binary.LittleEndian.PutUint32(frame[frameOffGroups:], uint32(groups))
}

// changedError reports that cs's reader gave other changes the second
// time it was read, seen at change n.
func changedError(cs *ChangeSet, n int) error {
	return fmt.Errorf("dstl/format: change set %x/%d: its reader gave other changes the second time (seen at change %d): %w",
		cs.LogID, cs.SequenceNumber, n, ErrInvalidChangeSet)
}

// appendScattered lays out the payload of a change set given in append
// order, and its directory, after the frame header at buf[base:]: it reads
// the changes in append order (AppendedFrom's a batch at a time, into
// batch) and writes each at the end of its group so far. buf ends at the
// directory, and its capacity holds the payload.
func appendScattered(buf []byte, base int, cs *ChangeSet, batch []KeyedChange, lay *layout) ([]byte, error) {
	dirEnd := len(buf)
	buf = buf[:dirEnd+int(lay.payload)]
	dir := buf[base+FrameHeaderSize:]
	var off int64
	i := 0
	for k := range lay.slots {
		sl := &lay.slots[k]
		if sl.count == 0 {
			continue
		}
		putDirEntry(dir[i*DirEntrySize:], lay.base+int32(k), uint32(sl.count), uint32(off), uint32(sl.size))
		sl.pos = dirEnd + int(off)
		off += sl.size
		sl.end, sl.left = dirEnd+int(off), sl.count
		i++
	}
	// The changes are read a second time: a reader must give the same
	// ones, or the frame would hold other bytes than its directory says.
	n := 0
	for {
		changes := cs.appendedBatch(n, batch)
		if len(changes) == 0 {
			break
		}
		for j, c := range changes {
			k := int64(c.KeyGroup) - int64(lay.base)
			if k < 0 || k >= int64(len(lay.slots)) {
				return buf, changedError(cs, n+j)
			}
			sl := &lay.slots[k]
			p, need := sl.pos, len(c.Data)+1
			if len(c.Data) >= 0x80 {
				need = len(c.Data) + uvarintLen(uint64(len(c.Data)))
			}
			if sl.end-p < need || sl.left == 0 {
				return buf, changedError(cs, n+j)
			}
			sl.left--
			if len(c.Data) < 0x80 {
				buf[p] = byte(len(c.Data))
				p++
			} else {
				p += binary.PutUvarint(buf[p:], uint64(len(c.Data)))
			}
			sl.pos = p + copy(buf[p:], c.Data)
		}
		n += len(changes)
	}
	for k := range lay.slots {
		if sl := &lay.slots[k]; sl.pos != sl.end || sl.left != 0 {
			return buf, changedError(cs, n)
		}
	}
	return buf, nil
}

// putDirEntry writes the directory entry of a group of key group kg, of
// count changes in n payload bytes at off in the frame's payload.
func putDirEntry(d []byte, kg int32, count, off, n uint32) {
	binary.LittleEndian.PutUint32(d[0:], uint32(kg))
	binary.LittleEndian.PutUint32(d[4:], count)
	binary.LittleEndian.PutUint32(d[8:], off)
	binary.LittleEndian.PutUint32(d[12:], n)
}

// EncodedSize returns the size of the object that an encoder of format
// version 1 without compression makes of the change sets:
// EncoderOptions{}.EncodedSize.
func EncodedSize(css ...*ChangeSet) (int64, error) {
	return EncoderOptions{}.EncodedSize(css...)
}

// EncodedSize returns the size of the object that an encoder with the
// options' version makes of the change sets without compression, or an
// error for a change set it would reject (or for a version it does not
// write); with compression, the object is at most as large. A buffer of
// this capacity, given to [Encoder.ResetBuffer], holds the whole object
// without growing.
func (o EncoderOptions) EncodedSize(css ...*ChangeSet) (int64, error) {
	// Scratch from a pool: an upload measures its object before it
	// encodes it, and should allocate no more for that than the encoder
	// does.
	m := measuredPool.Get().(*Measured)
	defer func() {
		m.Clear() // keeps none of the caller's change sets reachable
		measuredPool.Put(m)
	}()
	if err := m.Reset(o, css...); err != nil {
		return 0, err
	}
	return m.Size(), nil
}

// Measured is change sets measured for one object, in the order given: the
// object's size and each set's layout, so that an encoder writes them
// ([Encoder.WriteMeasured]) without reading their changes twice more. A
// zero Measured is empty; [Measured.Reset] measures, and reuses what an
// earlier measure allocated. It keeps the change sets it measured until
// [Measured.Clear] or the next Reset.
type Measured struct {
	version byte
	size    int64
	sets    []*ChangeSet
	lays    []layout
	slots   [][]groupSlot // scratch, one per set, kept between measures
	batch   []KeyedChange
}

// Reset measures the change sets as [EncoderOptions.EncodedSize] does,
// with o's format version, and keeps what it learnt for
// [Encoder.WriteMeasured]. On error m is empty.
func (m *Measured) Reset(o EncoderOptions, css ...*ChangeSet) error {
	m.Clear()
	version, err := o.version()
	if err != nil {
		return err
	}
	m.version, m.size = version, int64(HeaderSize+TrailerSize)
	for len(m.slots) < len(css) {
		m.slots = append(m.slots, nil)
	}
	for i, cs := range css {
		if cs == nil {
			m.Clear()
			return fmt.Errorf("dstl/format: nil change set: %w", ErrInvalidChangeSet)
		}
		var batch []KeyedChange
		if cs.AppendedFrom != nil {
			if m.batch == nil {
				m.batch = make([]KeyedChange, appendedBatchSize)
			}
			batch = m.batch
		}
		planned, lay, err := plan(cs, m.slots[i][:0], batch)
		clear(batch)
		if err != nil {
			m.Clear()
			return err
		}
		if lay.slots != nil && cap(lay.slots) <= maxRetainedSlots {
			m.slots[i] = lay.slots[:0]
		}
		if version == Version2 {
			lay.setTags(planned)
		}
		if lay.payload+lay.tags > MaxPayloadSize {
			m.Clear()
			return fmt.Errorf("dstl/format: change set %x/%d: payload of %d bytes exceeds %d bytes: %w",
				cs.LogID, cs.SequenceNumber, lay.payload+lay.tags, MaxPayloadSize, ErrInvalidChangeSet)
		}
		m.sets, m.lays = append(m.sets, planned), append(m.lays, lay)
		m.size += FrameHeaderSize + int64(lay.groups*dirEntrySize(version)) + lay.payload + lay.tags + FrameCRCSize + IndexEntrySize
	}
	return nil
}

// Size returns the size of the object that an encoder without
// compression makes of the measured change sets.
func (m *Measured) Size() int64 { return m.size }

// Len returns the number of change sets measured.
func (m *Measured) Len() int { return len(m.sets) }

// Clear empties m, so that it keeps none of the change sets it measured,
// and keeps its scratch for the next [Measured.Reset].
func (m *Measured) Clear() {
	clear(m.sets)
	m.sets, m.size = m.sets[:0], 0
	clear(m.lays)
	m.lays = m.lays[:0]
	// The scratch kept for the next measure: as many slots in all as an
	// encoder keeps for one set.
	kept := 0
	for i := range m.slots {
		if kept += cap(m.slots[i]); kept > maxRetainedSlots {
			m.slots[i] = nil
		}
	}
}

// measuredPool holds the scratch of EncodedSize.
var measuredPool = sync.Pool{New: func() any { return new(Measured) }}

// layout is the frame of a change set, as plan finds it.
type layout struct {
	payload int64 // uncompressed payload bytes of version 1: the changes with their length prefixes
	tags    int64 // version 2: the payload bytes of the changes' groups (see setTags)
	logical int64 // the sum of the changes' lengths
	groups  int   // directory entries
	// Of a change set in append order: slot k is key group base+k.
	base  int32
	slots []groupSlot
}

// groupSlot is one key group of a change set in append order.
type groupSlot struct {
	count, size int64 // changes, payload bytes
	// While encoding: where its next change goes, where its part ends,
	// and how many of its changes are still to come.
	pos, end int
	left     int64
}

// maxRetainedSlots bounds the slots an Encoder keeps between frames, and
// maxSlots those it makes for one change set: wider ranges of key groups
// are sorted instead.
const (
	maxRetainedSlots = 1 << 16
	maxSlots         = 1 << 20
)

// plan validates cs and returns its layout, with the change set to encode:
// cs, or, for changes in append order over a range of key groups much
// wider than their number, the same changes by group. slots is scratch
// that the layout may reuse, and batch the buffer that AppendedFrom's
// changes are read into.
func plan(cs *ChangeSet, slots []groupSlot, batch []KeyedChange) (*ChangeSet, layout, error) {
	if !cs.appendOrder() {
		payload, logical, err := measure(cs)
		return cs, layout{payload: payload, logical: logical, groups: len(cs.Groups)}, err
	}
	if len(cs.Groups) > 0 || (len(cs.Appended) > 0 && cs.AppendedFrom != nil) {
		return nil, layout{}, fmt.Errorf("dstl/format: change set %x/%d is in more than one form (Groups, Appended, AppendedFrom): %w",
			cs.LogID, cs.SequenceNumber, ErrInvalidChangeSet)
	}
	// One pass: count each key group's changes and bytes, in slots that
	// widen as key groups outside them come, so long as they stay within
	// a few times the set's changes; past that the key groups are sparse,
	// and sorting costs less than a slot per key group.
	total := len(cs.Appended)
	if cs.AppendedFrom != nil {
		total = cs.AppendedFrom.Len()
	}
	limit := min(4*int64(total)+1024, maxSlots)
	slots = slots[:0]
	lay := layout{}
	sparse := false
	n := 0
	for changes := cs.appendedBatch(0, batch); len(changes) > 0; changes = cs.appendedBatch(n, batch) {
		for i, c := range changes {
			k := int64(c.KeyGroup) - int64(lay.base)
			if k < 0 || k >= int64(len(slots)) || sparse {
				if c.KeyGroup < MetaKeyGroup {
					return nil, layout{}, fmt.Errorf("dstl/format: change set %x/%d: appended change %d has key group %d: %w",
						cs.LogID, cs.SequenceNumber, n+i, c.KeyGroup, ErrInvalidChangeSet)
				}
				if sparse {
					continue // only checked: the changes are sorted below
				}
				var ok bool
				if slots, lay.base, ok = widen(slots, lay.base, c.KeyGroup, limit); !ok {
					sparse = true
					continue
				}
				k = int64(c.KeyGroup) - int64(lay.base)
			}
			sl := &slots[k]
			sl.count++
			sl.size += int64(uvarintLen(uint64(len(c.Data))) + len(c.Data))
			lay.logical += int64(len(c.Data))
		}
		n += len(changes)
	}
	if n != total {
		return nil, layout{}, fmt.Errorf("dstl/format: change set %x/%d: its reader gave %d changes, not the %d of its Len: %w",
			cs.LogID, cs.SequenceNumber, n, total, ErrInvalidChangeSet)
	}
	if n == 0 {
		return cs, layout{}, nil // an empty change set
	}
	if sparse {
		byGroup := &ChangeSet{LogID: cs.LogID, SequenceNumber: cs.SequenceNumber, Groups: cs.ByGroup()}
		sorted := 0
		for _, g := range byGroup.Groups {
			sorted += len(g.Changes)
		}
		if sorted != total {
			return nil, layout{}, fmt.Errorf("dstl/format: change set %x/%d: its reader gave %d changes the second time, %d the first: %w",
				cs.LogID, cs.SequenceNumber, sorted, total, ErrInvalidChangeSet)
		}
		return plan(byGroup, slots[:0], batch)
	}
	lay.slots = slots
	for k := range slots {
		if slots[k].count > 0 {
			lay.groups++
			lay.payload += slots[k].size
		}
	}
	if lay.payload > MaxPayloadSize {
		return nil, layout{}, fmt.Errorf("dstl/format: change set %x/%d: payload of %d bytes exceeds %d bytes: %w",
			cs.LogID, cs.SequenceNumber, lay.payload, MaxPayloadSize, ErrInvalidChangeSet)
	}
	return cs, lay, nil
}

// widen returns slots (slot k for key group base+k) widened to hold key
// group kg, with room to grow (twice as many, toward kg), or false if
// that takes more than limit slots. kg is at least MetaKeyGroup.
func widen(slots []groupSlot, base, kg int32, limit int64) ([]groupSlot, int32, bool) {
	lo, hi := int64(kg), int64(kg)
	if len(slots) > 0 {
		lo, hi = min(int64(base), lo), max(int64(base)+int64(len(slots))-1, hi)
	}
	if hi-lo+1 > limit {
		return slots, base, false
	}
	size := min(max(hi-lo+1, 2*int64(len(slots))), limit)
	if len(slots) > 0 && int64(kg) < int64(base) {
		lo = max(hi-size+1, MetaKeyGroup)
	} else {
		hi = min(lo+size-1, math.MaxInt32)
	}
	size = hi - lo + 1
	old := len(slots)
	if int64(cap(slots)) < size {
		grown := make([]groupSlot, size)
		if old > 0 {
			copy(grown[int64(base)-lo:], slots)
		}
		return grown, int32(lo), true
	}
	slots = slots[:size]
	if shift := int(int64(base) - lo); old > 0 && shift > 0 {
		copy(slots[shift:], slots[:old])
		clear(slots[:shift])
		clear(slots[shift+old:])
	} else {
		clear(slots[old:])
	}
	return slots, int32(lo), true
}

// measure validates the group order of cs and returns its uncompressed
// payload size and the sum of its change lengths.
func measure(cs *ChangeSet) (payload, logical int64, err error) {
	prev := int64(MetaKeyGroup) - 1
	for i := range cs.Groups {
		g := &cs.Groups[i]
		kg := int64(g.KeyGroup)
		switch {
		case kg < MetaKeyGroup:
			return 0, 0, fmt.Errorf("dstl/format: change set %x/%d: group %d has key group %d: %w",
				cs.LogID, cs.SequenceNumber, i, kg, ErrInvalidChangeSet)
		case kg <= prev:
			return 0, 0, fmt.Errorf("dstl/format: change set %x/%d: group %d has key group %d after %d; want strictly ascending key groups, metadata (%d) first: %w",
				cs.LogID, cs.SequenceNumber, i, kg, prev, MetaKeyGroup, ErrInvalidChangeSet)
		}
		prev = kg
		if uint64(len(g.Changes)) > MaxPayloadSize {
			return 0, 0, fmt.Errorf("dstl/format: change set %x/%d: payload exceeds %d bytes: %w",
				cs.LogID, cs.SequenceNumber, MaxPayloadSize, ErrInvalidChangeSet)
		}
		var size int64
		for _, c := range g.Changes {
			size += int64(uvarintLen(uint64(len(c))) + len(c))
			logical += int64(len(c))
		}
		payload += size
		if payload > MaxPayloadSize {
			return 0, 0, fmt.Errorf("dstl/format: change set %x/%d: payload exceeds %d bytes: %w",
				cs.LogID, cs.SequenceNumber, MaxPayloadSize, ErrInvalidChangeSet)
		}
	}
	return payload, logical, nil
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// Close writes the header if no frame was written, then the footer index.
// The encoder cannot be used afterwards; Close does not close the underlying
// writer. Calling Close again returns the first call's result.
func (e *Encoder) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	if e.err != nil {
		return e.err
	}
	if err := e.writeHeader(); err != nil {
		return err
	}
	indexOffset := e.size
	n := len(e.index)*IndexEntrySize + TrailerSize
	buf := e.buf[:0]
	if cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	for _, x := range e.index {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(x.Offset))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(x.Length))
		buf = append(buf, x.LogID[:]...)
		buf = binary.LittleEndian.AppendUint64(buf, x.SequenceNumber)
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(e.index)))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(indexOffset))
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
	buf = append(buf, FooterMagic...)
	if e.inBuffer && e.progress != nil && len(buf) > cap(e.out)-len(e.out) {
		e.err = fmt.Errorf("dstl/format: the index of %d bytes does not fit in the %d bytes left of the object's buffer: %w", len(buf), cap(e.out)-len(e.out), ErrInvalidChangeSet)
		return e.err
	}
	err := e.write(buf)
	if err == nil {
		e.crc = crc32.Update(e.crc, castagnoli, buf)
		e.crcDone = true
		e.publish(len(e.out))
	}
	if cap(buf) <= maxRetainedBuffer {
		e.buf = buf[:0] // kept for Reset
	} else {
		e.buf = nil
	}
	e.index = e.index[:0]
	return err
}

func (e *Encoder) writeHeader() error {
	if e.header {
		return nil
	}
	e.header = true
	if e.inBuffer {
		// Straight into the object: an array handed to write would
		// escape, through the io.Writer, and cost an allocation.
		e.out = append(append(e.out, Magic...), e.version, 0, 0, 0)
		e.size += HeaderSize
		e.crc = crc32.Checksum(e.out[len(e.out)-HeaderSize:], castagnoli)
		return nil
	}
	var h [HeaderSize]byte
	copy(h[:], Magic)
	h[4] = e.version
	e.crc = crc32.Checksum(h[:], castagnoli)
	return e.write(h[:])
}

// write writes p in full or records a sticky error.
func (e *Encoder) write(p []byte) error {
	if e.inBuffer {
		e.out = append(e.out, p...)
		e.size += int64(len(p))
		return nil
	}
	n, err := e.w.Write(p)
	e.size += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		e.err = fmt.Errorf("dstl/format: write at offset %d: %w", e.size, err)
		return e.err
	}
	return nil
}
