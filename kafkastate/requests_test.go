package kafkastate

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/dstltest"
)

// TestRequestsAtScale: 256 partitions on 4 processes (services of one
// group in this test process, each with its own storage, on one counting
// store). Once the group is stable, over 10 checkpoints: each checkpoint
// costs at most one record put a process (4 in all), no get, and no list
// but those of the deletion rule's runs (3 each: the records, the clock
// probe, the job's prefix); the log's puts are counted apart. Then one
// process restarts the job: it restores the 256 partitions with one get a
// record.
func TestRequestsAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("256 partitions on 4 processes")
	}
	const (
		partitions = 256
		processes  = 4
		topic      = "big"
		interval   = 500 * time.Millisecond
	)
	c := newCluster(t, kfake.SeedTopics(partitions, topic))
	brokers := c.ListenAddrs()
	store := newKindCounter(dstltest.NewBackend(), "job/")
	cfg := testConfig(brokers)
	cfg.Topic, cfg.CheckpointInterval, cfg.CollectInterval = topic, interval, 4*interval
	cfg.Grace = max(cfg.Grace, 4*interval)

	produce := func(n int) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		if err != nil {
			return err
		}
		defer cl.Close()
		rs := make([]*kgo.Record, n)
		for i := range rs {
			rs[i] = &kgo.Record{Value: []byte(vocabulary[i%len(vocabulary)] + " " + vocabulary[(i/7)%len(vocabulary)])}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return cl.ProduceSync(ctx, rs...).FirstErr()
	}
	startAll := func() []*running {
		var rs []*running
		for range processes {
			rs = append(rs, startSvc(t, newStorage(t, store), cfg))
		}
		return rs
	}
	started := func(rs []*running) int64 {
		var n int64
		for _, r := range rs {
			st := r.svc.Stats()
			n += st.Restores + st.FirstStarts - st.Revoked - st.Lost
		}
		return n
	}
	// stable waits until every partition runs, and no partition moved for
	// three intervals.
	stable := func(rs []*running) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		last, since := int64(-1), time.Now()
		for time.Since(since) < 3*interval {
			if time.Now().After(deadline) {
				t.Fatalf("the group did not settle: %d partitions running", started(rs))
			}
			n := started(rs)
			var moves int64
			for _, r := range rs {
				st := r.svc.Stats()
				moves += st.Assigned + st.Revoked + st.Lost
			}
			if n != partitions || moves != last {
				last, since = moves, time.Now()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	if err := produce(10 * partitions); err != nil {
		t.Fatal(err)
	}
	rs := startAll()
	stable(rs)
	produced := make(chan error, 1)
	go func() { produced <- produce(20 * partitions) }() // changes in the checkpoints of the window
	commits := func() (n int64) {
		for _, r := range rs {
			n += r.svc.Stats().Commits
		}
		return n
	}
	collections := func() (n int64) {
		for _, r := range rs {
			n += r.svc.Stats().Collections
		}
		return n
	}
	for c0 := commits(); commits() < c0+processes; {
		time.Sleep(10 * time.Millisecond)
	}
	before, cpsBefore := store.snapshot()
	c0, col0 := commits(), collections()
	for commits() < c0+10*processes {
		time.Sleep(10 * time.Millisecond)
	}
	after, cpsAfter := store.snapshot()
	col := collections() - col0
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	delta := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			delta[k] = d
		}
	}
	var perCheckpoint []int
	for n, k := range cpsAfter {
		if d := k - cpsBefore[n]; d > 0 {
			perCheckpoint = append(perCheckpoint, d)
		}
	}
	slices.Sort(perCheckpoint)
	checkpoints := len(perCheckpoint)
	t.Logf("%d partitions on %d processes, %d checkpoints (%d commits), %d runs of the deletion rule: requests %v",
		partitions, processes, checkpoints, commits()-c0, col, delta)
	t.Logf("record puts per checkpoint: %v; log puts per checkpoint: %.1f (%.1f a process)", perCheckpoint,
		float64(delta["put log"])/float64(checkpoints), float64(delta["put log"])/float64(checkpoints)/processes)
	if perCheckpoint[len(perCheckpoint)-1] > processes {
		t.Errorf("record puts per checkpoint %v: want at most %d", perCheckpoint, processes)
	}
	lists := delta["list records"] + delta["list prefix"]
	if lists > 3*int(col)+3 { // a run may straddle the window's ends
		t.Errorf("%d lists in %d checkpoints with %d runs of the deletion rule: want only theirs (3 a run)", lists, checkpoints, col)
	}
	if n := delta["get record"] + delta["get log"] + delta["get snapshot"]; n > 0 && col == 0 {
		t.Errorf("%d gets in %d checkpoints, with no run of the deletion rule", n, checkpoints)
	}
	for k := range delta {
		if strings.HasPrefix(k, "get ") && k != "get record" {
			t.Errorf("%d %s in the checkpoints", delta[k], k)
		}
	}

	// Restart, with one process: it restores the 256 partitions with one
	// get a record (4).
	for _, r := range rs {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	before, _ = store.snapshot()
	cfg.CollectInterval = -1 // its gets are no restore's
	one := startSvc(t, newStorage(t, store), cfg)
	stable([]*running{one})
	after, _ = store.snapshot()
	gets := after["get record"] - before["get record"]
	restores := one.svc.Stats().Restores
	t.Logf("restart: %d partitions restored with %d record gets (%d log and snapshot gets)", restores, gets,
		after["get log"]+after["get snapshot"]-before["get log"]-before["get snapshot"])
	if restores != partitions || gets > processes {
		t.Errorf("restart: %d restores with %d record gets: want %d restores with at most %d gets (one a record)", restores, gets, partitions, processes)
	}
	if err := one.stop(t); err != nil {
		t.Fatal(err)
	}
}
