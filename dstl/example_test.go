package dstl_test

import (
	"context"
	"fmt"
	"log"
	"os"

	_ "github.com/dstlgo/dstl/backends/local" // registers "local" and file://
	"github.com/dstlgo/dstl/dstl"
)

// A writer appends changes, persists them at a checkpoint and confirms the
// checkpoint, whose handle the program keeps; after a crash, another
// process opens a storage of its own and rebuilds the state from the
// handle.
func Example() {
	dir, err := os.MkdirTemp("", "dstl-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	// The first process: append, persist, confirm, keep the handle. A
	// Config's zero fields are their defaults.
	storage, err := dstl.Open(ctx, dstl.Config{BasePath: dir})
	if err != nil {
		log.Fatal(err)
	}
	w, err := storage.NewWriter("counter", dstl.KeyGroupRange{Start: 0, End: 127})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.AppendMeta(ctx, []byte("schema=v1")); err != nil {
		log.Fatal(err)
	}
	for _, c := range []struct {
		kg   int
		data string
	}{{7, "apples=3"}, {42, "pears=5"}, {7, "apples=4"}} {
		if err := w.Append(ctx, c.kg, []byte(c.data)); err != nil {
			log.Fatal(err)
		}
	}
	// Checkpoint 1: persist everything from the first change set on.
	future, err := w.Persist(ctx, w.InitialSequenceNumber(), 1)
	if err != nil {
		log.Fatal(err)
	}
	res, err := future.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Keep the handle with the checkpoint; once the checkpoint completes,
	// confirm it.
	handle, err := res.Remote.MarshalBinary()
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Confirm(res.From, res.To, 1); err != nil {
		log.Fatal(err)
	}
	if err := storage.Close(); err != nil {
		log.Fatal(err)
	}

	// After a crash, another process reads the handle back.
	restored, err := dstl.Open(ctx, dstl.Config{BasePath: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer restored.Close()
	var h dstl.Handle
	if err := h.UnmarshalBinary(handle); err != nil {
		log.Fatal(err)
	}
	r, err := restored.NewReader(dstl.KeyGroupRange{Start: 0, End: 127})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for c, err := range r.Changes(ctx, h) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("key group %d: %s\n", c.KeyGroup, c.Data)
	}
	// Output:
	// key group -1: schema=v1
	// key group 7: apples=3
	// key group 7: apples=4
	// key group 42: pears=5
}

// Options use Flink's keys, bare or with Flink's prefix. As in Flink, a
// threshold or delay of 0 turns its feature off.
func ExampleParseConfig() {
	cfg, err := dstl.ParseConfig(map[string]string{
		"state.changelog.dstl.dfs.base-path":           "file:///var/lib/job/changelog",
		"state.changelog.dstl.dfs.batch.persist-delay": "20 ms",
		"upload.max-in-flight":                         "64 mb",
		"preemptive-persist-threshold":                 "0",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.BatchPersistDelay, cfg.UploadMaxInFlight>>20, "MiB")
	fmt.Println(cfg.PreemptivePersistThreshold == dstl.NoPreemptivePersist)
	// Output:
	// 20ms 64 MiB
	// true
}

// A handle round-trips through its binary and JSON encodings.
func ExampleHandle_MarshalBinary() {
	h := dstl.Handle{
		StorageID:   "local",
		KeyGroups:   dstl.KeyGroupRange{Start: 0, End: 7},
		Entries:     []dstl.HandleEntry{{Object: "job/0190.dstl", Offset: 8, Length: 120, SequenceNumber: 3, LogicalSize: 90}},
		LogicalSize: 90, StoredSize: 120, IncrementalSize: 120,
	}
	b, err := h.MarshalBinary()
	if err != nil {
		log.Fatal(err)
	}
	var back dstl.Handle
	if err := back.UnmarshalBinary(b); err != nil {
		log.Fatal(err)
	}
	fmt.Println(back.Entries[0].Object, back.Entries[0].Offset, back.Entries[0].Length)
	// Output: job/0190.dstl 8 120
}
