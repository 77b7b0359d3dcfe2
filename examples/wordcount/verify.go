package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/objname"
)

// command returns the command that runs the service with args.
type command func(ctx context.Context, args ...string) (*exec.Cmd, error)

// selfCommand runs this program's "run".
func selfCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, exe, append([]string{"run"}, args...)...), nil
}

// lockedWriter serialises the writes of verify and of the service's output
// copiers.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func verifyMain(ctx context.Context, args []string, cmd command, stdout, stderr io.Writer) int {
	var mu sync.Mutex
	stdout, stderr = lockedWriter{&mu, stdout}, lockedWriter{&mu, stderr}
	var o options
	var killAfter time.Duration
	var keep bool
	var crashSeed uint64
	fs := flag.NewFlagSet("wordcount verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.flags(fs)
	fs.DurationVar(&killAfter, "kill-after", 0, "kill the service this long after its first checkpoint completed (default: a random moment of the rest of its run)")
	fs.Uint64Var(&crashSeed, "crash-seed", 0, "seed of the random moment (default: from the clock)")
	fs.BoolVar(&keep, "keep", false, "keep the temporary directory")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.records <= 0 || o.rate <= 0 {
		fmt.Fprintln(stderr, "wordcount verify: -records and -rate must be positive")
		return 2
	}
	tmp, err := os.MkdirTemp("", "wordcount-")
	if err != nil {
		fmt.Fprintf(stderr, "wordcount verify: %v\n", err)
		return 3
	}
	if keep {
		fmt.Fprintf(stdout, "wordcount verify: keeping %s\n", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	if o.basePath == "" {
		o.basePath = filepath.Join(tmp, "store")
	}
	if o.jobID == "" {
		o.jobID = "wordcount-" + uuid.NewString() // runs never collide
	}
	if crashSeed == 0 {
		crashSeed = uint64(time.Now().UnixNano())
	}
	runLength := time.Duration(float64(o.records) / float64(o.rate) * float64(time.Second))
	output := filepath.Join(tmp, "counts.json")
	serviceArgs := []string{"-base-path", o.basePath, "-job-id", o.jobID, "-records", fmt.Sprint(o.records),
		"-seed", fmt.Sprint(o.seed), "-rate", fmt.Sprint(o.rate), "-checkpoint-interval", o.interval.String(),
		"-materialize-interval", o.materalize.String(), "-output", output}
	if o.localDir != "" {
		serviceArgs = append(serviceArgs, "-local-recovery-dir", o.localDir)
	}
	fmt.Fprintf(stdout, "wordcount verify: %d records at %d/s, checkpoint every %v, on %s (job %s); crash seed %d\n",
		o.records, o.rate, o.interval, o.basePath, o.jobID, crashSeed)
	backend, _, err := backends.Open(ctx, "", o.basePath)
	if err != nil {
		fmt.Fprintf(stderr, "wordcount verify: %v\n", err)
		return 3
	}
	defer backend.Close()
	checkpoints := checkpointStore{backend: backend, prefix: objname.JobPrefix(o.jobID) + "checkpoints/"}

	// First run: killed.
	c, err := cmd(ctx, serviceArgs...)
	if err != nil {
		fmt.Fprintf(stderr, "wordcount verify: %v\n", err)
		return 3
	}
	c.Stdout, c.Stderr = stdout, stderr
	if err := c.Start(); err != nil {
		fmt.Fprintf(stderr, "wordcount verify: start: %v\n", err)
		return 3
	}
	started := time.Now()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	// The kill must come after a checkpoint completed, or the restart
	// restores nothing and proves nothing: wait for the first checkpoint
	// record, then kill at a random moment of the rest of the run.
	first, err := waitForCheckpoint(ctx, checkpoints, done)
	if err != nil {
		if !errors.Is(err, errEnded) {
			_ = c.Process.Kill()
			<-done
		}
		fmt.Fprintf(stderr, "wordcount verify: %v\n", err)
		return 3
	}
	if killAfter == 0 {
		rest := max(runLength*4/5-time.Since(started), 0) // leave the last fifth for the end
		killAfter = time.Duration(rand.New(rand.NewPCG(crashSeed, 0)).Int64N(int64(rest) + 1))
	}
	fmt.Fprintf(stdout, "wordcount verify: checkpoint %s completed after %v; killing %v later\n",
		path.Base(first), time.Since(started).Round(time.Millisecond), killAfter.Round(time.Millisecond))
	select {
	case err := <-done:
		fmt.Fprintf(stderr, "wordcount verify: the service ended before the kill (%v); use more -records or a lower -rate\n", err)
		return 3
	case <-time.After(killAfter):
	}
	if err := c.Process.Signal(os.Kill); err != nil {
		fmt.Fprintf(stderr, "wordcount verify: kill: %v\n", err)
		return 3
	}
	<-done
	fmt.Fprintf(stdout, "wordcount verify: killed the service (SIGKILL) %v after its start\n", time.Since(started).Round(time.Millisecond))

	// Second run: restores and finishes.
	c, err = cmd(ctx, serviceArgs...)
	if err != nil {
		fmt.Fprintf(stderr, "wordcount verify: %v\n", err)
		return 3
	}
	var restarted bytes.Buffer
	said := lockedWriter{&mu, &restarted}
	c.Stdout, c.Stderr = io.MultiWriter(stdout, said), io.MultiWriter(stderr, said)
	if err := c.Run(); err != nil {
		fmt.Fprintf(stderr, "wordcount verify: the restarted service failed: %v\n", err)
		return 1
	}
	mu.Lock()
	restoredOK := strings.Contains(restarted.String(), restoredMessage)
	mu.Unlock()
	if !restoredOK {
		fmt.Fprintf(stderr, "wordcount verify: FAILED: the restarted service restored no checkpoint (it said: %q)\n",
			strings.TrimSpace(restarted.String()))
		return 1
	}

	b, err := os.ReadFile(output)
	if err != nil {
		fmt.Fprintf(stderr, "wordcount verify: %v\n", err)
		return 1
	}
	var got map[string]int64
	if err := json.Unmarshal(b, &got); err != nil {
		fmt.Fprintf(stderr, "wordcount verify: output: %v\n", err)
		return 1
	}
	want := expected(o.seed, o.records)
	if bad := compare(want, got); len(bad) > 0 {
		fmt.Fprintf(stderr, "wordcount verify: FAILED: %d words differ from a run without the crash:\n", len(bad))
		for _, l := range bad[:min(len(bad), 20)] {
			fmt.Fprintln(stderr, "  "+l)
		}
		return 1
	}
	var total int64
	for _, n := range want {
		total += n
	}
	fmt.Fprintf(stdout, "wordcount verify: OK: %d distinct words, %d words in %d records, exactly as a run without the crash\n",
		len(want), total, o.records)
	return 0
}

var errEnded = errors.New("the service ended before its first checkpoint completed; use more -records or a lower -rate")

// waitForCheckpoint polls the backend until a completed checkpoint's record
// is there and returns its name; it fails if the service ends first.
func waitForCheckpoint(ctx context.Context, cs checkpointStore, done <-chan error) (string, error) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		names, err := cs.list(ctx)
		if err != nil {
			return "", fmt.Errorf("list checkpoints: %w", err)
		}
		if len(names) > 0 {
			return names[0], nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case err := <-done:
			return "", fmt.Errorf("%w (%v)", errEnded, err)
		case <-t.C:
		}
	}
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
