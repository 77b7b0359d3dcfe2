package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/examples/internal/child"
	"github.com/dstlgo/dstl/internal/flagusage"
	"github.com/dstlgo/dstl/statestore"
)

// layout is a number of instances and of processes that run them.
type layout struct{ instances, processes int }

// String returns "P" when each process runs one instance, else "P/Q".
func (l layout) String() string {
	if l.instances == l.processes {
		return strconv.Itoa(l.instances)
	}
	return fmt.Sprintf("%d/%d", l.instances, l.processes)
}

// parseLayouts reads -scales: comma-separated layouts, each P (P
// instances in P processes) or P/Q (P instances in Q processes).
func parseLayouts(s string) ([]layout, error) {
	var out []layout
	for _, f := range strings.Split(s, ",") {
		p, q, split := strings.Cut(strings.TrimSpace(f), "/")
		l := layout{}
		var err error
		if l.instances, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("%q: %w", f, err)
		}
		l.processes = l.instances
		if split {
			if l.processes, err = strconv.Atoi(q); err != nil {
				return nil, fmt.Errorf("%q: %w", f, err)
			}
		}
		if l.instances < 1 || l.instances > maxParallelism || l.processes < 1 || l.processes > l.instances {
			return nil, fmt.Errorf("%q: want 1 to %d instances in 1 to as many processes", f, maxParallelism)
		}
		out = append(out, l)
	}
	return out, nil
}

// verifyOptions are verify's flags beyond the service's.
type verifyOptions struct {
	options
	scales     []layout
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
	flagusage.Set(fs)
	fs.SetOutput(stderr)
	o.flags(fs, false)
	fs.StringVar(&o.localDir, "local-recovery-dir", "", "give each process local recovery in a directory of its own under this one")
	fs.StringVar(&scales, "scales", "3,2,4/2", "the layouts, in turn: P (P instances in P processes) or P/Q (P instances in Q processes); the job starts with the first and is rescaled to each next one")
	fs.DurationVar(&o.phase, "phase", 8*time.Second, "how long each layout runs with faults before the next rescale")
	fs.IntVar(&o.minFaults, "faults", 10, "the least number of faults (kills and stops): the last layout runs with faults until there were as many")
	fs.DurationVar(&o.faultEvery, "fault-every", time.Second, "mean time between faults")
	fs.DurationVar(&o.maxStop, "max-stop", 700*time.Millisecond, "longest stop (SIGSTOP to SIGCONT); it may exceed the grace")
	fs.Uint64Var(&o.faultSeed, "fault-seed", 0, "seed of the faults (default: from the clock)")
	fs.DurationVar(&o.timeout, "timeout", 4*time.Minute, "give up (and fail) after this long")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory")
	fs.BoolVar(&o.disk, "disk", false, "keep each instance's state on disk (run --state-dir), in a directory of its own per process under the temporary directory, with incremental snapshots (SST files)")
	fs.BoolVar(&o.verbose, "v", false, "print the processes' event lines")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	var err error
	if o.scales, err = parseLayouts(scales); err != nil {
		fmt.Fprintf(stderr, "wordcount verify: -scales %q: %v\n", scales, err)
		return 2
	}
	o.instances, o.processes, o.index = o.scales[0].instances, o.scales[0].processes, 0
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
	if o.maxStop <= 0 || o.faultEvery <= 0 || o.phase <= 0 {
		fmt.Fprintf(stderr, "wordcount verify: -max-stop %v, -fault-every %v, -phase %v: want them positive\n", o.maxStop, o.faultEvery, o.phase)
		return 2
	}
	if o.faultSeed == 0 {
		o.faultSeed = uint64(time.Now().UnixNano())
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	v := &verifier{o: o, cmd: cmd, stdout: stdout, stderr: stderr, outDir: filepath.Join(tmp, "out"),
		rng: rand.New(rand.NewPCG(o.faultSeed, 0)), started: time.Now(), completed: map[int64]bool{}}
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
	return fmt.Sprintf("wordcount verify: layouts %s (instances/processes), %d records in %s at %d/s per instance, checkpoint every %v, materialisation every %v, grace %v, stops up to %v, state %s, on %s (job %s); fault seed %d",
		joinLayouts(o.scales), o.records, partitionsText(), o.rate, o.interval, o.materialize, o.grace, o.maxStop, where, o.basePath, o.jobID, o.faultSeed)
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

func joinLayouts(ls []layout) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.String())
	}
	return strings.Join(s, " → ")
}

// proc is one OS process of the job.
type proc struct {
	index  int
	layout layout
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the exit's, once exited is closed
	// sawComplete: a checkpoint was complete before the process started,
	// so whatever generation it joins restores one.
	sawComplete bool

	// guarded by the verifier's mu
	ended      bool        // verify killed or terminated it
	stopped    bool        // SIGSTOPped
	cont       *time.Timer // its SIGCONT
	generation int64       // of its latest restore line
	joins      int         // generations it restored in
	done       bool        // printed doneEvent
}

func (p *proc) String() string {
	first, last := catalog.InstancesOf(p.index, p.layout.processes, p.layout.instances)
	if first == last {
		return fmt.Sprintf("process %d of %d (instance %d)", p.index, p.layout.processes, first)
	}
	return fmt.Sprintf("process %d of %d (instances %d to %d of %d)", p.index, p.layout.processes, first, last, p.layout.instances)
}

// verifier runs the job's processes through faults and rescales.
type verifier struct {
	o              verifyOptions
	cmd            child.Command
	stdout, stderr io.Writer
	outDir         string
	stateDir       string // with -disk: the processes' state directories are under it
	rng            *rand.Rand
	started        time.Time

	mu        sync.Mutex
	procs     []*proc // of the current layout, by index
	complete  bool    // some process confirmed a checkpoint
	completed map[int64]bool
	failures  []string
	lastExit  time.Time
	lastStart time.Time // when the last layout's processes were started
	// what happened
	kills, stops, longStops, restarts, crashes, rescales, restores, rejoins, firstStarts, fences int
	fileRestores, files, localFiles                                                              int // restores that loaded snapshot files; the files
	materializations                                                                             int // reported by the instances
}

func (v *verifier) say(format string, args ...any) {
	fmt.Fprintf(v.stdout, "wordcount verify: [%5.1fs] %s\n", time.Since(v.started).Seconds(), fmt.Sprintf(format, args...))
}

func (v *verifier) failed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.failures) > 0
}

// serviceArgs are the arguments of process i of layout l.
func (v *verifier) serviceArgs(i int, l layout) []string {
	o := v.o
	args := []string{"-base-path", o.basePath, "-job-id", o.jobID,
		"-instances", fmt.Sprint(l.instances), "-processes", fmt.Sprint(l.processes), "-index", fmt.Sprint(i),
		"-records", fmt.Sprint(o.records), "-seed", fmt.Sprint(o.seed), "-rate", fmt.Sprint(o.rate),
		"-checkpoint-interval", o.interval.String(), "-materialize-interval", o.materialize.String(),
		"-grace", o.grace.String(), "-collect-interval", o.collect.String(), "-output", v.outputPath(i, l)}
	if o.localDir != "" {
		args = append(args, "-local-recovery-dir", filepath.Join(o.localDir, fmt.Sprintf("process-%d", i)))
	}
	if v.stateDir != "" {
		args = append(args, "-state-dir", filepath.Join(v.stateDir, fmt.Sprintf("process-%d", i)))
	}
	return args
}

func (v *verifier) outputPath(i int, l layout) string {
	return filepath.Join(v.outDir, fmt.Sprintf("counts-%d-of-%d-running-%d.json", i, l.processes, l.instances))
}

// eventLine is a process's event line: process, processes, generation,
// the instance (for an instance's event) and the event.
var eventLine = regexp.MustCompile(`^wordcount: process (\d+) of (\d+), generation (\d+): (?:instance (\d+): )?(.*)$`)

// restoredFiles finds the snapshot files a restore event counts.
var restoredFiles = regexp.MustCompile(`(\d+) snapshot file\(s\) \((\d+) local\)`)

// materializedTimes finds the count of a materialisation event.
var materializedTimes = regexp.MustCompile(`^` + materialized + ` (\d+) time`)

// completedCheckpoint finds the checkpoint of a complete event.
var completedCheckpoint = regexp.MustCompile(`^checkpoint (\d+) ` + completeEvent + `$`)

// start starts process i of layout l.
func (v *verifier) start(ctx context.Context, i int, l layout) error {
	c, err := v.cmd(ctx, v.serviceArgs(i, l)...)
	if err != nil {
		return err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	c.Stderr = prefixWriter{prefix: fmt.Sprintf("[process %d of %d] ", i, l.processes), w: v.stderr}
	child.DieWithParent(c)
	v.mu.Lock()
	pr := &proc{index: i, layout: l, cmd: c, exited: make(chan struct{}), sawComplete: v.complete}
	v.mu.Unlock()
	if err := c.Start(); err != nil {
		return fmt.Errorf("start %v: %w", pr, err)
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
		gen, _ := strconv.ParseInt(m[3], 10, 64)
		ev := m[5]
		v.mu.Lock()
		switch {
		case strings.HasPrefix(ev, restoredMessage), strings.HasPrefix(ev, firstStart):
			if gen != pr.generation {
				pr.generation = gen
				pr.joins++
				if pr.joins > 1 {
					v.rejoins++
				}
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
					v.failures = append(v.failures, fmt.Sprintf("%v restored no checkpoint though one was complete before it started (it said %q)",
						pr, line))
				}
			}
		case completedCheckpoint.MatchString(ev):
			n, _ := strconv.ParseInt(completedCheckpoint.FindStringSubmatch(ev)[1], 10, 64)
			v.complete = true
			v.completed[n] = true
		case strings.HasPrefix(ev, doneEvent):
			pr.done = true
		case strings.HasPrefix(ev, fencedEvent):
			v.fences++
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

// prefixWriter prefixes each line of a process's standard error.
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

// running returns the processes that run the job and are not stopped:
// those that restored their instances at least once (on a busy machine,
// faults that hit processes still starting would leave the job no time
// to complete a checkpoint).
func (v *verifier) running() []*proc {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []*proc
	for _, p := range v.procs {
		if p != nil && p.joins > 0 && !p.ended && !p.stopped && !isClosed(p.exited) {
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
	v.say("kill %v (SIGKILL)", p)
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
	return v.start(ctx, p.index, p.layout)
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
	long := ""
	if d > v.o.grace {
		v.longStops++
		long = ", longer than the grace"
	}
	p.stopped = true
	fmt.Fprintf(v.stdout, "wordcount verify: [%5.1fs] stop %v (SIGSTOP) for %v%s\n",
		time.Since(v.started).Seconds(), p, d.Round(time.Millisecond), long)
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
				continue // a job of one process ends with its input
			}
			v.crashes++
			crashed = append(crashed, p)
		}
	}
	n := v.crashes
	v.mu.Unlock()
	for _, p := range crashed {
		v.say("%v exited unasked (%v); restarting it", p, p.err)
		if n > 10 {
			return fmt.Errorf("%d processes exited unasked", n)
		}
		if err := v.start(ctx, p.index, p.layout); err != nil {
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

// finish waits until every process wrote its counts.
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
			return fmt.Errorf("timed out waiting for the end of the input (%d of %d processes done): %w", done, total, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if err := v.restartCrashed(ctx); err != nil {
			return err
		}
	}
}

func (v *verifier) run(ctx context.Context) int {
	defer v.stopAll()
	for n, l := range v.o.scales {
		if n > 0 {
			v.mu.Lock()
			done := 0
			for _, pr := range v.procs {
				if pr.done {
					done++
				}
			}
			v.mu.Unlock()
			prev := v.o.scales[n-1]
			v.say("rescale %v → %v (%d instances in %d processes): stop every process (%d of %d had read all their input), start %d",
				prev, l, l.instances, l.processes, done, prev.processes, l.processes)
			v.stopAll()
			v.mu.Lock()
			v.rescales++
			v.mu.Unlock()
		}
		v.mu.Lock()
		v.procs = make([]*proc, l.processes)
		v.lastStart = time.Now()
		v.mu.Unlock()
		for i := range l.processes {
			if err := v.start(ctx, i, l); err != nil {
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
	latest := int64(0)
	for n := range v.completed {
		latest = max(latest, n)
	}
	v.say("faults: %d kills, %d stops (%d longer than the grace); %d restarts (%d after a crash); %d rescales (%s); %d restores, %d first starts, %d joins again, %d fences; %d checkpoints confirmed (the latest %d)",
		v.kills, v.stops, v.longStops, v.restarts, v.crashes, v.rescales, joinLayouts(v.o.scales), v.restores, v.firstStarts, v.rejoins, v.fences, len(v.completed), latest)
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
	if v.restores == 0 && (v.kills > 0 || len(v.o.scales) > 1) {
		fmt.Fprintf(v.stderr, "wordcount verify: FAILED: no process restored a checkpoint, so no restore was checked: the faults left the job no time to complete one (a longer -fault-every or -phase gives it more)\n")
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

// checkOutputs compares the counts the processes of the last layout wrote
// with the independent count.
func (v *verifier) checkOutputs(want map[string]int64) error {
	l := v.o.scales[len(v.o.scales)-1]
	got := map[string]int64{}
	for i := range l.processes {
		b, err := os.ReadFile(v.outputPath(i, l))
		if err != nil {
			return fmt.Errorf("counts of process %d of %d: %w", i, l.processes, err)
		}
		var part map[string]int64
		if err := json.Unmarshal(b, &part); err != nil {
			return fmt.Errorf("counts of process %d of %d: %w", i, l.processes, err)
		}
		for w, n := range part {
			if _, dup := got[w]; dup {
				return fmt.Errorf("%q counted by two processes", w)
			}
			got[w] = n
		}
	}
	if bad := compare(want, got); len(bad) > 0 {
		return fmt.Errorf("the processes' final counts: %d words differ from the independent count:\n  %s", len(bad), strings.Join(bad[:min(len(bad), 20)], "\n  "))
	}
	v.say("the final counts of the %d processes (%d instances): %d words, equal to the independent count", l.processes, l.instances, len(got))
	return nil
}

// checkStore restores the job's latest complete checkpoint as the one
// instance of a new generation and compares its counts and offsets with
// the input, and commits it as that generation's first checkpoint; then,
// once the grace has passed since the last write, it applies the deletion
// rule and checks that the job's prefix holds what that checkpoint names
// and nothing else but what the rule must keep.
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
	log := slog.New(slog.NewTextHandler(v.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := catalog.Join(ctx, b, catalog.Config{JobID: o.jobID, Instances: 1, MaxParallelism: maxParallelism, Grace: o.grace,
		SweepInterval: o.collect, Logger: log})
	if err != nil {
		return fmt.Errorf("join as the final restore: %w", err)
	}
	gen := m.Generation()
	all := dstl.KeyGroupRange{Start: 0, End: maxParallelism - 1}
	parts := m.Restore(0)
	if len(parts) == 0 {
		return fmt.Errorf("generation %d restores no checkpoint", gen.Number)
	}
	var handles []*statestore.CheckpointHandle
	var restored []map[string]string
	for _, p := range parts {
		h := new(statestore.CheckpointHandle)
		if err := h.UnmarshalBinary(p.State); err != nil {
			return fmt.Errorf("part of instance %d in %s: %w", p.Instance, p.Name, err)
		}
		handles, restored = append(handles, h), append(restored, p.Metadata)
	}
	offsets, err := restoredOffsets(restored, all, o.records)
	if err != nil {
		return err
	}
	for kg, off := range offsets {
		if off != o.records {
			return fmt.Errorf("the latest complete checkpoint, %d, holds offset %d of partition %d, want its end, %d", gen.RestoredCheckpoint, off, kg, o.records)
		}
	}
	cp, got, err := v.restore(ctx, storage, "verify", gen.FirstCheckpoint, gen.RestoredCheckpoint, handles)
	if err != nil {
		return fmt.Errorf("restore the latest complete checkpoint: %w", err)
	}
	defer cp.Close()
	if bad := compare(want, got); len(bad) > 0 {
		return fmt.Errorf("the latest complete checkpoint's counts: %d words differ from the independent count:\n  %s", len(bad), strings.Join(bad[:min(len(bad), 20)], "\n  "))
	}
	v.say("restored checkpoint %d (generation %d's, %d parts) as the one instance of generation %d: every partition read to its end, counts equal to the independent count",
		gen.RestoredCheckpoint, parts[0].Generation, len(parts), gen.Number)
	if v.stateDir != "" {
		v.mu.Lock()
		since := v.lastStart
		v.mu.Unlock()
		files, inherited := snapshotFiles(o.jobID, handles, since)
		v.say("its snapshots name %d snapshot files, %d of them written by a process of an earlier layout (shared since a rescale)", files, inherited)
	}

	// The restored state is the job's: commit it as the generation's
	// first checkpoint, which the deletion rule then retains.
	n := gen.FirstCheckpoint
	h, err := cp.SnapshotState(ctx, statestore.CheckpointInfo{OperatorID: operator + "-verify", CheckpointID: n})
	if err != nil {
		return fmt.Errorf("checkpoint %d of the restored state: %w", n, err)
	}
	state, err := h.MarshalBinary()
	if err != nil {
		return err
	}
	meta := map[string]string{}
	for kg, off := range offsets {
		meta[offsetKey(kg)] = strconv.FormatInt(off, 10)
	}
	st, err := m.Commit(ctx, n, []catalog.InstanceState{{Instance: 0, State: state, Objects: h.Objects(), Metadata: meta, HoldFrom: cp.HoldFrom()}})
	if err != nil {
		return fmt.Errorf("commit checkpoint %d of the restored state: %w", n, err)
	}
	if st.Complete != n {
		return fmt.Errorf("the commit of checkpoint %d, the only process's, left the latest complete checkpoint at %d", n, st.Complete)
	}
	if err := cp.NotifyCheckpointComplete(ctx, n); err != nil {
		return err
	}
	committed := time.Now()

	wait := time.Until(committed.Add(o.grace + 500*time.Millisecond))
	v.say("committed it as checkpoint %d; waiting %v for the grace to pass, then the final run of the deletion rule", n, wait.Round(time.Millisecond))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
	}
	c, err := collectOnce(ctx, m)
	if err != nil {
		return fmt.Errorf("final deletion rule: %w", err)
	}
	if c.plan == nil || !slices.Equal(c.plan.Retained, []int64{n}) {
		return fmt.Errorf("final deletion rule: the plan %+v does not retain checkpoint %d alone", c.plan, n)
	}
	r, err := inventory(ctx, b, o.jobID, c.plan, time.Now().Add(-o.grace))
	if err != nil {
		return err
	}
	v.say("final deletion rule: %d catalog and %d data objects deleted (%d snapshot files); the job's prefix holds %d objects: %d that the retained checkpoint names (%d log, %d snapshot, %d snapshot file), %d catalog objects it keeps, %d held for a checkpoint that may still complete, %d younger than the grace, %d left behind, %d missing",
		c.catalogDrops, c.dataDeletes, c.fileDeletes, r.total, r.logs+r.snapshots+r.files, r.logs, r.snapshots, r.files, r.catalog, r.held, r.young, len(r.left), len(r.missing))
	if len(r.left) > 0 || len(r.missing) > 0 {
		return fmt.Errorf("the job's prefix: %d objects left behind %q; %d named by the retained checkpoint but missing %q",
			len(r.left), r.left[:min(len(r.left), 20)], len(r.missing), r.missing[:min(len(r.missing), 20)])
	}
	again, got, err := v.restore(ctx, storage, "verify-again", n+1, n, []*statestore.CheckpointHandle{h})
	if err != nil {
		return fmt.Errorf("restore checkpoint %d after the deletion rule: %w", n, err)
	}
	again.Close()
	if bad := compare(want, got); len(bad) > 0 {
		return fmt.Errorf("checkpoint %d's counts after the deletion rule: %d words differ from the independent count:\n  %s", n, len(bad), strings.Join(bad[:min(len(bad), 20)], "\n  "))
	}
	v.say("restored checkpoint %d again after the deletion rule: counts equal to the independent count", n)
	return nil
}

// restore restores handles, of checkpoint restored, into the counts of a
// new checkpointer of all key groups (operator "wordcount-NAME"), whose
// uploads are for checkpoint next on, and returns it with the counts.
func (v *verifier) restore(ctx context.Context, storage *dstl.Storage, name string, next, restored int64, handles []*statestore.CheckpointHandle) (*statestore.Checkpointer, map[string]int64, error) {
	scfg := statestore.Config{Operator: operator + "-" + name, KeyGroups: dstl.KeyGroupRange{Start: 0, End: maxParallelism - 1}, MaxParallelism: maxParallelism,
		MaterializeInterval: -1, MaterializeSize: -1, KeepSnapshots: true}
	if v.stateDir != "" {
		scfg.Dir = v.stateDir // a disk-backed snapshot restores into disk-backed stores
	}
	cp, err := statestore.NewCheckpointer(storage, scfg)
	if err != nil {
		return nil, nil, err
	}
	counts, err := statestore.NewKeyValueStore("counts", cp.Log(), statestore.StringCodec{}, statestore.Int64Codec{}, statestore.WithMaxParallelism(maxParallelism))
	if err == nil {
		err = cp.Register(counts)
	}
	if err == nil {
		cp.Log().SetNextCheckpoint(next)
		err = cp.InitializeState(ctx, statestore.CheckpointInfo{OperatorID: scfg.Operator, CheckpointID: restored}, handles...)
	}
	if err != nil {
		cp.Close()
		return nil, nil, err
	}
	got := map[string]int64{}
	for w, n := range counts.All() {
		got[w] = n
	}
	return cp, got, nil
}

// collected is what one run of the deletion rule did.
type collected struct {
	plan         *catalog.Plan
	catalogDrops int // catalog objects dropped
	dataDeletes  int // log and snapshot objects and snapshot files deleted
	fileDeletes  int // of which snapshot files
}

// collectOnce applies the catalog's deletion rule once, as the leader of
// the live generation (catalog.Member.Collect; a new member's first
// collection sweeps the job's prefix).
func collectOnce(ctx context.Context, m *catalog.Member) (collected, error) {
	plan, rep, err := m.Collect(ctx, collect.Options{})
	c := collected{plan: plan}
	if plan != nil {
		c.catalogDrops = len(plan.Drop)
	}
	if rep != nil {
		c.dataDeletes = rep.Deleted.Objects
		for _, o := range rep.Objects {
			if o.Deleted && o.Kind == objname.SnapshotFile {
				c.fileDeletes++
			}
		}
	}
	return c, err
}

// report is what a job's prefix holds, against a plan of the deletion
// rule.
type report struct {
	total, logs, snapshots, files, catalog, held, young int
	left, missing                                       []string
}

// inventory lists the job's prefix: every object must be one the plan
// keeps (a log object, snapshot object or snapshot file of Keep; a commit
// of Commits, the record or a claim of the live generation, the fence of
// a fenced generation), an object
// made for a checkpoint at or above the plan's HoldFrom, or younger than
// cutoff by either clock; every object of Keep must be there.
func inventory(ctx context.Context, b backends.Backend, jobID string, plan *catalog.Plan, cutoff time.Time) (report, error) {
	prefix := objname.JobPrefix(jobID)
	commits := map[string]bool{}
	for _, name := range plan.Commits {
		commits[name] = true
	}
	var r report
	seen := map[string]bool{}
	err := b.List(ctx, prefix, func(o backends.ObjectInfo) error {
		r.total++
		seen[o.Name] = true
		c := objname.ParseCatalog(prefix, o.Name)
		d := objname.Parse(prefix, o.Name)
		data := d.Kind == objname.Log || d.Kind == objname.Snapshot || d.Kind == objname.SnapshotFile
		switch {
		case plan.Keep[o.Name]:
			switch d.Kind {
			case objname.Snapshot:
				r.snapshots++
			case objname.SnapshotFile:
				r.files++
			default:
				r.logs++
			}
		case commits[o.Name],
			c.Version == 2 && c.Generation == plan.Generation && (c.Kind == objname.CatalogGeneration || c.Kind == objname.CatalogClaim),
			c.Version == 2 && c.Kind == objname.CatalogFence: // each fenced generation's fence stays

			r.catalog++
		case data && d.Checkpoint >= plan.HoldFrom:
			r.held++
		case o.ModTime.After(cutoff) || d.Time().After(cutoff):
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
// name (each once), and those of them written before since (by a process
// of an earlier layout), by the time in their names.
func snapshotFiles(jobID string, handles []*statestore.CheckpointHandle, since time.Time) (files, inherited int) {
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
				if objname.Parse(prefix, f).Time().Before(since) {
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
