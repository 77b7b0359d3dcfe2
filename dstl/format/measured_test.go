package format

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestWriteMeasuredChangesBetweenReads: a reader that gives other
// changes when the encoder writes what Measured.Reset read is rejected
// with ErrInvalidChangeSet, nothing is written, and the encoder stays
// usable, as with WriteChangeSet's own two reads.
func TestWriteMeasuredChangesBetweenReads(t *testing.T) {
	kc := func(kg int32, data string) KeyedChange { return KeyedChange{KeyGroup: kg, Data: []byte(data)} }
	first := changeList{kc(0, "a"), kc(1, "b"), kc(0, "c")}
	for _, then := range []changeList{
		{kc(0, "a"), kc(1, "b")},
		{kc(0, "a"), kc(1, "b"), kc(0, "c"), kc(1, "d")},
		{kc(0, "a"), kc(7, "b"), kc(0, "c")},
		{kc(0, "a"), kc(1, "b"), kc(0, "cc")},
	} {
		for _, opts := range []EncoderOptions{{}, {Version: Version2}} {
			reads := 0
			var m Measured
			if err := m.Reset(opts, &ChangeSet{LogID: logID(3), SequenceNumber: 4, AppendedFrom: fickle{first, then, &reads}}); err != nil {
				t.Fatal(err)
			}
			enc := NewEncoder(nil, opts)
			enc.ResetBuffer(make([]byte, 0, m.Size()), opts)
			_, err := enc.WriteMeasured(&m, 0)
			if !errors.Is(err, ErrInvalidChangeSet) || !strings.Contains(err.Error(), "the second time") {
				t.Fatalf("%+v, then %v: %v; want ErrInvalidChangeSet saying the changes differ", opts, then, err)
			}
			if len(enc.Bytes()) > HeaderSize {
				t.Fatalf("%+v: %d bytes in the object", opts, len(enc.Bytes()))
			}
			if _, err := enc.WriteChangeSet(&ChangeSet{AppendedFrom: first}); err != nil {
				t.Fatalf("%+v: after the rejection: %v", opts, err)
			}
		}
	}
}

// TestWriteMeasuredRejects: a set that is not in Measured, a version
// other than the encoder's, and change sets Reset rejects, each with
// ErrInvalidChangeSet or the error EncodedSize gives, naming what was
// wrong; a rejected Reset leaves Measured empty.
func TestWriteMeasuredRejects(t *testing.T) {
	cs := &ChangeSet{LogID: logID(1), SequenceNumber: 2, Appended: []KeyedChange{{KeyGroup: 3, Data: []byte("x")}}}
	var m Measured
	if err := m.Reset(EncoderOptions{Version: Version2}, cs); err != nil {
		t.Fatal(err)
	}
	enc := NewEncoder(&bytes.Buffer{}, EncoderOptions{})
	for _, tc := range []struct {
		i    int
		want string
	}{
		{1, "change set 1 of 1 measured"},
		{-1, "change set -1 of 1 measured"},
		{0, "measured for format version 2, written in version 1"},
	} {
		if _, err := enc.WriteMeasured(&m, tc.i); !errors.Is(err, ErrInvalidChangeSet) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("set %d: %v; want ErrInvalidChangeSet saying %q", tc.i, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		sets []*ChangeSet
	}{
		{"nil set", []*ChangeSet{cs, nil}},
		{"key group below the metadata group", []*ChangeSet{cs, {Appended: []KeyedChange{{KeyGroup: MetaKeyGroup - 1}}}}},
		{"two forms", []*ChangeSet{{Groups: []Group{{KeyGroup: 1}}, Appended: cs.Appended}}},
	} {
		_, want := EncoderOptions{}.EncodedSize(tc.sets...)
		err := m.Reset(EncoderOptions{}, tc.sets...)
		if !errors.Is(err, ErrInvalidChangeSet) || want == nil || err.Error() != want.Error() {
			t.Errorf("%s: %v; want %v", tc.name, err, want)
		}
		if m.Len() != 0 || m.Size() != 0 {
			t.Errorf("%s: a rejected Reset left %d sets, size %d", tc.name, m.Len(), m.Size())
		}
	}
	if err := m.Reset(EncoderOptions{Version: 9}, cs); err == nil {
		t.Error("version 9: no error")
	}
}

// TestWriteMeasuredGroupsChanged: a set given by group whose changes the
// caller changed after Measured.Reset (longer, in fewer groups, or, in
// version 2, more of them in the same bytes, which changes its tags) is
// rejected with ErrInvalidChangeSet, nothing written, where the encoder
// would otherwise write past the layout it planned. In version 1 the
// same bytes in more changes lay out alike, and the frame written is the
// set's as it is then.
func TestWriteMeasuredGroupsChanged(t *testing.T) {
	long := bytes.Repeat([]byte{1}, 200) // a prefix of two bytes
	for _, tc := range []struct {
		name string
		then []Group
		v1ok bool
	}{
		{"two changes in the bytes of one", []Group{{KeyGroup: 1, Changes: [][]byte{long[:100], long[:100]}}, {KeyGroup: 2, Changes: [][]byte{{9}}}}, true},
		{"longer", []Group{{KeyGroup: 1, Changes: [][]byte{long, {7}}}, {KeyGroup: 2, Changes: [][]byte{{9}}}}, false},
		{"another group", []Group{{KeyGroup: 1, Changes: [][]byte{long}}}, false},
	} {
		for _, opts := range []EncoderOptions{{}, {Version: Version2}} {
			cs := &ChangeSet{LogID: logID(1), SequenceNumber: 1, Groups: []Group{{KeyGroup: 1, Changes: [][]byte{long}}, {KeyGroup: 2, Changes: [][]byte{{9}}}}}
			var m Measured
			if err := m.Reset(opts, cs); err != nil {
				t.Fatal(err)
			}
			cs.Groups = tc.then
			enc := NewEncoder(nil, opts)
			enc.ResetBuffer(make([]byte, 0, m.Size()), opts)
			if tc.v1ok && opts.Version != Version2 {
				want, _ := encode(t, opts, cs)
				if _, err := enc.WriteMeasured(&m, 0); err != nil {
					t.Fatalf("%s, %+v: %v", tc.name, opts, err)
				}
				if err := enc.Close(); err != nil || !bytes.Equal(enc.Bytes(), want) {
					t.Fatalf("%s, %+v: %v, or the object differs from the set's as it is", tc.name, opts, err)
				}
				continue
			}
			if _, err := enc.WriteMeasured(&m, 0); !errors.Is(err, ErrInvalidChangeSet) {
				t.Fatalf("%s, %+v: %v; want ErrInvalidChangeSet", tc.name, opts, err)
			}
			if len(enc.Bytes()) > HeaderSize {
				t.Fatalf("%s, %+v: %d bytes in the object", tc.name, opts, len(enc.Bytes()))
			}
		}
	}
}
