package format

import (
	"bytes"
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

// reencode encodes sets without compression and decodes them back.
func reencode(t *testing.T, sets []*ChangeSet) {
	t.Helper()
	data, _ := encode(t, EncoderOptions{}, sets...)
	_, got, err := DecodeObject("reencoded", data)
	if err != nil {
		t.Fatalf("re-encoded object does not decode: %v", err)
	}
	for i := range sets {
		if err := equalChangeSet(sets[i], got[i]); err != nil {
			t.Fatalf("re-encoded set %d: %v", i, err)
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
			size += g.Size
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
		{"bad-version", damage(raw, func(d []byte) { d[4] = 2 }), false},
		{"lying-group-count", damage(raw, func(d []byte) { d[HeaderSize+36] = 0xff }), true},
		{"lying-index", damage(raw, func(d []byte) { d[len(d)-TrailerSize-IndexEntrySize+8]++ }), true},
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
	return out
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
