// Command kafkawordcount is an example service built on package
// kafkastate: an exactly-once word count of a Kafka topic, each input
// partition's counts in a state store checkpointed to the object store:
// each checkpoint of a process puts one record of its partitions' state
// handles, and commits the partitions' offsets to the consumer group with
// metadata naming it. It runs as several processes of one consumer group;
// killed, stopped or scaled out, each partition resumes from the record its
// committed offset names, so that the counts come out exactly as in a run
// without a fault.
//
//	kafkawordcount run    -brokers HOST:PORT -base-path URL [flags]
//	                      one process of the service: count, checkpoint,
//	                      print events (one line each)
//	kafkawordcount verify [-brokers HOST:PORT] [flags]
//	                      host a kfake cluster on a loopback port (or use
//	                      -brokers), produce the input while 3 processes
//	                      count it, SIGKILL and SIGSTOP random ones,
//	                      restart the killed ones, scale out to 4 during a
//	                      rebalance, stop them all, then restore every
//	                      partition's latest checkpoint and compare it with
//	                      an independent count of the input (exit 1 if
//	                      anything is off)
//
// # Output
//
// With -output TOPIC the service also produces, for each word of each input
// record, one record to TOPIC, the word as key and its new count as value.
// With -transactional the output goes in Kafka transactions that follow the
// checkpoints holding it (exactly-once; read it with isolation
// read_committed); without, it is produced at once and flushed before each
// checkpoint (at least once). verify runs with both, and also checks that
// the output topic, read with read_committed, has exactly one record per
// word of the input.
//
// # Against a real broker
//
//	go run ./examples/kafkawordcount verify -brokers localhost:9092
//
// creates the topics (with a unique suffix), and runs the same checks with
// the processes pointed at that broker (Kafka or Redpanda). The group's
// session timeout is then -session-timeout (6 s by default, the brokers'
// usual minimum), and faults are spaced accordingly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	_ "github.com/dstlgo/dstl/backends/all" // every backend: local, s3, gcs, azure, gocloud
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/examples/internal/child"
	"github.com/dstlgo/dstl/internal/flagusage"
	"github.com/dstlgo/dstl/kafkastate"
	"github.com/dstlgo/dstl/statestore"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kafkawordcount run|verify [flags] (--help for the flags)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var code int
	switch os.Args[1] {
	case "run":
		code = runMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "verify":
		code = verifyMain(ctx, os.Args[2:], child.Self, os.Stdout, os.Stderr)
	default:
		fmt.Fprintf(os.Stderr, "kafkawordcount: unknown command %q (run, verify)\n", os.Args[1])
		code = 2
	}
	os.Exit(code)
}

// options are the service's flags.
type options struct {
	brokers        string
	topic          string
	group          string
	basePath       string
	jobID          string
	interval       time.Duration
	grace          time.Duration
	sessionTimeout time.Duration
	commitTimeout  time.Duration
	output         string
	transactional  bool
}

func (o *options) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.brokers, "brokers", "", "the Kafka brokers, comma-separated host:port")
	fs.StringVar(&o.topic, "topic", "lines", "the input topic")
	fs.StringVar(&o.group, "group", "kafkawordcount", "the consumer group")
	fs.StringVar(&o.basePath, "base-path", "", "where the state's log, snapshots and checkpoint records go: a path or a URL of a dstl backend")
	fs.StringVar(&o.jobID, "job-id", "kafkawordcount", "the job: prefix of its objects")
	fs.DurationVar(&o.interval, "checkpoint-interval", time.Second, "time between checkpoints")
	fs.DurationVar(&o.grace, "grace", 2*time.Minute, "age before an object no kept record names is deleted: at least twice four session timeouts (the rebalance and transaction timeouts) plus --commit-timeout")
	fs.DurationVar(&o.sessionTimeout, "session-timeout", 6*time.Second, "the group's session timeout; the rebalance and transaction timeouts are four times as long")
	fs.DurationVar(&o.commitTimeout, "commit-timeout", 10*time.Second, "the longest a checkpoint's commit may take")
	fs.StringVar(&o.output, "output", "", "produce each word's new count to this topic")
	fs.BoolVar(&o.transactional, "transactional", false, "produce the output in transactions that follow the checkpoints (exactly-once)")
}

func (o *options) check() error {
	switch {
	case o.brokers == "":
		return errors.New("-brokers is required")
	case o.basePath == "":
		return errors.New("-base-path is required")
	case o.transactional && o.output == "":
		return errors.New("-transactional needs -output")
	}
	return nil
}

// counts is a partition's state: the count of each word.
type counts = *statestore.KeyValueStore[string, int64]

func newCounts(_ kafkastate.PartitionInfo, log *dstl.Writer) (counts, []statestore.Store, error) {
	kv, err := statestore.NewKeyValueStore("counts", log, statestore.StringCodec{}, statestore.Int64Codec{}, kafkastate.StoreOptions()...)
	if err != nil {
		return nil, nil, err
	}
	return kv, []statestore.Store{kv}, nil
}

// serviceConfig is the service's configuration, for run and for verify's
// final restore.
func serviceConfig(o options, log *slog.Logger) kafkastate.Config[counts] {
	cfg := kafkastate.Config[counts]{
		Brokers: strings.Split(o.brokers, ","), Topic: o.topic, Group: o.group,
		NewState: newCounts,
		Process: func(_ context.Context, r *kgo.Record, p *kafkastate.Partition[counts]) error {
			for _, w := range strings.Fields(string(r.Value)) {
				n, _, err := p.State.Get(w)
				if err != nil {
					return err
				}
				if err := p.State.Put(w, n+1); err != nil {
					return err
				}
				if o.output != "" {
					p.Produce(&kgo.Record{Topic: o.output, Key: []byte(w), Value: strconv.AppendInt(nil, n+1, 10)})
				}
			}
			return nil
		},
		CheckpointInterval: o.interval, Grace: o.grace, CollectInterval: 5 * o.interval,
		MaterializeInterval: 10 * o.interval, CommitTimeout: o.commitTimeout, Logger: log,
		ClientOptions: []kgo.Opt{
			kgo.TransactionTimeout(4 * o.sessionTimeout),
			kgo.SessionTimeout(o.sessionTimeout), kgo.HeartbeatInterval(o.sessionTimeout / 6),
			kgo.RebalanceTimeout(4 * o.sessionTimeout), kgo.FetchMaxWait(200 * time.Millisecond),
		},
	}
	if o.transactional {
		cfg.TransactionalID = o.group
	}
	return cfg
}

// event line: "kafkawordcount: KIND partition P offset O generation G checkpoint N".
const eventPrefix = "kafkawordcount: "

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("kafkawordcount run", flag.ContinueOnError)
	flagusage.Set(fs)
	fs.SetOutput(stderr)
	o.flags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "kafkawordcount run: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(ctx, o, log, stdout); err != nil {
		fmt.Fprintf(stderr, "kafkawordcount run: %v\n", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, o options, log *slog.Logger, events io.Writer) error {
	cfg := dstl.DefaultConfig(o.basePath)
	cfg.JobID = o.jobID
	storage, err := dstl.Open(ctx, cfg, dstl.WithLogger(log))
	if err != nil {
		return err
	}
	defer storage.Close()
	scfg := serviceConfig(o, log)
	scfg.OnEvent = func(e kafkastate.Event) {
		if e.Kind == kafkastate.EventCheckpoint {
			return // too many to print
		}
		fmt.Fprintf(events, "%s%s partition %d offset %d generation %d checkpoint %d\n",
			eventPrefix, e.Kind, e.Partition, e.Offset, e.Generation, e.Checkpoint)
	}
	svc, err := kafkastate.New(storage, scfg)
	if err != nil {
		return err
	}
	return svc.Run(ctx)
}
