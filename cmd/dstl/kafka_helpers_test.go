package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/kafkastate"
	"github.com/dstlgo/dstl/statestore"
)

// The kafkastate job of the tests: a word count of topic "words" by
// group "counters".
const (
	kafkaTopic = "words"
	kafkaGroup = "counters"
)

// wordCounts is a partition's state in the tests' kafkastate job.
type wordCounts = *statestore.KeyValueStore[string, int64]

// newKafkaCluster starts an in-process Kafka cluster with the topic of
// partitions partitions.
func newKafkaCluster(t *testing.T, partitions int) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), kafkaTopic), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// produceWords produces n records of two words each, round robin over
// the partitions, and returns the count of each word.
func produceWords(t *testing.T, brokers []string, n int, want map[string]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(kafkaTopic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	words := strings.Fields("the of and to in is was he for it with as")
	rs := make([]*kgo.Record, n)
	for i := range rs {
		a, b := words[i%len(words)], words[(i/5)%len(words)]
		want[a]++
		want[b]++
		rs[i] = &kgo.Record{Value: []byte(a + " " + b)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// kafkaJobConfig is the tests' kafkastate job: a checkpoint every
// interval, a group that rebalances quickly, and the shortest grace its
// timeouts allow.
func kafkaJobConfig(brokers []string, interval time.Duration) kafkastate.Config[wordCounts] {
	return kafkastate.Config[wordCounts]{
		Brokers: brokers, Topic: kafkaTopic, Group: kafkaGroup,
		NewState: func(_ kafkastate.PartitionInfo, log *dstl.Writer) (wordCounts, []statestore.Store, error) {
			kv, err := statestore.NewKeyValueStore("counts", log, statestore.StringCodec{}, statestore.Int64Codec{}, kafkastate.StoreOptions()...)
			return kv, []statestore.Store{kv}, err
		},
		Process: func(_ context.Context, r *kgo.Record, p *kafkastate.Partition[wordCounts]) error {
			for _, w := range strings.Fields(string(r.Value)) {
				n, _, err := p.State.Get(w)
				if err != nil {
					return err
				}
				if err := p.State.Put(w, n+1); err != nil {
					return err
				}
			}
			return nil
		},
		CheckpointInterval: interval, Grace: 6 * time.Second, CollectInterval: -1, CommitTimeout: time.Second,
		Logger: slog.New(slog.DiscardHandler),
		ClientOptions: []kgo.Opt{kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100 * time.Millisecond),
			kgo.RebalanceTimeout(2 * time.Second), kgo.FetchMaxWait(100 * time.Millisecond)},
	}
}

// kafkaStorage returns a storage of job "job" on b.
func kafkaStorage(t *testing.T, b backends.Backend) *dstl.Storage {
	t.Helper()
	cfg := dstl.DefaultConfig("mem://cmd-test")
	cfg.JobID = "job"
	cfg.BatchPersistDelay = dstl.NoBatchDelay
	s, err := dstl.New(cfg, b, dstl.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// kafkaService is a kafkastate service running in its goroutine.
type kafkaService struct {
	svc    *kafkastate.Service[wordCounts]
	cancel context.CancelFunc
	done   chan error
}

// startKafkaService starts a service of the tests' job on storage.
func startKafkaService(t *testing.T, storage *dstl.Storage, cfg kafkastate.Config[wordCounts]) *kafkaService {
	t.Helper()
	svc, err := kafkastate.New(storage, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &kafkaService{svc: svc, cancel: cancel, done: make(chan error, 1)}
	go func() { k.done <- svc.Run(ctx) }()
	t.Cleanup(func() { k.stop(t) })
	return k
}

// waitFor waits until cond holds of the service's stats, for a minute at
// most.
func (k *kafkaService) waitFor(t *testing.T, what string, cond func(kafkastate.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond(k.svc.Stats()) {
		select {
		case err := <-k.done:
			k.done <- err
			t.Fatalf("waiting for %s: the service stopped: %v", what, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: stats %+v", what, k.svc.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop stops the service (a last checkpoint) and checks Run's error.
func (k *kafkaService) stop(t *testing.T) {
	t.Helper()
	k.cancel()
	select {
	case err, ok := <-k.done:
		if ok {
			close(k.done)
			if err != nil {
				t.Errorf("the service: %v", err)
			}
		}
	case <-time.After(time.Minute):
		t.Fatal("the service did not stop")
	}
}

// loadCounts restores every partition from the records the group's
// offsets name and returns the counts of all of them.
func loadCounts(t *testing.T, b backends.Backend, cfg kafkastate.Config[wordCounts], partitions int) map[string]int64 {
	t.Helper()
	states, release, err := kafkastate.Load(context.Background(), kafkaStorage(t, b), cfg, partitions)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	got := map[string]int64{}
	for _, st := range states {
		for w, n := range st.State.All() {
			got[w] += n
		}
	}
	return got
}

// diffCounts says how got differs from want, "" for not at all.
func diffCounts(want, got map[string]int64) string {
	var b strings.Builder
	for w, n := range want {
		if got[w] != n {
			fmt.Fprintf(&b, "%q: %d, want %d; ", w, got[w], n)
		}
	}
	for w, n := range got {
		if _, ok := want[w]; !ok {
			fmt.Fprintf(&b, "%q: %d, want none; ", w, n)
		}
	}
	return b.String()
}
