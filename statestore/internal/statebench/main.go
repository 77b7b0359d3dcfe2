// Command statebench measures the disk-backed state stores of package
// statestore (Config.Dir) at sizes no unit test reaches, through a
// key-value store of 16-byte keys and values of -value-size bytes (random,
// so that no compression shrinks them):
//
//   - -mode large writes a state of -mib MiB through a checkpointer (the
//     log flushed every 1024 puts and materialised in the background every
//     -materialize-mib MiB), materialises it, takes and completes a
//     checkpoint, closes, restores it into a fresh checkpointer and checks
//     the key count and a sample of keys; it prints each phase's duration
//     beside the peak resident set and the peak Go heap. Run it with
//     GOMEMLIMIT to show that the state need not fit in memory.
//   - -mode churn writes a state of -mib MiB, materialises it, then for
//     each rate of -churn changes that share of the keys (a fresh random
//     set each round) and materialises, -rounds times, and prints the bytes
//     uploaded ÷ the bytes changed (ChangedBytes of the report); -memory
//     does the same with the stores in memory.
//   - -mode restore writes a state of -mib MiB with local recovery on,
//     materialises and checkpoints it, then restores it -rounds times from
//     the backend (no local copies) beside raw parallel GETs of the same
//     objects (as many at once as a restore downloads), once into files in
//     the work directory and once into nothing, and prints the throughputs
//     and their ratios; then it restores from the local copies and counts
//     the GETs that took.
//
// The backend is -base-path (for MinIO, "s3://BUCKET/PREFIX?endpoint=...&
// region=...&use_path_style=true" with the credentials in
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), by default a local
// directory in the work directory. `make bench-state` runs every mode
// (bench/state.sh).
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dstlgo/dstl/backends"
	_ "github.com/dstlgo/dstl/backends/all"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/duplicating"
	"github.com/dstlgo/dstl/statestore"
	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

const (
	keyLen = 16
	maxP   = 128
	// flushEvery is how many puts go between two flushes of the log.
	flushEvery = 1024
)

var allGroups = dstl.KeyGroupRange{Start: 0, End: maxP - 1}

type options struct {
	mode        string
	mib         int64
	valueSize   int
	basePath    string
	dir         string
	churn       []int
	rounds      int
	memory      bool
	sample      int
	materialize int64
	verbose     bool
	cpuProfile  string
	heapProfile string
}

func main() {
	var o options
	churn := "1,10"
	flag.StringVar(&o.mode, "mode", "", "`MODE`: large, churn or restore")
	flag.Int64Var(&o.mib, "mib", 256, "state size in `MiB` (keys and values)")
	flag.IntVar(&o.valueSize, "value-size", 1024, "`BYTES` of each value")
	flag.StringVar(&o.basePath, "base-path", "", "the backend's base `PATH`; default a directory in the work directory")
	flag.StringVar(&o.dir, "dir", "", "work `DIR` (databases, local backend, local copies); default a new temporary directory, removed at the end")
	flag.StringVar(&churn, "churn", churn, "churn mode: `PERCENTS` of the keys changed between two materialisations, comma-separated")
	flag.IntVar(&o.rounds, "rounds", 10, "churn mode: materialisations per churn rate; restore mode: restores from the backend")
	flag.BoolVar(&o.memory, "memory", false, "churn mode: also with the stores in memory")
	flag.IntVar(&o.sample, "sample", 10000, "keys checked after a restore")
	flag.Int64Var(&o.materialize, "materialize-mib", 0, "large mode: Config.MaterializeSize in `MiB` (0: the default)")
	flag.BoolVar(&o.verbose, "v", false, "log the storage's and the checkpointer's messages")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to `FILE`")
	flag.StringVar(&o.heapProfile, "heapprofile", "", "large mode: write a heap profile at the end of the write phase to `FILE`")
	flag.Parse()
	for _, f := range strings.Split(churn, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p <= 0 || p > 100 {
			fatalf("-churn %q: want percentages in (0, 100], comma-separated", churn)
		}
		o.churn = append(o.churn, p)
	}
	if o.mib <= 0 || o.valueSize <= 0 || o.rounds <= 0 {
		fatalf("-mib, -value-size and -rounds must be positive")
	}
	run := map[string]func(*bench, context.Context) error{"large": (*bench).large, "churn": (*bench).churnMode, "restore": (*bench).restore}[o.mode]
	if run == nil {
		fatalf("-mode %q: want large, churn or restore", o.mode)
	}
	stopProfile := func() {}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fatalf("-cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fatalf("-cpuprofile: %v", err)
		}
		stopProfile = func() {
			pprof.StopCPUProfile()
			f.Close()
		}
	}
	err := runMode(o, run)
	stopProfile()
	if err != nil {
		fatalf("%v", err)
	}
}

func runMode(o options, run func(*bench, context.Context) error) error {
	ctx := context.Background()
	b, err := newBench(ctx, o)
	if err != nil {
		return err
	}
	err = run(b, ctx)
	if cerr := b.close(ctx); err == nil {
		err = cerr
	}
	return err
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "statebench: "+format+"\n", args...)
	os.Exit(1)
}

// bench is one run: the backend, the work directory, the job's objects.
type bench struct {
	o       options
	backend backends.Backend
	work    string
	removeW bool // remove work at the end
	jobID   string
	keys    int
	logger  *slog.Logger
	mem     *memPeak
	stop    func()
}

func newBench(ctx context.Context, o options) (*bench, error) {
	b := &bench{o: o, jobID: "statebench-" + randomHex(4)}
	b.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.verbose {
		b.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	b.work = o.dir
	if b.work == "" {
		d, err := os.MkdirTemp("", "statebench-*")
		if err != nil {
			return nil, err
		}
		b.work, b.removeW = d, true
	} else if err := os.MkdirAll(b.work, 0o755); err != nil {
		return nil, err
	}
	base := o.basePath
	if base == "" {
		base = filepath.Join(b.work, "backend")
		if err := os.MkdirAll(base, 0o755); err != nil {
			return nil, err
		}
	}
	be, _, err := backends.Open(ctx, "", base)
	if err != nil {
		return nil, fmt.Errorf("open backend %s: %w", redactQuery(base), err)
	}
	b.backend = be
	b.keys = int(o.mib << 20 / int64(keyLen+o.valueSize))
	b.mem = newMemPeak()
	mctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); b.mem.sample(mctx) }()
	b.stop = func() { cancel(); wg.Wait() }

	limit := debug.SetMemoryLimit(-1)
	lim := "none"
	if limit != mathMaxInt64 {
		lim = mib(limit)
	}
	fmt.Printf("mode %s: %d keys of %d bytes, values of %d bytes (state %s); backend %s; GOMAXPROCS %d, GOMEMLIMIT %s, %s\n\n",
		o.mode, b.keys, keyLen, o.valueSize, mib(b.stateBytes(b.keys)), backendName(o.basePath), runtime.GOMAXPROCS(0), lim, runtime.Version())
	return b, nil
}

const mathMaxInt64 = 1<<63 - 1

func (b *bench) close(ctx context.Context) error {
	b.stop()
	var errs []error
	// The job's objects: best effort, whatever the run did.
	prefix := b.jobID + "/"
	var names []string
	if err := b.backend.List(ctx, prefix, func(oi backends.ObjectInfo) error {
		names = append(names, oi.Name)
		return nil
	}); err != nil {
		errs = append(errs, fmt.Errorf("list %s: %w", prefix, err))
	}
	for _, n := range names {
		if err := b.backend.Delete(ctx, n); err != nil && !errors.Is(err, backends.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, b.backend.Close())
	if b.removeW {
		errs = append(errs, os.RemoveAll(b.work))
	}
	return errors.Join(errs...)
}

func (b *bench) stateBytes(keys int) int64 { return int64(keys) * int64(keyLen+b.o.valueSize) }

// job is one run of the operator: a storage over the bench's backend (its
// requests counted), a checkpointer and its key-value store.
type job struct {
	b       *bench
	count   *counting.Backend
	storage *dstl.Storage
	cp      *statestore.Checkpointer
	kv      *statestore.KeyValueStore[string, []byte]
	disk    bool
	buf     []byte
}

// jobOptions say how to open a job.
type jobOptions struct {
	name        string // of the checkpointer's database directory
	disk        bool   // Config.Dir
	localDir    string // local recovery's directory; "": none
	materialize int64  // Config.MaterializeSize; 0: never by size
}

func (b *bench) open(jo jobOptions) (*job, error) {
	cfg := dstl.DefaultConfig("(bench)")
	cfg.JobID = b.jobID
	var opts []dstl.Option
	opts = append(opts, dstl.WithLogger(b.logger))
	if jo.localDir != "" {
		cfg.LocalRecoveryEnabled, cfg.LocalRecoveryDir = true, jo.localDir
		opts = append(opts, dstl.WithLocalRecovery(duplicating.Open))
	}
	j := &job{b: b, count: counting.New(b.backend), disk: jo.disk}
	s, err := dstl.New(cfg, j.count, opts...)
	if err != nil {
		return nil, err
	}
	j.storage = s
	scfg := statestore.Config{Operator: "op-0", KeyGroups: allGroups, MaxParallelism: maxP,
		MaterializeInterval: -1, MaterializeSize: -1, Logger: b.logger}
	if jo.materialize > 0 {
		scfg.MaterializeSize = jo.materialize
	}
	if jo.disk {
		scfg.Dir = filepath.Join(b.work, "db-"+jo.name)
	}
	if j.cp, err = statestore.NewCheckpointer(s, scfg); err != nil {
		s.Close()
		return nil, err
	}
	j.kv, err = statestore.NewKeyValueStore("kv", j.cp.Log(), statestore.StringCodec{}, statestore.BytesCodec{}, statestore.WithMaxParallelism(maxP))
	if err == nil {
		err = j.cp.Register(j.kv)
	}
	if err != nil {
		j.close()
		return nil, err
	}
	return j, nil
}

func (j *job) close() error {
	return errors.Join(j.cp.Close(), j.storage.Close())
}

func key(i int) string { return fmt.Sprintf("k%015d", i) }

// fillValue writes the value of key i at version ver into v.
func fillValue(v []byte, i, ver int) {
	var p mrand.PCG
	p.Seed(uint64(i), uint64(ver))
	var w [8]byte
	for off := 0; off < len(v); off += 8 {
		binary.LittleEndian.PutUint64(w[:], p.Uint64())
		copy(v[off:], w[:])
	}
}

// put sets key i to its value at version ver. A store in memory keeps the
// value it is given: it gets a buffer of its own.
func (j *job) put(i, ver int) error {
	if !j.disk || j.buf == nil {
		j.buf = make([]byte, j.b.o.valueSize)
	}
	fillValue(j.buf, i, ver)
	return j.kv.Put(key(i), j.buf)
}

// putAll puts the keys of idx (each at version ver(i)), flushing the log
// every flushEvery puts and at the end; with a label, it reports progress.
func (j *job) putAll(ctx context.Context, idx func(n int) int, n int, ver func(i int) int, label string) error {
	start := time.Now()
	for t := range n {
		i := idx(t)
		if err := j.put(i, ver(i)); err != nil {
			return err
		}
		if t%flushEvery == flushEvery-1 {
			if err := j.cp.Flush(ctx); err != nil {
				return err
			}
		}
		if label != "" && n >= 10 && t%(n/10) == n/10-1 {
			fmt.Fprintf(os.Stderr, "%s: %d%% (%d keys, %s)\n", label, (t+1)*100/n, t+1, time.Since(start).Round(time.Millisecond))
		}
	}
	return j.cp.Flush(ctx)
}

// checkpoint takes and completes checkpoint id and returns its handle as
// a restore gets it (encoded and decoded).
func (j *job) checkpoint(ctx context.Context, id int64) (*statestore.CheckpointHandle, error) {
	h, err := j.cp.SnapshotState(ctx, statestore.CheckpointInfo{OperatorID: "op", CheckpointID: id, LastCompletedCheckpointID: id - 1})
	if err != nil {
		return nil, err
	}
	data, err := h.MarshalBinary()
	if err != nil {
		return nil, err
	}
	var back statestore.CheckpointHandle
	if err := back.UnmarshalBinary(data); err != nil {
		return nil, err
	}
	if err := j.cp.NotifyCheckpointComplete(ctx, id); err != nil {
		return nil, err
	}
	return &back, nil
}

// check reads a sample of keys (every key when the sample is as large as
// the state) and compares them with their values at version ver(i).
func (j *job) check(sample int, keys int, ver func(i int) int, seed uint64) error {
	rng := mrand.New(mrand.NewPCG(seed, 1))
	want := make([]byte, j.b.o.valueSize)
	for t := range min(sample, keys) {
		i := t
		if sample < keys {
			i = rng.IntN(keys)
		}
		got, ok, err := j.kv.Get(key(i))
		if err != nil {
			return fmt.Errorf("get key %d: %w", i, err)
		}
		fillValue(want, i, ver(i))
		if !ok || string(got) != string(want) {
			return fmt.Errorf("key %s: got %d bytes (present %v), want its value at version %d", key(i), len(got), ok, ver(i))
		}
	}
	return nil
}

func zero(int) int { return 0 }

// --- large ---

// phase is one step of the large mode and what it took.
type phase struct {
	name       string
	d          time.Duration
	hwm        int64 // peak resident set during the phase
	heap, goMm uint64
	note       string
}

func (b *bench) phase(name string, f func() (string, error)) (phase, error) {
	resetPeakRSS()
	b.mem.reset()
	start := time.Now()
	note, err := f()
	p := phase{name: name, d: time.Since(start), note: note}
	_, p.hwm = rss()
	p.heap, p.goMm = b.mem.peaks()
	if err != nil {
		return p, fmt.Errorf("%s: %w", name, err)
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", name, p.d.Round(time.Millisecond))
	return p, nil
}

func (b *bench) large(ctx context.Context) error {
	var phases []phase
	add := func(p phase, err error) error {
		phases = append(phases, p)
		return err
	}
	matSize := b.o.materialize << 20
	if matSize <= 0 {
		matSize = statestore.DefaultMaterializeSize
	}
	w, err := b.open(jobOptions{name: "write", disk: true, materialize: matSize})
	if err != nil {
		return err
	}
	defer func() {
		if w != nil {
			w.close()
		}
	}()
	state := b.stateBytes(b.keys)
	err = add(b.phase("write", func() (string, error) {
		err := w.putAll(ctx, func(t int) int { return t }, b.keys, zero, "write")
		if err == nil && b.o.heapProfile != "" {
			err = writeHeapProfile(b.o.heapProfile)
		}
		st := w.cp.Stats()
		return fmt.Sprintf("%s in %d puts; %d background materialisations", mib(state), b.keys, st.Materializations), err
	}))
	if err != nil {
		return err
	}
	dbBytes := dirBytes(filepath.Join(b.work, "db-write"))
	var h *statestore.CheckpointHandle
	err = add(b.phase("checkpoint", func() (string, error) {
		if err := w.cp.Materialize(ctx); err != nil {
			return "", err
		}
		rep := w.cp.Stats().LastMaterialization
		var err error
		h, err = w.checkpoint(ctx, 1)
		return fmt.Sprintf("last materialisation uploaded %s in %d files", mib(rep.UploadedBytes), rep.Files), err
	}))
	if err != nil {
		return err
	}
	if err := w.close(); err != nil {
		return err
	}
	w = nil
	r, err := b.open(jobOptions{name: "restore", disk: true})
	if err != nil {
		return err
	}
	defer r.close()
	err = add(b.phase("restore", func() (string, error) {
		if err := r.cp.InitializeState(ctx, statestore.CheckpointInfo{OperatorID: "op", CheckpointID: 1}, h); err != nil {
			return "", err
		}
		rep := r.cp.Stats().LastRestore
		return fmt.Sprintf("%s in %d files, %d changes of the log", mib(rep.SnapshotBytes), rep.SnapshotFiles, rep.Changes), nil
	}))
	if err != nil {
		return err
	}
	err = add(b.phase("verify", func() (string, error) {
		if n := r.kv.Len(); n != b.keys {
			return "", fmt.Errorf("%d keys restored, want %d (%v)", n, b.keys, r.kv.Err())
		}
		if err := r.check(b.o.sample, b.keys, zero, 7); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d keys counted, %d sampled keys equal", b.keys, min(b.o.sample, b.keys)), nil
	}))
	if err != nil {
		return err
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tduration\tMiB/s\tpeak RSS\tpeak Go heap\tpeak Go memory\t")
	for _, p := range phases {
		fmt.Fprintf(tw, "%s\t%.1f s\t%.1f\t%s\t%s\t%s\t\n", p.name, p.d.Seconds(), float64(state)/(1<<20)/p.d.Seconds(), mib(p.hwm), mib(int64(p.heap)), mib(int64(p.goMm)))
	}
	tw.Flush()
	fmt.Println()
	for _, p := range phases {
		fmt.Printf("%s: %s\n", p.name, p.note)
	}
	var peak int64
	for _, p := range phases {
		peak = max(peak, p.hwm)
	}
	fmt.Printf("state %s (keys and values); database on disk after the write %s; peak RSS of the run %s\n",
		mib(state), mib(dbBytes), mib(peak))
	fmt.Println("MiB/s: the state's bytes ÷ the phase's duration. Peak RSS: VmHWM, reset at each phase's start; Go heap and memory:")
	fmt.Println("runtime/metrics sampled every 20 ms (heap objects, live and not yet swept; all the runtime's memory but what it released).")
	return nil
}

// --- churn ---

type roundStat struct {
	uploaded, changed int64
	files             int
	changedKeys       int64
	putD, matD        time.Duration
}

func (b *bench) churnMode(ctx context.Context) error {
	kinds := []bool{true}
	if b.o.memory {
		kinds = append(kinds, false)
	}
	type result struct {
		store  string
		pct    int
		rounds []roundStat
	}
	var results []result
	for _, disk := range kinds {
		store := map[bool]string{true: "disk", false: "memory"}[disk]
		j, err := b.open(jobOptions{name: "churn-" + store, disk: disk})
		if err != nil {
			return err
		}
		vers := make([]uint8, b.keys)
		ver := func(i int) int { return int(vers[i]) }
		if err := j.putAll(ctx, func(t int) int { return t }, b.keys, ver, store+": write"); err != nil {
			j.close()
			return err
		}
		start := time.Now()
		if err := j.cp.Materialize(ctx); err != nil {
			j.close()
			return err
		}
		first := j.cp.Stats().LastMaterialization
		fmt.Printf("%s: first materialisation (the whole state): %s uploaded in %d files, %.1f s\n",
			store, mib(first.UploadedBytes), first.Files, time.Since(start).Seconds())
		perm := make([]int, b.keys)
		for i := range perm {
			perm[i] = i
		}
		rng := mrand.New(mrand.NewPCG(11, 13))
		for _, pct := range b.o.churn {
			k := b.keys * pct / 100
			if k == 0 {
				j.close()
				return fmt.Errorf("%d %% of %d keys is no key: raise -mib", pct, b.keys)
			}
			res := result{store: store, pct: pct}
			for r := range b.o.rounds {
				// A fresh random set of k keys: a partial shuffle.
				for t := range k {
					u := t + rng.IntN(b.keys-t)
					perm[t], perm[u] = perm[u], perm[t]
				}
				for _, i := range perm[:k] {
					vers[i]++
				}
				t0 := time.Now()
				if err := j.putAll(ctx, func(t int) int { return perm[t] }, k, ver, ""); err != nil {
					j.close()
					return err
				}
				t1 := time.Now()
				if err := j.cp.Materialize(ctx); err != nil {
					j.close()
					return err
				}
				rep := j.cp.Stats().LastMaterialization
				rs := roundStat{uploaded: rep.UploadedBytes, changed: rep.ChangedBytes, changedKeys: rep.ChangedKeys, files: rep.Files,
					putD: t1.Sub(t0), matD: time.Since(t1)}
				if !disk {
					// The in-memory report names no changes: what changed
					// is the keys put and their values.
					rs.changed, rs.changedKeys = b.stateBytes(k), int64(k)
				}
				res.rounds = append(res.rounds, rs)
				fmt.Fprintf(os.Stderr, "%s %d%% round %d: uploaded %s for %s changed (%.2f×), %d files, materialised in %.1f s\n",
					store, pct, r+1, mib(rs.uploaded), mib(rs.changed), float64(rs.uploaded)/float64(rs.changed), rs.files, rs.matD.Seconds())
			}
			results = append(results, res)
		}
		if err := j.check(b.o.sample, b.keys, ver, 5); err != nil {
			j.close()
			return fmt.Errorf("%s: after the rounds: %w", store, err)
		}
		if err := j.close(); err != nil {
			return err
		}
	}

	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tstate\tchurn\trounds\tchanged/round\tuploaded/round\tupload÷changed mean\tmax\tfiles/round\tmaterialise s/round\t")
	for _, r := range results {
		var up, ch, files, secs float64
		var maxRatio float64
		for _, rs := range r.rounds {
			up += float64(rs.uploaded)
			ch += float64(rs.changed)
			files += float64(rs.files)
			secs += rs.matD.Seconds()
			maxRatio = max(maxRatio, float64(rs.uploaded)/float64(rs.changed))
		}
		var mean float64
		for _, rs := range r.rounds {
			mean += float64(rs.uploaded) / float64(rs.changed)
		}
		n := float64(len(r.rounds))
		mean /= n
		fmt.Fprintf(tw, "%s\t%s\t%d %%\t%d\t%s\t%s\t%.4f\t%.4f\t%.1f\t%.2f\t\n", r.store, mib(b.stateBytes(b.keys)), r.pct, len(r.rounds),
			mib(int64(ch/n)), mib(int64(up/n)), mean, maxRatio, files/n, secs/n)
	}
	if !b.o.memory {
		for _, pct := range b.o.churn {
			k := b.keys * pct / 100
			fmt.Fprintf(tw, "memory (computed)\t%s\t%d %%\t-\t%s\t%s\t%.4f\t-\t1\t-\t\n", mib(b.stateBytes(b.keys)), pct,
				mib(b.stateBytes(k)), mib(b.stateBytes(b.keys)), float64(b.keys)/float64(k))
		}
	}
	tw.Flush()
	fmt.Println("changed: disk, ChangedBytes of the report (the keys as the database holds them, with their 5-byte prefix, and the values);")
	fmt.Println("memory, the keys changed × (16 + value bytes). uploaded: UploadedBytes (the files and the manifest, or the snapshot object).")
	if !b.o.memory {
		fmt.Println("memory (computed): an in-memory checkpointer uploads the whole state at every materialisation: state ÷ changed, not measured.")
	}
	return nil
}

// --- restore ---

func (b *bench) restore(ctx context.Context) error {
	local := filepath.Join(b.work, "local-recovery")
	w, err := b.open(jobOptions{name: "write", disk: true, localDir: local})
	if err != nil {
		return err
	}
	if err := w.putAll(ctx, func(t int) int { return t }, b.keys, zero, "write"); err != nil {
		w.close()
		return err
	}
	if err := w.cp.Materialize(ctx); err != nil {
		w.close()
		return err
	}
	h, err := w.checkpoint(ctx, 1)
	if err != nil {
		w.close()
		return err
	}
	if err := w.close(); err != nil {
		return err
	}
	if len(h.Snapshots) != 1 || len(h.Snapshots[0].Files) == 0 {
		return fmt.Errorf("checkpoint names %d snapshots, want one disk-backed snapshot", len(h.Snapshots))
	}
	files := h.Snapshots[0].Files
	par := diskstate.DefaultParallelism
	fmt.Printf("checkpoint: a manifest naming %d files; restores and raw GETs download %d at once\n\n", len(files), par)

	type sample struct{ engine, rawFiles, rawDiscard float64 } // MiB/s
	var samples []sample
	var snapBytes int64
	var lastRep statestore.RestoreReport
	var gets int64
	engine := func(r int) (float64, error) {
		j, err := b.open(jobOptions{name: "restore", disk: true})
		if err != nil {
			return 0, err
		}
		defer j.close()
		if err := j.cp.InitializeState(ctx, statestore.CheckpointInfo{OperatorID: "op", CheckpointID: 1}, h); err != nil {
			return 0, err
		}
		rep := j.cp.Stats().LastRestore
		gets = j.count.Stats().Gets
		if r == 0 {
			if err := j.check(b.o.sample, b.keys, zero, 3); err != nil {
				return 0, err
			}
		}
		snapBytes, lastRep = rep.SnapshotBytes, rep
		return float64(rep.SnapshotBytes) / (1 << 20) / rep.Duration.Seconds(), j.close()
	}
	raw := func(dir string) (float64, error) {
		n, d, err := b.rawGets(ctx, files, par, dir)
		return float64(n) / (1 << 20) / d.Seconds(), err
	}
	for r := range b.o.rounds {
		// Each side in turn first, and every one after the dirty pages
		// are written back: what one leaves behind would slow the next.
		var s sample
		steps := []func() error{
			func() (err error) { s.engine, err = engine(r); return err },
			func() (err error) { s.rawFiles, err = raw(filepath.Join(b.work, "raw")); return err },
			func() (err error) { s.rawDiscard, err = raw(""); return err },
		}
		if r%2 == 1 {
			slices.Reverse(steps)
		}
		for _, step := range steps {
			settle()
			if err := step(); err != nil {
				return err
			}
		}
		samples = append(samples, s)
		fmt.Fprintf(os.Stderr, "round %d: restore %.0f MiB/s, raw GETs to files %.0f MiB/s, to nothing %.0f MiB/s\n",
			r+1, s.engine, s.rawFiles, s.rawDiscard)
	}
	med := func(f func(sample) float64) float64 {
		v := make([]float64, len(samples))
		for i, s := range samples {
			v[i] = f(s)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	eng := med(func(s sample) float64 { return s.engine })
	rf := med(func(s sample) float64 { return s.rawFiles })
	rd := med(func(s sample) float64 { return s.rawDiscard })
	rfRatio := med(func(s sample) float64 { return s.engine / s.rawFiles })
	rdRatio := med(func(s sample) float64 { return s.engine / s.rawDiscard })

	// Local recovery: the same checkpoint from the local copies.
	j, err := b.open(jobOptions{name: "local", disk: true, localDir: local})
	if err != nil {
		return err
	}
	before := j.count.Stats()
	if err := j.cp.InitializeState(ctx, statestore.CheckpointInfo{OperatorID: "op", CheckpointID: 1}, h); err != nil {
		j.close()
		return err
	}
	after := j.count.Stats()
	lrep := j.cp.Stats().LastRestore
	if err := j.check(b.o.sample, b.keys, zero, 4); err != nil {
		j.close()
		return err
	}
	if err := j.close(); err != nil {
		return err
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "restore of %s (%d files), %d rounds\tMiB/s, median\tengine ÷ it, median of the rounds\t\n", mib(snapBytes), len(files), len(samples))
	fmt.Fprintf(tw, "engine: InitializeState from the backend\t%.0f\t\t\n", eng)
	fmt.Fprintf(tw, "raw GETs, %d at once, into files\t%.0f\t%.2f\t\n", par, rf, rfRatio)
	fmt.Fprintf(tw, "raw GETs, %d at once, into nothing\t%.0f\t%.2f\t\n", par, rd, rdRatio)
	tw.Flush()
	fmt.Printf("last restore from the backend: %d GETs, %d snapshot files (%d local), %s, %.2f s\n",
		gets, lastRep.SnapshotFiles, lastRep.LocalSnapshotFiles, mib(lastRep.SnapshotBytes), lastRep.Duration.Seconds())
	fmt.Printf("restore from local copies: %d GETs (%d snapshot files fetched, %d of %d local; change sets %d local, %d remote), %.2f s (%.0f MiB/s)\n",
		after.Gets-before.Gets, lrep.SnapshotFiles-lrep.LocalSnapshotFiles, lrep.LocalSnapshotFiles, lrep.SnapshotFiles,
		lrep.Log.LocalSets, lrep.Log.RemoteSets, lrep.Duration.Seconds(), float64(lrep.SnapshotBytes)/(1<<20)/lrep.Duration.Seconds())
	if after.Gets != before.Gets {
		return fmt.Errorf("restore from local copies made %d GETs, want 0", after.Gets-before.Gets)
	}
	return nil
}

// rawGets downloads the objects, par at once, each into a new file of
// dir (removed afterwards), or into nothing when dir is "", and returns the
// bytes and the time it took.
func (b *bench) rawGets(ctx context.Context, objects []string, par int, dir string) (int64, time.Duration, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return 0, 0, err
		}
		defer os.RemoveAll(dir)
	}
	var total int64
	var mu sync.Mutex
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(par)
	for i, name := range objects {
		g.Go(func() error {
			r, err := b.backend.Get(gctx, name, 0, -1)
			if err != nil {
				return err
			}
			defer r.Close()
			var out io.Writer = io.Discard
			if dir != "" {
				f, err := os.Create(filepath.Join(dir, strconv.Itoa(i)))
				if err != nil {
					return err
				}
				defer f.Close()
				out = f
			}
			n, err := io.Copy(out, r)
			if err != nil {
				return fmt.Errorf("get %s: %w", name, err)
			}
			mu.Lock()
			total += n
			mu.Unlock()
			return nil
		})
	}
	err := g.Wait()
	return total, time.Since(start), err
}

// --- memory ---

// memPeak samples the Go runtime's memory.
type memPeak struct {
	mu          sync.Mutex
	heap, goMem uint64
}

func newMemPeak() *memPeak { return &memPeak{} }

var memMetrics = []string{"/memory/classes/heap/objects:bytes", "/memory/classes/total:bytes", "/memory/classes/heap/released:bytes"}

func (m *memPeak) sample(ctx context.Context) {
	s := make([]metrics.Sample, len(memMetrics))
	for i, n := range memMetrics {
		s[i].Name = n
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(s)
		heap := s[0].Value.Uint64()
		goMem := s[1].Value.Uint64() - s[2].Value.Uint64()
		m.mu.Lock()
		m.heap, m.goMem = max(m.heap, heap), max(m.goMem, goMem)
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *memPeak) reset() {
	m.mu.Lock()
	m.heap, m.goMem = 0, 0
	m.mu.Unlock()
}

func (m *memPeak) peaks() (heap, goMem uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.heap, m.goMem
}

// resetPeakRSS resets the kernel's peak resident set of this process
// (VmHWM), where Linux allows it.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// rss returns the resident set (VmRSS) and its peak (VmHWM) in bytes; 0
// where /proc is not there.
func rss() (cur, peak int64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			cur = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return cur, peak
}

// --- helpers ---

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("-heapprofile: %w", err)
	}
	runtime.GC()
	err = pprof.WriteHeapProfile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("-heapprofile: %w", err)
	}
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func backendName(basePath string) string {
	if basePath == "" {
		return "local directory"
	}
	return redactQuery(basePath)
}

// redactQuery drops a base path's query (endpoints and settings).
func redactQuery(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		return s[:i]
	}
	return s
}
