package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var updateFuzzCorpus = flag.Bool("update-fuzz-corpus", false, "rewrite the seed corpus under testdata/fuzz")

// checkFuzzErr asserts that err is a *Error naming object, with an offset
// within [lo, hi].
func checkFuzzErr(t *testing.T, err error, object string, lo, hi int64) {
	t.Helper()
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *format.Error", err, err)
	}
	if fe.Object != object || !strings.Contains(err.Error(), object) {
		t.Fatalf("error %q does not name object %q", err, object)
	}
	if fe.Offset < lo || fe.Offset > hi {
		t.Fatalf("error offset %d outside [%d, %d]: %v", fe.Offset, lo, hi, err)
	}
	if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrVersion) {
		t.Fatalf("error %v wraps no sentinel", err)
	}
}

// reencode encodes sets without compression, in each format version,
// and decodes them back; the sets in append order, too, in version 2.
func reencode(t *testing.T, sets []*ChangeSet) {
	t.Helper()
	v2, _ := encode(t, EncoderOptions{Version: Version2}, sets...)
	data, _ := encode(t, EncoderOptions{}, sets...)
	for _, obj := range [][]byte{data, v2} {
		_, got, err := DecodeObject("reencoded", obj)
		if err != nil {
			t.Fatalf("re-encoded object of version %d does not decode: %v", obj[4], err)
		}
		for i := range sets {
			if err := equalChangeSet(sets[i], got[i]); err != nil {
				t.Fatalf("re-encoded set %d, version %d: %v", i, obj[4], err)
			}
		}
	}
	// Given in append order, the same sets (with no empty group, which
	// append order cannot express) make the same bytes.
	appended := make([]*ChangeSet, len(sets))
	for i, cs := range sets {
		if slices.ContainsFunc(cs.Groups, func(g Group) bool { return len(g.Changes) == 0 }) {
			return
		}
		appended[i] = interleaved(cs)
	}
	if again, _ := encode(t, EncoderOptions{}, appended...); !bytes.Equal(again, data) {
		t.Fatalf("the sets in append order encode to %d bytes unlike the %d of the sets by group", len(again), len(data))
	}
	// And so do they given through a reader.
	from := make([]*ChangeSet, len(appended))
	for i, cs := range appended {
		from[i] = &ChangeSet{LogID: cs.LogID, SequenceNumber: cs.SequenceNumber, AppendedFrom: changeList(cs.Appended)}
	}
	if again, _ := encode(t, EncoderOptions{}, from...); !bytes.Equal(again, data) {
		t.Fatalf("the sets in append order, read through a reader, encode to %d bytes unlike the %d of the sets by group", len(again), len(data))
	}
	// In version 2, the sets in append order are as long, and decode to
	// the same groups.
	again, _ := encode(t, EncoderOptions{Version: Version2}, from...)
	if len(again) != len(v2) {
		t.Fatalf("in version 2, the sets in append order encode to %d bytes, by group to %d", len(again), len(v2))
	}
	_, got, err := DecodeObject("reencoded", again)
	if err != nil {
		t.Fatalf("the sets in append order, in version 2, do not decode: %v", err)
	}
	for i := range sets {
		if err := equalChangeSet(sets[i], got[i]); err != nil {
			t.Fatalf("the sets in append order, in version 2, set %d: %v", i, err)
		}
	}
}

// interleaved returns cs in append order: a change of each group in turn,
// as a writer over several key groups appends them.
func interleaved(cs *ChangeSet) *ChangeSet {
	out := &ChangeSet{LogID: cs.LogID, SequenceNumber: cs.SequenceNumber}
	for j := 0; ; j++ {
		more := false
		for _, g := range cs.Groups {
			if j < len(g.Changes) {
				out.Appended = append(out.Appended, KeyedChange{KeyGroup: g.KeyGroup, Data: g.Changes[j]})
				more = true
			}
		}
		if !more {
			return out
		}
	}
}

// FuzzDecodeObject decodes arbitrary objects. With fix set, the frame and
// index checksums are recomputed first so that the fuzzer reaches the checks
// behind them.
func FuzzDecodeObject(f *testing.F) {
	for _, seed := range seedObjects(f) {
		f.Add(seed.data, seed.fix)
	}
	const name = "fuzz/object"
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = bytes.Clone(data)
			fixChecksums(data)
		}
		index, sets, err := DecodeObject(name, data)
		ri, rerr := ReadIndex(name, bytes.NewReader(data), int64(len(data)))
		if err != nil {
			checkFuzzErr(t, err, name, 0, int64(len(data)))
			if rerr != nil {
				checkFuzzErr(t, rerr, name, 0, int64(len(data)))
			}
			return
		}
		if rerr != nil {
			t.Fatalf("DecodeObject succeeded, ReadIndex failed: %v", rerr)
		}
		if fmt.Sprint(ri) != fmt.Sprint(index) || len(sets) != len(index) {
			t.Fatalf("ReadIndex %v, DecodeObject %v and %d sets", ri, index, len(sets))
		}
		for i, e := range index {
			frame := data[e.Offset : e.Offset+e.Length]
			cs, err := DecodeFrame(name, e.Offset, frame)
			if err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			if err := equalChangeSet(sets[i], cs); err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			h, err := ReadFrameHeader(name, e.Offset, frame)
			if err != nil || len(h.Groups) != len(cs.Groups) {
				t.Fatalf("frame %d header: %v", i, err)
			}
		}
		reencode(t, sets)
	})
}

// FuzzDecodeFrame decodes arbitrary frames. With fix set, the frame's CRC is
// recomputed first.
func FuzzDecodeFrame(f *testing.F) {
	seeds := seedFrames(f)
	for _, seed := range seeds {
		f.Add(seed.data, seed.fix)
	}
	const name = "fuzz/frame"
	const base = 1 << 20
	f.Fuzz(func(t *testing.T, frame []byte, fix bool) {
		if fix {
			frame = bytes.Clone(frame)
			fixFrameCRC(frame)
		}
		cs, err := DecodeFrame(name, base, frame)
		// A FrameDecoder, used before on another frame, agrees.
		var d FrameDecoder
		if len(seeds) > 0 {
			d.Decode(name, 0, seeds[len(seeds)-1].data)
		}
		dcs, derr := d.Decode(name, base, frame)
		if (err == nil) != (derr == nil) || err == nil && !reflect.DeepEqual(cs, dcs) && !(len(cs.Groups) == 0 && len(dcs.Groups) == 0) {
			t.Fatalf("DecodeFrame = %v, %v; FrameDecoder.Decode = %v, %v", cs, err, dcs, derr)
		}
		// Verified first, then decoded without the CRC: the same outcome.
		// A frame that fails VerifyFrame fails DecodeFrame with the same
		// error.
		if verr := VerifyFrame(name, base, frame); verr != nil {
			if err == nil || verr.Error() != err.Error() {
				t.Fatalf("VerifyFrame = %v, DecodeFrame = %v", verr, err)
			}
		} else {
			var vd FrameDecoder
			vcs, vderr := vd.DecodeVerified(name, base, frame)
			if (err == nil) != (vderr == nil) || err != nil && vderr.Error() != err.Error() ||
				err == nil && !reflect.DeepEqual(cs, vcs) && !(len(cs.Groups) == 0 && len(vcs.Groups) == 0) {
				t.Fatalf("DecodeFrame = %v, %v; DecodeVerified = %v, %v", cs, err, vcs, vderr)
			}
		}
		h, herr := ReadFrameHeader(name, base, frame)
		if herr != nil {
			checkFuzzErr(t, herr, name, base, base+int64(len(frame)))
			if err == nil {
				t.Fatalf("DecodeFrame succeeded, ReadFrameHeader failed: %v", herr)
			}
		}
		if err != nil {
			checkFuzzErr(t, err, name, base, base+int64(len(frame)))
			return
		}
		if h.LogID != cs.LogID || h.SequenceNumber != cs.SequenceNumber || len(h.Groups) != len(cs.Groups) {
			t.Fatalf("header %+v does not match change set", h)
		}
		var size int64
		for i, g := range h.Groups {
			if g.KeyGroup != cs.Groups[i].KeyGroup || g.Count != len(cs.Groups[i].Changes) {
				t.Fatalf("group %d: header %+v", i, g)
			}
			var changes int64
			for _, c := range cs.Groups[i].Changes {
				changes += int64(uvarintLen(uint64(len(c))) + len(c))
			}
			if h.Version == Version2 && g.Size != changes {
				t.Fatalf("group %d: header says %d bytes, its changes take %d", i, g.Size, changes)
			}
			size += g.Size
			if h.Version == Version2 && len(h.Groups) > 1 {
				size += int64(g.Count * uvarintLen(uint64(i)))
			}
		}
		if size != h.LogicalSize {
			t.Fatalf("groups cover %d bytes, header says %d", size, h.LogicalSize)
		}
		reencode(t, []*ChangeSet{cs})
	})
}

type seed struct {
	name string
	data []byte
	fix  bool
}

func seedSets() []*ChangeSet {
	r := rand.New(rand.NewPCG(11, 12))
	return []*ChangeSet{
		{LogID: logID(1), SequenceNumber: 0, Groups: []Group{
			{KeyGroup: -1, Changes: [][]byte{[]byte("meta")}},
			{KeyGroup: 0, Changes: [][]byte{[]byte("a"), {}}},
			{KeyGroup: 2},
			{KeyGroup: 5, Changes: [][]byte{textBytes(r, 200)}},
		}},
		{LogID: logID(2), SequenceNumber: 1},
		{LogID: logID(3), SequenceNumber: 7, Groups: []Group{{KeyGroup: 1, Changes: [][]byte{textBytes(r, 150), randomBytes(r, 20)}}}},
	}
}

func seedObjects(t testing.TB) []seed {
	sets := seedSets()
	empty, _ := encode(t, EncoderOptions{})
	raw, _ := encode(t, EncoderOptions{}, sets...)
	zstd, infos := encode(t, EncoderOptions{Compression: true}, sets...)
	v2, v2Infos := encode(t, EncoderOptions{Version: Version2}, sets...)
	v2zstd, _ := encode(t, EncoderOptions{Version: Version2, Compression: true}, sets...)
	v2Empty, _ := encode(t, EncoderOptions{Version: Version2})
	damage := func(d []byte, f func([]byte)) []byte {
		d = bytes.Clone(d)
		f(d)
		return d
	}
	return []seed{
		{"empty", empty, false},
		{"raw", raw, false},
		{"zstd", zstd, false},
		{"zstd-one-frame", func() []byte { d, _ := encode(t, EncoderOptions{Compression: true}, sets[2]); return d }(), false},
		{"truncated", zstd[:len(zstd)-7], false},
		{"truncated-frame", raw[:HeaderSize+30], false},
		{"flipped-payload", damage(zstd, func(d []byte) { d[infos[0].Offset+infos[0].Length-10] ^= 4 }), false},
		{"flipped-payload-fixed", damage(zstd, func(d []byte) { d[infos[0].Offset+infos[0].Length-10] ^= 4 }), true},
		{"bad-version", damage(raw, func(d []byte) { d[4] = Version2 + 1 }), false},
		{"lying-group-count", damage(raw, func(d []byte) { d[HeaderSize+36] = 0xff }), true},
		{"lying-index", damage(raw, func(d []byte) { d[len(d)-TrailerSize-IndexEntrySize+8]++ }), true},
		{"v2-empty", v2Empty, false},
		{"v2-raw", v2, false},
		{"v2-zstd", v2zstd, false},
		{"v2-frames-of-version-1", damage(raw, func(d []byte) { d[4] = Version2 }), false},
		{"v2-lying-tag", damage(v2, func(d []byte) { d[v2Infos[0].Offset+FrameHeaderSize+4*DirEntrySizeV2] = 9 }), true},
		{"v2-lying-group-size", damage(v2, func(d []byte) { d[v2Infos[0].Offset+FrameHeaderSize+8]++ }), true},
	}
}

func seedFrames(t testing.TB) []seed {
	var out []seed
	for _, compression := range []bool{false, true} {
		data, infos := encode(t, EncoderOptions{Compression: compression}, seedSets()...)
		for i, fi := range infos {
			out = append(out, seed{fmt.Sprintf("frame-%d-compression-%v", i, compression), data[fi.Offset : fi.Offset+fi.Length], false})
		}
	}
	f := out[3].data // the first frame, compressed
	out = append(out,
		seed{"truncated", f[:len(f)-1], false},
		seed{"lying-logical", func() []byte { d := bytes.Clone(f); d[35] = 0x3f; return d }(), true},
		seed{"lying-change-count", func() []byte { d := bytes.Clone(f); d[FrameHeaderSize+4] = 9; return d }(), true},
		seed{"flipped-zstd", func() []byte { d := bytes.Clone(f); d[len(d)-8] ^= 0x80; return d }(), true},
	)
	for _, compression := range []bool{false, true} {
		data, infos := encode(t, EncoderOptions{Version: Version2, Compression: compression}, seedSets()...)
		for i, fi := range infos {
			out = append(out, seed{fmt.Sprintf("v2-frame-%d-compression-%v", i, compression), data[fi.Offset : fi.Offset+fi.Length], false})
		}
	}
	v2 := out[len(out)-6].data // the first frame of version 2, raw
	out = append(out,
		seed{"v2-lying-tag", func() []byte { d := bytes.Clone(v2); d[FrameHeaderSize+4*DirEntrySizeV2] = 7; return d }(), true},
		seed{"v2-lying-count", func() []byte { d := bytes.Clone(v2); d[FrameHeaderSize+4]++; return d }(), true},
		seed{"v2-lying-length", func() []byte { d := bytes.Clone(v2); d[FrameHeaderSize+4*DirEntrySizeV2+1] = 0x7f; return d }(), true},
	)
	return out
}

// FuzzDecodeFrameV2 decodes frames of version 2 built from a directory and
// a payload that the fuzzer chooses, with a valid CRC and a payload size
// that matches: it reaches the checks of the directory and of the
// payload's tags, lengths and groups. A frame that decodes re-encodes, by
// group, to a frame that decodes to the same change set.
func FuzzDecodeFrameV2(f *testing.F) {
	data, infos := encode(f, EncoderOptions{Version: Version2}, seedSets()...)
	for _, fi := range infos {
		frame := data[fi.Offset : fi.Offset+fi.Length]
		groups := int(binary.LittleEndian.Uint32(frame[frameOffGroups:]))
		dirEnd := FrameHeaderSize + groups*DirEntrySizeV2
		f.Add(frame[FrameHeaderSize:dirEnd], frame[dirEnd:len(frame)-FrameCRCSize])
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0}, []byte{1, 1, 'a', 0, 1, 'm', 1, 2, 'b', 'c'})
	f.Add([]byte{7, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0}, []byte{1, 'x', 2, 'y', 'z'})
	const name = "fuzz/frame-v2"
	const base = 4096
	f.Fuzz(func(t *testing.T, dir, payload []byte) {
		dir = dir[:len(dir)/DirEntrySizeV2*DirEntrySizeV2]
		frame := make([]byte, FrameHeaderSize, FrameHeaderSize+len(dir)+len(payload)+FrameCRCSize)
		frame[frameOffVersion] = Version2
		binary.LittleEndian.PutUint32(frame[frameOffPayloadSize:], uint32(len(payload)))
		binary.LittleEndian.PutUint32(frame[frameOffGroups:], uint32(len(dir)/DirEntrySizeV2))
		frame = append(append(frame, dir...), payload...)
		frame = append(frame, 0, 0, 0, 0)
		binary.LittleEndian.PutUint32(frame, uint32(len(frame)))
		fixFrameCRC(frame)
		cs, err := DecodeFrame(name, base, frame)
		var d FrameDecoder
		dcs, derr := d.Decode(name, base, frame)
		if (err == nil) != (derr == nil) {
			t.Fatalf("DecodeFrame: %v; FrameDecoder.Decode: %v", err, derr)
		}
		if err != nil {
			checkFuzzErr(t, err, name, base, base+int64(len(frame)))
			return
		}
		if err := equalChangeSet(cs, dcs); err != nil {
			t.Fatalf("DecodeFrame and FrameDecoder.Decode differ: %v", err)
		}
		var changes int64
		for _, g := range cs.Groups {
			for _, c := range g.Changes {
				changes += int64(uvarintLen(uint64(len(c))) + len(c))
			}
		}
		if changes > int64(len(payload)) {
			t.Fatalf("the changes take %d bytes of a %d-byte payload", changes, len(payload))
		}
		reencode(t, []*ChangeSet{cs})
	})
}

// TestFuzzSeedCorpus rewrites the committed seed corpus when run with
// -update-fuzz-corpus.
func TestFuzzSeedCorpus(t *testing.T) {
	if !*updateFuzzCorpus {
		t.Skip("run with -update-fuzz-corpus to rewrite testdata/fuzz")
	}
	for fuzzer, seeds := range map[string][]seed{
		"FuzzDecodeObject": seedObjects(t),
		"FuzzDecodeFrame":  seedFrames(t),
	} {
		dir := filepath.Join("testdata", "fuzz", fuzzer)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, s := range seeds {
			content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s.data)) + ")\nbool(" + strconv.FormatBool(s.fix) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, "seed-"+s.name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
