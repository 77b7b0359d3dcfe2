package statestore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
)

// TestCloseDuringMaterialize: Close while a materialisation that the
// program called is uploading cancels it and waits for it, so that the
// stores' database closes with nothing reading it; the materialisation
// fails and nothing it wrote stays on the backend.
func TestCloseDuringMaterialize(t *testing.T) {
	ctx := context.Background()
	b := dstltest.NewBackend()
	o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{Dir: t.TempDir()})
	fillKV(t, o, 3000, 0)
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op == dstltest.OpPut && strings.HasSuffix(name, ".sst") {
			return dstltest.Fault{Stall: true} // until its context is done
		}
		return dstltest.Fault{}
	})
	done := make(chan error, 1)
	go func() { done <- o.cp.Materialize(ctx) }()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := b.WaitStalled(wctx, 1); err != nil {
		t.Fatal(err)
	}
	cerr := make(chan error, 1)
	go func() { cerr <- o.cp.Close() }()
	select {
	case err := <-cerr:
		if err != nil {
			t.Errorf("Close during a materialisation: %v", err)
		}
	case <-wctx.Done():
		b.ReleaseStalls()
		t.Fatal("Close did not return while a materialisation was stalled")
	}
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, context.Canceled) {
			t.Errorf("the materialisation Close interrupted: %v, want a cancellation", err)
		}
	case <-time.After(10 * time.Second):
		b.ReleaseStalls()
		t.Fatalf("the materialisation still runs after Close returned: %v", <-done)
	}
	if objs := snapshotObjects(b); len(objs) != 0 {
		t.Errorf("objects left by the interrupted materialisation: %q", objs)
	}
}
