// Command counter is the shortest service of P instances on package job:
// it keeps, for each key of a partitioned input, the total of the
// amounts its records carry, exactly once, in Q processes on one bucket
// or one directory. The code a user writes is in this file, 60 lines,
// comments and blank lines aside: the flags and the wiring of the storage,
// the catalog and the runner (run, 23 lines), an instance's state and the
// restore of its input offsets (open, 17 lines), and the processing (task,
// 20 lines). input.go stands in for the input (a Kafka topic, say), and
// verify.go checks the service.
//
//	counter run [-base-path DIR|URL] [-instances P] [-processes Q] [-process I] [flags]
//	            process I of Q, running its share of the P instances
//	counter verify [flags]
//	            run the processes, kill (SIGKILL) and restart random ones,
//	            and check the state the job checkpoints (exit 1 if
//	            anything is off)
//
// Each instance owns a range of the job's 16 key groups and reads the
// input partitions of its key groups: partition k holds the records of
// the keys of key group k. Its state is a key-value store of totals.
// job.Run takes a checkpoint of every instance at each interval (the
// totals, and the input offsets the task's Metadata returns), commits it
// to the job's catalog, and, after a restart or a rescale (another
// -instances or -processes), restores the latest complete checkpoint: the
// totals, and the offsets open seeks to. The job keeps its log,
// snapshots and catalog under -base-path, a directory of the local disk
// by default, or any URL of the dstl backends.
//
// verify starts the processes as child processes on one base path (a new
// temporary directory by default), kills a random one (SIGKILL) every
// -kill-every on average and restarts it, until there were -kills kills.
// Meanwhile it restores, at every kill, the latest complete checkpoint
// (found with catalog.Inspect) and checks its totals against a
// computation of the input up to the checkpoint's offsets, and that no
// offset went back since the checkpoint checked before. Once the kills
// are over it waits for a complete checkpoint that holds the whole input,
// stops the processes (SIGTERM), and checks the latest complete
// checkpoint's totals against the totals of the whole input. It prints
// the kills, the checks and the checkpoints, and exits 1 on any mismatch
// (or after -timeout), 3 if it could not run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	_ "github.com/dstlgo/dstl/backends/all" // every backend: local, s3, gcs, azure, gocloud
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/examples/internal/child"
	"github.com/dstlgo/dstl/internal/flagusage"
	"github.com/dstlgo/dstl/job"
	"github.com/dstlgo/dstl/statestore"
)

// keyGroups is the job's number of key groups, and the input's number of
// partitions: the same in every run of a job.
const keyGroups = 16

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := 2
	switch {
	case len(os.Args) > 1 && os.Args[1] == "run":
		code = 0
		err := run(ctx, os.Args[2:])
		switch {
		case errors.Is(err, flag.ErrHelp):
			code = 2
		case err != nil && ctx.Err() == nil: // stopped: no error
			fmt.Fprintln(os.Stderr, "counter run:", err)
			code = 1
		}
	case len(os.Args) > 1 && os.Args[1] == "verify":
		code = verifyMain(ctx, os.Args[2:], child.Self, os.Stdout, os.Stderr)
	default:
		fmt.Fprintln(os.Stderr, "usage: counter run|verify [flags] (--help for the flags)")
	}
	os.Exit(code)
}

// run runs process -process of -processes until ctx ends.
func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("counter run", flag.ContinueOnError)
	flagusage.Set(fs)
	basePath := fs.String("base-path", filepath.Join(os.TempDir(), "dstl-counter"), "where the log, snapshots and catalog go: a directory, or a URL of a dstl backend")
	jobID := fs.String("job-id", "counter", "the job: the prefix of its objects")
	instances := fs.Int("instances", 4, "instances of the job (P), each owning a share of the key groups")
	processes := fs.Int("processes", 2, "processes that run them (Q)")
	process := fs.Int("process", 0, "this process, 0 to Q-1")
	interval := fs.Duration("checkpoint-interval", time.Second, "time between two checkpoints")
	inputFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := dstl.DefaultConfig(*basePath)
	cfg.JobID = *jobID
	storage, err := dstl.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer storage.Close()
	coord := job.NewCatalog(storage.Backend(), catalog.Config{JobID: *jobID, Instances: *instances, Processes: *processes,
		Process: *process, MaxParallelism: keyGroups}, *interval, collect.Options{})
	return job.Run(ctx, storage, coord, job.Config{Interval: *interval}, open)
}

// open makes an instance's state and its task, which reads the input
// partitions of the instance's key groups from the offsets restored.
func open(ctx context.Context, in *job.Instance) (job.Task, error) {
	totals, err := statestore.NewKeyValueStore("totals", in.Log(), statestore.StringCodec{}, statestore.Int64Codec{},
		statestore.WithKeyGroups(in.KeyGroups), statestore.WithMaxParallelism(in.MaxParallelism))
	if err != nil {
		return nil, err
	}
	if err := in.Register(totals); err != nil {
		return nil, err
	}
	input := subscribe(in.KeyGroups)
	for _, offsets := range in.Restored { // several parts after a rescale
		if err := input.Seek(offsets); err != nil {
			return nil, err
		}
	}
	return &task{totals: totals, input: input}, nil
}

// task adds up the amounts of its input's records by key.
type task struct {
	totals *statestore.KeyValueStore[string, int64]
	input  *consumer
}

// Process adds the records that arrived, a hundred at most.
func (t *task) Process(ctx context.Context) (int, error) {
	n := 0
	for key, amount := range t.input.Poll(100) {
		total, _, err := t.totals.Get(key)
		if err != nil {
			return n, err
		}
		if err := t.totals.Put(key, total+amount); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Metadata returns the input's offsets: a checkpoint holds them beside
// the totals, and open seeks to them.
func (t *task) Metadata(int64) map[string]string { return t.input.Offsets() }

// Complete has nothing to publish: the totals are the output.
func (t *task) Complete(context.Context, int64) error { return nil }
