package statestore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
)

// An operator counts words in a key-value store, checkpoints, "crashes",
// and a new instance restores the checkpoint.
func Example() {
	ctx := context.Background()
	backend := dstltest.NewBackend() // or dstl.Open with a base path
	cfg := dstl.DefaultConfig("mem://example")
	storage, err := dstl.New(cfg, backend)
	if err != nil {
		log.Fatal(err)
	}
	defer storage.Close()

	open := func() (*statestore.Checkpointer, *statestore.KeyValueStore[string, int64]) {
		cp, err := statestore.NewCheckpointer(storage, statestore.Config{
			Operator: "counter-0", KeyGroups: dstl.KeyGroupRange{Start: 0, End: 127}})
		if err != nil {
			log.Fatal(err)
		}
		counts, err := statestore.NewKeyValueStore("counts", cp.Log(), statestore.StringCodec{}, statestore.Int64Codec{})
		if err != nil {
			log.Fatal(err)
		}
		if err := cp.Register(counts); err != nil {
			log.Fatal(err)
		}
		return cp, counts
	}

	cp, counts := open()
	if err := cp.InitializeState(ctx, statestore.CheckpointInfo{}); err != nil { // first start: no handle
		log.Fatal(err)
	}
	for _, w := range []string{"to", "be", "or", "not", "to", "be"} {
		n, _, _ := counts.Get(w)
		_ = counts.Put(w, n+1)
	}
	h, err := cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 1})
	if err != nil {
		log.Fatal(err)
	}
	record, _ := h.MarshalBinary() // what the checkpoint keeps
	_ = cp.NotifyCheckpointComplete(ctx, 1)
	_ = counts.Put("lost", 1) // after the checkpoint: gone with the crash
	cp.Close()

	cp, counts = open()
	defer cp.Close()
	var restored statestore.CheckpointHandle
	if err := restored.UnmarshalBinary(record); err != nil {
		log.Fatal(err)
	}
	if err := cp.InitializeState(ctx, statestore.CheckpointInfo{CheckpointID: 1}, &restored); err != nil {
		log.Fatal(err)
	}
	for w, n := range counts.All() {
		fmt.Println(w, n)
	}
	// Output:
	// be 2
	// not 1
	// or 1
	// to 2
}
