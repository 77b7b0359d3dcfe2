package job_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/dstlgo/dstl/backends/mem"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl/objname"
)

// check runs the checks that need the whole schedule: those of each
// task's calls, of rollbacks and of the store's history.
func (w *simWorld) check() {
	var tasks []*simTask
	for _, inc := range w.incs {
		select {
		case <-inc.done:
			tasks = append(tasks, inc.tasks...)
		default: // it hangs: failed already
		}
	}
	for _, t := range tasks {
		w.checkCompletes(t)
	}
	w.checkRollback(tasks)
	w.checkHistory()
	w.checkCatalog()
}

// checkCompletes checks that Complete was told, in order, without gaps
// or repeats, a prefix of the checkpoints the instance took part in: those
// whose metadata it gave, but for the takes that failed.
func (w *simWorld) checkCompletes(t *simTask) {
	if len(t.completes) > 0 && !t.restored {
		w.failf("%v: Complete before its restore", t)
	}
	failed := t.inc.failed[t.in.Generation]
	var committed []int64
	for _, n := range t.taken {
		if !failed[n] {
			committed = append(committed, n)
		}
	}
	w.count(func(st *simStats) { st.Completes += len(t.completes) })
	if len(t.completes) > len(committed) || !slices.Equal(t.completes, committed[:len(t.completes)]) {
		w.failf("completes in order: %v was told Complete of %v; it took part in %v (its takes of %v failed)", t, t.completes, committed, failed)
	}
}

// checkRollback checks that no generation restores, for any key group,
// an older checkpoint or offset than one a task of an earlier
// generation was told complete (and so published).
func (w *simWorld) checkRollback(tasks []*simTask) {
	type published struct {
		t      *simTask
		n      int64
		offset int64
	}
	// Key group -> generation -> the latest checkpoint told complete.
	latest := map[int]map[int64]published{}
	for _, t := range tasks {
		if len(t.completes) == 0 {
			continue
		}
		n := t.completes[len(t.completes)-1]
		for kg, o := range t.metas[n] {
			if latest[kg] == nil {
				latest[kg] = map[int64]published{}
			}
			if p, ok := latest[kg][t.in.Generation]; !ok || p.n < n {
				latest[kg][t.in.Generation] = published{t, n, o}
			}
		}
	}
	for _, t := range tasks {
		if !t.restored {
			continue
		}
		for kg := t.in.KeyGroups.Start; kg <= t.in.KeyGroups.End; kg++ {
			for g, p := range latest[kg] {
				if g >= t.in.Generation {
					continue
				}
				if t.restoredCp[kg] >= p.n && t.base[kg] >= p.offset {
					continue
				}
				w.failf("rollback: %v restored key group %d at checkpoint %d, offset %d; %v was told checkpoint %d complete, at offset %d",
					t, kg, t.restoredCp[kg], t.base[kg], p.t, p.n, p.offset)
			}
		}
	}
}

// simGen is what the history says of a generation.
type simGen struct {
	rec       *catalog.Generation
	commits   map[int64]map[int]string // checkpoint -> process -> commit, stored now
	completed []int64                  // the checkpoints complete, in order
	completes map[int64][]string       // checkpoint -> its commits when it completed
	byProc    map[int][]string         // process -> its commits, in order (the independent mode)
	fenced    bool
	atFence   int64 // the latest complete checkpoint when the fence was stored
}

// checkHistory replays the store's changes, in the store's order, and
// checks that no checkpoint completes naming an object that is gone, that
// no generation restores one, and that no delete removes an object that
// a retained checkpoint of the live generation names, or what the live
// generation restored while it needs it, or the live generation's record
// or claims.
func (w *simWorld) checkHistory() {
	prefix := objname.JobPrefix(simJob)
	exists := map[string]bool{}
	records := map[string]*catalog.Record{}
	gens := map[int64]*simGen{}
	gen := func(g int64) *simGen {
		if gens[g] == nil {
			gens[g] = &simGen{commits: map[int64]map[int]string{}, completes: map[int64][]string{}, byProc: map[int][]string{}}
		}
		return gens[g]
	}
	var live int64
	// objectsOf returns the objects a commit's parts name: of the parts
	// with the key groups of r, when r is not nil (a restored commit).
	objectsOf := func(name string, r *catalog.Restored) []string {
		rec := records[name]
		if rec == nil {
			return nil
		}
		var out []string
		for _, p := range rec.Parts {
			if r == nil || slices.Contains(r.KeyGroups, p.KeyGroups) {
				out = append(out, p.Objects...)
			}
		}
		return out
	}
	gone := func(names []string) []string {
		var out []string
		for _, o := range names {
			if !exists[o] {
				out = append(out, o)
			}
		}
		return out
	}
	for _, c := range w.history {
		ref := objname.ParseCatalog(prefix, c.key)
		if c.deleted {
			w.checkDelete(c, ref, live, gens, objectsOf)
			exists[c.key] = false
			if ref.Kind == objname.CatalogCommit && ref.Version == 2 {
				delete(gen(ref.Generation).commits[ref.Checkpoint], ref.Process)
				w.stats.CommitDeletes++
			} else if ref.Kind == objname.CatalogOther {
				w.stats.DataDeletes++
			}
			continue
		}
		exists[c.key] = true
		if ref.Kind == objname.CatalogOther || ref.Version != 2 {
			continue
		}
		rec, err := catalog.DecodeRecord(c.key, c.data)
		if err != nil {
			w.failf("the catalog object %s, stored at %v: %v", c.key, c.at, err)
			continue
		}
		records[c.key] = rec
		switch ref.Kind {
		case objname.CatalogGeneration:
			g := gen(ref.Generation)
			g.rec = rec.Generation
			live = max(live, ref.Generation)
			w.stats.Generations++
			if prev := gens[ref.Generation-1]; prev != nil && w.p.mode == catalog.Aligned && rec.Generation.RestoredCheckpoint < prev.atFence {
				w.failf("rollback: generation %d, stored at %v, restores checkpoint %d; generation %d completed checkpoint %d before its fence",
					ref.Generation, c.at, rec.Generation.RestoredCheckpoint, ref.Generation-1, prev.atFence)
			}
			for _, r := range rec.Generation.Restored {
				if !exists[r.Object] {
					w.failf("deleted: generation %d, stored at %v, restores %s, which is gone", ref.Generation, c.at, r.Object)
				} else if missing := gone(objectsOf(r.Object, &r)); len(missing) > 0 {
					w.failf("deleted: generation %d, stored at %v, restores %s, whose objects %v are gone", ref.Generation, c.at, r.Object, missing)
				}
			}
		case objname.CatalogFence:
			if g := gen(ref.Generation); !g.fenced {
				g.fenced = true
				if k := len(g.completed); k > 0 {
					g.atFence = g.completed[k-1]
				}
			}
		case objname.CatalogCommit:
			w.stats.Commits++
			g := gen(ref.Generation)
			if g.rec == nil {
				w.failf("the commit %s, stored at %v, is of a generation with no record", c.key, c.at)
				continue
			}
			if g.commits[ref.Checkpoint] == nil {
				g.commits[ref.Checkpoint] = map[int]string{}
			}
			g.commits[ref.Checkpoint][ref.Process] = c.key
			g.byProc[ref.Process] = append(g.byProc[ref.Process], c.key)
			if next := gens[ref.Generation+1]; next != nil && next.rec != nil {
				continue // its successor's record is written: no reader takes it as complete
			}
			var names []string
			switch {
			case g.rec.Mode == catalog.Independent:
				names = []string{c.key}
			case len(g.commits[ref.Checkpoint]) == g.rec.Processes && (len(g.completed) == 0 || ref.Checkpoint > g.completed[len(g.completed)-1]):
				for _, name := range g.commits[ref.Checkpoint] {
					names = append(names, name)
				}
				slices.Sort(names)
				g.completed = append(g.completed, ref.Checkpoint)
				g.completes[ref.Checkpoint] = names
			}
			if len(names) > 0 {
				w.stats.Completions++
			}
			for _, name := range names {
				if missing := gone(objectsOf(name, nil)); len(missing) > 0 {
					w.failf("deleted: checkpoint %d of generation %d completed at %v (by %s) naming objects that are gone: %v of %s",
						ref.Checkpoint, ref.Generation, c.at, c.key, missing, name)
				}
			}
		}
	}
}

// checkDelete checks a delete of the history against what the live
// generation keeps at that point.
func (w *simWorld) checkDelete(c simChange, ref objname.CatalogRef, live int64, gens map[int64]*simGen, objectsOf func(string, *catalog.Restored) []string) {
	g := gens[live]
	if g == nil || g.rec == nil {
		return
	}
	if (ref.Kind == objname.CatalogGeneration || ref.Kind == objname.CatalogClaim) && ref.Version == 2 && ref.Generation == live {
		w.failf("deleted: %s of the live generation %d, at %v", c.key, live, c.at)
		return
	}
	kept := map[string]*catalog.Restored{} // commit -> the restored key groups (nil: every part)
	retain := w.p.retain
	needRestored := false
	if g.rec.Mode == catalog.Aligned {
		for _, n := range g.completed[max(0, len(g.completed)-retain):] {
			for _, name := range g.completes[n] {
				kept[name] = nil
			}
		}
		needRestored = len(g.completed) < retain
	} else {
		for p := range g.rec.Processes {
			ns := g.byProc[p]
			for _, name := range ns[max(0, len(ns)-retain):] {
				kept[name] = nil
			}
			needRestored = needRestored || len(ns) < retain
		}
	}
	if needRestored {
		for i := range g.rec.Restored {
			kept[g.rec.Restored[i].Object] = &g.rec.Restored[i]
		}
	}
	for name, r := range kept {
		why := fmt.Sprintf("a retained checkpoint's commit of generation %d", live)
		if r != nil {
			why = fmt.Sprintf("restored by generation %d, which has fewer than %d complete checkpoints", live, retain)
		}
		if c.key == name {
			w.failf("deleted: %s, %s, at %v", name, why, c.at)
			continue
		}
		if slices.Contains(objectsOf(name, r), c.key) {
			w.failf("deleted: %s, which %s names (%s), at %v", c.key, name, why, c.at)
		}
	}
}

// checkCatalog reads the whole catalog once more: no object is damaged.
func (w *simWorld) checkCatalog() {
	b, err := mem.Open(context.Background(), mem.Config{Store: w.store})
	if err != nil {
		w.failf("open the store: %v", err)
		return
	}
	defer b.Close()
	if _, err := catalog.Inspect(context.Background(), b, simJob, catalog.InspectOptions{Commits: func(int64, int64) bool { return true }}); err != nil {
		w.failf("the catalog at the end: %v", err)
	}
}
