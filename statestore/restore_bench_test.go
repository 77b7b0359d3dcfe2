package statestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

// The benchmark of what a restore does with the log once it is read:
// decoding this package's change entries and applying them to the stores,
// as InitializeState does for every change the reader yields. The changes
// are read from the log once, before the timer starts; the reading itself
// (fetching, decompressing, checking change sets) is the dstl package's
// and is not measured here. Run it with
//
//	go test -run='^$' -bench='^BenchmarkRestoreApply$' -benchmem -count=6 ./statestore | tee restore.txt
const (
	applyKeyLen   = 16
	applyValueLen = 80 // with the entry's header, a logged put is about 100 bytes
)

// BenchmarkRestoreApply replays a log of puts (16-byte keys, 80-byte
// values, about 100 bytes logged each) over a working set of keys, each key
// put several times, written through a Checkpointer over several
// checkpoints, into emptied stores. Bytes/s are the logged bytes of the
// changes replayed.
func BenchmarkRestoreApply(b *testing.B) {
	for _, tc := range []struct {
		store         string
		keys, changes int
	}{
		{"kv", 1 << 16, 1 << 19},
		{"kv", 1 << 18, 1 << 19},
		{"window", 1 << 16, 1 << 19},
		{"versioned", 1 << 16, 1 << 19},
	} {
		b.Run(fmt.Sprintf("store=%s/keys=%d/changes=%d", tc.store, tc.keys, tc.changes), func(b *testing.B) {
			benchRestoreApply(b, tc.store, tc.keys, tc.changes)
		})
	}
}

// applyFixture is a checkpointer with one store of the kind benchmarked,
// and the changes of its log, read back.
type applyFixture struct {
	cp      *Checkpointer
	len     func() int
	changes []dstl.Change
	logged  int64
	keys    int // the keys (or windows, or keys with versions) the log leaves
}

func newApplyFixture(b *testing.B, store string, keys, changes int) *applyFixture {
	ctx := context.Background()
	cfg := dstl.DefaultConfig("mem://bench")
	cfg.JobID = "job"
	cfg.BatchPersistDelay = dstl.NoBatchDelay
	storage, err := dstl.New(cfg, dstltest.NewBackend())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { storage.Close() })
	const maxP = 128
	kgr := dstl.KeyGroupRange{Start: 0, End: maxP - 1}
	cp, err := NewCheckpointer(storage, Config{Operator: "bench", KeyGroups: kgr, MaxParallelism: maxP, MaterializeInterval: -1, MaterializeSize: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cp.Close() })
	f := &applyFixture{cp: cp}
	opt := WithMaxParallelism(maxP)
	var put func(i int, k, v string) error
	switch store {
	case "kv":
		kv, err := NewKeyValueStore("kv", cp.Log(), StringCodec{}, StringCodec{}, opt)
		if err != nil {
			b.Fatal(err)
		}
		put = func(_ int, k, v string) error { return kv.Put(k, v) }
		f.len = kv.Len
		err = cp.Register(kv)
	case "window":
		// Windows of 1024 puts, ten of them kept: each key has one
		// window or two live.
		win, err := NewWindowStore("win", cp.Log(), StringCodec{}, StringCodec{}, 10*1024, opt)
		if err != nil {
			b.Fatal(err)
		}
		put = func(i int, k, v string) error { return win.Put(k, int64(i/1024*1024), v) }
		f.len = win.Len
		err = cp.Register(win)
	case "versioned":
		ver, err := NewVersionedStore("ver", cp.Log(), StringCodec{}, StringCodec{}, int64(changes/4), opt)
		if err != nil {
			b.Fatal(err)
		}
		put = func(i int, k, v string) error { return ver.Put(k, v, int64(i)) }
		f.len = ver.Len
		err = cp.Register(ver)
	}
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	keyList := make([]string, keys)
	for i := range keyList {
		keyList[i] = fmt.Sprintf("k%0*d", applyKeyLen-1, i)
	}
	value := make([]byte, applyValueLen)
	var h *CheckpointHandle
	for i := range changes {
		for j := range value {
			value[j] = byte(rng.Uint32())
		}
		if err := put(i, keyList[rng.IntN(keys)], string(value)); err != nil {
			b.Fatal(err)
		}
		if i%(changes/4) == changes/4-1 {
			// A checkpoint a quarter of the way: the log of the last
			// holds every change (no snapshot is taken).
			id := int64(i/(changes/4) + 1)
			if h, err = cp.SnapshotState(ctx, CheckpointInfo{OperatorID: "op", CheckpointID: id, LastCompletedCheckpointID: id - 1}); err != nil {
				b.Fatal(err)
			}
			if err := cp.NotifyCheckpointComplete(ctx, id); err != nil {
				b.Fatal(err)
			}
		} else if i&1023 == 1023 {
			if err := cp.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	f.keys = f.len()
	if len(h.Snapshots) != 0 {
		b.Fatalf("the checkpoint has %d snapshots", len(h.Snapshots))
	}
	r, err := storage.NewReader(kgr)
	if err != nil {
		b.Fatal(err)
	}
	var data []byte
	var ends []int
	for _, l := range h.Logs {
		err := r.Read(ctx, l.Remote, func(ch dstl.Change) error {
			data = append(data, ch.Data...)
			ends = append(ends, len(data))
			f.changes = append(f.changes, dstl.Change{KeyGroup: ch.KeyGroup, SequenceNumber: ch.SequenceNumber})
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	start := 0
	for i, end := range ends {
		f.changes[i].Data = data[start:end:end]
		start = end
	}
	f.logged = int64(len(data))
	return f
}

// replay empties the stores and applies the changes, as InitializeState
// does.
func (f *applyFixture) replay() error {
	var rep RestoreReport
	for _, s := range f.cp.stores {
		s.Clear()
		s.SetLogging(false)
	}
	for _, ch := range f.changes {
		if err := f.cp.replayChange(ch, &rep); err != nil {
			return err
		}
	}
	if err := endReplay(f.cp.stores); err != nil {
		return err
	}
	for _, s := range f.cp.stores {
		s.SetLogging(true)
	}
	return nil
}

func benchRestoreApply(b *testing.B, store string, keys, changes int) {
	f := newApplyFixture(b, store, keys, changes)
	b.SetBytes(f.logged)
	b.ReportMetric(float64(len(f.changes)), "changes/op")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := f.replay(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if n := f.len(); n != f.keys {
		b.Fatalf("%d entries restored, %d written", n, f.keys)
	}
}
