package main

import (
	"context"
	"io"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// coordCounter counts the requests of a kafkastate job's coordinator on a
// backend: the records' puts, gets and deletes, the deletion rule's
// listings (of the records, of the job's prefix, of the first layout's
// catalog) and its clock probe's put, listing and delete.
type coordCounter struct {
	backends.Backend
	prefix string
	mu     sync.Mutex
	c      costCounts
}

func (k *coordCounter) coordinator(name string) bool {
	n := objname.Parse(k.prefix, name)
	return n.Kind == objname.Record || n.Kind == objname.ClockProbe
}

func (k *coordCounter) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	if k.coordinator(name) {
		k.mu.Lock()
		k.c.Puts++
		k.mu.Unlock()
	}
	return k.Backend.Put(ctx, name, body, size)
}

func (k *coordCounter) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if k.coordinator(name) {
		k.mu.Lock()
		k.c.Gets++
		k.mu.Unlock()
	}
	return k.Backend.Get(ctx, name, offset, length)
}

func (k *coordCounter) Delete(ctx context.Context, name string) error {
	if k.coordinator(name) {
		k.mu.Lock()
		k.c.Deletes++
		k.mu.Unlock()
	}
	return k.Backend.Delete(ctx, name)
}

func (k *coordCounter) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	k.mu.Lock()
	k.c.Lists++ // every listing of a kafkastate job is its deletion rule's
	k.mu.Unlock()
	return k.Backend.List(ctx, prefix, fn)
}

func (k *coordCounter) Unwrap() backends.Backend { return k.Backend }

func (k *coordCounter) snapshot() costCounts {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.c
}

// TestCostKafka: the model of a kafkastate job's coordinator
// (--coordinator kafka, kafkaCounts) agrees within dstl cost's tolerance
// with a counted run of the job: 2 processes of 8 partitions, a
// checkpoint every 100 ms, the deletion rule every 300 ms, input flowing.
// Each checkpoint puts a record a process, which the deletion rule reads
// once (those of the other processes) and deletes once older than the
// grace; each run of the rule puts, lists and deletes its clock probe and
// lists the records and the job's prefix. The job keeps the rates the
// month's model takes.
func TestCostKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("a kafkastate job on an in-process Kafka for 10 s")
	}
	const (
		partitions  = 8
		processes   = 2
		interval    = 100 * time.Millisecond
		collect     = 300 * time.Millisecond
		materialize = time.Second
	)
	brokers := newKafkaCluster(t, partitions)
	store := &coordCounter{Backend: dstltest.NewBackend(), prefix: "job/"}
	cfg := kafkaJobConfig(brokers, interval)
	cfg.CollectInterval, cfg.MaterializeInterval = collect, materialize
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.SessionTimeout(time.Second), kgo.RebalanceTimeout(time.Second))
	cfg.CommitTimeout, cfg.Grace = 500*time.Millisecond, 3*time.Second
	// Input flows: 16 records every 50 ms.
	pcl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(kafkaTopic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	stop := make(chan struct{})
	produced := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				produced <- nil
				return
			case <-time.After(50 * time.Millisecond):
			}
			rs := make([]*kgo.Record, 16)
			for i := range rs {
				rs[i] = &kgo.Record{Value: []byte("the of and")}
			}
			if err := pcl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
				produced <- err
				return
			}
		}
	}()
	var svcs []*kafkaService
	for range processes {
		svcs = append(svcs, startKafkaService(t, kafkaStorage(t, store), cfg))
	}
	stats := func() (restored, moves, runs, commits int64) {
		for _, s := range svcs {
			st := s.svc.Stats()
			restored += st.Restores + st.FirstStarts - st.Revoked - st.Lost
			moves += st.Assigned + st.Revoked + st.Lost
			runs += st.Collections
			commits += st.Commits
		}
		return restored, moves, runs, commits
	}
	// Settled: every partition runs and none moved for a grace (so that
	// records are deleted as they are put).
	deadline := time.Now().Add(time.Minute)
	for lastMoves, since := int64(-1), time.Now(); time.Since(since) < cfg.Grace+time.Second; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the group did not settle")
		}
		if n, moves, _, _ := stats(); n != partitions || moves != lastMoves {
			lastMoves, since = moves, time.Now()
		}
	}
	// The window starts and ends just after a run of the deletion rule
	// (counted once its requests are done), so that it holds whole runs.
	afterRun := func() (costCounts, int64, int64, time.Time) {
		_, _, r, _ := stats()
		for deadline := time.Now().Add(10 * collect); ; time.Sleep(time.Millisecond) {
			if _, _, r1, _ := stats(); r1 > r {
				c := store.snapshot()
				_, _, _, commits := stats()
				return c, r1, commits, time.Now()
			}
			if time.Now().After(deadline) {
				t.Fatal("no run of the deletion rule")
			}
		}
	}
	c0, r0, n0, t0 := afterRun()
	time.Sleep(6 * time.Second)
	c1, r1, n1, t1 := afterRun()
	close(stop)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	counted := costCounts{Puts: c1.Puts - c0.Puts, Gets: c1.Gets - c0.Gets, Lists: c1.Lists - c0.Lists, Deletes: c1.Deletes - c0.Deletes}
	// The job's checkpoints (commits per process) and runs of the rule in
	// the window; the month's model takes one of each per interval, as
	// the job does.
	window := t1.Sub(t0)
	k, runs := float64(n1-n0)/processes, float64(r1-r0)
	t.Logf("window %v: %v checkpoints (%v by the clock), %v runs of the deletion rule (%v by the clock)",
		window.Round(time.Millisecond), k, window.Seconds()/interval.Seconds(), runs, window.Seconds()/collect.Seconds())
	if k < 20 || runs < 5 {
		t.Fatalf("%v checkpoints and %v runs of the deletion rule in the window: too few to compare", k, runs)
	}
	if byClock := window.Seconds() / interval.Seconds(); math.Abs(k-byClock) > 0.15*byClock {
		t.Errorf("%v checkpoints in %v: the model takes one every %v", k, window, interval)
	}
	if byClock := window.Seconds() / collect.Seconds(); math.Abs(runs-byClock) > 0.15*byClock {
		t.Errorf("%v runs of the deletion rule in %v: the model takes one every %v", runs, window, collect)
	}

	w := costWorkload{Writers: partitions, CheckpointInterval: interval, Retain: 1, MaterializeInterval: materialize}
	jo := costJobOptions{coordinator: "kafka", grace: cfg.Grace, collectInterval: collect}
	// The storages upload each partition's log apart (kafkaStorage).
	est := kafkaCounts(processes, k, runs, w, jo, partitions, 1000)
	t.Logf("estimate %+v", est)
	t.Logf("counted  %+v", counted)
	for _, c := range compareCounts(est, counted) {
		if c.request && !c.ok() {
			t.Errorf("%s: the model says %.1f, the run counted %.0f (more than %.0f %% apart)", c.name, c.estimate, c.counted, costTolerance*100)
		}
	}
	// The month's model is the same counts at the job's rates.
	month, _ := jobMonth(w, jo, processes, partitions, 1000)
	if want := kafkaCounts(processes, float64(costMonth/interval), float64(costMonth/collect), w, jo, partitions, 1000); month.Puts != want.Puts || month.Gets != want.Gets || month.Lists != want.Lists || month.Deletes != want.Deletes {
		t.Errorf("a month: %+v, want %+v", month, want)
	}
	for _, s := range svcs {
		s.stop(t)
	}
}

// TestCostKafkaAtScale: the model of the kafkastate job that
// BenchmarkRequestsAtScale of kafkastate measures (256 partitions on 4
// processes, docs/KAFKA.md "Requests at scale", at the defaults' pace)
// gives its requests per checkpoint: 4 record puts, 3 record gets, the
// deletion rule's 3 listings of 6 pages (records 528 names, the prefix
// about 3,600) every 12 checkpoints.
func TestCostKafkaAtScale(t *testing.T) {
	w := costWorkload{Writers: 256, CheckpointInterval: 5 * time.Second, Retain: 1, MaterializeInterval: time.Minute}
	jo := costJobOptions{coordinator: "kafka", grace: 10 * time.Minute, collectInterval: time.Minute}
	const k = 1200 // checkpoints: 100 runs of the deletion rule
	c := kafkaCounts(4, k, k/12, w, jo, 3.84, 1000)
	for _, x := range []struct {
		name      string
		got, want float64
	}{
		{"PUT", c.Puts / k, 4 + 1.0/12}, // the records, the clock probe
		{"GET", c.Gets / k, 3},
		{"LIST pages", c.Lists / k, 6.0 / 12},
		{"DELETE", c.Deletes / k, 4 + 1.0/12},
	} {
		if math.Abs(x.got-x.want) > 1e-9 {
			t.Errorf("%s per checkpoint: %.4f, want %.4f", x.name, x.got, x.want)
		}
	}
}
