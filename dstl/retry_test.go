package dstl_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

// failPuts makes the first n puts fail.
func failPuts(b *dstltest.Backend, n int) {
	var seen atomic.Int64
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op == dstltest.OpPut && seen.Add(1) <= int64(n) {
			return dstltest.Fault{Err: errInjected}
		}
		return dstltest.Fault{}
	})
}

func TestRetryAfterError(t *testing.T) {
	b := dstltest.NewBackend()
	failPuts(b, 2)
	s := newStorage(t, b, testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	h := persist(t, w, 0, 1)
	if got := b.Counts()[dstltest.OpPut]; got != 3 {
		t.Fatalf("puts = %d, want 3 (two failures, then success)", got)
	}
	if b.Len() != 1 {
		t.Fatalf("objects = %d, want 1", b.Len())
	}
	if got := readAll(t, b, h, w.KeyGroups()); !slices.Equal(got, []string{"0:x"}) {
		t.Fatalf("read back %q", got)
	}
}

// TestFailAfterLastAttempt: a persist fails only after every attempt the
// policy allows has failed.
func TestFailAfterLastAttempt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   string
		attempts int
		wantPuts int
	}{
		{"fixed, 3 attempts", dstl.RetryFixed, 3, 3},
		{"fixed, 1 attempt", dstl.RetryFixed, 1, 1},
		{"none", dstl.RetryNone, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			failPuts(b, 1000)
			cfg := testConfig()
			cfg.RetryPolicy, cfg.UploadMaxAttempts = tc.policy, tc.attempts
			s := newStorage(t, b, cfg)
			w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
			mustAppend(t, w, 0, "x")
			f, err := w.Persist(context.Background(), 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Wait(context.Background()); !errors.Is(err, errInjected) {
				t.Fatalf("persist error = %v, want the injected failure", err)
			}
			if got := b.Counts()[dstltest.OpPut]; got != tc.wantPuts {
				t.Fatalf("puts = %d, want %d", got, tc.wantPuts)
			}
		})
	}
}

// TestFailureIsNotSticky: the change sets of a failed upload are kept and
// the next persist uploads them again.
func TestFailureIsNotSticky(t *testing.T) {
	b := dstltest.NewBackend()
	cfg := testConfig()
	cfg.RetryPolicy = dstl.RetryNone
	failPuts(b, 1)
	s := newStorage(t, b, cfg)
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "lost?")
	f, _ := w.Persist(context.Background(), 0, 1)
	if _, err := f.Wait(context.Background()); err == nil {
		t.Fatal("first persist succeeded despite the injected failure")
	}
	mustAppend(t, w, 0, "later")
	h := persist(t, w, 0, 2)
	if got := readAll(t, b, h, w.KeyGroups()); !slices.Equal(got, []string{"0:lost?", "0:later"}) {
		t.Fatalf("read back %q, want both changes", got)
	}
}

// TestHedgeStalledAttempt: an attempt stalled past upload.timeout is left
// running while another starts; the second wins, the stalled one is
// cancelled through its context and leaves nothing.
func TestHedgeStalledAttempt(t *testing.T) {
	b := dstltest.NewBackend()
	var puts atomic.Int64
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op == dstltest.OpPut && puts.Add(1) == 1 {
			return dstltest.Fault{Stall: true}
		}
		return dstltest.Fault{}
	})
	cfg := testConfig()
	cfg.UploadTimeout = 20 * time.Millisecond
	s := newStorage(t, b, cfg)
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	h := persist(t, w, 0, 1)
	if got := b.Counts()[dstltest.OpPut]; got != 2 {
		t.Fatalf("puts = %d, want 2 (stalled + hedge)", got)
	}
	waitFor(t, "the stalled attempt to end", func() bool { return b.Len() == 1 })
	if got := readAll(t, b, h, w.KeyGroups()); !slices.Equal(got, []string{"0:x"}) {
		t.Fatalf("read back %q", got)
	}
}

// lateUploader makes its first attempt ignore cancellation and finish
// late, storing an object after another attempt has won.
type lateUploader struct {
	dstl.Uploader
	calls   atomic.Int64
	release chan struct{}
	done    chan string
}

func (u *lateUploader) Upload(ctx context.Context, tasks []*dstl.UploadTask) (*dstl.UploadOutput, error) {
	if u.calls.Add(1) == 1 {
		<-u.release
		out, err := u.Uploader.Upload(context.WithoutCancel(ctx), tasks)
		if err == nil {
			u.done <- out.Objects[0].Name
		}
		return out, err
	}
	return u.Uploader.Upload(ctx, tasks)
}

func TestLosingAttemptObjectIsDeleted(t *testing.T) {
	b := dstltest.NewBackend()
	cfg := testConfig()
	cfg.UploadTimeout = 10 * time.Millisecond
	lu := &lateUploader{release: make(chan struct{}), done: make(chan string, 1)}
	s := newStorage(t, b, cfg, dstl.WithUploader(func(u dstl.Uploader) dstl.Uploader { lu.Uploader = u; return lu }))
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	h := persist(t, w, 0, 1) // won by the second attempt
	close(lu.release)
	loser := <-lu.done
	if loser == h.Entries[0].Object {
		t.Fatal("the late attempt won")
	}
	waitFor(t, "the loser's object to be deleted", func() bool { return slices.Contains(b.DeletedNames(), loser) })
	if _, ok := b.ObjectBytes(h.Entries[0].Object); !ok {
		t.Fatal("the winner's object is gone")
	}
	if b.Len() != 1 {
		t.Fatalf("objects = %d, want only the winner's", b.Len())
	}
}

func TestPermissionErrorIsNotRetried(t *testing.T) {
	b := dstltest.NewBackend()
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op == dstltest.OpPut {
			return dstltest.Fault{Err: dstl.NewBackendError("put", "memory", name, dstl.ErrPermission)}
		}
		return dstltest.Fault{}
	})
	s := newStorage(t, b, testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	f, _ := w.Persist(context.Background(), 0, 1)
	if _, err := f.Wait(context.Background()); !errors.Is(err, dstl.ErrPermission) {
		t.Fatalf("err = %v, want ErrPermission", err)
	}
	if got := b.Counts()[dstltest.OpPut]; got != 1 {
		t.Fatalf("puts = %d, want 1", got)
	}
}

// TestBackpressure: past upload.max-in-flight, Persist and Append hold their
// callers (released when their context ends) and Available reports it.
func TestBackpressure(t *testing.T) {
	b := dstltest.NewBackend()
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op == dstltest.OpPut {
			return dstltest.Fault{Stall: true}
		}
		return dstltest.Fault{}
	})
	cfg := testConfig()
	cfg.UploadMaxInFlight = 100
	cfg.UploadTimeout = time.Hour
	s := newStorage(t, b, cfg)
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	big := make([]byte, 150)
	if err := w.Append(context.Background(), 0, big); err != nil {
		t.Fatal(err)
	}
	f1, err := w.Persist(context.Background(), 0, 1) // alone in flight: goes even though over the limit
	if err != nil {
		t.Fatal(err)
	}
	if got := s.InFlight(); got != 150 {
		t.Fatalf("in flight = %d, want 150", got)
	}
	select {
	case <-s.Available():
		t.Fatal("available while over the limit")
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := w.Append(ctx, 0, []byte("held")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Append over the limit = %v, want to be held until the deadline", err)
	}
	b.SetFault(nil)
	b.ReleaseStalls()
	if _, err := f1.Wait(context.Background()); err != nil {
		// The stalled attempt ended with an error; the hedge is an hour away,
		// so the upload's next attempt after the delay succeeds.
		t.Fatalf("persist: %v", err)
	}
	select {
	case <-s.Available():
	case <-time.After(10 * time.Second):
		t.Fatal("not available after the upload finished")
	}
	if got := s.InFlight(); got != 0 {
		t.Fatalf("in flight = %d after completion, want 0", got)
	}
	// The held change was not appended: the next persist has nothing new.
	h := persist(t, w, 0, 2)
	if len(h.Entries) != 1 {
		t.Fatalf("entries = %d, want 1", len(h.Entries))
	}
}

func TestPersistHeldUntilContextEnds(t *testing.T) {
	b := dstltest.NewBackend()
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault { return dstltest.Fault{Stall: true} })
	cfg := testConfig()
	cfg.UploadMaxInFlight = 100
	cfg.UploadTimeout = time.Hour
	s := newStorage(t, b, cfg)
	w1 := newWriter(t, s, "a", dstl.KeyGroupRange{Start: 0, End: 0})
	w2 := newWriter(t, s, "b", dstl.KeyGroupRange{Start: 1, End: 1})
	if err := w2.Append(context.Background(), 1, make([]byte, 80)); err != nil {
		t.Fatal(err)
	}
	if err := w1.Append(context.Background(), 0, make([]byte, 150)); err != nil {
		t.Fatal(err)
	}
	if _, err := w1.Persist(context.Background(), 0, 1); err != nil {
		t.Fatal(err) // nothing in flight: goes, taking the total past the limit
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := w2.Persist(ctx, 0, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Persist over the limit = %v, want held until the deadline", err)
	}
	b.SetFault(nil)
	b.ReleaseStalls()
	h := persist(t, w2, 0, 2) // the held sets were kept
	if len(h.Entries) != 1 || h.LogicalSize != 80 {
		t.Fatalf("handle = %+v", h)
	}
}

// putScript makes the nth put (1-based) behave as the script says; puts
// past the script succeed. It records when each put started.
func putScript(b *dstltest.Backend, script ...dstltest.Fault) func() []time.Time {
	var mu sync.Mutex
	var starts []time.Time
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op != dstltest.OpPut {
			return dstltest.Fault{}
		}
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, time.Now())
		if n := len(starts); n <= len(script) {
			return script[n-1]
		}
		return dstltest.Fault{}
	})
	return func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(starts)
	}
}

// TestStalledAttemptsDoNotHangForever: two attempts stall, the third fails:
// no attempt may start any more, and once the last one's timeout has passed
// the batch fails (the stalled ones are cancelled) instead of waiting
// forever; the next persist uploads the change sets again.
func TestStalledAttemptsDoNotHangForever(t *testing.T) {
	b := dstltest.NewBackend()
	putScript(b, dstltest.Fault{Stall: true}, dstltest.Fault{Stall: true}, dstltest.Fault{Err: errInjected})
	cfg := testConfig()
	cfg.UploadTimeout = 20 * time.Millisecond
	s := newStorage(t, b, cfg)
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	f, err := w.Persist(context.Background(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.Wait(ctx); !errors.Is(err, errInjected) {
		t.Fatalf("persist = %v, want the last attempt's error", err)
	}
	h := persist(t, w, 0, 2)
	if got := readAll(t, b, h, w.KeyGroups()); !slices.Equal(got, []string{"0:x"}) {
		t.Fatalf("read back %q", got)
	}
}

// TestRetryWaitsAfterErrorWhileHedging: attempt 1 stalls, its hedge
// (attempt 2) fails at once; attempt 3 waits upload.next-attempt-delay
// after that error even though attempt 1 is still running.
func TestRetryWaitsAfterErrorWhileHedging(t *testing.T) {
	b := dstltest.NewBackend()
	starts := putScript(b, dstltest.Fault{Stall: true}, dstltest.Fault{Err: errInjected})
	cfg := testConfig()
	cfg.UploadTimeout = 20 * time.Millisecond
	cfg.UploadNextAttemptDelay = 300 * time.Millisecond
	s := newStorage(t, b, cfg)
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	persist(t, w, 0, 1)
	st := starts()
	if len(st) != 3 {
		t.Fatalf("puts = %d, want 3", len(st))
	}
	if gap := st[2].Sub(st[1]); gap < cfg.UploadNextAttemptDelay {
		t.Fatalf("attempt 3 started %v after attempt 2 failed, want at least the next-attempt delay %v", gap, cfg.UploadNextAttemptDelay)
	}
}

// TestInFlightLimitIsExact: upload.max-in-flight bounds the bytes queued or
// uploading exactly. A persist whose task does not fit waits, a preemptive
// persist that does not fit is left for later, and only a task larger than
// the limit, alone in flight, goes past it.
func TestInFlightLimitIsExact(t *testing.T) {
	b := dstltest.NewBackend()
	b.SetFault(func(op dstltest.Op, _ string) dstltest.Fault { return dstltest.Fault{Stall: op == dstltest.OpPut} })
	const limit = 100
	cfg := testConfig()
	cfg.UploadMaxInFlight = limit
	cfg.UploadTimeout = time.Hour
	cfg.PreemptivePersistThreshold = 50
	s := newStorage(t, b, cfg)
	w1 := newWriter(t, s, "a", dstl.KeyGroupRange{Start: 0, End: 0})
	w2 := newWriter(t, s, "b", dstl.KeyGroupRange{Start: 1, End: 1})
	w3 := newWriter(t, s, "c", dstl.KeyGroupRange{Start: 2, End: 2})
	check := func(step string, want int64) {
		t.Helper()
		if got := s.InFlight(); got != want {
			t.Fatalf("%s: %d bytes in flight, want %d (limit %d)", step, got, want, limit)
		}
	}
	held := func(step string, w *dstl.Writer) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if _, err := w.Persist(ctx, 0, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: persist = %v, want it held until the deadline", step, err)
		}
	}
	mustAppend(t, w1, 0, strings.Repeat("a", 60)) // preemptive persist: fits
	check("after a preemptive persist that fits", 60)
	f1, err := w1.Persist(context.Background(), 0, 1) // reuses the uploading set
	if err != nil {
		t.Fatal(err)
	}
	check("after a persist reusing it", 60)
	mustAppend(t, w2, 1, strings.Repeat("b", 60)) // preemptive persist: 120 > 100
	check("after a preemptive persist that does not fit", 60)
	held("a persist that does not fit", w2)
	check("after a held persist", 60)
	mustAppend(t, w3, 2, strings.Repeat("c", 40))
	f3, err := w3.Persist(context.Background(), 0, 1) // 100: fits exactly
	if err != nil {
		t.Fatal(err)
	}
	check("after a persist that fits exactly", 100)

	b.SetFault(nil)
	b.ReleaseStalls()
	for _, f := range []*dstl.Future{f1, f3} {
		if _, err := f.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if h := persist(t, w2, 0, 2); h.LogicalSize != 60 {
		t.Fatalf("w2's held change set: handle %+v", h)
	}
	check("after the uploads", 0)

	// Alone in flight, a task larger than the limit goes.
	b.SetFault(func(op dstltest.Op, _ string) dstltest.Fault { return dstltest.Fault{Stall: op == dstltest.OpPut} })
	mustAppend(t, w3, 2, strings.Repeat("d", 150))
	check("after a preemptive persist larger than the limit", 150)
	b.SetFault(nil)
	b.ReleaseStalls()
	persist(t, w3, 0, 3)
}

// TestPermanentErrorsAreNotRetried: an error that another attempt cannot
// heal ends the upload at once, with no retry and no hedge: denied or
// missing (a put into a missing bucket) by the backend, classified
// permanent by it, or a TLS handshake with a plain-HTTP endpoint.
func TestPermanentErrorsAreNotRetried(t *testing.T) {
	tlsToHTTP := &url.Error{Op: "Put", URL: "https://127.0.0.1:9000/bucket/x", Err: tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}}
	for _, tc := range []struct {
		name  string
		cause error
	}{
		{"permission", dstl.ErrPermission},
		{"not found", dstl.ErrNotFound},
		{"classified permanent", fmt.Errorf("no credentials configured: %w", dstl.ErrPermanent)},
		{"invalid config", fmt.Errorf("%w: endpoint", dstl.ErrInvalidConfig)},
		{"https to plain http", tlsToHTTP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
				if op == dstltest.OpPut {
					return dstltest.Fault{Err: dstl.NewBackendError("put", "memory", name, tc.cause)}
				}
				return dstltest.Fault{}
			})
			cfg := testConfig()
			cfg.UploadTimeout = 10 * time.Millisecond // a hedge would come soon
			s := newStorage(t, b, cfg)
			w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
			mustAppend(t, w, 0, "x")
			f, err := w.Persist(context.Background(), 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Wait(context.Background())
			if !errors.Is(err, tc.cause) && !errors.As(err, new(tls.RecordHeaderError)) {
				t.Fatalf("err = %v, want the cause %v", err, tc.cause)
			}
			time.Sleep(30 * time.Millisecond) // room for a wrong hedge or retry
			if got := b.Counts()[dstltest.OpPut]; got != 1 {
				t.Fatalf("puts = %d, want 1", got)
			}
		})
	}
}

// refusingBackend stands for a client that retries a refused connection
// on its own until the attempt's context ends, then reports both.
type refusingBackend struct{ *dstltest.Backend }

func (b refusingBackend) Put(ctx context.Context, name string, _ io.ReaderAt, _ int64) error {
	<-ctx.Done()
	return dstl.NewBackendError("put", "memory", name,
		fmt.Errorf("dial tcp 127.0.0.1:9: connect: connection refused (retried until: %w)", ctx.Err()))
}

// TestFailedUploadNamesBackendAndCause: when every attempt ran past
// upload.timeout, the error names the backend and what the last attempt
// ended with, not only the timeout.
func TestFailedUploadNamesBackendAndCause(t *testing.T) {
	b := refusingBackend{dstltest.NewBackend()}
	cfg := testConfig()
	cfg.UploadTimeout = 20 * time.Millisecond
	cfg.UploadMaxAttempts = 2
	s := newStorage(t, b, cfg)
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	f, err := w.Persist(context.Background(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = f.Wait(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want it to wrap context.DeadlineExceeded", err)
	}
	for _, want := range []string{`to "memory"`, "after 2 attempts", "upload.timeout (20ms)", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
