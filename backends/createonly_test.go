package backends_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/dstltest"
)

// TestVerifyCreateOnly: the check refuses a store that ignores create-only
// on either path, naming the path, and passes one that honours it; a put
// that went through is sent once more before the verdict; the probe object
// is gone afterwards. With a part size of 1 byte, the first put goes up
// as a multipart upload and the second still takes the single-request
// path (it is one byte).
func TestVerifyCreateOnly(t *testing.T) {
	for _, tc := range []struct {
		name       string
		conditions dstltest.Conditions
		partSize   int64
		path       string         // in the error, "" when the check passes
		puts       map[string]int // by path
	}{
		{"honoured", dstltest.HonourConditions, 1 << 20, "", map[string]int{"single": 2, "multipart": 1}},
		{"ignored on multipart", dstltest.IgnoreOnMultipart, 1 << 20, "the completion of a multipart upload", map[string]int{"single": 2, "multipart": 2}},
		{"ignored", dstltest.IgnoreConditions, 1 << 20, "a single-request put", map[string]int{"single": 3}},
		{"honoured, part size 1", dstltest.HonourConditions, 1, "", map[string]int{"single": 1, "multipart": 2}},
		{"ignored on multipart, part size 1", dstltest.IgnoreOnMultipart, 1, "the completion of a multipart upload", map[string]int{"single": 1, "multipart": 3}},
		{"ignored, part size 1", dstltest.IgnoreConditions, 1, "a single-request put", map[string]int{"single": 2, "multipart": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewConditionStore(tc.conditions, tc.partSize)
			defer b.Close()
			err := backends.VerifyCreateOnly(t.Context(), b, "job/.create-only-probe")
			switch {
			case tc.path == "" && err != nil:
				t.Fatalf("VerifyCreateOnly: %v", err)
			case tc.path != "" && !errors.Is(err, backends.ErrCreateOnlyIgnored):
				t.Fatalf("VerifyCreateOnly: %v, want ErrCreateOnlyIgnored", err)
			case tc.path != "" && (!strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), "conditions at memory store") ||
				!strings.Contains(err.Error(), "release of the store")):
				t.Fatalf("VerifyCreateOnly: %v; want the store, %q and what to do named", err, tc.path)
			}
			var d *dstltest.ConditionStore
			b.As(&d)
			if p := d.Puts(); !maps.Equal(p, tc.puts) {
				t.Errorf("Puts by path %v, want %v", p, tc.puts)
			}
			if objs := listNames(t, b); len(objs) != 0 {
				t.Errorf("objects left after the check: %q", objs)
			}
		})
	}
}

// TestVerifyCreateOnlyOncePerBucket: the verdict is kept in the Bucket,
// also when asked through a wrapper, which sees none of the probe's
// requests; an error that is no verdict is asked again.
func TestVerifyCreateOnlyOncePerBucket(t *testing.T) {
	for _, conditions := range []dstltest.Conditions{dstltest.HonourConditions, dstltest.IgnoreConditions} {
		b := dstltest.NewConditionStore(conditions, 1<<20)
		var d *dstltest.ConditionStore
		b.As(&d)
		c := counting.New(b)
		first := backends.VerifyCreateOnly(t.Context(), c, "p1")
		sent := d.Puts()
		for range 3 {
			if err := backends.VerifyCreateOnly(t.Context(), c, "p2"); err != first {
				t.Errorf("conditions %d: second check %v, first %v", conditions, err, first)
			}
			if err := b.VerifyCreateOnly(t.Context(), "p3"); err != first {
				t.Errorf("conditions %d: the Bucket's own check %v, first %v", conditions, err, first)
			}
		}
		if got := d.Puts(); !maps.Equal(got, sent) || c.Stats().Requests() != 0 {
			t.Errorf("conditions %d: Puts by path %v after the first check, %v after the later ones; %d through the wrapper",
				conditions, sent, got, c.Stats().Requests())
		}
		b.Close()
	}

	// A check that fails for want of an answer is no verdict: the next
	// check probes again.
	d := &flakyPuts{naive: newNaive()}
	b := backends.New("flaky", d, backends.NoRetries)
	defer b.Close()
	if err := backends.VerifyCreateOnly(t.Context(), b, "p1"); !errors.Is(err, errFlaky) || errors.Is(err, backends.ErrCreateOnlyIgnored) {
		t.Fatalf("check whose first put failed: %v", err)
	}
	if err := backends.VerifyCreateOnly(t.Context(), b, "p2"); err != nil {
		t.Fatalf("check after a failed one: %v", err)
	}
	if n := d.puts.Load(); n != 3 {
		t.Fatalf("%d Puts, want the failed one and the second check's 2", n)
	}
}

// flakyPuts is a naive driver whose first Put fails, as a store that did
// not answer in time.
type flakyPuts struct {
	*naive
	puts atomic.Int64
}

var errFlaky = errors.New("flaky: connection reset")

func (f *flakyPuts) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	if f.puts.Add(1) == 1 {
		return errFlaky
	}
	return f.naive.Put(ctx, rt, name, body, size)
}

// TestVerifyCreateOnlyShared: concurrent checks of one Bucket share one
// probe, and a check whose context ends stops waiting without failing the
// others.
func TestVerifyCreateOnlyShared(t *testing.T) {
	slow := &slowPuts{naive: newNaive(), release: make(chan struct{})}
	b := backends.New("slow", slow, backends.NoRetries)
	defer b.Close()
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- b.VerifyCreateOnly(ctx, "probe") }()
	results := make(chan error, 4)
	for range 4 {
		go func() { results <- b.VerifyCreateOnly(t.Context(), "probe") }()
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("check whose context ended: %v", err)
	}
	close(slow.release)
	for range 4 {
		if err := <-results; err != nil {
			t.Fatalf("a waiting check: %v", err)
		}
	}
	if n := slow.puts.Load(); n != 3 {
		t.Fatalf("five checks sent %d Puts, want one probe's 3", n)
	}
}

// slowPuts is a naive driver whose Puts wait for release.
type slowPuts struct {
	*naive
	release chan struct{}
	puts    atomic.Int64
}

func (s *slowPuts) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	s.puts.Add(1)
	<-s.release
	return s.naive.Put(ctx, rt, name, body, size)
}

func (s *slowPuts) PutMultipart(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	return s.Put(ctx, rt, name, body, size)
}

func (s *slowPuts) MinMultipartSize() int64 { return 1 }

// TestPutMultipart: the multipart path of a driver that has one, checked
// like Put; a driver without one says so.
func TestPutMultipart(t *testing.T) {
	b := dstltest.NewConditionStore(dstltest.HonourConditions, 1<<20)
	defer b.Close()
	if err := b.PutMultipart(t.Context(), "a", strings.NewReader("abc"), 3); err != nil {
		t.Fatal(err)
	}
	if err := b.PutMultipart(t.Context(), "a", strings.NewReader("abc"), 3); !errors.Is(err, backends.ErrExists) {
		t.Fatalf("second PutMultipart: %v, want ErrExists", err)
	}
	if err := b.PutMultipart(t.Context(), "b", strings.NewReader(""), 0); err == nil {
		t.Fatal("PutMultipart of 0 bytes, below the driver's minimum: no error")
	}
	if err := b.PutMultipart(t.Context(), "a//b", strings.NewReader("abc"), 3); !errors.Is(err, backends.ErrInvalidName) {
		t.Fatalf("PutMultipart of an invalid name: %v", err)
	}
	n := backends.New("naive", newNaive(), backends.NoRetries)
	if err := n.PutMultipart(t.Context(), "a", strings.NewReader("abc"), 3); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("PutMultipart of a driver without the path: %v, want ErrUnsupported", err)
	}
	if err := backends.VerifyCreateOnly(t.Context(), n, "probe"); err != nil {
		t.Fatalf("VerifyCreateOnly of a driver with one path: %v", err)
	}
}

func listNames(t *testing.T, b backends.Backend) []string {
	t.Helper()
	var names []string
	if err := b.List(t.Context(), "", func(o backends.ObjectInfo) error { names = append(names, o.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestVerifyCreateOnlyEmbedded: a backend package's type that embeds the
// Bucket, wrapped by counting, keeps its verdict in the Bucket.
func TestVerifyCreateOnlyEmbedded(t *testing.T) {
	type pkgBackend struct{ *backends.Bucket }
	b := dstltest.NewConditionStore(dstltest.HonourConditions, 1<<20)
	defer b.Close()
	var d *dstltest.ConditionStore
	b.As(&d)
	c := counting.New(pkgBackend{b})
	for range 3 {
		if err := backends.VerifyCreateOnly(t.Context(), c, "probe"); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.Puts(); got["single"] != 2 || got["multipart"] != 1 {
		t.Fatalf("three checks sent Puts %v, want one check's", got)
	}
}

// TestCloseStopsCreateOnlyProbe: a check whose caller gave up leaves its
// probe running for the others; Close stops it rather than waiting for
// its attempts against a store that does not answer, a check still
// waiting for it learns that the bucket was closed, and so does a check
// after Close.
func TestCloseStopsCreateOnlyProbe(t *testing.T) {
	d := &hangingPuts{naive: newNaive()}
	b := backends.New("hanging", d, backends.Policy{Timeout: 2 * time.Second, MaxAttempts: 2,
		InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	waiting := make(chan error, 1)
	go func() { waiting <- b.VerifyCreateOnly(context.Background(), "probe") }()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := b.VerifyCreateOnly(ctx, "probe"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("check whose context ended: %v", err)
	}
	start := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Close took %v: it waited for the probe's attempts", took)
	}
	if err := <-waiting; !errors.Is(err, backends.ErrClosed) {
		t.Fatalf("check waiting for the probe: %v, want ErrClosed", err)
	}
	if err := b.VerifyCreateOnly(t.Context(), "probe"); !errors.Is(err, backends.ErrClosed) {
		t.Fatalf("check after Close: %v, want ErrClosed", err)
	}
}

// hangingPuts is a naive driver whose Puts go unanswered until their
// attempt's context ends.
type hangingPuts struct{ *naive }

func (h *hangingPuts) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	return rt.Do(ctx, size, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
}

// TestVerifyCreateOnlyDeleteFails: a store that honours create-only but
// fails the Delete of the probe object passes the check, and keeps its
// verdict: a later check sends nothing (and leaves no second object).
// The object left behind is logged; the garbage collector removes it.
func TestVerifyCreateOnlyDeleteFails(t *testing.T) {
	var logged bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	d := &failingDeletes{naive: newNaive()}
	b := backends.New("nodelete", d, backends.NoRetries)
	defer b.Close()
	for i := range 3 {
		if err := b.VerifyCreateOnly(t.Context(), fmt.Sprintf("probe%d", i)); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	if objs := listNames(t, b); !slices.Equal(objs, []string{"probe0"}) || d.deletes.Load() != 1 {
		t.Errorf("objects after three checks %q, %d deletes; want the first probe's object left by its one delete", objs, d.deletes.Load())
	}
	if !strings.Contains(logged.String(), "probe0") || !strings.Contains(logged.String(), "delete refused") {
		t.Errorf("log %q: want the object left and the error", logged.String())
	}
}

// failingDeletes is a naive driver whose Deletes fail.
type failingDeletes struct {
	*naive
	deletes atomic.Int64
}

func (f *failingDeletes) Delete(context.Context, string) error {
	f.deletes.Add(1)
	return errors.New("delete refused")
}

// TestVerifyCreateOnlyObjectDeleted: a probe object deleted by someone
// else between the probe's puts (a collection with no grace, a lifecycle
// rule) lets the next put create it anew; that is no proof that the store
// ignores create-only, and a store that honours it passes the check.
func TestVerifyCreateOnlyObjectDeleted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before int64 // the put (1-based) before which the object vanishes
	}{
		{"before the single-request put", 2},
		{"before the multipart put", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &vanishing{naive: newNaive(), before: tc.before}
			b := backends.New("vanishing", d, backends.NoRetries)
			defer b.Close()
			if err := b.VerifyCreateOnly(t.Context(), "probe"); err != nil {
				t.Fatalf("check of a store that honours create-only: %v", err)
			}
			if d.vanished.Load() != 1 {
				t.Fatal("the object did not vanish")
			}
			if objs := listNames(t, b); len(objs) != 0 {
				t.Errorf("objects left after the check: %q", objs)
			}
		})
	}
}

// vanishing is a naive driver, with a multipart path, that deletes the
// object before its Put number before, as another process could.
type vanishing struct {
	*naive
	before   int64
	puts     atomic.Int64
	vanished atomic.Int64
}

func (v *vanishing) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	if v.puts.Add(1) == v.before && v.naive.Delete(ctx, name) == nil {
		v.vanished.Add(1)
	}
	return v.naive.Put(ctx, rt, name, body, size)
}

func (v *vanishing) PutMultipart(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	return v.Put(ctx, rt, name, body, size)
}

func (v *vanishing) MinMultipartSize() int64 { return 1 }

// TestVerifyCreateOnlyRenamingWrapper: a wrapper that renames objects (a
// tenant's prefix) hands its name for the probe on by implementing
// CreateOnlyVerifier, so that the probe object lies under its prefix; one
// that only unwraps lets the Bucket probe under the name as given.
func TestVerifyCreateOnlyRenamingWrapper(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wrap    func(b backends.Backend) backends.Backend
		checked string // the name the store saw
	}{
		{"hands the name on", func(b backends.Backend) backends.Backend { return &verifyingTenant{tenant{b, "tenant/"}} }, "tenant/job/probe"},
		{"only unwraps", func(b backends.Backend) backends.Backend { return &tenant{b, "tenant/"} }, "job/probe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &recordingPuts{naive: newNaive()}
			b := backends.New("naive", d, backends.NoRetries)
			defer b.Close()
			w := tc.wrap(b)
			if err := backends.VerifyCreateOnly(t.Context(), w, "job/probe"); err != nil {
				t.Fatal(err)
			}
			if names := d.names(); len(names) != 2 || names[0] != tc.checked || names[1] != tc.checked {
				t.Fatalf("the probe's puts went to %q, want %q", names, tc.checked)
			}
			// The verdict is the Bucket's, whichever way it was asked.
			if err := backends.VerifyCreateOnly(t.Context(), b, "other"); err != nil || len(d.names()) != 2 {
				t.Fatalf("the Bucket's own check: %v after %d puts", err, len(d.names()))
			}
		})
	}
}

// tenant is a wrapper that keeps every object under a prefix of its own.
type tenant struct {
	b      backends.Backend
	prefix string
}

func (w *tenant) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	return w.b.Put(ctx, w.prefix+name, body, size)
}

func (w *tenant) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	return w.b.Get(ctx, w.prefix+name, offset, length)
}

func (w *tenant) Delete(ctx context.Context, name string) error {
	return w.b.Delete(ctx, w.prefix+name)
}

func (w *tenant) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	return w.b.List(ctx, w.prefix+prefix, func(o backends.ObjectInfo) error {
		o.Name = strings.TrimPrefix(o.Name, w.prefix)
		return fn(o)
	})
}

func (w *tenant) Close() error { return w.b.Close() }

func (w *tenant) Unwrap() backends.Backend { return w.b }

// verifyingTenant is a tenant that hands its name for the probe on.
type verifyingTenant struct{ tenant }

func (w *verifyingTenant) VerifyCreateOnly(ctx context.Context, name string) error {
	return backends.VerifyCreateOnly(ctx, w.b, w.prefix+name)
}

// recordingPuts is a naive driver that records the names of its Puts.
type recordingPuts struct {
	*naive
	mu  sync.Mutex
	put []string
}

func (r *recordingPuts) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	r.mu.Lock()
	r.put = append(r.put, name)
	r.mu.Unlock()
	return r.naive.Put(ctx, rt, name, body, size)
}

func (r *recordingPuts) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.put)
}
