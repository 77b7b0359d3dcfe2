package dstl

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/faulty"
	"github.com/dstlgo/dstl/backends/mem"
)

// newGatedBackend returns an in-memory backend whose Puts wait (or end
// with their context) until open is called; from then on none waits.
func newGatedBackend(t *testing.T) (b backends.Backend, open func()) {
	t.Helper()
	m, err := mem.Open(t.Context(), mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := faulty.New(m, func(c faulty.Call) faulty.Fault { return faulty.Fault{Stall: c.Op == faulty.OpPut} })
	return f, func() { f.SetFunc(nil); f.ReleaseStalls() }
}

// TestPreemptivePersistWaitsWithoutMarking: a preemptive persist that meets
// a full storage and whose appender's context ends fails nothing and warns
// of no failed upload: no set was marked for an upload that could not start
// (so no persist reusing such a set can fail with the appender's context),
// and the next persist uploads them.
func TestPreemptivePersistWaitsWithoutMarking(t *testing.T) {
	var logs bytes.Buffer
	b, open := newGatedBackend(t)
	cfg := DefaultConfig("mem://job")
	cfg.JobID = "job"
	cfg.UploadMaxInFlight = 100
	cfg.PreemptivePersistThreshold = 50
	cfg.UploadTimeout = time.Hour
	cfg.BatchPersistDelay = time.Millisecond
	s, err := New(cfg, b, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w1, _ := s.NewWriter("a", KeyGroupRange{Start: 0, End: 0})
	w2, _ := s.NewWriter("b", KeyGroupRange{Start: 1, End: 1})
	ctx := context.Background()
	if err := w2.Append(ctx, 1, []byte(strings.Repeat("b", 40))); err != nil { // below the threshold
		t.Fatal(err)
	}
	if err := w1.Append(ctx, 0, []byte(strings.Repeat("a", 40))); err != nil {
		t.Fatal(err)
	}
	if err := w1.Append(ctx, 0, []byte(strings.Repeat("a", 80))); err != nil { // preemptive: 120 in flight
		t.Fatal(err)
	}
	if got := s.InFlight(); got < cfg.UploadMaxInFlight {
		t.Fatalf("%d bytes in flight, want the storage full", got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	w2.persistPreemptively(cancelled) // as an append past the threshold would, its context ended
	if strings.Contains(logs.String(), "upload failed") {
		t.Fatalf("an abandoned preemptive persist was logged as a failed upload:\n%s", logs.String())
	}
	open()
	f, err := w2.Persist(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Remote.LogicalSize != 40 {
		t.Fatalf("w2's persist covers %d bytes, want its 40", res.Remote.LogicalSize)
	}
}
