package kafkastate

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

// benchRecords is the input of one benchmark iteration.
const benchRecords = 100000

// benchGroups numbers the benchmarks' groups: each run of a benchmark
// reads the topic from its start.
var benchGroups atomic.Int64

// benchCluster starts a cluster whose topic holds benchRecords records of
// 1 to 5 words, spread evenly over the partitions.
func benchCluster(b *testing.B) []string {
	b.Helper()
	c := newCluster(b)
	brokers := c.ListenAddrs()
	prod := newProducer(b, brokers)
	for range benchRecords / 1000 {
		prod.produce(b, 1000)
	}
	return brokers
}

// BenchmarkWordCount: records per second of the word count (state stores,
// a checkpoint every 50 ms, its record on an in-memory store and its
// offsets committed to the group) reading a topic of 6 partitions from
// its start, one process; and the object store's requests per partition
// checkpoint and per commit (one record of the process's partitions),
// counted by backends/counting once the partitions are assigned.
func BenchmarkWordCount(b *testing.B) {
	brokers := benchCluster(b)
	var records, secs, ckpts, commits, reqs, puts, lists, gets float64
	for range b.N {
		mem := counting.New(dstltest.NewBackend())
		cfg := testConfig(brokers)
		cfg.Group = fmt.Sprintf("bench-%d", benchGroups.Add(1))
		cfg.CheckpointInterval = 50 * time.Millisecond
		cfg.CollectInterval = -1 // its lists and gets are no checkpoint's
		r := startSvc(b, benchStorage(b, mem), cfg)
		r.waitFor(b, func(st Stats) bool { return st.FirstStarts >= testPartitions })
		base, t0 := mem.Stats(), time.Now()
		ck0, cm0 := r.svc.Stats().Checkpoints, r.svc.Stats().Commits
		r.waitFor(b, func(st Stats) bool { return st.Records >= benchRecords })
		elapsed := time.Since(t0)
		// Let the checkpoints of the last records complete.
		for time.Since(t0) < elapsed+2*cfg.CheckpointInterval {
			time.Sleep(10 * time.Millisecond)
		}
		st := mem.Stats()
		ck, cm := r.svc.Stats().Checkpoints-ck0, r.svc.Stats().Commits-cm0
		if err := r.stop(b); err != nil {
			b.Fatal(err)
		}
		records += benchRecords
		secs += elapsed.Seconds()
		ckpts += float64(ck)
		commits += float64(cm)
		reqs += float64(st.Requests() - base.Requests())
		puts += float64(st.Puts - base.Puts)
		lists += float64(st.Lists - base.Lists)
		gets += float64(st.Gets - base.Gets)
	}
	b.ReportMetric(records/secs, "records/s")
	b.ReportMetric(reqs/ckpts, "reqs/partition-ckpt")
	b.ReportMetric(puts/ckpts, "puts/partition-ckpt")
	b.ReportMetric(lists/ckpts, "lists/partition-ckpt")
	b.ReportMetric(gets/ckpts, "gets/partition-ckpt")
	b.ReportMetric(puts/commits, "puts/commit")
	b.ReportMetric(ckpts/float64(b.N), "partition-ckpts/op")
	b.ReportMetric(0, "ns/op")
}

// benchStorage is a process's storage with the default configuration
// (uploads batched for the default delay).
func benchStorage(b *testing.B, be backends.Backend) *dstl.Storage {
	cfg := dstl.DefaultConfig("mem://kafkastate")
	cfg.JobID = "job"
	s, err := dstl.New(cfg, be, dstl.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkPlainConsumer: records per second of a plain franz-go group
// consumer of the same topic that does no work, for comparison.
func BenchmarkPlainConsumer(b *testing.B) {
	brokers := benchCluster(b)
	var records, secs float64
	for range b.N {
		var t0 atomic.Int64
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(fmt.Sprintf("plain-%d", benchGroups.Add(1))),
			kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
				t0.CompareAndSwap(0, time.Now().UnixNano()) // the group joined: as the word count's clock
			}),
			kgo.ConsumeTopics(testTopic), kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, fastGroup()...)...)
		if err != nil {
			b.Fatal(err)
		}
		var n int
		for n < benchRecords {
			n += cl.PollRecords(context.Background(), DefaultMaxPollRecords).NumRecords()
		}
		secs += time.Since(time.Unix(0, t0.Load())).Seconds()
		records += float64(n)
		cl.Close()
	}
	b.ReportMetric(records/secs, "records/s")
	b.ReportMetric(0, "ns/op")
}
