package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/objname"
)

// listPage is how many names one page of a listing holds on S3 and GCS:
// the catalog counts a listing's pages as its names over listPage,
// rounded up (at least one).
const listPage = 1000

// store reads and writes one job's catalog, counting what it does.
type store struct {
	b       backends.Backend
	prefix  string
	jobID   string
	metrics *metrics
}

func newStore(b backends.Backend, jobID string, mp metric.MeterProvider) *store {
	return &store{b: b, prefix: objname.JobPrefix(jobID), jobID: jobID, metrics: newMetrics(mp)}
}

// read reads the record name and decodes it, of the given kind, into v.
func (s *store) read(ctx context.Context, name string, kind byte, v any) error {
	data, err := s.get(ctx, name)
	if err != nil {
		return err
	}
	return decode(name, data, kind, v)
}

// get reads a whole object.
func (s *store) get(ctx context.Context, name string) ([]byte, error) {
	s.metrics.request(ctx, "get")
	r, err := s.b.Get(ctx, name, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("catalog: read %q: %w", name, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("catalog: read %q: %w", name, err)
	}
	return data, nil
}

// exists reports whether the object of the name is there, with one GET
// of its first byte.
func (s *store) exists(ctx context.Context, name string) (bool, error) {
	s.metrics.request(ctx, "get")
	r, err := s.b.Get(ctx, name, 0, 1)
	if errors.Is(err, backends.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("catalog: read %q: %w", name, err)
	}
	r.Close()
	return true, nil
}

// put writes a new catalog object, create-only; it reports false when
// another writer's object has the name. When the put fails, or meets an
// existing object, the object is read back: holding exactly data, it is
// this put's (an answer lost after the object was stored), and put
// reports true.
func (s *store) put(ctx context.Context, name string, data []byte) (bool, error) {
	s.metrics.request(ctx, "put")
	err := s.b.Put(ctx, name, bytes.NewReader(data), int64(len(data)))
	if err == nil {
		return true, nil
	}
	if ctx.Err() == nil {
		if got, gerr := s.get(ctx, name); gerr == nil {
			return bytes.Equal(got, data), nil
		}
	}
	if errors.Is(err, backends.ErrExists) {
		return false, nil
	}
	return false, fmt.Errorf("catalog: write %q: %w", name, err)
}

// list lists the objects under dir, counting the listing and its pages.
func (s *store) list(ctx context.Context, dir string, fn func(backends.ObjectInfo)) error {
	n := 0
	err := s.b.List(ctx, dir, func(oi backends.ObjectInfo) error {
		n++
		fn(oi)
		return nil
	})
	s.metrics.listed(ctx, n)
	if err != nil {
		return fmt.Errorf("catalog: list %q: %w", dir, err)
	}
	return nil
}

// delete deletes an object (a missing one is no error).
func (s *store) delete(ctx context.Context, name string) error {
	s.metrics.request(ctx, "delete")
	if err := s.b.Delete(ctx, name); err != nil {
		return fmt.Errorf("catalog: delete %q: %w", name, err)
	}
	return nil
}

// generation reads and checks generation g's record.
func (s *store) generation(ctx context.Context, g int64) (*Generation, error) {
	name := objname.CatalogV2GenerationName(s.prefix, g)
	var gen Generation
	if err := s.read(ctx, name, kindGeneration, &gen); err != nil {
		return nil, err
	}
	if err := gen.validate(name, g); err != nil {
		return nil, err
	}
	return &gen, nil
}

// commit reads and checks the commit of the name; gen, when known, is its
// generation.
func (s *store) commit(ctx context.Context, name string, gen *Generation) (*commit, error) {
	ref := objname.ParseCatalog(s.prefix, name)
	if ref.Kind != objname.CatalogCommit {
		return nil, fmt.Errorf("%w %q: not the name of a commit", ErrDamaged, name)
	}
	if gen != nil && gen.Number != ref.Generation {
		gen = nil
	}
	var c commit
	if err := s.read(ctx, name, kindCommit, &c); err != nil {
		return nil, err
	}
	if err := c.validate(name, ref.Generation, ref.Checkpoint, ref.Process, gen); err != nil {
		return nil, err
	}
	return &c, nil
}

// metrics are the catalog's OpenTelemetry instruments.
type metrics struct {
	requests  metric.Int64Counter
	lists     metric.Int64Counter
	pages     metric.Int64Counter
	commits   metric.Int64Counter
	fenced    metric.Int64Counter
	joins     metric.Int64Counter
	deletions metric.Int64Counter
}

// newMetrics makes the instruments of mp (nil: the global provider). An
// instrument that cannot be made counts nothing.
func newMetrics(mp metric.MeterProvider) *metrics {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter("github.com/dstlgo/dstl/catalog")
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil {
			c, _ = otel.GetMeterProvider().Meter("").Int64Counter(name) // a no-op unless one is installed
		}
		return c
	}
	return &metrics{
		requests:  counter("dstl.catalog.requests", "{request}", "Requests to the store for the catalog, by operation (put, get, delete; listings are dstl.catalog.lists)."),
		lists:     counter("dstl.catalog.lists", "{listing}", "Listings of catalog directories."),
		pages:     counter("dstl.catalog.list.pages", "{page}", "Pages of those listings, at 1,000 names a page as S3 and GCS return them."),
		commits:   counter("dstl.catalog.commits", "{commit}", "Commits of a process's parts of a checkpoint, by outcome (ok, fenced, error)."),
		fenced:    counter("dstl.catalog.fenced", "{fence}", "Times a member learnt that a newer generation fenced it."),
		joins:     counter("dstl.catalog.joins", "{join}", "Joins, by outcome: joined (a slot of the latest generation), started (a new generation), upgraded (from the first layout), or error."),
		deletions: counter("dstl.catalog.collect.deletes", "{object}", "Objects the deletion rule deleted, by kind: catalog (commits, claims, records of dropped checkpoints and generations) or data (log and snapshot objects)."),
	}
}

func (m *metrics) request(ctx context.Context, op string) {
	m.requests.Add(ctx, 1, metric.WithAttributes(attribute.String("op", op)))
}

func (m *metrics) listed(ctx context.Context, names int) {
	m.lists.Add(ctx, 1)
	m.pages.Add(ctx, int64(pages(names)))
}

func (m *metrics) outcome(ctx context.Context, c metric.Int64Counter, outcome string) {
	c.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

// pages returns the pages of a listing of n names.
func pages(n int) int { return max(1, (n+listPage-1)/listPage) }
