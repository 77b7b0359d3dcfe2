package statestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// The golden checkpoints in testdata/golden were written by an earlier
// build: each scenario's directory holds the backend's objects after a
// checkpoint (snapshot objects or manifests and their files, and the log),
// the checkpoint handle, the payloads of each store's Snapshot at the
// checkpoint, and the state the checkpoint holds. Restoring them checks
// that this build reads what earlier builds wrote: the formats of
// docs/STATESTORE.md and the key layout of disk-backed stores.
//
// go test -run TestGolden ./statestore -statestore.golden rewrites them:
// only ever do that for a deliberate change of a format, with a new
// version.
var writeGolden = flag.Bool("statestore.golden", false, "write testdata/golden from this build")

const goldenDir = "testdata/golden"

// goldenScenarios are the checkpoints written: one of in-memory stores
// (a snapshot object and the log since it) and one of disk-backed stores
// (a manifest naming a full snapshot's files, a delta and a segment, and
// the log since it).
var goldenScenarios = []struct {
	name string
	disk bool
}{{"memory", false}, {"disk", true}}

// goldenState is the state of a golden checkpoint, as dump sees it.
type goldenState struct {
	KV  map[string]string `json:"kv"`
	Win map[string]int64  `json:"window"`
	Ver map[string]string `json:"versioned"`
}

func TestGoldenWrite(t *testing.T) {
	if !*writeGolden {
		t.Skip("writes testdata/golden with -statestore.golden")
	}
	ctx := context.Background()
	for _, sc := range goldenScenarios {
		b := dstltest.NewBackend()
		cfg := statestore.Config{}
		if sc.disk {
			cfg.Dir = t.TempDir()
		}
		o := newOperator(t, newStorage(t, b), "op-0", allGroups, cfg)
		w := newWorkload(42)
		w.run(t, o, 1500)
		if sc.disk {
			// State large enough that the next materialisation writes
			// a delta and a segment, not the whole state again.
			for i := range 500 {
				if err := o.kv.Put(fmt.Sprintf("bulk-%05d", i), fmt.Sprintf("%040d", i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := o.cp.Materialize(ctx); err != nil {
			t.Fatal(err)
		}
		if sc.disk {
			w.run(t, o, 100)
			if err := o.cp.Materialize(ctx); err != nil {
				t.Fatal(err)
			}
		}
		w.run(t, o, 300)
		h := checkpoint(t, o, 1)
		if sc.disk {
			checkGoldenManifest(t, b, h)
		}
		s := dump(t, o)
		dir := filepath.Join(goldenDir, sc.name)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		for _, name := range h.Objects() {
			rc, err := b.Get(ctx, name, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "objects", filepath.FromSlash(name)), data)
		}
		hb, err := h.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "handle.bin"), hb)
		for name, st := range map[string]statestore.Store{"kv": o.kv, "win": o.win, "ver": o.ver} {
			p, err := st.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, name+".payload"), p)
		}
		js, err := json.MarshalIndent(goldenState{KV: s.kv, Win: s.win, Ver: s.ver}, "", "\t")
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "state.json"), append(js, '\n'))
	}
}

// checkGoldenManifest checks that the disk-backed checkpoint's manifest
// names files of every kind: a whole state, a delta and a segment.
func checkGoldenManifest(t *testing.T, b *dstltest.Backend, h *statestore.CheckpointHandle) {
	t.Helper()
	if len(h.Snapshots) != 1 {
		t.Fatalf("handle names %d snapshots", len(h.Snapshots))
	}
	rc, err := b.Get(context.Background(), h.Snapshots[0].Object, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	m, err := diskstate.DecodeManifest(h.Snapshots[0].Object, data)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[diskstate.FileKind]int{}
	for _, f := range m.Files {
		kinds[f.Kind]++
	}
	if len(m.Files) < 3 || kinds[diskstate.Delta] == 0 || kinds[diskstate.Segment] == 0 {
		t.Fatalf("the manifest names %d files (%v): want a whole state, a delta and a segment", len(m.Files), kinds)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// loadGolden returns a backend holding a golden scenario's objects, its
// handle and its state.
func loadGolden(t *testing.T, scenario string) (*dstltest.Backend, *statestore.CheckpointHandle, state) {
	t.Helper()
	dir := filepath.Join(goldenDir, scenario)
	b := dstltest.NewBackend()
	objects := filepath.Join(dir, "objects")
	err := filepath.WalkDir(objects, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(objects, path)
		if err != nil {
			return err
		}
		return b.Put(context.Background(), filepath.ToSlash(rel), bytes.NewReader(data), int64(len(data)))
	})
	if err != nil {
		t.Fatal(err)
	}
	hb, err := os.ReadFile(filepath.Join(dir, "handle.bin"))
	if err != nil {
		t.Fatal(err)
	}
	var h statestore.CheckpointHandle
	if err := h.UnmarshalBinary(hb); err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g goldenState
	if err := json.Unmarshal(js, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.KV) == 0 || len(g.Win) < 2 || len(g.Ver) < 2 {
		t.Fatalf("golden state of %s holds too little: %d, %d, %d", scenario, len(g.KV), len(g.Win), len(g.Ver))
	}
	return b, &h, state{kv: g.KV, win: g.Win, ver: g.Ver}
}

// TestGoldenRestore restores each golden checkpoint into in-memory stores
// (which refuse a disk-backed snapshot) and disk-backed ones, whole and in
// two halves of the key groups, and checks the state.
func TestGoldenRestore(t *testing.T) {
	for _, sc := range goldenScenarios {
		for _, disk := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/into-disk=%v", sc.name, disk), func(t *testing.T) {
				b, h, want := loadGolden(t, sc.name)
				cfg := func() statestore.Config {
					if disk {
						return statestore.Config{Dir: t.TempDir()}
					}
					return statestore.Config{}
				}
				storage := newStorage(t, b)
				o := newOperator(t, storage, "op-0", allGroups, cfg())
				err := o.cp.InitializeState(context.Background(), statestore.CheckpointInfo{OperatorID: "op"}, h)
				if sc.disk && !disk {
					if err == nil {
						t.Fatal("in-memory stores restored a disk-backed snapshot")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				diff(t, want, dump(t, o))
				if sc.disk {
					checkGoldenManifest(t, b, h)
				}

				lo := dstl.KeyGroupRange{Start: 0, End: maxP/2 - 1}
				hi := dstl.KeyGroupRange{Start: maxP / 2, End: maxP - 1}
				a := newOperator(t, storage, "op-1", lo, cfg())
				c := newOperator(t, storage, "op-2", hi, cfg())
				restore(t, a, h)
				restore(t, c, h)
				diff(t, want, union(dump(t, a), dump(t, c)))
			})
		}
	}
}

// TestGoldenPayloads restores each golden store payload into an in-memory
// and a disk-backed store, checks the state, and checks that Snapshot
// encodes the restored store into the same bytes.
func TestGoldenPayloads(t *testing.T) {
	for _, sc := range goldenScenarios {
		for _, disk := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/into-disk=%v", sc.name, disk), func(t *testing.T) {
				_, _, want := loadGolden(t, sc.name)
				cfg := statestore.Config{}
				if disk {
					cfg.Dir = t.TempDir()
				}
				o := newOperator(t, newStorage(t, dstltest.NewBackend()), "op-0", allGroups, cfg)
				for name, st := range map[string]statestore.Store{"kv": o.kv, "win": o.win, "ver": o.ver} {
					p, err := os.ReadFile(filepath.Join(goldenDir, sc.name, name+".payload"))
					if err != nil {
						t.Fatal(err)
					}
					if err := st.RestoreSnapshot(p); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					again, err := st.Snapshot()
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(again, p) {
						t.Errorf("%s: the restored store's snapshot differs from the golden payload", name)
					}
				}
				diff(t, want, dump(t, o))
			})
		}
	}
}
