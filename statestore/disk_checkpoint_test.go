package statestore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
)

// snapshotObjects returns the names of the snapshot objects and files on
// the backend, sorted.
func snapshotObjects(b *dstltest.Backend) []string {
	var names []string
	for _, o := range b.Objects() {
		if strings.Contains(o.Name, "/statestore/") {
			names = append(names, o.Name)
		}
	}
	slices.Sort(names)
	return names
}

// snapshotNames returns what a handle's snapshots name, sorted.
func snapshotNames(h *statestore.CheckpointHandle) []string {
	var names []string
	for _, s := range h.Snapshots {
		names = append(names, s.Object)
		names = append(names, s.Files...)
	}
	slices.Sort(names)
	return names
}

// fillKV puts n keys of 200-byte values into the key-value store.
func fillKV(t *testing.T, o *operator, n int, round int) {
	t.Helper()
	for i := range n {
		if err := o.kv.Put(fmt.Sprintf("big-%06d", i), value200(uint64(round*1_000_003+i))); err != nil {
			t.Fatal(err)
		}
	}
}

// value200 is a 200-byte value that compresses little, made from seed.
func value200(seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 11))
	b := make([]byte, 200)
	for i := range b {
		b[i] = 'a' + byte(rng.IntN(26))
	}
	return string(b)
}

// TestDiskMaterializationIsIncremental: a disk-backed checkpointer's
// materialisations upload about what changed (at most 3 times the bytes of
// the changed keys and values), its handles name the snapshot's files, the
// checkpointer deletes the files no retained checkpoint names, and every
// checkpoint restores exactly.
func TestDiskMaterializationIsIncremental(t *testing.T) {
	ctx := context.Background()
	b := dstltest.NewBackend()
	o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{Dir: t.TempDir()})
	const keys = 8000 // 1.6 MB of state
	fillKV(t, o, keys, 0)
	newWorkload(1).run(t, o, 300)
	if err := o.cp.Materialize(ctx); err != nil {
		t.Fatal(err)
	}
	full := o.cp.Stats().LastMaterialization
	if full.UploadedBytes < keys*200/2 || full.Files < 2 {
		t.Fatalf("first materialisation %+v: want the whole state in files and a manifest", full)
	}
	w := newWorkload(2)
	for round := 1; round <= 8; round++ {
		// 1 % of the keys change; the others stay.
		for i := range keys / 100 {
			k := fmt.Sprintf("big-%06d", (round*7919+i*97)%keys)
			if err := o.kv.Put(k, value200(uint64(round*7+i))); err != nil {
				t.Fatal(err)
			}
		}
		w.run(t, o, 20)
		if err := o.cp.Materialize(ctx); err != nil {
			t.Fatal(err)
		}
		rep := o.cp.Stats().LastMaterialization
		if rep.ChangedKeys < keys/100 || rep.ChangedBytes == 0 {
			t.Fatalf("round %d: %+v: want at least the %d keys changed", round, rep, keys/100)
		}
		if rep.UploadedBytes > 3*rep.ChangedBytes {
			t.Errorf("round %d: uploaded %d bytes for %d changed (%.2f×), want at most 3×",
				round, rep.UploadedBytes, rep.ChangedBytes, float64(rep.UploadedBytes)/float64(rep.ChangedBytes))
		}
		w.run(t, o, 20)
		h := checkpoint(t, o, int64(round))
		if len(h.Snapshots) != 1 || len(h.Snapshots[0].Files) == 0 {
			t.Fatalf("round %d: handle snapshots %+v: want one manifest naming files", round, h.Snapshots)
		}
		// Only what the completed checkpoint names stays.
		if got, want := snapshotObjects(b), snapshotNames(h); !slices.Equal(got, want) {
			t.Errorf("round %d: snapshot objects on the backend\n%q\nwant what the handle names\n%q", round, got, want)
		}
		if round%4 == 0 {
			want := dump(t, o)
			r := newOperator(t, newStorage(t, b), "op-1", allGroups, statestore.Config{Dir: t.TempDir()})
			restore(t, r, h)
			diff(t, want, dump(t, r))
			if rep := r.cp.Stats().LastRestore; rep.SnapshotFiles != len(h.Snapshots[0].Files) {
				t.Errorf("restore report %+v: want the %d files loaded", rep, len(h.Snapshots[0].Files))
			}
			r.cp.Close()
		}
	}
}

// TestDiskRestoreExtendsItsManifest: a restart that restores a
// disk-backed checkpoint into the same key groups goes on incrementally
// (its next materialisation uploads what changed, not the state), and one
// that restores into fewer key groups too; one with more key groups than
// the handle writes the whole state.
func TestDiskRestoreExtendsItsManifest(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		from, to  dstl.KeyGroupRange
		wantWhole bool
	}{
		{"same key groups", allGroups, allGroups, false},
		{"fewer key groups", allGroups, dstl.KeyGroupRange{Start: 0, End: 63}, false},
		{"more key groups", dstl.KeyGroupRange{Start: 0, End: 63}, allGroups, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			o := newOperator(t, newStorage(t, b), "op-0", tc.from, statestore.Config{Dir: t.TempDir()})
			for i := range 8000 {
				k := fmt.Sprintf("big-%06d", i)
				if !tc.from.Contains(statestore.KeyGroup([]byte(k), maxP)) {
					continue
				}
				if err := o.kv.Put(k, value200(uint64(i))); err != nil {
					t.Fatal(err)
				}
			}
			if err := o.cp.Materialize(ctx); err != nil {
				t.Fatal(err)
			}
			state := o.cp.Stats().LastMaterialization.UploadedBytes
			h := checkpoint(t, o, 1)
			o.cp.Close()
			r := newOperator(t, newStorage(t, b), "op-1", tc.to, statestore.Config{Dir: t.TempDir()})
			restore(t, r, h)
			n := 0
			for i := 0; n < 100; i++ {
				k := fmt.Sprintf("big-%06d", i)
				if kg := statestore.KeyGroup([]byte(k), maxP); !tc.to.Contains(kg) {
					continue
				}
				if err := r.kv.Put(k, value200(uint64(i+1))); err != nil {
					t.Fatal(err)
				}
				n++
			}
			if err := r.cp.Materialize(ctx); err != nil {
				t.Fatal(err)
			}
			rep := r.cp.Stats().LastMaterialization
			if whole := rep.UploadedBytes > state/4; whole != tc.wantWhole {
				t.Errorf("materialisation after the restore uploaded %d bytes (the state took %d): whole state %v, want %v",
					rep.UploadedBytes, state, whole, tc.wantWhole)
			}
			want := dump(t, r)
			h2 := checkpoint(t, r, 2)
			r2 := newOperator(t, newStorage(t, b), "op-2", tc.to, statestore.Config{Dir: t.TempDir()})
			restore(t, r2, h2)
			diff(t, want, dump(t, r2))
		})
	}
}

// TestDiskAndMemorySnapshots: a disk-backed checkpointer restores an
// in-memory store's checkpoint (a job that moves its state to disk), and
// an in-memory one refuses a disk-backed snapshot with an error that says
// so.
func TestDiskAndMemorySnapshots(t *testing.T) {
	ctx := context.Background()
	b := dstltest.NewBackend()
	mem := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{})
	newWorkload(3).run(t, mem, 400)
	if err := mem.cp.Materialize(ctx); err != nil {
		t.Fatal(err)
	}
	newWorkload(4).run(t, mem, 100)
	want := dump(t, mem)
	h := checkpoint(t, mem, 1)
	disk := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{Dir: t.TempDir()})
	restore(t, disk, h)
	diff(t, want, dump(t, disk))
	// Its first materialisation writes the whole state on disk's terms.
	if err := disk.cp.Materialize(ctx); err != nil {
		t.Fatal(err)
	}
	dh := checkpoint(t, disk, 2)
	if len(dh.Snapshots) != 1 || len(dh.Snapshots[0].Files) == 0 {
		t.Fatalf("disk handle %+v", dh.Snapshots)
	}
	back := newOperator(t, newStorage(t, b), "op-1", allGroups, statestore.Config{})
	err := back.cp.InitializeState(ctx, statestore.CheckpointInfo{}, dh)
	if !errors.Is(err, statestore.ErrSnapshotFormat) || !strings.Contains(err.Error(), "disk-backed") || !strings.Contains(err.Error(), dh.Snapshots[0].Object) {
		t.Errorf("in-memory restore of a disk-backed snapshot: %v", err)
	}
}

// TestDiskDamagedSnapshotFile: a snapshot file damaged or missing on the
// backend fails the restore with an error naming it, never a wrong state:
// the stores stay empty and checkpoints are refused until a restore
// succeeds.
func TestDiskDamagedSnapshotFile(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		manifest bool // damage the manifest, not a file
		damage   func(b *dstltest.Backend, name string)
		wantErr  error
	}{
		{"flipped byte of the manifest", true, func(b *dstltest.Backend, name string) {
			data, _ := b.ObjectBytes(name)
			data[len(data)/2] ^= 0x40
			b.SetObjectBytes(name, data)
		}, statestore.ErrSnapshotFormat},
		{"flipped byte", false, func(b *dstltest.Backend, name string) {
			data, _ := b.ObjectBytes(name)
			data[len(data)/2] ^= 0x40
			b.SetObjectBytes(name, data)
		}, statestore.ErrSnapshotFormat},
		{"truncated", false, func(b *dstltest.Backend, name string) {
			data, _ := b.ObjectBytes(name)
			b.SetObjectBytes(name, data[:len(data)-10])
		}, statestore.ErrSnapshotFormat},
		{"missing", false, func(b *dstltest.Backend, name string) {
			if err := b.Delete(ctx, name); err != nil {
				t.Fatal(err)
			}
		}, backends.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{Dir: t.TempDir()})
			fillKV(t, o, 3000, 0)
			if err := o.cp.Materialize(ctx); err != nil {
				t.Fatal(err)
			}
			h := checkpoint(t, o, 1)
			o.cp.Close()
			file := h.Snapshots[0].Files[0]
			if tc.manifest {
				file = h.Snapshots[0].Object
			}
			tc.damage(b, file)
			r := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{Dir: t.TempDir()})
			err := r.cp.InitializeState(ctx, statestore.CheckpointInfo{}, h)
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), file) {
				t.Fatalf("restore with %s %s: %v, want %v naming it", tc.name, file, err, tc.wantErr)
			}
			if n := r.kv.Len(); n != 0 {
				t.Errorf("%d keys after a failed restore, want none", n)
			}
			if _, err := r.cp.SnapshotState(ctx, statestore.CheckpointInfo{CheckpointID: 5}); !errors.Is(err, statestore.ErrRestoreFailed) {
				t.Errorf("checkpoint after a failed restore: %v, want ErrRestoreFailed", err)
			}
		})
	}
}

// TestDiskMaterializationFailureLeavesNothing: a materialisation whose
// snapshot object (the manifest) cannot be put leaves none of its files on
// the backend; the changes it was to write are written by the next one.
func TestDiskMaterializationFailureLeavesNothing(t *testing.T) {
	ctx := context.Background()
	b := dstltest.NewBackend()
	o := newOperator(t, newStorage(t, b), "op-0", allGroups, statestore.Config{Dir: t.TempDir()})
	fillKV(t, o, 5000, 0)
	if err := o.cp.Materialize(ctx); err != nil {
		t.Fatal(err)
	}
	h1 := checkpoint(t, o, 1)
	before := snapshotObjects(b)
	fillKV(t, o, 200, 1)
	boom := errors.New("injected")
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op == dstltest.OpPut && strings.HasSuffix(name, ".snap") {
			return dstltest.Fault{Err: boom}
		}
		return dstltest.Fault{}
	})
	if err := o.cp.Materialize(ctx); !errors.Is(err, boom) {
		t.Fatalf("materialise with a failing snapshot put: %v", err)
	}
	if got := snapshotObjects(b); !slices.Equal(got, before) {
		t.Errorf("after a failed materialisation the backend holds\n%q\nwant what it held before\n%q", got, before)
	}
	if !slices.Equal(before, snapshotNames(h1)) {
		t.Fatalf("before: %q, handle: %q", before, snapshotNames(h1))
	}
	b.SetFault(nil)
	if err := o.cp.Materialize(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := o.cp.Stats().LastMaterialization; rep.ChangedKeys < 200 {
		t.Errorf("the retried materialisation %+v: want the 200 changed keys of the failed one", rep)
	}
	want := dump(t, o)
	h := checkpoint(t, o, 2)
	r := newOperator(t, newStorage(t, b), "op-1", allGroups, statestore.Config{Dir: t.TempDir()})
	restore(t, r, h)
	diff(t, want, dump(t, r))
}

// putIn puts n keys of the key groups of r into the key-value store,
// values made from seed.
func putIn(t *testing.T, o *operator, r dstl.KeyGroupRange, n int, seed uint64) {
	t.Helper()
	for i := 0; n > 0; i++ {
		k := fmt.Sprintf("big-%06d", i)
		if !r.Contains(statestore.KeyGroup([]byte(k), maxP)) {
			continue
		}
		if err := o.kv.Put(k, value200(seed+uint64(i))); err != nil {
			t.Fatal(err)
		}
		n--
	}
}

// TestRestartKeepsSharedSnapshots: after a rescale splits an instance in
// two, a restart of one of them (same name, same key groups) takes as its
// own only what it wrote itself: it never deletes a snapshot or file that
// the instance it was split from wrote, which its sibling still needs.
func TestRestartKeepsSharedSnapshots(t *testing.T) {
	ctx := context.Background()
	for _, disk := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "disk"}[disk], func(t *testing.T) {
			cfg := func() statestore.Config {
				if disk {
					return statestore.Config{Dir: t.TempDir()}
				}
				return statestore.Config{}
			}
			left, right := dstl.KeyGroupRange{Start: 0, End: 63}, dstl.KeyGroupRange{Start: 64, End: 127}
			b := dstltest.NewBackend()
			a := newOperator(t, newStorage(t, b), "op-0", allGroups, cfg())
			putIn(t, a, allGroups, 4000, 1)
			if err := a.cp.Materialize(ctx); err != nil {
				t.Fatal(err)
			}
			h1 := checkpoint(t, a, 1)
			a.cp.Close()

			l := newOperator(t, newStorage(t, b), "op-0", left, cfg())
			r := newOperator(t, newStorage(t, b), "op-1", right, cfg())
			restore(t, l, h1)
			restore(t, r, h1)
			putIn(t, l, left, 40, 2)
			if disk {
				if err := l.cp.Materialize(ctx); err != nil {
					t.Fatal(err)
				}
			}
			h2 := checkpoint(t, l, 2)
			l.cp.Close()

			// The left instance restarts, and goes on until nothing of
			// the split instance's is left in its checkpoints.
			l2 := newOperator(t, newStorage(t, b), "op-0", left, cfg())
			restore(t, l2, h2)
			var last *statestore.CheckpointHandle
			for id := int64(3); id < 30; id++ {
				putIn(t, l2, left, 100, uint64(id))
				if err := l2.cp.Materialize(ctx); err != nil {
					t.Fatal(err)
				}
				last = checkpoint(t, l2, id)
			}
			for _, n := range snapshotNames(h1) {
				if slices.Contains(snapshotNames(last), n) {
					t.Fatalf("the restarted instance's last checkpoint still names %s of the split instance", n)
				}
			}

			// The right instance never materialised: it needs what the
			// split instance wrote.
			want := dump(t, r)
			h3 := checkpoint(t, r, 2)
			r2 := newOperator(t, newStorage(t, b), "op-1", right, cfg())
			restore(t, r2, h3)
			diff(t, want, dump(t, r2))
		})
	}
}

// TestCheckpointerConfigErrors: a Config that cannot work is refused by
// NewCheckpointer with an error naming what is wrong.
func TestCheckpointerConfigErrors(t *testing.T) {
	file := t.TempDir() + "/file"
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	storage := newStorage(t, dstltest.NewBackend())
	for _, tc := range []struct {
		name string
		cfg  statestore.Config
		want string
	}{
		{"no operator", statestore.Config{KeyGroups: allGroups}, `operator ""`},
		{"operator with a slash", statestore.Config{Operator: "a/b", KeyGroups: allGroups}, `operator "a/b"`},
		{"max parallelism", statestore.Config{Operator: "op", KeyGroups: allGroups, MaxParallelism: -1}, "max parallelism -1"},
		{"key groups past max parallelism", statestore.Config{Operator: "op", KeyGroups: dstl.KeyGroupRange{Start: 0, End: 200}, MaxParallelism: 128}, "key groups"},
		{"negative cache", statestore.Config{Operator: "op", KeyGroups: allGroups, Dir: t.TempDir(), DirCacheSize: -1}, "DirCacheSize -1"},
		{"dir is a file", statestore.Config{Operator: "op", KeyGroups: allGroups, Dir: file}, "Config.Dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp, err := statestore.NewCheckpointer(storage, tc.cfg)
			if err == nil {
				cp.Close()
				t.Fatalf("NewCheckpointer(%+v) succeeded", tc.cfg)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}
