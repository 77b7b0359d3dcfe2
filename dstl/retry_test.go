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

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/uploader"
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
	uploader.Uploader
	calls   atomic.Int64
	release chan struct{}
	done    chan string
}

func (u *lateUploader) Upload(ctx context.Context, tasks []*uploader.Task) (*uploader.Output, error) {
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
	s := newStorage(t, b, cfg, dstl.WithUploader(func(u uploader.Uploader) uploader.Uploader { lu.Uploader = u; return lu }))
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
			return dstltest.Fault{Err: backends.NewError("put", "memory", name, backends.ErrPermission)}
		}
		return dstltest.Fault{}
	})
	s := newStorage(t, b, testConfig())
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	mustAppend(t, w, 0, "x")
	f, _ := w.Persist(context.Background(), 0, 1)
	if _, err := f.Wait(context.Background()); !errors.Is(err, backends.ErrPermission) {
		t.Fatalf("err = %v, want backends.ErrPermission", err)
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

// TestPermanentErrorsAreNotRetried: an error that another attempt cannot
// heal ends the upload at once, with no retry and no hedge: denied by the
// backend, classified permanent by it (a put into a missing bucket), a bad
// configuration, or a TLS handshake with a plain-HTTP endpoint.
func TestPermanentErrorsAreNotRetried(t *testing.T) {
	tlsToHTTP := &url.Error{Op: "Put", URL: "https://127.0.0.1:9000/bucket/x", Err: tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}}
	for _, tc := range []struct {
		name  string
		cause error
	}{
		{"permission", backends.ErrPermission},
		{"missing bucket", fmt.Errorf("bucket %q does not exist: %w: %w", "b", backends.ErrNotFound, backends.ErrPermanent)},
		{"classified permanent", fmt.Errorf("no credentials configured: %w", backends.ErrPermanent)},
		{"invalid config", fmt.Errorf("%w: endpoint", dstl.ErrInvalidConfig)},
		{"https to plain http", tlsToHTTP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
				if op == dstltest.OpPut {
					return dstltest.Fault{Err: backends.NewError("put", "memory", name, tc.cause)}
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
	return backends.NewError("put", "memory", name,
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
	if errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v matches context.Canceled: nobody cancelled the upload, it timed out", err)
	}
	for _, want := range []string{`to "memory"`, "after 2 attempts", "upload.timeout (20ms)", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestInFlightBound: upload.max-in-flight is passed by at most one upload.
// Writers append flat out over a slow backend, each past the preemptive
// threshold every few changes; after every append the bytes in flight stay
// below the limit plus the largest task (one threshold plus one change),
// however many writers were let through at once. Appends are held at the
// limit, so the writers' unuploaded bytes stay bounded too.
func TestInFlightBound(t *testing.T) {
	const (
		limit     = 1000
		threshold = 300
		change    = 100
		writers   = 8
		appends   = 60
	)
	b := dstltest.NewBackend()
	b.SetFault(func(op dstltest.Op, _ string) dstltest.Fault {
		if op == dstltest.OpPut {
			return dstltest.Fault{Delay: 3 * time.Millisecond}
		}
		return dstltest.Fault{}
	})
	cfg := testConfig()
	cfg.UploadMaxInFlight = limit
	cfg.PreemptivePersistThreshold = threshold
	cfg.UploadTimeout = time.Hour
	s := newStorage(t, b, cfg)
	var peak atomic.Int64
	var wg sync.WaitGroup
	for i := range writers {
		w := newWriter(t, s, "w"+string(rune('a'+i)), dstl.KeyGroupRange{Start: i, End: i})
		wg.Go(func() {
			data := strings.Repeat("x", change)
			for range appends {
				if err := w.Append(context.Background(), i, []byte(data)); err != nil {
					t.Error(err)
					return
				}
				for n := s.InFlight(); ; {
					old := peak.Load()
					if n <= old || peak.CompareAndSwap(old, n) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if bound := int64(limit + threshold + change); peak.Load() >= bound {
		t.Fatalf("%d bytes in flight at the peak, want below %d (limit %d + one task of at most %d)",
			peak.Load(), bound, limit, threshold+change)
	}
	if peak.Load() < limit {
		t.Fatalf("peak %d bytes in flight never reached the limit %d: the test did not load the storage", peak.Load(), limit)
	}
}
