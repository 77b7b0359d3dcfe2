package faultproxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
)

// CheckSilentCalls calls b's Get (and then List, with list) against the
// silent endpoint s and fails t unless the first call fails within bound,
// as a timeout, with an error that names the endpoint. Each later call
// does the same when b's policy has no hold after an unanswered call
// ([backends.Policy.UnansweredHold]); with a hold, it fails at once with
// [backends.ErrUnavailable], quoting the first call's error (which names
// the endpoint), without a request. The backends' deadline tests share it.
func CheckSilentCalls(t *testing.T, b backends.Backend, s *Silent, bound time.Duration, list bool) {
	t.Helper()
	hold := false
	if p, ok := b.(interface{ Policy() backends.Policy }); ok {
		hold = p.Policy().UnansweredHold > 0
	}
	type call struct {
		op string
		fn func(ctx context.Context) error
	}
	calls := []call{{"get", func(ctx context.Context) error {
		rc, err := b.Get(ctx, "x.dstl", 0, -1)
		if err == nil {
			rc.Close()
		}
		return err
	}}}
	if list {
		calls = append(calls, call{"list", func(ctx context.Context) error {
			return b.List(ctx, "", func(backends.ObjectInfo) error { return nil })
		}})
	}
	for i, c := range calls {
		op := c.op
		conns := s.Connections()
		start := time.Now()
		err := c.fn(context.Background())
		took := time.Since(start)
		if err == nil {
			t.Fatalf("%s succeeded", op)
		}
		if took > bound {
			t.Errorf("%s took %v, want at most %v", op, took, bound)
		}
		if !strings.Contains(err.Error(), s.Addr()) {
			t.Errorf("%s: error %q does not name the endpoint %s", op, err, s.Addr())
		}
		t.Logf("%s failed after %v: %v", op, took.Round(time.Millisecond), err)
		if i > 0 && hold {
			if !errors.Is(err, backends.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s during the hold: error %v, want ErrUnavailable and no timeout", op, err)
			}
			if n := s.Connections() - conns; n != 0 {
				t.Errorf("%s during the hold made %d connections, want none", op, n)
			}
			continue
		}
		var to interface{ Timeout() bool }
		if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &to) && to.Timeout()) {
			t.Errorf("%s: error %v is no timeout", op, err)
		}
	}
}
