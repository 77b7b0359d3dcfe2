package backends

import (
	"context"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/driver"
)

var (
	errTransient = errors.New("transient")
	errPermanent = errors.New("permanent")
)

// classifier is a driver that only classifies: errTransient is transient.
type classifier struct{ driver.Bucket }

func (classifier) Classify(err error) driver.Code {
	if errors.Is(err, errTransient) {
		return driver.Transient
	}
	return driver.Unknown
}

func run(ctx context.Context, p Policy, fn func(ctx context.Context) error) error {
	b := New("test", classifier{}, p)
	return (&runner{b: b, op: "test"}).Do(ctx, 0, fn)
}

func TestRunnerDo(t *testing.T) {
	fast := Policy{Timeout: 50 * time.Millisecond, MaxAttempts: 4, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	for _, tc := range []struct {
		name      string
		results   []error // per attempt; past the end: nil
		stallAt   int     // 1-based attempt that waits for its context; 0: none
		wantCalls int
		want      error
	}{
		{"first succeeds", nil, 0, 1, nil},
		{"transient then success", []error{errTransient, errTransient}, 0, 3, nil},
		{"permanent stops", []error{errPermanent}, 0, 1, errPermanent},
		{"attempts run out", []error{errTransient, errTransient, errTransient, errTransient, errTransient}, 0, 4, errTransient},
		{"stalled attempt times out and is retried", nil, 1, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := run(context.Background(), fast, func(ctx context.Context) error {
				calls++
				if calls == tc.stallAt {
					<-ctx.Done()
					return ctx.Err()
				}
				if calls <= len(tc.results) {
					return tc.results[calls-1]
				}
				return nil
			})
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Do = %v, want %v", err, tc.want)
			}
			if calls != tc.wantCalls {
				t.Fatalf("calls = %d, want %d", calls, tc.wantCalls)
			}
		})
	}
}

func TestRunnerStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := run(ctx, Policy{MaxAttempts: 10, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}, func(context.Context) error {
		calls++
		cancel()
		return errTransient
	})
	if err == nil || calls != 1 {
		t.Fatalf("Do = %v after %d calls, want an error after 1", err, calls)
	}
}

// netTimeout is a transport's timeout, such as net/http's wait for the
// answer's headers.
type netTimeout struct{}

func (netTimeout) Error() string   { return "net/http: timeout awaiting response headers" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

// TestRunnerBoundsTimedOutAttempts: attempts that time out count against
// TimeoutAttempts, whether the attempt's context ran out (and the
// transport called it a cancellation) or the transport timed out; the
// error then says so and matches context.DeadlineExceeded.
func TestRunnerBoundsTimedOutAttempts(t *testing.T) {
	p := Policy{Timeout: 20 * time.Millisecond, MaxAttempts: 5, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, TimeoutAttempts: 2}
	for _, tc := range []struct {
		name      string
		attempt   func(ctx context.Context) error
		wantCalls int
		wantText  string
		deadline  bool // whether the error matches context.DeadlineExceeded
	}{
		{"attempt context, reported as canceled", func(ctx context.Context) error {
			<-ctx.Done()
			return context.Canceled
		}, 2, "giving up after 2 attempts that timed out: no answer within 20ms: context deadline exceeded", true},
		{"transport timeout", func(context.Context) error { return netTimeout{} }, 2, "giving up after 2 attempts that timed out: net/http: timeout awaiting response headers", false},
		{"timeouts among other errors", func() func(context.Context) error {
			n := 0
			return func(context.Context) error {
				n++
				if n%2 == 1 {
					return errTransient
				}
				return netTimeout{}
			}
		}(), 4, "giving up after 2 attempts", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := run(context.Background(), p, func(ctx context.Context) error {
				calls++
				return tc.attempt(ctx)
			})
			if calls != tc.wantCalls || err == nil || !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("%d calls, err %v; want %d calls and an error containing %q", calls, err, tc.wantCalls, tc.wantText)
			}
			if !isTimeout(err) {
				t.Fatalf("err %v is no timeout", err)
			}
			if tc.deadline && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err %v does not match context.DeadlineExceeded", err)
			}
		})
	}
}

func TestPermanent(t *testing.T) {
	if permanent(nil) != nil {
		t.Fatal("permanent(nil) != nil")
	}
	err := permanent(errTransient)
	if !errors.Is(err, ErrPermanent) || !errors.Is(err, errTransient) || err.Error() != errTransient.Error() {
		t.Fatalf("permanent(%v) = %v: want it to match ErrPermanent and the error, and read as it", errTransient, err)
	}
	if again := permanent(err); again != err {
		t.Fatalf("permanent wrapped a permanent error again")
	}
}

// TestForBody: a request's timeout grows by its body at MinThroughput; no
// timeout stays none, and one past any clock becomes none.
func TestForBody(t *testing.T) {
	for _, tc := range []struct {
		timeout time.Duration
		size    int64
		want    time.Duration
	}{
		{30 * time.Second, 0, 30 * time.Second},
		{30 * time.Second, driver.MinThroughput, 31 * time.Second},
		{30 * time.Second, 16 << 20, 94 * time.Second},
		{time.Second, driver.MinThroughput / 2, 1500 * time.Millisecond},
		{0, 16 << 20, 0},
		{time.Second, math.MaxInt64, 0},
	} {
		p := Policy{Timeout: tc.timeout, MaxAttempts: 3}
		got := p.ForBody(tc.size)
		if got.Timeout != tc.want || got.MaxAttempts != 3 {
			t.Errorf("Timeout %v, body %d: ForBody = %+v, want timeout %v", tc.timeout, tc.size, got, tc.want)
		}
	}
}

// TestSlowBodyIsNotCut: a request whose body goes slowly, but faster than
// MinThroughput, is not cut by a request timeout shorter than its transfer:
// the runner grows the timeout with the body.
func TestSlowBodyIsNotCut(t *testing.T) {
	const size = 64 << 10 // at 512 KiB/s: 125 ms, over the 50 ms timeout
	b := New("test", classifier{}, Policy{Timeout: 50 * time.Millisecond, MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	attempts := 0
	err := (&runner{b: b, op: "put"}).Do(t.Context(), size, func(ctx context.Context) error {
		attempts++
		for sent := 0; sent < size; sent += 8 << 10 {
			select {
			case <-time.After(time.Second * (8 << 10) / (512 << 10)):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	if err != nil || attempts != 1 {
		t.Fatalf("Do = %v after %d attempts, want success at the first", err, attempts)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
		want string
	}{
		{"default", DefaultPolicy, ""},
		{"no retries", NoRetries, ""},
		{"negative timeout", Policy{Timeout: -1, MaxAttempts: 1}, "request timeout"},
		{"no attempts", Policy{}, "max attempts 0"},
		{"backoff reversed", Policy{MaxAttempts: 1, InitialBackoff: 2, MaxBackoff: 1}, "backoff"},
		{"negative response timeout", Policy{MaxAttempts: 1, ResponseTimeout: -1}, "response timeout"},
		{"negative timeout attempts", Policy{MaxAttempts: 1, TimeoutAttempts: -1}, "timeout attempts"},
		{"no unanswered hold", Policy{MaxAttempts: 1, UnansweredHold: 0}, ""},
		{"negative unanswered hold", Policy{MaxAttempts: 1, UnansweredHold: -1}, "unanswered hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRunnerAfterBodyFailure: the request whose body failed is not
// retried; a later request of the same Put that sends no body (such as the
// abort of a multipart upload) is retried as usual.
func TestRunnerAfterBodyFailure(t *testing.T) {
	b := New("test", classifier{}, Policy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	body := driver.NewBody(strings.NewReader("ab"), 4) // ends short
	rt := &runner{b: b, op: "put", body: body}
	calls := 0
	err := rt.Do(t.Context(), 4, func(context.Context) error {
		calls++
		if _, err := body.Bytes(0, 4); err != nil {
			return errTransient // the transport's view of the cut body
		}
		return nil
	})
	if calls != 1 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("%d calls, err %v: want 1 call failing with the body's error", calls, err)
	}
	calls = 0
	err = rt.Do(t.Context(), 0, func(context.Context) error {
		if calls++; calls < 3 {
			return errTransient
		}
		return nil
	})
	if calls != 3 || err != nil {
		t.Fatalf("abort: %d calls, err %v; want success at the third", calls, err)
	}
}
