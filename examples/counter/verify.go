package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/examples/internal/child"
	"github.com/dstlgo/dstl/internal/flagusage"
	"github.com/dstlgo/dstl/statestore"
)

// verifier runs the job's processes, kills and restarts them, and checks
// the checkpoints.
type verifier struct {
	basePath, jobID      string
	instances, processes int
	interval             time.Duration
	kills                int
	killEvery            time.Duration
	cmd                  child.Command
	stdout, stderr       io.Writer
	rng                  *rand.Rand
	started              time.Time

	procs   []*exec.Cmd
	exited  []chan error
	storage *dstl.Storage
	// the latest checkpoint checked, and its offsets by key group
	checkedGen, checkedN int64
	offsets              map[int]int64
	checks, skipped      int
}

func verifyMain(ctx context.Context, args []string, cmd child.Command, stdout, stderr io.Writer) int {
	var mu sync.Mutex
	stdout, stderr = child.LockedWriter{Mu: &mu, W: stdout}, child.LockedWriter{Mu: &mu, W: stderr}
	v := &verifier{cmd: cmd, stdout: stdout, stderr: stderr, started: time.Now()}
	fs := flag.NewFlagSet("counter verify", flag.ContinueOnError)
	flagusage.Set(fs)
	fs.SetOutput(stderr)
	fs.StringVar(&v.basePath, "base-path", "", "where the job goes (default: a new temporary directory)")
	fs.StringVar(&v.jobID, "job-id", "", "the job (default: a new unique one)")
	fs.IntVar(&v.instances, "instances", 4, "instances of the job")
	fs.IntVar(&v.processes, "processes", 2, "processes that run them")
	fs.DurationVar(&v.interval, "checkpoint-interval", 200*time.Millisecond, "time between two checkpoints")
	fs.IntVar(&v.kills, "kills", 8, "processes to kill (SIGKILL) and restart")
	fs.DurationVar(&v.killEvery, "kill-every", time.Second, "mean time between two kills")
	seed := fs.Uint64("seed", 0, "seed of the kills (default: from the clock)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up (and fail) after this long")
	inputFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if v.processes < 1 || v.instances < v.processes || v.instances > keyGroups || v.killEvery <= 0 || records < 1 || rate <= 0 {
		fmt.Fprintf(stderr, "counter verify: want 1 to %d instances in at most as many processes, a positive -kill-every, -records and -rate\n", keyGroups)
		return 2
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	v.rng = rand.New(rand.NewPCG(*seed, 0))
	if v.jobID == "" {
		v.jobID = "counter-" + uuid.NewString()
	}
	if v.basePath == "" {
		tmp, err := os.MkdirTemp("", "counter-")
		if err != nil {
			fmt.Fprintf(stderr, "counter verify: %v\n", err)
			return 3
		}
		defer os.RemoveAll(tmp)
		v.basePath = filepath.Join(tmp, "store")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cfg := dstl.DefaultConfig(v.basePath)
	cfg.JobID = v.jobID
	var err error
	if v.storage, err = dstl.Open(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "counter verify: %v\n", err)
		return 3
	}
	defer v.storage.Close()
	v.say("%d instances in %d processes, %d records in each of %d partitions at %g/s, checkpoint every %v, %d kills, on %s (job %s); seed %d",
		v.instances, v.processes, records, keyGroups, rate, v.interval, v.kills, v.basePath, v.jobID, *seed)
	code := v.run(ctx)
	if code != 0 {
		fmt.Fprintf(stderr, "counter verify: FAILED (seed %d)\n", *seed)
	}
	return code
}

func (v *verifier) say(format string, args ...any) {
	fmt.Fprintf(v.stdout, "counter verify: [%5.1fs] %s\n", time.Since(v.started).Seconds(), fmt.Sprintf(format, args...))
}

// start starts process i.
func (v *verifier) start(ctx context.Context, i int) error {
	c, err := v.cmd(ctx, "-base-path", v.basePath, "-job-id", v.jobID, "-instances", strconv.Itoa(v.instances),
		"-processes", strconv.Itoa(v.processes), "-process", strconv.Itoa(i), "-checkpoint-interval", v.interval.String(),
		"-records", strconv.FormatInt(records, 10), "-rate", strconv.FormatFloat(rate, 'g', -1, 64))
	if err != nil {
		return err
	}
	c.Stdout, c.Stderr = v.stdout, v.stderr
	child.DieWithParent(c)
	if err := c.Start(); err != nil {
		return fmt.Errorf("start process %d: %w", i, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	v.procs[i], v.exited[i] = c, exited
	return nil
}

// crashed returns an error for the first process that exited unasked.
func (v *verifier) crashed() error {
	for i, exited := range v.exited {
		select {
		case err := <-exited:
			v.procs[i] = nil
			return fmt.Errorf("process %d exited unasked: %v", i, err)
		default:
		}
	}
	return nil
}

// stopAll stops every process with SIGTERM (SIGKILL after a while) and
// returns the first that did not exit cleanly.
func (v *verifier) stopAll() error {
	for _, c := range v.procs {
		if c != nil {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
	}
	var errs []error
	for i, c := range v.procs {
		if c == nil {
			continue
		}
		select {
		case err := <-v.exited[i]:
			if err != nil {
				errs = append(errs, fmt.Errorf("process %d, stopped: %w", i, err))
			}
		case <-time.After(15 * time.Second):
			_ = c.Process.Kill()
			<-v.exited[i]
			errs = append(errs, fmt.Errorf("process %d did not stop within 15s of SIGTERM", i))
		}
		v.procs[i] = nil
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

func (v *verifier) run(ctx context.Context) int {
	v.procs, v.exited = make([]*exec.Cmd, v.processes), make([]chan error, v.processes)
	defer v.stopAll()
	for i := range v.processes {
		if err := v.start(ctx, i); err != nil {
			fmt.Fprintf(v.stderr, "counter verify: %v\n", err)
			return 3
		}
	}
	fail := func(err error) int {
		fmt.Fprintf(v.stderr, "counter verify: FAILED: %v\n", err)
		return 1
	}
	for k := range v.kills {
		gap := v.killEvery/2 + time.Duration(v.rng.Int64N(int64(v.killEvery)))
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("timed out after %d kills", k))
		case <-time.After(gap):
		}
		if err := v.crashed(); err != nil {
			return fail(err)
		}
		if err := v.check(ctx, false); err != nil {
			return fail(err)
		}
		i := v.rng.IntN(v.processes)
		v.say("kill process %d (SIGKILL)", i)
		_ = v.procs[i].Process.Kill()
		<-v.exited[i]
		v.procs[i] = nil
		if err := v.start(ctx, i); err != nil {
			return fail(err)
		}
	}
	v.say("kills over; waiting for a complete checkpoint of the whole input")
	for {
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("timed out waiting for the whole input in a complete checkpoint (checked up to %v)", v.offsets))
		case <-time.After(500 * time.Millisecond):
		}
		if err := v.crashed(); err != nil {
			return fail(err)
		}
		if err := v.check(ctx, false); err != nil {
			return fail(err)
		}
		if v.allRead() {
			break
		}
	}
	if err := v.stopAll(); err != nil {
		return fail(err)
	}
	v.say("stopped every process (SIGTERM)")
	if err := v.check(ctx, true); err != nil {
		return fail(err)
	}
	var sum int64
	for _, n := range totalsUpTo(v.offsets) {
		sum += n
	}
	v.say("OK: %d kills; %d checks of the latest complete checkpoint (%d skipped: its commit was dropped meanwhile), each restored with the totals of the input up to its offsets; the last, checkpoint %d of generation %d, holds all %d records, %d in all, exactly as computed from the input",
		v.kills, v.checks, v.skipped, v.checkedN, v.checkedGen, records*keyGroups, sum)
	return 0
}

// allRead reports whether the latest checkpoint checked holds the whole
// input.
func (v *verifier) allRead() bool { return allReadIn(v.offsets) }

// check restores the job's latest complete checkpoint, found with
// catalog.Inspect (which writes nothing), and checks that its totals are
// those of the input up to its offsets, and that no offset went back since
// the checkpoint checked before; final, that the checkpoint holds the
// whole input. A checkpoint whose commit the deletion rule dropped between
// the two listings is skipped, but when final.
func (v *verifier) check(ctx context.Context, final bool) error {
	b := v.storage.Backend()
	l, err := catalog.Inspect(ctx, b, v.jobID, catalog.InspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect the catalog: %w", err)
	}
	var gen, n int64
	for _, g := range slices.Backward(l.Generations) {
		for _, c := range slices.Backward(g.Checkpoints) {
			if c.State == catalog.Complete && n == 0 {
				gen, n = g.Number, c.Number
			}
		}
		if n != 0 {
			break
		}
	}
	if n == 0 {
		if final {
			return fmt.Errorf("no complete checkpoint")
		}
		return nil
	}
	l, err = catalog.Inspect(ctx, b, v.jobID, catalog.InspectOptions{Commits: func(g, c int64) bool { return g == gen && c == n }})
	if err != nil {
		return fmt.Errorf("inspect the catalog: %w", err)
	}
	c := l.Checkpoint(gen, n)
	if c == nil && !final {
		v.skipped++ // its commits were dropped since the first listing
		return nil
	}
	if c == nil {
		return fmt.Errorf("checkpoint %d of generation %d is gone", n, gen)
	}
	var handles []*statestore.CheckpointHandle
	offsets := map[int]int64{}
	for _, commit := range c.Commits {
		if commit.Err != nil {
			if final || !errors.Is(commit.Err, backends.ErrNotFound) {
				return fmt.Errorf("checkpoint %d of generation %d: %w", n, gen, commit.Err)
			}
			v.skipped++ // dropped since the listing
			return nil
		}
		for _, p := range commit.Parts {
			h := new(statestore.CheckpointHandle)
			if err := h.UnmarshalBinary(p.State); err != nil {
				return fmt.Errorf("checkpoint %d of generation %d, instance %d: %w", n, gen, p.Instance, err)
			}
			handles = append(handles, h)
			for k, s := range p.Metadata {
				kg, err1 := strconv.Atoi(k)
				off, err2 := strconv.ParseInt(s, 10, 64)
				if err1 != nil || err2 != nil || !p.KeyGroups.Contains(kg) || off < 0 || off > records {
					return fmt.Errorf("checkpoint %d of generation %d, instance %d: offset %q: %q", n, gen, p.Instance, k, s)
				}
				offsets[kg] = off
			}
		}
	}
	if len(offsets) != keyGroups {
		return fmt.Errorf("checkpoint %d of generation %d holds the offsets of %d partitions, want %d", n, gen, len(offsets), keyGroups)
	}
	for kg, off := range v.offsets {
		if offsets[kg] < off {
			return fmt.Errorf("checkpoint %d of generation %d holds offset %d of partition %d, checkpoint %d of generation %d held %d: the job went back",
				n, gen, offsets[kg], kg, v.checkedN, v.checkedGen, off)
		}
	}
	got, err := v.restore(ctx, n, handles)
	if err != nil {
		return fmt.Errorf("restore checkpoint %d of generation %d: %w", n, gen, err)
	}
	if want := totalsUpTo(offsets); !maps.Equal(got, want) {
		return fmt.Errorf("checkpoint %d of generation %d holds totals %v; the input up to its offsets %v has %v", n, gen, got, offsets, want)
	}
	if final && !allReadIn(offsets) {
		return fmt.Errorf("checkpoint %d of generation %d holds offsets %v: not the whole input", n, gen, offsets)
	}
	v.checkedGen, v.checkedN, v.offsets = gen, n, offsets
	v.checks++
	read := int64(0)
	for _, off := range offsets {
		read += off
	}
	v.say("checkpoint %d of generation %d: %d records read, totals as computed from the input", n, gen, read)
	return nil
}

// allReadIn reports whether offsets are the ends of every partition.
func allReadIn(offsets map[int]int64) bool {
	for kg := range keyGroups {
		if offsets[kg] != records {
			return false
		}
	}
	return true
}

// restore restores the handles into the totals of a checkpointer of all
// key groups, and returns them.
func (v *verifier) restore(ctx context.Context, checkpoint int64, handles []*statestore.CheckpointHandle) (map[string]int64, error) {
	all := dstl.KeyGroupRange{Start: 0, End: keyGroups - 1}
	cp, err := statestore.NewCheckpointer(v.storage, statestore.Config{Operator: "counter-verify", KeyGroups: all, MaxParallelism: keyGroups,
		MaterializeInterval: -1, MaterializeSize: -1, KeepSnapshots: true})
	if err != nil {
		return nil, err
	}
	defer cp.Close()
	totals, err := statestore.NewKeyValueStore("totals", cp.Log(), statestore.StringCodec{}, statestore.Int64Codec{}, statestore.WithMaxParallelism(keyGroups))
	if err != nil {
		return nil, err
	}
	if err := cp.Register(totals); err != nil {
		return nil, err
	}
	if err := cp.InitializeState(ctx, statestore.CheckpointInfo{OperatorID: "counter-verify", CheckpointID: checkpoint}, handles...); err != nil {
		return nil, err
	}
	got := map[string]int64{}
	for key, total := range totals.All() {
		got[key] = total
	}
	return got, nil
}
