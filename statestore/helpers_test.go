package statestore_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

const maxP = 128

var allGroups = dstl.KeyGroupRange{Start: 0, End: maxP - 1}

// newStorage returns a storage over an in-memory backend that outlives
// "crashes" (a new storage over the same backend).
func newStorage(t testing.TB, b backends.Backend) *dstl.Storage {
	t.Helper()
	cfg := dstl.DefaultConfig("mem://test")
	cfg.JobID = "job"
	cfg.BatchPersistDelay = dstl.NoBatchDelay
	s, err := dstl.New(cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// operator is a checkpointer with one store of each kind.
type operator struct {
	cp  *statestore.Checkpointer
	kv  *statestore.KeyValueStore[string, string]
	win *statestore.WindowStore[string, int64]
	ver *statestore.VersionedStore[string, string]
}

const (
	windowRetention  = 50
	historyRetention = 40
)

func newOperator(t testing.TB, storage *dstl.Storage, name string, kgr dstl.KeyGroupRange, cfg statestore.Config) *operator {
	t.Helper()
	cfg.Operator, cfg.KeyGroups, cfg.MaxParallelism = name, kgr, maxP
	if cfg.MaterializeInterval == 0 {
		cfg.MaterializeInterval = -1 // tests materialise explicitly
	}
	if cfg.MaterializeSize == 0 {
		cfg.MaterializeSize = -1
	}
	cp, err := statestore.NewCheckpointer(storage, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Close() })
	o := &operator{cp: cp}
	opt := statestore.WithMaxParallelism(maxP)
	if o.kv, err = statestore.NewKeyValueStore("kv", cp.Log(), statestore.StringCodec{}, statestore.StringCodec{}, opt); err != nil {
		t.Fatal(err)
	}
	if o.win, err = statestore.NewWindowStore("win", cp.Log(), statestore.StringCodec{}, statestore.Int64Codec{}, windowRetention, opt); err != nil {
		t.Fatal(err)
	}
	if o.ver, err = statestore.NewVersionedStore("ver", cp.Log(), statestore.StringCodec{}, statestore.StringCodec{}, historyRetention, opt); err != nil {
		t.Fatal(err)
	}
	if err := cp.Register(o.kv, o.win, o.ver); err != nil {
		t.Fatal(err)
	}
	return o
}

// workload applies n random changes to every store: puts, overwrites and
// deletions over a small key space, timestamps moving forward with some
// disorder.
type workload struct {
	rng *rand.Rand
	now int64
}

func newWorkload(seed uint64) *workload { return &workload{rng: rand.New(rand.NewPCG(seed, 7))} }

func (w *workload) run(t testing.TB, o *operator, n int) {
	t.Helper()
	for range n {
		key := fmt.Sprintf("key-%03d", w.rng.IntN(150))
		w.now += int64(w.rng.IntN(3))
		ts := w.now - int64(w.rng.IntN(10))
		var err error
		switch r := w.rng.IntN(10); {
		case r < 6:
			if err = o.kv.Put(key, fmt.Sprintf("v%d", w.rng.IntN(1000))); err == nil {
				err = o.win.Put(key, ts/10*10, w.rng.Int64N(100))
			}
			if err == nil {
				err = o.ver.Put(key, fmt.Sprintf("v%d", w.rng.IntN(1000)), ts)
			}
		case r < 8:
			if err = o.kv.Delete(key); err == nil {
				err = o.win.Delete(key, ts/10*10)
			}
			if err == nil {
				err = o.ver.Delete(key, ts)
			}
		default:
			err = o.kv.Put(key+"-extra", strings.Repeat("x", w.rng.IntN(40)))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// state is everything a query can see of the three stores, as text.
type state struct {
	kv  map[string]string
	win map[string]int64
	ver map[string]string
}

func dump(t testing.TB, o *operator) state {
	t.Helper()
	s := state{kv: maps.Collect(o.kv.All()), win: map[string]int64{}, ver: map[string]string{}}
	for w, v := range o.win.All() {
		s.win[fmt.Sprintf("%s@%d", w.Key, w.Start)] = v
	}
	for k, vs := range o.ver.All() {
		s.ver[k] = fmt.Sprint(vs)
		// queries as of a few times see the same
		for _, at := range []int64{o.ver.StreamTime() - historyRetention - 1, o.ver.StreamTime() - 5, o.ver.StreamTime()} {
			v, ts, ok, err := o.ver.GetAsOf(k, at)
			if err != nil {
				t.Fatal(err)
			}
			s.ver[fmt.Sprintf("%s as of %d", k, at)] = fmt.Sprint(v, ts, ok)
		}
	}
	s.ver["stream time"] = fmt.Sprint(o.ver.StreamTime())
	s.win["stream time"] = o.win.StreamTime()
	return s
}

func union(a, b state) state {
	u := state{kv: maps.Clone(a.kv), win: maps.Clone(a.win), ver: maps.Clone(a.ver)}
	maps.Copy(u.kv, b.kv)
	maps.Copy(u.win, b.win)
	maps.Copy(u.ver, b.ver)
	return u
}

func diff(t testing.TB, want, got state) {
	t.Helper()
	cmp(t, "kv", want.kv, got.kv)
	cmp(t, "window", want.win, got.win)
	cmp(t, "versioned", want.ver, got.ver)
}

func cmp[V comparable](t testing.TB, what string, want, got map[string]V) {
	t.Helper()
	var bad []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || g != want[k] {
			bad = append(bad, fmt.Sprintf("%s: want %v, got %v (present %v)", k, want[k], g, ok))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: unexpected %v", k, got[k]))
		}
	}
	if len(bad) > 0 {
		if len(bad) > 10 {
			bad = append(bad[:10], fmt.Sprintf("... %d more", len(bad)-10))
		}
		t.Errorf("%s store differs (%d keys wanted):\n%s", what, len(want), strings.Join(bad, "\n"))
	}
}

// checkpoint takes and completes a checkpoint.
func checkpoint(t testing.TB, o *operator, id int64) *statestore.CheckpointHandle {
	t.Helper()
	ctx := context.Background()
	h, err := o.cp.SnapshotState(ctx, statestore.CheckpointInfo{OperatorID: "op", CheckpointID: id, LastCompletedCheckpointID: id - 1})
	if err != nil {
		t.Fatal(err)
	}
	// What a checkpoint keeps is the handle's encoding.
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back statestore.CheckpointHandle
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if err := o.cp.NotifyCheckpointComplete(ctx, id); err != nil {
		t.Fatal(err)
	}
	return &back
}

func restore(t testing.TB, o *operator, hs ...*statestore.CheckpointHandle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := o.cp.InitializeState(ctx, statestore.CheckpointInfo{OperatorID: "op"}, hs...); err != nil {
		t.Fatal(err)
	}
}
