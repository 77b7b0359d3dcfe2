package catalog_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/internal/catalogv1"
)

// corpus copies the catalogs of the first layout in testdata/v1 (written
// by the last release with that layout, with their log objects) to a new
// directory, and opens it.
func corpus(t *testing.T) backends.Backend {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/v1")); err != nil {
		t.Fatal(err)
	}
	b, err := local.Open(t.Context(), local.Config{Root: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// readState reads a part's state, a log handle, back through the log and
// returns its changes.
func readState(t *testing.T, b backends.Backend, p *catalog.Part) []string {
	t.Helper()
	var h dstl.Handle
	if err := h.UnmarshalBinary(p.State); err != nil {
		t.Fatalf("part %s of instance %d: %v", p.Name, p.Instance, err)
	}
	r, err := dstl.NewReader(b, p.KeyGroups, dstl.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	if err := r.Read(t.Context(), h, func(c dstl.Change) error {
		out = append(out, string(c.Data))
		return nil
	}); err != nil {
		t.Fatalf("read part %s of instance %d: %v", p.Name, p.Instance, err)
	}
	return out
}

func changesOf(job string, i int, n int64) []string {
	var out []string
	for k := range 5 {
		out = append(out, fmt.Sprintf("%s/i%d/n%d/k%d", job, i, n, k))
	}
	return out
}

// TestUpgradeFromFirstLayout: a job whose catalog the last release of the
// first layout wrote restarts on the second: its first Join fences the
// first layout (a generation record that its processes read as a newer
// generation and cannot join or start after), restores the latest
// complete checkpoint recorded there (its states read back exactly),
// and, once the job completed a checkpoint of its own, the deletion rule
// deletes the first layout's objects and the log objects only they
// referred to, but the fence. A process of the first layout still
// running is fenced: its commits fail, and it can neither rejoin nor
// join again.
func TestUpgradeFromFirstLayout(t *testing.T) {
	b := corpus(t)
	ctx := t.Context()
	oldCfg := func(i int) catalogv1.Config {
		return catalogv1.Config{JobID: "aligned", Instances: 2, Index: i, MaxParallelism: 8, Grace: time.Hour}
	}
	// A process of the old release restarts before the upgrade: the first
	// layout's generation 3, restoring checkpoint 5.
	old, err := catalogv1.Join(ctx, b, oldCfg(1))
	if err != nil {
		t.Fatal(err)
	}
	if old.Generation().Number != 3 || old.Generation().RestoredCheckpoint != 5 {
		t.Fatalf("the old release's restart: %+v", old.Generation())
	}

	newCfg := func(i int) catalog.Config {
		return catalog.Config{JobID: "aligned", Instances: 2, Process: i, MaxParallelism: 8, Grace: catalog.NoGrace, Logger: quiet}
	}
	m0 := join(t, b, newCfg(0))
	g := m0.Generation()
	if g.Number != 4 || g.RestoredCheckpoint != 5 || g.FirstCheckpoint != 7 || len(g.Restored) != 2 {
		t.Fatalf("the upgrade's generation: %+v", g)
	}
	for i, p := range m0.Restore(0) {
		if p.Checkpoint != 5 || p.Instance != 0 || p.Metadata["offset"] != "50" {
			t.Fatalf("restored part %d: %+v", i, p)
		}
		if got := readState(t, b, p); !slices.Equal(got, changesOf("aligned", 0, 5)) {
			t.Fatalf("instance 0's state reads %q", got)
		}
	}
	// The old process is fenced; it cannot rejoin, and a new process of
	// the old release cannot join.
	if _, err := old.Commit(ctx, 7, []byte("s"), nil, nil); !errors.Is(err, catalogv1.ErrFenced) {
		t.Fatalf("the old process's commit after the upgrade: %v, want ErrFenced", err)
	}
	if _, err := old.Rejoin(ctx); err == nil {
		t.Fatal("the old process rejoined after the upgrade")
	}
	if _, err := catalogv1.Join(ctx, b, oldCfg(0)); err == nil {
		t.Fatal("a process of the old release joined after the upgrade")
	}
	if _, err := catalogv1.Join(ctx, b, catalogv1.Config{JobID: "aligned", Instances: 3, Index: 0, MaxParallelism: 8}); err == nil {
		t.Fatal("a process of the old release started a generation after the upgrade")
	}

	// The job runs on: once it completed a checkpoint of its own, the
	// first layout's objects go, but the fence.
	m1 := join(t, b, newCfg(1))
	if got := readState(t, b, m1.Restore(1)[0]); !slices.Equal(got, changesOf("aligned", 1, 5)) {
		t.Fatalf("instance 1's state reads %q", got)
	}
	ms := []*catalog.Member{m0, m1}
	for n := int64(7); n <= 8; n++ {
		for i := len(ms) - 1; i >= 0; i-- {
			o, err := objname.NewLog("aligned/", n)
			if err != nil {
				t.Fatal(err)
			}
			put(t, b, o)
			if _, err := ms[i].Commit(ctx, n, []catalog.InstanceState{{Instance: i, State: []byte("s"), Objects: []string{o}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := m0.Collect(ctx, collect.Options{}); err != nil {
		t.Fatal(err)
	}
	var firstLayout, logs []string
	for _, name := range names(t, b, "aligned/") {
		switch ref := objname.ParseCatalog("aligned/", name); {
		case ref.Version == 1:
			firstLayout = append(firstLayout, name)
		case objname.Parse("aligned/", name).Kind == objname.Log && objname.Parse("aligned/", name).Checkpoint == 0:
			logs = append(logs, name)
		}
	}
	if want := []string{objname.CatalogGenerationName("aligned/", 4)}; !slices.Equal(firstLayout, want) {
		t.Fatalf("the first layout's objects left: %v, want the fence %v", firstLayout, want)
	}
	if len(logs) != 0 {
		t.Fatalf("log objects of the first layout's checkpoints left: %v", logs)
	}
	// A new process of the old release still cannot start.
	if _, err := catalogv1.Join(ctx, b, oldCfg(0)); err == nil {
		t.Fatal("a process of the old release joined after the collection")
	}
}

// TestUpgradeIndependent: the upgrade of an independent job restores each
// instance's latest part, and nothing for an instance that committed
// none.
func TestUpgradeIndependent(t *testing.T) {
	b := corpus(t)
	c := func(i int) catalog.Config {
		return catalog.Config{JobID: "independent", Instances: 3, Process: i, MaxParallelism: 8, Mode: catalog.Independent, Logger: quiet}
	}
	m := join(t, b, c(0))
	g := m.Generation()
	var objects []string
	for _, r := range g.Restored {
		objects = append(objects, r.Object)
	}
	want := []string{objname.CatalogPartName("independent/", 1, 2, 0), objname.CatalogPartName("independent/", 1, 1, 1)}
	if g.Number != 2 || g.FirstCheckpoint != 3 || !slices.Equal(objects, want) {
		t.Fatalf("generation %+v, restored %v", g, objects)
	}
	if got := readState(t, b, m.Restore(0)[0]); !slices.Equal(got, changesOf("independent", 0, 2)) {
		t.Fatalf("instance 0 reads %q", got)
	}
	if m2 := join(t, b, c(2)); len(m2.Restore(2)) != 0 {
		t.Fatalf("instance 2 restores %v", m2.Restore(2))
	}
}

// TestUpgradeRace: processes that upgrade at once end in one generation
// of the second layout, with one fence.
func TestUpgradeRace(t *testing.T) {
	b := corpus(t)
	c := func(i int) catalog.Config {
		return catalog.Config{JobID: "aligned", Instances: 2, Process: i, MaxParallelism: 8, Logger: quiet}
	}
	errs := make(chan error, 2)
	gens := make(chan int64, 2)
	for i := range 2 {
		go func() {
			m, err := catalog.Join(t.Context(), b, c(i))
			if err == nil {
				gens <- m.Generation().Number
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if a, b := <-gens, <-gens; a != b {
		t.Fatalf("joined generations %d and %d", a, b)
	}
	var fences []string
	for _, name := range names(t, b, "aligned/_catalog/") {
		if ref := objname.ParseCatalog("aligned/", name); ref.Version == 1 && ref.Kind == objname.CatalogGeneration && ref.Generation > 2 {
			fences = append(fences, name)
		}
	}
	if len(fences) != 1 || !strings.HasSuffix(fences[0], filepath.ToSlash("g00000000000000000003/generation")) {
		t.Fatalf("fences %v", fences)
	}
}

// TestUpgradeIndependentNoRollback: the upgrade of an independent job
// whose instance 1 committed nothing since a rescale restores, for its
// key groups, what its generation restored, and, for instance 0's, the
// later part instance 0 committed (and confirmed): the first layout's
// own choice, the restored part for both, would roll instance 0 back.
func TestUpgradeIndependentNoRollback(t *testing.T) {
	ctx := t.Context()
	b := dstltest.NewBackend()
	oldCfg := func(instances, i int) catalogv1.Config {
		return catalogv1.Config{JobID: "job", Instances: instances, Index: i, MaxParallelism: 8, Mode: catalogv1.Independent, Grace: time.Hour}
	}
	oldJoin := func(instances, i int) *catalogv1.Member {
		m, err := catalogv1.Join(ctx, b, oldCfg(instances, i))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if _, err := oldJoin(1, 0).Commit(ctx, 1, []byte("s1"), nil, nil); err != nil {
		t.Fatal(err)
	}
	two := oldJoin(2, 0)
	oldJoin(2, 1)
	if _, err := two.Commit(ctx, 2, []byte("s2"), nil, nil); err != nil {
		t.Fatal(err)
	}
	m := join(t, b, catalog.Config{JobID: "job", Instances: 2, Process: 0, MaxParallelism: 8, Mode: catalog.Independent, Logger: quiet})
	own := catalog.RangeOf(0, 2, 8)
	for _, r := range m.Generation().Restored {
		for _, kg := range r.KeyGroups {
			if kg.Start <= own.End && own.Start <= kg.End && objname.ParseCatalog("job/", r.Object).Checkpoint < 2 {
				t.Errorf("the upgrade restores instance 0's key groups %v from %s; instance 0 confirmed checkpoint 2", own, r.Object)
			}
		}
	}
	m1 := join(t, b, catalog.Config{JobID: "job", Instances: 2, Process: 1, MaxParallelism: 8, Mode: catalog.Independent, Logger: quiet})
	if parts := m1.Restore(1); len(parts) != 1 || parts[0].Checkpoint != 1 || parts[0].KeyGroups != catalog.RangeOf(1, 2, 8) {
		t.Errorf("instance 1 restores %+v, want checkpoint 1 for key groups %v", parts, catalog.RangeOf(1, 2, 8))
	}
}
