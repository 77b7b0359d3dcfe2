package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestV2Layout pins the bytes of frames of version 2, as docs/FORMAT.md
// describes them: the directory (key group, count, bytes), then each
// change in append order, its group's index in the directory before its
// length prefix when the frame has more than one group.
func TestV2Layout(t *testing.T) {
	kc := func(kg int32, data string) KeyedChange { return KeyedChange{KeyGroup: kg, Data: []byte(data)} }
	cs := &ChangeSet{LogID: logID(1), SequenceNumber: 0x0102, Appended: []KeyedChange{kc(3, "a"), kc(MetaKeyGroup, "m"), kc(3, "bc")}}
	data, infos := encode(t, EncoderOptions{Version: Version2}, cs)
	want := []byte("DSTL\x02\x00\x00\x00")
	frame := []byte{
		78, 0, 0, 0, // frame length
		2, 0, 0, 0, // version, codec, reserved
	}
	id := logID(1)
	frame = append(frame, id[:]...)
	frame = append(frame,
		0x02, 0x01, 0, 0, 0, 0, 0, 0, // sequence number
		10, 0, 0, 0, // payload size: 7 bytes of changes and prefixes, 3 tags
		2, 0, 0, 0, // groups
		0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 2, 0, 0, 0, // metadata: 1 change, 2 bytes
		3, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0, // key group 3: 2 changes, 5 bytes
		1, 1, 'a', // group 1 (key group 3), "a"
		0, 1, 'm', // group 0 (metadata), "m"
		1, 2, 'b', 'c', // group 1, "bc"
	)
	frame = binary.LittleEndian.AppendUint32(frame, crc32.Checksum(frame, castagnoli))
	want = append(want, frame...)
	if infos[0].Offset != HeaderSize || infos[0].Length != int64(len(frame)) {
		t.Fatalf("frame info %+v, want offset %d, length %d", infos[0], HeaderSize, len(frame))
	}
	if got := data[:len(want)]; !bytes.Equal(got, want) {
		t.Fatalf("object begins\n%x\nwant\n%x", got, want)
	}

	// One group: no tags.
	one := &ChangeSet{LogID: logID(1), Appended: []KeyedChange{kc(7, "x"), kc(7, "yz")}}
	data, infos = encode(t, EncoderOptions{Version: Version2}, one)
	f := data[infos[0].Offset : infos[0].Offset+infos[0].Length]
	if got, want := f[FrameHeaderSize+DirEntrySizeV2:len(f)-FrameCRCSize], []byte{1, 'x', 2, 'y', 'z'}; !bytes.Equal(got, want) {
		t.Fatalf("the payload of one group is %x, want %x", got, want)
	}
	// By group, the changes go group after group.
	byGroup := &ChangeSet{LogID: logID(1), Groups: []Group{{KeyGroup: 0, Changes: [][]byte{[]byte("p")}}, {KeyGroup: 9, Changes: [][]byte{[]byte("q"), []byte("r")}}}}
	data, infos = encode(t, EncoderOptions{Version: Version2}, byGroup)
	f = data[infos[0].Offset : infos[0].Offset+infos[0].Length]
	if got, want := f[FrameHeaderSize+2*DirEntrySizeV2:len(f)-FrameCRCSize], []byte{0, 1, 'p', 1, 1, 'q', 1, 1, 'r'}; !bytes.Equal(got, want) {
		t.Fatalf("the payload by group is %x, want %x", got, want)
	}
}

// TestV2Tags: a group's index takes one byte up to 127, two from 128 on;
// frames of many groups round-trip, and their size is what EncodedSize
// says.
func TestV2Tags(t *testing.T) {
	for _, groups := range []int{1, 2, 127, 128, 129, 300, 20000} {
		var app []KeyedChange
		for i := range 2 * groups {
			app = append(app, KeyedChange{KeyGroup: int32(i % groups), Data: []byte{byte(i)}})
		}
		cs := &ChangeSet{LogID: logID(2), Appended: app}
		opts := EncoderOptions{Version: Version2}
		data, infos := encode(t, opts, cs)
		var tags int64
		if groups > 1 {
			for d := range groups {
				tags += 2 * int64(uvarintLen(uint64(d)))
			}
		}
		if want := int64(FrameHeaderSize+groups*DirEntrySizeV2) + int64(2*groups*2) + tags + FrameCRCSize; infos[0].Length != want {
			t.Fatalf("%d groups: frame of %d bytes, want %d", groups, infos[0].Length, want)
		}
		_, sets, err := DecodeObject("tags", data)
		if err != nil {
			t.Fatalf("%d groups: %v", groups, err)
		}
		if err := equalChangeSet(sets[0], &ChangeSet{LogID: cs.LogID, Groups: cs.ByGroup()}); err != nil {
			t.Fatalf("%d groups: %v", groups, err)
		}
	}
}

// rawFrameV2 builds a frame of version 2 from its fields; logical is the
// payload's length unless set.
type rawFrameV2 struct {
	codec   byte
	logical uint32
	groups  uint32
	dir     [][3]uint32 // key group, count, bytes
	payload []byte
}

func (f rawFrameV2) bytes() []byte {
	b := make([]byte, FrameHeaderSize)
	b[frameOffVersion] = Version2
	b[frameOffCodec] = f.codec
	copy(b[frameOffLogID:], "0123456789abcdef")
	binary.LittleEndian.PutUint64(b[frameOffSQN:], 99)
	logical := f.logical
	if logical == 0 {
		logical = uint32(len(f.payload))
	}
	binary.LittleEndian.PutUint32(b[frameOffPayloadSize:], logical)
	groups := f.groups
	if groups == 0 {
		groups = uint32(len(f.dir))
	}
	binary.LittleEndian.PutUint32(b[frameOffGroups:], groups)
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

// TestV2LyingFrames feeds frames of version 2 whose CRC is valid but whose
// fields lie: each is ErrCorrupt at the field or the payload byte found
// wrong.
func TestV2LyingFrames(t *testing.T) {
	const base = 1000
	meta := uint32(0xffffffff) // key group -1
	dir2 := func(p uint32) int64 { return base + FrameHeaderSize + 2*DirEntrySizeV2 + int64(p) }
	for _, tc := range []struct {
		name   string
		frame  rawFrameV2
		offset int64
		detail string
	}{
		{"key group below metadata", rawFrameV2{dir: [][3]uint32{{0xfffffffe, 0, 0}}}, base + FrameHeaderSize, "invalid key group"},
		{"key groups not ascending", rawFrameV2{dir: [][3]uint32{{5, 0, 0}, {5, 0, 0}}}, base + FrameHeaderSize + DirEntrySizeV2, "must ascend"},
		{"more changes than bytes", rawFrameV2{dir: [][3]uint32{{1, 2, 1}}, payload: []byte{0}}, base + FrameHeaderSize + 4, "claims 2 changes in 1 bytes"},
		{"sizes and tags do not make the payload", rawFrameV2{dir: [][3]uint32{{0, 1, 2}, {1, 1, 2}}, payload: []byte{0, 1, 'a', 1, 1, 'b', 0}}, base + frameOffPayloadSize, "make 6 bytes"},
		{"groups do not fit", rawFrameV2{groups: 1000}, base + frameOffGroups, "do not fit"},
		{"a tag past the groups", rawFrameV2{dir: [][3]uint32{{0, 1, 2}, {1, 1, 2}}, payload: []byte{0, 1, 'a', 2, 1, 'b'}}, dir2(3), "bad group tag"},
		{"a tag cut short", rawFrameV2{dir: [][3]uint32{{0, 1, 2}, {1, 1, 2}}, payload: []byte{0, 1, 'a', 0x81, 1, 'b'}}, dir2(3), "bad group tag"},
		{"a change past the payload", rawFrameV2{dir: [][3]uint32{{0, 1, 3}, {1, 1, 2}}, payload: []byte{0, 2, 'a', 1, 1, 'b', 0}, logical: 0}, 0, ""},
		{"more changes than the group's count", rawFrameV2{dir: [][3]uint32{{0, 1, 4}, {1, 1, 2}}, payload: []byte{0, 1, 'a', 0, 1, 'b', 1, 1, 'c'}, logical: 0}, 0, ""},
		{"a change over its group's bytes", rawFrameV2{dir: [][3]uint32{{0, 1, 2}, {1, 1, 2}}, payload: []byte{0, 2, 'a', 'a', 1, 0}}, dir2(0), "overruns group 0"},
		{"a group's changes missing", rawFrameV2{dir: [][3]uint32{{0, 2, 4}, {1, 0, 2}}, payload: []byte{0, 1, 'a', 0, 1, 'b'}, logical: 0}, 0, ""},
		{"a group of fewer changes than it says", rawFrameV2{dir: [][3]uint32{{meta, 2, 3}, {1, 1, 1}}, payload: []byte{0, 2, 'a', 'b', 1, 0}, logical: 0}, 0, ""},
		{"one group, a length past the payload", rawFrameV2{dir: [][3]uint32{{4, 1, 3}}, payload: []byte{5, 'a', 'b'}}, base + FrameHeaderSize + DirEntrySizeV2, "bad length prefix"},
		{"payload size over the limit", rawFrameV2{logical: MaxPayloadSize + 1}, base + frameOffPayloadSize, "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeFrame("lying", base, tc.frame.bytes())
			fe := checkErr(t, err, "lying", ErrCorrupt)
			if tc.offset != 0 && fe.Offset != tc.offset {
				t.Errorf("offset %d, want %d: %v", fe.Offset, tc.offset, err)
			}
			if !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("error %q does not say %q", err, tc.detail)
			}
		})
	}
	// And the frame they lie about decodes.
	good := rawFrameV2{dir: [][3]uint32{{meta, 1, 2}, {1, 2, 3}}, payload: []byte{1, 1, 'a', 0, 1, 'm', 1, 0}}
	cs, err := DecodeFrame("good", base, good.bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := &ChangeSet{LogID: [16]byte([]byte("0123456789abcdef")), SequenceNumber: 99, Groups: []Group{
		{KeyGroup: MetaKeyGroup, Changes: [][]byte{[]byte("m")}}, {KeyGroup: 1, Changes: [][]byte{[]byte("a"), {}}}}}
	if err := equalChangeSet(cs, want); err != nil {
		t.Fatal(err)
	}
}

// TestDecodeObjectVersionMismatch: an object's frames have its header's
// version.
func TestDecodeObjectVersionMismatch(t *testing.T) {
	cs := &ChangeSet{LogID: logID(1), Groups: []Group{{KeyGroup: 0, Changes: [][]byte{[]byte("a")}}}}
	data, infos := encode(t, EncoderOptions{}, cs)
	data[4] = Version2
	_, _, err := DecodeObject("mixed", data)
	fe := checkErr(t, err, "mixed", ErrCorrupt)
	if fe.Offset != infos[0].Offset+frameOffVersion || !strings.Contains(err.Error(), "frame 0 is of format version 1, its object of version 2") {
		t.Fatalf("%v (offset %d)", err, fe.Offset)
	}
}

// TestEncoderVersion: an encoder asked for a version it does not write
// fails every call, wrapping ErrVersion, and writes nothing.
func TestEncoderVersion(t *testing.T) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf, EncoderOptions{Version: 3})
	if _, err := enc.WriteChangeSet(&ChangeSet{}); !errors.Is(err, ErrVersion) {
		t.Fatalf("WriteChangeSet: %v, want ErrVersion", err)
	}
	if err := enc.Close(); !errors.Is(err, ErrVersion) || buf.Len() != 0 {
		t.Fatalf("Close: %v, %d bytes written", err, buf.Len())
	}
	if _, err := (EncoderOptions{Version: -1}).EncodedSize(); !errors.Is(err, ErrVersion) {
		t.Fatalf("EncodedSize: %v, want ErrVersion", err)
	}
}

// TestProgress: an encoder building an object in memory tells its
// progress in ascending lengths, each of bytes that do not change after;
// without compression, a frame of version 2 a chunk at a time, one of
// version 1 once whole; the last is the object's size.
func TestProgress(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var app []KeyedChange
	for range 3000 {
		app = append(app, KeyedChange{KeyGroup: int32(r.IntN(128)), Data: randomBytes(r, 100)})
	}
	big := &ChangeSet{LogID: logID(1), AppendedFrom: changeList(app)}
	small := sampleChangeSet(r, 2, 1, 3, 2, 10, true)
	for _, tc := range []struct {
		opts     EncoderOptions
		inFrames bool // progress within the big frame
	}{
		{EncoderOptions{}, false},
		{EncoderOptions{Version: Version2}, true},
		{EncoderOptions{Version: Version2, Compression: true}, false},
		{EncoderOptions{Compression: true}, false},
	} {
		size, err := tc.opts.EncodedSize(small, big, small)
		if err != nil {
			t.Fatal(err)
		}
		enc := NewEncoder(nil, tc.opts)
		buf := make([]byte, 0, size)
		enc.ResetBuffer(buf, tc.opts)
		type snap struct {
			n     int64
			bytes []byte
		}
		var snaps []snap
		enc.SetProgress(func(n int64) {
			if len(snaps) > 0 && n <= snaps[len(snaps)-1].n {
				t.Fatalf("%+v: progress %d after %d", tc.opts, n, snaps[len(snaps)-1].n)
			}
			snaps = append(snaps, snap{n, bytes.Clone(buf[:n])})
		})
		var frames []FrameInfo
		for _, cs := range []*ChangeSet{small, big, small} {
			fi, err := enc.WriteChangeSet(cs)
			if err != nil {
				t.Fatal(err)
			}
			frames = append(frames, fi)
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		obj := enc.Bytes()
		if last := snaps[len(snaps)-1].n; last != int64(len(obj)) {
			t.Fatalf("%+v: last progress %d, object of %d bytes", tc.opts, last, len(obj))
		}
		within := 0
		for _, s := range snaps {
			if !bytes.Equal(s.bytes, obj[:s.n]) {
				t.Fatalf("%+v: bytes told final at %d changed later", tc.opts, s.n)
			}
			if s.n > frames[1].Offset && s.n < frames[1].Offset+frames[1].Length {
				within++
			}
		}
		if tc.inFrames != (within >= int(frames[1].Length/v2Chunk)-1) || !tc.inFrames && within != 0 {
			t.Fatalf("%+v: %d progress calls within a frame of %d bytes", tc.opts, within, frames[1].Length)
		}
	}
}

// TestProgressBufferTooSmall: with a progress function, an object does
// not grow past its buffer: a frame that does not fit is rejected and
// nothing of it is written or told final.
func TestProgressBufferTooSmall(t *testing.T) {
	cs := &ChangeSet{LogID: logID(1), Groups: []Group{{KeyGroup: 0, Changes: [][]byte{make([]byte, 1000)}}}}
	for _, opts := range []EncoderOptions{{}, {Version: Version2}} {
		size, err := opts.EncodedSize(cs)
		if err != nil {
			t.Fatal(err)
		}
		enc := NewEncoder(nil, opts)
		buf := make([]byte, 0, size-IndexEntrySize-TrailerSize-1)
		enc.ResetBuffer(buf, opts)
		var told int64
		enc.SetProgress(func(n int64) { told = n })
		if _, err := enc.WriteChangeSet(cs); !errors.Is(err, ErrInvalidChangeSet) || !strings.Contains(err.Error(), "does not fit") {
			t.Fatalf("version %d: %v; want ErrInvalidChangeSet: does not fit", opts.Version, err)
		}
		if told != 0 || len(enc.Bytes()) != 0 {
			t.Fatalf("version %d: %d bytes told final, %d in the object", opts.Version, told, len(enc.Bytes()))
		}
		// The frame fits, the index not.
		enc.ResetBuffer(make([]byte, 0, size-TrailerSize), opts)
		enc.SetProgress(func(n int64) { told = n })
		if _, err := enc.WriteChangeSet(cs); err != nil {
			t.Fatal(err)
		}
		if err := enc.Close(); !errors.Is(err, ErrInvalidChangeSet) {
			t.Fatalf("version %d: Close: %v; want ErrInvalidChangeSet", opts.Version, err)
		}
		if _, ok := enc.ObjectCRC32C(); ok {
			t.Fatalf("version %d: a checksum of an object that failed", opts.Version)
		}
	}
}

// TestObjectCRC32C: the checksum an encoder gives of its object, from the
// frames' own, is crc32.Checksum of the object's bytes, in every version,
// compressed or not, written to an io.Writer or built in memory.
func TestObjectCRC32C(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	sets := []*ChangeSet{sampleChangeSet(r, 1, 1, 4, 30, 100, true), {LogID: logID(2)}, sampleChangeSet(r, 3, 7, 1, 300, 50, false)}
	for _, opts := range []EncoderOptions{{}, {Compression: true}, {Version: Version2}, {Version: Version2, Compression: true}} {
		for _, n := range []int{0, 1, 3} {
			var buf bytes.Buffer
			enc := NewEncoder(&buf, opts)
			for _, cs := range sets[:n] {
				if _, err := enc.WriteChangeSet(cs); err != nil {
					t.Fatal(err)
				}
			}
			if _, ok := enc.ObjectCRC32C(); ok {
				t.Fatalf("%+v: a checksum before Close", opts)
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			crc, ok := enc.ObjectCRC32C()
			if want := crc32.Checksum(buf.Bytes(), castagnoli); !ok || crc != want {
				t.Fatalf("%+v, %d frames, to a writer: %#08x, %v; want %#08x", opts, n, crc, ok, want)
			}
			enc.ResetBuffer(nil, opts)
			for _, cs := range sets[:n] {
				if _, err := enc.WriteChangeSet(cs); err != nil {
					t.Fatal(err)
				}
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			crc, ok = enc.ObjectCRC32C()
			if want := crc32.Checksum(enc.Bytes(), castagnoli); !ok || crc != want {
				t.Fatalf("%+v, %d frames, in memory: %#08x, %v; want %#08x", opts, n, crc, ok, want)
			}
		}
	}
	// A failed write leaves no checksum.
	enc := NewEncoder(&failingWriter{n: 100, err: io.ErrClosedPipe}, EncoderOptions{})
	_, _ = enc.WriteChangeSet(sets[0])
	_ = enc.Close()
	if _, ok := enc.ObjectCRC32C(); ok {
		t.Fatal("a checksum of an object whose write failed")
	}
}
