package dstl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

// putBehaviour is how one Put of a rateBackend treats its body.
type putBehaviour struct {
	rate  int64 // bytes per second at which the body is read; 0: not read at all (a stall)
	err   error // returned once the body was read (or, for a stall, never)
	stall bool  // read nothing and block until the context ends
	// whole: read the whole body at once, then "send" it at rate,
	// reporting the bytes sent through driver.ReportProgress.
	whole bool
}

// rateBackend reads the body of each Put at the rate its script says, as
// an SDK sending it over a slow link would, then stores it in the
// in-memory backend.
type rateBackend struct {
	*dstltest.Backend
	mu     sync.Mutex
	script []putBehaviour // of the nth Put at n-1; the last one repeats
	starts []time.Time
}

func newRateBackend(script ...putBehaviour) *rateBackend {
	return &rateBackend{Backend: dstltest.NewBackend(), script: script}
}

func (b *rateBackend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	b.mu.Lock()
	n := len(b.starts)
	b.starts = append(b.starts, time.Now())
	pb := b.script[min(n, len(b.script)-1)]
	b.mu.Unlock()
	if pb.stall {
		<-ctx.Done()
		return fmt.Errorf("put %s: %w", name, ctx.Err())
	}
	buf := make([]byte, size)
	if pb.whole {
		// Read the whole body at once, as a backend that buffers it does.
		if _, err := body.ReadAt(buf, 0); err != nil {
			return err
		}
	}
	// The pace follows a schedule from the start (not a pause per chunk),
	// so that a busy machine's delays do not add up to a slower rate.
	chunk := min(32<<10, max(1, pb.rate/50)) // a read every 20 ms at most
	begin := time.Now()
	for off := int64(0); off < size; {
		m := min(chunk, size-off)
		if !pb.whole {
			if _, err := body.ReadAt(buf[off:off+m], off); err != nil {
				return err
			}
		}
		off += m
		select {
		case <-time.After(time.Until(begin.Add(time.Duration(off) * time.Second / time.Duration(pb.rate)))):
		case <-ctx.Done():
			return fmt.Errorf("put %s after %d of %d bytes: %w", name, off, size, ctx.Err())
		}
		if pb.whole {
			driver.ReportProgress(ctx, m)
		}
	}
	if pb.err != nil {
		return pb.err
	}
	return b.Backend.Put(ctx, name, bytes.NewReader(buf), size)
}

func (b *rateBackend) putStarts() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.starts...)
}

// persistBig appends one change of size bytes and persists it.
func persistBig(t *testing.T, s *dstl.Storage, size int) (dstl.Handle, error) {
	t.Helper()
	w := newWriter(t, s, "op", dstl.KeyGroupRange{Start: 0, End: 0})
	if err := w.Append(context.Background(), 0, bytes.Repeat([]byte{'x'}, size)); err != nil {
		t.Fatal(err)
	}
	f, err := w.Persist(context.Background(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := f.Wait(ctx)
	return res.Remote, err
}

// TestSlowUploadSucceedsWithDefaults: with the default settings, a backend
// delivering 1 MiB/s uploads a 16 MiB object in one attempt (about 16 s),
// where upload.timeout (1 s) × upload.max-attempts (3) is far less.
func TestSlowUploadSucceedsWithDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 16 s")
	}
	b := newRateBackend(putBehaviour{rate: 1 << 20})
	s := newStorage(t, b, dstl.DefaultConfig("memory"))
	if _, err := persistBig(t, s, 16<<20); err != nil {
		t.Fatalf("persist of 16 MiB at 1 MiB/s: %v", err)
	}
	if got := len(b.putStarts()); got != 1 {
		t.Fatalf("puts = %d, want 1: a progressing attempt is not hedged", got)
	}
}

// TestSentBytesAreProgress: a backend that reads the whole body at once
// and then sends it at 1 MiB/s, reporting the bytes sent through
// driver.ReportProgress, is judged by what it sent: with the default
// settings a 16 MiB object goes in one attempt (about 16 s), and at scale
// too. Judged by its body reads, it was hedged after upload.timeout.
func TestSentBytesAreProgress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration // 0: the default
		size    int
		long    bool
	}{
		{"defaults, 16 MiB", 0, 16 << 20, true},
		// 500 ms leaves room for a busy machine to starve the goroutine
		// that reports progress; judged by its body reads (all at once),
		// the 1 s upload would still be hedged.
		{"scaled, 1 MiB", 500 * time.Millisecond, 1 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.long && testing.Short() {
				t.Skip("takes about 16 s")
			}
			b := newRateBackend(putBehaviour{rate: 1 << 20, whole: true})
			cfg := dstl.DefaultConfig("memory")
			if tc.timeout > 0 {
				cfg.UploadTimeout = tc.timeout
			}
			s := newStorage(t, b, cfg)
			if _, err := persistBig(t, s, tc.size); err != nil {
				t.Fatalf("persist of %d bytes at 1 MiB/s: %v", tc.size, err)
			}
			if got := len(b.putStarts()); got != 1 {
				t.Fatalf("puts = %d, want 1: an attempt that keeps sending is not hedged", got)
			}
		})
	}
}

// TestTrickleIsGivenUp: a backend that reads its body at 1000 B/s, far
// below driver.MinThroughput, is hedged after about upload.timeout
// however steadily it reads, and with every attempt trickling the persist
// fails within about upload.max-attempts × upload.timeout, saying why.
func TestTrickleIsGivenUp(t *testing.T) {
	b := newRateBackend(putBehaviour{rate: 1000})
	cfg := dstl.DefaultConfig("memory")
	s := newStorage(t, b, cfg)
	begin := time.Now()
	_, err := persistBig(t, s, 16<<10) // 16 s at 1000 B/s
	took := time.Since(begin)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "below 256 KiB/s") {
		t.Fatalf("persist = %v, want a give-up for a rate below 256 KiB/s", err)
	}
	if n := len(b.putStarts()); n != cfg.UploadMaxAttempts {
		t.Fatalf("puts = %d, want %d", n, cfg.UploadMaxAttempts)
	}
	if bound := time.Duration(cfg.UploadMaxAttempts)*cfg.UploadTimeout + 2*time.Second; took > bound {
		t.Fatalf("persist failed after %v, want within %v", took, bound)
	}
}

// TestProgressingAttemptIsNotGivenUp: the same at scale, and after two
// attempts stalled: attempt 3 runs for many times upload.timeout while
// every attempt has started, and wins because it keeps progressing.
func TestProgressingAttemptIsNotGivenUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script []putBehaviour
		puts   int
	}{
		{"slow", []putBehaviour{{rate: 1 << 20}}, 1},
		{"stalled, stalled, slow", []putBehaviour{{stall: true}, {stall: true}, {rate: 1 << 20}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newRateBackend(tc.script...)
			cfg := dstl.DefaultConfig("memory")
			cfg.UploadTimeout = 200 * time.Millisecond // slack: the reads come every 31 ms
			s := newStorage(t, b, cfg)
			h, err := persistBig(t, s, 1<<20) // 1 s: 5 × upload.timeout
			if err != nil {
				t.Fatalf("persist: %v", err)
			}
			if got := len(b.putStarts()); got != tc.puts {
				t.Fatalf("puts = %d, want %d", got, tc.puts)
			}
			if got := readAll(t, b, h, dstl.KeyGroupRange{Start: 0, End: 0}); len(got) != 1 || len(got[0]) != 2+1<<20 {
				t.Fatalf("read back %d changes", len(got))
			}
		})
	}
}

// TestStalledAttemptIsHedgedInBoundedTime: with the default settings, a
// Put that moves no bytes gets another attempt beside it after
// upload.timeout (1 s), which succeeds; when every Put stalls, the persist
// fails once the last attempt has stalled for upload.timeout.
func TestStalledAttemptIsHedgedInBoundedTime(t *testing.T) {
	cfg := dstl.DefaultConfig("memory")
	t.Run("first stalls", func(t *testing.T) {
		b := newRateBackend(putBehaviour{stall: true}, putBehaviour{rate: 1 << 30})
		s := newStorage(t, b, cfg)
		if _, err := persistBig(t, s, 100); err != nil {
			t.Fatalf("persist: %v", err)
		}
		starts := b.putStarts()
		if len(starts) != 2 {
			t.Fatalf("puts = %d, want 2", len(starts))
		}
		if d := starts[1].Sub(starts[0]); d < cfg.UploadTimeout || d > cfg.UploadTimeout+500*time.Millisecond {
			t.Fatalf("second attempt started %v after the first, want about upload.timeout (%v)", d, cfg.UploadTimeout)
		}
	})
	t.Run("all stall", func(t *testing.T) {
		b := newRateBackend(putBehaviour{stall: true})
		s := newStorage(t, b, cfg)
		begin := time.Now()
		_, err := persistBig(t, s, 100)
		took := time.Since(begin)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "upload.timeout") {
			t.Fatalf("persist = %v, want a stall (context.DeadlineExceeded)", err)
		}
		if n := len(b.putStarts()); n != cfg.UploadMaxAttempts {
			t.Fatalf("puts = %d, want %d", n, cfg.UploadMaxAttempts)
		}
		bound := time.Duration(cfg.UploadMaxAttempts)*cfg.UploadTimeout + time.Second
		if took > bound {
			t.Fatalf("persist failed after %v, want within %v", took, bound)
		}
	})
}

// TestAllAttemptsFailReportsLastError: attempts that fail after a slow
// upload each, with another error each, fail the persist with the last
// one, naming the backend and the attempts.
func TestAllAttemptsFailReportsLastError(t *testing.T) {
	errs := []error{errors.New("error 1"), errors.New("error 2"), errors.New("error 3")}
	b := newRateBackend(
		putBehaviour{rate: 1 << 20, err: errs[0]},
		putBehaviour{rate: 1 << 20, err: errs[1]},
		putBehaviour{rate: 1 << 20, err: errs[2]},
	)
	cfg := dstl.DefaultConfig("memory")
	cfg.UploadTimeout = 50 * time.Millisecond
	cfg.UploadNextAttemptDelay = 10 * time.Millisecond
	s := newStorage(t, b, cfg)
	_, err := persistBig(t, s, 256<<10) // 0.25 s: 5 × upload.timeout
	if !errors.Is(err, errs[2]) || errors.Is(err, errs[0]) || errors.Is(err, errs[1]) {
		t.Fatalf("persist = %v, want the last attempt's error only", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"memory"`) || !strings.Contains(msg, "after 3 attempts") {
		t.Fatalf("error %q does not name the backend and the attempts", msg)
	}
	if n := len(b.putStarts()); n != 3 {
		t.Fatalf("puts = %d, want 3", n)
	}
}
