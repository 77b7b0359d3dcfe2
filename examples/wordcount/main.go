// Command wordcount is an example service built on package statestore: it
// counts the words of a generated stream in a key-value store whose every
// change goes to the DSTL, checkpoints every second, and after a crash
// restores its last completed checkpoint and goes on from the stream offset
// that checkpoint holds, so that its counts come out exactly as in a run
// without the crash.
//
//	wordcount run    [flags]   the service: count the stream, print the counts at its end
//	wordcount verify [flags]   start the service, wait for its first completed
//	                           checkpoint, kill it (SIGKILL) at a random moment
//	                           after that, restart it, and check that it restored
//	                           a checkpoint and that its counts are those of a run
//	                           without the crash (exit 1 if not)
//
// With no -base-path, verify works in a new temporary directory (the local
// backend). Any base path of the dstl backends works, for instance MinIO:
//
//	AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... go run ./examples/wordcount verify \
//	    -base-path "s3://bucket/wordcount?endpoint=http://127.0.0.1:9000&region=us-east-1&use_path_style=true"
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/dstlgo/dstl/backends"
	_ "github.com/dstlgo/dstl/backends/all" // every backend: local, s3, gcs, azure, gocloud
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/duplicating"
	"github.com/dstlgo/dstl/statestore"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: wordcount run|verify [flags] (-h for the flags)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var code int
	switch os.Args[1] {
	case "run":
		code = runMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "verify":
		code = verifyMain(ctx, os.Args[2:], selfCommand, os.Stdout, os.Stderr)
	default:
		fmt.Fprintf(os.Stderr, "wordcount: unknown command %q (run, verify)\n", os.Args[1])
		code = 2
	}
	os.Exit(code)
}

// options are the service's flags; verify passes them on to the service.
type options struct {
	basePath   string
	jobID      string
	records    int64
	seed       uint64
	rate       int // records per second
	interval   time.Duration
	output     string
	localDir   string
	materalize time.Duration
}

func (o *options) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.basePath, "base-path", "", "where the log, snapshots and checkpoints go: a path or a URL of a dstl backend (s3://, gs://, azblob://, file://, mem://)")
	fs.StringVar(&o.jobID, "job-id", "", "prefix of the job's objects (verify: default a new unique one)")
	fs.Int64Var(&o.records, "records", 60000, "records in the stream")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the stream")
	fs.IntVar(&o.rate, "rate", 12000, "records processed per second")
	fs.DurationVar(&o.interval, "checkpoint-interval", time.Second, "time between checkpoints")
	fs.DurationVar(&o.materalize, "materialize-interval", 2*time.Second, "materialise the state when the log since the last snapshot is this old")
	fs.StringVar(&o.output, "output", "", "write the final counts here as JSON (default: standard output)")
	fs.StringVar(&o.localDir, "local-recovery-dir", "", "keep local copies here and restore from them (local recovery)")
}

// The stream: record i is a line of 1 to 6 words, drawn from its own
// generator, so that any offset can be produced again without the ones
// before it.
var vocabulary = strings.Fields(`the of and to in is was he for it with as his on be at by had are but from or
	have an they which one you were her all she there would their we him been has when who will more no
	if out so said what up its about into than them can only other new some could time these two may then
	do first any my now such like our over man me even most made after also did many before must through
	back years where much your way well down should because each just those people state how too little`)

func record(seed uint64, i int64) []string {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	words := make([]string, 1+r.IntN(6))
	for j := range words {
		// a skewed choice: some words are much more frequent
		words[j] = vocabulary[r.IntN(1+r.IntN(len(vocabulary)))]
	}
	return words
}

// expected counts the stream in memory, as a run without a crash does.
func expected(seed uint64, records int64) map[string]int64 {
	counts := map[string]int64{}
	for i := range records {
		for _, w := range record(seed, i) {
			counts[w]++
		}
	}
	return counts
}

const (
	// restoredMessage starts the line a run prints when it restored a
	// checkpoint; verify checks that the restarted run printed it.
	restoredMessage = "restored checkpoint"
	offsetKey       = "stream-offset"
	maxParallelism  = 128
)

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("wordcount run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.flags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.basePath == "" {
		fmt.Fprintln(stderr, "wordcount run: -base-path is required")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	counts, err := run(ctx, o, log, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "wordcount run: %v\n", err)
		return 1
	}
	out := stdout
	if o.output != "" {
		f, err := os.Create(o.output)
		if err != nil {
			fmt.Fprintf(stderr, "wordcount run: %v\n", err)
			return 1
		}
		defer f.Close()
		out = f
	}
	if err := json.NewEncoder(out).Encode(counts); err != nil {
		fmt.Fprintf(stderr, "wordcount run: %v\n", err)
		return 1
	}
	return 0
}

// run is the service: restore, then count from the restored offset to the
// end of the stream, checkpointing every interval. Its result comes from
// the state only.
func run(ctx context.Context, o options, log *slog.Logger, progress io.Writer) (map[string]int64, error) {
	cfg := dstl.DefaultConfig(o.basePath)
	cfg.JobID = o.jobID
	if o.localDir != "" {
		cfg.LocalRecoveryEnabled, cfg.LocalRecoveryDir = true, o.localDir
	}
	storage, err := dstl.Open(ctx, cfg, dstl.WithLogger(log), dstl.WithLocalRecovery(duplicating.Open))
	if err != nil {
		return nil, err
	}
	defer storage.Close()
	cp, err := statestore.NewCheckpointer(storage, statestore.Config{
		Operator: "wordcount-0", KeyGroups: dstl.KeyGroupRange{Start: 0, End: maxParallelism - 1},
		MaxParallelism: maxParallelism, MaterializeInterval: o.materalize, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	defer cp.Close()
	counts, err := statestore.NewKeyValueStore("counts", cp.Log(), statestore.StringCodec{}, statestore.Int64Codec{},
		statestore.WithMaxParallelism(maxParallelism))
	if err != nil {
		return nil, err
	}
	// The source's position is state too: restored with the counts, it
	// makes the output exactly-once.
	source, err := statestore.NewKeyValueStore("source", cp.Log(), statestore.StringCodec{}, statestore.Int64Codec{},
		statestore.WithMaxParallelism(maxParallelism))
	if err != nil {
		return nil, err
	}
	if err := cp.Register(counts, source); err != nil {
		return nil, err
	}
	checkpoints := checkpointStore{backend: storage.Backend(), prefix: objname.JobPrefix(o.jobID) + "checkpoints/"}

	// Restore the last completed checkpoint, if there is one.
	last, err := checkpoints.latest(ctx)
	if err != nil {
		return nil, err
	}
	info := statestore.CheckpointInfo{OperatorID: "wordcount", TaskID: 0}
	if last != nil {
		info.CheckpointID, info.LastCompletedCheckpointID = last.CheckpointID, last.CheckpointID
	}
	t0 := time.Now()
	if err := cp.InitializeState(ctx, info, last); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	offset, _, err := source.Get(offsetKey)
	if err != nil {
		return nil, err
	}
	if last != nil {
		r := cp.Stats().LastRestore
		fmt.Fprintf(progress, "wordcount: %s %d in %v: offset %d, %d words; %d snapshot(s) (%d local), %d change sets (%d local)\n",
			restoredMessage, last.CheckpointID, time.Since(t0).Round(time.Millisecond), offset, counts.Len(), r.Snapshots, r.LocalSnapshots,
			r.Log.LocalSets+r.Log.RemoteSets, r.Log.LocalSets)
	} else {
		fmt.Fprintf(progress, "wordcount: first start, %d records to count\n", o.records)
	}

	id := info.LastCompletedCheckpointID
	nextCheckpoint := time.Now().Add(o.interval)
	start, startOffset := time.Now(), offset
	for offset < o.records {
		// Pace the stream at o.rate records per second.
		if ahead := time.Duration(float64(offset-startOffset)/float64(o.rate)*float64(time.Second)) - time.Since(start); ahead > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(ahead):
			}
		}
		for _, w := range record(o.seed, offset) {
			n, _, err := counts.Get(w)
			if err != nil {
				return nil, err
			}
			if err := counts.Put(w, n+1); err != nil {
				return nil, err
			}
		}
		offset++
		if err := source.Put(offsetKey, offset); err != nil {
			return nil, err
		}
		if time.Now().After(nextCheckpoint) || offset == o.records {
			id++
			if err := takeCheckpoint(ctx, cp, checkpoints, id); err != nil {
				return nil, err
			}
			nextCheckpoint = time.Now().Add(o.interval)
		}
	}
	st := cp.Stats()
	fmt.Fprintf(progress, "wordcount: counted to offset %d; checkpoint %d; %d materialisations (last snapshot %d bytes)\n",
		offset, id, st.Materializations, st.SnapshotBytes)
	result := map[string]int64{}
	for w, n := range counts.All() {
		result[w] = n
	}
	return result, nil
}

// takeCheckpoint snapshots the state, records the completed checkpoint
// durably, then tells the stores' log that it completed.
func takeCheckpoint(ctx context.Context, cp *statestore.Checkpointer, cs checkpointStore, id int64) error {
	h, err := cp.SnapshotState(ctx, statestore.CheckpointInfo{OperatorID: "wordcount", CheckpointID: id, LastCompletedCheckpointID: id - 1})
	if err != nil {
		return err
	}
	if err := cs.complete(ctx, h); err != nil {
		_ = cp.NotifyCheckpointAborted(ctx, id)
		return err
	}
	return cp.NotifyCheckpointComplete(ctx, id)
}

// checkpointStore keeps completed checkpoints' handles as objects of the
// same backend, CHECKPOINT-ID.ckp under a prefix: the job's record of its
// last completed checkpoint, which a checkpoint coordinator would keep.
type checkpointStore struct {
	backend backends.Backend
	prefix  string
}

func (c checkpointStore) name(id int64) string { return fmt.Sprintf("%s%020d.ckp", c.prefix, id) }

// complete writes the handle (create-only, atomic), then does the job's
// share of the clean-up: the log objects of completed checkpoints belong to
// the job (dstl.Writer.Confirm), so once a checkpoint is recorded it
// deletes the log objects that the older records name and this one does
// not (the checkpointer appends to the log after its last snapshot only, so
// no later checkpoint names them again), then the older records. Snapshot
// objects are the checkpointer's to delete. What a crash leaves behind
// (objects uploaded after the last checkpoint, or not yet deleted) is for
// `dstl gc`, run with the last record's log handles kept.
func (c checkpointStore) complete(ctx context.Context, h *statestore.CheckpointHandle) error {
	b, err := h.MarshalBinary()
	if err != nil {
		return err
	}
	if err := c.backend.Put(ctx, c.name(h.CheckpointID), bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("record checkpoint %d: %w", h.CheckpointID, err)
	}
	names, err := c.list(ctx)
	if err != nil {
		return err
	}
	kept := logObjects(h)
	for _, n := range names {
		if n >= c.name(h.CheckpointID) {
			continue
		}
		old, err := c.read(ctx, n)
		if err != nil {
			return err
		}
		for obj := range logObjects(old) {
			if !kept[obj] {
				if err := c.backend.Delete(ctx, obj); err != nil && !errors.Is(err, backends.ErrNotFound) {
					return fmt.Errorf("delete log object of checkpoint %d: %w", old.CheckpointID, err)
				}
			}
		}
		if err := c.backend.Delete(ctx, n); err != nil && !errors.Is(err, backends.ErrNotFound) {
			return err
		}
	}
	return nil
}

// logObjects returns the log objects a checkpoint handle names on the
// backend (local copies are the storage's to clean).
func logObjects(h *statestore.CheckpointHandle) map[string]bool {
	objs := map[string]bool{}
	for _, l := range h.Logs {
		for _, e := range l.Remote.Entries {
			objs[e.Object] = true
		}
	}
	return objs
}

func (c checkpointStore) list(ctx context.Context) ([]string, error) {
	var names []string
	err := c.backend.List(ctx, c.prefix, func(o backends.ObjectInfo) error {
		if strings.HasSuffix(o.Name, ".ckp") {
			names = append(names, o.Name)
		}
		return nil
	})
	sort.Strings(names)
	return names, err
}

// latest returns the handle of the last completed checkpoint, or nil.
func (c checkpointStore) latest(ctx context.Context) (*statestore.CheckpointHandle, error) {
	names, err := c.list(ctx)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	return c.read(ctx, names[len(names)-1])
}

// read reads the checkpoint record name.
func (c checkpointStore) read(ctx context.Context, name string) (*statestore.CheckpointHandle, error) {
	rc, err := c.backend.Get(ctx, name, 0, -1)
	if err != nil {
		if errors.Is(err, backends.ErrNotFound) {
			return nil, fmt.Errorf("checkpoint record vanished: %w", err)
		}
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	h := new(statestore.CheckpointHandle)
	if err := h.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("checkpoint record %s: %w", name, err)
	}
	return h, nil
}
