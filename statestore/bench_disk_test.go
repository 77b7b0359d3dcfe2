package statestore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// The put and get benchmarks of a key-value store in memory, on disk
// (Config.Dir) and of Pebble used directly, with 16-byte keys and 100-byte
// values (random bytes, which Pebble's block compression cannot shrink),
// over a working set of opKeys keys visited in a fixed random order.
// Compare them with benchstat:
//
//	go test -run='^$' -bench='^BenchmarkKVOps$' -benchmem -count=6 ./statestore | tee kv.txt
//	benchstat -col /store kv.txt
const (
	opKeys     = 1 << 18
	opKeyLen   = 16
	opValueLen = 100
)

var (
	opKeyList = func() []string {
		ks := make([]string, opKeys)
		for i := range ks {
			ks[i] = fmt.Sprintf("k%015d", i)
		}
		return ks
	}()
	opOrder = func() []int {
		rng := rand.New(rand.NewPCG(1, 2))
		return rng.Perm(opKeys)
	}()
	opValue = func() string {
		b := make([]byte, opValueLen)
		rng := rand.New(rand.NewPCG(3, 4))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return string(b)
	}()
)

// kvOps is one side of the comparison: a put, a get, and what a flush of
// the log is (nothing when nothing logs).
type kvOps struct {
	put   func(i int) error
	get   func(i int) (string, bool, error)
	flush func() error
}

// BenchmarkKVOps measures Put and Get of one key-value store, in memory
// ("memory"), on disk ("disk"), and Pebble used directly ("pebble": a
// database opened as the disk-backed stores' is, by diskstate.Open, keys
// laid out as theirs are, precomputed), with logging on and off (Pebble
// never logs). With logging on, the buffered changes are appended to the
// log every 1024 puts, as in BenchmarkKVPut. Gets read a store holding the
// whole working set (about 30 MiB on disk: the memtable and a table or
// two, warm in the block cache).
func BenchmarkKVOps(b *testing.B) {
	for _, op := range []string{"put", "get"} {
		for _, store := range []string{"memory", "disk", "pebble"} {
			for _, logging := range []bool{true, false} {
				if store == "pebble" && logging {
					continue
				}
				name := fmt.Sprintf("op=%s/store=%s/logging=%s", op, store, map[bool]string{true: "on", false: "off"}[logging])
				b.Run(name, func(b *testing.B) { benchKVOp(b, op, store, logging) })
			}
		}
	}
}

func benchKVOp(b *testing.B, op, store string, logging bool) {
	var ops kvOps
	if store == "pebble" {
		ops = pebbleOps(b)
	} else {
		ops = storeOps(b, store == "disk", logging)
	}
	if op == "get" {
		for i := range opKeys {
			if err := ops.put(i); err != nil {
				b.Fatal(err)
			}
			if i&1023 == 1023 {
				if err := ops.flush(); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := ops.flush(); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(opKeyLen + opValueLen)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		k := opOrder[i&(opKeys-1)]
		i++
		if op == "get" {
			v, ok, err := ops.get(k)
			if err != nil || !ok || len(v) != opValueLen {
				b.Fatalf("get %s: %d bytes, %v, %v", opKeyList[k], len(v), ok, err)
			}
			continue
		}
		if err := ops.put(k); err != nil {
			b.Fatal(err)
		}
		if i&1023 == 0 {
			if err := ops.flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// storeOps returns the operations of a key-value store of a checkpointer
// over an in-memory backend that never materialises.
func storeOps(b *testing.B, disk, logging bool) kvOps {
	cfg := statestore.Config{Operator: "bench", KeyGroups: allGroups, MaxParallelism: maxP,
		MaterializeInterval: -1, MaterializeSize: -1}
	if disk {
		cfg.Dir = b.TempDir()
	}
	cp, err := statestore.NewCheckpointer(newStorage(b, dstltest.NewBackend()), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cp.Close() })
	kv, err := statestore.NewKeyValueStore("kv", cp.Log(), statestore.StringCodec{}, statestore.StringCodec{}, statestore.WithMaxParallelism(maxP))
	if err != nil {
		b.Fatal(err)
	}
	if err := cp.Register(kv); err != nil {
		b.Fatal(err)
	}
	kv.SetLogging(logging)
	ctx := context.Background()
	return kvOps{
		put:   func(i int) error { return kv.Put(opKeyList[i], opValue) },
		get:   func(i int) (string, bool, error) { return kv.Get(opKeyList[i]) },
		flush: func() error { return cp.Flush(ctx) },
	}
}

// pebbleOps returns puts and gets of Pebble itself, in a database opened
// with the options of the disk-backed stores' (diskstate.Open), of the keys
// the disk-backed store would write, and values copied out as it copies
// them.
func pebbleOps(b *testing.B) kvOps {
	db, err := diskstate.Open(filepath.Join(b.TempDir(), "pebble"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	keys := make([][]byte, opKeys)
	for i, k := range opKeyList {
		keys[i] = append(diskstate.AppendStorePrefix(nil, statestore.KeyGroup([]byte(k), maxP), "kv"), k...)
	}
	value := []byte(opValue)
	return kvOps{
		put: func(i int) error { return db.DB.Set(keys[i], value, pebble.NoSync) },
		get: func(i int) (string, bool, error) {
			v, closer, err := db.DB.Get(keys[i])
			if errors.Is(err, pebble.ErrNotFound) {
				return "", false, nil
			}
			if err != nil {
				return "", false, err
			}
			s := string(bytes.Clone(v))
			return s, true, closer.Close()
		},
		flush: func() error { return nil },
	}
}
