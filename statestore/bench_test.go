package statestore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
)

// benchKeys are 16-byte keys; benchValue an 80-byte value: with the entry
// header a logged put is about 100 bytes.
var benchKeys = func() []string {
	ks := make([]string, 1<<14)
	for i := range ks {
		ks[i] = fmt.Sprintf("key-%012d", i)
	}
	return ks
}()

var benchValue = string(make([]byte, 80))

// BenchmarkKVPut measures puts into a key-value store with logging on (each
// change buffered, then appended to the DSTL writer by a flush every 1024
// puts; uploads run in the background over an in-memory backend) and off.
func BenchmarkKVPut(b *testing.B) {
	for _, logging := range []bool{true, false} {
		b.Run(fmt.Sprintf("logging=%s", map[bool]string{true: "on", false: "off"}[logging]), func(b *testing.B) {
			storage := newStorage(b, dstltest.NewBackend())
			cp, err := statestore.NewCheckpointer(storage, statestore.Config{Operator: "bench", KeyGroups: allGroups, MaxParallelism: maxP, MaterializeInterval: -1, MaterializeSize: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer cp.Close()
			kv, err := statestore.NewKeyValueStore("kv", cp.Log(), statestore.StringCodec{}, statestore.StringCodec{}, statestore.WithMaxParallelism(maxP))
			if err != nil {
				b.Fatal(err)
			}
			if err := cp.Register(kv); err != nil {
				b.Fatal(err)
			}
			kv.SetLogging(logging)
			ctx := context.Background()
			b.SetBytes(int64(len(benchKeys[0]) + len(benchValue)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := kv.Put(benchKeys[i&(len(benchKeys)-1)], benchValue); err != nil {
					b.Fatal(err)
				}
				i++
				if i&1023 == 0 {
					if err := cp.Flush(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkRestore measures InitializeState of a checkpoint whose log (no
// snapshot) holds the given bytes of 100-byte puts over 16384 keys, read
// from an in-memory backend by a fresh storage each time. Bytes/s is the
// log's logical size restored per second of wall clock (the target: at
// least 500 MiB/s at 32 MiB); cpu-ns/B the process's CPU time during the
// restores, both goroutines (the reader's, which fetches, checks and
// decodes ahead, and the caller's, which applies) and the garbage
// collector, per byte: on a busy machine the steadier measure.
func BenchmarkRestore(b *testing.B) {
	for _, size := range []int{1 << 20, 10 << 20, 32 << 20} {
		b.Run(fmt.Sprintf("log=%dMiB", size>>20), func(b *testing.B) {
			ctx := context.Background()
			backend := dstltest.NewBackend()
			o := newOperator(b, newStorage(b, backend), "op-0", allGroups, statestore.Config{})
			var logged int64
			puts := 0
			for ; logged < int64(size); puts++ {
				i := puts
				if err := o.kv.Put(benchKeys[i&(len(benchKeys)-1)], benchValue); err != nil {
					b.Fatal(err)
				}
				if i&1023 == 1023 {
					if err := o.cp.Flush(ctx); err != nil {
						b.Fatal(err)
					}
					logged = o.cp.Stats().LogBytes
				}
			}
			h := checkpoint(b, o, 1)
			o.cp.Close()
			b.SetBytes(logged)
			b.ReportMetric(float64(h.Logs[0].Remote.StoredSize), "stored-bytes")
			var cpu time.Duration
			restores := 0
			for b.Loop() {
				b.StopTimer()
				cfg := dstl.DefaultConfig("mem://bench")
				cfg.JobID = "job"
				storage, err := dstl.New(cfg, backend)
				if err != nil {
					b.Fatal(err)
				}
				r := newOperator(b, storage, "op-0", allGroups, statestore.Config{})
				b.StartTimer()
				c0 := processCPUTime()
				if err := r.cp.InitializeState(ctx, statestore.CheckpointInfo{}, h); err != nil {
					b.Fatal(err)
				}
				cpu += processCPUTime() - c0
				restores++
				b.StopTimer()
				if r.kv.Len() != min(puts, len(benchKeys)) {
					b.Fatalf("%d keys restored", r.kv.Len())
				}
				r.cp.Close()
				storage.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(int64(restores)*logged), "cpu-ns/B")
		})
	}
}
