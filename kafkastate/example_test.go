package kafkastate_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	_ "github.com/dstlgo/dstl/backends/local" // registers local paths and file://
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/kafkastate"
	"github.com/dstlgo/dstl/statestore"
)

// A word count of a topic of two partitions on an in-process Kafka
// (franz-go's kfake), its state on local disk: the service counts the
// lines and stops, which commits a last checkpoint; Load, on a storage opened
// afresh as a restarted process opens it, then restores every partition from
// the record its committed offset names.
func Example() {
	ctx := context.Background()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "lines"))
	check(err)
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	// The input: three lines, round robin over the partitions.
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("lines"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	check(err)
	for _, line := range []string{"to be or not to be", "that is the question", "to be"} {
		check(producer.ProduceSync(ctx, &kgo.Record{Value: []byte(line)}).FirstErr())
	}
	producer.Close()

	dir, err := os.MkdirTemp("", "kafkastate-example-")
	check(err)
	defer os.RemoveAll(dir)
	scfg := dstl.DefaultConfig(dir) // or a URL: s3://bucket/prefix, ...
	scfg.JobID = "wordcount"
	storage, err := dstl.Open(ctx, scfg)
	check(err)

	type counts = *statestore.KeyValueStore[string, int64]
	cfg := kafkastate.Config[counts]{
		Brokers: brokers, Topic: "lines", Group: "wordcount",
		NewState: func(_ kafkastate.PartitionInfo, log *dstl.Writer) (counts, []statestore.Store, error) {
			kv, err := statestore.NewKeyValueStore("counts", log, statestore.StringCodec{}, statestore.Int64Codec{},
				kafkastate.StoreOptions()...)
			return kv, []statestore.Store{kv}, err
		},
		Process: func(_ context.Context, r *kgo.Record, p *kafkastate.Partition[counts]) error {
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
		CheckpointInterval: time.Second,
		Logger:             slog.New(slog.DiscardHandler),
	}
	svc, err := kafkastate.New(storage, cfg)
	check(err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	for svc.Stats().Records < 3 { // every line counted
		select {
		case err := <-done:
			log.Fatalf("the service stopped: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	stop()
	check(<-done) // the last checkpoint is committed
	check(storage.Close())

	// What a restore finds, in a process of its own with a storage of its
	// own: each partition's state at its committed offset.
	restored, err := dstl.Open(ctx, scfg)
	check(err)
	defer restored.Close()
	states, release, err := kafkastate.Load(ctx, restored, cfg, 2)
	check(err)
	defer release()
	total := map[string]int64{}
	var offsets int64
	for _, l := range states {
		offsets += l.Offset
		for w, n := range l.State.All() {
			total[w] += n
		}
	}
	fmt.Println("lines committed:", offsets)
	for _, w := range slices.Sorted(maps.Keys(total)) {
		fmt.Println(w, total[w])
	}
	// Output:
	// lines committed: 3
	// be 3
	// is 1
	// not 1
	// or 1
	// question 1
	// that 1
	// the 1
	// to 3
}

// check ends the program on an error.
func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
