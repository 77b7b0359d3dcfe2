package catalog_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// summary writes a listing one line per generation and per checkpoint:
//
//	g1 fenced aligned 3 instances, claims 0,1,2, restored 0, first 1
//	g1/1 complete parts 0,1,2 kept 0,1,2
//	g2/4 pending parts 0 kept 0 retained
func summary(l *catalog.Listing) []string {
	ints := func(xs []int) string {
		s := make([]string, len(xs))
		for i, x := range xs {
			s[i] = fmt.Sprint(x)
		}
		return strings.Join(s, ",")
	}
	var out []string
	for _, g := range l.Generations {
		status := "fenced"
		if g.Live {
			status = "live"
		}
		var claims []int
		for _, c := range g.Claims {
			claims = append(claims, c.Instance)
		}
		line := fmt.Sprintf("g%d %s", g.Number, status)
		if r := g.Record; r != nil {
			line += fmt.Sprintf(" %s %d instances, claims %s, restored %d, first %d", r.Mode, r.Instances(), ints(claims), r.RestoredCheckpoint, r.FirstCheckpoint)
		} else {
			line += fmt.Sprintf(" no record, claims %s", ints(claims))
		}
		out = append(out, line)
		for _, c := range g.Checkpoints {
			var parts, kept []int
			for _, p := range c.Parts {
				parts = append(parts, p.Instance)
				if p.Kept {
					kept = append(kept, p.Instance)
				}
			}
			line := fmt.Sprintf("g%d/%d %s parts %s kept %s", c.Generation, c.Number, c.State, ints(parts), ints(kept))
			if c.Retained {
				line += " retained"
			}
			out = append(out, line)
		}
	}
	return out
}

// inspectCase builds a catalog and returns a member of its live
// generation (nil for none).
type inspectCase struct {
	name   string
	retain int
	build  func(t *testing.T, b backends.Backend, retain int) *catalog.Member
	want   []string
}

func withRetain(c catalog.Config, retain int) catalog.Config { c.Retain = retain; return c }

var inspectCases = []inspectCase{
	{
		name: "empty job",
		build: func(*testing.T, backends.Backend, int) *catalog.Member {
			return nil
		},
	},
	{
		name:   "aligned, restarted",
		retain: 1,
		build: func(t *testing.T, b backends.Backend, retain int) *catalog.Member {
			var ms []*catalog.Member
			for i := range 3 {
				ms = append(ms, join(t, b, withRetain(cfg(3, i), retain)))
			}
			for _, m := range ms {
				commit(t, m, 1)
			}
			commit(t, ms[0], 2)                               // never completes
			ms[1] = join(t, b, withRetain(cfg(3, 1), retain)) // a restart: generation 2
			ms[0], ms[2] = rejoin(t, ms[0]), rejoin(t, ms[2]) // the fenced ones follow
			for _, m := range ms {
				commit(t, m, 3)
			}
			commit(t, ms[0], 4) // pending
			return ms[0]
		},
		want: []string{
			"g1 fenced aligned 3 instances, claims 0,1,2, restored 0, first 1",
			"g1/1 complete parts 0,1,2 kept ", // restored by generation 2, which completed its own Retain (1) since, past the grace
			"g1/2 never-complete parts 0 kept ",
			"g2 live aligned 3 instances, claims 0,1,2, restored 1, first 3",
			"g2/3 complete parts 0,1,2 kept 0,1,2 retained",
			"g2/4 pending parts 0 kept 0",
		},
	},
	{
		name:   "aligned, retain 2, restored parts no longer needed",
		retain: 2,
		build: func(t *testing.T, b backends.Backend, retain int) *catalog.Member {
			m := join(t, b, withRetain(cfg(2, 0), retain))
			z := join(t, b, withRetain(cfg(2, 1), retain))
			commit(t, m, 1)
			commit(t, z, 1)
			m = join(t, b, withRetain(cfg(2, 0), retain)) // generation 2 restores 1
			z = rejoin(t, z)
			for n := int64(2); n <= 4; n++ {
				commit(t, m, n)
				commit(t, z, n)
			}
			commit(t, z, 5)
			return m
		},
		want: []string{
			"g1 fenced aligned 2 instances, claims 0,1, restored 0, first 1",
			"g1/1 complete parts 0,1 kept ",
			"g2 live aligned 2 instances, claims 0,1, restored 1, first 2",
			"g2/2 complete parts 0,1 kept ",
			"g2/3 complete parts 0,1 kept 0,1 retained",
			"g2/4 complete parts 0,1 kept 0,1 retained",
			"g2/5 pending parts 1 kept 1",
		},
	},
	{
		name:   "independent",
		retain: 1,
		build: func(t *testing.T, b backends.Backend, retain int) *catalog.Member {
			ind := func(p, i int) catalog.Config {
				c := withRetain(cfg(p, i), retain)
				c.Mode = catalog.Independent
				return c
			}
			a, c := join(t, b, ind(2, 0)), join(t, b, ind(2, 1))
			commit(t, a, 1)
			commit(t, a, 2)
			commit(t, c, 1)
			return a
		},
		want: []string{
			"g1 live independent 2 instances, claims 0,1, restored 0, first 1",
			"g1/1 complete parts 0,1 kept 1 retained",
			"g1/2 complete parts 0 kept 0 retained",
		},
	},
	{
		name:   "rescaled, no checkpoint of its own yet",
		retain: 1,
		build: func(t *testing.T, b backends.Backend, retain int) *catalog.Member {
			for i := range 3 {
				commit(t, join(t, b, withRetain(cfg(3, i), retain)), 1)
			}
			m := join(t, b, withRetain(cfg(2, 0), retain))
			join(t, b, withRetain(cfg(2, 1), retain))
			return m
		},
		want: []string{
			"g1 fenced aligned 3 instances, claims 0,1,2, restored 0, first 1",
			"g1/1 complete parts 0,1,2 kept 0,1,2",
			"g2 live aligned 2 instances, claims 0,1, restored 1, first 2",
		},
	},
}

func rejoin(t *testing.T, m *catalog.Member) *catalog.Member {
	t.Helper()
	r, err := m.Rejoin(t.Context())
	if err != nil {
		t.Fatalf("Rejoin of instance %d: %v", m.Index(), err)
	}
	return r
}

// TestInspect: the listing has every generation, live or fenced, with its
// claims and checkpoints, each complete, pending or never complete, and
// marks what the deletion rule keeps; its retention is the one the live
// generation's members plan.
func TestInspect(t *testing.T) {
	for _, tc := range inspectCases {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			live := tc.build(t, b, tc.retain)
			// Past the grace: what was superseded since is no longer kept.
			later := func() time.Time { return time.Now().Add(2 * time.Hour) }
			l, err := catalog.Inspect(t.Context(), b, "job", catalog.InspectOptions{Retain: tc.retain, Grace: time.Hour, Now: later})
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(l); !slices.Equal(got, tc.want) {
				t.Fatalf("listing:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if l.Prefix != "job/" || len(l.Other) != 0 || len(l.Retention.Missing) != 0 {
				t.Fatalf("listing %+v", l)
			}
			if live == nil {
				if l.Live != 0 || len(l.Retention.Parts) != 0 {
					t.Fatalf("empty job: live %d, retention %+v", l.Live, l.Retention)
				}
				return
			}
			if l.Live != live.Generation().Number {
				t.Fatalf("live generation %d, want %d", l.Live, live.Generation().Number)
			}
			// Now, with the members' grace, the retention is what the live
			// member plans; past the grace, what a plan from outside the
			// job with that clock does.
			p, err := live.Plan(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			ln, err := catalog.Inspect(t.Context(), b, "job", catalog.InspectOptions{Retain: tc.retain, Grace: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ln.Retention.Retained, p.Retained) || !slices.Equal(ln.Retention.Parts, p.Parts) {
				t.Fatalf("retention %+v, the live member plans retained %v, parts %v", ln.Retention, p.Retained, p.Parts)
			}
			pl, err := catalog.PlanJob(t.Context(), b, "job", catalog.PlanOptions{Retain: tc.retain, Grace: time.Hour, Now: later})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(l.Retention.Retained, pl.Retained) || !slices.Equal(l.Retention.Parts, pl.Parts) {
				t.Fatalf("retention past the grace %+v, a plan past the grace retains %v, parts %v", l.Retention, pl.Retained, pl.Parts)
			}
			// Without InspectOptions.Parts, no part is read.
			for _, g := range l.Generations {
				for _, c := range g.Checkpoints {
					for _, part := range c.Parts {
						if part.Part != nil || part.Err != nil {
							t.Fatalf("part %s read: %+v", part.Object.Name, part)
						}
					}
				}
			}
		})
	}
}

// TestInspectReads: the parts of the checkpoints asked for are read, with
// their state, metadata and objects; claims are read when asked for.
func TestInspectReads(t *testing.T) {
	b := dstltest.NewBackend()
	c0, c1 := cfg(2, 0), cfg(2, 1)
	c0.Owner, c1.Owner = "pod-0", "pod-1"
	m0, m1 := join(t, b, c0), join(t, b, c1)
	for n := int64(1); n <= 2; n++ {
		commit(t, m0, n)
		commit(t, m1, n)
	}
	l, err := catalog.Inspect(t.Context(), b, "job", catalog.InspectOptions{Claims: true,
		Parts: func(g, n int64) bool { return g == 1 && n == 2 }})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Checkpoint(0, 1); got == nil || got.Parts[0].Part != nil {
		t.Fatalf("checkpoint 1: %+v, want its parts not read", got)
	}
	c := l.Checkpoint(1, 2)
	if c == nil || len(c.Parts) != 2 {
		t.Fatalf("checkpoint 2: %+v", c)
	}
	for i, p := range c.Parts {
		if p.Err != nil || p.Part == nil {
			t.Fatalf("part %d: %+v", i, p)
		}
		want := fmt.Sprintf("g1-i%d-n2", i)
		if string(p.Part.State) != want || p.Part.Metadata["offset"] != "20" || !slices.Equal(p.Part.Objects, []string{"job/obj-" + want}) ||
			p.Part.KeyGroups != m0.Generation().KeyGroups[i] || p.Part.Name != p.Object.Name || p.Object.Size == 0 {
			t.Fatalf("part %d: %+v", i, p.Part)
		}
	}
	g := l.Generation(1)
	if g == nil || len(g.Claims) != 2 || g.Claims[0].Owner != "pod-0" || g.Claims[1].Owner != "pod-1" || g.Claims[1].Created.IsZero() {
		t.Fatalf("claims %+v", g)
	}
	if l.Generation(2) != nil || l.Checkpoint(2, 2) != nil || l.Checkpoint(0, 3) != nil {
		t.Fatal("a generation or checkpoint that does not exist is found")
	}
}

// TestInspectDamaged: a damaged record, claim or part is no stop: the
// listing says which object is damaged, and the error names every one.
func TestInspectDamaged(t *testing.T) {
	all := catalog.InspectOptions{Claims: true, Parts: func(int64, int64) bool { return true }}
	for _, tc := range []struct {
		name    string
		objects []string
		check   func(l *catalog.Listing) bool // the damaged objects' Err is set
	}{
		{"generation record", []string{objname.CatalogGenerationName("job/", 2)}, func(l *catalog.Listing) bool {
			g := l.Generation(2)
			// A generation of unknown instance set has checkpoints of
			// unknown state, and nothing retained.
			return g.Record == nil && g.Err != nil && g.Checkpoints[0].State == catalog.Unknown && len(l.Retention.Parts) == 0
		}},
		{"claim", []string{objname.CatalogClaimName("job/", 1, 1)}, func(l *catalog.Listing) bool {
			return l.Generation(1).Claims[1].Err != nil && l.Generation(1).Claims[0].Err == nil
		}},
		{"two parts", []string{objname.CatalogPartName("job/", 1, 1, 0), objname.CatalogPartName("job/", 2, 2, 0)}, func(l *catalog.Listing) bool {
			return l.Checkpoint(1, 1).Parts[0].Err != nil && l.Checkpoint(2, 2).Parts[0].Err != nil && l.Checkpoint(1, 1).Parts[1].Part != nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			m := join(t, b, cfg(2, 0))
			z := join(t, b, cfg(2, 1))
			commit(t, m, 1)
			commit(t, z, 1)
			m = join(t, b, cfg(2, 0))
			commit(t, m, 2)
			for _, name := range tc.objects {
				data, ok := b.ObjectBytes(name)
				if !ok {
					t.Fatalf("no object %q", name)
				}
				data[len(data)/2] ^= 0xff
				b.SetObjectBytes(name, data)
			}
			l, err := catalog.Inspect(t.Context(), b, "job", all)
			if !errors.Is(err, catalog.ErrDamaged) || l == nil {
				t.Fatalf("Inspect = %v, %v; want the listing and ErrDamaged", l, err)
			}
			for _, name := range tc.objects {
				if !containsName(err, name) {
					t.Errorf("the error does not name %q: %v", name, err)
				}
			}
			if !tc.check(l) {
				t.Fatalf("listing %+v", l)
			}
		})
	}
}

// TestInspectGone: an object deleted between the listing and its read,
// and a generation whose record the deletion rule dropped before its
// parts, are no errors; a restored part the live generation still needs
// that is gone is named in the retention; objects of no catalog name are
// listed.
func TestInspectGone(t *testing.T) {
	b := dstltest.NewBackend()
	for i := range 2 {
		commit(t, join(t, b, cfg(2, i)), 1)
	}
	join(t, b, cfg(1, 0)) // generation 2 restores both parts of 1
	gone := objname.CatalogPartName("job/", 1, 1, 0)
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op == dstltest.OpGet && name == gone {
			return dstltest.Fault{Err: backends.ErrNotFound}
		}
		return dstltest.Fault{}
	})
	l, err := catalog.Inspect(t.Context(), b, "job", catalog.InspectOptions{Parts: func(int64, int64) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	if p := l.Checkpoint(1, 1).Parts[0]; !errors.Is(p.Err, backends.ErrNotFound) || p.Part != nil {
		t.Fatalf("part deleted since the listing: %+v", p)
	}
	b.SetFault(nil)

	lost := objname.CatalogPartName("job/", 1, 1, 1)
	for _, name := range []string{objname.CatalogGenerationName("job/", 1), lost} {
		if err := b.Delete(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
	b.SetObjectBytes("job/_catalog/notes.txt", []byte("x"))
	l, err = catalog.Inspect(t.Context(), b, "job", catalog.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"g1 fenced no record, claims 0,1",
		"g1/1 unknown parts 0 kept 0",
		"g2 live aligned 1 instances, claims 0, restored 1, first 2",
	}
	if got := summary(l); !slices.Equal(got, want) {
		t.Fatalf("listing:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Equal(l.Retention.Missing, []string{lost}) || !slices.Equal(l.Other, []string{"job/_catalog/notes.txt"}) {
		t.Fatalf("missing %v, other %v", l.Retention.Missing, l.Other)
	}
}

// TestInspectFailures: a listing or read that fails otherwise stops
// Inspect with its error.
func TestInspectFailures(t *testing.T) {
	errDown := errors.New("service unavailable")
	for _, tc := range []struct {
		name  string
		fault dstltest.FaultFunc
		opts  catalog.InspectOptions
	}{
		{"list", dstltest.FailAll(dstltest.OpList, errDown), catalog.InspectOptions{}},
		{"record", dstltest.FailAll(dstltest.OpGet, errDown), catalog.InspectOptions{}},
		{"part", dstltest.FailNth(dstltest.OpGet, 2, errDown), catalog.InspectOptions{Parts: func(int64, int64) bool { return true }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := dstltest.NewBackend()
			commit(t, join(t, b, cfg(1, 0)), 1)
			b.SetFault(tc.fault)
			l, err := catalog.Inspect(t.Context(), b, "job", tc.opts)
			if !errors.Is(err, errDown) || l != nil {
				t.Fatalf("Inspect = %v, %v; want no listing and the backend's error", l, err)
			}
		})
	}
	if _, err := catalog.Inspect(t.Context(), dstltest.NewBackend(), "job", catalog.InspectOptions{Retain: -1}); err == nil {
		t.Fatal("Inspect with a negative Retain did not fail")
	}
}
