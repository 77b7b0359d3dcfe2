package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/examples/internal/child"
	"github.com/dstlgo/dstl/statestore"
)

// verifyOptions are verify's flags beyond the service's.
type verifyOptions struct {
	options
	scales     []int
	phase      time.Duration
	minFaults  int
	faultEvery time.Duration
	maxStop    time.Duration
	faultSeed  uint64
	timeout    time.Duration
	keep       bool
	verbose    bool
	disk       bool
}

func verifyMain(ctx context.Context, args []string, cmd child.Command, stdout, stderr io.Writer) int {
	var mu sync.Mutex
	stdout, stderr = child.LockedWriter{Mu: &mu, W: stdout}, child.LockedWriter{Mu: &mu, W: stderr}
	var o verifyOptions
	var scales string
	fs := flag.NewFlagSet("wordcount verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.flags(fs, false)
	fs.StringVar(&o.localDir, "local-recovery-dir", "", "give each instance local recovery in a directory of its own under this one")
	fs.StringVar(&scales, "scales", "3,2,4", "the instance counts, in turn: the job starts with the first and is rescaled to each next one")
	fs.DurationVar(&o.phase, "phase", 8*time.Second, "how long each instance count runs with faults before the next rescale")
	fs.IntVar(&o.minFaults, "faults", 10, "the least number of faults (kills and stops): the last count runs with faults until there were as many")
	fs.DurationVar(&o.faultEvery, "fault-every", time.Second, "mean time between faults")
	fs.DurationVar(&o.maxStop, "max-stop", 700*time.Millisecond, "longest stop (SIGSTOP to SIGCONT); below half the grace")
	fs.Uint64Var(&o.faultSeed, "fault-seed", 0, "seed of the faults (default: from the clock)")
	fs.DurationVar(&o.timeout, "timeout", 4*time.Minute, "give up (and fail) after this long")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory")
	fs.BoolVar(&o.disk, "disk", false, "keep each instance's state on disk (run -state-dir), in a directory of its own under the temporary directory, with incremental snapshots (SST files)")
	fs.BoolVar(&o.verbose, "v", false, "print the instances' event lines")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	for _, f := range strings.Split(scales, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 1 || p > maxParallelism {
			fmt.Fprintf(stderr, "wordcount verify: -scales %q: want instance counts from 1 to %d, comma-separated\n", scales, maxParallelism)
			return 2
		}
		o.scales = append(o.scales, p)
	}
	o.instances, o.index = o.scales[0], 0
	if o.jobID == "" {
		o.jobID = "wordcount-" + uuid.NewString() // runs never collide
	}
	tmp, err := os.MkdirTemp("", "wordcount-")
	if err != nil {
		fmt.Fprintf(stderr, "wordcount verify: %v\n", err)
		return 3
	}
	if o.keep {
		fmt.Fprintf(stdout, "wordcount verify: keeping %s\n", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	if o.basePath == "" {
		o.basePath = filepath.Join(tmp, "store")
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "wordcount verify: %v\n", err)
		return 2
	}
	if o.maxStop <= 0 || o.maxStop >= o.grace/2 || o.faultEvery <= 0 || o.phase <= 0 {
		fmt.Fprintf(stderr, "wordcount verify: -max-stop %v: want above 0 and below half the grace (%v); -fault-every and -phase positive\n", o.maxStop, o.grace/2)
		return 2
	}
	if o.faultSeed == 0 {
		o.faultSeed = uint64(time.Now().UnixNano())
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	v := &verifier{o: o, cmd: cmd, stdout: stdout, stderr: stderr, outDir: filepath.Join(tmp, "out"),
		rng: rand.New(rand.NewPCG(o.faultSeed, 0)), started: time.Now()}
	where := "in memory"
	if o.disk {
		v.stateDir = filepath.Join(tmp, "state")
		where = "on disk under " + v.stateDir
	}
	if err := os.MkdirAll(v.outDir, 0o755); err != nil {
		fmt.Fprintf(stderr, "wordcount verify: %v\n", err)
		return 3
	}
	fmt.Fprintln(stdout, verifyBanner(o, where))
	code := v.run(ctx)
	if code != 0 {
		fmt.Fprintf(stderr, "wordcount verify: FAILED (fault seed %d)\n", o.faultSeed)
	}
	return code
}

// verifyBanner is the first line verify prints: what it runs.
func verifyBanner(o verifyOptions, where string) string {
	return fmt.Sprintf("wordcount verify: instances %v, %d records in %s at %d/s per instance, checkpoint every %v, materialisation every %v, grace %v, state %s, on %s (job %s); fault seed %d",
		o.scales, o.records, partitionsText(), o.rate, o.interval, o.materialize, o.grace, where, o.basePath, o.jobID, o.faultSeed)
}

// partitionsText says which input partitions have records: those of the
// key groups that some word of the vocabulary falls in.
func partitionsText() string {
	return fmt.Sprintf("each of the %d input partitions that have words (of %d, one per key group)", nonEmptyPartitions(), maxParallelism)
}

// nonEmptyPartitions returns the number of input partitions that have
// words, and so records.
func nonEmptyPartitions() int {
	n := 0
	for kg := range maxParallelism {
		if len(partitionWords[kg]) > 0 {
			n++
		}
	}
	return n
}

// proc is one process of an instance.
type proc struct {
	index, of int
	cmd       *exec.Cmd
	exited    chan struct{}
	err       error // the exit's, once exited is closed
	// sawComplete: a checkpoint was complete before the process started,
	// so whatever generation it joins restores one.
	sawComplete bool

	// guarded by the verifier's mu
	ended     bool        // verify killed or terminated it
	stopped   bool        // SIGSTOPped
	cont      *time.Timer // its SIGCONT
	joins     int         // generation events printed
	done      bool        // printed doneEvent
	lastEvent string
}

// verifier runs the job's instances through faults and rescales.
type verifier struct {
	o              verifyOptions
	cmd            child.Command
	stdout, stderr io.Writer
	outDir         string
	stateDir       string // with -disk: the instances' state directories are under it
	rng            *rand.Rand
	started        time.Time

	mu       sync.Mutex
	procs    []*proc // of the current instance count, by index
	complete bool    // some instance printed a complete checkpoint
	failures []string
	lastExit time.Time
	// what happened
	kills, stops, restarts, crashes, rescales, restores, rejoins, firstStarts, stalls int
	fileRestores, files, localFiles                                                   int // restores that loaded snapshot files; the files
	materializations                                                                  int // reported by the instances
}

func (v *verifier) say(format string, args ...any) {
	fmt.Fprintf(v.stdout, "wordcount verify: [%5.1fs] %s\n", time.Since(v.started).Seconds(), fmt.Sprintf(format, args...))
}

func (v *verifier) fail(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.failures = append(v.failures, fmt.Sprintf(format, args...))
}

func (v *verifier) failed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.failures) > 0
}

// serviceArgs are the arguments of instance i of p.
func (v *verifier) serviceArgs(i, p int) []string {
	o := v.o
	args := []string{"-base-path", o.basePath, "-job-id", o.jobID, "-instances", fmt.Sprint(p), "-index", fmt.Sprint(i),
		"-records", fmt.Sprint(o.records), "-seed", fmt.Sprint(o.seed), "-rate", fmt.Sprint(o.rate),
		"-checkpoint-interval", o.interval.String(), "-materialize-interval", o.materialize.String(),
		"-grace", o.grace.String(), "-collect-interval", o.collect.String(), "-output", v.outputPath(i, p)}
	if o.localDir != "" {
		args = append(args, "-local-recovery-dir", filepath.Join(o.localDir, fmt.Sprintf("instance-%d", i)))
	}
	if v.stateDir != "" {
		args = append(args, "-state-dir", filepath.Join(v.stateDir, fmt.Sprintf("instance-%d", i)))
	}
	return args
}

func (v *verifier) outputPath(i, p int) string {
	return filepath.Join(v.outDir, fmt.Sprintf("counts-%d-of-%d.json", i, p))
}

// eventLine is an instance's event line.
var eventLine = regexp.MustCompile(`^wordcount: instance (\d+) of (\d+), generation (\d+): (.*)$`)

// restoredFiles finds the snapshot files a restore event counts.
var restoredFiles = regexp.MustCompile(`(\d+) snapshot file\(s\) \((\d+) local\)`)

// materializedTimes finds the count of a materialisation event.
var materializedTimes = regexp.MustCompile(`^` + materialized + ` (\d+) time`)

// start starts instance i of p.
func (v *verifier) start(ctx context.Context, i, p int) error {
	c, err := v.cmd(ctx, v.serviceArgs(i, p)...)
	if err != nil {
		return err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	c.Stderr = prefixWriter{prefix: fmt.Sprintf("[instance %d of %d] ", i, p), w: v.stderr}
	child.DieWithParent(c)
	v.mu.Lock()
	pr := &proc{index: i, of: p, cmd: c, exited: make(chan struct{}), sawComplete: v.complete}
	v.mu.Unlock()
	if err := c.Start(); err != nil {
		return fmt.Errorf("start instance %d of %d: %w", i, p, err)
	}
	v.mu.Lock()
	v.procs[i] = pr
	v.mu.Unlock()
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		v.scan(pr, out)
	}()
	go func() {
		<-lines // Wait closes the pipe: read it to the end first
		pr.err = c.Wait()
		v.mu.Lock()
		v.lastExit = time.Now()
		v.mu.Unlock()
		close(pr.exited)
	}()
	return nil
}

// scan reads a process's event lines.
func (v *verifier) scan(pr *proc, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v.o.verbose {
			fmt.Fprintln(v.stdout, line)
		}
		m := eventLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ev := m[4]
		v.mu.Lock()
		pr.lastEvent = ev
		switch {
		case strings.HasPrefix(ev, restoredMessage), strings.HasPrefix(ev, firstStart):
			pr.joins++
			if pr.joins > 1 {
				v.rejoins++
			}
			if strings.HasPrefix(ev, restoredMessage) {
				v.restores++
				if f := restoredFiles.FindStringSubmatch(ev); f != nil && f[1] != "0" {
					n, _ := strconv.Atoi(f[1])
					l, _ := strconv.Atoi(f[2])
					v.fileRestores++
					v.files += n
					v.localFiles += l
				}
			} else {
				v.firstStarts++
				if pr.joins == 1 && pr.sawComplete {
					v.failures = append(v.failures, fmt.Sprintf("instance %d of %d restored no checkpoint though one was complete before it started (it said %q)",
						pr.index, pr.of, line))
				}
			}
		case strings.HasSuffix(ev, completeEvent):
			v.complete = true
		case strings.HasPrefix(ev, doneEvent):
			pr.done = true
		case strings.HasPrefix(ev, stalledEvent):
			v.stalls++
		case strings.HasPrefix(ev, materialized):
			if f := materializedTimes.FindStringSubmatch(ev); f != nil {
				n, _ := strconv.Atoi(f[1])
				v.materializations += n
			}
		}
		v.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
}

// prefixWriter prefixes each line of an instance's standard error.
type prefixWriter struct {
	prefix string
	w      io.Writer
}

func (p prefixWriter) Write(b []byte) (int, error) {
	var sb strings.Builder
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line != "" {
			sb.WriteString(p.prefix + line)
		}
	}
	if _, err := io.WriteString(p.w, sb.String()); err != nil {
		return 0, err
	}
	return len(b), nil
}

// running returns the processes that run and are not stopped.
func (v *verifier) running() []*proc {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []*proc
	for _, p := range v.procs {
		if p != nil && !p.ended && !p.stopped && !isClosed(p.exited) {
			out = append(out, p)
		}
	}
	return out
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// kill kills a process with SIGKILL and restarts it after a short while.
func (v *verifier) kill(ctx context.Context, p *proc) error {
	v.mu.Lock()
	p.ended = true
	v.kills++
	v.mu.Unlock()
	v.say("kill instance %d of %d (SIGKILL)", p.index, p.of)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(v.rng.Int64N(int64(300 * time.Millisecond)))):
	}
	v.mu.Lock()
	v.restarts++
	v.mu.Unlock()
	return v.start(ctx, p.index, p.of)
}

// stop stops a process with SIGSTOP and continues it after a while.
func (v *verifier) stop(p *proc) {
	d := v.o.maxStop/4 + time.Duration(v.rng.Int64N(int64(v.o.maxStop*3/4)))
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return
	}
	v.stops++
	p.stopped = true
	fmt.Fprintf(v.stdout, "wordcount verify: [%5.1fs] stop instance %d of %d (SIGSTOP) for %v\n",
		time.Since(v.started).Seconds(), p.index, p.of, d.Round(time.Millisecond))
	p.cont = time.AfterFunc(d, func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if p.stopped {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			p.stopped = false
		}
	})
}

// stopAll ends every process: SIGCONT for a stopped one, SIGTERM, and
// SIGKILL for one that has not exited after a while.
func (v *verifier) stopAll() {
	v.mu.Lock()
	procs := slices.Clone(v.procs)
	for _, p := range procs {
		if p == nil {
			continue
		}
		p.ended = true
		if p.cont != nil {
			p.cont.Stop()
		}
		if p.stopped {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			p.stopped = false
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	v.mu.Unlock()
	for _, p := range procs {
		if p == nil {
			continue
		}
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.exited
		}
	}
}

// restartCrashed restarts the processes that exited unasked.
func (v *verifier) restartCrashed(ctx context.Context) error {
	v.mu.Lock()
	var crashed []*proc
	for _, p := range v.procs {
		if p != nil && !p.ended && isClosed(p.exited) {
			p.ended = true
			if p.done && p.err == nil {
				continue // a job of one instance ends with its input
			}
			v.crashes++
			crashed = append(crashed, p)
		}
	}
	n := v.crashes
	v.mu.Unlock()
	for _, p := range crashed {
		v.say("instance %d of %d exited unasked (%v); restarting it", p.index, p.of, p.err)
		if n > 10 {
			return fmt.Errorf("%d instances exited unasked", n)
		}
		if err := v.start(ctx, p.index, p.of); err != nil {
			return err
		}
		v.mu.Lock()
		v.restarts++
		v.mu.Unlock()
	}
	return nil
}

func (v *verifier) faults() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.kills + v.stops
}

// gap returns the time to the next fault: from half to one and a half
// times the mean.
func (v *verifier) gap() time.Duration {
	return v.o.faultEvery/2 + time.Duration(v.rng.Int64N(int64(v.o.faultEvery)))
}

// phase runs the current processes with faults until end (and, in the
// last phase, until there were enough faults).
func (v *verifier) phase(ctx context.Context, end time.Time, last bool) error {
	next := time.Now().Add(v.gap())
	for time.Now().Before(end) || last && v.faults() < v.o.minFaults {
		if v.failed() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out with %d faults: %w", v.faults(), ctx.Err())
		case <-time.After(min(time.Until(next), 50*time.Millisecond)):
		}
		if err := v.restartCrashed(ctx); err != nil {
			return err
		}
		if time.Now().Before(next) {
			continue
		}
		next = time.Now().Add(v.gap())
		procs := v.running()
		if len(procs) == 0 {
			continue
		}
		p := procs[v.rng.IntN(len(procs))]
		if v.rng.IntN(2) == 0 {
			if err := v.kill(ctx, p); err != nil {
				return err
			}
		} else {
			v.stop(p)
		}
	}
	return nil
}

// finish waits until every instance wrote its counts.
func (v *verifier) finish(ctx context.Context) error {
	for {
		if v.failed() {
			return nil
		}
		v.mu.Lock()
		done := 0
		for _, p := range v.procs {
			if p.done {
				done++
			}
		}
		total := len(v.procs)
		v.mu.Unlock()
		if done == total {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for the end of the input (%d of %d instances done): %w", done, total, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if err := v.restartCrashed(ctx); err != nil {
			return err
		}
	}
}

func (v *verifier) run(ctx context.Context) int {
	defer v.stopAll()
	for n, p := range v.o.scales {
		if n > 0 {
			v.mu.Lock()
			done := 0
			for _, pr := range v.procs {
				if pr.done {
					done++
				}
			}
			v.mu.Unlock()
			v.say("rescale %d → %d: stop every instance (%d of %d had read all their input), start %d", v.o.scales[n-1], p, done, v.o.scales[n-1], p)
			v.stopAll()
			v.mu.Lock()
			v.rescales++
			v.mu.Unlock()
		}
		v.mu.Lock()
		v.procs = make([]*proc, p)
		v.mu.Unlock()
		for i := range p {
			if err := v.start(ctx, i, p); err != nil {
				fmt.Fprintf(v.stderr, "wordcount verify: %v\n", err)
				return 3
			}
		}
		last := n == len(v.o.scales)-1
		if err := v.phase(ctx, time.Now().Add(v.o.phase), last); err != nil {
			fmt.Fprintf(v.stderr, "wordcount verify: %v\n", err)
			return 1
		}
		if v.failed() {
			break
		}
	}
	if !v.failed() {
		v.say("faults over; waiting for the end of the input")
		if err := v.finish(ctx); err != nil {
			fmt.Fprintf(v.stderr, "wordcount verify: %v\n", err)
			return 1
		}
	}
	v.stopAll()
	v.mu.Lock()
	failures := slices.Clone(v.failures)
	v.say("faults: %d kills, %d stops; %d restarts (%d after a crash); %d rescales (%s); %d restores, %d first starts, %d joins again (%d after a stall)",
		v.kills, v.stops, v.restarts, v.crashes, v.rescales, joinInts(v.o.scales, " → "), v.restores, v.firstStarts, v.rejoins, v.stalls)
	state := "in memory"
	if v.stateDir != "" {
		state = fmt.Sprintf("on disk: %d restores loaded snapshot files, %d files (%d local)", v.fileRestores, v.files, v.localFiles)
	}
	v.say("materialisations: %d (seen by a checkpoint); state %s", v.materializations, state)
	v.mu.Unlock()
	if len(failures) > 0 {
		for _, f := range failures {
			fmt.Fprintf(v.stderr, "wordcount verify: FAILED: %s\n", f)
		}
		return 1
	}
	if v.faults() < v.o.minFaults {
		fmt.Fprintf(v.stderr, "wordcount verify: FAILED: %d faults, want at least %d\n", v.faults(), v.o.minFaults)
		return 1
	}
	want := expected(v.o.seed, v.o.records)
	code := 0
	if err := v.checkOutputs(want); err != nil {
		fmt.Fprintf(v.stderr, "wordcount verify: FAILED: %v\n", err)
		code = 1
	}
	if err := v.checkStore(ctx, want); err != nil {
		fmt.Fprintf(v.stderr, "wordcount verify: FAILED: %v\n", err)
		code = 1
	}
	if code == 0 {
		var total int64
		for _, n := range want {
			total += n
		}
		v.say("OK: %d distinct words, %d words in %d records, exactly as counted without faults; the store holds what the retained checkpoint names and nothing else",
			len(want), total, v.o.records*int64(nonEmptyPartitions()))
	}
	return code
}

func joinInts(xs []int, sep string) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, sep)
}

// checkOutputs compares the counts the instances of the last count wrote
// with the independent count.
func (v *verifier) checkOutputs(want map[string]int64) error {
	p := v.o.scales[len(v.o.scales)-1]
	got := map[string]int64{}
	for i := range p {
		b, err := os.ReadFile(v.outputPath(i, p))
		if err != nil {
			return fmt.Errorf("counts of instance %d of %d: %w", i, p, err)
		}
		var part map[string]int64
		if err := json.Unmarshal(b, &part); err != nil {
			return fmt.Errorf("counts of instance %d of %d: %w", i, p, err)
		}
		for w, n := range part {
			if _, dup := got[w]; dup {
				return fmt.Errorf("%q counted by two instances", w)
			}
			got[w] = n
		}
	}
	if bad := compare(want, got); len(bad) > 0 {
		return fmt.Errorf("the instances' final counts: %d words differ from the independent count:\n  %s", len(bad), strings.Join(bad[:min(len(bad), 20)], "\n  "))
	}
	v.say("the %d instances' final counts: %d words, equal to the independent count", p, len(got))
	return nil
}

// checkStore restores the job's latest complete checkpoint as the one
// instance of a new generation and compares its counts and offsets with
// the input; then, once every object the instances wrote is older than the
// grace, it applies the deletion rule and checks that the job's prefix
// holds what the retained checkpoint names and nothing else.
func (v *verifier) checkStore(ctx context.Context, want map[string]int64) error {
	o := v.o
	cfg := dstl.DefaultConfig(o.basePath)
	cfg.JobID = o.jobID
	storage, err := dstl.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer storage.Close()
	b := storage.Backend()
	m, err := catalog.Join(ctx, b, catalog.Config{JobID: o.jobID, Instances: 1, Index: 0, MaxParallelism: maxParallelism, Grace: o.grace})
	if err != nil {
		return fmt.Errorf("join as the final restore: %w", err)
	}
	all := dstl.KeyGroupRange{Start: 0, End: maxParallelism - 1}
	parts := m.Restore()
	handles, offsets, err := restorePoint(parts, all, o.records)
	if err != nil {
		return err
	}
	for kg, off := range offsets {
		if off != o.records {
			return fmt.Errorf("the latest complete checkpoint, %d, holds offset %d of partition %d, want its end, %d", m.Generation().RestoredCheckpoint, off, kg, o.records)
		}
	}
	scfg := statestore.Config{Operator: "wordcount-verify", KeyGroups: all, MaxParallelism: maxParallelism,
		MaterializeInterval: -1, MaterializeSize: -1, KeepSnapshots: true}
	if v.stateDir != "" {
		scfg.Dir = v.stateDir // a disk-backed snapshot restores into disk-backed stores
	}
	cp, err := statestore.NewCheckpointer(storage, scfg)
	if err != nil {
		return err
	}
	counts, err := statestore.NewKeyValueStore("counts", cp.Log(), statestore.StringCodec{}, statestore.Int64Codec{}, statestore.WithMaxParallelism(maxParallelism))
	if err == nil {
		err = cp.Register(counts)
	}
	if err == nil {
		err = cp.InitializeState(ctx, statestore.CheckpointInfo{OperatorID: "wordcount", CheckpointID: m.Generation().RestoredCheckpoint}, handles...)
	}
	if err != nil {
		cp.Close()
		return fmt.Errorf("restore the latest complete checkpoint: %w", err)
	}
	got := map[string]int64{}
	for w, n := range counts.All() {
		got[w] = n
	}
	cp.Close()
	if bad := compare(want, got); len(bad) > 0 {
		return fmt.Errorf("the latest complete checkpoint's counts: %d words differ from the independent count:\n  %s", len(bad), strings.Join(bad[:min(len(bad), 20)], "\n  "))
	}
	if len(parts) == 0 {
		return fmt.Errorf("generation %d restores no checkpoint", m.Generation().Number)
	}
	v.say("restored checkpoint %d (generation %d's, %d parts) as the one instance of generation %d: every partition read to its end, counts equal to the independent count",
		m.Generation().RestoredCheckpoint, parts[0].Generation, len(parts), m.Generation().Number)
	if v.stateDir != "" {
		files, inherited := snapshotFiles(o.jobID, handles)
		v.say("its snapshots name %d snapshot files, %d of them written by an instance of an earlier instance count (shared since a rescale)", files, inherited)
	}

	v.mu.Lock()
	wait := time.Until(v.lastExit.Add(o.grace + 500*time.Millisecond))
	v.mu.Unlock()
	v.say("waiting %v for the grace to pass, then the final run of the deletion rule", wait.Round(time.Millisecond))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
	}
	c, err := collectOnce(ctx, m)
	if err != nil {
		return fmt.Errorf("final deletion rule: %w", err)
	}
	r, err := inventory(ctx, b, o.jobID, c.plan, time.Now().Add(-o.grace))
	if err != nil {
		return err
	}
	v.say("final deletion rule: %d catalog and %d data objects deleted (%d snapshot files); the job's prefix holds %d objects: %d that the retained checkpoint names (%d log, %d snapshot, %d snapshot file), %d catalog objects it keeps, %d younger than the grace, %d left behind, %d missing",
		c.catalogDrops, c.dataDeletes, c.fileDeletes, r.total, r.logs+r.snapshots+r.files, r.logs, r.snapshots, r.files, r.catalog, r.young, len(r.left), len(r.missing))
	if len(r.left) > 0 || len(r.missing) > 0 {
		return fmt.Errorf("the job's prefix: %d objects left behind %q; %d named by the retained checkpoint but missing %q",
			len(r.left), r.left[:min(len(r.left), 20)], len(r.missing), r.missing[:min(len(r.missing), 20)])
	}
	return nil
}

// report is what a job's prefix holds, against a plan of the deletion
// rule.
type report struct {
	total, logs, snapshots, files, catalog, young int
	left, missing                                 []string
}

// inventory lists the job's prefix: every object must be one the plan
// keeps (a log object, snapshot object or snapshot file of Keep; a catalog
// part of Parts, the record of the live generation or of a generation with
// kept parts, a claim of the live generation) or younger than cutoff;
// every object of Keep must be there.
func inventory(ctx context.Context, b backends.Backend, jobID string, plan *catalog.Plan, cutoff time.Time) (report, error) {
	prefix := objname.JobPrefix(jobID)
	keptParts, keptGens := map[string]bool{}, map[int64]bool{plan.Generation: true}
	for _, name := range plan.Parts {
		keptParts[name] = true
		keptGens[objname.ParseCatalog(prefix, name).Generation] = true
	}
	var r report
	seen := map[string]bool{}
	err := b.List(ctx, prefix, func(o backends.ObjectInfo) error {
		r.total++
		seen[o.Name] = true
		c := objname.ParseCatalog(prefix, o.Name)
		switch {
		case plan.Keep[o.Name]:
			switch objname.Parse(prefix, o.Name).Kind {
			case objname.Snapshot:
				r.snapshots++
			case objname.SnapshotFile:
				r.files++
			default:
				r.logs++
			}
		case c.Kind == objname.CatalogPart && keptParts[o.Name],
			c.Kind == objname.CatalogGeneration && keptGens[c.Generation],
			c.Kind == objname.CatalogClaim && c.Generation == plan.Generation:
			r.catalog++
		case o.ModTime.After(cutoff):
			r.young++
		default:
			r.left = append(r.left, o.Name)
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("list %q: %w", prefix, err)
	}
	for name := range plan.Keep {
		if !seen[name] {
			r.missing = append(r.missing, name)
		}
	}
	sort.Strings(r.missing)
	return r, nil
}

// snapshotFiles counts the snapshot files that the handles' snapshots
// name (each once), and those of them that another operator than the
// handle's (an instance of an earlier instance count) wrote.
func snapshotFiles(jobID string, handles []*statestore.CheckpointHandle) (files, inherited int) {
	prefix := objname.JobPrefix(jobID)
	seen := map[string]bool{}
	for _, h := range handles {
		for _, s := range h.Snapshots {
			for _, f := range s.Files {
				if seen[f] {
					continue
				}
				seen[f] = true
				files++
				if objname.Parse(prefix, f).Operator != h.Operator {
					inherited++
				}
			}
		}
	}
	return files, inherited
}

func compare(want, got map[string]int64) []string {
	var bad []string
	for w, n := range want {
		if got[w] != n {
			bad = append(bad, fmt.Sprintf("%q: want %d, got %d", w, n, got[w]))
		}
	}
	for w, n := range got {
		if _, ok := want[w]; !ok {
			bad = append(bad, fmt.Sprintf("%q: unexpected count %d", w, n))
		}
	}
	sort.Strings(bad)
	return bad
}
