package catalog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstltest"
)

// quiet is the catalog's logger in tests.
var quiet = slog.New(slog.DiscardHandler)

func bytesReader(b []byte) io.ReaderAt { return bytes.NewReader(b) }

func containsName(err error, name string) bool { return strings.Contains(err.Error(), name) }

// cfg configures process proc of a job of p instances, one per process.
func cfg(p, proc int) catalog.Config {
	return catalog.Config{JobID: "job", Instances: p, Process: proc, MaxParallelism: 12, Grace: time.Hour, Logger: quiet}
}

// cfgQ configures process proc of a job of p instances in q processes.
func cfgQ(p, q, proc int) catalog.Config {
	c := cfg(p, proc)
	c.Processes = q
	return c
}

func join(t *testing.T, b backends.Backend, c catalog.Config) *catalog.Member {
	t.Helper()
	m, err := catalog.Join(t.Context(), b, c)
	if err != nil {
		t.Fatalf("Join(process %d of %d): %v", c.Process, c.Processes, err)
	}
	return m
}

// joinAll joins every process of a job of p instances in q processes (q 0:
// one per instance), in order.
func joinAll(t *testing.T, b backends.Backend, p, q int) []*catalog.Member {
	t.Helper()
	if q == 0 {
		q = p
	}
	ms := make([]*catalog.Member, q)
	for i := range q {
		ms[i] = join(t, b, cfgQ(p, q, i))
	}
	return ms
}

// stateOf is the state instance i commits at checkpoint n of generation g.
func stateOf(g int64, i int, n int64) []byte { return fmt.Appendf(nil, "g%d-i%d-n%d", g, i, n) }

// objectOf is the object instance i's state of checkpoint n of generation
// g refers to.
func objectOf(g int64, i int, n int64) string { return fmt.Sprintf("job/obj-g%d-i%d-n%d", g, i, n) }

// parts returns member m's instances' states of checkpoint n.
func parts(m *catalog.Member, n int64) []catalog.InstanceState {
	g := m.Generation().Number
	var out []catalog.InstanceState
	for _, i := range m.Instances() {
		out = append(out, catalog.InstanceState{Instance: i, State: stateOf(g, i, n),
			Objects: []string{objectOf(g, i, n)}, Metadata: map[string]string{"offset": fmt.Sprint(n * 10)}})
	}
	return out
}

// commit commits member m's parts of n.
func commit(t *testing.T, m *catalog.Member, n int64) catalog.Status {
	t.Helper()
	st, err := m.Commit(t.Context(), n, parts(m, n))
	if err != nil {
		t.Fatalf("Commit(%d) of process %d: %v", n, m.Process(), err)
	}
	return st
}

// commitAll commits n on every member, in order, and returns their
// statuses.
func commitAll(t *testing.T, ms []*catalog.Member, n int64) []catalog.Status {
	t.Helper()
	var out []catalog.Status
	for _, m := range ms {
		out = append(out, commit(t, m, n))
	}
	return out
}

// restored returns the states the member's instances restore, in
// instance and key-group order.
func restored(m *catalog.Member) []string {
	var out []string
	for _, i := range m.Instances() {
		for _, p := range m.Restore(i) {
			out = append(out, string(p.State))
		}
	}
	return out
}

// lossy loses the answer of its nth Put: the object is stored, and the
// caller gets an error, as when a connection breaks after the service
// stored the object.
type lossy struct {
	backends.Backend
	nth  int64
	puts atomic.Int64
}

// Unwrap returns the backend the calls go to.
func (l *lossy) Unwrap() backends.Backend { return l.Backend }

var errLost = errors.New("connection reset after the request was sent")

func (l *lossy) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	err := l.Backend.Put(ctx, name, body, size)
	if l.puts.Add(1) == l.nth && err == nil {
		return errLost
	}
	return err
}

// hooked calls before, once, before the first call of op on a name that
// match accepts, as when another process acts between two requests of a
// caller.
type hooked struct {
	backends.Backend
	op     string // "put", "get" or "list"
	match  func(name string) bool
	before func()
	done   atomic.Bool
}

// Unwrap returns the backend the calls go to.
func (h *hooked) Unwrap() backends.Backend { return h.Backend }

func (h *hooked) hook(op, name string) {
	if op == h.op && h.match(name) && h.done.CompareAndSwap(false, true) {
		h.before()
	}
}

func (h *hooked) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	h.hook("put", name)
	return h.Backend.Put(ctx, name, body, size)
}

func (h *hooked) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	h.hook("get", name)
	return h.Backend.Get(ctx, name, offset, length)
}

func (h *hooked) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	h.hook("list", prefix)
	return h.Backend.List(ctx, prefix, fn)
}

// clockBackend is an in-memory backend whose objects' modification times
// come from a clock the test moves, as a store's clock would.
type clockBackend struct {
	*dstltest.Backend
	mu  sync.Mutex
	now time.Time
	mod map[string]time.Time
}

func newClockBackend() *clockBackend {
	return &clockBackend{Backend: dstltest.NewBackend(), now: time.Now(), mod: map[string]time.Time{}}
}

// Now returns the store's clock.
func (c *clockBackend) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the store's clock.
func (c *clockBackend) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *clockBackend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	err := c.Backend.Put(ctx, name, body, size)
	if err == nil {
		c.mu.Lock()
		c.mod[name] = c.now
		c.mu.Unlock()
	}
	return err
}

func (c *clockBackend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	return c.Backend.List(ctx, prefix, func(oi backends.ObjectInfo) error {
		c.mu.Lock()
		oi.ModTime = c.mod[oi.Name]
		c.mu.Unlock()
		return fn(oi)
	})
}

// names returns the names of the objects under prefix, sorted.
func names(t *testing.T, b backends.Backend, prefix string) []string {
	t.Helper()
	var out []string
	if err := b.List(t.Context(), prefix, func(oi backends.ObjectInfo) error {
		out = append(out, oi.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// put stores an object of a few bytes.
func put(t *testing.T, b backends.Backend, name string) {
	t.Helper()
	if err := b.Put(t.Context(), name, bytesReader([]byte("data")), 4); err != nil {
		t.Fatalf("put %s: %v", name, err)
	}
}

func has(list []string, name string) bool { return slices.Contains(list, name) }
