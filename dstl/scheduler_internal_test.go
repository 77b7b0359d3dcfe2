package dstl

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/uploader"
)

func TestCheckOutput(t *testing.T) {
	task := func(sqns ...uint64) *uploadTask {
		t := &uploadTask{Task: uploader.Task{LogID: NewLogID()}}
		for _, n := range sqns {
			t.ChangeSets = append(t.ChangeSets, &format.ChangeSet{LogID: t.LogID, SequenceNumber: n})
			t.sets = append(t.sets, &changeSet{sqn: SequenceNumber(n)})
		}
		return t
	}
	a, b := task(1, 2), task(7)
	res := func(sqn SequenceNumber) uploader.Result {
		return uploader.Result{SequenceNumber: uint64(sqn), Object: "o", Offset: 0, Length: 10}
	}
	objects := []uploader.StoredObject{{Name: "o", Size: 30}}
	for _, tc := range []struct {
		name string
		out  *uploader.Output
		ok   bool
	}{
		{"valid", &uploader.Output{Objects: objects, Tasks: []uploader.TaskResult{{Task: &a.Task, Results: []uploader.Result{res(1), res(2)}}, {Task: &b.Task, Results: []uploader.Result{res(7)}}}}, true},
		{"any task order", &uploader.Output{Objects: objects, Tasks: []uploader.TaskResult{{Task: &b.Task, Results: []uploader.Result{res(7)}}, {Task: &a.Task, Results: []uploader.Result{res(1), res(2)}}}}, true},
		{"nil output", nil, false},
		{"a task missing", &uploader.Output{Objects: objects, Tasks: []uploader.TaskResult{{Task: &a.Task, Results: []uploader.Result{res(1), res(2)}}}}, false},
		{"a task twice", &uploader.Output{Objects: objects, Tasks: []uploader.TaskResult{{Task: &a.Task, Results: []uploader.Result{res(1), res(2)}}, {Task: &a.Task, Results: []uploader.Result{res(1), res(2)}}}}, false},
		{"a foreign task", &uploader.Output{Objects: objects, Tasks: []uploader.TaskResult{{Task: &a.Task, Results: []uploader.Result{res(1), res(2)}}, {Task: &task(7).Task, Results: []uploader.Result{res(7)}}}}, false},
		{"a result missing", &uploader.Output{Objects: objects, Tasks: []uploader.TaskResult{{Task: &a.Task, Results: []uploader.Result{res(1)}}, {Task: &b.Task, Results: []uploader.Result{res(7)}}}}, false},
		{"results out of order", &uploader.Output{Objects: objects, Tasks: []uploader.TaskResult{{Task: &a.Task, Results: []uploader.Result{res(2), res(1)}}, {Task: &b.Task, Results: []uploader.Result{res(7)}}}}, false},
		{"an object not written", &uploader.Output{Tasks: []uploader.TaskResult{{Task: &a.Task, Results: []uploader.Result{res(1), res(2)}}, {Task: &b.Task, Results: []uploader.Result{res(7)}}}}, false},
		{"an empty result", &uploader.Output{Objects: objects, Tasks: []uploader.TaskResult{{Task: &a.Task, Results: []uploader.Result{res(1), {SequenceNumber: 2, Object: "o"}}}, {Task: &b.Task, Results: []uploader.Result{res(7)}}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkOutput([]*uploadTask{a, b}, tc.out)
			if tc.ok && err != nil {
				t.Fatalf("checkOutput: %v", err)
			}
			if !tc.ok && !errors.Is(err, errBadOutput) {
				t.Fatalf("checkOutput = %v, want %v", err, errBadOutput)
			}
		})
	}
}

// TestCheckOutputJudgesByTheWritersSets: an uploader that rewrote the
// change sets it was given is judged by the writer's own sets, not by what
// it left in ChangeSets.
func TestCheckOutputJudgesByTheWritersSets(t *testing.T) {
	task := &uploadTask{Task: uploader.Task{LogID: NewLogID()}}
	task.ChangeSets = []*format.ChangeSet{{LogID: task.LogID, SequenceNumber: 107}} // rewritten from 7
	task.sets = []*changeSet{{sqn: 7}}
	out := &uploader.Output{
		Objects: []uploader.StoredObject{{Name: "o", Size: 30}},
		Tasks:   []uploader.TaskResult{{Task: &task.Task, Results: []uploader.Result{{SequenceNumber: 107, Object: "o", Length: 10}}}},
	}
	if err := checkOutput([]*uploadTask{task}, out); !errors.Is(err, errBadOutput) {
		t.Fatalf("checkOutput = %v, want errBadOutput for a result of change set 107 where the writer gave 7", err)
	}
	task.ChangeSets = nil // shortened by the uploader
	out.Tasks[0].Results[0].SequenceNumber = 7
	if err := checkOutput([]*uploadTask{task}, out); err != nil {
		t.Fatalf("checkOutput = %v for a result matching the writer's set", err)
	}
}

// TestAttemptGoroutinesStay: an upload attempt runs on a goroutine that
// stays, idle, for the next attempt (whose stack is then grown already);
// attempts at once run on goroutines of their own; closing ends them.
func TestAttemptGoroutinesStay(t *testing.T) {
	s := newScheduler(DefaultConfig("x"), "x", nil, nil, nil, nil, slog.New(slog.DiscardHandler))
	goroutine := func() string {
		b := make([]byte, 64)
		return strings.Fields(string(b[:runtime.Stack(b, false)]))[1] // "goroutine N [running]:"
	}
	s.wg.Add(1) // runAttempt is called from a drain goroutine, which s.wg counts
	ids := make(chan string, 1)
	s.runAttempt(func() { ids <- goroutine() })
	first := <-ids
	select {
	case s.work <- func() { ids <- goroutine() }: // only an idle attempt goroutine takes it
	case <-time.After(10 * time.Second):
		t.Fatal("no attempt goroutine waits for the next attempt")
	}
	if second := <-ids; second != first {
		t.Fatalf("the second attempt ran on goroutine %s, the first on %s", second, first)
	}

	release := make(chan struct{})
	s.runAttempt(func() { <-release })
	done := make(chan string, 1)
	s.runAttempt(func() { done <- goroutine() }) // must not wait for the first
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an attempt waited for another to end")
	}
	close(release)

	s.cancel()
	s.wg.Done()
	ended := make(chan struct{})
	go func() { s.wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("attempt goroutines still run after the scheduler closed")
	}
}

// TestIdleAttemptGoroutineKeepsNothing: once a writer's set was uploaded,
// truncated and the writer closed, nothing of the engine keeps the set's
// arena nor the writer, though the goroutine of its last upload attempt
// stays for the next one.
func TestIdleAttemptGoroutineKeepsNothing(t *testing.T) {
	s := newStoringStorage(t, func(cfg *Config) {
		cfg.BatchPersistDelay = NoBatchDelay
		cfg.PreemptivePersistThreshold = 1 << 30
		cfg.UploadMaxInFlight = 2 << 30
	})
	w, err := s.NewWriter("op", KeyGroupRange{Start: 0, End: 0})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Append(ctx, 0, make([]byte, 8<<20)); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	chunks := w.active.chunks
	w.mu.Unlock()
	if len(chunks) != 1 {
		t.Fatalf("%d chunks", len(chunks))
	}
	chunk := chunks[0]
	wp := weak.Make(&chunk[:1][0])
	chunk = nil
	checkpointWriter(t, w, 0, 1)
	ww := weak.Make(w)
	w.Close()
	w = nil
	// The set's buffers go back just after its future resolves.
	for deadline := time.Now().Add(10 * time.Second); wp.Value() != nil || ww.Value() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("while the storage is open, still reachable: the 8 MiB chunk of a truncated set of a closed writer: %v; the writer (and its last upload): %v",
				wp.Value() != nil, ww.Value() != nil)
		}
		runtime.GC()
	}
	s.Close()
	for range 5 {
		runtime.GC()
	}
	if wp.Value() != nil {
		t.Errorf("still reachable after Storage.Close")
	}
}
