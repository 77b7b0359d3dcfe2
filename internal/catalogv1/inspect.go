package catalogv1

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/objname"
)

// CheckpointState says whether a checkpoint is complete, as a reader of
// the catalog sees it.
type CheckpointState string

// The states of a checkpoint.
const (
	// Complete: every instance of the generation committed its part (in
	// the independent mode: a checkpoint with any part).
	Complete CheckpointState = "complete"
	// Pending: a checkpoint of the live generation, after its latest
	// complete one, that not every instance committed yet; it may still
	// complete.
	Pending CheckpointState = "pending"
	// NeverComplete: a checkpoint that not every instance committed and
	// that no reader takes as complete: of a fenced generation, or of the
	// live one before its latest complete checkpoint.
	NeverComplete CheckpointState = "never-complete"
	// Unknown: the generation's record is missing or damaged, so its
	// instance set is unknown.
	Unknown CheckpointState = "unknown"
)

// InspectOptions says what [Inspect] reads beyond one listing of the
// catalog and the generations' records.
type InspectOptions struct {
	// Retain is the job members' Retain, for [Listing.Retention]. Default
	// DefaultRetain.
	Retain int
	// Grace is the job members' Grace, for [Listing.Retention]. Default
	// DefaultGrace.
	Grace time.Duration
	// Now is the clock the retention's grace counts from; default
	// time.Now.
	Now func() time.Time
	// Claims reads every claim (a GET each) for its owner and time.
	Claims bool
	// Parts, when set, says of which checkpoints to read the parts (a GET
	// each): their state, metadata and objects. Nil reads none.
	Parts func(generation, checkpoint int64) bool
}

// Listing is a job's catalog as one listing saw it, for people and tools
// to inspect; nothing in it is written.
type Listing struct {
	// Prefix is the job's prefix; the catalog is under
	// Prefix+objname.CatalogDir.
	Prefix string
	// Live is the latest generation, whose members commit; every older
	// generation is fenced. 0: the job has no generation.
	Live int64
	// Generations holds every generation with an object in the catalog,
	// oldest first.
	Generations []GenerationInfo
	// Retention is what the deletion rule keeps as of this listing, as a
	// member of the live generation with InspectOptions.Retain and Grace
	// plans it.
	Retention Retention
	// Other names the objects under the catalog's directory whose names
	// are of no catalog object.
	Other []string
}

// GenerationInfo is one generation of a [Listing].
type GenerationInfo struct {
	// Number is the generation's number.
	Number int64
	// Record is the generation's record: nil when it could not be read
	// (Err), or when it is not listed (the deletion rule dropped it and
	// has still to drop the generation's other objects).
	Record *Generation
	// Object is the record's object as listed; its Name is empty when the
	// record is not listed.
	Object backends.ObjectInfo
	// Err is the error of reading the record: it wraps ErrDamaged for a
	// damaged one, backends.ErrNotFound for one deleted since the
	// listing.
	Err error
	// Live says that this is the latest generation; the others are
	// fenced.
	Live bool
	// Claims holds the instance slots claimed, by instance.
	Claims []ClaimInfo
	// Checkpoints holds the checkpoints with a part, oldest first.
	Checkpoints []CheckpointInfo
}

// ClaimInfo is an instance slot's claim.
type ClaimInfo struct {
	// Instance is the instance's index.
	Instance int
	// Object is the claim's object as listed.
	Object backends.ObjectInfo
	// Owner and Created are the claim's, when read (InspectOptions.Claims
	// and no Err).
	Owner   string
	Created time.Time
	// Err is the error of reading the claim, as for a GenerationInfo.
	Err error
}

// CheckpointInfo is one checkpoint of a generation.
type CheckpointInfo struct {
	// Generation and Number say which checkpoint it is.
	Generation, Number int64
	// State says whether it is complete.
	State CheckpointState
	// Retained says that the deletion rule retains it (see
	// [Retention]).
	Retained bool
	// Parts holds the parts committed, by instance.
	Parts []PartInfo
}

// PartInfo is one instance's part of a checkpoint.
type PartInfo struct {
	// Instance is the instance's index.
	Instance int
	// Object is the part's object as listed.
	Object backends.ObjectInfo
	// Kept says that the deletion rule keeps the part and the objects it
	// refers to: retained, pending, or restored by the live generation
	// while needed.
	Kept bool
	// Part is the part, when read (InspectOptions.Parts and no Err).
	Part *Part
	// Err is the error of reading the part, as for a GenerationInfo.
	Err error
}

// Retention is what the deletion rule keeps of a job's catalog, as
// [Member.Plan] computes it for the live generation; nothing is retained
// when the live generation's record cannot be read.
type Retention struct {
	// Retain is the Retain it was computed with.
	Retain int
	// Retained lists the retained checkpoints of the live generation,
	// oldest first (in the independent mode: every checkpoint with a
	// retained part).
	Retained []int64
	// Parts names the catalog parts kept: retained ones, pending ones of
	// the live generation, the parts it restored from while it may still
	// need them, and, for the grace, those it stopped retaining or needing
	// (see [Plan.Parts]).
	Parts []string
	// Missing names the parts of Parts that are not in the catalog: parts
	// the live generation restored from and may still need (to restore
	// again, or a new member to join it), lost.
	Missing []string
}

// Generation returns generation g, nil when the listing has none.
func (l *Listing) Generation(g int64) *GenerationInfo {
	for i := range l.Generations {
		if l.Generations[i].Number == g {
			return &l.Generations[i]
		}
	}
	return nil
}

// Checkpoint returns checkpoint n of generation g or, when g is 0, of the
// latest generation with a checkpoint n; nil when there is none.
func (l *Listing) Checkpoint(g, n int64) *CheckpointInfo {
	for i := len(l.Generations) - 1; i >= 0; i-- {
		gi := &l.Generations[i]
		if g != 0 && gi.Number != g {
			continue
		}
		for j := range gi.Checkpoints {
			if gi.Checkpoints[j].Number == n {
				return &gi.Checkpoints[j]
			}
		}
	}
	return nil
}

// inspectReads bounds the reads of an Inspect in flight at once.
const inspectReads = 8

// Inspect lists job jobID's catalog once and reads every generation's
// record, and, as opts says, the claims and the parts of some
// checkpoints. It writes nothing.
//
// A damaged object does not stop it: the object's Err says what is wrong,
// and Inspect returns the listing with an error that joins those of every
// damaged object (each wraps ErrDamaged and names the object). An object
// deleted between the listing and its read (by the deletion rule) has an
// Err that wraps backends.ErrNotFound, and is no error of Inspect. Any
// other error stops it, and returns no listing.
func Inspect(ctx context.Context, b backends.Backend, jobID string, opts InspectOptions) (*Listing, error) {
	if err := ruleDefaults(&opts.Retain, &opts.Grace, &opts.Now); err != nil {
		return nil, err
	}
	cutoff := opts.Now().Add(-opts.Grace)
	recent := func(t time.Time) bool { return !t.Before(cutoff) }
	c := &reader{b: b, prefix: objname.JobPrefix(jobID)}
	v, err := c.list(ctx)
	if err != nil {
		return nil, err
	}
	l := &Listing{Prefix: c.prefix, Live: v.latest(), Retention: Retention{Retain: opts.Retain}}
	for _, o := range v.other {
		l.Other = append(l.Other, o.name)
	}
	sort.Strings(l.Other)

	// The generations: every number with a record, a claim or a part.
	numbers := map[int64]bool{}
	for g := range v.gens {
		numbers[g] = true
	}
	for g := range v.claims {
		numbers[g] = true
	}
	for g := range v.parts {
		numbers[g] = true
	}
	for _, g := range slices.Sorted(maps.Keys(numbers)) {
		gi := GenerationInfo{Number: g, Live: g == l.Live}
		if o, ok := v.gens[g]; ok {
			gi.Object = info(o)
		}
		for _, i := range slices.Sorted(maps.Keys(v.claims[g])) {
			gi.Claims = append(gi.Claims, ClaimInfo{Instance: i, Object: info(v.claims[g][i])})
		}
		for _, n := range slices.Sorted(maps.Keys(v.parts[g])) {
			ci := CheckpointInfo{Generation: g, Number: n, State: Unknown}
			for _, i := range slices.Sorted(maps.Keys(v.parts[g][n])) {
				ci.Parts = append(ci.Parts, PartInfo{Instance: i, Object: info(v.parts[g][n][i])})
			}
			gi.Checkpoints = append(gi.Checkpoints, ci)
		}
		l.Generations = append(l.Generations, gi)
	}

	// The records first: reading a part checks it against its generation.
	if err := readAll(ctx, l.Generations, func(ctx context.Context, gi *GenerationInfo) error {
		if gi.Object.Name == "" {
			return nil
		}
		gi.Record, gi.Err = c.generation(ctx, gi.Number)
		return readErr(gi.Err)
	}); err != nil {
		return nil, err
	}
	for i := range l.Generations {
		gi := &l.Generations[i]
		if gi.Record != nil {
			states(v, gi, l.Live)
			if gi.Live {
				l.Retention.Retained, l.Retention.Parts = retention(v, gi.Record, opts.Retain, recent)
			}
		}
	}
	kept := map[string]bool{}
	for _, name := range l.Retention.Parts {
		kept[name] = true
		ref := objname.ParseCatalog(c.prefix, name)
		if _, ok := v.parts[ref.Generation][ref.Checkpoint][ref.Instance]; !ok {
			l.Retention.Missing = append(l.Retention.Missing, name)
		}
	}
	var claims []*ClaimInfo
	type partRead struct {
		p   *PartInfo
		gen *Generation // nil when its record could not be read
	}
	var parts []partRead
	for i := range l.Generations {
		gi := &l.Generations[i]
		for j := range gi.Claims {
			if opts.Claims {
				claims = append(claims, &gi.Claims[j])
			}
		}
		for j := range gi.Checkpoints {
			ci := &gi.Checkpoints[j]
			ci.Retained = gi.Live && slices.Contains(l.Retention.Retained, ci.Number)
			read := opts.Parts != nil && opts.Parts(gi.Number, ci.Number)
			for k := range ci.Parts {
				p := &ci.Parts[k]
				p.Kept = kept[p.Object.Name]
				if read {
					parts = append(parts, partRead{p, gi.Record})
				}
			}
		}
	}
	if err := readAll(ctx, claims, func(ctx context.Context, ci **ClaimInfo) error {
		cl := *ci
		var rec claim
		err := c.read(ctx, cl.Object.Name, kindClaim, &rec)
		if err == nil {
			cl.Owner, cl.Created = rec.Owner, rec.Created
		}
		cl.Err = err
		return readErr(err)
	}); err != nil {
		return nil, err
	}
	if err := readAll(ctx, parts, func(ctx context.Context, r *partRead) error {
		r.p.Part, r.p.Err = c.part(ctx, r.p.Object.Name, r.gen)
		return readErr(r.p.Err)
	}); err != nil {
		return nil, err
	}
	return l, l.damage()
}

// damage joins the errors of the listing's damaged objects.
func (l *Listing) damage() error {
	var errs []error
	add := func(err error) {
		if errors.Is(err, ErrDamaged) {
			errs = append(errs, err)
		}
	}
	for _, gi := range l.Generations {
		add(gi.Err)
		for _, cl := range gi.Claims {
			add(cl.Err)
		}
		for _, ci := range gi.Checkpoints {
			for _, p := range ci.Parts {
				add(p.Err)
			}
		}
	}
	return errors.Join(errs...)
}

// readErr is the error of a read that stops Inspect: none for a damaged
// object or one deleted since the listing.
func readErr(err error) error {
	if err == nil || errors.Is(err, ErrDamaged) || errors.Is(err, backends.ErrNotFound) {
		return nil
	}
	return err
}

// readAll calls read on every item, inspectReads at once; the first error
// cancels the others' context and is returned.
func readAll[T any](ctx context.Context, items []T, read func(context.Context, *T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(inspectReads)
	for i := range items {
		g.Go(func() error { return read(gctx, &items[i]) })
	}
	return g.Wait()
}

// states sets the state of every checkpoint of gi, whose record is read;
// live is the live generation.
func states(v *view, gi *GenerationInfo, live int64) {
	complete := v.complete(gi.Record)
	var last int64
	if len(complete) > 0 {
		last = complete[len(complete)-1]
	}
	for j := range gi.Checkpoints {
		ci := &gi.Checkpoints[j]
		switch {
		case slices.Contains(complete, ci.Number):
			ci.State = Complete
		case gi.Number == live && ci.Number > last:
			ci.State = Pending
		default:
			ci.State = NeverComplete
		}
	}
}

// retention returns what the deletion rule keeps of the live generation g
// as of v: the retained checkpoints and the catalog parts kept, as
// Member.Plan computes them.
//
// recent says whether a part written at a time (by the store's clock, as
// listed) is younger than the grace. What stopped being retained (or
// needed, for the parts g restored) when such a recent part was written
// is kept as well: a generation started from a listing made before that
// part may restore it. A nil recent keeps only what is retained as of v,
// which is what a new generation may choose to restore.
func retention(v *view, g *Generation, retain int, recent func(time.Time) bool) ([]int64, []string) {
	keep := map[string]bool{}
	keepAll := func(parts map[int]object) {
		for _, o := range parts {
			keep[o.name] = true
		}
	}
	isRecent := func(parts ...object) bool {
		if recent == nil {
			return false
		}
		for _, o := range parts {
			if recent(o.modTime) {
				return true
			}
		}
		return false
	}
	var retained []int64
	restoredNeeded := false
	if g.Mode == Aligned {
		complete := v.complete(g)
		k := len(complete)
		retained = complete[max(0, k-retain):]
		var last int64
		if k > 0 {
			last = complete[k-1]
		}
		for n, parts := range v.parts[g.Number] {
			if slices.Contains(retained, n) || n > last {
				keepAll(parts)
			}
		}
		// complete[j] left the retained checkpoints when complete[j+retain]
		// completed, the restored parts (a checkpoint before complete[0])
		// when complete[retain-1] did.
		for j := range max(0, k-retain) {
			if isRecent(slices.Collect(maps.Values(v.parts[g.Number][complete[j+retain]]))...) {
				keepAll(v.parts[g.Number][complete[j]])
			}
		}
		restoredNeeded = k < retain || isRecent(slices.Collect(maps.Values(v.parts[g.Number][complete[retain-1]]))...)
	} else {
		seen := map[int64]bool{}
		for i := range g.Instances() {
			var ns []int64
			for n, parts := range v.parts[g.Number] {
				if _, ok := parts[i]; ok {
					ns = append(ns, n)
				}
			}
			slices.Sort(ns)
			part := func(j int) object { return v.parts[g.Number][ns[j]][i] }
			if len(ns) < retain || isRecent(part(retain-1)) {
				restoredNeeded = true
			}
			for j := range ns {
				switch {
				case j >= len(ns)-retain:
					keep[part(j).name] = true
					seen[ns[j]] = true
				case isRecent(part(j + retain)):
					keep[part(j).name] = true
				}
			}
		}
		retained = slices.Sorted(maps.Keys(seen))
	}
	if restoredNeeded {
		for _, name := range g.Restored {
			keep[name] = true
		}
	}
	return slices.Clone(retained), slices.Sorted(maps.Keys(keep))
}

func info(o object) backends.ObjectInfo {
	return backends.ObjectInfo{Name: o.name, Size: o.size, ModTime: o.modTime}
}
