package statestore

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/dstlgo/dstl/dstl"
)

// The decoders of the package's formats (docs/STATESTORE.md) get arbitrary
// bytes: they return an error wrapping the format's sentinel, never panic,
// and what they accept encodes back to the same value. Run one with, e.g.,
// go test -run '^$' -fuzz '^FuzzDecodeEntry$' ./statestore/

func FuzzDecodeEntry(f *testing.F) {
	f.Add(appendChange(nil, "counts", Change{KeyGroup: 3, Key: []byte("k"), Value: []byte("v")}), false)
	f.Add(appendChange(nil, "counts", Change{KeyGroup: 3, Key: []byte("k"), Tombstone: true}), false)
	f.Add(appendChange(nil, "hist", Change{KeyGroup: 3, Key: []byte("k"), Value: []byte("v"), Timestamp: -5, HasTimestamp: true}), false)
	f.Add(appendChange(nil, "win", Change{KeyGroup: dstl.MetaKeyGroup, Timestamp: 1 << 40, HasTimestamp: true}), true)
	f.Add(appendDescriptor(nil, "counts", KindKeyValue, 1), true)
	f.Add([]byte{entryVersion}, false)
	f.Fuzz(func(t *testing.T, data []byte, meta bool) {
		kg := 3
		if meta {
			kg = dstl.MetaKeyGroup
		}
		e, err := decodeEntry(data, kg)
		if err != nil {
			if !errors.Is(err, ErrLogFormat) {
				t.Fatalf("error %v does not wrap ErrLogFormat", err)
			}
			return
		}
		var again []byte
		if e.typ == typeDescr {
			again = appendDescriptor(nil, string(e.name), e.kind, e.kindVersion)
		} else {
			again = appendChange(nil, string(e.name), e.change)
		}
		e2, err := decodeEntry(again, kg)
		if err != nil {
			t.Fatalf("re-encoded entry %x does not decode: %v", again, err)
		}
		if !reflect.DeepEqual(normal(e), normal(e2)) {
			t.Fatalf("entry %+v re-encodes to %+v", e, e2)
		}
	})
}

// normal makes empty and nil slices equal.
func normal(e entry) entry {
	if len(e.change.Key) == 0 {
		e.change.Key = nil
	}
	if len(e.change.Value) == 0 {
		e.change.Value = nil
	}
	return e
}

func FuzzDecodeSnapshotObject(f *testing.F) {
	o := &snapshotObject{operator: "op", kgr: dstl.KeyGroupRange{Start: 2, End: 9}, maxP: 16, from: 7,
		stores: []storePayload{{name: "counts", kind: KindKeyValue, payload: []byte("payload")}, {name: "w", kind: KindWindow}}}
	f.Add(o.encode())
	f.Add((&snapshotObject{operator: "x", maxP: 1}).encode())
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := decodeSnapshotObject("fuzz.snap", data)
		if err != nil {
			if !errors.Is(err, ErrSnapshotFormat) {
				t.Fatalf("error %v does not wrap ErrSnapshotFormat", err)
			}
			return
		}
		o2, err := decodeSnapshotObject("fuzz.snap", o.encode())
		if err != nil || !reflect.DeepEqual(normalObject(o), normalObject(o2)) {
			t.Fatalf("object %+v re-encodes to %+v, %v", o, o2, err)
		}
	})
}

func normalObject(o *snapshotObject) *snapshotObject {
	c := *o
	c.stores = nil
	for _, s := range o.stores {
		if len(s.payload) == 0 {
			s.payload = nil
		}
		c.stores = append(c.stores, s)
	}
	return &c
}

func FuzzCheckpointHandle(f *testing.F) {
	h := CheckpointHandle{CheckpointID: 12, Operator: "op", KeyGroups: dstl.KeyGroupRange{Start: 0, End: 7}, MaxParallelism: 8,
		Snapshots: []SnapshotRef{{Object: "job/statestore/op/x.snap", Size: 99}}}
	b, err := h.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	h.Snapshots[0].Files = []string{"job/statestore/op/a.sst", "job/statestore/op-0/b.sst"}
	if b, err = h.MarshalBinary(); err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var h CheckpointHandle
		if err := h.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrInvalidCheckpointHandle) {
				t.Fatalf("error %v does not wrap ErrInvalidCheckpointHandle", err)
			}
			return
		}
		b, err := h.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded handle %+v does not encode: %v", h, err)
		}
		var h2 CheckpointHandle
		if err := h2.UnmarshalBinary(b); err != nil || !reflect.DeepEqual(h, h2) {
			t.Fatalf("handle %+v re-encodes to %+v, %v", h, h2, err)
		}
	})
}

// FuzzRestoreSnapshot feeds payloads to each store kind: a payload it
// rejects wraps ErrSnapshotFormat and leaves the store as it was; one it
// takes snapshots back to a payload that restores to the same.
func FuzzRestoreSnapshot(f *testing.F) {
	stores := func(t testing.TB) []Store {
		kv, err := NewKeyValueStore("kv", nil, StringCodec{}, StringCodec{})
		if err != nil {
			t.Fatal(err)
		}
		win, err := NewWindowStore("win", nil, StringCodec{}, StringCodec{}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		ver, err := NewVersionedStore("ver", nil, StringCodec{}, StringCodec{}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		// Stores whose codecs reject bytes: their errors are format
		// errors too.
		kvInt, err := NewKeyValueStore("kv-int", nil, Int64Codec{}, Int64Codec{})
		if err != nil {
			t.Fatal(err)
		}
		winJSON, err := NewWindowStore("win-json", nil, StringCodec{}, JSONCodec[map[string]int]{}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		verInt, err := NewVersionedStore("ver-int", nil, StringCodec{}, Int64Codec{}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return []Store{kv, win, ver, kvInt, winJSON, verInt}
	}
	for i, s := range stores(f) {
		p, err := s.Snapshot()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p, uint8(i))
	}
	// Payloads of string stores, whose values (and keys) the int64 and
	// JSON stores cannot decode.
	all := stores(f)
	kv, win, ver := all[0].(*KeyValueStore[string, string]), all[1].(*WindowStore[string, string]), all[2].(*VersionedStore[string, string])
	if kv.Put("k", "v") != nil || win.Put("k", 5, "v") != nil || ver.Put("k", "v", 5) != nil {
		f.Fatal("put")
	}
	for i, s := range all[:3] {
		p, err := s.Snapshot()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p, uint8(i+3))
	}
	f.Fuzz(func(t *testing.T, payload []byte, which uint8) {
		all := stores(t)
		s := all[int(which)%len(all)]
		before, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RestoreSnapshot(payload); err != nil {
			if !errors.Is(err, ErrSnapshotFormat) {
				t.Fatalf("%s: error %v does not wrap ErrSnapshotFormat", s.Name(), err)
			}
			if after, _ := s.Snapshot(); !bytes.Equal(after, before) {
				t.Fatalf("%s: a rejected payload changed the store", s.Name())
			}
			return
		}
		p1, err := s.Snapshot()
		if err != nil {
			t.Fatalf("%s: snapshot after restore: %v", s.Name(), err)
		}
		if err := s.RestoreSnapshot(p1); err != nil {
			t.Fatalf("%s: its own snapshot does not restore: %v", s.Name(), err)
		}
		if p2, _ := s.Snapshot(); !bytes.Equal(p1, p2) {
			t.Fatalf("%s: snapshot, restore, snapshot differ", s.Name())
		}
	})
}
