package statestore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
)

func TestKeyGroupIsStable(t *testing.T) {
	// MurmurHash3_x86_32 reference values, seed 0, then modulo.
	for _, tc := range []struct {
		key  string
		hash uint32
	}{
		{"", 0},
		{"hello", 0x248bfa47},
		{"The quick brown fox jumps over the lazy dog", 0x2e4ff723},
	} {
		for _, p := range []int{1, 128, 32768} {
			if got, want := statestore.KeyGroup([]byte(tc.key), p), int(tc.hash%uint32(p)); got != want {
				t.Errorf("KeyGroup(%q, %d) = %d, want %d", tc.key, p, got, want)
			}
		}
	}
}

func TestKeyValueStore(t *testing.T) {
	kv, err := statestore.NewKeyValueStore("kv", nil, statestore.StringCodec{}, statestore.Int64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []string{"b/2", "a/1", "b/1", "c", "a/2", "b/3"} {
		if err := kv.Put(k, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Delete("b/3"); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := kv.Get("a/1"); !ok || v != 1 {
		t.Errorf("Get(a/1) = %d, %v", v, ok)
	}
	if _, ok, _ := kv.Get("b/3"); ok {
		t.Error("deleted key found")
	}
	keys := func(seq func(func(string, int64) bool)) []string {
		return slices.Collect(func(y func(string) bool) { seq(func(k string, _ int64) bool { return y(k) }) })
	}
	for _, tc := range []struct {
		name string
		got  []string
		want []string
	}{
		{"all", keys(kv.All()), []string{"a/1", "a/2", "b/1", "b/2", "c"}},
		{"range", must(kv.Range("a/2", "c")), []string{"a/2", "b/1", "b/2"}},
		{"prefix", must(kv.PrefixScan("b/")), []string{"b/1", "b/2"}},
		{"empty prefix", must(kv.PrefixScan("x")), nil},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	// The iteration works on a view: changing the store in the loop is fine.
	for k := range kv.All() {
		if err := kv.Delete(k); err != nil {
			t.Fatal(err)
		}
	}
	if kv.Len() != 0 {
		t.Errorf("%d keys left", kv.Len())
	}
	if kv.Logging() || len(kv.TakeChanges()) != 0 {
		t.Error("a store without a log logs")
	}
}

func must(seq func(func(string, int64) bool), err error) []string {
	if err != nil {
		panic(err)
	}
	var ks []string
	seq(func(k string, _ int64) bool { ks = append(ks, k); return true })
	return ks
}

func TestIntCodecsPreserveOrder(t *testing.T) {
	vals := []int64{-1 << 63, -5, -1, 0, 1, 7, 1<<63 - 1}
	var prev []byte
	for i, v := range vals {
		b, _ := statestore.Int64Codec{}.Encode(nil, v)
		if back, _ := (statestore.Int64Codec{}).Decode(b); back != v {
			t.Errorf("%d decodes to %d", v, back)
		}
		if i > 0 && string(prev) >= string(b) {
			t.Errorf("encoding of %d does not sort after %d", v, vals[i-1])
		}
		prev = b
	}
}

func TestWindowStore(t *testing.T) {
	ws, err := statestore.NewWindowStore("w", nil, statestore.StringCodec{}, statestore.StringCodec{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		k     string
		start int64
	}{{"a", 0}, {"a", 50}, {"b", 50}, {"a", 100}, {"a", 150}} {
		if err := ws.Put(p.k, p.start, p.k+"@"+string(rune('0'+p.start/50))); err != nil {
			t.Fatal(err)
		}
	}
	// stream time 150, retention 100: windows from 51 on are kept.
	if _, ok, _ := ws.Get("a", 0); ok {
		t.Error("window a@0 not expired")
	}
	if _, ok, _ := ws.Get("a", 50); ok {
		t.Error("window a@50 not expired")
	}
	seq, err := ws.Fetch("a", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Collect(maps.Keys(maps.Collect(seq))); len(got) != 2 {
		t.Errorf("fetch a: windows %v", got)
	}
	seq, _ = ws.Fetch("a", 101, 149)
	if n := len(maps.Collect(seq)); n != 0 {
		t.Errorf("fetch a in [101, 149]: %d windows", n)
	}
	if err := ws.Put("c", 10, "late"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ws.Get("c", 10); ok {
		t.Error("a put into an expired window was kept")
	}
	if ws.Len() != 2 || ws.StreamTime() != 150 {
		t.Errorf("%d windows, stream time %d", ws.Len(), ws.StreamTime())
	}
}

func TestVersionedStore(t *testing.T) {
	vs, err := statestore.NewVersionedStore("v", nil, statestore.StringCodec{}, statestore.StringCodec{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	put := func(v string, ts int64) {
		if err := vs.Put("k", v, ts); err != nil {
			t.Fatal(err)
		}
	}
	put("a", 1)
	put("c", 20)
	put("b", 10) // out of order, within the history retention
	if err := vs.Delete("k", 30); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		asOf int64
		want string
		ok   bool
	}{
		{5, "", false},  // older than stream time 30 - retention 10
		{20, "c", true}, // exactly at a version
		{25, "c", true},
		{30, "", false}, // deleted
		{1000, "", false},
	} {
		v, _, ok, err := vs.GetAsOf("k", tc.asOf)
		if err != nil || ok != tc.ok || v != tc.want {
			t.Errorf("as of %d: %q, %v, %v; want %q, %v", tc.asOf, v, ok, err, tc.want, tc.ok)
		}
	}
	put("x", 25) // replaces nothing: a new version within the retention
	put("y", 15) // older than the retention reaches: dropped
	if v, _, ok, _ := vs.GetAsOf("k", 24); !ok || v != "c" {
		t.Errorf("as of 24: %q, %v after a dropped put", v, ok)
	}
	// Reachable from the horizon 20 on: c@20, x@25, deleted@30.
	h, _ := vs.History("k")
	if len(h) != 3 || h[0].Timestamp != 20 || h[1].Value != "x" || !h[2].Deleted {
		t.Errorf("history %+v", h)
	}
}

func TestSnapshotPayloadRejected(t *testing.T) {
	kv, _ := statestore.NewKeyValueStore("s", nil, statestore.StringCodec{}, statestore.StringCodec{})
	ws, _ := statestore.NewWindowStore("s", nil, statestore.StringCodec{}, statestore.StringCodec{}, 10)
	vs, _ := statestore.NewVersionedStore("s", nil, statestore.StringCodec{}, statestore.StringCodec{}, 10)
	if err := kv.Put("a", "1"); err != nil {
		t.Fatal(err)
	}
	if err := ws.Put("a", 1, "1"); err != nil {
		t.Fatal(err)
	}
	if err := vs.Put("a", "1", 1); err != nil {
		t.Fatal(err)
	}
	payload := map[string][]byte{}
	for name, s := range map[string]statestore.Store{"kv": kv, "window": ws, "versioned": vs} {
		p, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		payload[name] = p
	}
	// reversion rewrites the payload's version (the byte after magic and
	// kind) and its checksum, so only the version is wrong.
	reversion := func(p []byte, kindLen int) []byte {
		q := slices.Clone(p[:len(p)-4])
		q[4+1+kindLen] = 9
		return binary.LittleEndian.AppendUint32(q, crc32.Checksum(q, crc32.MakeTable(crc32.Castagnoli)))
	}
	damaged := slices.Clone(payload["kv"])
	damaged[len(damaged)/2] ^= 0xff
	for _, tc := range []struct {
		name    string
		store   statestore.Store
		payload []byte
		want    string
	}{
		{"window payload into kv", kv, payload["window"], `payload of a "window" store, not of a "kv" store`},
		{"kv payload into window", ws, payload["kv"], `payload of a "kv" store, not of a "window" store`},
		{"kv payload into versioned", vs, payload["kv"], `not of a "versioned" store`},
		{"kv version 9", kv, reversion(payload["kv"], 2), "version 9"},
		{"window version 9", ws, reversion(payload["window"], 6), "version 9"},
		{"versioned version 9", vs, reversion(payload["versioned"], 9), "version 9"},
		{"damaged", kv, damaged, "checksum"},
		{"not a payload", kv, []byte("hello, world"), "bad magic"},
		{"empty", vs, nil, "bad magic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.store.RestoreSnapshot(tc.payload)
			if !errors.Is(err, statestore.ErrSnapshotFormat) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrSnapshotFormat saying %q", err, tc.want)
			}
			// The store is as it was.
			p, _ := tc.store.Snapshot()
			if want := payload[map[statestore.Kind]string{statestore.KindKeyValue: "kv", statestore.KindWindow: "window", statestore.KindVersioned: "versioned"}[tc.store.Kind()]]; !slices.Equal(p, want) {
				t.Error("a rejected payload changed the store")
			}
		})
	}
	// And the right payload goes back in, wiping first.
	if err := kv.Put("b", "2"); err != nil {
		t.Fatal(err)
	}
	if err := kv.RestoreSnapshot(payload["kv"]); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := kv.Get("b"); ok || kv.Len() != 1 {
		t.Error("RestoreSnapshot did not wipe the store")
	}
}

func TestCheckpointHandleEncoding(t *testing.T) {
	b := dstltest.NewBackend()
	o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
	newWorkload(2).run(t, o, 50)
	if err := o.cp.Materialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	newWorkload(3).run(t, o, 50)
	h := checkpoint(t, o, 1)
	enc, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back statestore.CheckpointHandle
	if err := back.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	again, _ := back.MarshalBinary()
	if !slices.Equal(enc, again) || back.Operator != "op-0" || len(back.Snapshots) != 1 || len(back.Logs) != 1 || back.KeyGroups != allGroups {
		t.Fatalf("round trip: %+v", back)
	}
	for i := range enc {
		bad := slices.Clone(enc)
		bad[i] ^= 0x10
		if err := back.UnmarshalBinary(bad); !errors.Is(err, statestore.ErrInvalidCheckpointHandle) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if err := back.UnmarshalBinary(enc[:len(enc)-1]); !errors.Is(err, statestore.ErrInvalidCheckpointHandle) {
		t.Fatalf("truncated: %v", err)
	}
}

// TestCheckpointHandleVersions: a handle whose snapshots name files is
// written in version 2 and reads back with them; one without files is
// written in version 1, which builds that read version 1 only still read.
func TestCheckpointHandleVersions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   []string
		version byte
	}{
		{"in memory", nil, 1},
		{"disk-backed", []string{"job/statestore/op/a.sst", "job/statestore/op-0/b.sst"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := statestore.CheckpointHandle{CheckpointID: 3, Operator: "op", KeyGroups: allGroups, MaxParallelism: statestore.DefaultMaxParallelism,
				Snapshots: []statestore.SnapshotRef{{Object: "job/statestore/op/m.snap", Size: 12, Files: tc.files}}}
			enc, err := h.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if enc[4] != tc.version {
				t.Errorf("version byte %d, want %d", enc[4], tc.version)
			}
			var back statestore.CheckpointHandle
			if err := back.UnmarshalBinary(enc); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(back.Snapshots[0].Files, tc.files) || back.Snapshots[0].Size != 12 {
				t.Errorf("round trip: %+v", back.Snapshots)
			}
			bad := slices.Clone(enc)
			bad[4] = 3
			if err := back.UnmarshalBinary(bad); !errors.Is(err, statestore.ErrInvalidCheckpointHandle) || !strings.Contains(err.Error(), "version 3") {
				t.Errorf("version 3: %v", err)
			}
		})
	}
}

func TestStoreRejectsForeignKeys(t *testing.T) {
	kgr := dstl.KeyGroupRange{Start: 0, End: 63}
	kv, err := statestore.NewKeyValueStore("kv", nil, statestore.StringCodec{}, statestore.StringCodec{}, statestore.WithKeyGroups(kgr))
	if err != nil {
		t.Fatal(err)
	}
	var foreign string
	for i := 0; foreign == ""; i++ {
		k := string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if !kgr.Contains(statestore.KeyGroup([]byte(k), statestore.DefaultMaxParallelism)) {
			foreign = k
		}
	}
	if err := kv.Put(foreign, "v"); !errors.Is(err, dstl.ErrKeyGroup) {
		t.Errorf("put of a key of another key group: %v", err)
	}
}

// TestCodecErrorsAreFormatErrors: a payload or a logged change whose key or
// value the store's codec rejects is a format error (ErrSnapshotFormat,
// ErrLogFormat), and a rejected payload leaves the store as it was.
func TestCodecErrorsAreFormatErrors(t *testing.T) {
	// Stores of strings write what stores of int64 cannot read (not 8 bytes).
	kvS, _ := statestore.NewKeyValueStore("s", nil, statestore.StringCodec{}, statestore.StringCodec{})
	wsS, _ := statestore.NewWindowStore("s", nil, statestore.StringCodec{}, statestore.StringCodec{}, 10)
	vsS, _ := statestore.NewVersionedStore("s", nil, statestore.StringCodec{}, statestore.StringCodec{}, 10)
	if err := kvS.Put("a", "x"); err != nil {
		t.Fatal(err)
	}
	if err := wsS.Put("a", 1, "x"); err != nil {
		t.Fatal(err)
	}
	if err := vsS.Put("a", "x", 1); err != nil {
		t.Fatal(err)
	}
	kvI, _ := statestore.NewKeyValueStore("s", nil, statestore.StringCodec{}, statestore.Int64Codec{})
	wsI, _ := statestore.NewWindowStore("s", nil, statestore.StringCodec{}, statestore.Int64Codec{}, 10)
	vsI, _ := statestore.NewVersionedStore("s", nil, statestore.StringCodec{}, statestore.Int64Codec{}, 10)
	kvK, _ := statestore.NewKeyValueStore("s", nil, statestore.Int64Codec{}, statestore.StringCodec{})
	bad := statestore.Change{KeyGroup: statestore.KeyGroup([]byte("a"), statestore.DefaultMaxParallelism), Key: []byte("a"),
		Value: []byte("x"), Timestamp: 1, HasTimestamp: true}
	for _, tc := range []struct {
		name     string
		from, to statestore.Store
	}{
		{"kv value", kvS, kvI},
		{"kv key", kvS, kvK},
		{"window value", wsS, wsI},
		{"versioned value", vsS, vsI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.from.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			before, _ := tc.to.Snapshot()
			if err := tc.to.RestoreSnapshot(p); !errors.Is(err, statestore.ErrSnapshotFormat) {
				t.Errorf("RestoreSnapshot: %v, want ErrSnapshotFormat", err)
			}
			if after, _ := tc.to.Snapshot(); !slices.Equal(before, after) {
				t.Error("a rejected payload changed the store")
			}
			if err := tc.to.ApplyChange(bad); !errors.Is(err, statestore.ErrLogFormat) {
				t.Errorf("ApplyChange: %v, want ErrLogFormat", err)
			}
		})
	}
}

// TestCheckpointHandleObjects: Objects names the snapshot objects and the
// log handles' objects, each once and sorted, never a local copy.
func TestCheckpointHandleObjects(t *testing.T) {
	log := func(objects ...string) dstl.Handle {
		h := dstl.Handle{StorageID: "mem", KeyGroups: allGroups}
		for i, o := range objects {
			h.Entries = append(h.Entries, dstl.HandleEntry{Object: o, Length: 1, SequenceNumber: dstl.SequenceNumber(i)})
		}
		return h
	}
	local := log("local/copy.dstl")
	for _, tc := range []struct {
		name string
		h    statestore.CheckpointHandle
		want []string
	}{
		{"empty", statestore.CheckpointHandle{}, nil},
		{"snapshot only", statestore.CheckpointHandle{Snapshots: []statestore.SnapshotRef{{Object: "job/statestore/op/s.snap"}}},
			[]string{"job/statestore/op/s.snap"}},
		{"log entries sharing objects", statestore.CheckpointHandle{Logs: []statestore.LogRef{{Remote: log("job/b.dstl", "job/a.dstl", "job/b.dstl")}}},
			[]string{"job/a.dstl", "job/b.dstl"}},
		{"restored snapshots and logs, local copies", statestore.CheckpointHandle{
			Snapshots: []statestore.SnapshotRef{{Object: "job/statestore/op-1/y.snap"}, {Object: "job/statestore/op-0/x.snap"}},
			Logs:      []statestore.LogRef{{Remote: log("job/c.dstl")}, {Remote: log("job/c.dstl", "job/d.dstl"), Local: &local}},
		}, []string{"job/c.dstl", "job/d.dstl", "job/statestore/op-0/x.snap", "job/statestore/op-1/y.snap"}},
		{"disk-backed snapshot files, shared", statestore.CheckpointHandle{
			Snapshots: []statestore.SnapshotRef{{Object: "job/statestore/op/m.snap", Files: []string{"job/statestore/op-0/b.sst", "job/statestore/op/a.sst", "job/statestore/op-0/b.sst"}}},
		}, []string{"job/statestore/op-0/b.sst", "job/statestore/op/a.sst", "job/statestore/op/m.snap"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.h.Objects(); !slices.Equal(got, tc.want) {
				t.Errorf("Objects() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCheckpointHandleObjectsSuffice: a checkpoint restores from the
// objects its handle's Objects names alone, with every other object of the
// job deleted.
func TestCheckpointHandleObjectsSuffice(t *testing.T) {
	ctx := context.Background()
	b := dstltest.NewBackend()
	o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{KeepSnapshots: true})
	w := newWorkload(5)
	for id := int64(1); id <= 3; id++ {
		w.run(t, o, 200)
		if id == 2 {
			if err := o.cp.Materialize(ctx); err != nil {
				t.Fatal(err)
			}
			w.run(t, o, 100)
		}
		checkpoint(t, o, id)
	}
	w.run(t, o, 100)
	h := checkpoint(t, o, 4)
	want := dump(t, o)
	o.cp.Close()
	keep := map[string]bool{}
	for _, name := range h.Objects() {
		if _, ok := b.ObjectBytes(name); !ok {
			t.Fatalf("Objects names %q, which is not on the backend", name)
		}
		keep[name] = true
	}
	deleted := 0
	for _, obj := range b.Objects() {
		if !keep[obj.Name] {
			if err := b.Delete(ctx, obj.Name); err != nil {
				t.Fatal(err)
			}
			deleted++
		}
	}
	if deleted == 0 {
		t.Fatal("nothing to delete: the test proves nothing")
	}
	r := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
	restore(t, r, h)
	diff(t, want, dump(t, r))
}
