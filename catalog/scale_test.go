package catalog_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstltest"
)

var scaleFull = flag.Bool("scale.full", false, "TestScale: 16, 256 and 1,024 processes over 200 checkpoints, and 1,024 instances in 8 processes (make bench-catalog)")

// pages counts the listings that go through it and their pages, at 1,000
// names a page, as S3 and GCS return them.
type pages struct {
	backends.Backend
	mu           sync.Mutex
	lists, pages int64
	maxPages     int64 // of one listing
}

// Unwrap returns the backend the calls go to.
func (p *pages) Unwrap() backends.Backend { return p.Backend }

func (p *pages) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	n := int64(0)
	err := p.Backend.List(ctx, prefix, func(oi backends.ObjectInfo) error { n++; return fn(oi) })
	pg := max(1, (n+999)/1000)
	p.mu.Lock()
	p.lists++
	p.pages += pg
	p.maxPages = max(p.maxPages, pg)
	p.mu.Unlock()
	return err
}

// take returns the counts since the last take and starts again.
func (p *pages) take() (lists, pages, maxPages int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lists, pages, maxPages = p.lists, p.pages, p.maxPages
	p.lists, p.pages, p.maxPages = 0, 0, 0
	return
}

// scaleRound is what one checkpoint of the whole job cost.
type scaleRound struct {
	puts, gets, deletes, lists, pages, maxPages int64
	// sweep says that the leader's collection swept in this round:
	// its listings of the job's prefix are counted apart.
	sweep bool
}

// scaleRun is a job of p instances in q processes, all in this test
// process, on an in-memory store that counts requests.
type scaleRun struct {
	t      testing.TB
	p, q   int
	mode   catalog.Mode
	count  *counting.Backend
	pg     *pages
	ms     []*catalog.Member
	now    time.Time
	rounds []scaleRound
}

func newScaleRun(t testing.TB, b backends.Backend, p, q int, mode catalog.Mode) *scaleRun {
	r := &scaleRun{t: t, p: p, q: q, mode: mode, now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	r.pg = &pages{Backend: b}
	r.count = counting.New(r.pg)
	r.ms = r.join()
	return r
}

func (r *scaleRun) cfg(proc int) catalog.Config {
	return catalog.Config{JobID: "job", Instances: r.p, Processes: r.q, Process: proc, MaxParallelism: max(128, r.p), Mode: r.mode,
		Grace: time.Hour, Now: func() time.Time { return r.now }, Logger: quiet}
}

// join joins every process, concurrently (a start, or a restart storm).
func (r *scaleRun) join() []*catalog.Member {
	ms := make([]*catalog.Member, r.q)
	errs := make([]error, r.q)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range r.q {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ms[i], errs[i] = catalog.Join(context.Background(), r.count, r.cfg(i))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			r.t.Fatalf("join of process %d: %v", i, err)
		}
	}
	// Processes that joined a generation a later one fenced rejoin.
	latest := int64(0)
	for _, m := range ms {
		latest = max(latest, m.Generation().Number)
	}
	for i, m := range ms {
		if m.Generation().Number != latest {
			re, err := catalog.Join(context.Background(), r.count, r.cfg(i))
			if err != nil {
				r.t.Fatalf("rejoin of process %d: %v", i, err)
			}
			ms[i] = re
		}
	}
	return ms
}

// round commits checkpoint n on every process, the leader last (as the
// runner schedules it), collecting every collectEvery checkpoints, and
// records what it cost.
func (r *scaleRun) round(n int64, collectEvery int) catalog.Status {
	before := r.count.Stats()
	r.pg.take()
	var st catalog.Status
	for i := len(r.ms) - 1; i >= 0; i-- {
		m := r.ms[i]
		var ps []catalog.InstanceState
		for _, inst := range m.Instances() {
			ps = append(ps, catalog.InstanceState{Instance: inst, State: []byte("s")})
		}
		s, err := m.Commit(context.Background(), n, ps)
		if err != nil {
			r.t.Fatalf("process %d, checkpoint %d: %v", i, n, err)
		}
		if i == 0 {
			st = s
		}
	}
	sweep := false
	if collectEvery > 0 && n%int64(collectEvery) == 0 {
		_, rep, err := r.ms[0].Collect(context.Background(), collect.Options{Now: func() time.Time { return r.now }})
		if err != nil {
			r.t.Fatalf("collect at %d: %v", n, err)
		}
		sweep = rep != nil
	}
	after := r.count.Stats()
	lists, pg, maxPg := r.pg.take()
	r.rounds = append(r.rounds, scaleRound{puts: after.Puts - before.Puts, gets: after.Gets - before.Gets,
		deletes: after.Deletes - before.Deletes, lists: lists, pages: pg, maxPages: maxPg, sweep: sweep})
	r.now = r.now.Add(10 * time.Second)
	return st
}

// avg returns the mean of f over rounds [from, to).
func (r *scaleRun) avg(from, to int, f func(scaleRound) int64) float64 {
	sum := int64(0)
	for _, x := range r.rounds[from:to] {
		sum += f(x)
	}
	return float64(sum) / float64(to-from)
}

// TestScale: what a checkpoint costs the whole job, flat in the number of
// instances, in its history and in the grace: per instance at most one
// put and two GET-class requests, each listing at most ⌈P/1,000⌉ pages,
// LIST pages per checkpoint at most P and flat from checkpoint 10 on; a
// process of many instances commits them in one object. With -scale.full
// (make bench-catalog), 16, 256 and 1,024 processes over 200 checkpoints,
// and 1,024 instances in 8 processes; otherwise a short slice.
func TestScale(t *testing.T) {
	type shape struct {
		p, q        int
		checkpoints int
		mode        catalog.Mode
	}
	shapes := []shape{{16, 16, 30, catalog.Aligned}, {64, 8, 30, catalog.Aligned}, {16, 16, 30, catalog.Independent}}
	if *scaleFull {
		shapes = []shape{{16, 16, 200, catalog.Aligned}, {256, 256, 200, catalog.Aligned}, {1024, 1024, 200, catalog.Aligned},
			{1024, 8, 200, catalog.Aligned}, {256, 256, 200, catalog.Independent}}
	}
	var report strings.Builder
	fmt.Fprintf(&report, "%-11s %-6s %-9s %-12s %-12s %-12s %-13s %-12s %-12s %-10s %s\n", "MODE", "P", "PROCESSES",
		"PUT/INST", "GET/INST", "LIST/INST", "PAGES/CKPT", "PAGES@10-20", "PAGES@LAST10", "MAX PAGES", "SWEEPS (apart)")
	for _, sh := range shapes {
		t.Run(fmt.Sprintf("%s-%d-in-%d", sh.mode, sh.p, sh.q), func(t *testing.T) {
			r := newScaleRun(t, dstltest.NewBackend(), sh.p, sh.q, sh.mode)
			first := r.ms[0].Generation().FirstCheckpoint
			for k := range sh.checkpoints {
				st := r.round(first+int64(k), 5)
				if sh.mode == catalog.Aligned && st.Complete != first+int64(k) {
					t.Fatalf("checkpoint %d: the leader knows %d complete", first+int64(k), st.Complete)
				}
			}
			// Steady state: from checkpoint 10 on (the first rounds have
			// no previous leader commit to read); the rounds in which the
			// leader swept the job's objects are counted apart.
			from, to := 10, sh.checkpoints
			var sweeps, sweepPages, sweepGets int64
			var steady []scaleRound
			for _, x := range r.rounds[from:to] {
				if x.sweep {
					sweeps++
					sweepPages += x.pages
					sweepGets += x.gets
					continue
				}
				steady = append(steady, x)
			}
			r.rounds = append(append(r.rounds[:from:from], steady...), r.rounds[to:]...)
			to = from + len(steady)
			perInst := func(f func(scaleRound) int64) float64 { return r.avg(from, to, f) / float64(sh.p) }
			puts := perInst(func(x scaleRound) int64 { return x.puts })
			gets := perInst(func(x scaleRound) int64 { return x.gets })
			lists := perInst(func(x scaleRound) int64 { return x.lists })
			pagesAll := r.avg(from, to, func(x scaleRound) int64 { return x.pages })
			early := r.avg(10, 20, func(x scaleRound) int64 { return x.pages })
			late := r.avg(to-10, to, func(x scaleRound) int64 { return x.pages })
			maxPages := int64(0)
			for _, x := range r.rounds[from:to] {
				maxPages = max(maxPages, x.maxPages)
			}
			fmt.Fprintf(&report, "%-11s %-6d %-9d %-12.3f %-12.3f %-12.4f %-13.2f %-12.2f %-12.2f %-10d %d sweeps: %d pages, %d gets\n", sh.mode, sh.p, sh.q,
				puts, gets, lists, pagesAll, early, late, maxPages, sweeps, sweepPages, sweepGets)
			limit := int64(math.Ceil(float64(sh.p) / 1000))
			switch {
			case puts > 1:
				t.Errorf("%.3f puts per instance and checkpoint, want at most 1", puts)
			case gets+lists > 2:
				t.Errorf("%.3f GET-class requests per instance and checkpoint, want at most 2", gets+lists)
			case maxPages > limit:
				t.Errorf("a listing of %d pages, want at most %d", maxPages, limit)
			case pagesAll > float64(sh.p):
				t.Errorf("%.2f list pages per checkpoint, want at most %d", pagesAll, sh.p)
			case math.Abs(late-early) > 0.1*max(early, 1):
				t.Errorf("list pages per checkpoint grew from %.2f to %.2f", early, late)
			}
			if sh.q < sh.p && r.avg(from, to, func(x scaleRound) int64 { return x.puts }) > float64(sh.q) {
				t.Errorf("%d instances in %d processes: %.2f puts per checkpoint, want at most %d", sh.p, sh.q,
					r.avg(from, to, func(x scaleRound) int64 { return x.puts }), sh.q)
			}
		})
	}
	t.Logf("requests per checkpoint of the whole job, steady state (checkpoint 10 on), Collect every 5 checkpoints:\n%s", report.String())
}

// TestScaleRestartStorm: every process of a running job restarts at once;
// the job's requests until its first complete checkpoint after it.
func TestScaleRestartStorm(t *testing.T) {
	procs := []int{16, 64}
	if *scaleFull {
		procs = []int{16, 256, 1024}
	}
	var report strings.Builder
	fmt.Fprintf(&report, "%-6s %-10s %-8s %-8s %-8s %-8s %-12s %-10s\n", "P", "GENERATION", "PUTS", "GETS", "LISTS", "PAGES", "PER PROCESS", "TIME")
	for _, p := range procs {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			mem := dstltest.NewBackend()
			r := newScaleRun(t, mem, p, p, catalog.Aligned)
			first := r.ms[0].Generation().FirstCheckpoint
			for k := range 3 {
				r.round(first+int64(k), 0)
			}
			before := r.count.Stats()
			r.pg.take()
			start := time.Now()
			var stormLists, stormPages int64
			// Every process restarts at once: its slot is held (by the
			// process it replaces), so each joins or starts a generation.
			for i := range r.ms {
				r.ms[i] = nil
			}
			r.ms = r.join()
			stormLists, stormPages, _ = r.pg.take()
			n := r.ms[0].Generation().FirstCheckpoint
			st := r.round(n, 0)
			elapsed := time.Since(start)
			if st.Complete != n {
				t.Fatalf("the first checkpoint after the storm, %d: the leader knows %d complete", n, st.Complete)
			}
			after := r.count.Stats()
			last := r.rounds[len(r.rounds)-1]
			lists, pg := stormLists+last.lists, stormPages+last.pages
			total := after.Puts - before.Puts + after.Gets - before.Gets + lists
			fmt.Fprintf(&report, "%-6d %-10d %-8d %-8d %-8d %-8d %-12.1f %-10v\n", p, r.ms[0].Generation().Number,
				after.Puts-before.Puts, after.Gets-before.Gets, lists, pg, float64(total)/float64(p), elapsed.Round(time.Millisecond))
		})
	}
	t.Logf("a restart storm: requests of the whole job until its first complete checkpoint:\n%s", report.String())
}

var _ io.Writer = (*strings.Builder)(nil)
