package dstl_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl"
)

// benchFormat is the object format version the engine's benchmarks write
// (BenchmarkCycle, BenchmarkPersistLocal, BenchmarkSustained,
// BenchmarkPersistConfirm): run them with -bench.format=2 for version 2,
// under the same names, so that benchstat compares the two files.
var benchFormat = flag.Int("bench.format", 1, "the object format version the engine's benchmarks write (1 or 2)")

// benchConfig is cfg writing the benchmarks' format version.
func benchConfig(cfg dstl.Config) dstl.Config {
	cfg.FormatVersion = *benchFormat
	return cfg
}

// BenchmarkPersistConfirm is dstl bench (b) in process, on the local
// backend (fsync on): one writer appends a set of 100-byte changes over
// 128 key groups (untimed), then its persist -> confirm and the backend's
// Put of as many bytes (a body in memory, as the engine gives its
// objects) run one after the other, the one that goes first alternating.
// Its metrics: the medians of persist -> confirm (persist-confirm-ms) and
// of the Put (put-ms), and the median of the sets' ratios (ratio, the
// target's: at most 1.25 on local disk). The sizes are those of (b).
func BenchmarkPersistConfirm(b *testing.B) {
	for _, changes := range []int{626, 10359, 41504} { // 64 KiB, 1 MiB and 4 MiB objects
		b.Run(fmt.Sprintf("changes=%d", changes), func(b *testing.B) {
			lb, err := local.Open(context.Background(), local.DefaultConfig(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			defer lb.Close()
			cfg := benchConfig(dstl.DefaultConfig("local"))
			cfg.BatchPersistDelay = dstl.NoBatchDelay // a lone writer has nobody to wait for
			cfg.JobID = "job"
			s := newStorage(b, lb, cfg)
			w := newWriter(b, s, "op", dstl.KeyGroupRange{Start: 0, End: 127})
			pool := sustainedChanges(16 << 20)
			ctx := context.Background()
			var body []byte
			var persists, puts []time.Duration
			var ratios []float64
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				off := pool.take(changes)
				from := w.NextSequenceNumber()
				for k := range changes {
					if err := w.Append(ctx, k&127, pool.at(off+int64(k))); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				var pc, pd time.Duration
				var h dstl.Handle
				engine := func() {
					t0 := time.Now()
					f, err := w.Persist(ctx, from, int64(i+1))
					if err != nil {
						b.Fatal(err)
					}
					r, err := f.Wait(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if err := w.Confirm(r.From, r.To, int64(i+1)); err != nil {
						b.Fatal(err)
					}
					pc, h = time.Since(t0), r.Remote
					if err := w.Truncate(r.To); err != nil {
						b.Fatal(err)
					}
				}
				put := func() {
					if body == nil {
						return // the first set: its size is not known yet
					}
					t0 := time.Now()
					if err := lb.Put(ctx, fmt.Sprintf("put-%d", i), backends.NewMemoryBody(body), int64(len(body))); err != nil {
						b.Fatal(err)
					}
					pd = time.Since(t0)
				}
				if i%2 == 0 {
					engine()
					put()
				} else {
					put()
					engine()
				}
				b.StopTimer()
				if body == nil {
					body = bytes.Repeat([]byte{0x5a}, int(h.StoredSize)+2048) // about the object: its frame, header and index
				}
				if pd > 0 {
					persists, puts = append(persists, pc), append(puts, pd)
					ratios = append(ratios, pc.Seconds()/pd.Seconds())
				}
				// The objects go, untimed, as (b)'s do.
				for _, e := range h.Entries {
					_ = lb.Delete(ctx, e.Object)
				}
				_ = lb.Delete(ctx, fmt.Sprintf("put-%d", i))
				b.StartTimer()
			}
			if len(ratios) > 0 {
				b.ReportMetric(medianDuration(persists).Seconds()*1e3, "persist-confirm-ms")
				b.ReportMetric(medianDuration(puts).Seconds()*1e3, "put-ms")
				b.ReportMetric(medianFloat(ratios), "ratio")
			}
		})
	}
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2]
}

func medianFloat(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}
