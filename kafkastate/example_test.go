package kafkastate_test

import (
	"context"
	"log"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/kafkastate"
	"github.com/dstlgo/dstl/statestore"
)

// A word count of topic "lines", its state checkpointed to a bucket.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	cfg := dstl.DefaultConfig("s3://bucket/wordcount?region=us-east-1")
	cfg.JobID = "wordcount"
	storage, err := dstl.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer storage.Close()

	type counts = *statestore.KeyValueStore[string, int64]
	svc, err := kafkastate.New(storage, kafkastate.Config[counts]{
		Brokers: []string{"localhost:9092"},
		Topic:   "lines",
		Group:   "wordcount",
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
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := svc.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
