package backends

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestProbeEndsOnce: a probe of the unanswered-read hold whose caller gave
// up is ended by its answer; another call may then become the probe, and
// the end of the first call (its deferred endProbe) must not end that new
// probe, or a third call would be let through while it runs.
func TestProbeEndsOnce(t *testing.T) {
	const hold = time.Millisecond
	b := New("internal", nil, Policy{MaxAttempts: 1, UnansweredHold: hold})
	ctx := t.Context()
	gaveUp, cancel := context.WithCancel(ctx)
	cancel()
	timeout := fmt.Errorf("no answer: %w", context.DeadlineExceeded)

	none, err := b.admit(ctx, "get", "x")
	if err != nil {
		t.Fatal(err)
	}
	b.noteAnswer(ctx, "get", none, timeout, timeout) // the hold starts
	time.Sleep(5 * hold)
	first, err := b.admit(ctx, "get", "x")
	if err != nil || first == none {
		t.Fatalf("the call after the hold: probe %v, %v; want the probe", first, err)
	}
	b.noteAnswer(gaveUp, "get", first, context.Canceled, context.Canceled) // no news: the hold goes on
	second, err := b.admit(ctx, "get", "x")
	if err != nil || second == none {
		t.Fatalf("the call after the first probe's answer: probe %v, %v; want the probe", second, err)
	}
	b.endProbe(first) // the first call returns
	if p, err := b.admit(ctx, "get", "x"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a call while the second probe runs: probe %v, %v; want ErrUnavailable", p, err)
	}
	b.noteAnswer(ctx, "get", second, nil, nil) // an answer ends the hold
	b.endProbe(second)
	if p, err := b.admit(ctx, "get", "x"); err != nil || p != none {
		t.Fatalf("a call after the answer: probe %v, %v; want no probe", p, err)
	}
}
