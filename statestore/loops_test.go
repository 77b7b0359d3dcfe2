package statestore_test

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
)

// TestLoopsReadAtLoopStart: in memory as on disk, a loop reads the store as
// it is when the loop begins (not when the method returned the sequence),
// each loop anew; once the store is closed, its loops yield nothing, Len is
// 0 and Snapshot fails with ErrClosed.
func TestLoopsReadAtLoopStart(t *testing.T) {
	for _, disk := range []bool{false, true} {
		t.Run(fmt.Sprintf("disk=%v", disk), func(t *testing.T) {
			cfg := statestore.Config{}
			if disk {
				cfg.Dir = t.TempDir()
			}
			o := newOperator(t, newStorage(t, dstltest.NewBackend()), "op-0", allGroups, cfg)
			all, win, ver := o.kv.All(), o.win.All(), o.ver.All()
			prefix, err := o.kv.PrefixScan("a")
			if err != nil {
				t.Fatal(err)
			}
			fetch, err := o.win.Fetch("a", 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			if o.kv.Put("a", "1") != nil || o.win.Put("a", 10, 1) != nil || o.ver.Put("a", "1", 10) != nil {
				t.Fatal("put")
			}
			if got := maps.Collect(all); len(got) != 1 || got["a"] != "1" {
				t.Errorf("All, taken before the put: %v", got)
			}
			if got := maps.Collect(prefix); len(got) != 1 {
				t.Errorf("PrefixScan, taken before the put: %v", got)
			}
			if got := maps.Collect(fetch); len(got) != 1 || got[10] != 1 {
				t.Errorf("Fetch, taken before the put: %v", got)
			}
			if n := len(maps.Collect(win)); n != 1 {
				t.Errorf("window All, taken before the put: %d windows", n)
			}
			if n := len(maps.Collect(ver)); n != 1 {
				t.Errorf("versioned All, taken before the put: %d keys", n)
			}
			if o.kv.Put("b", "2") != nil {
				t.Fatal("put")
			}
			if got := maps.Collect(all); len(got) != 2 {
				t.Errorf("All, looped again: %v", got)
			}

			o.cp.Close()
			if n := len(maps.Collect(o.kv.All())) + len(maps.Collect(o.win.All())) + len(maps.Collect(o.ver.All())); n != 0 {
				t.Errorf("loops of closed stores yield %d entries", n)
			}
			if n := o.kv.Len() + o.win.Len() + o.ver.Len(); n != 0 {
				t.Errorf("closed stores' Len sum to %d", n)
			}
			for _, s := range []statestore.Store{o.kv, o.win, o.ver} {
				if _, err := s.Snapshot(); !errors.Is(err, statestore.ErrClosed) {
					t.Errorf("%s: Snapshot of a closed store: %v", s.Name(), err)
				}
			}
			if !errors.Is(o.kv.Err(), statestore.ErrClosed) {
				t.Errorf("key-value store's Err after a loop once closed: %v", o.kv.Err())
			}
		})
	}
}
