package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"weak"
)

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	many := make([]*ChangeSet, 200)
	for i := range many {
		many[i] = sampleChangeSet(r, byte(i%7), uint64(i), 1+i%5, i%4, 20, i%2 == 0)
	}
	cases := []struct {
		name string
		sets []*ChangeSet
	}{
		{"no frames", nil},
		{"empty change set", []*ChangeSet{{LogID: logID(1), SequenceNumber: 0}}},
		{"metadata only", []*ChangeSet{{LogID: logID(1), SequenceNumber: 5, Groups: []Group{{KeyGroup: -1, Changes: [][]byte{[]byte("m1"), []byte("m2")}}}}}},
		{"empty groups and zero-length changes", []*ChangeSet{{LogID: logID(2), SequenceNumber: 1 << 63, Groups: []Group{
			{KeyGroup: -1},
			{KeyGroup: 0, Changes: [][]byte{{}, nil, []byte("x"), {}}},
			{KeyGroup: 1},
			{KeyGroup: 1<<31 - 1, Changes: [][]byte{nil}},
		}}}},
		{"large change", []*ChangeSet{{LogID: logID(3), Groups: []Group{{KeyGroup: 7, Changes: [][]byte{textBytes(r, 300_000), randomBytes(r, 200)}}}}}},
		{"incompressible", []*ChangeSet{sampleChangeSet(r, 4, 9, 3, 10, 100, false)}},
		{"compressible", []*ChangeSet{sampleChangeSet(r, 5, 10, 30, 20, 100, true)}},
		{"many frames", many},
	}
	for _, tc := range cases {
		for _, opts := range []EncoderOptions{{}, {Compression: true}, {Version: Version2}, {Version: Version2, Compression: true}} {
			t.Run(fmt.Sprintf("%s/version=%d/compression=%v", tc.name, max(opts.Version, 1), opts.Compression), func(t *testing.T) {
				data, infos := encode(t, opts, tc.sets...)
				index, sets, err := DecodeObject("obj", data)
				if err != nil {
					t.Fatalf("DecodeObject: %v", err)
				}
				if len(sets) != len(tc.sets) || len(index) != len(tc.sets) {
					t.Fatalf("decoded %d sets, %d index entries; want %d", len(sets), len(index), len(tc.sets))
				}
				for i, cs := range tc.sets {
					if err := equalChangeSet(cs, sets[i]); err != nil {
						t.Fatalf("set %d: %v", i, err)
					}
					fi := infos[i]
					if index[i].Offset != fi.Offset || index[i].Length != fi.Length || index[i].LogID != cs.LogID || index[i].SequenceNumber != cs.SequenceNumber {
						t.Fatalf("index entry %d = %+v, frame info %+v", i, index[i], fi)
					}
					var logical int64
					for _, g := range cs.Groups {
						for _, c := range g.Changes {
							logical += int64(len(c))
						}
					}
					if fi.LogicalSize != logical {
						t.Fatalf("frame %d LogicalSize = %d, want %d", i, fi.LogicalSize, logical)
					}
					// Each frame decodes from its own bytes alone.
					frame := bytes.Clone(data[fi.Offset : fi.Offset+fi.Length])
					got, err := DecodeFrame("obj", fi.Offset, frame)
					if err != nil {
						t.Fatalf("DecodeFrame %d: %v", i, err)
					}
					if err := equalChangeSet(cs, got); err != nil {
						t.Fatalf("DecodeFrame %d: %v", i, err)
					}
					// The changes do not alias the frame.
					clear(frame)
					if err := equalChangeSet(cs, got); err != nil {
						t.Fatalf("DecodeFrame %d aliases its input: %v", i, err)
					}
				}
				ri, err := ReadIndex("obj", bytes.NewReader(data), int64(len(data)))
				if err != nil {
					t.Fatalf("ReadIndex: %v", err)
				}
				if fmt.Sprint(ri) != fmt.Sprint(index) {
					t.Fatalf("ReadIndex = %v, DecodeObject index = %v", ri, index)
				}
			})
		}
	}
}

func TestCompressionChoosesSmaller(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	text := &ChangeSet{LogID: logID(1), Groups: []Group{{KeyGroup: 0, Changes: [][]byte{textBytes(r, 10_000)}}}}
	noise := &ChangeSet{LogID: logID(1), SequenceNumber: 1, Groups: []Group{{KeyGroup: 0, Changes: [][]byte{randomBytes(r, 10_000)}}}}
	data, infos := encode(t, EncoderOptions{Compression: true}, text, noise)
	for i, want := range []Codec{CodecZstd, CodecNone} {
		fi := infos[i]
		h, err := ReadFrameHeader("obj", fi.Offset, data[fi.Offset:fi.Offset+fi.Length])
		if err != nil {
			t.Fatal(err)
		}
		if h.Codec != want {
			t.Errorf("frame %d codec = %v, want %v", i, h.Codec, want)
		}
		if h.Codec == CodecZstd && h.StoredSize >= h.LogicalSize {
			t.Errorf("frame %d: stored %d >= logical %d", i, h.StoredSize, h.LogicalSize)
		}
	}
}

func TestReadFrameHeader(t *testing.T) {
	cs := &ChangeSet{LogID: logID(9), SequenceNumber: 77, Groups: []Group{
		{KeyGroup: -1, Changes: [][]byte{[]byte("abc")}},
		{KeyGroup: 4},
		{KeyGroup: 5, Changes: [][]byte{make([]byte, 200), {}}},
	}}
	data, infos := encode(t, EncoderOptions{}, cs)
	fi := infos[0]
	h, err := ReadFrameHeader("obj", fi.Offset, data[fi.Offset:fi.Offset+fi.Length])
	if err != nil {
		t.Fatal(err)
	}
	want := &FrameHeader{
		Version: 1, LogID: cs.LogID, SequenceNumber: 77, Codec: CodecNone, LogicalSize: 4 + 202 + 1, StoredSize: 207,
		Groups: []GroupInfo{{-1, 1, 4}, {4, 0, 0}, {5, 2, 203}},
	}
	if fmt.Sprint(h) != fmt.Sprint(want) {
		t.Fatalf("ReadFrameHeader = %+v\nwant %+v", h, want)
	}
	if fi.Length != FrameHeaderSize+3*DirEntrySize+207+FrameCRCSize {
		t.Fatalf("frame length %d", fi.Length)
	}
	// Version 2: the same groups, and a tag of one byte before each of
	// the three changes.
	data, infos = encode(t, EncoderOptions{Version: Version2}, cs)
	fi = infos[0]
	if h, err = ReadFrameHeader("obj", fi.Offset, data[fi.Offset:fi.Offset+fi.Length]); err != nil {
		t.Fatal(err)
	}
	want.Version, want.LogicalSize, want.StoredSize = 2, 210, 210
	if fmt.Sprint(h) != fmt.Sprint(want) {
		t.Fatalf("version 2: ReadFrameHeader = %+v\nwant %+v", h, want)
	}
	if fi.Length != FrameHeaderSize+3*DirEntrySizeV2+210+FrameCRCSize {
		t.Fatalf("version 2: frame length %d", fi.Length)
	}
}

// countingReaderAt counts ReadAt calls.
type countingReaderAt struct {
	r     io.ReaderAt
	calls int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.calls++
	return c.r.ReadAt(p, off)
}

func TestReadIndexReads(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		frames, size, maxCalls int
	}{
		{0, 0, 1},
		{3, 10, 1},
		{10, 10_000, 2},   // object over the read-ahead, index within it
		{3000, 10, 3},     // index larger than the read-ahead
		{2000, 10_000, 3}, // both
	} {
		t.Run(fmt.Sprintf("%d frames of %d bytes", tc.frames, tc.size), func(t *testing.T) {
			var sets []*ChangeSet
			for i := 0; i < tc.frames; i++ {
				sets = append(sets, &ChangeSet{LogID: logID(byte(i)), SequenceNumber: uint64(i), Groups: []Group{{KeyGroup: 1, Changes: [][]byte{randomBytes(r, tc.size)}}}})
			}
			data, infos := encode(t, EncoderOptions{}, sets...)
			cr := &countingReaderAt{r: bytes.NewReader(data)}
			index, err := ReadIndex("obj", cr, int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if cr.calls > tc.maxCalls {
				t.Errorf("%d ReadAt calls, want at most %d", cr.calls, tc.maxCalls)
			}
			if len(index) != tc.frames {
				t.Fatalf("%d entries, want %d", len(index), tc.frames)
			}
			for i, e := range index {
				if e.Offset != infos[i].Offset || e.Length != infos[i].Length || e.SequenceNumber != uint64(i) || e.LogID != logID(byte(i)) {
					t.Fatalf("entry %d = %+v, frame %+v", i, e, infos[i])
				}
			}
		})
	}
}

// failingReaderAt fails every read.
type failingReaderAt struct{ err error }

func (f failingReaderAt) ReadAt([]byte, int64) (int, error) { return 0, f.err }

func TestReadIndexIOError(t *testing.T) {
	boom := errors.New("boom")
	_, err := ReadIndex("obj", failingReaderAt{boom}, 100)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	var fe *Error
	if errors.As(err, &fe) {
		t.Fatalf("an I/O error is not a *Error: %v", err)
	}
	// A short read (the object is smaller than said) is truncation.
	data, _ := encode(t, EncoderOptions{})
	_, err = ReadIndex("obj", bytes.NewReader(data), int64(len(data))+10)
	checkErr(t, err, "obj", ErrCorrupt)
}

func TestEncoderRejects(t *testing.T) {
	if _, err := NewEncoder(io.Discard, EncoderOptions{}).WriteChangeSet(nil); !errors.Is(err, ErrInvalidChangeSet) {
		t.Errorf("nil change set: err = %v", err)
	}
	for _, groups := range [][]Group{
		{{KeyGroup: 1}, {KeyGroup: 0}},
		{{KeyGroup: 1}, {KeyGroup: 1}},
		{{KeyGroup: 0}, {KeyGroup: -1}},
		{{KeyGroup: -1}, {KeyGroup: -1}},
		{{KeyGroup: -2}},
	} {
		var buf bytes.Buffer
		enc := NewEncoder(&buf, EncoderOptions{})
		_, err := enc.WriteChangeSet(&ChangeSet{Groups: groups})
		if !errors.Is(err, ErrInvalidChangeSet) {
			t.Errorf("groups %v: err = %v, want ErrInvalidChangeSet", groups, err)
		}
		if buf.Len() != 0 {
			t.Errorf("groups %v: wrote %d bytes", groups, buf.Len())
		}
		// The encoder is still usable.
		if _, err := enc.WriteChangeSet(&ChangeSet{Groups: []Group{{KeyGroup: 0}}}); err != nil {
			t.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		if _, sets, err := DecodeObject("obj", buf.Bytes()); err != nil || len(sets) != 1 {
			t.Fatalf("after a rejection: %d sets, %v", len(sets), err)
		}
	}
}

type failingWriter struct {
	n   int // bytes accepted before failing
	err error
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) <= w.n {
		w.n -= len(p)
		return len(p), nil
	}
	n := w.n
	w.n = 0
	return n, w.err
}

func TestEncoderErrors(t *testing.T) {
	boom := errors.New("boom")
	w := &failingWriter{n: HeaderSize + 10, err: boom}
	enc := NewEncoder(w, EncoderOptions{})
	cs := &ChangeSet{Groups: []Group{{KeyGroup: 0, Changes: [][]byte{make([]byte, 100)}}}}
	if _, err := enc.WriteChangeSet(cs); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if enc.Size() != HeaderSize+10 {
		t.Fatalf("Size() = %d", enc.Size())
	}
	if _, err := enc.WriteChangeSet(cs); !errors.Is(err, boom) {
		t.Fatalf("error is not sticky: %v", err)
	}
	if err := enc.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v", err)
	}

	enc = NewEncoder(io.Discard, EncoderOptions{})
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := enc.WriteChangeSet(cs); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close = %v", err)
	}
	if enc.Size() != MinObjectSize {
		t.Fatalf("empty object is %d bytes, want %d", enc.Size(), MinObjectSize)
	}
}

// checkErr asserts that err is a *Error naming object that wraps sentinel,
// and returns it.
func checkErr(t *testing.T, err error, object string, sentinel error) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", sentinel)
	}
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *format.Error", err, err)
	}
	if fe.Object != object {
		t.Fatalf("error names object %q, want %q", fe.Object, object)
	}
	msg := err.Error()
	if !strings.Contains(msg, object) || !strings.Contains(msg, "offset "+strconv.FormatInt(fe.Offset, 10)) {
		t.Fatalf("message %q does not name object %q and offset %d", msg, object, fe.Offset)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Fatalf("error %v is not %v", err, sentinel)
	}
	return fe
}

// testObject returns a small object of two frames, compressed or not, and
// their frame infos.
func testObject(t *testing.T, compression bool) ([]byte, []FrameInfo) {
	r := rand.New(rand.NewPCG(7, 8))
	return encode(t, EncoderOptions{Compression: compression},
		&ChangeSet{LogID: logID(1), SequenceNumber: 1, Groups: []Group{
			{KeyGroup: -1, Changes: [][]byte{[]byte("meta")}},
			{KeyGroup: 3, Changes: [][]byte{textBytes(r, 300), {}}},
		}},
		&ChangeSet{LogID: logID(2), SequenceNumber: 2, Groups: []Group{
			{KeyGroup: 0, Changes: [][]byte{[]byte("a")}},
		}},
	)
}

func TestCorruptHeader(t *testing.T) {
	data, _ := testObject(t, false)
	for _, tc := range []struct {
		name     string
		at       int
		val      byte
		sentinel error
		offset   int64
	}{
		{"bad magic", 0, 'X', ErrCorrupt, 0},
		{"bad magic 3", 3, 'x', ErrCorrupt, 0},
		{"newer version", 4, Version2 + 1, ErrVersion, 4},
		{"version 0", 4, 0, ErrVersion, 4},
		{"unknown flags", 5, 1, ErrVersion, 5},
		{"reserved", 7, 1, ErrCorrupt, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := bytes.Clone(data)
			d[tc.at] = tc.val
			_, _, err := DecodeObject("bad-object", d)
			fe := checkErr(t, err, "bad-object", tc.sentinel)
			if fe.Offset != tc.offset {
				t.Errorf("offset %d, want %d", fe.Offset, tc.offset)
			}
			_, err = ReadIndex("bad-object", bytes.NewReader(d), int64(len(d)))
			checkErr(t, err, "bad-object", tc.sentinel)
		})
	}
}

// TestFlippedBytes flips every bit of every byte of an object and checks that
// decoding fails with an error of the expected class at an offset inside the
// damaged region.
func TestFlippedBytes(t *testing.T) {
	for _, compression := range []bool{false, true} {
		data, infos := testObject(t, compression)
		f0 := infos[0]
		indexOffset := int64(len(data)) - TrailerSize - int64(len(infos))*IndexEntrySize
		for i := range data {
			at := int64(i)
			for bit := range 8 {
				d := bytes.Clone(data)
				d[i] ^= 1 << bit
				_, _, err := DecodeObject("o", d)
				var want error
				var region string
				switch {
				case at < HeaderSize:
					region = "header"
				case at < f0.Offset+4 || (at >= infos[1].Offset && at < infos[1].Offset+4):
					region, want = "frame length", ErrCorrupt
				case at < indexOffset:
					region, want = "frame", ErrChecksum
				case at < int64(len(data))-8:
					region = "index" // the index CRC, or a check before it
				case at < int64(len(data))-4:
					region, want = "index crc", ErrChecksum
				default:
					region, want = "footer magic", ErrCorrupt
				}
				fe := checkErr(t, err, "o", want)
				if region == "frame" {
					f := infos[0]
					if at >= infos[1].Offset {
						f = infos[1]
					}
					if fe.Offset != f.Offset+f.Length-FrameCRCSize {
						t.Fatalf("compression=%v: flip at %d (%s): offset %d, want the frame's CRC", compression, at, region, fe.Offset)
					}
				}
			}
		}
		// The same for DecodeFrame on its own: every flip in the frame
		// after the length field is a checksum error at the CRC offset.
		frame := data[f0.Offset : f0.Offset+f0.Length]
		for i := 4; i < len(frame); i++ {
			d := bytes.Clone(frame)
			d[i] ^= 0x10
			_, err := DecodeFrame("o", f0.Offset, d)
			fe := checkErr(t, err, "o", ErrChecksum)
			if fe.Offset != f0.Offset+f0.Length-FrameCRCSize {
				t.Fatalf("flip at %d: offset %d", i, fe.Offset)
			}
			_, err = ReadFrameHeader("o", f0.Offset, d)
			checkErr(t, err, "o", ErrChecksum)
			fe = checkErr(t, VerifyFrame("o", f0.Offset, d), "o", ErrChecksum)
			if fe.Offset != f0.Offset+f0.Length-FrameCRCSize {
				t.Fatalf("VerifyFrame, flip at %d: offset %d", i, fe.Offset)
			}
		}
	}
}

func TestTruncation(t *testing.T) {
	for _, compression := range []bool{false, true} {
		data, infos := testObject(t, compression)
		for n := 0; n < len(data); n++ {
			d := data[:n]
			_, _, err := DecodeObject("trunc", d)
			checkErr(t, err, "trunc", nil)
			_, err = ReadIndex("trunc", bytes.NewReader(d), int64(n))
			checkErr(t, err, "trunc", nil)
			// The reader was told the full size, but the object is short.
			_, err = ReadIndex("trunc", bytes.NewReader(d), int64(len(data)))
			checkErr(t, err, "trunc", ErrCorrupt)
		}
		for _, fi := range infos {
			frame := data[fi.Offset : fi.Offset+fi.Length]
			for n := 0; n < len(frame); n++ {
				_, err := DecodeFrame("trunc", fi.Offset, frame[:n])
				checkErr(t, err, "trunc", ErrCorrupt)
				_, err = ReadFrameHeader("trunc", fi.Offset, frame[:n])
				checkErr(t, err, "trunc", ErrCorrupt)
			}
			// Extra bytes after the frame are an error too.
			_, err := DecodeFrame("trunc", fi.Offset, data[fi.Offset:fi.Offset+fi.Length+1])
			checkErr(t, err, "trunc", ErrCorrupt)
		}
	}
}

// rawFrame builds a frame from its fields with a valid CRC.
type rawFrame struct {
	version  byte // Version if 0
	codec    byte
	reserved [2]byte
	logical  uint32
	groups   uint32
	dir      [][4]uint32 // key group, count, offset, size
	payload  []byte
}

func (f rawFrame) bytes() []byte {
	b := make([]byte, FrameHeaderSize)
	b[frameOffVersion] = Version
	if f.version != 0 {
		b[frameOffVersion] = f.version
	}
	b[frameOffCodec] = f.codec
	copy(b[frameOffReserved:], f.reserved[:])
	copy(b[frameOffLogID:], "0123456789abcdef")
	binary.LittleEndian.PutUint64(b[frameOffSQN:], 99)
	binary.LittleEndian.PutUint32(b[frameOffPayloadSize:], f.logical)
	binary.LittleEndian.PutUint32(b[frameOffGroups:], f.groups)
	for _, d := range f.dir {
		for _, x := range d {
			b = binary.LittleEndian.AppendUint32(b, x)
		}
	}
	b = append(b, f.payload...)
	b = append(b, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	fixFrameCRC(b)
	return b
}

// TestLyingFrames feeds frames whose CRC is valid but whose fields lie.
func TestLyingFrames(t *testing.T) {
	const base = 1000 // the frame's offset in its imaginary object
	zstdHello := func() []byte {
		enc, err := zstdEncoder()
		if err != nil {
			t.Fatal(err)
		}
		return enc.EncodeAll([]byte("\x05hello"), nil)
	}()
	zstdOverrun := func() []byte {
		enc, err := zstdEncoder()
		if err != nil {
			t.Fatal(err)
		}
		return enc.EncodeAll([]byte("\x09hello"), nil)
	}()
	u32 := func(x int64) uint32 { return uint32(x) }
	for _, tc := range []struct {
		name   string
		frame  []byte
		offset int64 // expected error offset relative to base
	}{
		{"length below minimum", func() []byte {
			b := rawFrame{}.bytes()
			binary.LittleEndian.PutUint32(b, 10)
			return b
		}(), 0},
		{"length above maximum", func() []byte {
			b := rawFrame{}.bytes()
			binary.LittleEndian.PutUint32(b, 1<<31)
			return b
		}(), 0},
		{"unknown codec", rawFrame{codec: 2}.bytes(), 5},
		{"reserved byte", rawFrame{reserved: [2]byte{0, 1}}.bytes(), 7},
		{"payload over max", rawFrame{logical: MaxPayloadSize + 1}.bytes(), 32},
		{"raw payload shorter than declared", rawFrame{logical: 5, payload: []byte("abc")}.bytes(), 32},
		{"raw payload longer than declared", rawFrame{logical: 1, payload: []byte("abc")}.bytes(), 32},
		{"huge zstd length for tiny payload", rawFrame{codec: 1, logical: MaxPayloadSize, payload: []byte("abcd")}.bytes(), 32},
		{"zstd length with no payload", rawFrame{codec: 1, logical: 1}.bytes(), 32},
		{"huge group count", rawFrame{groups: 1 << 30}.bytes(), 36},
		{"group count beyond directory", rawFrame{groups: 2, dir: [][4]uint32{{0, 0, 0, 0}}}.bytes(), 36},
		{"key group below -1", rawFrame{groups: 1, dir: [][4]uint32{{u32(-2), 0, 0, 0}}}.bytes(), 40},
		{"metadata after key group", rawFrame{groups: 2, dir: [][4]uint32{{0, 0, 0, 0}, {u32(-1), 0, 0, 0}}}.bytes(), 56},
		{"duplicate key group", rawFrame{groups: 2, dir: [][4]uint32{{3, 0, 0, 0}, {3, 0, 0, 0}}}.bytes(), 56},
		{"group offset gap", rawFrame{logical: 2, groups: 1, dir: [][4]uint32{{0, 1, 1, 1}}, payload: []byte{0, 0}}.bytes(), 48},
		{"group overruns payload", rawFrame{logical: 2, groups: 1, dir: [][4]uint32{{0, 1, 0, 3}}, payload: []byte{0, 0}}.bytes(), 52},
		{"more changes than bytes", rawFrame{logical: 2, groups: 1, dir: [][4]uint32{{0, 3, 0, 2}}, payload: []byte{0, 0}}.bytes(), 44},
		{"groups do not cover payload", rawFrame{logical: 2, groups: 1, dir: [][4]uint32{{0, 1, 0, 1}}, payload: []byte{0, 0}}.bytes(), 32},
		{"change overruns group", rawFrame{logical: 3, groups: 1, dir: [][4]uint32{{0, 1, 0, 3}}, payload: []byte{5, 'a', 'b'}}.bytes(), 56},
		{"change overruns into next group", rawFrame{logical: 4, groups: 2, dir: [][4]uint32{{0, 1, 0, 2}, {1, 1, 2, 2}}, payload: []byte{2, 'a', 1, 'b'}}.bytes(), 72},
		{"bad varint", rawFrame{logical: 11, groups: 1, dir: [][4]uint32{{0, 1, 0, 11}}, payload: bytes.Repeat([]byte{0xff}, 11)}.bytes(), 56},
		{"trailing bytes in group", rawFrame{logical: 3, groups: 1, dir: [][4]uint32{{0, 1, 0, 3}}, payload: []byte{1, 'a', 'b'}}.bytes(), 58},
		{"zstd garbage", rawFrame{codec: 1, logical: 4, groups: 1, dir: [][4]uint32{{0, 1, 0, 4}}, payload: []byte("not zstd")}.bytes(), 56},
		{"zstd decodes to more than declared", rawFrame{codec: 1, logical: 3, groups: 1, dir: [][4]uint32{{0, 1, 0, 3}}, payload: zstdHello}.bytes(), 56},
		{"zstd decodes to less than declared", rawFrame{codec: 1, logical: 8, groups: 1, dir: [][4]uint32{{0, 1, 0, 8}}, payload: zstdHello}.bytes(), 56},
		{"zstd change overruns group", rawFrame{codec: 1, logical: 6, groups: 1, dir: [][4]uint32{{0, 1, 0, 6}}, payload: zstdOverrun}.bytes(), 56},
		{"zstd valid frame", rawFrame{codec: 1, logical: 6, groups: 1, dir: [][4]uint32{{0, 1, 0, 6}}, payload: zstdHello}.bytes(), -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			cs, err := DecodeFrame("liar", base, tc.frame)
			runtime.ReadMemStats(&after)
			// A frame whose checksum was verified apart gets the same
			// error from DecodeVerified; one that fails VerifyFrame gets
			// it from VerifyFrame.
			var d FrameDecoder
			verr := VerifyFrame("liar", base, tc.frame)
			if verr == nil {
				_, verr = d.DecodeVerified("liar", base, tc.frame)
			}
			if fmt.Sprint(verr) != fmt.Sprint(err) {
				t.Errorf("VerifyFrame then DecodeVerified: %v; DecodeFrame: %v", verr, err)
			}
			if tc.offset < 0 {
				if err != nil {
					t.Fatalf("valid frame: %v", err)
				}
				if string(cs.Groups[0].Changes[0]) != "hello" {
					t.Fatalf("decoded %q", cs.Groups[0].Changes[0])
				}
				return
			}
			fe := checkErr(t, err, "liar", ErrCorrupt)
			if fe.Offset != base+tc.offset {
				t.Errorf("offset %d, want %d (%v)", fe.Offset-base, tc.offset, err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
				t.Errorf("allocated %d bytes for a %d-byte frame", alloc, len(tc.frame))
			}
		})
	}
}

func TestFrameVersion(t *testing.T) {
	for _, v := range []byte{Version2 + 1, 0xff} {
		_, err := DecodeFrame("newer", 100, rawFrame{version: v}.bytes())
		if fe := checkErr(t, err, "newer", ErrVersion); fe.Offset != 100+frameOffVersion {
			t.Errorf("version %d: offset %d", v, fe.Offset)
		}
	}
}

func TestLyingIndex(t *testing.T) {
	data, infos := testObject(t, false)
	size := int64(len(data))
	indexOffset := size - TrailerSize - 2*IndexEntrySize
	put32 := func(at int64, v uint32) func([]byte) {
		return func(d []byte) { binary.LittleEndian.PutUint32(d[at:], v) }
	}
	put64 := func(at int64, v uint64) func([]byte) {
		return func(d []byte) { binary.LittleEndian.PutUint64(d[at:], v) }
	}
	e1 := indexOffset + IndexEntrySize
	for _, tc := range []struct {
		name   string
		damage func([]byte)
		offset int64
	}{
		{"huge count", put32(size-20, 1<<31), size - 20},
		{"count too big for offset", put32(size-20, 3), size - 16},
		{"offset wrong", put64(size-16, uint64(indexOffset-1)), size - 16},
		{"first entry not at header", put64(indexOffset, 9), indexOffset},
		{"entry length too small", put32(indexOffset+8, 10), indexOffset + 8},
		{"entry length huge", put32(indexOffset+8, 1<<31-1), indexOffset + 8},
		{"entry length overlaps next", put32(indexOffset+8, uint32(infos[0].Length+1)), e1},
		{"last frame short of index", put32(e1+8, uint32(infos[1].Length-1)), indexOffset},
		{"log id mismatch", func(d []byte) { d[e1+12] ^= 1 }, e1 + 12},
		{"sequence number mismatch", put64(e1+28, 3), e1 + 28},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := bytes.Clone(data)
			tc.damage(d)
			fixChecksums(d)
			_, _, err := DecodeObject("liar", d)
			fe := checkErr(t, err, "liar", ErrCorrupt)
			if fe.Offset != tc.offset {
				t.Errorf("offset %d, want %d (%v)", fe.Offset, tc.offset, err)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	data, _ := testObject(t, false)
	d := bytes.Clone(data)
	d[HeaderSize+10] ^= 1
	_, _, err := DecodeObject("jobs/j1/0190-abc", d)
	fe := checkErr(t, err, "jobs/j1/0190-abc", ErrChecksum)
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion) {
		t.Errorf("%v matches other sentinels", err)
	}
	t.Log(fe)
}

// TestResetBufferGrowsGeometrically: an object built in memory from a nil
// buffer grows as a slice does, not by one frame at a time (which copied
// the object at every frame).
func TestResetBufferGrowsGeometrically(t *testing.T) {
	sets := make([]*ChangeSet, 2000)
	for i := range sets {
		sets[i] = &ChangeSet{LogID: logID(1), SequenceNumber: uint64(i), Groups: []Group{{KeyGroup: 1, Changes: [][]byte{make([]byte, 1000)}}}}
	}
	enc := NewEncoder(nil, EncoderOptions{})
	allocs := testing.AllocsPerRun(1, func() {
		enc.ResetBuffer(nil, EncoderOptions{})
		for _, cs := range sets {
			if _, err := enc.WriteChangeSet(cs); err != nil {
				t.Fatal(err)
			}
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 100 { // about log2(2 MB / 1 KB) growths, and the index
		t.Errorf("%v allocations for 2000 frames", allocs)
	}
}

// TestFrameDecoderReset: after Reset, a decoder holds no reference to any
// frame it decoded since the last Reset (the larger one before a smaller
// one included), compressed or not, and decodes the next frame as before.
func TestFrameDecoderReset(t *testing.T) {
	for _, compression := range []bool{false, true} {
		t.Run(fmt.Sprintf("compression=%v", compression), func(t *testing.T) {
			r := rand.New(rand.NewPCG(31, 32))
			large := sampleChangeSet(r, 1, 1, 8, 16, 40, true)
			small := sampleChangeSet(r, 1, 2, 2, 3, 40, true)
			obj, frames := encode(t, EncoderOptions{Compression: compression}, large, small)
			frame := func(i int) []byte { return obj[frames[i].Offset : frames[i].Offset+frames[i].Length] }
			var d FrameDecoder
			for i := range frames {
				if _, err := d.Decode("obj", frames[i].Offset, frame(i)); err != nil {
					t.Fatal(err)
				}
			}
			d.Reset()
			for i, c := range d.changes[:cap(d.changes)] {
				if c != nil {
					t.Fatalf("after Reset, change %d of %d still refers to a frame", i, cap(d.changes))
				}
			}
			for i, g := range d.cs.Groups[:cap(d.cs.Groups)] {
				if g.Changes != nil {
					t.Fatalf("after Reset, group %d still refers to changes", i)
				}
			}
			got, err := d.Decode("obj", frames[0].Offset, frame(0))
			if err != nil {
				t.Fatal(err)
			}
			if err := equalChangeSet(got, large); err != nil {
				t.Fatalf("after Reset: %v", err)
			}
		})
	}
}

// TestAppendedChangeSets: a change set given in append order (Appended)
// encodes to the bytes of the same changes given by group, compressed or
// not, whatever the order of its key groups; ByGroup gives those groups.
func TestAppendedChangeSets(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	long := randomBytes(r, 300) // a two-byte length prefix
	kc := func(kg int32, data string) KeyedChange { return KeyedChange{KeyGroup: kg, Data: []byte(data)} }
	for _, tc := range []struct {
		name     string
		appended []KeyedChange
		want     []Group
	}{
		{"one change", []KeyedChange{kc(3, "a")}, []Group{{3, [][]byte{[]byte("a")}}}},
		{"metadata first", []KeyedChange{kc(2, "b"), kc(MetaKeyGroup, "m"), kc(0, "c")},
			[]Group{{MetaKeyGroup, [][]byte{[]byte("m")}}, {0, [][]byte{[]byte("c")}}, {2, [][]byte{[]byte("b")}}}},
		{"interleaved, append order kept in a group", []KeyedChange{kc(1, "x1"), kc(0, "y1"), kc(1, "x2"), kc(0, "y2"), kc(1, "x3")},
			[]Group{{0, [][]byte{[]byte("y1"), []byte("y2")}}, {1, [][]byte{[]byte("x1"), []byte("x2"), []byte("x3")}}}},
		{"empty and long changes", []KeyedChange{kc(7, ""), {KeyGroup: 5, Data: long}, kc(7, "z")},
			[]Group{{5, [][]byte{long}}, {7, [][]byte{{}, []byte("z")}}}},
		{"sparse key groups", []KeyedChange{kc(1<<30, "far"), kc(0, "near"), kc(MetaKeyGroup, "m")},
			[]Group{{MetaKeyGroup, [][]byte{[]byte("m")}}, {0, [][]byte{[]byte("near")}}, {1 << 30, [][]byte{[]byte("far")}}}},
		{"length prefixes of one, two and three bytes", []KeyedChange{{KeyGroup: 2, Data: make([]byte, 16384)}, {KeyGroup: 1, Data: make([]byte, 128)},
			{KeyGroup: 2, Data: make([]byte, 127)}, {KeyGroup: 1, Data: make([]byte, 16383)}},
			[]Group{{1, [][]byte{make([]byte, 128), make([]byte, 16383)}}, {2, [][]byte{make([]byte, 16384), make([]byte, 127)}}}},
		{"the widest range", []KeyedChange{kc(math.MaxInt32, "last"), kc(MetaKeyGroup, "m")},
			[]Group{{MetaKeyGroup, [][]byte{[]byte("m")}}, {math.MaxInt32, [][]byte{[]byte("last")}}}},
		{"batches of a reader, and one more change", manyAppended(2*appendedBatchSize+1, 7), manyByGroup(2*appendedBatchSize+1, 7)},
		{"sparse, over batches", manyAppended(appendedBatchSize+3, 1<<25), manyByGroup(appendedBatchSize+3, 1<<25)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := &ChangeSet{LogID: logID(4), SequenceNumber: 9, Appended: tc.appended}
			from := &ChangeSet{LogID: logID(4), SequenceNumber: 9, AppendedFrom: changeList(tc.appended)}
			for _, cs := range []*ChangeSet{app, from} {
				if err := equalChangeSet(&ChangeSet{LogID: app.LogID, SequenceNumber: 9, Groups: cs.ByGroup()},
					&ChangeSet{LogID: app.LogID, SequenceNumber: 9, Groups: tc.want}); err != nil {
					t.Fatalf("ByGroup: %v", err)
				}
			}
			byGroup := &ChangeSet{LogID: app.LogID, SequenceNumber: 9, Groups: tc.want}
			for _, compression := range []bool{false, true} {
				opts := EncoderOptions{Compression: compression}
				want, wantInfo := encode(t, opts, byGroup, byGroup)
				for _, cs := range []*ChangeSet{app, from} {
					got, gotInfo := encode(t, opts, cs, cs) // twice: the encoder's scratch reused
					if !bytes.Equal(got, want) || !slices.Equal(gotInfo, wantInfo) {
						t.Fatalf("compression=%v, reader %v: append order encodes to %x %+v, want %x %+v", compression, cs.AppendedFrom != nil, got, gotInfo, want, wantInfo)
					}
				}
				// Version 2 keeps the append order, so the bytes differ
				// from the same changes by group; the frames are as long,
				// and decode to the same groups.
				opts.Version = Version2
				_, wantInfo = encode(t, opts, byGroup, byGroup)
				for _, cs := range []*ChangeSet{app, from} {
					got, gotInfo := encode(t, opts, cs, cs)
					if !compression && !slices.Equal(gotInfo, wantInfo) {
						t.Fatalf("version 2, reader %v: frames %+v, want %+v", cs.AppendedFrom != nil, gotInfo, wantInfo)
					}
					_, sets, err := DecodeObject("v2", got)
					if err != nil {
						t.Fatalf("version 2, compression=%v, reader %v: %v", compression, cs.AppendedFrom != nil, err)
					}
					for _, set := range sets {
						if err := equalChangeSet(set, byGroup); err != nil {
							t.Fatalf("version 2, compression=%v, reader %v: %v", compression, cs.AppendedFrom != nil, err)
						}
					}
				}
			}
			for _, opts := range []EncoderOptions{{}, {Version: Version2}} {
				wantSize, _ := opts.EncodedSize(byGroup)
				for _, cs := range []*ChangeSet{app, from} {
					if size, err := opts.EncodedSize(cs); err != nil || size != wantSize {
						t.Fatalf("version %d: EncodedSize = %d, %v; want %d", opts.Version, size, err, wantSize)
					}
				}
			}
		})
	}
}

// changeList gives its changes through ReadChanges, as a change set in
// append order whose changes an engine reads from its own index.
type changeList []KeyedChange

func (l changeList) ReadChanges(i int, dst []KeyedChange) int { return copy(dst, l[min(i, len(l)):]) }

func (l changeList) Len() int { return len(l) }

// lyingLen is a reader whose Len is not its number of changes.
type lyingLen struct {
	changeList
	n int
}

func (l lyingLen) Len() int { return l.n }

// fickle is a reader whose changes differ from its first read to the next:
// from the second read on, it gives then's changes instead.
type fickle struct {
	first, then changeList
	reads       *int // reads from change 0
}

func (f fickle) Len() int { return len(f.first) }

func (f fickle) ReadChanges(i int, dst []KeyedChange) int {
	if i == 0 {
		*f.reads++
	}
	if *f.reads == 1 {
		return f.first.ReadChanges(i, dst)
	}
	return f.then.ReadChanges(i, dst)
}

// TestAppendedFromChangesBetweenReads: a reader that gives other changes
// on the encoder's second read (fewer, more, of another key group, or
// longer) is rejected, naming the set, and nothing is written: the frame
// would hold other bytes than its directory says.
func TestAppendedFromChangesBetweenReads(t *testing.T) {
	kc := func(kg int32, data string) KeyedChange { return KeyedChange{KeyGroup: kg, Data: []byte(data)} }
	first := changeList{kc(0, "a"), kc(1, "b"), kc(0, "c")}
	for _, tc := range []struct {
		name string
		then changeList
	}{
		{"fewer", changeList{kc(0, "a"), kc(1, "b")}},
		{"none", nil},
		{"more", changeList{kc(0, "a"), kc(1, "b"), kc(0, "c"), kc(1, "d")}},
		{"another key group", changeList{kc(0, "a"), kc(7, "b"), kc(0, "c")}},
		{"moved to the other key group", changeList{kc(0, "a"), kc(0, "b"), kc(0, "c")}},
		{"longer", changeList{kc(0, "a"), kc(1, "b"), kc(0, "cc")}},
		{"shorter", changeList{kc(0, "a"), kc(1, ""), kc(0, "c")}},
		{"fewer, of the same bytes", changeList{kc(0, "aba"), kc(1, "b")}},
		{"counts moved between groups, the same bytes", changeList{kc(0, "a"), kc(1, "b"), kc(1, "c")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, opts := range []EncoderOptions{{}, {Version: Version2}, {Version: Version2, Compression: true}} {
				for _, inBuffer := range []bool{false, true} {
					var buf bytes.Buffer
					enc := NewEncoder(&buf, opts)
					if inBuffer {
						enc.ResetBuffer(nil, opts)
					}
					reads := 0
					_, err := enc.WriteChangeSet(&ChangeSet{LogID: logID(3), SequenceNumber: 4, AppendedFrom: fickle{first, tc.then, &reads}})
					if !errors.Is(err, ErrInvalidChangeSet) || !strings.Contains(err.Error(), "the second time") {
						t.Fatalf("%+v, in buffer %v: %v; want ErrInvalidChangeSet saying the changes differ", opts, inBuffer, err)
					}
					if buf.Len() != 0 || enc.Size() > HeaderSize || len(enc.Bytes()) > HeaderSize {
						t.Fatalf("%+v, in buffer %v: %d bytes written, %d in the object", opts, inBuffer, buf.Len(), len(enc.Bytes()))
					}
					if _, err := enc.WriteChangeSet(&ChangeSet{AppendedFrom: first}); err != nil {
						t.Fatalf("%+v, in buffer %v: after the rejection: %v", opts, inBuffer, err)
					}
				}
			}
		})
	}
}

// TestAppendedFromChangesBetweenReadsSparse: a reader of sparse key
// groups, whose changes are sorted on a second read, is rejected if that
// read gives another number of changes.
func TestAppendedFromChangesBetweenReadsSparse(t *testing.T) {
	reads := 0
	first := changeList{{KeyGroup: 0, Data: []byte("a")}, {KeyGroup: 5000, Data: []byte("b")}}
	_, err := NewEncoder(io.Discard, EncoderOptions{}).WriteChangeSet(&ChangeSet{AppendedFrom: fickle{first, first[:1], &reads}})
	if !errors.Is(err, ErrInvalidChangeSet) || !strings.Contains(err.Error(), "gave 1 changes the second time, 2 the first") {
		t.Fatalf("%v; want ErrInvalidChangeSet saying the second read gave 1 change", err)
	}
}

// TestAppendedFromChangesBetweenReadsPrefixes: the bound on each change
// counts its length prefix of one, two or three bytes: a second read
// whose one change fills what two took the first time is rejected.
func TestAppendedFromChangesBetweenReadsPrefixes(t *testing.T) {
	for _, tc := range []struct{ first, then []int }{
		{[]int{126, 0}, []int{127}},        // 127+1 and 1: one byte of prefix each; then 128 bytes with 1 of prefix
		{[]int{16382, 0}, []int{16383}},    // 16382+2 and 1; then 16385 with 2
		{[]int{16383, 0}, []int{16384}},    // 16383+2 and 1; then 16387 with 3
		{[]int{200, 200}, []int{401}},      // 202+202; then 403 with 2
		{[]int{16384, 1}, []int{16385, 0}}, // same count, same bytes: a valid frame of the second read
	} {
		list := func(sizes []int) changeList {
			var l changeList
			for _, n := range sizes {
				l = append(l, KeyedChange{KeyGroup: 0, Data: make([]byte, n)})
			}
			return l
		}
		for _, opts := range []EncoderOptions{{}, {Version: Version2}} {
			reads := 0
			var buf bytes.Buffer
			enc := NewEncoder(&buf, opts)
			_, err := enc.WriteChangeSet(&ChangeSet{AppendedFrom: fickle{list(tc.first), list(tc.then), &reads}})
			same := len(tc.first) == len(tc.then)
			if same {
				if err != nil {
					t.Errorf("version %d, %v then %v: %v", opts.Version, tc.first, tc.then, err)
				} else if err := enc.Close(); err != nil {
					t.Errorf("version %d, %v then %v: close: %v", opts.Version, tc.first, tc.then, err)
				} else if _, _, err := DecodeObject("o", buf.Bytes()); err != nil {
					t.Errorf("version %d, %v then %v: the frame does not decode: %v", opts.Version, tc.first, tc.then, err)
				}
				continue
			}
			if !errors.Is(err, ErrInvalidChangeSet) || buf.Len() != 0 {
				t.Errorf("version %d, %v then %v: %v, %d bytes written; want ErrInvalidChangeSet and nothing", opts.Version, tc.first, tc.then, err, buf.Len())
			}
		}
	}
}

// TestAppendedAllocatesNothing: an encoder reused for change sets in
// append order, read through a reader, allocates nothing once warm: not
// for sets over several batches, nor for a set whose key groups span
// thousands (metadata first, then 4096 key groups; or scattered over
// them), which are counted in slots, not sorted.
func TestAppendedAllocatesNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	data := make([]byte, 100)
	for _, tc := range []struct {
		name string
		kg   func(i int) int32
	}{
		{"round-robin over 128", func(i int) int32 { return int32(i % 128) }},
		{"metadata first, then 4096 far up", func(i int) int32 {
			if i == 0 {
				return MetaKeyGroup
			}
			return 20000 + int32(i%4096)
		}},
		{"scattered over 4096", func(int) int32 { return r.Int32N(4096) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := make(changeList, 10000)
			for i := range list {
				list[i] = KeyedChange{KeyGroup: tc.kg(i), Data: data}
			}
			cs := &ChangeSet{LogID: logID(1), AppendedFrom: list}
			for _, opts := range []EncoderOptions{{}, {Version: Version2}} {
				size, err := opts.EncodedSize(cs)
				if err != nil {
					t.Fatal(err)
				}
				enc := NewEncoder(nil, opts)
				obj := make([]byte, 0, size)
				var published int64
				progress := func(n int64) { published = n }
				encodeOnce := func() {
					enc.ResetBuffer(obj, opts)
					enc.SetProgress(progress)
					if _, err := enc.WriteChangeSet(cs); err != nil {
						t.Fatal(err)
					}
					if err := enc.Close(); err != nil {
						t.Fatal(err)
					}
				}
				encodeOnce() // warm: the encoder's batch, slots and index
				if allocs := testing.AllocsPerRun(5, encodeOnce); allocs != 0 {
					t.Errorf("version %d: %.1f allocations per object", opts.Version, allocs)
				}
				// Nor does measuring the object first, as an upload does.
				measure := func() {
					if n, err := opts.EncodedSize(cs); err != nil || n != size {
						t.Fatalf("EncodedSize = %d, %v; want %d", n, err, size)
					}
				}
				measure()
				if allocs := testing.AllocsPerRun(5, measure); allocs != 0 && !raceEnabled {
					t.Errorf("version %d: EncodedSize: %.1f allocations", opts.Version, allocs)
				}
				if published != size {
					t.Errorf("version %d: the last progress was %d of %d bytes", opts.Version, published, size)
				}
			}
		})
	}
}

// manyAppended returns n changes over three key groups stride apart,
// each naming its place, in append order; manyByGroup the same by group.
func manyAppended(n int, stride int32) []KeyedChange {
	out := make([]KeyedChange, n)
	for i := range out {
		out[i] = KeyedChange{KeyGroup: int32(i%3) * stride, Data: []byte(fmt.Sprint(i))}
	}
	return out
}

func manyByGroup(n int, stride int32) []Group {
	groups := make([]Group, 3)
	for i := range n {
		g := &groups[i%3]
		g.KeyGroup = int32(i%3) * stride
		g.Changes = append(g.Changes, []byte(fmt.Sprint(i)))
	}
	return groups
}

// TestAppendedFromEmpty: a reader that gives no change makes an empty
// frame, as a change set with no groups does.
func TestAppendedFromEmpty(t *testing.T) {
	want, wantInfo := encode(t, EncoderOptions{}, &ChangeSet{LogID: logID(1), SequenceNumber: 2})
	got, gotInfo := encode(t, EncoderOptions{}, &ChangeSet{LogID: logID(1), SequenceNumber: 2, AppendedFrom: changeList(nil)})
	if !bytes.Equal(got, want) || !slices.Equal(gotInfo, wantInfo) {
		t.Fatalf("empty reader encodes to %x %+v, want %x %+v", got, gotInfo, want, wantInfo)
	}
}

// TestAppendedChangeSetsRejected: an appended change of a key group below
// the metadata group's, or a change set in both forms, is rejected, naming
// it, and the encoder stays usable.
func TestAppendedChangeSetsRejected(t *testing.T) {
	for _, tc := range []struct {
		name string
		cs   *ChangeSet
		want string
	}{
		{"key group below metadata", &ChangeSet{Appended: []KeyedChange{{KeyGroup: 0}, {KeyGroup: -2}}}, "appended change 1 has key group -2"},
		{"both forms", &ChangeSet{Groups: []Group{{KeyGroup: 0}}, Appended: []KeyedChange{{KeyGroup: 0}}}, "in more than one form"},
		{"groups and a reader", &ChangeSet{Groups: []Group{{KeyGroup: 0}}, AppendedFrom: changeList{{KeyGroup: 0}}}, "in more than one form"},
		{"appended and a reader", &ChangeSet{Appended: []KeyedChange{{KeyGroup: 0}}, AppendedFrom: changeList{{KeyGroup: 0}}}, "in more than one form"},
		{"key group below metadata, read in the second batch", &ChangeSet{AppendedFrom: append(changeList(manyAppended(appendedBatchSize+1, 1)), KeyedChange{KeyGroup: -5})},
			fmt.Sprintf("appended change %d has key group -5", appendedBatchSize+1)},
		{"key group below metadata, after sparse ones", &ChangeSet{Appended: []KeyedChange{{KeyGroup: 0}, {KeyGroup: 5000}, {KeyGroup: -7}}},
			"appended change 2 has key group -7"},
		{"key group below metadata, after sparse ones, from a reader", &ChangeSet{AppendedFrom: changeList{{KeyGroup: 0}, {KeyGroup: 5000}, {KeyGroup: -7}}},
			"appended change 2 has key group -7"},
		{"a reader whose Len is not its changes", &ChangeSet{AppendedFrom: lyingLen{changeList{{KeyGroup: 0}, {KeyGroup: 1}}, 3}},
			"its reader gave 2 changes, not the 3 of its Len"},
		{"payload over the limit", func() *ChangeSet {
			mib := make([]byte, 1<<20) // one array, shared by every change
			cs := &ChangeSet{}
			for i := range MaxPayloadSize >> 20 {
				cs.Appended = append(cs.Appended, KeyedChange{KeyGroup: int32(i % 3), Data: mib})
			}
			return cs
		}(), "exceeds 1073741824 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			enc := NewEncoder(&buf, EncoderOptions{})
			if _, err := enc.WriteChangeSet(tc.cs); !errors.Is(err, ErrInvalidChangeSet) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WriteChangeSet: %v; want ErrInvalidChangeSet saying %q", err, tc.want)
			}
			if _, err := EncodedSize(tc.cs); !errors.Is(err, ErrInvalidChangeSet) {
				t.Fatalf("EncodedSize: %v; want ErrInvalidChangeSet", err)
			}
			if _, err := enc.WriteChangeSet(&ChangeSet{Appended: []KeyedChange{{KeyGroup: 1, Data: []byte("ok")}}}); err != nil {
				t.Fatalf("after the rejection: %v", err)
			}
		})
	}
}

// TestByGroupKeepsAppendOrder: ByGroup keeps each group's changes in
// append order, over a range of key groups too wide for a slot each (the
// encoder sorts those) and with more changes than an insertion sort takes.
func TestByGroupKeepsAppendOrder(t *testing.T) {
	cs := &ChangeSet{LogID: logID(5), SequenceNumber: 1}
	want := []Group{{KeyGroup: 0}, {KeyGroup: 1 << 20}}
	for i := range 40 {
		g := &want[i%2]
		data := []byte(strconv.Itoa(i))
		cs.Appended = append(cs.Appended, KeyedChange{KeyGroup: g.KeyGroup, Data: data})
		g.Changes = append(g.Changes, data)
	}
	if err := equalChangeSet(&ChangeSet{LogID: cs.LogID, SequenceNumber: 1, Groups: cs.ByGroup()},
		&ChangeSet{LogID: cs.LogID, SequenceNumber: 1, Groups: want}); err != nil {
		t.Fatal(err)
	}
	got, _ := encode(t, EncoderOptions{}, cs)
	if wantBytes, _ := encode(t, EncoderOptions{}, &ChangeSet{LogID: cs.LogID, SequenceNumber: 1, Groups: want}); !bytes.Equal(got, wantBytes) {
		t.Fatal("the appended form over a sparse range encodes unlike the same changes by group")
	}
}

// TestEncoderKeepsNoAppendedBytes: once WriteChangeSet returns, the
// encoder holds nothing of a change set it read through AppendedFrom (its
// batch of changes is cleared), so a pooled encoder does not keep a
// writer's memory reachable.
func TestEncoderKeepsNoAppendedBytes(t *testing.T) {
	enc := NewEncoder(io.Discard, EncoderOptions{})
	data := make([]byte, 1<<20)
	wp := weak.Make(&data[0])
	if _, err := enc.WriteChangeSet(&ChangeSet{AppendedFrom: changeList{{KeyGroup: 0, Data: data}}}); err != nil {
		t.Fatal(err)
	}
	data = nil
	runtime.GC()
	if wp.Value() != nil {
		t.Fatal("the encoder keeps the change's bytes reachable")
	}
	runtime.KeepAlive(enc)
}

// TestWiden: the slots of a change set in append order widen to hold each
// new key group, with room toward it, keeping the counts of the key
// groups they held, up to a limit.
func TestWiden(t *testing.T) {
	counted := func(base int32, kgs ...int32) []groupSlot {
		var s []groupSlot
		for _, kg := range kgs {
			for int(kg-base) >= len(s) {
				s = append(s, groupSlot{})
			}
			s[kg-base].count = int64(kg) + 100 // a count that names its key group
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		slots    []groupSlot
		base, kg int32
		limit    int64
		wantBase int32
		wantLen  int
		ok       bool
		reuseCap bool
	}{
		{"first", nil, 0, 7, 1028, 7, 1, true, false},
		{"up, doubling", counted(10, 10, 11), 10, 12, 1036, 10, 4, true, false},
		{"up, far", counted(10, 10, 11), 10, 500, 1036, 10, 491, true, false},
		{"down, room below", counted(10, 10, 11), 10, 9, 1036, 8, 4, true, false},
		{"down to metadata", counted(0, 0, 1), 0, MetaKeyGroup, 1036, MetaKeyGroup, 3, true, false},
		{"down, in place", counted(10, 10, 11), 10, 9, 1036, 8, 4, true, true},
		{"up, in place", counted(10, 10, 11), 10, 12, 1036, 10, 4, true, true},
		{"over the limit", counted(0, 0), 0, 1028, 1028, 0, 1, false, false},
		{"at the limit", counted(0, 0), 0, 1027, 1028, 0, 1028, true, false},
		{"the widest key group", counted(math.MaxInt32-1, math.MaxInt32-1), math.MaxInt32 - 1, math.MaxInt32, 1032, math.MaxInt32 - 1, 2, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slots := tc.slots
			if tc.reuseCap {
				slots = append(make([]groupSlot, 0, 64), slots...)
			}
			before := slices.Clone(slots)
			got, base, ok := widen(slots, tc.base, tc.kg, tc.limit)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if base != tc.wantBase || len(got) != tc.wantLen {
				t.Fatalf("base %d, %d slots; want %d, %d", base, len(got), tc.wantBase, tc.wantLen)
			}
			if tc.reuseCap && &got[:1][0] != &slots[:1][0] {
				t.Errorf("a new array, though the slots had the capacity")
			}
			for k, sl := range got {
				kg := int64(base) + int64(k)
				var want int64
				if i := kg - int64(tc.base); len(before) > 0 && i >= 0 && i < int64(len(before)) {
					want = before[i].count
				}
				if sl.count != want || sl.size != 0 {
					t.Fatalf("slot of key group %d: %+v, want count %d", kg, sl, want)
				}
			}
			if k := int64(tc.kg) - int64(base); k < 0 || k >= int64(len(got)) {
				t.Fatalf("key group %d outside the slots [%d, %d]", tc.kg, base, int64(base)+int64(len(got))-1)
			}
		})
	}
}

// TestAppendedAnyOrder: changes in append order, their key groups in any
// order (rising, falling, scattered, sparse), encode to the bytes of the
// same changes by group, given as a list or through a reader.
func TestAppendedAnyOrder(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		n := 1 + r.IntN(3*appendedBatchSize)
		span := int32(1 + r.IntN(1<<uint(r.IntN(22))))
		var app []KeyedChange
		for i := range n {
			kg := MetaKeyGroup + r.Int32N(span+1)
			switch seed % 3 {
			case 1: // falling
				kg = span - int32(i)*span/int32(n)
			case 2: // rising
				kg = int32(i) * span / int32(n)
			}
			app = append(app, KeyedChange{KeyGroup: max(kg, MetaKeyGroup), Data: randomBytes(r, r.IntN(200))})
		}
		cs := &ChangeSet{LogID: logID(5), SequenceNumber: seed, Appended: app}
		want, _ := encode(t, EncoderOptions{}, &ChangeSet{LogID: cs.LogID, SequenceNumber: seed, Groups: cs.ByGroup()})
		got, _ := encode(t, EncoderOptions{}, cs)
		from, _ := encode(t, EncoderOptions{}, &ChangeSet{LogID: cs.LogID, SequenceNumber: seed, AppendedFrom: changeList(app)})
		if !bytes.Equal(got, want) || !bytes.Equal(from, want) {
			t.Fatalf("seed %d (%d changes over %d key groups): append order encodes unlike by group", seed, n, span)
		}
	}
}
