package statestore

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstl"
)

// borrowingCodec is an identity codec of byte slices that, with nothing to
// append to (dst nil), returns v itself rather than a copy: memory that the
// store does not own.
type borrowingCodec struct{}

func (borrowingCodec) Encode(dst, v []byte) ([]byte, error) {
	if dst == nil {
		return v, nil
	}
	return append(dst, v...), nil
}

func (borrowingCodec) Decode(b []byte) ([]byte, error) { return bytes.Clone(b), nil }

// TestEncodedValueNotOwnedIsNotReused: when a value codec returns memory
// the store does not own (the value itself), neither a logged put nor a
// snapshot encodes the next value into it: every store keeps the values it
// was given, and logs and snapshots them as they were.
func TestEncodedValueNotOwnedIsNotReused(t *testing.T) {
	type store struct {
		s   internalStore
		put func(k string, v []byte) error
		get func(k string) []byte
	}
	newKV := func(t *testing.T) store {
		s, err := NewKeyValueStore("kv", nil, StringCodec{}, borrowingCodec{}, WithMaxParallelism(16))
		if err != nil {
			t.Fatal(err)
		}
		return store{s, func(k string, v []byte) error { return s.Put(k, v) },
			func(k string) []byte { v, _, _ := s.Get(k); return v }}
	}
	newWindow := func(t *testing.T) store {
		s, err := NewWindowStore("w", nil, StringCodec{}, borrowingCodec{}, 1<<40, WithMaxParallelism(16))
		if err != nil {
			t.Fatal(err)
		}
		return store{s, func(k string, v []byte) error { return s.Put(k, 10, v) },
			func(k string) []byte { v, _, _ := s.Get(k, 10); return v }}
	}
	newVersioned := func(t *testing.T) store {
		s, err := NewVersionedStore("v", nil, StringCodec{}, borrowingCodec{}, 1<<40, WithMaxParallelism(16))
		if err != nil {
			t.Fatal(err)
		}
		return store{s, func(k string, v []byte) error { return s.Put(k, v, 10) },
			func(k string) []byte { v, _, _, _ := s.Get(k); return v }}
	}
	for _, tc := range []struct {
		name     string
		newStore func(t *testing.T) store
		logging  bool
	}{
		{"kv/logged", newKV, true},
		{"kv/snapshot", newKV, false},
		{"window/logged", newWindow, true},
		{"window/snapshot", newWindow, false},
		{"versioned/logged", newVersioned, true},
		{"versioned/snapshot", newVersioned, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.newStore(t)
			b := st.s.base()
			if tc.logging {
				b.log = &dstl.Writer{} // logging needs a log; TakeChanges never uses it
				st.s.SetLogging(true)
			}
			want := map[string]string{"a": "first-value", "b": "SECOND", "c": "third-and-longest-value"}
			for _, k := range []string{"a", "b", "c"} {
				if err := st.put(k, []byte(want[k])); err != nil {
					t.Fatal(err)
				}
			}
			if tc.logging {
				var got []string
				for _, c := range st.s.TakeChanges() {
					if c.KeyGroup != dstl.MetaKeyGroup {
						got = append(got, fmt.Sprintf("%s=%s", c.Key, c.Value))
					}
				}
				if g, w := strings.Join(got, " "), "a=first-value b=SECOND c=third-and-longest-value"; g != w {
					t.Errorf("logged %s, want %s", g, w)
				}
			} else {
				payload, err := st.s.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range want {
					if !bytes.Contains(payload, []byte(v)) {
						t.Errorf("snapshot lacks value %q", v)
					}
				}
			}
			for k, w := range want {
				if got := st.get(k); string(got) != w {
					t.Errorf("%s = %q, want %q: a value the store was given was overwritten", k, got, w)
				}
			}
		})
	}
}

// TestScratchBuffersBounded: the buffer a logged put encodes its value in
// is not kept once a large value grew it, and Clear and Close let go of the
// store's scratch buffers and of what a replay gathered.
func TestScratchBuffersBounded(t *testing.T) {
	newStore := func(t *testing.T) *KeyValueStore[string, string] {
		s, err := NewKeyValueStore("kv", nil, StringCodec{}, JSONCodec[string]{}, WithMaxParallelism(16))
		if err != nil {
			t.Fatal(err)
		}
		s.log = &dstl.Writer{}
		s.SetLogging(true)
		return s
	}
	for _, tc := range []struct {
		name string
		do   func(s *KeyValueStore[string, string])
		// keep: vscratch may hold memory (at most maxKeptScratch).
		keep bool
	}{
		{"large value", func(s *KeyValueStore[string, string]) {
			_ = s.Put("big", strings.Repeat("x", 2*maxKeptScratch))
		}, true},
		{"clear", func(s *KeyValueStore[string, string]) { s.Clear() }, false},
		{"close", func(s *KeyValueStore[string, string]) { _ = s.Close() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if err := s.Put("a", "small"); err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			s.scratch = appendDescriptor(s.scratch, s.name, s.kind, s.version)
			s.mu.Unlock()
			if err := s.replayChange(Change{KeyGroup: KeyGroup([]byte("r"), 16), Key: []byte("r"), Value: []byte(`"r"`)}); err != nil {
				t.Fatal(err)
			}
			tc.do(s)
			s.mu.Lock()
			defer s.mu.Unlock()
			if c := cap(s.vscratch); c > maxKeptScratch || (!tc.keep && c > 0) {
				t.Errorf("value scratch of %d bytes kept", c)
			}
			if !tc.keep && (cap(s.scratch) > 0 || s.replay.n > 0 || s.replay.values != nil || s.replay.ops != nil || s.replay.keys != nil) {
				t.Errorf("kept a scratch of %d bytes, %d replayed changes, %d value chunks", cap(s.scratch), s.replay.n, len(s.replay.values))
			}
		})
	}
}

// TestChangeBufResetBounded: resetting the change buffer keeps its memory
// for reuse unless its bytes or its entries grew past maxKeptBuf.
func TestChangeBufResetBounded(t *testing.T) {
	entSize := maxKeptBuf / maxKeptEnts
	for _, tc := range []struct {
		name       string
		data, ents int // capacities
		keep       bool
	}{
		{"small", 1 << 10, 64, true},
		{"at the limit", maxKeptBuf, maxKeptEnts, true},
		{"large data", maxKeptBuf + 1, 64, false},
		{"many entries", 1 << 10, maxKeptEnts + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := changeBuf{data: make([]byte, 1, tc.data), ents: make([]bufEntry, 1, tc.ents)}
			c.reset()
			if c.len() != 0 || len(c.data) != 0 {
				t.Fatalf("reset left %d entries, %d bytes", c.len(), len(c.data))
			}
			kept := cap(c.data) > 0 && cap(c.ents) > 0
			if kept != tc.keep || cap(c.ents)*entSize > maxKeptBuf || cap(c.data) > maxKeptBuf {
				t.Fatalf("after reset: %d bytes and %d entries kept, want kept=%v", cap(c.data), cap(c.ents), tc.keep)
			}
		})
	}
}
