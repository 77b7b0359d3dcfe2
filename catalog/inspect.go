package catalog

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
	// Complete: every process of the generation committed (in the
	// independent mode: a checkpoint with any commit).
	Complete CheckpointState = "complete"
	// Pending: a checkpoint of the live generation, after its latest
	// complete one, that not every process committed yet; it may still
	// complete.
	Pending CheckpointState = "pending"
	// NeverComplete: a checkpoint that not every process committed and
	// that no reader takes as complete: of a fenced generation, or of the
	// live one before its latest complete checkpoint.
	NeverComplete CheckpointState = "never-complete"
	// Unknown: the generation's record is missing or damaged, so its
	// process set is unknown.
	Unknown CheckpointState = "unknown"
)

// InspectOptions says what [Inspect] reads beyond one listing of the
// catalog and the generations' records.
type InspectOptions struct {
	// Retain is the job members' Retain, for [Listing.Retention]. Default
	// DefaultRetain.
	Retain int
	// Claims reads every claim (a GET each) for its owner and time.
	Claims bool
	// Commits, when set, says of which checkpoints to read the commits (a
	// GET each): their parts' state, metadata and objects. Nil reads
	// none.
	Commits func(generation, checkpoint int64) bool
}

// Listing is a job's catalog as one listing saw it, for people and tools
// to inspect; nothing in it is written.
type Listing struct {
	// Prefix is the job's prefix; the catalog is under
	// Prefix+objname.CatalogV2Dir.
	Prefix string
	// Live is the latest generation, whose members commit; every older
	// generation is fenced. 0: the job has no generation.
	Live int64
	// Generations holds every generation with an object in the catalog,
	// oldest first.
	Generations []GenerationInfo
	// Retention is what the deletion rule keeps as of this listing, as
	// the live generation's leader plans it with InspectOptions.Retain.
	Retention Retention
	// FirstLayout counts the catalog objects of the first layout
	// (releases before the second): a job not upgraded yet, or what its
	// upgrade left (one generation record stays, to fence the processes
	// of older releases).
	FirstLayout int
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
	// Live says that this is the latest generation.
	Live bool
	// Fence is the generation's fence as listed: a newer generation
	// started or is starting. Its Name is empty when there is none.
	Fence backends.ObjectInfo
	// Claims holds the process slots claimed, by process.
	Claims []ClaimInfo
	// Checkpoints holds the checkpoints with a commit, oldest first.
	Checkpoints []CheckpointInfo
}

// ClaimInfo is a process slot's claim.
type ClaimInfo struct {
	// Process is the process's index.
	Process int
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
	// Retained says that the deletion rule retains it.
	Retained bool
	// Commits holds the commits, by process.
	Commits []CommitInfo
}

// CommitInfo is one process's commit of a checkpoint.
type CommitInfo struct {
	// Process is the process's index.
	Process int
	// Object is the commit's object as listed.
	Object backends.ObjectInfo
	// Kept says that the deletion rule keeps the commit and the objects
	// its parts refer to: retained, pending, or restored by the live
	// generation while needed.
	Kept bool
	// Parts are the commit's parts, when read (InspectOptions.Commits and
	// no Err), in instance order.
	Parts []*Part
	// HoldFrom and Complete are the commit's, when read (see
	// [InstanceState.HoldFrom], and [Status.Complete] for the leader's
	// commits).
	HoldFrom, Complete int64
	// Err is the error of reading the commit, as for a GenerationInfo.
	Err error
}

// Retention is what the deletion rule keeps of a job's catalog for the
// live generation; nothing is retained when the live generation's record
// cannot be read.
type Retention struct {
	// Retain is the Retain it was computed with.
	Retain int
	// Retained lists the retained checkpoints of the live generation,
	// oldest first (in the independent mode: every checkpoint with a
	// retained commit).
	Retained []int64
	// Commits names the catalog objects kept for their parts: retained
	// and pending commits of the live generation, and what it restored
	// while it may still need it (see [Plan.Commits]).
	Commits []string
	// Missing names the objects of Commits that are not in the catalog:
	// what the live generation restored from and may still need (to
	// restore again, or a new member to join it), lost.
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

// Inspect lists job jobID's catalog once (both layouts) and reads every
// generation's record of the second layout, and, as opts says, the claims
// and the commits of some checkpoints. It writes nothing.
//
// A damaged object does not stop it: the object's Err says what is wrong,
// and Inspect returns the listing with an error that joins those of every
// damaged object (each wraps ErrDamaged and names the object). An object
// deleted between the listing and its read (by the deletion rule) has an
// Err that wraps backends.ErrNotFound, and is no error of Inspect. Any
// other error stops it, and returns no listing.
func Inspect(ctx context.Context, b backends.Backend, jobID string, opts InspectOptions) (*Listing, error) {
	if opts.Retain == 0 {
		opts.Retain = DefaultRetain
	}
	s := newStore(b, jobID, nil)
	views := map[int64]*genView{}
	records := map[int64]backends.ObjectInfo{}
	l := &Listing{Prefix: s.prefix, Retention: Retention{Retain: opts.Retain}}
	err := s.list(ctx, s.prefix+objname.CatalogDir, func(oi backends.ObjectInfo) {
		ref := objname.ParseCatalog(s.prefix, oi.Name)
		switch {
		case ref.Version == 1:
			l.FirstLayout++
		case ref.Kind == objname.CatalogOther:
			l.Other = append(l.Other, oi.Name)
		case ref.Kind == objname.CatalogGeneration:
			records[ref.Generation] = oi
		default:
			v := views[ref.Generation]
			if v == nil {
				v = &genView{gen: ref.Generation, claims: map[int]backends.ObjectInfo{}, commits: map[int64]map[int]backends.ObjectInfo{}}
				views[ref.Generation] = v
			}
			v.add(s.prefix, oi)
		}
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(l.Other)
	numbers := map[int64]bool{}
	for g := range records {
		numbers[g] = true
		l.Live = max(l.Live, g)
	}
	for g := range views {
		numbers[g] = true
	}
	for _, g := range slices.Sorted(maps.Keys(numbers)) {
		v := views[g]
		if v == nil {
			v = &genView{gen: g, claims: map[int]backends.ObjectInfo{}, commits: map[int64]map[int]backends.ObjectInfo{}}
			views[g] = v
		}
		gi := GenerationInfo{Number: g, Live: g == l.Live, Object: records[g]}
		if v.fence != nil {
			gi.Fence = *v.fence
		}
		for _, p := range slices.Sorted(maps.Keys(v.claims)) {
			gi.Claims = append(gi.Claims, ClaimInfo{Process: p, Object: v.claims[p]})
		}
		for _, n := range slices.Sorted(maps.Keys(v.commits)) {
			ci := CheckpointInfo{Generation: g, Number: n, State: Unknown}
			for _, p := range slices.Sorted(maps.Keys(v.commits[n])) {
				ci.Commits = append(ci.Commits, CommitInfo{Process: p, Object: v.commits[n][p]})
			}
			gi.Checkpoints = append(gi.Checkpoints, ci)
		}
		l.Generations = append(l.Generations, gi)
	}

	// The records first: reading a commit checks it against its
	// generation.
	if err := readAll(ctx, l.Generations, func(ctx context.Context, gi *GenerationInfo) error {
		if gi.Object.Name == "" {
			return nil
		}
		gi.Record, gi.Err = s.generation(ctx, gi.Number)
		return readErr(gi.Err)
	}); err != nil {
		return nil, err
	}
	keptNames := map[string]bool{}
	for i := range l.Generations {
		gi := &l.Generations[i]
		if gi.Record == nil {
			continue
		}
		v := views[gi.Number]
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
			case gi.Live && ci.Number > last:
				ci.State = Pending
			default:
				ci.State = NeverComplete
			}
		}
		if !gi.Live {
			continue
		}
		k := keptOf(gi.Record, v, opts.Retain)
		l.Retention.Retained = k.retained
		for n, byP := range k.commits {
			for p := range byP {
				keptNames[objname.CatalogV2CommitName(s.prefix, gi.Number, n, p)] = true
			}
		}
		if k.restoredNeeded {
			for _, r := range gi.Record.Restored {
				keptNames[r.Object] = true
			}
		}
		for j := range gi.Checkpoints {
			gi.Checkpoints[j].Retained = slices.Contains(k.retained, gi.Checkpoints[j].Number)
		}
	}
	l.Retention.Commits = slices.Sorted(maps.Keys(keptNames))
	listed := map[string]bool{}
	var claims []*ClaimInfo
	type commitRead struct {
		c   *CommitInfo
		gen *Generation // nil when its record could not be read
	}
	var commits []commitRead
	for i := range l.Generations {
		gi := &l.Generations[i]
		for j := range gi.Claims {
			if opts.Claims {
				claims = append(claims, &gi.Claims[j])
			}
		}
		for j := range gi.Checkpoints {
			ci := &gi.Checkpoints[j]
			read := opts.Commits != nil && opts.Commits(gi.Number, ci.Number)
			for k := range ci.Commits {
				c := &ci.Commits[k]
				listed[c.Object.Name] = true
				c.Kept = keptNames[c.Object.Name]
				if read {
					commits = append(commits, commitRead{c, gi.Record})
				}
			}
		}
	}
	for _, name := range l.Retention.Commits {
		if ref := objname.ParseCatalog(s.prefix, name); ref.Version == 2 && !listed[name] {
			l.Retention.Missing = append(l.Retention.Missing, name)
		}
	}
	if err := readAll(ctx, claims, func(ctx context.Context, ci **ClaimInfo) error {
		cl := *ci
		var rec claim
		err := s.read(ctx, cl.Object.Name, kindClaim, &rec)
		if err == nil {
			cl.Owner, cl.Created = rec.Owner, rec.Created
		}
		cl.Err = err
		return readErr(err)
	}); err != nil {
		return nil, err
	}
	if err := readAll(ctx, commits, func(ctx context.Context, r *commitRead) error {
		c, err := s.commit(ctx, r.c.Object.Name, r.gen)
		if err == nil {
			r.c.Parts, r.c.HoldFrom, r.c.Complete = c.Parts, c.HoldFrom, c.Complete
		}
		r.c.Err = err
		return readErr(err)
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
			for _, c := range ci.Commits {
				add(c.Err)
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
