package statestore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/statestore"
)

// The program of TestAloneKilledLeavesNoLeaks: a counter on a checkpointer
// alone on its storage (local disk), which keeps the handles of its last
// aloneRetain checkpoints in files. It runs as this test binary with
// aloneDirEnv set.
const (
	aloneDirEnv       = "DSTL_STATESTORE_ALONE_DIR"
	aloneJob          = "alone"
	aloneCheckpoints  = 100
	aloneRetain       = 2
	aloneGrace        = time.Second
	aloneKeysPerCheck = 20
	alonePace         = 60 * time.Millisecond // between checkpoints
)

// TestAloneProcess is the program of TestAloneKilledLeavesNoLeaks; it
// does nothing in a normal run.
func TestAloneProcess(t *testing.T) {
	dir := os.Getenv(aloneDirEnv)
	if dir == "" {
		t.Skip("run by TestAloneKilledLeavesNoLeaks")
	}
	if err := runAlone(context.Background(), dir, os.Stdin, os.Stdout); err != nil {
		t.Fatal(err)
	}
}

// aloneKey is the key that checkpoint id's j-th change increments.
func aloneKey(id int64, j int) string { return fmt.Sprintf("k%02d", (int(id)*7+j)%50) }

// runAlone restores the latest checkpoint whose handle it kept (none on a
// first start), checks the restored counts, and goes on to checkpoint
// aloneCheckpoints: each increments aloneKeysPerCheck counters, every
// seventh materialises first, and each is kept (its handle's file
// written) before it is notified complete; it prints "checkpoint N" once
// notified. Then it collects and prints "collected NOW" (the collection's
// now in Unix nanoseconds), waits for a line on in, waits for the grace,
// collects again and prints "collected again".
func runAlone(ctx context.Context, dir string, in io.Reader, out io.Writer) error {
	cfg := dstl.DefaultConfig(filepath.Join(dir, "store"))
	cfg.JobID = aloneJob
	storage, err := dstl.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer storage.Close()
	cp, err := statestore.NewCheckpointer(storage, statestore.Config{Operator: "counter", KeyGroups: allGroups, MaxParallelism: maxP,
		Retain: aloneRetain, Grace: aloneGrace, CollectInterval: time.Nanosecond, MaterializeSize: -1, MaterializeInterval: -1})
	if err != nil {
		return err
	}
	defer cp.Close()
	counts, err := statestore.NewKeyValueStore("counts", cp.Log(), statestore.StringCodec{}, statestore.Int64Codec{}, statestore.WithMaxParallelism(maxP))
	if err != nil {
		return err
	}
	if err := cp.Register(counts); err != nil {
		return err
	}
	hdir := filepath.Join(dir, "handles")
	kept, err := keptHandles(hdir)
	if err != nil {
		return err
	}
	var restored int64
	var hs []*statestore.CheckpointHandle
	if len(kept) > 0 {
		h := kept[len(kept)-1]
		restored, hs = h.CheckpointID, append(hs, h)
	}
	if err := cp.InitializeState(ctx, statestore.CheckpointInfo{CheckpointID: restored}, hs...); err != nil {
		return err
	}
	want := map[string]int64{}
	for id := int64(1); id <= restored; id++ {
		for j := range aloneKeysPerCheck {
			want[aloneKey(id, j)]++
		}
	}
	for k, n := range counts.All() {
		if want[k] != n {
			return fmt.Errorf("restored checkpoint %d: %s = %d, want %d", restored, k, n, want[k])
		}
		delete(want, k)
	}
	if len(want) > 0 {
		return fmt.Errorf("restored checkpoint %d: %d keys missing", restored, len(want))
	}
	if err := os.MkdirAll(hdir, 0o755); err != nil {
		return err
	}
	for id := restored + 1; id <= aloneCheckpoints; id++ {
		for j := range aloneKeysPerCheck {
			n, _, err := counts.Get(aloneKey(id, j))
			if err == nil {
				err = counts.Put(aloneKey(id, j), n+1)
			}
			if err != nil {
				return err
			}
		}
		if id%7 == 0 {
			if err := cp.Materialize(ctx); err != nil {
				return err
			}
		}
		h, err := cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: id})
		if err != nil {
			return err
		}
		b, err := h.MarshalBinary()
		if err != nil {
			return err
		}
		name := filepath.Join(hdir, fmt.Sprintf("%06d", id))
		if err := os.WriteFile(name+".tmp", b, 0o644); err != nil {
			return err
		}
		if err := os.Rename(name+".tmp", name); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(hdir, fmt.Sprintf("%06d", id-aloneRetain))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := cp.NotifyCheckpointComplete(ctx, id); err != nil {
			return err
		}
		fmt.Fprintf(out, "checkpoint %d\n", id)
		time.Sleep(alonePace)
	}
	rep, err := cp.Collect(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "collected %d\n", rep.Now.UnixNano())
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return err
	}
	time.Sleep(aloneGrace + 50*time.Millisecond)
	if _, err := cp.Collect(ctx); err != nil {
		return err
	}
	fmt.Fprintln(out, "collected again")
	return nil
}

// keptHandles reads the handles that the program kept, oldest first.
func keptHandles(dir string) ([]*statestore.CheckpointHandle, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var hs []*statestore.CheckpointHandle
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		h := new(statestore.CheckpointHandle)
		if err := h.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("handle %s: %w", e.Name(), err)
		}
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b *statestore.CheckpointHandle) int { return int(a.CheckpointID - b.CheckpointID) })
	return hs, nil
}

// aloneProcess is a running program of TestAloneKilledLeavesNoLeaks.
type aloneProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr bytes.Buffer
	done   chan error
}

func startAlone(t *testing.T, ctx context.Context, dir string) *aloneProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &aloneProcess{lines: make(chan string, 1000), done: make(chan error, 1)}
	p.cmd = exec.CommandContext(ctx, exe, "-test.run=^TestAloneProcess$")
	p.cmd.Env = append(os.Environ(), aloneDirEnv+"="+dir)
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// await returns the rest of the first line that starts with prefix.
func (p *aloneProcess) await(t *testing.T, prefix string) string {
	t.Helper()
	for line := range p.lines {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return rest
		}
	}
	err := <-p.done
	p.done <- err
	t.Fatalf("the program ended (%v) before %q; stderr:\n%s", err, prefix, p.stderr.String())
	return ""
}

// aloneObject is an object on the backend, as the test counts it.
type aloneObject struct {
	backends.ObjectInfo
	name objname.Name
}

func listAlone(t *testing.T, b backends.Backend) []aloneObject {
	t.Helper()
	prefix := objname.JobPrefix(aloneJob)
	var objs []aloneObject
	if err := b.List(context.Background(), prefix, func(oi backends.ObjectInfo) error {
		objs = append(objs, aloneObject{oi, objname.Parse(prefix, oi.Name)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestAloneKilledLeavesNoLeaks: a program of 100 checkpoints on a
// checkpointer alone on its storage (local disk, Retain 2, a grace of 1
// s), killed (SIGKILL) after about half of them and restarted from the
// latest handle it kept, leaves on the backend only what its last 2
// checkpoints refer to, and objects younger than the grace; once the
// grace has passed, one more collection leaves exactly what they refer
// to. At the kill, the objects of the first run that no kept handle
// names are all younger than the grace (and a little more) or made for a
// checkpoint after the latest kept one.
func TestAloneKilledLeavesNoLeaks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two processes for about 10 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := local.Open(ctx, local.Config{Root: filepath.Join(dir, "store")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	hdir := filepath.Join(dir, "handles")

	// The first run, killed after checkpoint killAfter and a moment.
	killAfter := 50 + rand.IntN(10)
	p := startAlone(t, ctx, dir)
	for p.await(t, "checkpoint ") != strconv.Itoa(killAfter) {
	}
	time.Sleep(time.Duration(rand.IntN(int(alonePace))))
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-p.done; err == nil {
		t.Fatal("the first run exited before the kill")
	}
	p.done <- nil
	killed := time.Now()
	kept, err := keptHandles(hdir)
	if err != nil || len(kept) == 0 {
		t.Fatalf("kept handles %d, %v", len(kept), err)
	}
	latest := kept[len(kept)-1].CheckpointID
	named := map[string]bool{}
	for _, o := range referenced(kept...) {
		named[o] = true
	}
	const slack = 2 * time.Second // for a busy machine: the collection follows the checkpoint
	var held, young, logs int
	objs := listAlone(t, b)
	for _, o := range objs {
		if o.name.Kind == objname.Log {
			logs++
		}
		switch {
		case named[o.Name]:
		case o.name.Checkpoint > latest:
			held++
		case killed.Sub(o.ModTime) < aloneGrace+slack:
			young++
		default:
			t.Errorf("at the kill: %s (made for checkpoint %d, %v old), which no kept handle names, is left", o.Name, o.name.Checkpoint, killed.Sub(o.ModTime).Round(time.Millisecond))
		}
	}
	t.Logf("killed after checkpoint %d (kept handles up to %d): %d objects (%d log objects): %d named by the kept handles, %d made for later checkpoints, %d younger than the grace and %v",
		killAfter, latest, len(objs), logs, len(named), held, young, slack)
	if logs >= killAfter {
		t.Errorf("%d log objects after %d checkpoints: nothing collected", logs, killAfter)
	}

	// The second run restores the latest kept handle and completes the
	// 100 checkpoints.
	p = startAlone(t, ctx, dir)
	nowNanos, err := strconv.ParseInt(p.await(t, "collected "), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, nowNanos)
	kept, err = keptHandles(hdir)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != aloneRetain || kept[len(kept)-1].CheckpointID != aloneCheckpoints {
		t.Fatalf("%d kept handles, the latest of checkpoint %d", len(kept), kept[len(kept)-1].CheckpointID)
	}
	want := referenced(kept...)
	named = map[string]bool{}
	for _, o := range want {
		named[o] = true
	}
	objs = listAlone(t, b)
	young = 0
	present := map[string]bool{}
	for _, o := range objs {
		present[o.Name] = true
		switch {
		case named[o.Name]:
		case now.Sub(o.ModTime) <= aloneGrace || now.Sub(o.name.Time()) <= aloneGrace:
			young++
		default:
			t.Errorf("after checkpoint %d: %s (made for checkpoint %d, %v old), which neither of the last %d checkpoints refers to, is left",
				aloneCheckpoints, o.Name, o.name.Checkpoint, now.Sub(o.ModTime).Round(time.Millisecond), aloneRetain)
		}
	}
	for _, o := range want {
		if !present[o] {
			t.Errorf("%s, which a kept checkpoint refers to, is gone", o)
		}
	}
	t.Logf("after checkpoint %d: %d objects: the %d the last %d checkpoints refer to, and %d younger than the grace (%v)",
		aloneCheckpoints, len(objs), len(want), aloneRetain, young, aloneGrace)

	// Once the grace has passed, a collection leaves exactly what the
	// last checkpoints refer to.
	if _, err := io.WriteString(p.stdin, "go on\n"); err != nil {
		t.Fatal(err)
	}
	p.await(t, "collected again")
	if err := <-p.done; err != nil {
		t.Fatalf("the second run: %v; stderr:\n%s", err, p.stderr.String())
	}
	p.done <- nil
	var left []string
	for _, o := range listAlone(t, b) {
		left = append(left, o.Name)
	}
	if !slices.Equal(left, want) {
		t.Fatalf("once the grace passed: %d objects\n%q\nwant the %d the last %d checkpoints refer to\n%q", len(left), left, len(want), aloneRetain, want)
	}
	t.Logf("once the grace passed: %d objects, those the last %d checkpoints refer to", len(left), aloneRetain)
}
