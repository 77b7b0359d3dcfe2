package collect_test

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/s3"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// v7 returns a UUIDv7 that holds the time at.
func v7(t *testing.T, at time.Time) uuid.UUID {
	t.Helper()
	u, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(at.UnixMilli()))
	copy(u[:6], ms[2:])
	return u
}

// logName returns a log object's name under prefix whose UUIDv7 holds at.
func logName(t *testing.T, prefix string, at time.Time) string {
	t.Helper()
	name, err := objname.Format(prefix, objname.Name{Kind: objname.Log, ID: v7(t, at)})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// snapName returns the name of a snapshot object of operator op under
// prefix whose UUIDv7 holds at.
func snapName(t *testing.T, prefix, op string, at time.Time) string {
	t.Helper()
	return opName(t, objname.Snapshot, prefix, op, at)
}

// opName is the name of an operator's object of the kind (a snapshot or a
// snapshot file) made at the time.
func opName(t *testing.T, kind objname.Kind, prefix, op string, at time.Time) string {
	t.Helper()
	name, err := objname.Format(prefix, objname.Name{Kind: kind, ID: v7(t, at), Operator: op})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// timedBackend is an in-memory backend whose List reports the
// modification times of mod for the names in it (a zero time for a
// storage that reports none).
type timedBackend struct {
	*dstltest.Backend
	mod map[string]time.Time
}

func newTimedBackend() timedBackend {
	return timedBackend{dstltest.NewBackend(), map[string]time.Time{}}
}

func (b timedBackend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	return b.Backend.List(ctx, prefix, func(oi backends.ObjectInfo) error {
		if t, ok := b.mod[oi.Name]; ok {
			oi.ModTime = t
		}
		return fn(oi)
	})
}

// put stores an object of ten bytes under name, modified at mod.
func (b timedBackend) put(t *testing.T, name string, mod time.Time) {
	t.Helper()
	if err := b.Put(t.Context(), name, strings.NewReader("some bytes"), 10); err != nil {
		t.Fatal(err)
	}
	b.mod[name] = mod
}

// logs puts n log objects under "job/" named and modified at "at", and
// returns their sorted names.
func (b timedBackend) logs(t *testing.T, n int, at time.Time) []string {
	t.Helper()
	var names []string
	for range n {
		name := logName(t, "job/", at)
		b.put(t, name, at)
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// names returns the names stored, the clock probes excepted.
func (b timedBackend) names() []string {
	var names []string
	for _, oi := range b.Objects() {
		if !isProbe(oi.Name) {
			names = append(names, oi.Name)
		}
	}
	return names
}

func isProbe(name string) bool { return strings.Contains(name, objname.ClockProbePrefix) }

// uploadsBackend is an in-memory backend with incomplete uploads, whose
// aborts fail or stall as told.
type uploadsBackend struct {
	timedBackend
	mu       sync.Mutex
	uploads  []s3.IncompleteUpload
	abortErr map[string]error // by upload id
	stall    map[string]bool  // by upload id: the abort waits for its context
}

func (b *uploadsBackend) ListIncompleteUploads(ctx context.Context, prefix string, fn func(s3.IncompleteUpload) error, page func()) error {
	b.mu.Lock()
	us := slices.Clone(b.uploads)
	b.mu.Unlock()
	for _, u := range us {
		if strings.HasPrefix(u.Name, prefix) {
			if err := fn(u); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *uploadsBackend) AbortIncompleteUpload(ctx context.Context, u s3.IncompleteUpload) error {
	if b.stall[u.UploadID] {
		<-ctx.Done()
		return ctx.Err()
	}
	if err := b.abortErr[u.UploadID]; err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.uploads = slices.DeleteFunc(b.uploads, func(v s3.IncompleteUpload) bool { return v.UploadID == u.UploadID })
	return nil
}

// left returns the ids of the uploads not aborted.
func (b *uploadsBackend) left() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	for _, u := range b.uploads {
		ids = append(ids, u.UploadID)
	}
	return ids
}

// warningsTo returns an OnEvent that appends to ws the events that tell
// what went wrong without failing the collection.
func warningsTo(ws *[]collect.Event) func(collect.Event) {
	return func(e collect.Event) {
		if e.Kind == collect.EventProbeLeft || e.Kind == collect.EventNoStoreClock {
			*ws = append(*ws, e)
		}
	}
}
