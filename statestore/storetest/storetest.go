package storetest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// Run runs the conformance suite. newConfig returns the template of every
// Checkpointer's Config that the suite opens; it is called once per
// checkpointer, with the subtest's t. The suite sets Operator, KeyGroups
// and MaxParallelism itself, and, when the template leaves them zero,
// turns off the background materialisation (MaterializeSize and
// MaterializeInterval -1: the suite materialises when it means to). The
// template decides the kind of store: with Dir set, the stores are on
// disk, each checkpointer in a subdirectory of its own; with Dir empty,
// in memory.
//
// Each subtest makes its own storage, on the local backend in a temporary
// directory, and its own checkpointers, and closes them; a checkpointer
// whose Close fails (a leaked iterator, for instance) fails the subtest.
func Run(t *testing.T, newConfig func(t *testing.T) statestore.Config) {
	t.Run("KeyValue", func(t *testing.T) { runKeyValue(t, newConfig) })
	t.Run("Window", func(t *testing.T) { runWindow(t, newConfig) })
	t.Run("Versioned", func(t *testing.T) { runVersioned(t, newConfig) })
	t.Run("Snapshot", func(t *testing.T) { runSnapshot(t, newConfig) })
	t.Run("Checkpoint", func(t *testing.T) { runCheckpoint(t, newConfig) })
	t.Run("Rescale", func(t *testing.T) { runRescale(t, newConfig) })
}

// maxP is the number of key groups of the stores that are not rescaled.
const maxP = statestore.DefaultMaxParallelism

var allGroups = dstl.KeyGroupRange{Start: 0, End: maxP - 1}

// harness is one subtest's object storage and its processes.
type harness struct {
	t         *testing.T
	newConfig func(*testing.T) statestore.Config
	root      string
	backend   *local.Backend
	procs     int
}

func newHarness(t *testing.T, newConfig func(*testing.T) statestore.Config) *harness {
	t.Helper()
	root := filepath.Join(t.TempDir(), "objects")
	b, err := local.Open(context.Background(), local.Config{Root: root, CreateRoot: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close the backend: %v", err)
		}
	})
	return &harness{t: t, newConfig: newConfig, root: root, backend: b}
}

// storage returns a new storage over the harness's backend, as a new
// process would open it.
func (h *harness) storage() *dstl.Storage {
	h.t.Helper()
	cfg := dstl.DefaultConfig(h.root)
	cfg.JobID = "job"
	cfg.BatchPersistDelay = dstl.NoBatchDelay
	s, err := dstl.New(cfg, h.backend)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		if err := s.Close(); err != nil {
			h.t.Errorf("close the storage: %v", err)
		}
	})
	return s
}

// checkpointer opens the checkpointer of operator instance op, owning kgr
// of maxP key groups, in a process of its own (a storage and, on disk, a
// directory of its own).
func (h *harness) checkpointer(op string, kgr dstl.KeyGroupRange, maxP int) *statestore.Checkpointer {
	h.t.Helper()
	cfg := h.newConfig(h.t)
	cfg.Operator, cfg.KeyGroups, cfg.MaxParallelism = op, kgr, maxP
	if cfg.MaterializeSize == 0 {
		cfg.MaterializeSize = -1
	}
	if cfg.MaterializeInterval == 0 {
		cfg.MaterializeInterval = -1
	}
	if cfg.Dir != "" {
		cfg.Dir = filepath.Join(cfg.Dir, fmt.Sprintf("process-%d", h.procs))
	}
	h.procs++
	cp, err := statestore.NewCheckpointer(h.storage(), cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { closeCheckpointer(h.t, cp) })
	return cp
}

func closeCheckpointer(t *testing.T, cp *statestore.Checkpointer) {
	t.Helper()
	if err := cp.Close(); err != nil {
		t.Errorf("close the checkpointer: %v", err)
	}
}

// registered registers s, which a constructor returned with err, with cp,
// and returns it; it fails the test if the constructor failed or s cannot
// be registered.
func registered[S statestore.Store](t *testing.T, cp *statestore.Checkpointer, s S, err error) S {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Register(s); err != nil {
		t.Fatalf("register store %q: %v", s.Name(), err)
	}
	return s
}

// newKV makes a key-value store logging to cp's writer and registers it.
func newKV[K, V any](t *testing.T, cp *statestore.Checkpointer, name string, kc statestore.Codec[K], vc statestore.Codec[V]) *statestore.KeyValueStore[K, V] {
	t.Helper()
	s, err := statestore.NewKeyValueStore(name, cp.Log(), kc, vc, statestore.WithMaxParallelism(cp.MaxParallelism()))
	return registered(t, cp, s, err)
}

func newWindow(t *testing.T, cp *statestore.Checkpointer, name string, retention int64) *statestore.WindowStore[string, int64] {
	t.Helper()
	s, err := statestore.NewWindowStore(name, cp.Log(), statestore.StringCodec{}, statestore.Int64Codec{}, retention,
		statestore.WithMaxParallelism(cp.MaxParallelism()))
	return registered(t, cp, s, err)
}

func newVersioned(t *testing.T, cp *statestore.Checkpointer, name string, retention int64) *statestore.VersionedStore[string, string] {
	t.Helper()
	s, err := statestore.NewVersionedStore(name, cp.Log(), statestore.StringCodec{}, statestore.StringCodec{}, retention,
		statestore.WithMaxParallelism(cp.MaxParallelism()))
	return registered(t, cp, s, err)
}

// newRand returns the subtest's random numbers, from a seed that the
// subtest's name (below Run) and STORETEST_SEED decide, and logs the seed
// if the subtest fails.
func newRand(t *testing.T, name string) *rand.Rand {
	t.Helper()
	base := uint64(1)
	if s := os.Getenv("STORETEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STORETEST_SEED=%q: %v", s, err)
		}
		base = v
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	seed := h.Sum64() ^ base
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("storetest: random data of seed %d (STORETEST_SEED=%d)", seed, base)
		}
	})
	return rand.New(rand.NewPCG(seed, base))
}

// pair is a key and a value that a loop yielded.
type pair[K, V any] struct {
	K K
	V V
}

func collect[K, V any](seq iter.Seq2[K, V]) []pair[K, V] {
	var ps []pair[K, V]
	for k, v := range seq {
		ps = append(ps, pair[K, V]{k, v})
	}
	return ps
}

// sameSeq reports the first difference between two sequences.
func sameSeq[T comparable](t *testing.T, what string, got, want []T) bool {
	t.Helper()
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			t.Errorf("%s: %d items, want %d; first missing: %+v", what, len(got), len(want), want[i])
			return false
		case i >= len(want):
			t.Errorf("%s: %d items, want %d; first extra: %+v", what, len(got), len(want), got[i])
			return false
		case got[i] != want[i]:
			t.Errorf("%s: item %d is %+v, want %+v", what, i, got[i], want[i])
			return false
		}
	}
	return true
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want %v", what, err, target)
	}
}

func noErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// ownedKey returns a key "prefix-N" of key group kg.
func ownedKey(prefix string, kgr dstl.KeyGroupRange, maxP int, inside bool) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		if kgr.Contains(statestore.KeyGroup([]byte(k), maxP)) == inside {
			return k
		}
	}
}

// int64Bytes is v in Int64Codec's encoding.
func int64Bytes(v int64) []byte {
	b, _ := statestore.Int64Codec{}.Encode(nil, v)
	return b
}

// ctx returns a context for one call of the checkpointer.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
