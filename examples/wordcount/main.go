// Command wordcount is an example service built on packages statestore and
// catalog: an exactly-once word count that runs as several processes
// (instances) on one bucket, with no other service. Each instance counts
// the words of its key groups in a key-value store whose every change goes
// to the DSTL, and commits its part of a checkpoint to the job's catalog
// every interval; killed, stopped, restarted or rescaled, the job restores
// its latest complete checkpoint and goes on from the input offsets that
// checkpoint holds, so that its counts come out exactly as in a run
// without a fault.
//
//	wordcount run    -instances P -index I -base-path URL -job-id ID [-state-dir DIR] [flags]
//	                 instance I of P: count, checkpoint, print events
//	wordcount verify [-disk] [flags]
//	                 run P=3 instances, SIGKILL and SIGSTOP random ones at
//	                 random moments, restart the killed ones, rescale
//	                 3 → 2 → 4, let the job finish, and check its counts and
//	                 what is left in the store (exit 1 if anything is off)
//
// # State on disk
//
// An instance keeps its counts in memory, or with -state-dir in a Pebble
// database under that directory (statestore.Config.Dir; one directory per
// instance, emptied at each start: the state is what the instance
// restores). Its materialisations are then incremental: each uploads the
// keys changed since the previous one and a slice of the rest as SST files
// (objects JOB/statestore/OPERATOR/UUIDv7.sst) and a manifest naming every
// file that holds the state; the checkpoints' parts name the files
// (CheckpointHandle.Objects), which later snapshots share, and so do the
// instances that restore them after a rescale, and the deletion rule
// deletes them as it deletes the other objects. verify -disk gives every
// instance it starts a state directory of its own under its temporary
// directory, and restores the final checkpoint on disk too.
//
// # The input
//
// The input is partitioned by key group: key group k (of 32) has its own
// stream of records, record j of partition k being 1 to 6 words drawn, from
// its own generator, among the words whose key group is k (a partition with
// no such word is empty). An instance reads exactly the partitions of its
// key groups, so the counts of a key group are in the instance that reads
// its partition, and a rescale moves a key group's state and its input
// offset together: each instance's part of a checkpoint holds, besides its
// state handle, the offset of each of its partitions (Part.Metadata), and a
// restore takes, for each key group, the state and the offset of the one
// restored part that owned it.
//
// # Checkpoints and the catalog
//
// An instance joins the job with catalog.Join: it claims its slot in the
// latest generation, or starts a new one (after a restart or a rescale),
// which restores the latest complete checkpoint and fences the older
// generations. It restores its key groups from the parts of Member.Restore
// (statestore merges several handles after a rescale), then counts. Every
// interval (checkpoint numbers follow the generation's clock, so that the
// instances' parts of a checkpoint meet) it takes a snapshot of its stores
// (SnapshotState), commits the handle, the objects the handle names and its
// offsets (Member.Commit), and tells the stores' log of the latest complete
// checkpoint (NotifyCheckpointComplete). A fenced instance stops counting,
// rejoins the latest generation and restores again; one whose slot another
// process holds, or whose configuration the latest generation no longer
// has, exits.
//
// The checkpointer deletes no snapshot object (statestore.Config
// KeepSnapshots): a fenced instance must delete nothing a newer generation
// may restore. Instance 0 of the live generation applies the catalog's
// deletion rule every collection interval: it drops the catalog objects no
// reader needs (Member.Plan, DropCatalog) and deletes the job's log and
// snapshot objects that no retained or pending checkpoint names
// (Plan.Keep) once they are older than the grace. An instance never
// commits a part that names an object created more than half the grace
// before, which no committed part named: such an object may be deleted
// already (the instance stalled between the object's upload and the
// checkpoint); it joins again instead, as a restarted process would,
// starting a generation that restores the latest complete checkpoint. The
// grace must exceed a few checkpoint intervals, and half of it must exceed
// any stall of an instance between a snapshot of its stores and the
// commit of its part.
//
// Once an instance has read all its input and a checkpoint holding it is
// complete, it writes its counts to -output (JSON) and goes on taking
// checkpoints (the other instances need its parts to complete theirs) until
// it is stopped (SIGINT, SIGTERM); a job of one instance exits then.
//
// # Verify
//
// verify runs the instances as child processes on one base path: the first
// instance count of -scales (3), then each next one (2, then 4), every
// count for -phase, stopping all instances between two counts. Meanwhile,
// every -fault-every on average, it kills (SIGKILL) a random instance and
// restarts it, or stops one (SIGSTOP) for up to -max-stop, below half the
// grace, and continues it (SIGCONT); the last count runs with faults until
// there were at least -faults. Then it lets the input end and checks:
//
//   - every process started after a checkpoint was complete restored one;
//   - the final counts of the last instances, and those of the latest
//     complete checkpoint (which verify restores as the one instance of a
//     last generation, every partition read to its end), equal an
//     independent count of the input;
//   - once the grace has passed, a last run of the deletion rule leaves in
//     the job's prefix every object the retained checkpoint names (log,
//     snapshot and catalog objects, and with -disk snapshot files), and
//     nothing else but objects younger than the grace.
//
// It prints the faults as they happen, then the numbers of kills, stops,
// restarts, rescales, restores, joins and materialisations (with -disk, of
// the restores that loaded snapshot files, and how many of the retained
// checkpoint's files the instances of an earlier count wrote), and the
// checks' results; it exits 1 on any mismatch (or after -timeout), 3 if it
// could not run.
//
// With no -base-path, verify works in a new temporary directory (the local
// backend). Any base path of the dstl backends works, for instance MinIO:
//
//	AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... go run ./examples/wordcount verify \
//	    -base-path "s3://bucket/wordcount?endpoint=http://127.0.0.1:9000&region=us-east-1&use_path_style=true"
package main

import (
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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/dstlgo/dstl/backends/all" // every backend: local, s3, gcs, azure, gocloud
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/duplicating"
	"github.com/dstlgo/dstl/examples/internal/child"
	"github.com/dstlgo/dstl/statestore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := mainCode(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usage is what "wordcount -h" prints.
const usage = `Usage: wordcount run|verify [flags]

  wordcount run -instances P -index I -base-path URL -job-id ID [-state-dir DIR] [flags]
        instance I of P: count, checkpoint, print events
  wordcount verify [-disk] [flags]
        run P=3 instances, kill and stop random ones at random moments,
        rescale 3 → 2 → 4, and check the counts and what is left in the
        store (exit 1 if anything is off)

Run "wordcount run -h" or "wordcount verify -h" for a command's flags.
`

// mainCode runs the command args names and returns the exit code.
func mainCode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "run":
		return runMain(ctx, args[1:], stdout, stderr)
	case "verify":
		return verifyMain(ctx, args[1:], child.Self, stdout, stderr)
	}
	fmt.Fprintf(stderr, "wordcount: unknown command %q (run, verify)\n", args[0])
	return 2
}

// maxParallelism is the number of key groups, and of input partitions: the
// same in every run of a job.
const maxParallelism = 32

// options are the service's flags; verify passes them on to the service.
type options struct {
	basePath    string
	jobID       string
	instances   int
	index       int
	records     int64 // per partition
	seed        uint64
	rate        int // records per second and instance
	interval    time.Duration
	materialize time.Duration
	grace       time.Duration
	collect     time.Duration
	output      string
	localDir    string
	stateDir    string
}

// flags declares the flags of both commands; verify chooses the instances
// and indexes itself.
func (o *options) flags(fs *flag.FlagSet, service bool) {
	fs.StringVar(&o.basePath, "base-path", "", "where the log, snapshots and catalog go: a path or a URL of a dstl backend (s3://, gs://, azblob://, file://, mem://)")
	fs.StringVar(&o.jobID, "job-id", "", "the job: prefix of its objects and catalog (verify: default a new unique one)")
	if service {
		fs.IntVar(&o.instances, "instances", 1, "instances the job runs as (P)")
		fs.IntVar(&o.index, "index", 0, "this instance's index, 0 to P-1")
		fs.StringVar(&o.output, "output", "", "write this instance's final counts here as JSON (default: standard output)")
		fs.StringVar(&o.localDir, "local-recovery-dir", "", "keep local copies here and restore from them (local recovery; one directory per instance)")
		fs.StringVar(&o.stateDir, "state-dir", "", "keep the state on disk, in a Pebble database under this directory, and materialise it incrementally (statestore Config.Dir; one directory per instance; default: in memory)")
	}
	fs.Int64Var(&o.records, "records", 800, fmt.Sprintf("records in %s", partitionsText()))
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the input")
	fs.IntVar(&o.rate, "rate", 500, "records an instance processes per second")
	fs.DurationVar(&o.interval, "checkpoint-interval", 300*time.Millisecond, "time between checkpoints")
	fs.DurationVar(&o.materialize, "materialize-interval", time.Second, "materialise the state when the log since the last snapshot is this old")
	fs.DurationVar(&o.grace, "grace", 3*time.Second, "age before an object that no retained checkpoint names is deleted; above a few checkpoint intervals")
	fs.DurationVar(&o.collect, "collect-interval", time.Second, "time between two runs of the deletion rule (by instance 0)")
}

func (o *options) check() error {
	switch {
	case o.basePath == "":
		return errors.New("-base-path is required")
	case o.jobID == "":
		return errors.New("-job-id is required")
	case o.instances < 1 || o.instances > maxParallelism:
		return fmt.Errorf("-instances %d: want 1 to %d", o.instances, maxParallelism)
	case o.index < 0 || o.index >= o.instances:
		return fmt.Errorf("-index %d: want 0 to %d", o.index, o.instances-1)
	case o.records < 0 || o.rate <= 0 || o.interval <= 0 || o.collect <= 0:
		return errors.New("-records must not be negative, -rate, -checkpoint-interval and -collect-interval must be positive")
	case o.grace < 2*o.interval:
		return fmt.Errorf("-grace %v: want at least two checkpoint intervals (%v)", o.grace, 2*o.interval)
	}
	return nil
}

// The input: partition k holds records of the words whose key group is k.
var vocabulary = strings.Fields(`the of and to in is was he for it with as his on be at by had are but from or
	have an they which one you were her all she there would their we him been has when who will more no
	if out so said what up its about into than them can only other new some could time these two may then
	do first any my now such like our over man me even most made after also did many before must through
	back years where much your way well down should because each just those people state how too little`)

// partitionWords holds, by key group, the words of that key group in the
// order of the vocabulary.
var partitionWords = func() [maxParallelism][]string {
	var p [maxParallelism][]string
	for _, w := range vocabulary {
		kg := statestore.KeyGroup([]byte(w), maxParallelism) // StringCodec encodes a string as its bytes
		p[kg] = append(p[kg], w)
	}
	return p
}()

// partitionLen returns the number of records of partition kg.
func partitionLen(kg int, records int64) int64 {
	if len(partitionWords[kg]) == 0 {
		return 0
	}
	return records
}

// record returns record i of partition kg: 1 to 6 words of the partition's
// key group, from a generator of its own, so that any offset can be
// produced again without the ones before it.
func record(seed uint64, kg int, i int64) []string {
	choices := partitionWords[kg]
	r := rand.New(rand.NewPCG(seed, uint64(kg)<<48|uint64(i)))
	words := make([]string, 1+r.IntN(6))
	for j := range words {
		// a skewed choice: some words are much more frequent
		words[j] = choices[r.IntN(1+r.IntN(len(choices)))]
	}
	return words
}

// expected counts the whole input in memory, independently of the service.
func expected(seed uint64, records int64) map[string]int64 {
	counts := map[string]int64{}
	for kg := range maxParallelism {
		for i := range partitionLen(kg, records) {
			for _, w := range record(seed, kg, i) {
				counts[w]++
			}
		}
	}
	return counts
}

// offsetKey is the metadata key of partition kg's offset in a part.
func offsetKey(kg int) string { return fmt.Sprintf("offset-%02d", kg) }

// Events: each line an instance prints on its standard output starts with
// "wordcount: instance I of P, generation G: " and goes on with one of
// these; verify reads them.
const (
	restoredMessage = "restored checkpoint" // a (re)join that restored a checkpoint
	firstStart      = "first start"         // a (re)join that restored nothing
	completeEvent   = "complete"            // "checkpoint N complete": the first of a membership
	doneEvent       = "input done"          // its input read and checkpointed: counts written
	fencedEvent     = "fenced"              // a newer generation started: rejoining
	stalledEvent    = "stalled"             // a part would name objects perhaps deleted: joining again
	materialized    = "materialised"        // "materialised N time(s) since ...": the state was written as snapshots
)

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("wordcount run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.flags(fs, true)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "wordcount run: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(ctx, o, log, stdout); err != nil && ctx.Err() == nil { // stopped: whatever it was doing ends there
		fmt.Fprintf(stderr, "wordcount run: instance %d of %d: %v\n", o.index, o.instances, err)
		return 1
	}
	return 0
}

// errDone ends a job of one instance once its input is checkpointed.
var errDone = errors.New("done")

// errStalled ends a membership whose next part would name objects that the
// deletion rule may have deleted: the instance joins again, starting a new
// generation.
var errStalled = errors.New("stalled past half the grace")

// run is the service: it joins the job, then counts, generation after
// generation, until ctx ends (nil), a one-instance job is done (nil), or
// it cannot go on (the error; catalog.ErrReplaced or ErrMismatch when
// another process holds its slot or the job was rescaled).
func run(ctx context.Context, o options, log *slog.Logger, events io.Writer) error {
	cfg := dstl.DefaultConfig(o.basePath)
	cfg.JobID = o.jobID
	if o.localDir != "" {
		cfg.LocalRecoveryEnabled, cfg.LocalRecoveryDir = true, o.localDir
	}
	storage, err := dstl.Open(ctx, cfg, dstl.WithLogger(log), dstl.WithLocalRecovery(duplicating.Open))
	if err != nil {
		return err
	}
	defer storage.Close()
	m, err := catalog.Join(ctx, storage.Backend(), catalogConfig(o))
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	for {
		err := (&instance{o: o, log: log, events: events, storage: storage, m: m}).run(ctx)
		switch {
		case errors.Is(err, errDone) || ctx.Err() != nil:
			return nil
		case errors.Is(err, errStalled):
			if m, err = catalog.Join(ctx, storage.Backend(), catalogConfig(o)); err != nil {
				return fmt.Errorf("join again: %w", err)
			}
		case errors.Is(err, catalog.ErrFenced):
			if m, err = m.Rejoin(ctx); err != nil {
				return fmt.Errorf("rejoin: %w", err)
			}
		default:
			return err
		}
	}
}

func catalogConfig(o options) catalog.Config {
	return catalog.Config{JobID: o.jobID, Instances: o.instances, Index: o.index, MaxParallelism: maxParallelism, Grace: o.grace}
}

// instance is one membership of a generation: its stores restored from the
// generation's restore point, counting until fenced.
type instance struct {
	o       options
	log     *slog.Logger
	events  io.Writer
	storage *dstl.Storage
	m       *catalog.Member

	cp          *statestore.Checkpointer
	counts      *statestore.KeyValueStore[string, int64]
	offsets     map[int]int64   // by key group, of the partitions with records
	committed   map[string]bool // objects the latest committed part (or the restored ones) names
	lastTaken   int64
	notified    int64   // latest checkpoint told complete
	unconfirmed []int64 // committed checkpoints not yet confirmed, ascending
	doneAt      int64   // first checkpoint taken with all input read; 0 until then
	mats        int64   // materialisations already reported
	announced   bool    // the first complete checkpoint was printed
	written     bool    // the counts were written
}

// event prints an event line.
func (in *instance) event(format string, args ...any) {
	fmt.Fprintf(in.events, "wordcount: instance %d of %d, generation %d: %s\n",
		in.o.index, in.o.instances, in.m.Generation().Number, fmt.Sprintf(format, args...))
}

func (in *instance) run(ctx context.Context) error {
	g, kgr := in.m.Generation(), in.m.KeyGroups()
	cp, err := statestore.NewCheckpointer(in.storage, statestore.Config{
		Operator: fmt.Sprintf("wordcount-%d-of-%d", in.o.index, in.o.instances), KeyGroups: kgr,
		MaxParallelism: maxParallelism, MaterializeInterval: in.o.materialize, Logger: in.log,
		KeepSnapshots: true, // the catalog's deletion rule deletes them
		Dir:           in.o.stateDir,
	})
	if err != nil {
		return err
	}
	defer cp.Close()
	in.cp = cp
	if in.counts, err = statestore.NewKeyValueStore("counts", cp.Log(), statestore.StringCodec{}, statestore.Int64Codec{},
		statestore.WithMaxParallelism(maxParallelism)); err != nil {
		return err
	}
	if err := cp.Register(in.counts); err != nil {
		return err
	}
	parts := in.m.Restore()
	handles, offsets, err := restorePoint(parts, kgr, in.o.records)
	if err != nil {
		return err
	}
	// Local copies are on the instance's own volume (-local-recovery-dir,
	// one per index): another index's are not here.
	for i, p := range parts {
		if p.Instance != in.o.index {
			for j := range handles[i].Logs {
				handles[i].Logs[j].Local = nil
			}
		}
	}
	in.offsets, in.committed = offsets, map[string]bool{}
	for _, p := range parts {
		for _, obj := range p.Objects {
			in.committed[obj] = true
		}
	}
	t0 := time.Now()
	info := statestore.CheckpointInfo{OperatorID: "wordcount", TaskID: in.o.index, CheckpointID: g.RestoredCheckpoint,
		LastCompletedCheckpointID: g.RestoredCheckpoint}
	if err := cp.InitializeState(ctx, info, handles...); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	in.notified = g.RestoredCheckpoint
	read := int64(0)
	for _, off := range in.offsets {
		read += off
	}
	if len(parts) > 0 {
		r := cp.Stats().LastRestore
		in.event("%s %d from %d part(s) in %v: key groups %v, %d records read, %d words; %d snapshot(s) (%d local), %d change sets (%d local), %d snapshot file(s) (%d local)",
			restoredMessage, g.RestoredCheckpoint, len(parts), time.Since(t0).Round(time.Millisecond), kgr, read, in.counts.Len(),
			r.Snapshots, r.LocalSnapshots, r.Log.LocalSets+r.Log.RemoteSets, r.Log.LocalSets, r.SnapshotFiles, r.LocalSnapshotFiles)
	} else {
		in.event("%s: key groups %v", firstStart, kgr)
	}

	if in.o.index == 0 {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); in.collectLoop(cctx) }()
		defer func() { cancel(); <-done }()
	}
	return in.count(ctx)
}

// restorePoint decodes the restored parts' handles and takes, for each key
// group of kgr, the offset of its partition from the part that owned it
// (0 on a first start).
func restorePoint(parts []*catalog.Part, kgr dstl.KeyGroupRange, records int64) ([]*statestore.CheckpointHandle, map[int]int64, error) {
	var handles []*statestore.CheckpointHandle
	for _, p := range parts {
		h := new(statestore.CheckpointHandle)
		if err := h.UnmarshalBinary(p.State); err != nil {
			return nil, nil, fmt.Errorf("part %s: %w", p.Name, err)
		}
		handles = append(handles, h)
	}
	offsets := map[int]int64{}
	for kg := kgr.Start; kg <= kgr.End; kg++ {
		if partitionLen(kg, records) == 0 {
			continue
		}
		offsets[kg] = 0
		for _, p := range parts {
			if !p.KeyGroups.Contains(kg) {
				continue
			}
			v, ok := p.Metadata[offsetKey(kg)]
			off, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil || off < 0 || off > records {
				return nil, nil, fmt.Errorf("part %s: offset of partition %d: %q", p.Name, kg, v)
			}
			offsets[kg] = off
		}
	}
	return handles, offsets, nil
}

// count reads the member's partitions, round robin, at the rate, and
// takes a checkpoint at every interval of the generation's clock.
func (in *instance) count(ctx context.Context) error {
	g := in.m.Generation()
	var kgs []int
	for kg := range in.offsets {
		kgs = append(kgs, kg)
	}
	slices.Sort(kgs)
	// nextPartition returns the index in kgs of the next partition, from
	// i on, with records left, or -1.
	nextPartition := func(i int) int {
		for j := range kgs {
			if c := (i + j) % len(kgs); in.offsets[kgs[c]] < in.o.records {
				return c
			}
		}
		return -1
	}
	start, processed, turn := time.Now(), int64(0), 0
	next := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := time.Now()
		if !now.Before(next) {
			k := max(int64(now.Sub(g.Created)/in.o.interval), 0)
			if n := g.FirstCheckpoint + k; n > in.lastTaken {
				if err := in.checkpoint(ctx, n); err != nil {
					return err
				}
			}
			next = g.Created.Add(time.Duration(k+1) * in.o.interval)
			continue
		}
		c := nextPartition(turn)
		wait := next.Sub(now)
		if c >= 0 {
			due := start.Add(time.Duration(float64(processed) / float64(in.o.rate) * float64(time.Second)))
			wait = min(wait, due.Sub(now))
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
			continue
		}
		if c < 0 {
			continue
		}
		kg := kgs[c]
		for _, w := range record(in.o.seed, kg, in.offsets[kg]) {
			n, _, err := in.counts.Get(w)
			if err != nil {
				return err
			}
			if err := in.counts.Put(w, n+1); err != nil {
				return err
			}
		}
		in.offsets[kg]++
		processed++
		turn = c + 1
	}
}

// checkpoint takes checkpoint n: a snapshot of the stores, the commit of
// the member's part (handle, objects, offsets), and the news of the latest
// complete checkpoint to the stores' log. Once the input is read and a
// checkpoint holding it is complete, it writes the counts.
func (in *instance) checkpoint(ctx context.Context, n int64) error {
	in.lastTaken = n
	meta := map[string]string{}
	all := true
	for kg, off := range in.offsets {
		meta[offsetKey(kg)] = strconv.FormatInt(off, 10)
		all = all && off == in.o.records
	}
	h, err := in.cp.SnapshotState(ctx, statestore.CheckpointInfo{OperatorID: "wordcount", TaskID: in.o.index,
		CheckpointID: n, LastCompletedCheckpointID: in.notified})
	if err != nil {
		return err
	}
	if st := in.cp.Stats(); st.Materializations > in.mats {
		lm := st.LastMaterialization
		in.event("%s %d time(s) since checkpoint %d: the last one uploaded %d object(s), %d bytes, for %d changed keys",
			materialized, st.Materializations-in.mats, in.notified, lm.Files, lm.UploadedBytes, lm.ChangedKeys)
		in.mats = st.Materializations
	}
	objects := h.Objects()
	if stale := in.stale(objects, time.Now()); len(stale) > 0 {
		// Not committed, so nothing refers to the checkpoint: aborting it
		// is safe. The state in memory may need objects that are gone:
		// start over from the catalog, as a restarted process does.
		in.event("%s: checkpoint %d names %d object(s) that no part kept for more than half the grace", stalledEvent, n, len(stale))
		if err := in.cp.NotifyCheckpointAborted(ctx, n); err != nil {
			return err
		}
		return fmt.Errorf("%w: checkpoint %d names %q", errStalled, n, stale)
	}
	state, err := h.MarshalBinary()
	if err != nil {
		return err
	}
	st, err := in.m.Commit(ctx, n, state, objects, meta)
	if errors.Is(err, catalog.ErrFenced) {
		// The part is ignored by every reader; the checkpoint stays
		// pending in the log (never aborted: its objects are kept until
		// the deletion rule of the live generation finds them unnamed).
		in.event("%s: %v", fencedEvent, err)
		return err
	}
	if err != nil {
		return fmt.Errorf("commit checkpoint %d: %w", n, err)
	}
	in.committed = map[string]bool{}
	for _, obj := range objects {
		in.committed[obj] = true
	}
	in.unconfirmed = append(in.unconfirmed, n)
	if all && in.doneAt == 0 {
		in.doneAt = n
	}
	if st.Complete > in.notified {
		// Every committed checkpoint up to the latest complete one is
		// confirmed, in order: confirming only the latest would make the
		// log release what only an older one kept, while the catalog may
		// still restore that one (a generation starting from a listing
		// made before the latest completed). Confirmed objects are the
		// job's, and the catalog's deletion rule deletes them.
		for len(in.unconfirmed) > 0 && in.unconfirmed[0] <= st.Complete {
			if err := in.cp.NotifyCheckpointComplete(ctx, in.unconfirmed[0]); err != nil {
				return err
			}
			in.unconfirmed = in.unconfirmed[1:]
		}
		if !in.announced {
			in.event("checkpoint %d %s", st.Complete, completeEvent)
			in.announced = true
		}
		in.notified = st.Complete
	}
	if in.doneAt != 0 && in.notified >= in.doneAt && !in.written {
		if err := in.writeCounts(); err != nil {
			return err
		}
		in.written = true
		in.event("%s: checkpoint %d complete, %d words", doneEvent, in.notified, in.counts.Len())
		if in.o.instances == 1 {
			return errDone
		}
	}
	return nil
}

// stale returns the objects that no committed part named and whose names
// are more than half the grace old: the deletion rule may have deleted
// them, since no part kept them.
func (in *instance) stale(objects []string, now time.Time) []string {
	prefix := objname.JobPrefix(in.o.jobID)
	var stale []string
	for _, obj := range objects {
		if t := objname.Parse(prefix, obj).Time(); !in.committed[obj] && !t.IsZero() && now.Sub(t) > in.o.grace/2 {
			stale = append(stale, obj)
		}
	}
	return stale
}

// writeCounts writes the member's counts as JSON to the output, atomically
// when it is a file.
func (in *instance) writeCounts() error {
	counts := map[string]int64{}
	for w, n := range in.counts.All() {
		counts[w] = n
	}
	b, err := json.Marshal(counts)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if in.o.output == "" {
		_, err := in.events.Write(b)
		return err
	}
	tmp := filepath.Join(filepath.Dir(in.o.output), "."+filepath.Base(in.o.output)+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, in.o.output)
}

// collectLoop applies the deletion rule every collection interval until
// ctx ends or the member is fenced.
func (in *instance) collectLoop(ctx context.Context) {
	t := time.NewTicker(in.o.collect)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := collectOnce(ctx, in.m)
		switch {
		case errors.Is(err, catalog.ErrFenced) || ctx.Err() != nil:
			return
		case err != nil:
			in.log.Warn("wordcount: deletion rule", "err", err)
		}
	}
}
