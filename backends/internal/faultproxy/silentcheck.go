package faultproxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
)

// CheckSilentCalls calls b's Get (and List, with list) against the silent
// endpoint s and fails t unless each call fails within bound, as a timeout,
// with an error that names the endpoint. The backends' deadline tests share
// it.
func CheckSilentCalls(t *testing.T, b backends.Backend, s *Silent, bound time.Duration, list bool) {
	t.Helper()
	calls := map[string]func(ctx context.Context) error{
		"get": func(ctx context.Context) error {
			rc, err := b.Get(ctx, "x.dstl", 0, -1)
			if err == nil {
				rc.Close()
			}
			return err
		},
	}
	if list {
		calls["list"] = func(ctx context.Context) error {
			return b.List(ctx, "", func(backends.ObjectInfo) error { return nil })
		}
	}
	for op, call := range calls {
		start := time.Now()
		err := call(context.Background())
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
		var to interface{ Timeout() bool }
		if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &to) && to.Timeout()) {
			t.Errorf("%s: error %v is no timeout", op, err)
		}
		t.Logf("%s failed after %v: %v", op, took.Round(time.Millisecond), err)
	}
}
