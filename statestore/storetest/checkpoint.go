package storetest

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// The retentions of the operators' window and versioned stores.
const (
	opWindowRetention  = 120
	opHistoryRetention = 40
)

// instance is an operator instance: a checkpointer with a store of each
// kind.
type instance struct {
	name string
	kgr  dstl.KeyGroupRange
	maxP int
	cp   *statestore.Checkpointer
	kv   *statestore.KeyValueStore[string, string]
	win  *statestore.WindowStore[string, int64]
	ver  *statestore.VersionedStore[string, string]
}

// model is what an instance's stores must hold.
type model struct {
	kv  map[string]string
	win *winModel
	ver *verModel
}

func newModel() *model {
	return &model{kv: map[string]string{}, win: newWinModel(opWindowRetention), ver: newVerModel(opHistoryRetention)}
}

func (m *model) clone() *model {
	return &model{kv: maps.Clone(m.kv), win: m.win.clone(), ver: m.ver.clone()}
}

// restored returns what an instance owning kgr holds once restored from
// the checkpoints whose models are ms (of instances owning the ranges
// kgrs): the keys of kgr, and the largest stream time of the checkpoints
// that share a key group with it.
func restored(kgr dstl.KeyGroupRange, maxP int, ms []*model, kgrs []dstl.KeyGroupRange) *model {
	r := newModel()
	for i, m := range ms {
		if kgrs[i].End < kgr.Start || kgrs[i].Start > kgr.End {
			continue
		}
		mine := func(k string) bool { return owned(k, kgr, maxP) }
		for k, v := range m.kv {
			if mine(k) {
				r.kv[k] = v
			}
		}
		for k, ws := range m.win.w {
			if mine(k) {
				r.win.w[k] = maps.Clone(ws)
			}
		}
		for k, vs := range m.ver.v {
			if mine(k) {
				r.ver.v[k] = slices.Clone(vs)
			}
		}
		r.win.st = max(r.win.st, m.win.st)
		r.ver.st = max(r.ver.st, m.ver.st)
	}
	// Windows expired at the merged stream time are dropped.
	st := r.win.st
	r.win.st = math.MinInt64
	r.win.advance(st)
	return r
}

// instance opens an operator instance in a new process.
func (h *harness) instance(name string, kgr dstl.KeyGroupRange, maxP int) *instance {
	h.t.Helper()
	cp := h.checkpointer(name, kgr, maxP)
	return &instance{name: name, kgr: kgr, maxP: maxP, cp: cp,
		kv:  newKV(h.t, cp, "kv", statestore.StringCodec{}, statestore.StringCodec{}),
		win: newWindow(h.t, cp, "win", opWindowRetention),
		ver: newVersioned(h.t, cp, "ver", opHistoryRetention),
	}
}

// check checks every store of o against m.
func (o *instance) check(t *testing.T, m *model, rng *rand.Rand) {
	t.Helper()
	km := newKVModel[string, string](statestore.StringCodec{})
	for k, v := range m.kv {
		km.put(k, v)
	}
	checkKV(t, o.kv, km)
	checkWindow(t, o.win, m.win, rng)
	checkVersioned(t, o.ver, m.ver)
}

// checkpoint takes and completes checkpoint id, and returns its handle as
// it would be kept (encoded, decoded).
func (o *instance) checkpoint(t *testing.T, id int64) *statestore.CheckpointHandle {
	t.Helper()
	h, err := o.cp.SnapshotState(ctx(t), statestore.CheckpointInfo{OperatorID: "op", CheckpointID: id, LastCompletedCheckpointID: id - 1})
	noErr(t, fmt.Sprintf("instance %s: checkpoint %d", o.name, id), err)
	b, err := h.MarshalBinary()
	noErr(t, "MarshalBinary", err)
	var back statestore.CheckpointHandle
	noErr(t, "UnmarshalBinary", back.UnmarshalBinary(b))
	noErr(t, fmt.Sprintf("instance %s: complete checkpoint %d", o.name, id), o.cp.NotifyCheckpointComplete(ctx(t), id))
	return &back
}

func (o *instance) restore(t *testing.T, id int64, hs ...*statestore.CheckpointHandle) {
	t.Helper()
	err := o.cp.InitializeState(ctx(t), statestore.CheckpointInfo{OperatorID: "op", CheckpointID: id, LastCompletedCheckpointID: id}, hs...)
	noErr(t, fmt.Sprintf("instance %s: restore checkpoint %d", o.name, id), err)
}

func (o *instance) materialize(t *testing.T) {
	t.Helper()
	noErr(t, fmt.Sprintf("instance %s: Materialize", o.name), o.cp.Materialize(ctx(t)))
}

// close closes the instance's checkpointer: the process ends.
func (o *instance) close(t *testing.T) {
	t.Helper()
	closeCheckpointer(t, o.cp)
}

// workload applies n random changes to the instances, each change to the
// instance owning its key, and to their models. Time moves on by one every
// eight changes on average; instance i lags lags[i] behind, so that the
// stream times of instances differ (by less than the window retention).
// Each change's time is its instance's time with some disorder.
type workload struct {
	rng  *rand.Rand
	keys int
	now  int64
	lags []int64
}

func (w *workload) run(t *testing.T, insts []*instance, ms []*model, n int) {
	t.Helper()
	for range n {
		k := fmt.Sprintf("key-%03d", w.rng.IntN(w.keys))
		i := slices.IndexFunc(insts, func(o *instance) bool { return owned(k, o.kgr, o.maxP) })
		if i < 0 {
			continue
		}
		o, m := insts[i], ms[i]
		if w.rng.IntN(8) == 0 {
			w.now++
		}
		now := w.now
		if i < len(w.lags) {
			now -= w.lags[i]
		}
		switch r := w.rng.IntN(10); {
		case r < 2:
			v := strings.Repeat("v", w.rng.IntN(8)) + fmt.Sprint(w.rng.IntN(1000))
			noErr(t, "Put", o.kv.Put(k, v))
			m.kv[k] = v
		case r < 3:
			noErr(t, "Delete", o.kv.Delete(k))
			delete(m.kv, k)
		case r < 7:
			winOp(t, w.rng, o.win, m.win, k, now)
		default:
			verOp(t, w.rng, o.ver, m.ver, k, now)
		}
	}
}

func runCheckpoint(t *testing.T, newConfig func(*testing.T) statestore.Config) {
	const keys = 300

	t.Run("Restore", func(t *testing.T) {
		rng := newRand(t, "Checkpoint/Restore")
		h := newHarness(t, newConfig)
		w := &workload{rng: rng, keys: keys}
		o, m := h.instance("op-0", allGroups, maxP), newModel()
		w.run(t, []*instance{o}, []*model{m}, 1500)
		h1 := o.checkpoint(t, 1)
		want := m.clone()
		w.run(t, []*instance{o}, []*model{m}, 500) // lost with the process
		o.close(t)

		r := h.instance("op-0", allGroups, maxP)
		r.restore(t, 1, h1)
		r.check(t, want, rng)
		// A restored instance goes on, checkpoints, and restores again.
		m = want
		w.run(t, []*instance{r}, []*model{m}, 800)
		h2 := r.checkpoint(t, 2)
		want = m.clone()
		w.run(t, []*instance{r}, []*model{m}, 200)
		r.close(t)
		r2 := h.instance("op-0", allGroups, maxP)
		r2.restore(t, 2, h2)
		r2.check(t, want, rng)
	})

	t.Run("Materialize", func(t *testing.T) {
		rng := newRand(t, "Checkpoint/Materialize")
		h := newHarness(t, newConfig)
		w := &workload{rng: rng, keys: keys}
		o, m := h.instance("op-0", allGroups, maxP), newModel()
		w.run(t, []*instance{o}, []*model{m}, 1000)
		o.checkpoint(t, 1)
		w.run(t, []*instance{o}, []*model{m}, 600)
		o.materialize(t)
		w.run(t, []*instance{o}, []*model{m}, 600)
		h2 := o.checkpoint(t, 2)
		if len(h2.Snapshots) != 1 {
			t.Fatalf("the handle after a materialisation names %d snapshots, want 1", len(h2.Snapshots))
		}
		want := m.clone()
		w.run(t, []*instance{o}, []*model{m}, 300)
		o.materialize(t) // after the checkpoint: not in it
		o.close(t)

		r := h.instance("op-0", allGroups, maxP)
		r.restore(t, 2, h2)
		r.check(t, want, rng)
		// Changes after the restore, a materialisation, more changes, a
		// checkpoint: restore again.
		m = want
		w.run(t, []*instance{r}, []*model{m}, 500)
		r.materialize(t)
		w.run(t, []*instance{r}, []*model{m}, 500)
		h3 := r.checkpoint(t, 3)
		want = m.clone()
		r.close(t)
		r2 := h.instance("op-0", allGroups, maxP)
		r2.restore(t, 3, h3)
		r2.check(t, want, rng)
	})

	t.Run("SeveralMaterializations", func(t *testing.T) {
		rng := newRand(t, "Checkpoint/SeveralMaterializations")
		h := newHarness(t, newConfig)
		w := &workload{rng: rng, keys: keys}
		o, m := h.instance("op-0", allGroups, maxP), newModel()
		var hs []*statestore.CheckpointHandle
		var wants []*model
		for i := range 4 {
			w.run(t, []*instance{o}, []*model{m}, 500)
			o.materialize(t)
			if i%2 == 1 {
				hs = append(hs, o.checkpoint(t, int64(len(hs)+1)))
				wants = append(wants, m.clone())
			}
		}
		w.run(t, []*instance{o}, []*model{m}, 200)
		hs = append(hs, o.checkpoint(t, int64(len(hs)+1)))
		wants = append(wants, m.clone())
		if got := o.cp.Stats().Materializations; got != 4 {
			t.Errorf("%d materialisations, want 4", got)
		}
		o.close(t)
		// The last checkpoint restores; so does the one before, which
		// names the same snapshot (no materialisation came between).
		for _, i := range []int{len(hs) - 1, len(hs) - 2} {
			r := h.instance("op-0", allGroups, maxP)
			r.restore(t, int64(i+1), hs[i])
			r.check(t, wants[i], rng)
			r.close(t)
		}
	})

	t.Run("Aborted", func(t *testing.T) {
		rng := newRand(t, "Checkpoint/Aborted")
		h := newHarness(t, newConfig)
		w := &workload{rng: rng, keys: keys}
		o, m := h.instance("op-0", allGroups, maxP), newModel()
		w.run(t, []*instance{o}, []*model{m}, 600)
		h1 := o.checkpoint(t, 1)
		want := m.clone()
		w.run(t, []*instance{o}, []*model{m}, 400)
		_, err := o.cp.SnapshotState(ctx(t), statestore.CheckpointInfo{OperatorID: "op", CheckpointID: 2, LastCompletedCheckpointID: 1})
		noErr(t, "checkpoint 2", err)
		noErr(t, "abort checkpoint 2", o.cp.NotifyCheckpointAborted(ctx(t), 2))
		o.close(t)
		r := h.instance("op-0", allGroups, maxP)
		r.restore(t, 1, h1)
		r.check(t, want, rng)
	})
}

// rescaleMaxP is the number of key groups of the rescaled operators.
const rescaleMaxP = 32

// split returns n ranges covering the rescaleMaxP key groups, in the manner
// of Flink's key-group assignment.
func split(n int) []dstl.KeyGroupRange {
	rs := make([]dstl.KeyGroupRange, n)
	for i := range n {
		rs[i] = dstl.KeyGroupRange{Start: i * rescaleMaxP / n, End: (i+1)*rescaleMaxP/n - 1}
	}
	return rs
}

// rescale restores n new instances from the checkpoints hs of the old
// instances (with models ms, ranges kgrs), each given every handle (those
// that share no key group with it are ignored), checks each against the
// model, and returns them with their models.
func rescale(t *testing.T, h *harness, rng *rand.Rand, id int64, n int, hs []*statestore.CheckpointHandle, ms []*model,
	kgrs []dstl.KeyGroupRange) ([]*instance, []*model) {
	t.Helper()
	var insts []*instance
	var wants []*model
	for i, kgr := range split(n) {
		o := h.instance(fmt.Sprintf("op-%d", i), kgr, rescaleMaxP)
		o.restore(t, id, hs...)
		want := restored(kgr, rescaleMaxP, ms, kgrs)
		if len(want.kv) == 0 || want.win.len() == 0 || len(want.ver.v) == 0 {
			t.Fatalf("instance %d (key groups %v) restores nothing in some store: %d keys, %d windows, %d versioned keys",
				i, kgr, len(want.kv), want.win.len(), len(want.ver.v))
		}
		t.Run(fmt.Sprintf("instance%d-keygroups%d-%d", i, kgr.Start, kgr.End), func(t *testing.T) {
			o.check(t, want, rng)
		})
		insts, wants = append(insts, o), append(wants, want)
	}
	return insts, wants
}

func runRescale(t *testing.T, newConfig func(*testing.T) statestore.Config) {
	const keys = 240
	// Each test: instances of an old parallelism take changes (at
	// different times, so that their stream times differ), checkpoint,
	// and end; instances of the new parallelism restore from every
	// handle; each must hold exactly the keys of its key groups, with the
	// largest stream time of the old instances it restores from. Then they
	// change, checkpoint and restore again at the same parallelism.
	run := func(t *testing.T, name string, from, to int, materialize bool) {
		rng := newRand(t, "Rescale/"+name)
		h := newHarness(t, newConfig)
		kgrs := split(from)
		var olds []*instance
		var ms []*model
		for i, kgr := range kgrs {
			olds = append(olds, h.instance(fmt.Sprintf("op-%d", i), kgr, rescaleMaxP))
			ms = append(ms, newModel())
		}
		w := &workload{rng: rng, keys: keys, lags: []int64{30, 0, 15}}
		w.run(t, olds, ms, 600*from)
		var hs []*statestore.CheckpointHandle
		for i, o := range olds {
			if materialize && i%2 == 0 {
				o.materialize(t)
				w.run(t, olds, ms, 200)
			}
		}
		for _, o := range olds {
			hs = append(hs, o.checkpoint(t, 1))
		}
		var wants []*model
		for _, m := range ms {
			wants = append(wants, m.clone())
		}
		w.run(t, olds, ms, 300) // lost
		for _, o := range olds {
			o.close(t)
		}

		news, nms := rescale(t, h, rng, 1, to, hs, wants, kgrs)
		if t.Failed() {
			return
		}
		// The new instances go on: change, checkpoint (the first one
		// after a merge materialises first), restore at the same
		// parallelism.
		w.lags = nil
		w.run(t, news, nms, 400*to)
		hs, wants = nil, nil
		for _, o := range news {
			hs = append(hs, o.checkpoint(t, 2))
			o.close(t)
		}
		for _, m := range nms {
			wants = append(wants, m.clone())
		}
		rescale(t, h, rng, 2, to, hs, wants, split(to))
	}
	t.Run("1to2", func(t *testing.T) { run(t, "1to2", 1, 2, true) })
	t.Run("2to1", func(t *testing.T) { run(t, "2to1", 2, 1, true) })
	t.Run("3to2", func(t *testing.T) { run(t, "3to2", 3, 2, false) })
	t.Run("2to3", func(t *testing.T) { run(t, "2to3", 2, 3, true) })
}
