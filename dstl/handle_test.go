package dstl

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// Run "go test ./dstl -run TestHandleGolden -update-handle-golden" after a
// deliberate change of the handle encodings (which needs a new version).
var updateHandleGolden = flag.Bool("update-handle-golden", false,
	"rewrite the handle golden files and the fuzz seed corpus under testdata")

const (
	handleGoldenBinary = "testdata/handle_v1.bin"
	handleGoldenJSON   = "testdata/handle_v1.json"
	handleFuzzCorpus   = "testdata/fuzz/FuzzHandleUnmarshalBinary"
)

func mustLogID(s string) LogID { return LogID(uuid.MustParse(s)) }

// goldenHandle is the handle of the golden files: several entries, an
// object used twice, gaps in the sequence numbers.
func goldenHandle() Handle {
	return Handle{
		StorageID: "s3",
		LogID:     mustLogID("0190e6b2-5d1c-7a3e-8f00-2b9c4d5e6f70"),
		KeyGroups: KeyGroupRange{Start: 0, End: 127},
		Entries: []HandleEntry{
			{Object: "job-1/0190e6b2-0000-7000-8000-000000000001", Offset: 0, Length: 812, SequenceNumber: 4, LogicalSize: 2048},
			{Object: "job-1/0190e6b2-0000-7000-8000-000000000002", Offset: 4096, Length: 100, SequenceNumber: 5, LogicalSize: 300},
			{Object: "job-1/0190e6b2-0000-7000-8000-000000000001", Offset: 812, Length: 50, SequenceNumber: 9, LogicalSize: 70},
		},
		LogicalSize:     2418,
		StoredSize:      962,
		IncrementalSize: 150,
	}
}

// manyEntries returns a valid handle with n entries over a few objects.
func manyEntries(n int) Handle {
	h := Handle{
		StorageID: "gocloud",
		LogID:     mustLogID("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
		KeyGroups: KeyGroupRange{Start: 100, End: MaxKeyGroup},
	}
	sqn := SequenceNumber(1 << 40)
	for i := range n {
		e := HandleEntry{
			Object:         fmt.Sprintf("job/obj-%03d", i%17),
			Offset:         int64(i) * 1000,
			Length:         int64(i%300 + 1),
			SequenceNumber: sqn,
			LogicalSize:    int64(i * 7),
		}
		sqn += SequenceNumber(i%5 + 1)
		h.Entries = append(h.Entries, e)
		h.StoredSize += e.Length
		h.LogicalSize += e.LogicalSize
	}
	h.IncrementalSize = h.StoredSize / 2
	return h
}

func handleRoundTripCases() []struct {
	name string
	h    Handle
} {
	extremes := Handle{
		StorageID: "ünïcødé ☃",
		LogID:     LogID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		KeyGroups: KeyGroupRange{Start: MaxKeyGroup, End: MaxKeyGroup},
		Entries: []HandleEntry{
			{Object: "a", Offset: 0, Length: 1, SequenceNumber: 0, LogicalSize: 0},
			{Object: "b/ü", Offset: math.MaxInt64 - 2, Length: 2, SequenceNumber: math.MaxUint64 - 1, LogicalSize: math.MaxInt64 - 1},
			{Object: "a", Offset: 1, Length: 1, SequenceNumber: math.MaxUint64, LogicalSize: 1},
		},
		LogicalSize:     math.MaxInt64,
		StoredSize:      4,
		IncrementalSize: 4,
	}
	return []struct {
		name string
		h    Handle
	}{
		{"zero", Handle{}},
		{"empty with ids", Handle{StorageID: "local", LogID: NewLogID(), KeyGroups: KeyGroupRange{Start: 3, End: 9}}},
		{"one entry", Handle{
			StorageID: "local", LogID: NewLogID(), KeyGroups: KeyGroupRange{Start: 0, End: 0},
			Entries:     []HandleEntry{{Object: "x", Offset: 10, Length: 20, SequenceNumber: 0, LogicalSize: 30}},
			LogicalSize: 30, StoredSize: 20, IncrementalSize: 0,
		}},
		{"golden", goldenHandle()},
		{"extremes", extremes},
		{"many entries", manyEntries(1000)},
	}
}

func TestHandleBinaryRoundTrip(t *testing.T) {
	for _, tt := range handleRoundTripCases() {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.h.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var got Handle
			if err := got.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.h) {
				t.Fatalf("round trip:\ngot  %+v\nwant %+v", got, tt.h)
			}
			b2, err := got.MarshalBinary()
			if err != nil || !bytes.Equal(b, b2) {
				t.Errorf("re-encoding differs (%v)", err)
			}
			prefix := []byte("prefix")
			appended, err := tt.h.AppendBinary(prefix)
			if err != nil || !bytes.Equal(appended[:len(prefix)], prefix) || !bytes.Equal(appended[len(prefix):], b) {
				t.Errorf("AppendBinary differs from MarshalBinary (%v)", err)
			}
		})
	}
}

func TestHandleJSONRoundTrip(t *testing.T) {
	for _, tt := range handleRoundTripCases() {
		t.Run(tt.name, func(t *testing.T) {
			// A value, a pointer and a field all use the handle's encoding.
			b, err := json.Marshal(tt.h)
			if err != nil {
				t.Fatal(err)
			}
			if bp, err := json.Marshal(&tt.h); err != nil || !bytes.Equal(b, bp) {
				t.Errorf("json.Marshal(&h) = %s, %v; want %s", bp, err, b)
			}
			var got Handle
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			if !reflect.DeepEqual(got, tt.h) {
				t.Fatalf("round trip through %s:\ngot  %+v\nwant %+v", b, got, tt.h)
			}
			type wrapper struct {
				H  Handle  `json:"h"`
				HP *Handle `json:"hp"`
			}
			wb, err := json.Marshal(wrapper{H: tt.h, HP: &tt.h})
			if err != nil {
				t.Fatal(err)
			}
			var w wrapper
			if err := json.Unmarshal(wb, &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(w.H, tt.h) || !reflect.DeepEqual(*w.HP, tt.h) {
				t.Errorf("round trip as fields differs: %s", wb)
			}
		})
	}
}

func TestHandleJSONShape(t *testing.T) {
	h := Handle{
		StorageID: "s3", LogID: mustLogID("0190e6b2-5d1c-7a3e-8f00-2b9c4d5e6f70"), KeyGroups: KeyGroupRange{Start: 0, End: 127},
		Entries:     []HandleEntry{{Object: "o", Offset: 1, Length: 2, SequenceNumber: 3, LogicalSize: 4}},
		LogicalSize: 4, StoredSize: 2, IncrementalSize: 1,
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"storage":"s3","log_id":"0190e6b2-5d1c-7a3e-8f00-2b9c4d5e6f70",` +
		`"key_groups":{"start":0,"end":127},` +
		`"entries":[{"object":"o","offset":1,"length":2,"sqn":3,"logical_size":4}],` +
		`"logical_size":4,"stored_size":2,"incremental_size":1}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	// No entries: an empty list, not null.
	b, err = json.Marshal(Handle{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"entries":[]`) {
		t.Errorf("empty handle: %s, want \"entries\":[]", b)
	}
}

// readOrUpdateGolden returns the golden file at path, or writes got there
// under -update-handle-golden.
func readOrUpdateGolden(t *testing.T, path string, got []byte) []byte {
	t.Helper()
	if *updateHandleGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// TestHandleGolden pins encoding version 1: bytes written by earlier
// releases must still decode, and the encoder must not drift.
func TestHandleGolden(t *testing.T) {
	h := goldenHandle()

	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := readOrUpdateGolden(t, handleGoldenBinary, b)
	if !bytes.Equal(b, want) {
		t.Errorf("binary encoding changed; a format change needs a new version.\ngot:\n%s\nwant:\n%s", hex.Dump(b), hex.Dump(want))
	}
	var got Handle
	if err := got.UnmarshalBinary(want); err != nil {
		t.Fatalf("decoding %s: %v", handleGoldenBinary, err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Errorf("decoding %s:\ngot  %+v\nwant %+v", handleGoldenBinary, got, h)
	}

	j, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	j = append(j, '\n')
	wantJSON := readOrUpdateGolden(t, handleGoldenJSON, j)
	if !bytes.Equal(j, wantJSON) {
		t.Errorf("JSON encoding changed; a format change needs a new version.\ngot:\n%s\nwant:\n%s", j, wantJSON)
	}
	got = Handle{}
	if err := json.Unmarshal(wantJSON, &got); err != nil {
		t.Fatalf("decoding %s: %v", handleGoldenJSON, err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Errorf("decoding %s:\ngot  %+v\nwant %+v", handleGoldenJSON, got, h)
	}

	if *updateHandleGolden {
		writeHandleFuzzSeeds(t, b)
	}
}

// writeHandleFuzzSeeds writes the committed seed corpus of
// FuzzHandleUnmarshalBinary.
func writeHandleFuzzSeeds(t *testing.T, golden []byte) {
	empty, err := Handle{}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	many, err := manyEntries(20).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	seeds := map[string][]byte{
		"golden":          golden,
		"empty":           empty,
		"many":            many,
		"truncated":       golden[:len(golden)/2],
		"trailing":        append(bytes.Clone(golden), 0),
		"version2":        append([]byte(handleMagic+"\x02"), golden[5:]...),
		"lying-count":     sealHandle(append(bytes.Clone(empty[:len(empty)-6]), 0x00, 0xff, 0xff, 0x03)),
		"bad-checksum":    append(bytes.Clone(golden[:len(golden)-1]), golden[len(golden)-1]^1),
		"magic-only":      []byte(handleMagic),
		"no-object-ref":   sealHandle(append(bytes.Clone(empty[:len(empty)-6]), 0x01, 0x01, 'x', 0x00)),
		"repeated-object": repeatedObjectHandle(t),
	}
	if err := os.MkdirAll(handleFuzzCorpus, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(handleFuzzCorpus, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// repeatedObjectHandle returns the golden handle's encoding with its second
// object name replaced by the first, resealed: sizes and entries consistent,
// but the object table names one object twice.
func repeatedObjectHandle(tb testing.TB) []byte {
	g, err := goldenHandle().MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	h := goldenHandle()
	first, second := h.Entries[0].Object, h.Entries[1].Object
	body := bytes.Replace(g[:len(g)-handleTrailerLen], []byte(second), []byte(first), 1)
	if bytes.Equal(body, g[:len(g)-handleTrailerLen]) {
		tb.Fatal("golden encoding does not hold the second object name")
	}
	return sealHandle(body)
}

// sealHandle appends the CRC32C trailer to magic, version and body.
func sealHandle(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// handleHeader returns magic, version and the fields of an empty handle
// before the object count: storage "", zero log id, key groups [0, 0] and
// zero sizes.
func handleHeader() []byte {
	b := []byte(handleMagic + "\x01")
	b = append(b, 0)                   // storage id length
	b = append(b, make([]byte, 16)...) // log id
	return append(b, 0, 0, 0, 0, 0)    // key groups, sizes
}

// handleBody returns handleHeader plus the given bytes, sealed.
func handleBody(rest ...byte) []byte { return sealHandle(append(handleHeader(), rest...)) }

func checkHandleErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", want)
	}
	if !errors.Is(err, ErrInvalidHandle) {
		t.Errorf("error %q does not wrap ErrInvalidHandle", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not mention %q", err, want)
	}
}

func TestHandleUnmarshalBinaryErrors(t *testing.T) {
	golden := goldenHandle()
	g, err := golden.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// One entry, object "x", then the given entry fields.
	oneEntry := func(fields ...byte) []byte {
		return handleBody(append([]byte{1, 1, 'x', 1}, fields...)...)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"nil", nil, "truncated"},
		{"magic prefix", []byte("DS"), "truncated"},
		{"magic only", []byte(handleMagic), "truncated"},
		{"bad magic", []byte("DSTX\x01\x00\x00\x00\x00"), "bad magic"},
		{"short bad magic", []byte("x"), "bad magic"},
		{"object format magic", append([]byte("DSTL"), g[4:]...), "bad magic"},
		{"version 0", append([]byte(handleMagic+"\x00"), g[5:]...), "unsupported version 0"},
		{"version 2", append([]byte(handleMagic+"\x02"), g[5:]...), "unsupported version 2"},
		{"no trailer", []byte(handleMagic + "\x01\x00"), "truncated"},
		{"truncated body", g[:len(g)-5], "truncated"},
		{"trailing byte", append(bytes.Clone(g), 0), "trailing bytes"},
		{"trailing bytes", append(bytes.Clone(g), "more"...), "trailing bytes"},
		{"checksum", append(bytes.Clone(g[:len(g)-1]), g[len(g)-1]^0x80), "checksum mismatch"},
		{"lying object count", handleBody(0xff, 0xff, 0x03), "object count 65535 exceeds"},
		{"lying entry count", handleBody(0, 0xff, 0xff, 0xff, 0xff, 0x0f), "entry count 4294967295 exceeds"},
		{"huge count", handleBody(0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), "entry count"},
		{"varint overflow", handleBody(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), "overflows 64 bits"},
		{"lying string length", sealHandle(append([]byte(handleMagic+"\x01"), 0x7f, 'a')), "storage id length 127 exceeds"},
		{"non-minimal varint", handleBody(0x80, 0x00, 0), "not minimally encoded"},
		{"empty object name", handleBody(1, 0, 1, 0, 0, 1, 0, 0), "empty object name"},
		{"unused object", handleBody(1, 1, 'x', 0), "not used by any entry"},
		{"object index forward", handleBody(2, 1, 'x', 1, 'y', 2, 1, 0, 1, 0, 0, 0, 0, 1, 1, 0), "object index 1"},
		{"object index out of range", oneEntry(1, 0, 1, 0, 0), "object index 1"},
		{"offset out of range", oneEntry(0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 0, 0), "offset 18446744073709551615 out of range"},
		{"sqn overflow", handleBody(1, 1, 'x', 2,
			0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0,
			0, 1, 1, 0, 0), "sequence number overflows"},
		{"key group out of range", sealHandle(append(append([]byte(handleMagic+"\x01\x00"), make([]byte, 16)...), 0x80, 0x80, 0x02)), "key-group start 32768 out of range"},
		{"invalid key-group range", sealHandle(append(append([]byte(handleMagic+"\x01\x00"), make([]byte, 16)...), 5, 4, 0, 0, 0, 0, 0)), "invalid key-group range"},
		{"sizes inconsistent", sealHandle(append(append([]byte(handleMagic+"\x01\x00"), make([]byte, 16)...), 0, 0, 0, 7, 0, 0, 0)), "stored size 7"},
		{"zero length", oneEntry(0, 0, 0, 0, 0), "length 0"},
		// The encoder writes each name once, so a repeated one would not
		// round-trip.
		{"repeated object name", handleBody(2, 1, 'x', 1, 'x', 2, 0, 0, 1, 0, 0, 1, 1, 1, 0, 0), `object name 1 "x" repeats object name 0`},
		{"repeated golden object", repeatedObjectHandle(t), "repeats object name 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := goldenHandle()
			err := h.UnmarshalBinary(tt.data)
			checkHandleErr(t, err, tt.want)
			if !reflect.DeepEqual(h, goldenHandle()) {
				t.Errorf("handle changed on error: %+v", h)
			}
		})
	}
}

// Every proper prefix and every single-bit flip of an encoding is rejected.
func TestHandleUnmarshalBinaryCorruption(t *testing.T) {
	for _, tt := range handleRoundTripCases()[:5] {
		b, err := tt.h.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(b) {
			var h Handle
			if err := h.UnmarshalBinary(b[:n]); !errors.Is(err, ErrInvalidHandle) {
				t.Errorf("%s: prefix of %d of %d bytes: err = %v", tt.name, n, len(b), err)
			}
		}
		for i := range len(b) * 8 {
			c := bytes.Clone(b)
			c[i/8] ^= 1 << (i % 8)
			var h Handle
			if err := h.UnmarshalBinary(c); !errors.Is(err, ErrInvalidHandle) {
				t.Errorf("%s: bit %d flipped: err = %v", tt.name, i, err)
			}
		}
	}
}

func TestHandleValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(h *Handle)
		want   string
	}{
		{"negative start", func(h *Handle) { h.KeyGroups.Start = -1 }, "invalid key-group range"},
		{"start after end", func(h *Handle) { h.KeyGroups = KeyGroupRange{Start: 5, End: 4} }, "invalid key-group range"},
		{"end too large", func(h *Handle) { h.KeyGroups.End = MaxKeyGroup + 1 }, "invalid key-group range"},
		{"storage not UTF-8", func(h *Handle) { h.StorageID = "\xff" }, "storage id"},
		{"empty object", func(h *Handle) { h.Entries[1].Object = "" }, "entry 1: empty object name"},
		{"object not UTF-8", func(h *Handle) { h.Entries[0].Object = "a\xc3" }, "entry 0: object name"},
		{"negative offset", func(h *Handle) { h.Entries[0].Offset = -1 }, "entry 0: negative offset -1"},
		{"zero length", func(h *Handle) { h.Entries[2].Length = 0; h.StoredSize -= 50; h.IncrementalSize = 0 }, "entry 2: length 0"},
		{"negative length", func(h *Handle) { h.Entries[2].Length = -50 }, "entry 2: length -50"},
		{"range overflows", func(h *Handle) { h.Entries[0].Offset = math.MaxInt64 }, "overflows"},
		{"negative logical size", func(h *Handle) { h.Entries[1].LogicalSize = -300; h.LogicalSize -= 600 }, "entry 1: negative logical size"},
		{"same sqn", func(h *Handle) { h.Entries[1].SequenceNumber = 4 }, "entry 1: sequence number 4 does not follow 4"},
		{"decreasing sqn", func(h *Handle) { h.Entries[2].SequenceNumber = 1 }, "entry 2: sequence number 1 does not follow 5"},
		{"stored size", func(h *Handle) { h.StoredSize++ }, "stored size 963, but the entries' lengths add up to 962"},
		{"logical size", func(h *Handle) { h.LogicalSize = 0 }, "logical size 0, but the entries' logical sizes add up to 2418"},
		{"incremental too large", func(h *Handle) { h.IncrementalSize = 963 }, "incremental size 963"},
		{"incremental negative", func(h *Handle) { h.IncrementalSize = -1 }, "incremental size -1"},
		{"entry longer than a frame can be", func(h *Handle) {
			h.Entries[0].Length = math.MaxInt64 - 10
			h.Entries[1].Length = 20
		}, "exceeds the largest change set frame"},
		{"logical sum overflows", func(h *Handle) {
			h.Entries[0].LogicalSize = math.MaxInt64
		}, "total logical size overflows"},
		{"empty handle with sizes", func(h *Handle) { h.Entries = nil }, "stored size 962"},
	}
	if err := goldenHandle().Validate(); err != nil {
		t.Fatalf("golden handle: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := goldenHandle()
			tt.mutate(&h)
			checkHandleErr(t, h.Validate(), tt.want)
			// Neither encoder writes an invalid handle.
			if _, err := h.MarshalBinary(); !errors.Is(err, ErrInvalidHandle) {
				t.Errorf("MarshalBinary: err = %v", err)
			}
			if _, err := json.Marshal(h); !errors.Is(err, ErrInvalidHandle) {
				t.Errorf("json.Marshal: err = %v", err)
			}
		})
	}
}

func TestHandleUnmarshalJSONErrors(t *testing.T) {
	valid := func() map[string]any {
		return map[string]any{
			"version":    1,
			"storage":    "s3",
			"log_id":     "0190e6b2-5d1c-7a3e-8f00-2b9c4d5e6f70",
			"key_groups": map[string]any{"start": 0, "end": 7},
			"entries": []any{
				map[string]any{"object": "o", "offset": 0, "length": 10, "sqn": 1, "logical_size": 20},
				map[string]any{"object": "o", "offset": 10, "length": 5, "sqn": 2, "logical_size": 6},
			},
			"logical_size":     26,
			"stored_size":      15,
			"incremental_size": 5,
		}
	}
	entry := func(m map[string]any, i int) map[string]any { return m["entries"].([]any)[i].(map[string]any) }
	tests := []struct {
		name   string
		mutate func(m map[string]any)
		raw    string // used instead of the mutated object when set
		want   string
	}{
		{name: "version 2", mutate: func(m map[string]any) { m["version"] = 2 }, want: "unsupported version 2"},
		{name: "version 0", mutate: func(m map[string]any) { m["version"] = 0 }, want: "unsupported version 0"},
		{name: "version string", mutate: func(m map[string]any) { m["version"] = "1" }, want: `unsupported version "1"`},
		{name: "version 2 with new fields", mutate: func(m map[string]any) { m["version"] = 2; m["fancy"] = true }, want: "unsupported version 2"},
		{name: "no version", mutate: func(m map[string]any) { delete(m, "version") }, want: `missing field "version"`},
		{name: "unknown field", mutate: func(m map[string]any) { m["extra"] = 1 }, want: "extra"},
		{name: "unknown entry field", mutate: func(m map[string]any) { entry(m, 0)["extra"] = 1 }, want: "extra"},
		{name: "no storage", mutate: func(m map[string]any) { delete(m, "storage") }, want: `missing field "storage"`},
		{name: "no log id", mutate: func(m map[string]any) { delete(m, "log_id") }, want: `missing field "log_id"`},
		{name: "no key groups", mutate: func(m map[string]any) { delete(m, "key_groups") }, want: `missing field "key_groups"`},
		{name: "no key-group end", mutate: func(m map[string]any) { m["key_groups"] = map[string]any{"start": 0} }, want: `missing field "key_groups.end"`},
		{name: "no entries", mutate: func(m map[string]any) { delete(m, "entries") }, want: `missing field "entries"`},
		{name: "null entries", mutate: func(m map[string]any) { m["entries"] = nil }, want: `missing field "entries"`},
		{name: "no logical size", mutate: func(m map[string]any) { delete(m, "logical_size") }, want: `missing field "logical_size"`},
		{name: "no stored size", mutate: func(m map[string]any) { delete(m, "stored_size") }, want: `missing field "stored_size"`},
		{name: "no incremental size", mutate: func(m map[string]any) { delete(m, "incremental_size") }, want: `missing field "incremental_size"`},
		{name: "no entry sqn", mutate: func(m map[string]any) { delete(entry(m, 1), "sqn") }, want: `missing field "entries[1].sqn"`},
		{name: "no entry object", mutate: func(m map[string]any) { delete(entry(m, 0), "object") }, want: `missing field "entries[0].object"`},
		{name: "no entry offset", mutate: func(m map[string]any) { delete(entry(m, 0), "offset") }, want: `missing field "entries[0].offset"`},
		{name: "no entry length", mutate: func(m map[string]any) { delete(entry(m, 0), "length") }, want: `missing field "entries[0].length"`},
		{name: "no entry logical size", mutate: func(m map[string]any) { delete(entry(m, 0), "logical_size") }, want: `missing field "entries[0].logical_size"`},
		{name: "log id braces", mutate: func(m map[string]any) { m["log_id"] = "{0190e6b2-5d1c-7a3e-8f00-2b9c4d5e6f70}" }, want: "not a UUID"},
		{name: "log id urn", mutate: func(m map[string]any) { m["log_id"] = "urn:uuid:0190e6b2-5d1c-7a3e-8f00-2b9c4d5e6f70" }, want: "not a UUID"},
		{name: "log id no dashes", mutate: func(m map[string]any) { m["log_id"] = "0190e6b25d1c7a3e8f002b9c4d5e6f70" }, want: "not a UUID"},
		{name: "log id bad hex", mutate: func(m map[string]any) { m["log_id"] = "0190e6b2-5d1c-7a3e-8f00-2b9c4d5e6fzz" }, want: "log_id"},
		{name: "log id misplaced dash", mutate: func(m map[string]any) { m["log_id"] = "0190e6b25-d1c-7a3e-8f00-2b9c4d5e6f70" }, want: "log_id"},
		{name: "log id number", mutate: func(m map[string]any) { m["log_id"] = 5 }, want: "log_id"},
		{name: "negative offset", mutate: func(m map[string]any) { entry(m, 0)["offset"] = -1 }, want: "negative offset"},
		{name: "fractional length", mutate: func(m map[string]any) { entry(m, 0)["length"] = 1.5 }, want: "length"},
		{name: "negative sqn", mutate: func(m map[string]any) { entry(m, 0)["sqn"] = -1 }, want: "sqn"},
		{name: "sqn order", mutate: func(m map[string]any) { entry(m, 1)["sqn"] = 1 }, want: "does not follow"},
		{name: "stored size lies", mutate: func(m map[string]any) { m["stored_size"] = 16 }, want: "stored size 16"},
		{name: "bad key groups", mutate: func(m map[string]any) { m["key_groups"] = map[string]any{"start": 3, "end": 2} }, want: "invalid key-group range"},
		{name: "not an object", raw: `[1, 2]`, want: "invalid handle"},
		{name: "null", raw: `null`, want: `missing field "version"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.raw)
			if tt.raw == "" {
				m := valid()
				tt.mutate(m)
				var err error
				if data, err = json.Marshal(m); err != nil {
					t.Fatal(err)
				}
			}
			h := goldenHandle()
			checkHandleErr(t, h.UnmarshalJSON(data), tt.want)
			if !reflect.DeepEqual(h, goldenHandle()) {
				t.Errorf("handle changed on error: %+v", h)
			}
		})
	}

	// The unmutated object decodes, upper-case hex digits included.
	m := valid()
	m["log_id"] = "0190E6B2-5D1C-7A3E-8F00-2B9C4D5E6F70"
	data, _ := json.Marshal(m)
	var h Handle
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatal(err)
	}
	if h.LogID != mustLogID("0190e6b2-5d1c-7a3e-8f00-2b9c4d5e6f70") || len(h.Entries) != 2 || h.StoredSize != 15 {
		t.Errorf("decoded %+v", h)
	}
	// Trailing data after the object, when called directly.
	checkHandleErr(t, h.UnmarshalJSON(append(data, " {}"...)), "after top-level value")
}

func FuzzHandleUnmarshalBinary(f *testing.F) {
	for _, tt := range handleRoundTripCases() {
		if tt.name == "many entries" {
			continue // the committed corpus holds a smaller one
		}
		b, err := tt.h.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkHandleDecode(t, data)
		// The checksum stops most mutations early; check the input again
		// with a correct one, so that the fuzzer reaches the parser.
		if len(data) >= handleTrailerLen {
			checkHandleDecode(t, sealHandle(bytes.Clone(data[:len(data)-handleTrailerLen])))
		}
	})
}

// checkHandleDecode checks that data either fails to decode with an error
// wrapping ErrInvalidHandle, or decodes to a valid handle that encodes back
// to data and round-trips through JSON.
func checkHandleDecode(t *testing.T, data []byte) {
	var h Handle
	if err := h.UnmarshalBinary(data); err != nil {
		if !errors.Is(err, ErrInvalidHandle) {
			t.Fatalf("error does not wrap ErrInvalidHandle: %v", err)
		}
		return
	}
	if err := h.Validate(); err != nil {
		t.Fatalf("decoded an invalid handle: %v", err)
	}
	// The encoding is canonical: what decodes re-encodes to the input.
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, data) {
		t.Fatalf("re-encoding differs:\n%s\ninput:\n%s", hex.Dump(b), hex.Dump(data))
	}
	j, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var hj Handle
	if err := json.Unmarshal(j, &hj); err != nil {
		t.Fatalf("JSON round trip: %v\n%s", err, j)
	}
	if !reflect.DeepEqual(hj, h) {
		t.Fatalf("JSON round trip differs:\ngot  %+v\nwant %+v", hj, h)
	}
}
