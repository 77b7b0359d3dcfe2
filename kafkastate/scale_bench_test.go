package kafkastate

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/dstltest"
)

// BenchmarkRequestsAtScale: the object store's requests of a kafkastate
// job of 256 partitions on 4 processes (services of one group in this
// test process, each with its own storage of the default configuration,
// which batches uploads, on one counting store), input
// flowing, with the defaults' proportions at 50 times their pace: a
// checkpoint every 100 ms (5 s), a materialisation and a run of the
// deletion rule every 1.2 s (1 min), a grace of 12 s (10 min, 120
// checkpoints). It counts two windows of 100 checkpoints: from the 10th
// checkpoint after the group settled, and from the 300th, once the grace
// is full. It reports, per checkpoint of the job, the requests by kind
// (the records' and the deletion rule's, and the log's and snapshots'
// puts apart) and the LIST pages (of 1,000 names) of the later window;
// -v logs both windows (docs/KAFKA.md, "Requests at scale").
//
//	go test -run '^$' -bench RequestsAtScale -benchtime 1x ./kafkastate
func BenchmarkRequestsAtScale(b *testing.B) {
	const (
		partitions = 256
		processes  = 4
		topic      = "big"
		interval   = 100 * time.Millisecond
		window     = 100 // checkpoints a window
	)
	for range b.N {
		c := newCluster(b, kfake.SeedTopics(partitions, topic))
		brokers := c.ListenAddrs()
		store := newKindCounter(dstltest.NewBackend(), "job/")
		cfg := testConfig(brokers)
		cfg.Topic, cfg.CheckpointInterval = topic, interval
		cfg.MaterializeInterval, cfg.CollectInterval, cfg.Grace = 12*interval, 12*interval, 120*interval
		cfg.Group = fmt.Sprintf("scale-%d", benchGroups.Add(1))

		// Input flows: a record a partition every checkpoint interval.
		pcl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		if err != nil {
			b.Fatal(err)
		}
		ctx, stopInput := context.WithCancel(context.Background())
		produced := make(chan error, 1)
		go func() {
			defer pcl.Close()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					produced <- nil
					return
				case <-time.After(interval):
				}
				rs := make([]*kgo.Record, partitions)
				for j := range rs {
					rs[j] = &kgo.Record{Value: []byte(vocabulary[(i+j)%len(vocabulary)] + " " + vocabulary[j%len(vocabulary)])}
				}
				if err := pcl.ProduceSync(ctx, rs...).FirstErr(); err != nil && ctx.Err() == nil {
					produced <- err
					return
				}
			}
		}()

		var rs []*running
		for range processes {
			rs = append(rs, startSvc(b, benchStorage(b, store), cfg)) // batched uploads, as by default
		}
		stats := func() (running, moves, commits, collections int64) {
			for _, r := range rs {
				st := r.svc.Stats()
				running += st.Restores + st.FirstStarts - st.Revoked - st.Lost
				moves += st.Assigned + st.Revoked + st.Lost
				commits += st.Commits
				collections += st.Collections
			}
			return running, moves, commits, collections
		}
		// Settled: every partition runs, and none moved for 3 intervals.
		deadline := time.Now().Add(2 * time.Minute)
		for last, since := int64(-1), time.Now(); time.Since(since) < 3*interval; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("the group did not settle")
			}
			if n, moves, _, _ := stats(); n != partitions || moves != last {
				last, since = moves, time.Now()
			}
		}
		_, moves0, start, _ := stats()
		// waitCheckpoints waits until the job committed n checkpoints
		// since the group settled (n commits of each process).
		waitCheckpoints := func(n int) time.Time {
			for {
				if _, _, c, _ := stats(); c >= start+int64(n*processes) {
					return time.Now()
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		type counts struct {
			at      time.Time
			kinds   map[string]int
			byCP    map[int64]int
			commits int64
			runs    int64
		}
		snap := func() counts {
			kinds, byCP := store.snapshot()
			_, _, c, r := stats()
			return counts{time.Now(), kinds, byCP, c, r}
		}
		var windows [][2]counts
		for _, from := range []int{10, 300} {
			waitCheckpoints(from)
			c0 := snap()
			waitCheckpoints(from + window)
			windows = append(windows, [2]counts{c0, snap()})
		}
		_, moves, _, _ := stats()
		stopInput()
		if err := <-produced; err != nil {
			b.Fatal(err)
		}
		for _, r := range rs {
			if err := r.stop(b); err != nil {
				b.Fatal(err)
			}
		}
		if moves != moves0 {
			b.Errorf("%d partition moves during the windows", moves-moves0)
		}
		for i, w := range windows {
			c0, c1 := w[0], w[1]
			d := map[string]float64{}
			for k, v := range c1.kinds {
				d[k] = float64(v - c0.kinds[k])
			}
			var perCP []int
			for n, k := range c1.byCP {
				if dk := k - c0.byCP[n]; dk > 0 {
					perCP = append(perCP, dk)
				}
			}
			slices.Sort(perCP)
			k := float64(c1.commits-c0.commits) / processes
			runs := float64(c1.runs - c0.runs)
			per := func(keys ...string) float64 {
				var n float64
				for _, key := range keys {
					n += d[key]
				}
				return n / k
			}
			b.Logf("window %d: %.0f checkpoints in %v (%v a checkpoint), %.0f runs of the deletion rule; record puts a checkpoint: %d to %d over %d checkpoint numbers",
				i+1, k, c1.at.Sub(c0.at).Round(time.Millisecond), (c1.at.Sub(c0.at) / time.Duration(k)).Round(time.Millisecond), runs,
				perCP[0], perCP[len(perCP)-1], len(perCP))
			b.Logf("window %d, per checkpoint: PUT record %.2f, log %.2f, snapshot %.2f, probe %.2f, other %.2f; GET record %.2f, other %.2f; LIST records %.3f, prefix %.3f; LIST pages records %.3f, prefix %.3f; DELETE record %.2f, log %.2f, snapshot %.2f, probe %.2f",
				i+1, per("put record"), per("put log"), per("put snapshot"), per("put clock probe"), per("put snapshot file", "put other", "put create-only probe"), per("get record"), per("get log", "get snapshot", "get snapshot file", "get other"),
				per("list records"), per("list prefix"), per("pages list records"), per("pages list prefix"),
				per("delete record"), per("delete log"), per("delete snapshot"), per("delete clock probe"))
			b.Logf("window %d, per run of the deletion rule: names listed: records %.0f, prefix %.0f", i+1,
				d["names list records"]/max(runs, 1), d["names list prefix"]/max(runs, 1))
			if i == len(windows)-1 {
				b.ReportMetric(per("put record"), "record-puts/ckpt")
				b.ReportMetric(per("get record"), "record-gets/ckpt")
				b.ReportMetric(per("list records", "list prefix"), "lists/ckpt")
				b.ReportMetric(per("pages list records", "pages list prefix"), "list-pages/ckpt")
				b.ReportMetric(per("delete record"), "record-deletes/ckpt")
				b.ReportMetric(per("put log"), "log-puts/ckpt")
				b.ReportMetric(per("put snapshot"), "snapshot-puts/ckpt")
			}
		}
	}
	b.ReportMetric(0, "ns/op")
}
