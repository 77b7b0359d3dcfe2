package main

import (
	"bufio"
	"context"
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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/examples/internal/child"
	"github.com/dstlgo/dstl/internal/flagusage"
	"github.com/dstlgo/dstl/kafkastate"
)

// verifyOptions are verify's flags beyond the service's.
type verifyOptions struct {
	options
	partitions int
	processes  int
	rate       int
	input      time.Duration
	minFaults  int
	faultEvery time.Duration
	maxStop    time.Duration
	faultSeed  uint64
	timeout    time.Duration
	verbose    bool
}

// The verify's input: records of 1 to 6 words of this vocabulary.
var vocabulary = strings.Fields(`the of and to in is was he for it with as his on be at by had are but from or
	have an they which one you were her all she there would their we him been has when who will more no`)

func verifyMain(ctx context.Context, args []string, cmd child.Command, stdout, stderr io.Writer) int {
	var mu sync.Mutex
	stdout, stderr = child.LockedWriter{Mu: &mu, W: stdout}, child.LockedWriter{Mu: &mu, W: stderr}
	var o verifyOptions
	fs := flag.NewFlagSet("kafkawordcount verify", flag.ContinueOnError)
	flagusage.Set(fs)
	fs.SetOutput(stderr)
	o.flags(fs)
	fs.IntVar(&o.partitions, "partitions", 8, "partitions of the input topic")
	fs.IntVar(&o.processes, "processes", 3, "processes at the start; one more joins during a rebalance (scale-out)")
	fs.IntVar(&o.rate, "rate", 2000, "input records produced per second")
	fs.DurationVar(&o.input, "input", 20*time.Second, "how long the input is produced, with faults")
	fs.IntVar(&o.minFaults, "faults", 10, "the least number of faults (kills, stops and the scale-out), each a rebalance: faults go on after the input until there were as many")
	fs.DurationVar(&o.faultEvery, "fault-every", 1500*time.Millisecond, "mean time between faults (default with --brokers: twice the session timeout)")
	fs.DurationVar(&o.maxStop, "max-stop", 0, "longest SIGSTOP, beyond the session timeout so that the group drops the process (default 1.5 session timeouts)")
	fs.Uint64Var(&o.faultSeed, "fault-seed", 0, "seed of the input and the faults (default: from the clock)")
	fs.DurationVar(&o.timeout, "timeout", 4*time.Minute, "give up (and fail) after this long")
	fs.BoolVar(&o.verbose, "v", false, "print the processes' event lines")
	// verify produces output in transactions by default, to TOPIC-counts,
	// and reads it with read_committed: one record per word of the input.
	tf := fs.Lookup("transactional")
	_ = tf.Value.Set("true")
	tf.DefValue = "true"
	tf.Usage = "the processes produce their output (default to TOPIC-counts) in transactions, and verify reads it with read_committed: one record per word of the input"
	if err := fs.Parse(args); err != nil {
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.faultSeed == 0 {
		o.faultSeed = uint64(time.Now().UnixNano())
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	tmp, err := os.MkdirTemp("", "kafkawordcount-")
	if err != nil {
		fmt.Fprintf(stderr, "kafkawordcount verify: %v\n", err)
		return 3
	}
	defer os.RemoveAll(tmp)
	if o.basePath == "" {
		o.basePath = filepath.Join(tmp, "store")
	}
	suffix := strings.ToLower(uuid.NewString()[:8])
	if !set["topic"] && o.brokers != "" {
		o.topic = "kafkawordcount-" + suffix
	}
	if o.transactional && o.output == "" {
		o.output = o.topic + "-counts"
	}
	if !set["job-id"] {
		o.jobID = "kafkawordcount-" + suffix
	}
	where := "kfake on "
	if o.brokers == "" {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(o.partitions), o.topic, o.output),
			kfake.GroupMinSessionTimeout(100*time.Millisecond))
		if err != nil {
			fmt.Fprintf(stderr, "kafkawordcount verify: kfake: %v\n", err)
			return 3
		}
		defer c.Close()
		o.brokers = strings.Join(c.ListenAddrs(), ",")
		if !set["session-timeout"] {
			o.sessionTimeout = 1500 * time.Millisecond
		}
		if !set["commit-timeout"] {
			o.commitTimeout = 2 * time.Second
		}
		if !set["grace"] {
			o.grace = 20 * time.Second
		}
	} else {
		where = "the brokers "
		if !set["group"] {
			o.group = "kafkawordcount-" + suffix
		}
		if !set["fault-every"] {
			o.faultEvery = 2 * o.sessionTimeout
		}
		for _, t := range []string{o.topic, o.output} {
			if t == "" {
				continue
			}
			if err := createTopic(ctx, o.brokers, t, o.partitions); err != nil {
				fmt.Fprintf(stderr, "kafkawordcount verify: %v\n", err)
				return 3
			}
		}
	}
	if o.maxStop == 0 {
		o.maxStop = o.sessionTimeout * 3 / 2
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "kafkawordcount verify: %v\n", err)
		return 2
	}
	if o.grace < 2*o.maxStop || o.grace < 4*o.interval || o.grace < 2*(4*o.sessionTimeout+o.commitTimeout) {
		fmt.Fprintf(stderr, "kafkawordcount verify: --grace %v: want at least twice --max-stop (%v), four checkpoint intervals, and twice four session timeouts plus --commit-timeout (%v)\n",
			o.grace, o.maxStop, 2*(4*o.sessionTimeout+o.commitTimeout))
		return 2
	}
	v := &verifier{o: o, cmd: cmd, stdout: stdout, stderr: stderr, rng: rand.New(rand.NewPCG(o.faultSeed, 1)),
		started: time.Now(), want: map[string]int64{}, events: map[string]int{}}
	v.say("%d processes, then %d, of group %s on %s%s, topic %s (%d partitions), %d records/s for %v, checkpoint every %v, session timeout %v, state on %s (job %s); fault seed %d",
		o.processes, o.processes+1, o.group, where, o.brokers, o.topic, o.partitions, o.rate, o.input, o.interval,
		o.sessionTimeout, o.basePath, o.jobID, o.faultSeed)
	code := v.run(ctx)
	if code != 0 {
		fmt.Fprintf(stderr, "kafkawordcount verify: FAILED (fault seed %d)\n", o.faultSeed)
	}
	return code
}

// createTopic creates the input topic on real brokers.
func createTopic(ctx context.Context, brokers, topic string, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// proc is one process of the service.
type proc struct {
	id     int
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the exit's, once exited is closed

	// guarded by the verifier's mu
	ended   bool      // verify killed or terminated it
	stopped bool      // SIGSTOPped
	woke    time.Time // when it was last continued
	cont    *time.Timer
}

// verifier runs the processes through faults and a scale-out.
type verifier struct {
	o              verifyOptions
	cmd            child.Command
	stdout, stderr io.Writer
	rng            *rand.Rand
	started        time.Time

	mu       sync.Mutex
	procs    []*proc
	nextID   int
	want     map[string]int64 // the independent count of the input
	produced int64
	events   map[string]int // the processes' events, by kind
	// what verify did
	kills, stops, restarts, crashes, scaleOuts int
}

func (v *verifier) say(format string, args ...any) {
	fmt.Fprintf(v.stdout, "kafkawordcount verify: [%5.1fs] %s\n", time.Since(v.started).Seconds(), fmt.Sprintf(format, args...))
}

// eventLine is a process's event line.
var eventLine = regexp.MustCompile(`^` + eventPrefix + `(\S+) partition (-?\d+) offset (-?\d+) generation (-?\d+) checkpoint (\d+)$`)

// start starts a process.
func (v *verifier) start(ctx context.Context) error {
	o := v.o
	args := []string{"-brokers", o.brokers, "-topic", o.topic, "-group", o.group, "-base-path", o.basePath,
		"-job-id", o.jobID, "-checkpoint-interval", o.interval.String(), "-grace", o.grace.String(),
		"-session-timeout", o.sessionTimeout.String(), "-commit-timeout", o.commitTimeout.String()}
	if o.output != "" {
		args = append(args, "-output", o.output)
	}
	if o.transactional {
		args = append(args, "-transactional")
	}
	c, err := v.cmd(ctx, args...)
	if err != nil {
		return err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	v.mu.Lock()
	pr := &proc{id: v.nextID, cmd: c, exited: make(chan struct{})}
	v.nextID++
	v.mu.Unlock()
	c.Stderr = prefixWriter{prefix: fmt.Sprintf("[process %d] ", pr.id), w: v.stderr}
	child.DieWithParent(c)
	if err := c.Start(); err != nil {
		return fmt.Errorf("start process %d: %w", pr.id, err)
	}
	v.mu.Lock()
	v.procs = append(v.procs, pr)
	v.mu.Unlock()
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		v.scan(pr, out)
	}()
	go func() {
		<-lines // Wait closes the pipe: read it to the end first
		pr.err = c.Wait()
		close(pr.exited)
	}()
	return nil
}

// scan reads a process's event lines.
func (v *verifier) scan(pr *proc, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if v.o.verbose {
			fmt.Fprintf(v.stdout, "[process %d] %s\n", pr.id, line)
		}
		if m := eventLine.FindStringSubmatch(line); m != nil {
			v.mu.Lock()
			v.events[m[1]]++
			v.mu.Unlock()
		}
	}
}

// prefixWriter prefixes each write (a process's log line) with the
// process.
type prefixWriter struct {
	prefix string
	w      io.Writer
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := fmt.Fprintf(p.w, "%s%s", p.prefix, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// live returns the processes that run and are not stopped.
func (v *verifier) live() []*proc {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []*proc
	for _, p := range v.procs {
		if !p.ended && !p.stopped && !isClosed(p.exited) {
			out = append(out, p)
		}
	}
	return out
}

// kill kills a process with SIGKILL and, restart set, starts another in
// its place after a short while.
func (v *verifier) kill(ctx context.Context, p *proc, restart bool) error {
	v.mu.Lock()
	p.ended = true
	v.kills++
	v.mu.Unlock()
	v.say("kill process %d (SIGKILL)", p.id)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	if !restart {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(v.rng.Int64N(int64(300 * time.Millisecond)))):
	}
	v.mu.Lock()
	v.restarts++
	v.mu.Unlock()
	return v.start(ctx)
}

// stop stops a process with SIGSTOP, past the session timeout (at least
// 1.2 session timeouts, at most -max-stop), and continues it: the group
// drops it meanwhile, and it wakes as a zombie whose partitions are lost.
func (v *verifier) stop(p *proc) {
	lo := min(v.o.sessionTimeout*6/5, v.o.maxStop)
	d := lo + time.Duration(v.rng.Int64N(int64(v.o.maxStop-lo)+1))
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return
	}
	v.stops++
	p.stopped = true
	fmt.Fprintf(v.stdout, "kafkawordcount verify: [%5.1fs] stop process %d (SIGSTOP) for %v\n",
		time.Since(v.started).Seconds(), p.id, d.Round(time.Millisecond))
	p.cont = time.AfterFunc(d, func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if p.stopped {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			p.stopped = false
			p.woke = time.Now()
		}
	})
}

// stopAll ends every process: SIGCONT for a stopped one, SIGTERM, and
// SIGKILL for one that has not exited after a while.
func (v *verifier) stopAll() {
	v.mu.Lock()
	procs := slices.Clone(v.procs)
	for _, p := range procs {
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
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.exited
		}
	}
}

// restartCrashed starts a process in place of each that exited unasked.
func (v *verifier) restartCrashed(ctx context.Context) error {
	v.mu.Lock()
	var crashed []*proc
	for _, p := range v.procs {
		if !p.ended && isClosed(p.exited) {
			p.ended = true
			v.crashes++
			crashed = append(crashed, p)
		}
	}
	n := v.crashes
	v.mu.Unlock()
	for _, p := range crashed {
		v.say("process %d exited unasked (%v); starting another", p.id, p.err)
		if n > 5 {
			return fmt.Errorf("%d processes exited unasked", n)
		}
		if err := v.start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// produce produces the input at the rate until end, counting its words.
func (v *verifier) produce(ctx context.Context, end time.Time) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(v.o.brokers, ",")...), kgo.DefaultProduceTopic(v.o.topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(v.o.faultSeed, 2))
	tick := 50 * time.Millisecond
	per := max(1, v.o.rate*int(tick)/int(time.Second))
	t := time.NewTicker(tick)
	defer t.Stop()
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		rs := make([]*kgo.Record, per)
		counted := map[string]int64{}
		for i := range rs {
			words := make([]string, 1+rng.IntN(6))
			for j := range words {
				words[j] = vocabulary[rng.IntN(1+rng.IntN(len(vocabulary)))]
				counted[words[j]]++
			}
			rs[i] = &kgo.Record{Value: []byte(strings.Join(words, " "))}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		v.mu.Lock()
		for w, n := range counted {
			v.want[w] += n
		}
		v.produced += int64(len(rs))
		v.mu.Unlock()
	}
	return nil
}

// stoppedNow reports whether a process is SIGSTOPped, or was continued
// less than a session timeout ago (it learns then that it lost its
// partitions).
func (v *verifier) stoppedNow() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, p := range v.procs {
		if !p.ended && (p.stopped || time.Since(p.woke) < v.o.sessionTimeout) {
			return true
		}
	}
	return false
}

// faults kills, stops and scales out until the input ends and there were
// enough faults, among them the scale-out and a stop that made a process
// lose its partitions.
func (v *verifier) faults(ctx context.Context, inputDone <-chan struct{}) error {
	for {
		gap := v.o.faultEvery/2 + time.Duration(v.rng.Int64N(int64(v.o.faultEvery)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(gap):
		}
		if err := v.restartCrashed(ctx); err != nil {
			return err
		}
		v.mu.Lock()
		n, scaled, lost := v.kills+v.stops+v.scaleOuts, v.scaleOuts > 0, v.events[string(kafkastate.EventLost)] > 0
		v.mu.Unlock()
		if isClosed(inputDone) && n >= v.o.minFaults && scaled && lost && !v.stoppedNow() {
			return nil
		}
		if !lost && v.stoppedNow() {
			// No other fault while a stopped process is dropped by the
			// group and wakes: it then learns that its partitions are lost
			// (with a rebalance in progress it may learn of a revocation
			// only, or be killed first).
			continue
		}
		live := v.live()
		if len(live) == 0 {
			continue
		}
		p := live[v.rng.IntN(len(live))]
		half := time.Since(v.started) > v.o.input/2
		switch {
		case !scaled && half:
			// A kill starts a rebalance; the new process joins during it.
			if err := v.kill(ctx, p, true); err != nil {
				return err
			}
			v.mu.Lock()
			v.scaleOuts++
			v.mu.Unlock()
			v.say("scale out: one more process, during the rebalance")
			if err := v.start(ctx); err != nil {
				return err
			}
		case len(live) > 1 && (v.rng.IntN(4) == 0 || (!lost && half && !v.stoppedNow())):
			// Until a process lost its partitions, one is stopped at a
			// time past half the input.
			v.stop(p)
		default:
			if err := v.kill(ctx, p, true); err != nil {
				return err
			}
		}
	}
}

// caughtUp waits until the group's committed offsets reach the end of
// every partition (the processes commit them after their checkpoints).
func (v *verifier) caughtUp(ctx context.Context) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(v.o.brokers, ",")...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		ends, err1 := adm.ListEndOffsets(ctx, v.o.topic)
		committed, err2 := adm.FetchOffsets(ctx, v.o.group)
		if err := errors.Join(err1, err2); err == nil {
			behind := 0
			m := map[int32]int64{}
			ends.Each(func(o kadm.ListedOffset) {
				m[o.Partition] = o.Offset
				if c, ok := committed.Lookup(o.Topic, o.Partition); !ok || c.At < o.Offset {
					behind++
				}
			})
			if behind == 0 {
				return m, nil
			}
		}
		if err := v.restartCrashed(ctx); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the group to read the input: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (v *verifier) run(ctx context.Context) int {
	fail := func(format string, args ...any) int {
		v.say("FAIL: "+format, args...)
		return 1
	}
	for range v.o.processes {
		if err := v.start(ctx); err != nil {
			v.stopAll()
			return fail("%v", err)
		}
	}
	inputDone := make(chan struct{})
	perr := make(chan error, 1)
	go func() {
		defer close(inputDone)
		perr <- v.produce(ctx, time.Now().Add(v.o.input))
	}()
	ferr := v.faults(ctx, inputDone)
	<-inputDone
	if err := errors.Join(ferr, <-perr); err != nil {
		v.stopAll()
		return fail("%v", err)
	}
	v.say("input done: %d records; waiting for the group to read it", v.produced)
	ends, err := v.caughtUp(ctx)
	if err == nil {
		v.say("the group read the input; stopping the processes")
	}
	v.stopAll()
	if err != nil {
		return fail("%v", err)
	}
	v.say("every process stopped (SIGTERM); restoring every partition's latest checkpoint")

	cfg := dstl.DefaultConfig(v.o.basePath)
	cfg.JobID = v.o.jobID
	log := slog.New(slog.NewTextHandler(v.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	storage, err := dstl.Open(ctx, cfg, dstl.WithLogger(log))
	if err != nil {
		return fail("%v", err)
	}
	defer storage.Close()
	states, release, err := kafkastate.Load(ctx, storage, serviceConfig(v.o.options, log), v.o.partitions)
	if err != nil {
		return fail("restore: %v", err)
	}
	defer release()
	got := map[string]int64{}
	var problems []string
	for _, st := range states {
		if want := ends[st.Partition.Partition]; st.Offset != want {
			problems = append(problems, fmt.Sprintf("partition %d checkpointed at offset %d, want its end %d", st.Partition.Partition, st.Offset, want))
		}
		for w, n := range st.State.All() {
			got[w] += n
		}
	}
	problems = append(problems, compare(v.want, got)...)
	outRecords := int64(0)
	if v.o.transactional {
		out, err := v.readOutput(ctx)
		if err != nil {
			return fail("reading the output: %v", err)
		}
		for _, n := range out {
			outRecords += n
		}
		for _, p := range compare(v.want, out) {
			problems = append(problems, "output topic "+v.o.output+": "+p)
		}
	}
	v.mu.Lock()
	restores := v.events[string(kafkastate.EventRestored)]
	v.say("faults: %d kills, %d stops, %d scale-out (each a rebalance: %d), %d restarts, %d unasked exits",
		v.kills, v.stops, v.scaleOuts, v.kills+v.stops+v.scaleOuts, v.restarts, v.crashes)
	v.say("partitions: %d restored from a checkpoint, %d first starts, %d revoked, %d lost; processes: %d fenced (restored every partition), %d failed checkpoints, %d collections",
		restores, v.events[string(kafkastate.EventFirstStart)], v.events[string(kafkastate.EventRevoked)], v.events[string(kafkastate.EventLost)],
		v.events[string(kafkastate.EventFenced)], v.events[string(kafkastate.EventCheckpointFailed)], v.events[string(kafkastate.EventCollected)])
	if n := v.kills + v.stops + v.scaleOuts; n < v.o.minFaults {
		problems = append(problems, fmt.Sprintf("%d kills, stops and scale-outs, want at least %d", n, v.o.minFaults))
	}
	if restores == 0 {
		problems = append(problems, "no partition was restored from a checkpoint")
	}
	if v.crashes > 0 {
		problems = append(problems, fmt.Sprintf("%d processes exited unasked (the service's Run returned an error)", v.crashes))
	}
	if v.stops == 0 || v.events[string(kafkastate.EventLost)] == 0 {
		problems = append(problems, fmt.Sprintf("%d stops, %d partitions lost: want at least one of each", v.stops, v.events[string(kafkastate.EventLost)]))
	}
	if v.scaleOuts == 0 {
		problems = append(problems, "no scale-out")
	}
	v.mu.Unlock()
	if len(problems) > 0 {
		for _, p := range problems {
			v.say("FAIL: %s", p)
		}
		return 1
	}
	v.say("OK: %d words, %d records: every partition checkpointed at its end, the counts equal the input's", len(got), v.produced)
	if v.o.transactional {
		v.say("OK: the output topic %s, read with read_committed, has %d records: one per word of the input", v.o.output, outRecords)
	}
	return 0
}

// readOutput reads the output topic to its end with isolation
// read_committed, and counts its records by key (word). It waits first
// until no transaction is open on the topic (the last stable offsets are
// the ends): a killed process's open transaction ends by its timeout.
func (v *verifier) readOutput(ctx context.Context) (map[string]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(v.o.brokers, ",")...), kgo.ConsumeTopics(v.o.output),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		ends, err1 := adm.ListEndOffsets(ctx, v.o.output)
		stable, err2 := adm.ListCommittedOffsets(ctx, v.o.output)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		open := 0
		ends.Each(func(o kadm.ListedOffset) {
			if s, ok := stable.Lookup(o.Topic, o.Partition); !ok || s.Offset != o.Offset {
				open++
			}
		})
		if open == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the output's open transactions to end: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	got := map[string]int64{}
	for idle := 0; idle < 3; {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if fs.NumRecords() == 0 {
			idle++
			continue
		}
		idle = 0
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Key)]++ })
	}
	return got, ctx.Err()
}

// compare lists the differences of two counts.
func compare(want, got map[string]int64) []string {
	var out []string
	for w, n := range want {
		if got[w] != n {
			out = append(out, fmt.Sprintf("%q: %d, want %d", w, got[w], n))
		}
	}
	for w, n := range got {
		if _, ok := want[w]; !ok {
			out = append(out, fmt.Sprintf("%q: %d, want none", w, n))
		}
	}
	sort.Strings(out)
	return out
}
