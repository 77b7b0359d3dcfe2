package statestore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	_ "github.com/dstlgo/dstl/backends/local" // registers local paths and file://
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// An operator counts words in a key-value store on local disk and takes a
// checkpoint, whose handle the program keeps; after a crash, a second
// process opens a storage of its own and restores the checkpoint.
func Example() {
	dir, err := os.MkdirTemp("", "statestore-example-")
	check(err)
	defer os.RemoveAll(dir)
	ctx := context.Background()
	cfg := dstl.DefaultConfig(dir) // or a URL: s3://bucket/prefix, ...
	cfg.JobID = "words"

	// What each process opens: a storage, a checkpointer and its store.
	open := func() (*dstl.Storage, *statestore.Checkpointer, *statestore.KeyValueStore[string, int64]) {
		storage, err := dstl.Open(ctx, cfg)
		check(err)
		cp, err := statestore.NewCheckpointer(storage, statestore.Config{
			Operator: "counter-0", KeyGroups: dstl.KeyGroupRange{Start: 0, End: 127}})
		check(err)
		counts, err := statestore.NewKeyValueStore("counts", cp.Log(), statestore.StringCodec{}, statestore.Int64Codec{})
		check(err)
		check(cp.Register(counts))
		return storage, cp, counts
	}

	// The first process.
	storage, cp, counts := open()
	check(cp.InitializeState(ctx, statestore.CheckpointInfo{})) // a first start: no handle
	for _, w := range []string{"to", "be", "or", "not", "to", "be"} {
		n, _, err := counts.Get(w)
		check(err)
		check(counts.Put(w, n+1))
	}
	h, err := cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 1})
	check(err)
	record, err := h.MarshalBinary() // what the program keeps of checkpoint 1
	check(err)
	check(cp.NotifyCheckpointComplete(ctx, 1))
	check(counts.Put("lost", 1)) // after the checkpoint: gone with the crash
	cp.Close()
	storage.Close()

	// The second process restores the kept checkpoint.
	storage, cp, counts = open()
	defer storage.Close()
	defer cp.Close()
	var restored statestore.CheckpointHandle
	check(restored.UnmarshalBinary(record))
	check(cp.InitializeState(ctx, statestore.CheckpointInfo{CheckpointID: 1}, &restored))
	for w, n := range counts.All() {
		fmt.Println(w, n)
	}
	// Output:
	// be 2
	// not 1
	// or 1
	// to 2
}

// check ends the program on an error.
func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
