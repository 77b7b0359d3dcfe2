// Command wordcount is an example service built on packages job and
// statestore: an exactly-once word count that runs as P instances in Q
// processes on one bucket, with no other service. Each instance counts
// the words of its key groups in a key-value store whose every change goes
// to the DSTL; the job runner (package job) takes a checkpoint of every
// instance at each interval and commits it to the job's catalog (package
// catalog). Killed, stopped, restarted or rescaled, the job restores its
// latest complete checkpoint and goes on from the input offsets that
// checkpoint holds, so that its counts come out exactly as in a run
// without a fault.
//
//	wordcount run    -instances P [-processes Q] -index I -base-path URL -job-id ID [-state-dir DIR] [flags]
//	                 process I of Q, running its share of the P instances:
//	                 count, checkpoint, print events
//	wordcount verify [-disk] [flags]
//	                 run 3 instances in 3 processes, SIGKILL and SIGSTOP
//	                 random processes at random moments, restart the
//	                 killed ones, rescale to 2 instances in 2 processes
//	                 and to 4 instances in 2 processes, let the job
//	                 finish, and check its counts and what is left in the
//	                 store (exit 1 if anything is off)
//
// # Instances and processes
//
// The job runs as P instances (-instances), each owning a range of key
// groups, and Q processes (-processes, default P) run them: process I
// (-index, 0 to Q-1) runs the instances of catalog.InstancesOf(I, Q, P)
// and commits their parts of a checkpoint in one catalog object. Every
// process of a job is started with the same P and Q; a restart with
// another P or Q is a rescale.
//
// # State on disk
//
// An instance keeps its counts in memory, or with -state-dir in a Pebble
// database under that directory (statestore.Config.Dir; one directory per
// process, which holds one directory per instance, emptied at each start:
// the state is what the instance restores). Its materialisations are then
// incremental: each uploads the keys changed since the previous one and a
// slice of the rest as SST files (objects
// JOB/statestore/OPERATOR/UUIDv7.cN.sst) and a manifest naming every file
// that holds the state; the checkpoints' parts name the files
// (CheckpointHandle.Objects), which later snapshots share, and so do the
// instances that restore them after a rescale, and the deletion rule
// deletes them as it deletes the other objects. verify -disk gives every
// process it starts a state directory of its own under its temporary
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
// state handle, the offset of each of its partitions (the task's
// Metadata), and a restore takes, for each key group, the offset of the
// one restored part that owned it.
//
// # Checkpoints and the catalog
//
// job.Run does the rest. It joins the job through job.NewCatalog: the
// process claims its slot in the latest generation, or starts a new one
// (after a restart or a rescale), which restores the latest complete
// checkpoint and fences the older generations. It restores each instance's
// store from the parts whose key groups overlap the instance's (several
// after a rescale, which statestore merges) and calls the instance's task,
// which reads its partitions at -rate records a second. At each tick of
// the generation's clock (every -checkpoint-interval) it takes a snapshot
// of every instance's store with the task's offsets, commits them, and
// confirms the checkpoints the catalog says complete. A fenced process
// rejoins the latest generation and restores again; one whose slot
// another process holds, or whose configuration the latest generation no
// longer has, exits.
//
// The checkpointers delete no snapshot object: process 0 of the live
// generation applies the catalog's deletion rule every -collect-interval,
// and deletes the log and snapshot objects that no retained or pending
// checkpoint names, that no checkpoint that may still complete was made
// for (by the checkpoint each object's name records), and that are older
// than -grace. A process stalled between its uploads and its commit
// therefore never completes a checkpoint that names a deleted object,
// whatever the length of the stall.
//
// Once every instance of a process has read all its input and a
// checkpoint holding it is complete, the process writes its instances'
// counts to -output (JSON) and goes on taking checkpoints (the other
// processes need its commits to complete theirs) until it is stopped
// (SIGINT, SIGTERM); a job of one process exits then.
//
// # Verify
//
// verify runs the processes as child processes on one base path: the
// first layout of -scales (3 instances in 3 processes), then each next
// one (2 in 2, then 4 in 2: each of the last two processes runs two
// instances), every layout for -phase, stopping all processes between two
// layouts. Meanwhile, every -fault-every on average, it kills (SIGKILL) a
// random process among those that restored their instances and restarts
// it, or stops one (SIGSTOP) for up to -max-stop, which may exceed the
// grace, and continues it (SIGCONT); the last layout runs with faults
// until there were at least -faults. Then it lets the input end and
// checks:
//
//   - every process started after a checkpoint was complete restored one,
//     for each of its instances, and some process restored one;
//   - the final counts of the last processes, and those of the latest
//     complete checkpoint (which verify restores as the one instance of a
//     last generation, every partition read to its end), equal an
//     independent count of the input;
//   - verify commits the restored state as that generation's first
//     checkpoint; once the grace has passed, a last run of the deletion
//     rule leaves in the job's prefix every object that checkpoint names
//     (log, snapshot and catalog objects, and with -disk snapshot files),
//     and nothing else but objects younger than the grace and objects
//     made for a checkpoint that may still complete.
//
// It prints the faults as they happen, then the numbers of kills, stops,
// restarts, rescales, restores, joins, fences, complete checkpoints and
// materialisations (with -disk, of the restores that loaded snapshot
// files, and how many of the retained checkpoint's files the processes of
// an earlier layout wrote), and the checks' results; it exits 1 on any
// mismatch (or after -timeout), 3 if it could not run.
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
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/dstlgo/dstl/backends/all" // every backend: local, s3, gcs, azure, gocloud
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/duplicating"
	"github.com/dstlgo/dstl/examples/internal/child"
	"github.com/dstlgo/dstl/internal/flagusage"
	"github.com/dstlgo/dstl/job"
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

  wordcount run --instances P --index I --base-path URL --job-id ID [--state-dir DIR] [flags]
        instance I of P: count, checkpoint, print events
  wordcount verify [--disk] [flags]
        run P=3 instances, kill and stop random ones at random moments,
        rescale 3 → 2 → 4, and check the counts and what is left in the
        store (exit 1 if anything is off)

Run "wordcount run --help" or "wordcount verify --help" for a command's flags.
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

// operator names the instances' state: instance i's snapshots are under
// JOB/statestore/wordcount-i/.
const operator = "wordcount"

// options are the service's flags; verify passes them on to the service.
type options struct {
	basePath    string
	jobID       string
	instances   int
	processes   int
	index       int // of the process
	records     int64
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

// flags declares the flags of both commands; verify chooses the layout and
// the indexes itself.
func (o *options) flags(fs *flag.FlagSet, service bool) {
	fs.StringVar(&o.basePath, "base-path", "", "where the log, snapshots and catalog go: a path or a URL of a dstl backend (s3://, gs://, azblob://, file://, mem://)")
	fs.StringVar(&o.jobID, "job-id", "", "the job: prefix of its objects and catalog (verify: default a new unique one)")
	if service {
		fs.IntVar(&o.instances, "instances", 1, "instances the job runs as (P)")
		fs.IntVar(&o.processes, "processes", 0, "processes that run the instances (Q), 1 to P; default P: one instance each")
		fs.IntVar(&o.index, "index", 0, "this process's index, 0 to Q-1: it runs the instances of catalog.InstancesOf(index, Q, P)")
		fs.StringVar(&o.output, "output", "", "write the final counts of this process's instances here as JSON (default: standard output)")
		fs.StringVar(&o.localDir, "local-recovery-dir", "", "keep local copies here and restore from them (local recovery; one directory per process)")
		fs.StringVar(&o.stateDir, "state-dir", "", "keep the state on disk, in a Pebble database per instance under this directory, and materialise it incrementally (statestore Config.Dir; one directory per process; default: in memory)")
	}
	fs.Int64Var(&o.records, "records", 800, fmt.Sprintf("records in %s", partitionsText()))
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the input")
	fs.IntVar(&o.rate, "rate", 500, "records an instance processes per second")
	fs.DurationVar(&o.interval, "checkpoint-interval", 300*time.Millisecond, "time between checkpoints")
	fs.DurationVar(&o.materialize, "materialize-interval", time.Second, "materialise the state when the log since the last snapshot is this old")
	fs.DurationVar(&o.grace, "grace", 3*time.Second, "age before an object that no retained checkpoint names is deleted; at least two checkpoint intervals")
	fs.DurationVar(&o.collect, "collect-interval", time.Second, "time between two runs of the deletion rule (by process 0)")
}

func (o *options) check() error {
	if o.processes == 0 {
		o.processes = o.instances
	}
	switch {
	case o.basePath == "":
		return errors.New("-base-path is required")
	case o.jobID == "":
		return errors.New("-job-id is required")
	case o.instances < 1 || o.instances > maxParallelism:
		return fmt.Errorf("-instances %d: want 1 to %d", o.instances, maxParallelism)
	case o.processes < 1 || o.processes > o.instances:
		return fmt.Errorf("-processes %d: want 1 to -instances (%d)", o.processes, o.instances)
	case o.index < 0 || o.index >= o.processes:
		return fmt.Errorf("-index %d: want 0 to %d", o.index, o.processes-1)
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

// Events: each line a process prints on its standard output starts with
// "wordcount: process I of Q, generation G: ", then, for an event of one
// instance, "instance N: ", and goes on with one of these; verify reads
// them.
const (
	restoredMessage = "restored checkpoint" // an instance restored a checkpoint (at a join)
	firstStart      = "first start"         // an instance restored nothing (at a join)
	completeEvent   = "complete"            // "checkpoint N complete": the process confirmed N
	doneEvent       = "input done"          // its instances' input read and checkpointed: counts written
	fencedEvent     = "fenced"              // a newer generation started: rejoining
	materialized    = "materialised"        // an instance's "materialised N time(s) ...": its state was written as snapshots
)

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("wordcount run", flag.ContinueOnError)
	flagusage.Set(fs)
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
		fmt.Fprintf(stderr, "wordcount run: process %d of %d: %v\n", o.index, o.processes, err)
		return 1
	}
	return 0
}

// catalogConfig is the process's membership of the job.
func catalogConfig(o options, log *slog.Logger) catalog.Config {
	return catalog.Config{JobID: o.jobID, Instances: o.instances, Processes: o.processes, Process: o.index,
		MaxParallelism: maxParallelism, Grace: o.grace, SweepInterval: o.collect, Logger: log}
}

// run is the service: it runs the process's instances until ctx ends
// (nil), a job of one process is done (nil), or it cannot go on (the
// error; it wraps catalog.ErrReplaced or ErrMismatch when another process
// holds its slot or the job was rescaled).
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
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	s := &service{o: o, events: events, stop: stop}
	coord := job.NewCatalog(storage.Backend(), catalogConfig(o, log), o.interval, collect.Options{})
	return job.Run(ctx, storage, coord, job.Config{
		Operator:        operator,
		Interval:        o.interval,
		CollectInterval: o.collect,
		State:           statestore.Config{MaterializeInterval: o.materialize, Dir: o.stateDir},
		Logger:          log,
		OnEvent:         s.event,
	}, s.open)
}

// service is one process: its instances of the current generation, and
// what it printed. The runner calls open, the tasks and event from one
// goroutine.
type service struct {
	o      options
	events io.Writer
	stop   context.CancelFunc // ends a job of one process once it is done

	generation int64
	tasks      []*counter // the instances of the generation, ascending
	confirmed  int64      // the latest checkpoint confirmed
	written    bool       // the counts of the generation were written
}

// say prints an event line of the process, or of one of its instances.
func (s *service) say(instance int, format string, args ...any) {
	in := ""
	if instance >= 0 {
		in = fmt.Sprintf("instance %d: ", instance)
	}
	fmt.Fprintf(s.events, "wordcount: process %d of %d, generation %d: %s%s\n",
		s.o.index, s.o.processes, s.generation, in, fmt.Sprintf(format, args...))
}

// event follows what the runner does.
func (s *service) event(e job.Event) {
	switch e.Kind {
	case job.EventJoined:
		s.generation, s.tasks, s.written = e.Generation, nil, false
	case job.EventRestored:
		for _, t := range s.tasks {
			if t.in.Index == e.Instance {
				t.restored()
			}
		}
	case job.EventCompleted:
		// The runner confirms checkpoint N on every instance in order:
		// the last one's event ends N's confirmation.
		if len(s.tasks) == 0 || e.Instance != s.tasks[len(s.tasks)-1].in.Index || e.Checkpoint <= s.confirmed {
			return
		}
		s.confirmed = e.Checkpoint
		s.say(-1, "checkpoint %d %s", e.Checkpoint, completeEvent)
		if err := s.done(e.Checkpoint); err != nil {
			s.say(-1, "writing the counts: %v", err)
		}
	case job.EventFenced:
		s.say(-1, "%s: %v", fencedEvent, e.Err)
	}
}

// done writes the counts once every instance read its input and a
// checkpoint holding it completed.
func (s *service) done(checkpoint int64) error {
	if s.written {
		return nil
	}
	counts := map[string]int64{}
	for _, t := range s.tasks {
		if !t.done {
			return nil
		}
		for w, n := range t.counts.All() {
			counts[w] = n
		}
	}
	s.written = true
	if err := s.writeCounts(counts); err != nil {
		return err
	}
	s.say(-1, "%s: checkpoint %d complete, %d words", doneEvent, checkpoint, len(counts))
	if s.o.processes == 1 {
		s.stop() // Run takes a last checkpoint and returns
	}
	return nil
}

// writeCounts writes the counts as JSON to the output, atomically when it
// is a file.
func (s *service) writeCounts(counts map[string]int64) error {
	b, err := json.Marshal(counts)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if s.o.output == "" {
		_, err := s.events.Write(b)
		return err
	}
	tmp := filepath.Join(filepath.Dir(s.o.output), "."+filepath.Base(s.o.output)+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.o.output)
}

// open makes an instance's store and its task: the job.Open of the
// service.
func (s *service) open(ctx context.Context, in *job.Instance) (job.Task, error) {
	counts, err := statestore.NewKeyValueStore("counts", in.Log(), statestore.StringCodec{}, statestore.Int64Codec{},
		statestore.WithKeyGroups(in.KeyGroups), statestore.WithMaxParallelism(in.MaxParallelism))
	if err != nil {
		return nil, err
	}
	if err := in.Register(counts); err != nil {
		return nil, err
	}
	offsets, err := restoredOffsets(in.Restored, in.KeyGroups, s.o.records)
	if err != nil {
		return nil, fmt.Errorf("instance %d: %w", in.Index, err)
	}
	t := &counter{s: s, in: in, counts: counts, offsets: offsets, opened: time.Now()}
	for kg := in.KeyGroups.Start; kg <= in.KeyGroups.End; kg++ {
		if _, ok := offsets[kg]; ok {
			t.kgs = append(t.kgs, kg)
		}
	}
	s.tasks = append(s.tasks, t)
	return t, nil
}

// restoredOffsets takes, for each key group of kgr whose partition has
// records, its offset from the restored part that owned it (the part's
// metadata holds the offsets of its key groups alone), or 0 on a first
// start.
func restoredOffsets(restored []map[string]string, kgr dstl.KeyGroupRange, records int64) (map[int]int64, error) {
	offsets := map[int]int64{}
	for kg := kgr.Start; kg <= kgr.End; kg++ {
		if partitionLen(kg, records) == 0 {
			continue
		}
		offsets[kg] = 0
		found := false
		for _, meta := range restored {
			v, ok := meta[offsetKey(kg)]
			if !ok {
				continue
			}
			off, err := strconv.ParseInt(v, 10, 64)
			if err != nil || off < 0 || off > records || found {
				return nil, fmt.Errorf("the restored offset of partition %d: %q (twice: %v)", kg, v, found)
			}
			offsets[kg], found = off, true
		}
		if len(restored) > 0 && !found {
			return nil, fmt.Errorf("no restored part holds the offset of partition %d", kg)
		}
	}
	return offsets, nil
}

// counter is an instance's task: it counts the words of its partitions,
// round robin, at the rate.
type counter struct {
	s       *service
	in      *job.Instance
	counts  *statestore.KeyValueStore[string, int64]
	kgs     []int         // the partitions with records, ascending
	offsets map[int]int64 // by key group
	turn    int           // the index in kgs of the next partition to read

	opened    time.Time
	start     time.Time // of the reading, for the rate
	processed int64
	// doneFrom is the first checkpoint that holds the whole input, once
	// it is read: every checkpoint the runner takes from then on. done:
	// one of them completed.
	doneFrom int64
	done     bool
	mats     int64 // materialisations reported
}

// restored prints what the instance restored.
func (t *counter) restored() {
	read := int64(0)
	for _, off := range t.offsets {
		read += off
	}
	if len(t.in.Restored) == 0 {
		t.s.say(t.in.Index, "%s: key groups %v", firstStart, t.in.KeyGroups)
		return
	}
	r := t.in.Checkpointer.Stats().LastRestore
	t.s.say(t.in.Index, "%s from %d part(s) in %v: key groups %v, %d records read, %d words; %d snapshot(s) (%d local), %d change sets (%d local), %d snapshot file(s) (%d local)",
		restoredMessage, len(t.in.Restored), time.Since(t.opened).Round(time.Millisecond), t.in.KeyGroups, read, t.counts.Len(),
		r.Snapshots, r.LocalSnapshots, r.Log.LocalSets+r.Log.RemoteSets, r.Log.LocalSets, r.SnapshotFiles, r.LocalSnapshotFiles)
}

// Process counts the records that are due at the rate, at most a few
// dozen, round robin over the partitions.
func (t *counter) Process(ctx context.Context) (int, error) {
	if t.start.IsZero() {
		t.start = time.Now()
	}
	n := 0
	for n < 64 {
		c := t.nextPartition()
		if c < 0 {
			if t.doneFrom == 0 {
				// What the log uploads from now on is for this checkpoint
				// or a later one: the first the runner takes after the
				// last record (see dstl.Writer.NextCheckpoint).
				t.doneFrom = t.in.Log().NextCheckpoint()
			}
			break
		}
		due := t.start.Add(time.Duration(float64(t.processed) / float64(t.s.o.rate) * float64(time.Second)))
		if time.Now().Before(due) {
			break
		}
		kg := t.kgs[c]
		for _, w := range record(t.s.o.seed, kg, t.offsets[kg]) {
			v, _, err := t.counts.Get(w)
			if err != nil {
				return n, err
			}
			if err := t.counts.Put(w, v+1); err != nil {
				return n, err
			}
		}
		t.offsets[kg]++
		t.processed++
		t.turn = c + 1
		n++
	}
	return n, nil
}

// nextPartition returns the index in kgs of the next partition, from the
// turn on, with records left, or -1.
func (t *counter) nextPartition() int {
	for j := range t.kgs {
		if c := (t.turn + j) % len(t.kgs); t.offsets[t.kgs[c]] < t.s.o.records {
			return c
		}
	}
	return -1
}

// Metadata returns the offsets of the instance's partitions.
func (t *counter) Metadata(int64) map[string]string {
	meta := map[string]string{}
	for kg, off := range t.offsets {
		meta[offsetKey(kg)] = strconv.FormatInt(off, 10)
	}
	return meta
}

// Complete notes a checkpoint that holds the whole input, and reports the
// materialisations since the last checkpoint.
func (t *counter) Complete(ctx context.Context, checkpoint int64) error {
	if t.doneFrom > 0 && checkpoint >= t.doneFrom {
		t.done = true
	}
	if st := t.in.Checkpointer.Stats(); st.Materializations > t.mats {
		lm := st.LastMaterialization
		t.s.say(t.in.Index, "%s %d time(s) before checkpoint %d: the last one uploaded %d object(s), %d bytes, for %d changed keys",
			materialized, st.Materializations-t.mats, checkpoint, lm.Files, lm.UploadedBytes, lm.ChangedKeys)
		t.mats = st.Materializations
	}
	return nil
}
