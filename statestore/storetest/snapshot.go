package storetest

import (
	"bytes"
	"fmt"
	"maps"
	"testing"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// half is a key-group range that owns about half of the keys.
var half = dstl.KeyGroupRange{Start: 0, End: maxP/2 - 1}

func owned(k string, kgr dstl.KeyGroupRange, maxP int) bool {
	return kgr.Contains(statestore.KeyGroup([]byte(k), maxP))
}

// checkPayloadErrors checks that damaged payloads and payloads of another
// kind fail with ErrSnapshotFormat, leaving the store as check finds it.
func checkPayloadErrors(t *testing.T, s statestore.Store, good, otherKind []byte, check func()) {
	t.Helper()
	damaged := bytes.Clone(good)
	damaged[len(damaged)/2] ^= 0x40
	for _, tc := range []struct {
		name    string
		payload []byte
	}{
		{"damaged", damaged},
		{"truncated", good[:len(good)-5]},
		{"empty", nil},
		{"of another kind", otherKind},
	} {
		wantErr(t, fmt.Sprintf("RestoreSnapshot of a payload %s", tc.name), s.RestoreSnapshot(tc.payload), statestore.ErrSnapshotFormat)
	}
	check()
}

// otherKind returns the payload of a store that is not of kind k (made by
// a store of this package that no checkpointer holds).
func otherKind(t *testing.T, k statestore.Kind) []byte {
	t.Helper()
	var s statestore.Store
	var err error
	if k == statestore.KindWindow {
		s, err = statestore.NewVersionedStore("other", nil, statestore.StringCodec{}, statestore.StringCodec{}, 10)
	} else {
		s, err = statestore.NewWindowStore("other", nil, statestore.StringCodec{}, statestore.StringCodec{}, 10)
	}
	noErr(t, "store of another kind", err)
	p, err := s.Snapshot()
	noErr(t, "Snapshot of a store of another kind", err)
	return p
}

func runSnapshot(t *testing.T, newConfig func(*testing.T) statestore.Config) {
	str := statestore.StringCodec{}
	// Every subtest: fill a store; Snapshot; restore into a fresh store of
	// the same kind in another process, into one holding other entries
	// (wiped), and into one owning half the key groups; reject damaged
	// payloads; and encode the restored store into the same payload.

	t.Run("KeyValue", func(t *testing.T) {
		rng := newRand(t, "Snapshot/KeyValue")
		h := newHarness(t, newConfig)
		s := newKV(t, h.checkpointer("op", allGroups, maxP), "kv", str, str)
		m := newKVModel[string, string](str)
		empty, err := s.Snapshot()
		noErr(t, "Snapshot of an empty store", err)
		fillKV(t, rng, s, m, 1500, 500)
		p, err := s.Snapshot()
		noErr(t, "Snapshot", err)
		checkKV(t, s, m) // a snapshot changes nothing

		fresh := newKV(t, h.checkpointer("op", allGroups, maxP), "kv", str, str)
		noErr(t, "RestoreSnapshot", fresh.RestoreSnapshot(p))
		checkKV(t, fresh, m)
		checkChanges(t, fresh.TakeChanges(), nil)
		again, err := fresh.Snapshot()
		noErr(t, "Snapshot of the restored store", err)
		if !bytes.Equal(again, p) {
			t.Errorf("the restored store encodes into another payload (%d bytes, %d before)", len(again), len(p))
		}

		other := newKV(t, h.checkpointer("op", allGroups, maxP), "kv", str, str)
		noErr(t, "Put", other.Put("not-in-the-snapshot", "x"))
		noErr(t, "Put", other.Put("key-1", "x"))
		noErr(t, "RestoreSnapshot", other.RestoreSnapshot(p))
		checkKV(t, other, m)
		checkChanges(t, other.TakeChanges(), nil)
		noErr(t, "RestoreSnapshot of an empty store's payload", other.RestoreSnapshot(empty))
		checkKV(t, other, newKVModel[string, string](str))

		part := newKV(t, h.checkpointer("op", half, maxP), "kv", str, str)
		noErr(t, "RestoreSnapshot", part.RestoreSnapshot(p))
		mh := newKVModel[string, string](str)
		mh.m = maps.Clone(m.m)
		maps.DeleteFunc(mh.m, func(k string, _ pair[string, string]) bool { return !owned(k, half, maxP) })
		if len(mh.m) == 0 || len(mh.m) == len(m.m) {
			t.Fatalf("half the key groups own %d of %d keys", len(mh.m), len(m.m))
		}
		checkKV(t, part, mh)

		checkPayloadErrors(t, fresh, p, otherKind(t, statestore.KindKeyValue), func() { checkKV(t, fresh, m) })
	})

	t.Run("Window", func(t *testing.T) {
		const retention = 40
		rng := newRand(t, "Snapshot/Window")
		h := newHarness(t, newConfig)
		s := newWindow(t, h.checkpointer("op", allGroups, maxP), "win", retention)
		m := newWinModel(retention)
		for i := range 1500 {
			winOp(t, rng, s, m, fmt.Sprintf("key-%d", rng.IntN(200)), int64(i/4))
		}
		p, err := s.Snapshot()
		noErr(t, "Snapshot", err)
		checkWindow(t, s, m, nil)

		fresh := newWindow(t, h.checkpointer("op", allGroups, maxP), "win", retention)
		noErr(t, "RestoreSnapshot", fresh.RestoreSnapshot(p))
		checkWindow(t, fresh, m, rng)
		checkChanges(t, fresh.TakeChanges(), nil)
		again, err := fresh.Snapshot()
		noErr(t, "Snapshot of the restored store", err)
		if !bytes.Equal(again, p) {
			t.Errorf("the restored store encodes into another payload (%d bytes, %d before)", len(again), len(p))
		}

		other := newWindow(t, h.checkpointer("op", allGroups, maxP), "win", retention)
		noErr(t, "Put", other.Put("not-in-the-snapshot", m.st+1000, 1))
		noErr(t, "RestoreSnapshot", other.RestoreSnapshot(p))
		checkWindow(t, other, m, rng) // the stream time too is the payload's

		part := newWindow(t, h.checkpointer("op", half, maxP), "win", retention)
		noErr(t, "RestoreSnapshot", part.RestoreSnapshot(p))
		mh := m.clone()
		maps.DeleteFunc(mh.w, func(k string, _ map[int64]int64) bool { return !owned(k, half, maxP) })
		checkWindow(t, part, mh, rng)

		checkPayloadErrors(t, fresh, p, otherKind(t, statestore.KindWindow), func() { checkWindow(t, fresh, m, nil) })
	})

	t.Run("Versioned", func(t *testing.T) {
		const retention = 30
		rng := newRand(t, "Snapshot/Versioned")
		h := newHarness(t, newConfig)
		s := newVersioned(t, h.checkpointer("op", allGroups, maxP), "ver", retention)
		m := newVerModel(retention)
		for i := range 1500 {
			verOp(t, rng, s, m, fmt.Sprintf("key-%d", rng.IntN(200)), int64(i/4))
		}
		p, err := s.Snapshot()
		noErr(t, "Snapshot", err)
		checkVersioned(t, s, m)

		fresh := newVersioned(t, h.checkpointer("op", allGroups, maxP), "ver", retention)
		noErr(t, "RestoreSnapshot", fresh.RestoreSnapshot(p))
		checkVersioned(t, fresh, m)
		checkChanges(t, fresh.TakeChanges(), nil)
		again, err := fresh.Snapshot()
		noErr(t, "Snapshot of the restored store", err)
		if !bytes.Equal(again, p) {
			t.Errorf("the restored store encodes into another payload (%d bytes, %d before)", len(again), len(p))
		}

		other := newVersioned(t, h.checkpointer("op", allGroups, maxP), "ver", retention)
		noErr(t, "Put", other.Put("not-in-the-snapshot", "x", m.st+1000))
		noErr(t, "RestoreSnapshot", other.RestoreSnapshot(p))
		checkVersioned(t, other, m)

		part := newVersioned(t, h.checkpointer("op", half, maxP), "ver", retention)
		noErr(t, "RestoreSnapshot", part.RestoreSnapshot(p))
		mh := m.clone()
		maps.DeleteFunc(mh.v, func(k string, _ []version) bool { return !owned(k, half, maxP) })
		checkVersioned(t, part, mh)

		checkPayloadErrors(t, fresh, p, otherKind(t, statestore.KindVersioned), func() { checkVersioned(t, fresh, m) })
	})
}
