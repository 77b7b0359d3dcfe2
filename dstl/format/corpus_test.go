package format

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

var updateV1Corpus = flag.Bool("update-v1-corpus", false, "rewrite the corpus of version 1 objects under testdata/v1 (only ever from a release that writes version 1)")

// v1CorpusDir holds objects of format version 1, as the release before
// version 2 wrote them, each with the change sets it holds: every later
// release must read them back exactly.
const v1CorpusDir = "testdata/v1"

// corpusObject is one object of the corpus: how it was written and what
// it holds.
type corpusObject struct {
	Name        string      `json:"name"` // file name under the corpus directory
	About       string      `json:"about"`
	Compression bool        `json:"compression"`
	Sets        []corpusSet `json:"sets"`
}

type corpusSet struct {
	LogID  string        `json:"log_id"` // hex
	SQN    uint64        `json:"sqn"`
	Groups []corpusGroup `json:"groups"`
}

type corpusGroup struct {
	KeyGroup int32    `json:"key_group"`
	Changes  [][]byte `json:"changes"` // base64 in JSON
}

func toCorpusSet(cs *ChangeSet) corpusSet {
	s := corpusSet{LogID: hex.EncodeToString(cs.LogID[:]), SQN: cs.SequenceNumber}
	for _, g := range cs.ByGroup() {
		cg := corpusGroup{KeyGroup: g.KeyGroup, Changes: [][]byte{}}
		for _, c := range g.Changes {
			cg.Changes = append(cg.Changes, bytes.Clone(c))
		}
		s.Groups = append(s.Groups, cg)
	}
	return s
}

func (s corpusSet) changeSet(t *testing.T) *ChangeSet {
	t.Helper()
	id, err := hex.DecodeString(s.LogID)
	if err != nil || len(id) != 16 {
		t.Fatalf("corpus: log id %q: %v", s.LogID, err)
	}
	cs := &ChangeSet{SequenceNumber: s.SQN}
	copy(cs.LogID[:], id)
	for _, g := range s.Groups {
		cs.Groups = append(cs.Groups, Group{KeyGroup: g.KeyGroup, Changes: g.Changes})
	}
	return cs
}

// v1CorpusObjects returns the corpus's objects: change sets in every form
// the encoder takes, with and without compression.
func v1CorpusObjects() []struct {
	obj  corpusObject
	sets []*ChangeSet
} {
	r := rand.New(rand.NewPCG(31, 1))
	type entry = struct {
		obj  corpusObject
		sets []*ChangeSet
	}
	var out []entry
	add := func(name, about string, compression bool, sets ...*ChangeSet) {
		out = append(out, entry{corpusObject{Name: name, About: about, Compression: compression}, sets})
	}
	add("empty.dstl", "an object without frames", false)
	add("one-group.dstl", "one change set, one key group of small changes", false,
		&ChangeSet{LogID: logID(1), SequenceNumber: 3, Groups: []Group{{KeyGroup: 5, Changes: [][]byte{[]byte("a"), []byte("bc"), []byte("def")}}}})
	add("groups.dstl", "metadata, empty groups and zero-length changes, by group", false,
		&ChangeSet{LogID: logID(2), SequenceNumber: 1 << 63, Groups: []Group{
			{KeyGroup: -1, Changes: [][]byte{[]byte("meta-1"), {}}},
			{KeyGroup: 0, Changes: [][]byte{{}, []byte("x"), {}}},
			{KeyGroup: 1},
			{KeyGroup: 9, Changes: [][]byte{randomBytes(r, 40)}},
			{KeyGroup: 1<<31 - 1, Changes: [][]byte{nil}},
		}})
	// A writer's changes in append order, 100 bytes each over 128 key
	// groups, as the engine gives them.
	appended := &ChangeSet{LogID: logID(3), SequenceNumber: 17}
	for i := range 700 {
		kg := int32(r.IntN(128))
		if i%250 == 0 {
			kg = MetaKeyGroup
		}
		appended.Appended = append(appended.Appended, KeyedChange{KeyGroup: kg, Data: randomBytes(r, 100)})
	}
	add("appended.dstl", "a change set in append order, 700 changes of 100 bytes over 128 key groups and metadata (over 64 KiB: the index is read apart)", false, appended)
	var sizes []*ChangeSet
	cs := &ChangeSet{LogID: logID(4), SequenceNumber: 0}
	for i, n := range []int{0, 1, 127, 128, 129, 16383, 16384} {
		cs.Groups = append(cs.Groups, Group{KeyGroup: int32(i), Changes: [][]byte{randomBytes(r, n)}})
	}
	sizes = append(sizes, cs)
	add("sizes.dstl", "changes whose length prefixes take 1, 2 and 3 bytes", false, sizes...)
	sparse := &ChangeSet{LogID: logID(5), SequenceNumber: 2}
	for i := range 300 {
		sparse.Appended = append(sparse.Appended, KeyedChange{KeyGroup: int32(r.IntN(1 << 24)), Data: randomBytes(r, 1+r.IntN(30))})
		if i == 7 {
			sparse.Appended = append(sparse.Appended, KeyedChange{KeyGroup: MetaKeyGroup, Data: []byte("m")})
		}
	}
	add("sparse.dstl", "key groups spread far wider than the changes (sorted by the encoder)", false, sparse)
	var writers []*ChangeSet
	for w := range 6 {
		for sqn := range 3 {
			writers = append(writers, sampleChangeSet(r, byte(10+w), uint64(sqn*7+w), 1+w%4, 1+sqn*3, 60, false))
		}
	}
	add("writers.dstl", "the change sets of six writers, three each", false, writers...)
	var text []*ChangeSet
	for w := range 3 {
		text = append(text, sampleChangeSet(r, byte(20+w), uint64(w), 6, 12, 200, true))
	}
	text = append(text, sampleChangeSet(r, 23, 5, 2, 3, 50, false)) // stored raw: zstd gains nothing
	add("compressed.dstl", "compression on: zstd frames, and one frame stored raw", true, text...)
	return out
}

// TestWriteV1Corpus rewrites the corpus with -update-v1-corpus.
func TestWriteV1Corpus(t *testing.T) {
	if !*updateV1Corpus {
		t.Skip("run with -update-v1-corpus to rewrite testdata/v1")
	}
	if err := os.MkdirAll(v1CorpusDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var manifest []corpusObject
	for _, e := range v1CorpusObjects() {
		data, _ := encode(t, EncoderOptions{Compression: e.obj.Compression}, e.sets...)
		if err := os.WriteFile(filepath.Join(v1CorpusDir, e.obj.Name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, cs := range e.sets {
			e.obj.Sets = append(e.obj.Sets, toCorpusSet(cs))
		}
		manifest = append(manifest, e.obj)
	}
	b, err := json.MarshalIndent(manifest, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v1CorpusDir, "manifest.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestV1Corpus reads every object of the corpus of version 1 back: whole,
// frame by frame with each decoder, and their headers, each exactly as
// written; and the encoder, writing version 1, makes the same bytes of the
// same change sets (without compression: zstd's output is its library's).
func TestV1Corpus(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(v1CorpusDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest []corpusObject
	if err := json.Unmarshal(b, &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) == 0 {
		t.Fatal("the corpus is empty")
	}
	for _, obj := range manifest {
		t.Run(obj.Name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(v1CorpusDir, obj.Name))
			if err != nil {
				t.Fatal(err)
			}
			if data[4] != 1 {
				t.Fatalf("the object's header says version %d", data[4])
			}
			want := make([]*ChangeSet, len(obj.Sets))
			for i, s := range obj.Sets {
				want[i] = s.changeSet(t)
			}
			index, sets, err := DecodeObject(obj.Name, data)
			if err != nil {
				t.Fatalf("DecodeObject: %v", err)
			}
			if len(sets) != len(want) {
				t.Fatalf("%d change sets, want %d", len(sets), len(want))
			}
			ri, err := ReadIndex(obj.Name, bytes.NewReader(data), int64(len(data)))
			if err != nil || fmt.Sprint(ri) != fmt.Sprint(index) {
				t.Fatalf("ReadIndex = %v, %v; DecodeObject's index %v", ri, err, index)
			}
			var dec FrameDecoder
			for i, e := range index {
				if err := equalChangeSet(want[i], sets[i]); err != nil {
					t.Fatalf("DecodeObject, set %d: %v", i, err)
				}
				if e.LogID != want[i].LogID || e.SequenceNumber != want[i].SequenceNumber {
					t.Fatalf("index entry %d: %x/%d, want %x/%d", i, e.LogID, e.SequenceNumber, want[i].LogID, want[i].SequenceNumber)
				}
				frame := data[e.Offset : e.Offset+e.Length]
				for _, decode := range []func() (*ChangeSet, error){
					func() (*ChangeSet, error) { return DecodeFrame(obj.Name, e.Offset, frame) },
					func() (*ChangeSet, error) { return dec.Decode(obj.Name, e.Offset, frame) },
					func() (*ChangeSet, error) {
						if err := VerifyFrame(obj.Name, e.Offset, frame); err != nil {
							return nil, err
						}
						return dec.DecodeVerified(obj.Name, e.Offset, frame)
					},
				} {
					got, err := decode()
					if err != nil {
						t.Fatalf("frame %d: %v", i, err)
					}
					if err := equalChangeSet(want[i], got); err != nil {
						t.Fatalf("frame %d: %v", i, err)
					}
				}
				h, err := ReadFrameHeader(obj.Name, e.Offset, frame)
				if err != nil {
					t.Fatalf("ReadFrameHeader %d: %v", i, err)
				}
				if h.LogID != want[i].LogID || h.SequenceNumber != want[i].SequenceNumber || len(h.Groups) != len(want[i].Groups) {
					t.Fatalf("ReadFrameHeader %d = %+v", i, h)
				}
				var payload int64
				for j, g := range h.Groups {
					wg := want[i].Groups[j]
					var size int64
					for _, c := range wg.Changes {
						size += int64(uvarintLen(uint64(len(c))) + len(c))
					}
					if g.KeyGroup != wg.KeyGroup || g.Count != len(wg.Changes) || g.Size != size {
						t.Fatalf("ReadFrameHeader %d, group %d = %+v; want key group %d, %d changes, %d bytes", i, j, g, wg.KeyGroup, len(wg.Changes), size)
					}
					payload += size
				}
				if h.LogicalSize != payload {
					t.Fatalf("ReadFrameHeader %d: payload size %d, want %d", i, h.LogicalSize, payload)
				}
			}
			if obj.Compression {
				return
			}
			again, _ := encode(t, EncoderOptions{}, want...)
			if !bytes.Equal(again, data) {
				t.Fatalf("the encoder writes %d bytes of these change sets, unlike the %d of the corpus", len(again), len(data))
			}
		})
	}
}
