package catalogv1_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl"
	catalog "github.com/dstlgo/dstl/internal/catalogv1"
)

// TestWriteV1Corpus writes the corpus of catalog objects in the first
// layout that the upgrade tests read, with real log objects behind the
// parts' states, into $DSTL_WRITE_V1_CORPUS.
func TestWriteV1Corpus(t *testing.T) {
	dir := os.Getenv("DSTL_WRITE_V1_CORPUS")
	if dir == "" {
		t.Skip("DSTL_WRITE_V1_CORPUS is not set")
	}
	ctx := t.Context()
	b, err := local.Open(ctx, local.Config{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	storages := map[string]*dstl.Storage{}
	for _, job := range []string{"aligned", "independent"} {
		c := dstl.DefaultConfig(dir)
		c.JobID = job
		s, err := dstl.New(c, b)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		storages[job] = s
	}
	// state writes instance i's changes of checkpoint n to the log of a
	// writer of its own and returns the handle's encoding and objects.
	state := func(job string, i int, n int64, kg dstl.KeyGroupRange) ([]byte, []string) {
		w, err := storages[job].NewWriter(fmt.Sprintf("%s-i%d-n%d", job, i, n), kg)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 5 {
			if err := w.Append(ctx, kg.Start, fmt.Appendf(nil, "%s/i%d/n%d/k%d", job, i, n, k)); err != nil {
				t.Fatal(err)
			}
		}
		f, err := w.Persist(ctx, w.InitialSequenceNumber(), n)
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Confirm(w.InitialSequenceNumber(), w.NextSequenceNumber(), n); err != nil {
			t.Fatal(err)
		}
		data, err := res.Remote.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var objects []string
		for _, e := range res.Remote.Entries {
			objects = append(objects, e.Object)
		}
		return data, objects
	}
	commit := func(m *catalog.Member, job string, n int64) {
		data, objects := state(job, m.Index(), n, m.KeyGroups())
		if _, err := m.Commit(ctx, n, data, objects, map[string]string{"offset": fmt.Sprint(n * 10)}); err != nil {
			t.Fatalf("%s: commit %d of instance %d: %v", job, n, m.Index(), err)
		}
	}
	conf := func(job string, p, i int, mode catalog.Mode) catalog.Config {
		return catalog.Config{JobID: job, Instances: p, Index: i, MaxParallelism: 8, Mode: mode, Grace: time.Hour}
	}
	join := func(c catalog.Config) *catalog.Member {
		m, err := catalog.Join(ctx, b, c)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	// aligned: two instances; generation 1 completes 1 to 3 and leaves 4
	// incomplete; instance 1 restarts (generation 2, restoring 3), which
	// completes 5 and leaves 6 incomplete.
	a := []*catalog.Member{join(conf("aligned", 2, 0, catalog.Aligned)), join(conf("aligned", 2, 1, catalog.Aligned))}
	for n := int64(1); n <= 3; n++ {
		commit(a[0], "aligned", n)
		commit(a[1], "aligned", n)
	}
	commit(a[0], "aligned", 4)
	a[1] = join(conf("aligned", 2, 1, catalog.Aligned))
	var err0 error
	if a[0], err0 = a[0].Rejoin(ctx); err0 != nil {
		t.Fatal(err0)
	}
	commit(a[0], "aligned", 5)
	commit(a[1], "aligned", 5)
	commit(a[0], "aligned", 6)

	// independent: three instances; instance 0 commits 1 and 2, instance
	// 1 commits 1, instance 2 commits nothing.
	ind := []*catalog.Member{join(conf("independent", 3, 0, catalog.Independent)), join(conf("independent", 3, 1, catalog.Independent)), join(conf("independent", 3, 2, catalog.Independent))}
	commit(ind[0], "independent", 1)
	commit(ind[1], "independent", 1)
	commit(ind[0], "independent", 2)
	_ = ind[2]
}
