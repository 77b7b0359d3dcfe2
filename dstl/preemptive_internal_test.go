package dstl

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
)

// gatedBackend stores puts in memory once its gate opens; until then every
// put waits (or ends with its context).
type gatedBackend struct {
	gate    chan struct{}
	mu      sync.Mutex
	objects map[string][]byte
}

func (b *gatedBackend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	select {
	case <-b.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	data := make([]byte, size)
	if _, err := body.ReadAt(data, 0); err != nil && err != io.EOF {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objects[name] = data
	return nil
}

func (b *gatedBackend) Get(_ context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.objects[name]
	if !ok {
		return nil, backends.ErrNotFound
	}
	data = data[offset:]
	if length >= 0 {
		data = data[:length]
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (b *gatedBackend) Delete(_ context.Context, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objects, name)
	return nil
}

func (b *gatedBackend) List(context.Context, string, func(backends.ObjectInfo) error) error {
	return nil
}
func (b *gatedBackend) Close() error { return nil }

// TestPreemptivePersistWaitsWithoutMarking: a preemptive persist that meets
// a full storage and whose appender's context ends fails nothing and warns
// of no failed upload: no set was marked for an upload that could not start
// (so no persist reusing such a set can fail with the appender's context),
// and the next persist uploads them.
func TestPreemptivePersistWaitsWithoutMarking(t *testing.T) {
	var logs bytes.Buffer
	b := &gatedBackend{gate: make(chan struct{}), objects: map[string][]byte{}}
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
	close(b.gate)
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
