package catalogv1

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
)

// Errors of the catalog, checked with errors.Is.
var (
	// ErrFenced: a newer generation started. What this member commits
	// after its start is ignored by every reader; a part whose put
	// preceded it may be restored by it (see [Member.Commit]). Rejoin (or
	// restart) to go on.
	ErrFenced = errors.New("catalog: fenced by a newer generation")
	// ErrReplaced: another process holds this instance's slot in the
	// latest generation.
	ErrReplaced = errors.New("catalog: another process holds the instance's slot")
	// ErrMismatch: the latest generation has another instance set, key-group
	// assignment or mode than this member's configuration.
	ErrMismatch = errors.New("catalog: generation does not match the configuration")
	// ErrNoCheckpoint: the checkpoint asked for to restore from is not
	// retained (or not complete).
	ErrNoCheckpoint = errors.New("catalog: no such retained checkpoint")
)

// Defaults of [Config].
const (
	DefaultMaxParallelism = 128
	DefaultRetain         = 1
	DefaultGrace          = 10 * time.Minute
)

// Config configures a member of a job's catalog.
type Config struct {
	// JobID is the job: its objects and its catalog are under its prefix.
	JobID string
	// Instances is how many instances the job runs as (P), and Index this
	// instance's index, 0 to Instances-1 (a StatefulSet's ordinal).
	Instances, Index int
	// MaxParallelism is the number of key groups. Default
	// DefaultMaxParallelism.
	MaxParallelism int
	// KeyGroups, when set, assigns each instance its key-group range (one
	// range per instance, not overlapping); by default the key groups are
	// split evenly, as Flink does.
	KeyGroups []dstl.KeyGroupRange
	// Mode is Aligned (the default) or Independent.
	Mode Mode
	// Retain is how many complete checkpoints are kept (per instance in
	// the independent mode). Default DefaultRetain.
	Retain int
	// Grace is how old an object that nothing retained refers to must be
	// before the deletion rule deletes it. It must exceed a few checkpoint
	// intervals. Default DefaultGrace.
	Grace time.Duration
	// RestoreFrom, when this instance starts a generation, restores the
	// retained checkpoint of that number rather than the latest one
	// (aligned mode only): one of the last Retain complete checkpoints of
	// the latest generation, or the one it restored while it keeps it
	// (see [Plan.Parts]); any other fails with ErrNoCheckpoint.
	RestoreFrom int64
	// Owner names this process in its claim; default a random id.
	Owner string
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	if c.MaxParallelism == 0 {
		c.MaxParallelism = DefaultMaxParallelism
	}
	if c.Mode == "" {
		c.Mode = Aligned
	}
	if c.Retain == 0 {
		c.Retain = DefaultRetain
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Owner == "" {
		c.Owner = rand.Text()
	}
	switch {
	case c.Instances < 1 || c.Instances > objname.MaxInstances:
		return c, fmt.Errorf("catalog: instances %d: want 1 to %d", c.Instances, objname.MaxInstances)
	case c.Index < 0 || c.Index >= c.Instances:
		return c, fmt.Errorf("catalog: index %d: want 0 to %d", c.Index, c.Instances-1)
	case c.MaxParallelism < c.Instances || c.MaxParallelism > dstl.MaxKeyGroup+1:
		return c, fmt.Errorf("catalog: max parallelism %d: want %d to %d", c.MaxParallelism, c.Instances, dstl.MaxKeyGroup+1)
	case c.Mode != Aligned && c.Mode != Independent:
		return c, fmt.Errorf("catalog: mode %q: want %q or %q", c.Mode, Aligned, Independent)
	case c.Retain < 1:
		return c, fmt.Errorf("catalog: retain %d: want at least 1", c.Retain)
	case c.Grace < 0:
		return c, fmt.Errorf("catalog: grace %v is negative", c.Grace)
	case c.RestoreFrom < 0:
		return c, fmt.Errorf("catalog: restore from checkpoint %d is negative", c.RestoreFrom)
	}
	if c.KeyGroups == nil {
		c.KeyGroups = make([]dstl.KeyGroupRange, c.Instances)
		for i := range c.Instances {
			c.KeyGroups[i] = RangeOf(i, c.Instances, c.MaxParallelism)
		}
	} else if len(c.KeyGroups) != c.Instances {
		return c, fmt.Errorf("catalog: %d key-group ranges for %d instances", len(c.KeyGroups), c.Instances)
	}
	if err := checkAssignment(c.KeyGroups, c.MaxParallelism); err != nil {
		return c, fmt.Errorf("catalog: key groups: %w", err)
	}
	return c, nil
}

// RangeOf returns the key groups of instance i of p, splitting
// maxParallelism key groups evenly as Flink does.
func RangeOf(i, p, maxParallelism int) dstl.KeyGroupRange {
	return dstl.KeyGroupRange{Start: (i*maxParallelism + p - 1) / p, End: ((i+1)*maxParallelism+p-1)/p - 1}
}

// Member is one instance of a job in one generation: it commits the
// instance's parts of checkpoints and learns which checkpoints are
// complete. It is safe for concurrent use.
type Member struct {
	b      backends.Backend
	cfg    Config
	prefix string
	gen    *Generation
	parts  []*Part // the restored parts whose key groups overlap the instance's

	mu     sync.Mutex
	view   *view
	fenced bool
	cache  map[string]*Part // parts read, by name
}

// Join makes this process instance cfg.Index of the job's latest
// generation, or starts a new generation when the latest one does not
// match cfg (a rescale) or the instance's slot is held (a restart): a new
// generation restores the latest complete checkpoint (or cfg.RestoreFrom)
// and fences every older one. The member's Restore then names the parts to
// restore.
//
// Before it reads or writes the catalog, Join checks that b refuses a Put
// of an existing name on every path its Puts take, since the fencing
// rests on it ([backends.VerifyCreateOnly], once per backends.Bucket in a
// process): a store that ignores conditional writes fails Join with an
// error that wraps [backends.ErrCreateOnlyIgnored].
func Join(ctx context.Context, b backends.Backend, cfg Config) (*Member, error) {
	return join(ctx, b, cfg, true)
}

// Rejoin joins the latest generation as the same instance, after the
// member was fenced (see [ErrFenced]), without starting a generation: it
// fails with ErrReplaced when another process holds the slot, and with
// ErrMismatch when the latest generation is not of this configuration.
func (m *Member) Rejoin(ctx context.Context) (*Member, error) {
	return join(ctx, m.b, m.cfg, false)
}

// maxJoinRounds bounds the generations one Join may find started under it.
const maxJoinRounds = 8

func join(ctx context.Context, b backends.Backend, cfg Config, mayStart bool) (*Member, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &reader{b: b, prefix: objname.JobPrefix(cfg.JobID)}
	// The fencing rests on create-only puts: a store that ignores them
	// on any path is refused before anything is written (once per
	// backends.Bucket and process; see backends.VerifyCreateOnly).
	probe, err := objname.NewCreateOnlyProbe(c.prefix)
	if err != nil {
		return nil, err
	}
	if err := backends.VerifyCreateOnly(ctx, b, probe); err != nil {
		return nil, fmt.Errorf("catalog: job %q: %w", cfg.JobID, err)
	}
	for range maxJoinRounds {
		v, err := c.list(ctx)
		if err != nil {
			return nil, err
		}
		if latest := v.latest(); latest > 0 {
			gen, err := c.generation(ctx, latest)
			if errors.Is(err, backends.ErrNotFound) {
				continue // dropped since the listing: a newer generation started
			}
			if err != nil {
				return nil, err
			}
			switch {
			case !matches(gen, cfg):
				if !mayStart {
					return nil, fmt.Errorf("%w: generation %d has %d instances (%s mode), this instance is %d of %d (%s mode)",
						ErrMismatch, latest, gen.Instances(), gen.Mode, cfg.Index, cfg.Instances, cfg.Mode)
				}
			default:
				ok, err := c.claim(ctx, latest, cfg)
				if err != nil {
					return nil, err
				}
				if ok {
					// A join that stalled between its listing and its claim
					// may have claimed a slot of a generation fenced since
					// (its old claim dropped): list again, and join the
					// latest generation instead.
					v2, err := c.list(ctx)
					if err != nil {
						return nil, err
					}
					if v2.latest() > latest {
						continue
					}
					return c.member(ctx, cfg, gen, v2)
				}
				if !mayStart {
					return nil, fmt.Errorf("%w: instance %d of generation %d", ErrReplaced, cfg.Index, latest)
				}
			}
		} else if !mayStart {
			return nil, fmt.Errorf("%w: no generation", ErrMismatch)
		}
		started, err := c.start(ctx, cfg, v)
		if err != nil {
			return nil, err
		}
		if !started {
			continue // another process started that generation: join it
		}
	}
	return nil, fmt.Errorf("catalog: job %q: %d generations started while this instance joined", cfg.JobID, maxJoinRounds)
}

func matches(g *Generation, cfg Config) bool {
	return g.Mode == cfg.Mode && g.MaxParallelism == cfg.MaxParallelism && slices.Equal(g.KeyGroups, cfg.KeyGroups)
}

// reader reads and writes one job's catalog.
type reader struct {
	b      backends.Backend
	prefix string
}

// generation reads and checks generation g's record.
func (c *reader) generation(ctx context.Context, g int64) (*Generation, error) {
	name := objname.CatalogGenerationName(c.prefix, g)
	var gen Generation
	if err := c.read(ctx, name, kindGeneration, &gen); err != nil {
		return nil, err
	}
	if err := gen.validate(name, g); err != nil {
		return nil, err
	}
	return &gen, nil
}

// part reads and checks a part; gen, when known, is its generation.
func (c *reader) part(ctx context.Context, name string, gen *Generation) (*Part, error) {
	ref := objname.ParseCatalog(c.prefix, name)
	if ref.Kind != objname.CatalogPart {
		return nil, fmt.Errorf("%w %q: not the name of a part", ErrDamaged, name)
	}
	var p Part
	if err := c.read(ctx, name, kindPart, &p); err != nil {
		return nil, err
	}
	if err := p.validate(name, ref.Generation, ref.Checkpoint, ref.Instance, gen); err != nil {
		return nil, err
	}
	p.Name = name
	return &p, nil
}

// read reads the record name and decodes it, of the given kind, into v.
func (c *reader) read(ctx context.Context, name string, kind byte, v any) error {
	data, err := c.get(ctx, name)
	if err != nil {
		return err
	}
	return decode(name, data, kind, v)
}

func (c *reader) get(ctx context.Context, name string) ([]byte, error) {
	r, err := c.b.Get(ctx, name, 0, -1)
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

// put writes a new catalog object, create-only; it reports false when
// another writer's object has the name. When the put fails, or meets an
// existing object, the object is read back: holding exactly data, it is
// this put's (an answer lost after the object was stored), and put
// reports true.
func (c *reader) put(ctx context.Context, name string, data []byte) (bool, error) {
	err := c.b.Put(ctx, name, bytes.NewReader(data), int64(len(data)))
	if err == nil {
		return true, nil
	}
	if ctx.Err() == nil {
		if got, gerr := c.get(ctx, name); gerr == nil {
			return bytes.Equal(got, data), nil
		}
	}
	if errors.Is(err, backends.ErrExists) {
		return false, nil
	}
	return false, fmt.Errorf("catalog: write %q: %w", name, err)
}

// claim claims instance cfg.Index of generation g; false: another
// process holds it.
func (c *reader) claim(ctx context.Context, g int64, cfg Config) (bool, error) {
	data, err := encode(kindClaim, claim{Owner: cfg.Owner, Nonce: rand.Text(), Created: cfg.Now().UTC()})
	if err != nil {
		return false, err
	}
	return c.put(ctx, objname.CatalogClaimName(c.prefix, g, cfg.Index), data)
}

// start starts the generation after the latest one of v, restoring the
// latest complete checkpoint (or cfg.RestoreFrom); false: another process
// started it first.
func (c *reader) start(ctx context.Context, cfg Config, v *view) (bool, error) {
	latest := v.latest()
	switch {
	case latest == math.MaxInt64:
		return false, fmt.Errorf("%w %q: generation %d has no successor", ErrDamaged, objname.CatalogGenerationName(c.prefix, latest), latest)
	case v.maxCheckpoint == math.MaxInt64:
		return false, fmt.Errorf("%w %q: checkpoint %d has no successor for a new generation's first", ErrDamaged, v.maxPart, v.maxCheckpoint)
	}
	gen := &Generation{Number: latest + 1, Mode: cfg.Mode, MaxParallelism: cfg.MaxParallelism,
		KeyGroups: cfg.KeyGroups, FirstCheckpoint: v.maxCheckpoint + 1, Created: cfg.Now().UTC(), Restored: []string{}}
	if latest > 0 {
		prev, err := c.generation(ctx, latest)
		if errors.Is(err, backends.ErrNotFound) {
			return false, nil // dropped since the listing: a newer generation started
		}
		if err != nil {
			return false, err
		}
		parts, n, err := c.restorePoint(ctx, cfg, prev, v)
		if err != nil {
			return false, err
		}
		gen.Restored, gen.RestoredCheckpoint = parts, n
	} else if cfg.RestoreFrom != 0 {
		return false, fmt.Errorf("%w: checkpoint %d: the job has no generation yet", ErrNoCheckpoint, cfg.RestoreFrom)
	}
	name := objname.CatalogGenerationName(c.prefix, gen.Number)
	if err := gen.validate(name, gen.Number); err != nil {
		return false, fmt.Errorf("catalog: a new generation's record: %w", err)
	}
	data, err := encode(kindGeneration, gen)
	if err != nil {
		return false, err
	}
	return c.put(ctx, name, data)
}

// restorePoint chooses what a generation after prev restores: in the
// aligned mode, the parts of prev's latest complete checkpoint (or of
// cfg.RestoreFrom), or, when prev completed none, what prev restored
// from; in the independent mode, each of prev's instances' latest part,
// or what prev restored for an instance that committed none (and for
// every instance whose key groups those parts also cover, so that no two
// parts chosen cover a key group). Every part chosen is read and checked,
// so that a damaged or missing one, or two that overlap, fail the start
// rather than a restore.
func (c *reader) restorePoint(ctx context.Context, cfg Config, prev *Generation, v *view) ([]string, int64, error) {
	var names []string
	var n int64
	read := map[string]*Part{} // parts of older generations read, by name
	switch {
	case prev.Mode == Aligned:
		complete := v.complete(prev)
		ownParts := func(n int64) []string {
			var names []string
			for i := range prev.Instances() {
				names = append(names, objname.CatalogPartName(c.prefix, prev.Number, n, i))
			}
			return names
		}
		switch want := cfg.RestoreFrom; {
		case want != 0:
			switch {
			case slices.Contains(complete, want):
				names, n = ownParts(want), want
			case want == prev.RestoredCheckpoint:
				names, n = prev.Restored, want
			default:
				return nil, 0, fmt.Errorf("%w: checkpoint %d is neither complete in generation %d nor the one it restored", ErrNoCheckpoint, want, prev.Number)
			}
			// Only what the deletion rule retains as of v: the objects of
			// a checkpoint it no longer retains may be deleted already.
			_, kept := retention(v, prev, cfg.Retain, nil)
			for _, name := range names {
				if !slices.Contains(kept, name) {
					return nil, 0, fmt.Errorf("%w: checkpoint %d of generation %d is no longer retained (retain %d)", ErrNoCheckpoint, want, prev.Number, cfg.Retain)
				}
			}
		case len(complete) > 0:
			n = complete[len(complete)-1]
			names = ownParts(n)
		default:
			names, n = prev.Restored, prev.RestoredCheckpoint
		}
	default:
		if cfg.RestoreFrom != 0 {
			return nil, 0, fmt.Errorf("%w: checkpoint %d: a restore by number needs the aligned mode", ErrNoCheckpoint, cfg.RestoreFrom)
		}
		// An instance that committed no part restores what prev restored
		// for its key groups; so does every instance whose key groups
		// those parts also cover, so that no key group is restored from
		// two parts (the older state over the newer one).
		fallback := make([]bool, prev.Instances())
		anyFallback := false
		for i := range fallback {
			fallback[i] = v.latestPart(prev.Number, i) == 0
			anyFallback = anyFallback || fallback[i]
		}
		// The restored parts are read only when an instance needs them:
		// otherwise the deletion rule no longer keeps them.
		restored := make([]*Part, len(prev.Restored))
		for j, name := range prev.Restored {
			if !anyFallback {
				break
			}
			p, err := c.part(ctx, name, nil)
			if err != nil {
				return nil, 0, err
			}
			restored[j], read[name] = p, p
		}
		used := make([]bool, len(restored))
		for changed := true; changed; {
			changed = false
			for j, p := range restored {
				for i, kg := range prev.KeyGroups {
					if p != nil && fallback[i] && !used[j] && overlaps(p.KeyGroups, kg) {
						used[j], changed = true, true
					}
				}
			}
			for i, kg := range prev.KeyGroups {
				for j, p := range restored {
					if used[j] && !fallback[i] && overlaps(p.KeyGroups, kg) {
						fallback[i], changed = true, true
					}
				}
			}
		}
		for i, kg := range prev.KeyGroups {
			if !fallback[i] {
				names = append(names, objname.CatalogPartName(c.prefix, prev.Number, v.latestPart(prev.Number, i), i))
				continue
			}
			for j, p := range restored {
				if used[j] && overlaps(p.KeyGroups, kg) && !slices.Contains(names, p.Name) {
					names = append(names, p.Name)
				}
			}
		}
	}
	var chosen []*Part
	for _, name := range names {
		p, ok := read[name]
		if !ok {
			ref := objname.ParseCatalog(c.prefix, name)
			var g *Generation
			if ref.Generation == prev.Number {
				g = prev
			}
			var err error
			if p, err = c.part(ctx, name, g); err != nil {
				return nil, 0, err
			}
		}
		chosen = append(chosen, p)
	}
	if err := disjoint(chosen); err != nil {
		return nil, 0, fmt.Errorf("%w %q: what generation %d would restore: %w", ErrDamaged, objname.CatalogGenerationName(c.prefix, prev.Number), prev.Number+1, err)
	}
	return slices.Clone(names), n, nil
}

func overlaps(a, b dstl.KeyGroupRange) bool { return a.Start <= b.End && b.Start <= a.End }

// disjoint checks that no two parts cover a key group.
func disjoint(parts []*Part) error {
	for i, p := range parts {
		for _, q := range parts[:i] {
			if overlaps(p.KeyGroups, q.KeyGroups) {
				return fmt.Errorf("parts %q (key groups %v) and %q (%v) overlap", q.Name, q.KeyGroups, p.Name, p.KeyGroups)
			}
		}
	}
	return nil
}

// member makes the member of gen, reading the restored parts it needs.
func (c *reader) member(ctx context.Context, cfg Config, gen *Generation, v *view) (*Member, error) {
	m := &Member{b: c.b, cfg: cfg, prefix: c.prefix, gen: gen, view: v}
	own := gen.KeyGroups[cfg.Index]
	for _, name := range gen.Restored {
		p, err := c.part(ctx, name, nil)
		if err != nil {
			return nil, fmt.Errorf("catalog: generation %d restores %q: %w", gen.Number, name, err)
		}
		if overlaps(p.KeyGroups, own) {
			m.parts = append(m.parts, p)
		}
	}
	if err := disjoint(m.parts); err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrDamaged, objname.CatalogGenerationName(c.prefix, gen.Number), err)
	}
	sort.Slice(m.parts, func(i, j int) bool { return m.parts[i].KeyGroups.Start < m.parts[j].KeyGroups.Start })
	return m, nil
}

// Generation returns the member's generation.
func (m *Member) Generation() *Generation { return m.gen }

// Index returns the member's instance index.
func (m *Member) Index() int { return m.cfg.Index }

// KeyGroups returns the member's key-group range.
func (m *Member) KeyGroups() dstl.KeyGroupRange { return m.gen.KeyGroups[m.cfg.Index] }

// Restore returns the parts the member restores from: those the
// generation restored whose key groups overlap the member's, in key-group
// order. It is empty on a first start.
func (m *Member) Restore() []*Part { return m.parts }

// Status is what a member knows of its generation's checkpoints. Confirm
// every checkpoint the member committed up to Complete, in order (with
// dstl or statestore): the log releases what only an unconfirmed older
// checkpoint kept, which a generation starting from an earlier listing may
// still restore.
type Status struct {
	// Complete is the latest complete checkpoint of the member's
	// generation (its own latest part in the independent mode), 0 for
	// none.
	Complete int64
}

// Commit commits the member's part of checkpoint n (at least the
// generation's FirstCheckpoint, and growing) with a create-only put, then
// learns from one listing of the catalog which checkpoints are complete.
//
// It fails with ErrFenced when the listing shows a newer generation. The
// part is written: when the newer generation's starter listed the catalog
// after the put, and n was complete then, the newer generation restores
// it; otherwise no reader ever does. So ErrFenced says nothing of n's
// outcome: the member must neither confirm n nor take it as failed (and,
// say, abort a transaction the newer generation may commit on restore);
// the newer generation's restore decides.
//
// A commit of n may be retried after an error: when the part is there
// already with the same state, objects and metadata (the earlier put's
// answer was lost), the retry succeeds; with others, it fails with
// ErrReplaced.
func (m *Member) Commit(ctx context.Context, n int64, state []byte, objects []string, metadata map[string]string) (Status, error) {
	if n < m.gen.FirstCheckpoint {
		return Status{}, fmt.Errorf("catalog: checkpoint %d is below generation %d's first, %d", n, m.gen.Number, m.gen.FirstCheckpoint)
	}
	if m.isFenced() {
		return Status{}, fmt.Errorf("%w: generation %d", ErrFenced, m.gen.Number)
	}
	p := &Part{Generation: m.gen.Number, Checkpoint: n, Instance: m.cfg.Index, KeyGroups: m.KeyGroups(),
		State: state, Metadata: metadata, Objects: slices.Clone(objects), Created: m.cfg.Now().UTC()}
	if p.Objects == nil {
		p.Objects = []string{}
	}
	data, err := encode(kindPart, p)
	if err != nil {
		return Status{}, err
	}
	c := &reader{b: m.b, prefix: m.prefix}
	name := objname.CatalogPartName(m.prefix, m.gen.Number, n, m.cfg.Index)
	ok, err := c.put(ctx, name, data)
	if err != nil {
		return Status{}, err
	}
	if !ok {
		// Only this member, the holder of the instance's claim in the
		// generation, writes its parts: the part is an earlier commit of
		// n, whose answer (and read-back) failed, or a commit of n with
		// another state.
		old, err := c.part(ctx, name, m.gen)
		if err != nil {
			return Status{}, err
		}
		if !samePart(old, p) {
			return Status{}, fmt.Errorf("%w: part %q exists, of another state: checkpoint %d was committed before", ErrReplaced, name, n)
		}
	}
	return m.Refresh(ctx)
}

// samePart says whether two parts of one name hold the same state,
// objects and metadata (their times may differ).
func samePart(a, b *Part) bool {
	return bytes.Equal(a.State, b.State) && slices.Equal(a.Objects, b.Objects) && maps.Equal(a.Metadata, b.Metadata)
}

// Refresh lists the catalog once and returns the member's status; it
// fails with ErrFenced when a newer generation started.
func (m *Member) Refresh(ctx context.Context) (Status, error) {
	v, err := (&reader{b: m.b, prefix: m.prefix}).list(ctx)
	if err != nil {
		return Status{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.view = v
	if v.latest() > m.gen.Number {
		m.fenced = true
		return Status{}, fmt.Errorf("%w: generation %d started after %d", ErrFenced, v.latest(), m.gen.Number)
	}
	return m.statusLocked(), nil
}

func (m *Member) statusLocked() Status {
	if m.gen.Mode == Independent {
		return Status{Complete: m.view.latestPart(m.gen.Number, m.cfg.Index)}
	}
	complete := m.view.complete(m.gen)
	if len(complete) == 0 {
		return Status{}
	}
	return Status{Complete: complete[len(complete)-1]}
}

func (m *Member) isFenced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fenced
}
