package statestore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
)

// TestFlushErrorNamesTheKey: an undecodable key found at an early flush
// (maxReplayOps 1) fails the restore with an error that names the key and
// says the change set it names is the one whose replay applied the
// changes gathered before it, not the one holding the bad key.
func TestFlushErrorNamesTheKey(t *testing.T) {
	defer func(o int) { maxReplayOps = o }(maxReplayOps)
	maxReplayOps = 1
	const maxP = 16
	ctx := context.Background()
	backend := dstltest.NewBackend()
	open := func() (*Checkpointer, *KeyValueStore[uint64, string]) {
		cfg := dstl.DefaultConfig("mem://test")
		cfg.JobID = "job"
		cfg.BatchPersistDelay = dstl.NoBatchDelay
		storage, err := dstl.New(cfg, backend)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { storage.Close() })
		cp, err := NewCheckpointer(storage, Config{Operator: "op", KeyGroups: dstl.KeyGroupRange{Start: 0, End: maxP - 1}, MaxParallelism: maxP, MaterializeInterval: -1, MaterializeSize: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cp.Close() })
		kv, err := NewKeyValueStore("s", cp.Log(), Uint64Codec{}, StringCodec{}, WithMaxParallelism(maxP))
		if err != nil {
			t.Fatal(err)
		}
		if err := cp.Register(kv); err != nil {
			t.Fatal(err)
		}
		return cp, kv
	}
	cp, kv := open()
	bad := []byte("short")
	if err := cp.Log().Append(ctx, KeyGroup(bad, maxP), appendChange(nil, "s", Change{KeyGroup: KeyGroup(bad, maxP), Key: bad, Value: []byte("v")})); err != nil {
		t.Fatal(err)
	}
	badSet := cp.Log().NextSequenceNumber()
	if err := cp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := kv.Put(uint64(i), "g"); err != nil {
			t.Fatal(err)
		}
		if err := cp.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	h, err := cp.SnapshotState(ctx, CheckpointInfo{OperatorID: "op", CheckpointID: 1})
	if err != nil {
		t.Fatal(err)
	}
	cp2, _ := open()
	err = cp2.InitializeState(ctx, CheckpointInfo{}, h)
	if err == nil || !errors.Is(err, ErrLogFormat) {
		t.Fatalf("restore of a log with an undecodable key: %v, want ErrLogFormat", err)
	}
	for _, want := range []string{"applying the changes gathered before this one", fmt.Sprintf("key %x", bad)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("restore error %q does not say %q (the bad key is in change set %d)", err, want, badSet-1)
		}
	}
}
