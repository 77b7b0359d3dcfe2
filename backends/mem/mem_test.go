package mem_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/internal/urlparam"
	"github.com/dstlgo/dstl/backends/mem"
	"github.com/dstlgo/dstl/conformance"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, cfg mem.Config) *mem.Backend {
	t.Helper()
	b, err := mem.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return b
}

// harness opens a backend on a new store, under a prefix, for the
// conformance suites.
func harness(t *testing.T) backends.Backend { return open(t, mem.Config{Prefix: "suite"}) }

func TestConformance(t *testing.T) {
	conformance.TestBackend(t, harness, conformance.WithRawPut(func(t *testing.T, b backends.Backend, name string, data []byte) error {
		mb := b.(*mem.Backend)
		mb.Store().SetObject(mb.Prefix()+name, data)
		return nil
	}))
}

func TestEngine(t *testing.T) { conformance.TestEngine(t, harness) }

// TestStoredNames fixes the keys under which objects are stored: the
// prefix, with a slash added, then the name, from a Config and from a
// base path alike.
func TestStoredNames(t *testing.T) {
	for _, tc := range []struct {
		cfg  mem.Config
		want []string
	}{
		{mem.Config{}, []string{"a", "b/c"}},
		{mem.Config{Prefix: "jobs/42"}, []string{"jobs/42/a", "jobs/42/b/c"}},
		{mem.Config{Prefix: "jobs/42/"}, []string{"jobs/42/a", "jobs/42/b/c"}},
	} {
		b := open(t, tc.cfg)
		conformance.Put(t, b, "a", "1")
		conformance.Put(t, b, "b/c", "22")
		var keys []string
		for _, o := range b.Store().Objects("") {
			keys = append(keys, o.Name)
		}
		if !slices.Equal(keys, tc.want) {
			t.Errorf("prefix %q: keys %q, want %q", tc.cfg.Prefix, keys, tc.want)
		}
		var names []string
		if err := b.List(t.Context(), "", func(o backends.ObjectInfo) error { names = append(names, o.Name); return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(names, []string{"a", "b/c"}) {
			t.Errorf("prefix %q: List = %q", tc.cfg.Prefix, names)
		}
		var root driver.Root
		if !b.As(&root) || root != (driver.Root{Bucket: "memory", Prefix: strings.TrimSuffix(tc.want[0], "a")}) {
			t.Errorf("prefix %q: As(*driver.Root) = %+v", tc.cfg.Prefix, root)
		}
	}
	b, id, err := backends.Open(t.Context(), "", "memory://demo/jobs/42")
	if err != nil || id != mem.ID {
		t.Fatalf("Open = %v, %q", err, id)
	}
	defer b.Close()
	conformance.Put(t, b, "a", "1")
	if _, ok := b.(*mem.Backend).Store().Object("jobs/42/a"); !ok {
		t.Fatalf("stored %+v, want the key jobs/42/a", b.(*mem.Backend).Store().Objects(""))
	}
	var root driver.Root
	if !b.(*mem.Backend).As(&root) || root != (driver.Root{Bucket: "memory://demo", Prefix: "jobs/42/"}) {
		t.Errorf("As(*driver.Root) = %+v", root)
	}
}

// TestSharedStore: backends on one store see each other's objects, each
// under its prefix; the store's objects outlive a backend's Close.
func TestSharedStore(t *testing.T) {
	s := mem.NewStore()
	whole := open(t, mem.Config{Store: s})
	defer whole.Close()
	sub := open(t, mem.Config{Store: s, Prefix: "p/"})
	conformance.Put(t, sub, "x", "sub")
	if got, err := conformance.Read(t.Context(), whole, "p/x", 0, -1); err != nil || got != "sub" {
		t.Fatalf("Read p/x = %q, %v", got, err)
	}
	if err := sub.Put(t.Context(), "x", strings.NewReader("again"), 5); !errors.Is(err, backends.ErrExists) {
		t.Fatalf("Put over an object = %v, want ErrExists", err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Put(t.Context(), "y", strings.NewReader("y"), 1); !errors.Is(err, backends.ErrClosed) {
		t.Fatalf("Put after Close = %v, want ErrClosed", err)
	}
	if data, ok := s.Object("p/x"); !ok || string(data) != "sub" {
		t.Fatalf("after Close: %q, %v", data, ok)
	}
}

// TestClock: modification times come from the store's clock.
func TestClock(t *testing.T) {
	s := mem.NewStore()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s.SetClock(func() time.Time { return at })
	b := open(t, mem.Config{Store: s})
	defer b.Close()
	conformance.Put(t, b, "a", "1")
	at = at.Add(time.Hour)
	s.SetObject("b", []byte("2"))
	var got []time.Time
	if err := b.List(t.Context(), "", func(o backends.ObjectInfo) error { got = append(got, o.ModTime); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []time.Time{at.Add(-time.Hour), at}; !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Fatalf("times %v, want %v", got, want)
	}
	s.SetClock(nil)
	conformance.Put(t, b, "c", "3")
	if o := s.Objects("c"); len(o) != 1 || time.Since(o[0].ModTime) > time.Minute {
		t.Fatalf("with the clock reset: %+v", o)
	}
}

// TestInspection: what the store offers tests beside the backend.
func TestInspection(t *testing.T) {
	s := mem.NewStore()
	var changes []string
	s.OnChange(func(key string, data []byte, deleted bool) {
		if deleted {
			changes = append(changes, "-"+key)
		} else {
			changes = append(changes, "+"+key+"="+string(data))
		}
	})
	b := open(t, mem.Config{Store: s})
	defer b.Close()
	conformance.Put(t, b, "a", "1")
	r, err := b.Get(t.Context(), "a", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	data, _ := s.Object("a")
	data[0] = 'x' // a copy
	s.SetObject("a", []byte("2"))
	if got, err := conformance.Read(t.Context(), b, "a", 0, -1); err != nil || got != "2" {
		t.Fatalf("after SetObject: %q, %v", got, err)
	}
	if old := make([]byte, 1); func() bool { _, err := r.Read(old); return err != nil || string(old) != "1" }() {
		t.Fatal("a reader opened before SetObject does not read the old bytes")
	}
	if err := b.Delete(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if s.DeleteObject("a") || s.Len() != 0 {
		t.Fatalf("DeleteObject of a missing object reported one, or Len = %d", s.Len())
	}
	s.SetObject("b", []byte("planted"))
	if want := []string{"+a=1", "-a"}; !slices.Equal(changes, want) {
		t.Fatalf("changes %q, want %q", changes, want)
	}
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want mem.Config
	}{
		{"memory://", mem.Config{}},
		{"memory:///", mem.Config{}},
		{"memory://demo", mem.Config{Name: "demo"}},
		{"memory://demo/jobs/42", mem.Config{Name: "demo", Prefix: "jobs/42"}},
		{"MEMORY:///jobs/42/", mem.Config{Prefix: "jobs/42/"}},
	} {
		got, err := mem.ParseURL(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"memory:x", "mem://x", "memory://u@x", "memory://x:1", "memory://x?a=1", "memory://x#f", "/tmp"} {
		if _, err := mem.ParseURL(in); err == nil {
			t.Errorf("ParseURL(%q) accepted", in)
		}
	}
	if _, _, err := backends.Open(t.Context(), "", "memory://x?a=1"); !errors.Is(err, backends.ErrInvalidConfig) {
		t.Errorf("Open with a query parameter = %v, want ErrInvalidConfig", err)
	}
}

func TestURLParameters(t *testing.T) {
	parse := func(s string) error { _, err := mem.ParseURL(s); return err }
	if err := urlparam.CheckDocumented("memory://x/p", mem.URLParameters, parse, nil); err != nil {
		t.Error(err)
	}
}
