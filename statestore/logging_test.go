package statestore

import (
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

// TestLoggingSwitchedOnDuringPut: a put that started while logging was off
// and took the store's lock after SetLogging(true) logs its value, never a
// change without one. The test holds the lock while it switches logging on.
func TestLoggingSwitchedOnDuringPut(t *testing.T) {
	cfg := dstl.DefaultConfig("mem://test")
	cfg.JobID = "job"
	storage, err := dstl.New(cfg, dstltest.NewBackend())
	if err != nil {
		t.Fatal(err)
	}
	defer storage.Close()
	w, err := storage.NewWriter("op", dstl.KeyGroupRange{Start: 0, End: DefaultMaxParallelism - 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	kv, _ := NewKeyValueStore("kv", w, StringCodec{}, StringCodec{})
	win, _ := NewWindowStore("win", w, StringCodec{}, StringCodec{}, 100)
	ver, _ := NewVersionedStore("ver", w, StringCodec{}, StringCodec{}, 100)
	for _, tc := range []struct {
		store internalStore
		put   func() error
	}{
		{kv, func() error { return kv.Put("k", "v") }},
		{win, func() error { return win.Put("k", 1, "v") }},
		{ver, func() error { return ver.Put("k", "v", 1) }},
	} {
		t.Run(string(tc.store.Kind()), func(t *testing.T) {
			tc.store.SetLogging(false)
			b := tc.store.base()
			b.mu.Lock()
			done := make(chan error, 1)
			go func() { done <- tc.put() }()
			time.Sleep(20 * time.Millisecond) // the put checks logging and waits for the lock
			tc.store.SetLogging(true)
			b.mu.Unlock()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.store.TakeChanges() {
				if c.KeyGroup != dstl.MetaKeyGroup && !c.Tombstone && c.Value == nil {
					t.Fatalf("logged a put without its value: %+v", c)
				}
			}
		})
	}
}
