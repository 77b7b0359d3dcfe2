package statestore

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// diskCheckpointer returns a checkpointer on disk (Config.Dir) over a
// storage on the local backend.
func diskCheckpointer(t *testing.T, maxP int, kgr dstl.KeyGroupRange) *Checkpointer {
	t.Helper()
	b, err := local.Open(context.Background(), local.DefaultConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := dstl.DefaultConfig("file://test")
	cfg.JobID = "job"
	cfg.BatchPersistDelay = dstl.NoBatchDelay
	storage, err := dstl.New(cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { storage.Close() })
	cp, err := NewCheckpointer(storage, Config{Operator: "op", KeyGroups: kgr, MaxParallelism: maxP,
		MaterializeInterval: -1, MaterializeSize: -1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Close() })
	return cp
}

// storePrefix returns the prefix of the database keys of store b in key
// group kg.
func storePrefix(b *storeBase, kg int) []byte { return diskstate.AppendStorePrefix(nil, kg, b.name) }

// winKeys returns the database keys of the data and the index of the
// window of encoded key kb at start, of key group kg.
func winKeys(b *storeBase, kg int, kb []byte, start int64) (data, index []byte) {
	data = appendTime(appendEscaped(append(storePrefix(b, kg), winDataSection...), kb), start)
	index = appendEscaped(appendTime(append(storePrefix(b, kg), winIndexSection...), start), kb)
	return data, index
}

// countKeys counts the keys of db that start with the store's prefix and
// sub in any key group of b.
func countKeys(t *testing.T, db *diskstate.DB, b *storeBase, sub []byte) int {
	t.Helper()
	n := 0
	for kg := b.kgr.Start; kg <= b.kgr.End; kg++ {
		p := append(storePrefix(b, kg), sub...)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func TestWindowExpiryRemovesFromDisk(t *testing.T) {
	const maxP, keys = 16, 50
	kgr := dstl.KeyGroupRange{Start: 0, End: maxP - 1}
	cp := diskCheckpointer(t, maxP, kgr)
	s, err := NewWindowStore("win", cp.Log(), StringCodec{}, StringCodec{}, 10, WithMaxParallelism(maxP))
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Register(s); err != nil {
		t.Fatal(err)
	}
	db := cp.disk
	for start := range int64(4) {
		for i := range keys {
			if err := s.Put(fmt.Sprintf("k\x00%d", i), start, "v"); err != nil {
				t.Fatal(err)
			}
		}
	}
	counts := func() (data, index int) {
		return countKeys(t, db, &s.storeBase, winDataSection), countKeys(t, db, &s.storeBase, winIndexSection)
	}
	if d, i := counts(); d != 4*keys || i != 4*keys {
		t.Fatalf("%d data and %d index keys on disk, want %d of each", d, i, 4*keys)
	}
	if s.oldest != 0 {
		t.Errorf("bound of the oldest start %d, want 0", s.oldest)
	}
	db.TakeChanges()

	// Live from 3: the windows at 0, 1, 2 go, from disk too.
	if err := s.Put("x", 12, "v"); err != nil {
		t.Fatal(err)
	}
	if d, i := counts(); d != keys+1 || i != keys+1 {
		t.Errorf("after expiry: %d data and %d index keys on disk, want %d of each", d, i, keys+1)
	}
	changed, all := db.TakeChanges()
	if all {
		t.Fatal("expiry touched every key")
	}
	var want []string
	for start := range int64(3) {
		for i := range keys {
			kb := fmt.Appendf(nil, "k\x00%d", i)
			kg := KeyGroup(kb, maxP)
			dk, ik := winKeys(&s.storeBase, kg, kb, start)
			want = append(want, string(dk), string(ik))
		}
	}
	xg := KeyGroup([]byte("x"), maxP)
	dk, ik := winKeys(&s.storeBase, xg, []byte("x"), 12)
	want = append(want, string(dk), string(ik))
	slices.Sort(want)
	if !slices.Equal(changed, want) {
		t.Errorf("changed keys: %d, want the %d keys of the expired windows and of the put", len(changed), len(want))
	}
	// The bound is exact after a scan: the windows at 3 are the oldest.
	if s.oldest != 3 {
		t.Errorf("bound of the oldest start %d, want 3", s.oldest)
	}

	// Deleted windows leave the bound; the next expiry finds them gone and
	// raises it to what is left (x at 12).
	for i := range keys {
		if err := s.Delete(fmt.Sprintf("k\x00%d", i), 3); err != nil {
			t.Fatal(err)
		}
	}
	if s.oldest != 3 {
		t.Errorf("bound after deletions %d, want 3 still", s.oldest)
	}
	db.TakeChanges()
	if err := s.Put("y", 13, "v"); err != nil { // live from 4
		t.Fatal(err)
	}
	if s.oldest != 12 {
		t.Errorf("bound after the next expiry %d, want 12", s.oldest)
	}
	if changed, _ := db.TakeChanges(); len(changed) != 2 {
		t.Errorf("%d changed keys, want those of the put alone", len(changed))
	}
	// Clear resets the bounds.
	s.Clear()
	if d, i := counts(); d != 0 || i != 0 || s.oldest != math.MaxInt64 {
		t.Errorf("after Clear: %d data, %d index keys, bound %d", d, i, s.oldest)
	}
}

func TestVersionedRetentionRemovesFromDisk(t *testing.T) {
	const maxP = 16
	kgr := dstl.KeyGroupRange{Start: 0, End: maxP - 1}
	cp := diskCheckpointer(t, maxP, kgr)
	s, err := NewVersionedStore("ver", cp.Log(), StringCodec{}, StringCodec{}, 10, WithMaxParallelism(maxP))
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Register(s); err != nil {
		t.Fatal(err)
	}
	db := cp.disk
	a := []byte("a\x00\xff")
	versionsOfA := func() int { return countKeys(t, db, &s.storeBase, appendEscaped(nil, a)) }
	for _, ts := range []int64{0, 2, 4} {
		if err := s.Put(string(a), "v", ts); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(string(a), 6); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("b", "v", 30); err != nil { // horizon 20
		t.Fatal(err)
	}
	// As in memory, the versions of a go when a changes.
	if n := versionsOfA(); n != 4 {
		t.Errorf("%d versions of a on disk, want 4", n)
	}
	db.TakeChanges()
	if err := s.Put(string(a), "w", 31); err != nil {
		t.Fatal(err)
	}
	if n := versionsOfA(); n != 2 {
		t.Errorf("%d versions of a on disk, want 2 (the deletion at 6, valid at the horizon, and 31)", n)
	}
	changed, all := db.TakeChanges()
	kg := KeyGroup(a, maxP)
	var want []string
	for _, ts := range []int64{0, 2, 4, 31} {
		want = append(want, string(appendTime(appendEscaped(storePrefix(&s.storeBase, kg), a), ts)))
	}
	slices.Sort(want)
	if all || !slices.Equal(changed, want) {
		t.Errorf("changed keys %q (all %v), want %q", changed, all, want)
	}
	if vs, err := s.History(string(a)); err != nil || len(vs) != 2 || !vs[0].Deleted || vs[1].Value != "w" {
		t.Errorf("History = %v, %v", vs, err)
	}
}

// TestWindowVersionedRestorePayloadAddsOnDisk restores payloads without wiping, into
// part of the key groups, as the checkpointer does for several handles, in
// memory and on disk, and compares the payloads of the results.
func TestWindowVersionedRestorePayloadAddsOnDisk(t *testing.T) {
	const maxP = 16
	all := dstl.KeyGroupRange{Start: 0, End: maxP - 1}
	low, high := dstl.KeyGroupRange{Start: 0, End: 7}, dstl.KeyGroupRange{Start: 8, End: 15}
	opt := WithMaxParallelism(maxP)
	keys := []string{"", "\x00", "a", "a\x00", "a\xff", "b", "c", "d", "e", "f", "g", "h", "\xff", "\xff\x00"}

	t.Run("window", func(t *testing.T) {
		cp := diskCheckpointer(t, maxP, all)
		mem, _ := NewWindowStore("win", nil, StringCodec{}, StringCodec{}, 10, opt)
		disk, _ := NewWindowStore("win", cp.Log(), StringCodec{}, StringCodec{}, 10, opt)
		if err := cp.Register(disk); err != nil {
			t.Fatal(err)
		}
		src1, _ := NewWindowStore("win", nil, StringCodec{}, StringCodec{}, 10, opt)
		src2, _ := NewWindowStore("win", nil, StringCodec{}, StringCodec{}, 10, opt)
		for i, k := range keys {
			for _, s := range []*WindowStore[string, string]{mem, disk} {
				if err := s.Put(k, int64(i%4), "old"); err != nil {
					t.Fatal(err)
				}
			}
			if err := src1.Put(k, int64(i%4), "one"); err != nil {
				t.Fatal(err)
			}
			if err := src2.Put(k, int64(i%5)+8, "two"); err != nil { // stream time 12: live from 3
				t.Fatal(err)
			}
		}
		for _, step := range []struct {
			src *WindowStore[string, string]
			kgr dstl.KeyGroupRange
		}{{src1, low}, {src2, high}, {src2, low}} {
			p, err := step.src.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*WindowStore[string, string]{mem, disk} {
				if err := s.restorePayload(p, step.kgr, false); err != nil {
					t.Fatal(err)
				}
			}
			mp, _ := mem.Snapshot()
			dp, err := disk.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(mp, dp) {
				t.Fatalf("after restoring into %v: payloads differ:\nmemory %x\ndisk   %x", step.kgr, mp, dp)
			}
		}
		if mem.Len() != disk.Len() || mem.Len() < len(keys) {
			t.Errorf("Len: memory %d, disk %d", mem.Len(), disk.Len())
		}
	})

	t.Run("versioned", func(t *testing.T) {
		cp := diskCheckpointer(t, maxP, all)
		mem, _ := NewVersionedStore("ver", nil, StringCodec{}, StringCodec{}, 5, opt)
		disk, _ := NewVersionedStore("ver", cp.Log(), StringCodec{}, StringCodec{}, 5, opt)
		if err := cp.Register(disk); err != nil {
			t.Fatal(err)
		}
		src1, _ := NewVersionedStore("ver", nil, StringCodec{}, StringCodec{}, 5, opt)
		src2, _ := NewVersionedStore("ver", nil, StringCodec{}, StringCodec{}, 5, opt)
		for i, k := range keys {
			for _, s := range []*VersionedStore[string, string]{mem, disk} {
				// Versions the restored keys replace.
				if err := s.Put(k, "old", int64(i%3)); err != nil {
					t.Fatal(err)
				}
				if err := s.Put(k+"-only here", "old", int64(i%3)); err != nil {
					t.Fatal(err)
				}
			}
			if err := src1.Put(k, "one", int64(i%4)); err != nil {
				t.Fatal(err)
			}
			if err := src1.Delete(k, int64(i%4)+1); err != nil {
				t.Fatal(err)
			}
			for ts := range int64(3) {
				if err := src2.Put(k, "two", int64(i%5)+ts*3); err != nil { // stream time up to 10
					t.Fatal(err)
				}
			}
		}
		for _, step := range []struct {
			src *VersionedStore[string, string]
			kgr dstl.KeyGroupRange
		}{{src1, low}, {src2, high}, {src2, low}} {
			p, err := step.src.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*VersionedStore[string, string]{mem, disk} {
				if err := s.restorePayload(p, step.kgr, false); err != nil {
					t.Fatal(err)
				}
			}
			mp, _ := mem.Snapshot()
			dp, err := disk.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(mp, dp) {
				t.Fatalf("after restoring into %v: payloads differ:\nmemory %x\ndisk   %x", step.kgr, mp, dp)
			}
		}
		if mem.Len() != disk.Len() || mem.Len() != 2*len(keys) {
			t.Errorf("Len: memory %d, disk %d, want %d", mem.Len(), disk.Len(), 2*len(keys))
		}
	})
}
