// Package collect deletes a job's old objects that nothing references any
// more. It is the one deletion rule that "dstl gc", the checkpoint catalog
// and a state-store checkpointer alone on its job apply.
//
// Under a job's prefix ([objname.JobPrefix]) the engine writes log
// objects (PREFIX/UUIDv7.dstl), the state stores write snapshot objects
// (PREFIX/statestore/OPERATOR/UUIDv7.snap), and package kafkastate writes
// checkpoint records (PREFIX/_records/UUIDv7.cN.rec). [Run] lists them and
// deletes those that
//
//   - no kept handle references ([Keep]),
//   - are of a kind the caller collects ([Options.Kinds]; a snapshot only
//     of an operator whose snapshots the kept handles account for, or of
//     every operator with [Options.AllOperators]), and
//   - were not made for a checkpoint that may still complete: a name that
//     records a checkpoint at or above [Options.HoldFrom] is kept however
//     old (see [objname.Name.Checkpoint]), and
//   - are older than the grace period by both of their clocks: the
//     storage's (the modification time) and the time in their name, a
//     UUIDv7 made by the writer's clock. An object one clock calls young
//     is kept, and so is one whose modification time the storage does not
//     report.
//
// Objects named otherwise are never deleted, but for clock probes (see
// below) that a collection killed mid-way left behind, once they are older
// than the grace by both clocks.
//
// Ages count from "now", the earlier of the caller's clock and the
// storage's: before listing, Run puts a small probe object
// (PREFIX/.gc-clock-UUIDv7, see [objname.NewClockProbe]), reads its
// modification time back through the listing and deletes it, also in a
// dry run. So a caller's clock that runs ahead cannot make objects look
// older than the storage says they are. What is guaranteed: no object is
// deleted that, by the storage's clock, was modified within the grace
// period, or whose name's time is within the grace period of now. A
// writer whose clock ran behind makes names look older; its objects are
// then protected by their modification time alone. A storage whose clock
// runs behind only keeps objects longer. Without the storage's clock, Run
// deletes nothing; a dry run goes on with the caller's clock and says so.
//
// Before deleting anything, Run checks that every kept object under the
// prefix is there; if one is missing (a wrong backend or job id, or data
// already lost) it reports it, deletes nothing and fails with
// [ErrMissing].
//
// Where the backend has incomplete uploads ([UploadCollector]: S3's
// multipart uploads, which a writer killed mid-upload leaves), Run also
// lists those under the prefix and aborts the ones of objects it collects
// that are older than the grace by both clocks: the upload's start, by
// the storage's clock, and the time in the name.
//
// Keep the handles of every checkpoint that may still be restored. On a
// running job, a checkpoint in progress may also reuse change sets
// uploaded earlier, and the snapshot materialised since the last
// checkpoint, whose objects no kept handle names yet: choose a grace
// period longer than that, or collect while the job is stopped.
//
// Each step that waits for the storage is bounded by [Options.Timeout]:
// the clock probe's put and listing together, its delete, the wait for
// the next object of a listing (or page of incomplete uploads), each
// delete and abort. Once a delete or abort times out, no further one
// starts.
package collect

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/objname"
)

// Kinds is a set of the kinds of objects a collection deletes.
type Kinds uint8

// The kinds of objects a collection deletes; combine them with |.
const (
	// Logs: log objects, PREFIX/UUIDv7.dstl.
	Logs Kinds = 1 << iota
	// Snapshots: snapshot objects, PREFIX/statestore/OPERATOR/UUIDv7.snap,
	// of the operators the [Keep] names (or of every operator, with
	// [Options.AllOperators]).
	Snapshots
	// Records: checkpoint records, PREFIX/_records/UUIDv7.cN.rec (package
	// kafkastate's): keep the ones that may still be restored with
	// [Keep.AddObject].
	Records

	allKinds = Logs | Snapshots | Records
)

// DefaultConcurrency is the number of deletes (and aborts) in flight at
// once when [Options.Concurrency] is 0.
const DefaultConcurrency = 8

// probeDeleteTimeout bounds the clock probe's delete when
// [Options.Timeout] is 0: the probe is the collection's own, and its
// delete runs even when the caller's context is done.
const probeDeleteTimeout = 30 * time.Second

// ErrMissing is the error of a collection that refused to delete
// anything: an object that the kept handles reference is not under the
// prefix, or none of them is.
var ErrMissing = errors.New("kept handles reference objects that are not there; nothing deleted")

// ErrNoAnswer is wrapped by the error of a step that the storage did not
// answer within [Options.Timeout] (with the call's error, such as
// context.Canceled).
var ErrNoAnswer = errors.New("no answer in time")

// Options say what a collection deletes and how.
type Options struct {
	// JobID is the job whose objects are collected: those under
	// [objname.JobPrefix](JobID). Empty: the backend's root.
	JobID string
	// Grace is the age, by both clocks, below which no object is deleted.
	// 0 is allowed; a negative grace is not.
	Grace time.Duration
	// Keep are the objects never deleted and the operators whose
	// snapshots they account for; nil keeps nothing.
	Keep *Keep
	// Kinds are the kinds of objects collected; at least one.
	Kinds Kinds
	// AllOperators says that every snapshot under the prefix is the
	// caller's to collect, of any operator (a job that is gone for good,
	// or a catalog that holds every checkpoint of the job); without it,
	// only the snapshots of the operators the Keep names are collected,
	// and the others are reported as [NotCollected].
	AllOperators bool
	// HoldFrom keeps every log and snapshot object and every record whose
	// name records a checkpoint at or above it ([objname.Name.Checkpoint]), however old:
	// a checkpoint that may still complete may reference it. A job's
	// checkpoint catalog sets it to the checkpoint after its latest
	// complete one, or lower while an instance may still reference
	// objects made for an earlier one (a materialisation in progress).
	// 0 holds nothing by its checkpoint.
	HoldFrom int64
	// DryRun: find what would be deleted (and aborted), delete nothing
	// but the clock probe.
	DryRun bool
	// Concurrency is the number of deletes and aborts in flight at once;
	// 0 is [DefaultConcurrency].
	Concurrency int
	// Timeout bounds each step that waits for the storage; 0: no bound
	// (but for the clock probe's delete, bounded by 30 s all the same:
	// it runs even once ctx is done).
	Timeout time.Duration
	// Now is the caller's clock; nil is time.Now.
	Now func() time.Time
	// Uploads lists and aborts the backend's incomplete uploads; nil
	// finds them from the backend (see [FindUploadCollector]), if it has
	// them.
	Uploads UploadCollector

	// Location names the storage in errors ("the storage at LOCATION did
	// not answer"), such as the base path it was opened with (secrets are
	// redacted); empty: "the storage".
	Location string
	// TimeoutName names the bound in errors, before its value: with
	// "--timeout", "did not answer within --timeout 8s"; empty: "did not
	// answer within 8s".
	TimeoutName string
	// Progress, when not nil, is called as each step begins, with done
	// 0, and after each delete or abort with the share of them done (more
	// than 0, up to 1). Steps read as "reading the storage's clock",
	// "listing PREFIX", "listing the incomplete uploads under PREFIX",
	// "deleting N objects, aborting M uploads". Calls never overlap.
	Progress func(step string, done float64)
	// Warn, when not nil, is told what went wrong without failing the
	// collection: a clock probe that could not be deleted (it stays
	// behind), a dry run that goes on without the storage's clock.
	Warn func(msg string)
}

// check returns an error wrapping [backends.ErrInvalidConfig] for options
// that are not valid.
func (o *Options) check() error {
	var err error
	// The prefix less its slash must be a valid name: no escape from the
	// backend's root, no empty segment.
	if o.JobID != "" {
		if cerr := backends.CheckObjectName(strings.TrimSuffix(objname.JobPrefix(o.JobID), "/")); cerr != nil {
			err = fmt.Errorf("job id %q: %w", o.JobID, cerr)
		}
	}
	switch {
	case err != nil:
	case o.Grace < 0:
		err = fmt.Errorf("grace %v: want 0 or more", o.Grace)
	case o.Kinds == 0 || o.Kinds&^allKinds != 0:
		err = fmt.Errorf("kinds %#x: want some of Logs, Snapshots and Records", uint8(o.Kinds))
	case o.Concurrency < 0:
		err = fmt.Errorf("concurrency %d: want 0 (the default) or more", o.Concurrency)
	case o.Timeout < 0:
		err = fmt.Errorf("timeout %v: want 0 (no bound) or more", o.Timeout)
	case o.HoldFrom < 0:
		err = fmt.Errorf("hold from checkpoint %d: want 0 (none) or more", o.HoldFrom)
	}
	if err != nil {
		return fmt.Errorf("%w: collect: %w", backends.ErrInvalidConfig, err)
	}
	return nil
}

// collects reports whether the collection deletes an old, unreferenced
// object of the name n: a log object, a checkpoint record, or a snapshot
// of an operator whose snapshots it collects, of the kinds it collects.
func (o *Options) collects(n objname.Name) bool {
	switch n.Kind {
	case objname.Log:
		return o.Kinds&Logs != 0
	case objname.Record:
		return o.Kinds&Records != 0
	case objname.Snapshot, objname.SnapshotFile:
		return o.Kinds&Snapshots != 0 && (o.AllOperators || o.Keep.HasOperator(n.Operator))
	}
	return false
}

func (o *Options) progress(step string, done float64) {
	if o.Progress != nil {
		o.Progress(step, done)
	}
}

func (o *Options) warn(msg string) {
	if o.Warn != nil {
		o.Warn(msg)
	}
}

// Run collects the job's old objects on b by the rules of the package
// and o, and returns what it found and did. It closes nothing.
//
// An error before the listing is done (options that are not valid,
// wrapping [backends.ErrInvalidConfig]; the clock probe failing outside a
// dry run; a listing failing) comes with no report. After the listing,
// the report comes with the error, if any: [ErrMissing], when Run refused
// to delete anything; or one that says how many deletes and aborts
// failed (each is in [Report.Failed], and the error wraps the first), or
// that ctx was done, or that a step timed out ([ErrNoAnswer]) and no
// further delete started.
func Run(ctx context.Context, b backends.Backend, o Options) (*Report, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: collect: nil backend", backends.ErrInvalidConfig)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	prefix := objname.JobPrefix(o.JobID)
	rep := &Report{Prefix: prefix, DryRun: o.DryRun}

	o.progress("reading the storage's clock", 0)
	rep.LocalNow = o.Now()
	rep.Now = rep.LocalNow
	// Under the job's prefix, where credentials scoped to the job allow
	// writes.
	probe, err := objname.NewClockProbe(prefix)
	if err != nil {
		return nil, fmt.Errorf("reading the storage's clock (nothing deleted): %w", err)
	}
	storeNow, leftover, err := o.probeClock(ctx, b, probe)
	if leftover != nil {
		o.warn(leftover.Error())
	}
	switch {
	case err != nil && !o.DryRun:
		return nil, fmt.Errorf("reading the storage's clock (nothing deleted): %w", err)
	case err != nil:
		rep.ClockNote = fmt.Sprintf("the clock probe failed (%v): ages are by this machine's clock", err)
		o.warn(rep.ClockNote)
	case storeNow.IsZero():
		// Such a storage reports no modification time of any object
		// either, so every object is young (kept) whatever now is.
		rep.ClockNote = "the storage reports no modification times"
	default:
		rep.StoreNow = storeNow
		if storeNow.Before(rep.Now) {
			rep.Now = storeNow
		}
	}

	o.progress("listing "+prefix, 0)
	var listed []backends.ObjectInfo
	st := o.step(ctx, "listing "+prefix)
	err = st.done(b.List(st.ctx, prefix, func(oi backends.ObjectInfo) error {
		st.kick() // each object is progress
		// The clock probe is no object of the job's (listed when its
		// delete failed, or before the delete shows).
		if oi.Name != probe {
			listed = append(listed, oi)
		}
		return nil
	}))
	if err != nil {
		return nil, err
	}
	// The incomplete uploads under the prefix, where the backend has them.
	uc := o.Uploads
	if uc == nil {
		uc = FindUploadCollector(b)
	}
	var uploads []backends.IncompleteUpload
	if uc != nil {
		o.progress("listing the incomplete uploads under "+prefix, 0)
		rep.UploadsChecked = true
		st := o.step(ctx, "listing the incomplete uploads under "+prefix)
		err = st.done(uc.ListIncompleteUploads(st.ctx, prefix, func(u backends.IncompleteUpload) error {
			uploads = append(uploads, u)
			return nil
		}, st.kick)) // each page is progress, also one of other jobs' uploads only
		if err != nil {
			return nil, err
		}
	}
	young := func(t time.Time) bool { return t.IsZero() || rep.Now.Sub(t) <= o.Grace }
	for _, u := range uploads {
		rep.UploadsListed++
		// Only uploads of objects collected, old by both clocks: a
		// younger one may still be running.
		n := objname.Parse(prefix, u.Name)
		nameTime := n.Time()
		probe := n.Kind == objname.CreateOnlyProbe // an upload of the catalog's check, left by a process killed during it
		if !o.collects(n) && !probe || young(u.Initiated) || young(nameTime) {
			rep.UploadsKept++
			continue
		}
		rep.Uploads = append(rep.Uploads, Upload{Name: u.Name, UploadID: u.UploadID, Initiated: u.Initiated, NameTime: nameTime})
	}
	slices.SortFunc(rep.Uploads, func(a, b Upload) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.UploadID, b.UploadID))
	})
	seen := map[string]bool{}
	var deletable []int // indexes into rep.Objects
	for _, oi := range listed {
		rep.Listed.add(oi.Size)
		seen[oi.Name] = true
		n := objname.Parse(prefix, oi.Name)
		obj := Object{Name: oi.Name, Kind: n.Kind, Size: oi.Size, ModTime: oi.ModTime, NameTime: n.Time()}
		switch {
		case o.Keep.Has(oi.Name):
			obj.Reason = Referenced
			rep.Referenced.add(oi.Size)
		case n.Kind == objname.ClockProbe || n.Kind == objname.CreateOnlyProbe:
			// Another collection's clock probe, or a catalog's check of
			// create-only puts: a running one's, or one left behind by a
			// process killed between its put and its delete. Deleted once
			// old by both clocks (a random-UUID clock probe of an older
			// version by its modification time).
			if young(oi.ModTime) || !obj.NameTime.IsZero() && young(obj.NameTime) {
				obj.Reason = Young
				rep.Young.add(oi.Size)
				break
			}
			obj.Reason = Deletable
			rep.Deletable.add(oi.Size)
			deletable = append(deletable, len(rep.Objects))
		case n.Kind != objname.Log && n.Kind != objname.Snapshot && n.Kind != objname.SnapshotFile && n.Kind != objname.Record:
			obj.Reason = Foreign
			rep.Foreign.add(oi.Size)
		case !o.collects(n):
			obj.Reason = NotCollected
			rep.NotCollected.add(oi.Size)
		case o.HoldFrom > 0 && n.Checkpoint >= o.HoldFrom:
			obj.Reason = Held
			rep.Held.add(oi.Size)
		case young(oi.ModTime) || young(obj.NameTime): // a zero modification time is unknown: young
			obj.Reason = Young
			rep.Young.add(oi.Size)
		default:
			obj.Reason = Deletable
			rep.Deletable.add(oi.Size)
			deletable = append(deletable, len(rep.Objects))
		}
		rep.Objects = append(rep.Objects, obj)
	}
	for _, name := range o.Keep.Objects() {
		if strings.HasPrefix(name, prefix) && !seen[name] {
			rep.Missing = append(rep.Missing, name)
		}
	}
	if len(rep.Missing) > 0 {
		return rep, fmt.Errorf("%w: %d under %q, e.g. %q", ErrMissing, len(rep.Missing), prefix, rep.Missing[0])
	}
	if n := o.Keep.Len(); n > 0 && rep.Referenced.Objects == 0 {
		rep.Missing = o.Keep.Objects()
		return rep, fmt.Errorf("%w: none of the %d objects the kept handles reference is under %q", ErrMissing, n, prefix)
	}
	if o.DryRun || len(deletable)+len(rep.Uploads) == 0 {
		return rep, nil
	}
	return rep, o.remove(ctx, b, uc, rep, deletable)
}

// remove deletes the deletable objects (indexes into rep.Objects) and
// aborts rep.Uploads, o.Concurrency at a time, recording each outcome in
// rep.
func (o *Options) remove(ctx context.Context, b backends.Backend, uc UploadCollector, rep *Report, deletable []int) error {
	stepName := fmt.Sprintf("deleting %d objects, aborting %d uploads", len(deletable), len(rep.Uploads))
	o.progress(stepName, 0)
	rep.DeletesRun = true
	var mu sync.Mutex
	var stalled error // the first call the storage did not answer in time
	// A storage that stops answering stops the calls not yet started.
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	g := new(errgroup.Group)
	g.SetLimit(o.Concurrency)
	total := len(deletable) + len(rep.Uploads)
	for i := range total {
		if dctx.Err() != nil {
			break // the rest are not deleted
		}
		g.Go(func() error {
			if dctx.Err() != nil {
				return nil
			}
			var st *step
			var err error
			var fail Failure
			if i < len(deletable) {
				obj := &rep.Objects[deletable[i]]
				st = o.step(dctx, "deleting "+obj.Name)
				err = b.Delete(st.ctx, obj.Name)
				fail.Name = obj.Name
			} else {
				u := &rep.Uploads[i-len(deletable)]
				st = o.step(dctx, "aborting the upload "+u.UploadID+" of "+u.Name)
				err = uc.AbortIncompleteUpload(st.ctx, backends.IncompleteUpload{Name: u.Name, UploadID: u.UploadID, Initiated: u.Initiated})
				fail.Name, fail.UploadID = u.Name, u.UploadID
			}
			timedOut := st.timedOut()
			err = st.done(err)
			mu.Lock()
			defer mu.Unlock()
			if timedOut && stalled == nil {
				stalled = err
				stop()
			}
			switch {
			case err != nil:
				fail.Err = err
				rep.Failed = append(rep.Failed, fail)
			case i < len(deletable):
				obj := &rep.Objects[deletable[i]]
				obj.Deleted = true
				rep.Deleted.add(obj.Size)
			default:
				rep.Uploads[i-len(deletable)].Aborted = true
				rep.UploadsAborted++
			}
			o.progress(stepName, float64(rep.Deleted.Objects+rep.UploadsAborted+len(rep.Failed))/float64(total))
			return nil
		})
	}
	_ = g.Wait() // every failure is in rep.Failed
	slices.SortFunc(rep.Failed, func(a, b Failure) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.UploadID, b.UploadID))
	})
	done := fmt.Sprintf("%d of %d objects deleted", rep.Deleted.Objects, len(deletable))
	if len(rep.Uploads) > 0 {
		done += fmt.Sprintf(", %d of %d incomplete uploads aborted", rep.UploadsAborted, len(rep.Uploads))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %s: %w", done, err)
	}
	if stalled != nil {
		return fmt.Errorf("stopped: %s: %w", done, stalled)
	}
	if len(rep.Failed) > 0 {
		what := "deletes"
		if len(rep.Uploads) > 0 {
			what = "deletes and aborts"
		}
		return fmt.Errorf("%d of %d %s failed (%s), e.g. %w", len(rep.Failed), total, what, done, rep.Failed[0].Err)
	}
	return nil
}

// probeClock returns the storage's "now": it puts a small object name
// (under the job's prefix, [objname.ClockProbePrefix] and a UUID), reads
// its modification time back through List, and deletes it. The put and
// the listing are one step, the delete another. The time is zero when
// the storage reports none. leftover is the error of deleting the probe,
// which then stays behind until a later collection finds it older than
// the grace.
func (o *Options) probeClock(ctx context.Context, b backends.Backend, name string) (t time.Time, leftover, err error) {
	body := []byte("dstl reads the storage's clock from this object's modification time before it collects old objects, then deletes it\n")
	st := o.step(ctx, "the clock probe "+name)
	err = b.Put(st.ctx, name, bytes.NewReader(body), int64(len(body)))
	put := err == nil
	found := false
	if put {
		err = b.List(st.ctx, name, func(oi backends.ObjectInfo) error {
			if oi.Name == name {
				t, found = oi.ModTime, true
			}
			return nil
		})
		if err == nil && !found {
			err = fmt.Errorf("the probe %q put is not listed", name)
		}
	}
	if err = st.done(err); !put {
		return time.Time{}, nil, err
	}
	// Also when ctx is done: the probe is the collection's own.
	what := "deleting the clock probe " + name
	dst := o.step(context.WithoutCancel(ctx), what)
	if o.Timeout == 0 {
		dst = newStep(context.WithoutCancel(ctx), what, o.Location, probeDeleteTimeout, probeDeleteTimeout.String())
	}
	if derr := dst.done(b.Delete(dst.ctx, name)); derr != nil {
		leftover = fmt.Errorf("the clock probe %q could not be deleted: %w", name, derr)
	}
	return t, leftover, err
}

// step is one step of a collection that waits for the storage, bounded
// by [Options.Timeout]: a call, or a listing whose every object (or page)
// restarts the bound.
type step struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer // nil without a bound
	d      time.Duration
	what   string // the step, for errors
	where  string // "the storage at LOCATION", for errors
	limit  string // the bound, for errors
}

// step starts a step bounded by o.Timeout (unbounded when it is 0).
func (o *Options) step(ctx context.Context, what string) *step {
	limit := o.Timeout.String()
	if o.TimeoutName != "" {
		limit = o.TimeoutName + " " + limit
	}
	return newStep(ctx, what, o.Location, o.Timeout, limit)
}

func newStep(ctx context.Context, what, location string, d time.Duration, limit string) *step {
	sctx, cancel := context.WithCancelCause(ctx)
	where := "the storage"
	if location != "" {
		where += " at " + backends.RedactURL(location)
	}
	s := &step{ctx: sctx, cancel: cancel, d: d, what: what, where: where, limit: limit}
	if d > 0 {
		s.timer = time.AfterFunc(d, func() { cancel(ErrNoAnswer) })
	}
	return s
}

// kick restarts the bound: the storage made progress.
func (s *step) kick() {
	if s.timer != nil {
		s.timer.Reset(s.d)
	}
}

// timedOut reports whether the bound ended the step.
func (s *step) timedOut() bool { return context.Cause(s.ctx) == ErrNoAnswer }

// done ends the step and returns its error err, saying so, and wrapping
// [ErrNoAnswer], when the bound ended it.
func (s *step) done(err error) error {
	timedOut := s.timedOut()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.cancel(nil)
	if err != nil && timedOut {
		return &timeoutError{what: s.what, where: s.where, limit: s.limit, err: err}
	}
	return err
}

// timeoutError is the error of a step that the storage did not answer in
// time: it matches [ErrNoAnswer] and the call's error.
type timeoutError struct {
	what, where, limit string
	err                error
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("%s: %s did not answer within %s: %v", e.what, e.where, e.limit, e.err)
}

func (e *timeoutError) Unwrap() []error { return []error{e.err, ErrNoAnswer} }
