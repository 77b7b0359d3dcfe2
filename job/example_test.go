package job_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"time"

	_ "github.com/dstlgo/dstl/backends/local" // registers the local disk as "local" and file://
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/job"
	"github.com/dstlgo/dstl/statestore"
)

// sum is a task that adds the numbers 1, 2, 3, ... of its input into a
// state store, and remembers how far it read.
type sum struct {
	total *statestore.KeyValueStore[string, int64]
	next  int64      // the next number to read
	until int64      // the input ends here
	last  int64      // the total after the last number read
	read  chan int64 // gets the total once the input is read
}

func (s *sum) Process(ctx context.Context) (int, error) {
	if s.next > s.until {
		if s.read != nil {
			s.read <- s.last // the input is read
			s.read = nil
		}
		return 0, nil
	}
	t, _, err := s.total.Get("total")
	if err != nil {
		return 0, err
	}
	if err := s.total.Put("total", t+s.next); err != nil {
		return 0, err
	}
	s.last = t + s.next
	s.next++
	return 1, nil
}

func (s *sum) Metadata(int64) map[string]string {
	return map[string]string{"next": strconv.FormatInt(s.next, 10)}
}

func (s *sum) Complete(context.Context, int64) error { return nil }

// Example runs a job of one instance on local disk twice: the second run
// restores the state and the input position that the first one
// checkpointed, and goes on from there.
func Example() {
	dir, err := os.MkdirTemp("", "job-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	run := func(until int64) int64 {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cfg := dstl.DefaultConfig(dir)
		cfg.JobID = "sum"
		storage, err := dstl.Open(ctx, cfg)
		if err != nil {
			log.Fatal(err)
		}
		defer storage.Close()
		read := make(chan int64, 1)
		open := func(ctx context.Context, in *job.Instance) (job.Task, error) {
			total, err := statestore.NewKeyValueStore("total", in.Log(), statestore.StringCodec{}, statestore.Int64Codec{},
				statestore.WithKeyGroups(in.KeyGroups), statestore.WithMaxParallelism(in.MaxParallelism))
			if err != nil {
				return nil, err
			}
			if err := in.Register(total); err != nil {
				return nil, err
			}
			task := &sum{total: total, next: 1, until: until, read: read}
			for _, meta := range in.Restored {
				if task.next, err = strconv.ParseInt(meta["next"], 10, 64); err != nil {
					return nil, err
				}
			}
			return task, nil
		}
		coord := job.NewCatalog(storage.Backend(), catalog.Config{JobID: "sum", Instances: 1}, 50*time.Millisecond, collect.Options{})
		done := make(chan error, 1)
		go func() { done <- job.Run(ctx, storage, coord, job.Config{Interval: 50 * time.Millisecond}, open) }()
		total := <-read // the input is read
		cancel()        // a last checkpoint, then Run returns
		if err := <-done; err != nil {
			log.Fatal(err)
		}
		return total
	}
	fmt.Println("1 to 100:", run(100))
	fmt.Println("1 to 200:", run(200)) // restores 1 to 100, adds 101 to 200
	// Output:
	// 1 to 100: 5050
	// 1 to 200: 20100
}
