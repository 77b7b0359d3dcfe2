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
// delete and abort. A step the storage does not answer in time fails with
// a [*NoAnswerError] naming it. Once a delete or abort times out, no
// further one starts.
//
// Run reports what it does as it goes through [Options.OnEvent], and what
// it found and did in its [Report]: structured data, which a caller words
// as it likes.
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

// Defaults of [Options].
const (
	// DefaultGrace is the grace period of a collection whose
	// [Options.Grace] is 0: a day, as the checkpoint catalog's default
	// (docs/CATALOG.md says what it protects and what it costs).
	DefaultGrace = 24 * time.Hour
	// DefaultConcurrency is the number of deletes (and aborts) in flight
	// at once when [Options.Concurrency] is 0.
	DefaultConcurrency = 8
	// DefaultTimeout bounds each step that waits for the storage when
	// [Options.Timeout] is 0. It also bounds the clock probe's delete
	// under [NoTimeout]: the probe is the collection's own, and its delete
	// runs even when the caller's context is done.
	DefaultTimeout = 30 * time.Second
	// DefaultKinds are the kinds of objects collected when
	// [Options.Kinds] is 0: log and snapshot objects.
	DefaultKinds = Logs | Snapshots
)

// The values of [Options]' fields that turn a default off.
const (
	// NoGrace is [Options.Grace] for no grace period at all: an object
	// that nothing keeps is deleted however young. Only for tests and
	// jobs that stopped.
	NoGrace time.Duration = -1
	// NoTimeout is [Options.Timeout] for no bound on the steps that wait
	// for the storage (the clock probe's delete is still bounded by
	// [DefaultTimeout]).
	NoTimeout time.Duration = -1
)

// ErrMissing is the error of a collection that refused to delete
// anything: an object that the kept handles reference is not under the
// prefix, or none of them is.
var ErrMissing = errors.New("kept handles reference objects that are not there; nothing deleted")

// ErrNoAnswer is matched by the error of a step that the storage did not
// answer within [Options.Timeout] (a [*NoAnswerError], which also matches
// the call's error, such as context.Canceled).
var ErrNoAnswer = errors.New("no answer in time")

// Options say what a collection deletes and how. The zero value of every
// field is its default; the zero Options collect the old log and snapshot
// objects of the backend's root that nothing keeps (snapshots only of the
// operators Keep names, so none).
type Options struct {
	// JobID is the job whose objects are collected: those under
	// [objname.JobPrefix](JobID). The default, empty, is the backend's
	// root. It must be a valid object name less its slash: no "." or ".."
	// segment, no empty one.
	JobID string
	// Grace is the age, by both clocks, below which no object is deleted.
	// The default is a day ([DefaultGrace]); [NoGrace] is none. Another
	// negative value is not valid.
	Grace time.Duration
	// Keep are the objects never deleted and the operators whose
	// snapshots they account for. The default, nil, keeps nothing.
	Keep *Keep
	// Kinds are the kinds of objects collected. The default, 0, is
	// [DefaultKinds], log and snapshot objects. A bit that is not one of
	// the kinds is not valid.
	Kinds Kinds
	// AllOperators says that every snapshot under the prefix is the
	// caller's to collect, of any operator (a job that is gone for good,
	// or a catalog that holds every checkpoint of the job); by default,
	// only the snapshots of the operators the Keep names are collected,
	// and the others are reported as [NotCollected].
	AllOperators bool
	// HoldFrom keeps every log and snapshot object and every record whose
	// name records a checkpoint at or above it ([objname.Name.Checkpoint]),
	// however old: a checkpoint that may still complete may reference it.
	// A job's checkpoint catalog sets it to the checkpoint after its
	// latest complete one, or lower while an instance may still reference
	// objects made for an earlier one (a materialisation in progress).
	// The default, 0, holds nothing by its checkpoint; a negative value is
	// not valid.
	HoldFrom int64
	// DryRun finds what would be deleted (and aborted) and deletes
	// nothing but the clock probe. The default is false.
	DryRun bool
	// Concurrency is the number of deletes and aborts in flight at once.
	// The default is [DefaultConcurrency]; a negative value is not valid.
	Concurrency int
	// Timeout bounds each step that waits for the storage. The default is
	// [DefaultTimeout]; [NoTimeout] is no bound. Another negative value is
	// not valid.
	Timeout time.Duration
	// Now is the caller's clock. The default is time.Now.
	Now func() time.Time
	// Uploads lists and aborts the backend's incomplete uploads. The
	// default, nil, finds them from the backend (see
	// [FindUploadCollector]), if it has them.
	Uploads UploadCollector
	// OnEvent, when set, is told what the collection does as it goes (see
	// [EventKind]): each step as it begins, each delete and abort as it
	// ends, and what goes wrong without failing the collection. Calls
	// never overlap; each must return quickly.
	OnEvent func(Event)
}

// EventKind says what an [Event] is.
type EventKind string

// The kinds of events.
const (
	// EventClock: the collection starts reading the storage's clock by
	// its clock probe, of the name Name.
	EventClock EventKind = "clock"
	// EventListing: the collection starts listing the objects under the
	// prefix Name.
	EventListing EventKind = "listing"
	// EventListingUploads: the collection starts listing the incomplete
	// uploads under the prefix Name.
	EventListingUploads EventKind = "listing-uploads"
	// EventDeleting: the deletes and aborts start: Objects objects to
	// delete and Uploads incomplete uploads to abort.
	EventDeleting EventKind = "deleting"
	// EventDeleted: the delete of the object Name, or the abort of its
	// upload UploadID, ended, failed when Err is set; Done of Total
	// deletes and aborts have ended.
	EventDeleted EventKind = "deleted"
	// EventProbeLeft: the clock probe Name could not be deleted (Err). It
	// stays behind until a later collection finds it older than the
	// grace.
	EventProbeLeft EventKind = "probe-left"
	// EventNoStoreClock: the clock probe failed (Err) in a dry run, which
	// goes on with the caller's clock ([Report.ClockErr]).
	EventNoStoreClock EventKind = "no-store-clock"
)

// Event is something a collection tells [Options.OnEvent] as it goes.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Name is the object or prefix the event is about (see the kinds).
	Name string
	// UploadID is the incomplete upload, for an abort's EventDeleted.
	UploadID string
	// Objects and Uploads are the deletes and aborts that EventDeleting
	// starts.
	Objects, Uploads int
	// Done and Total count the deletes and aborts ended and to end, for
	// EventDeleted.
	Done, Total int
	// Err is the error of a failed delete or abort, of the probe left
	// behind, or of the clock probe.
	Err error
}

// NoAnswerError is the error of a step that the storage did not answer
// within [Options.Timeout]. It matches [ErrNoAnswer] and the call's
// error.
type NoAnswerError struct {
	// Step says what waited: "the clock probe NAME", "deleting the clock
	// probe NAME", "listing PREFIX", "listing the incomplete uploads
	// under PREFIX", "deleting NAME", "aborting the upload ID of NAME".
	Step string
	// Name is the object or prefix the step waited on.
	Name string
	// Timeout is the bound that ended the step.
	Timeout time.Duration
	// Err is the call's error.
	Err error
}

// Error says which step the storage did not answer within which bound.
func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("%s: the storage did not answer within %v: %v", e.Step, e.Timeout, e.Err)
}

// Unwrap returns the call's error and [ErrNoAnswer].
func (e *NoAnswerError) Unwrap() []error { return []error{e.Err, ErrNoAnswer} }

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
	case o.Grace < 0 && o.Grace != NoGrace:
		err = fmt.Errorf("grace %v: want 0 (the default), NoGrace or more", o.Grace)
	case o.Kinds&^allKinds != 0:
		err = fmt.Errorf("kinds %#x: want some of Logs, Snapshots and Records", uint8(o.Kinds))
	case o.Concurrency < 0:
		err = fmt.Errorf("concurrency %d: want 0 (the default) or more", o.Concurrency)
	case o.Timeout < 0 && o.Timeout != NoTimeout:
		err = fmt.Errorf("timeout %v: want 0 (the default), NoTimeout or more", o.Timeout)
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

// withDefaults returns o, checked, with the default of every zero field
// filled in, and Grace and Timeout as the collection applies them: NoGrace
// is a grace of 0, NoTimeout a timeout of 0 (no bound).
func (o Options) withDefaults() (Options, error) {
	if err := o.check(); err != nil {
		return o, err
	}
	o.Grace = applied(o.Grace, DefaultGrace)
	o.Kinds = cmp.Or(o.Kinds, DefaultKinds)
	o.Concurrency = cmp.Or(o.Concurrency, DefaultConcurrency)
	o.Timeout = applied(o.Timeout, DefaultTimeout)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// applied returns the duration a collection applies for d, a Grace or a
// Timeout: def for 0, and 0 (none) for -1 ([NoGrace], [NoTimeout]).
func applied(d, def time.Duration) time.Duration {
	switch d {
	case 0:
		return def
	case -1:
		return 0
	}
	return d
}

// tell calls OnEvent, if set, with e.
func (o *Options) tell(e Event) {
	if o.OnEvent != nil {
		o.OnEvent(e)
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
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	prefix := objname.JobPrefix(o.JobID)
	rep := &Report{Prefix: prefix, Grace: o.Grace, DryRun: o.DryRun}

	rep.LocalNow = o.Now()
	rep.Now = rep.LocalNow
	// Under the job's prefix, where credentials scoped to the job allow
	// writes.
	probe, err := objname.NewClockProbe(prefix)
	if err != nil {
		return nil, fmt.Errorf("reading the storage's clock (nothing deleted): %w", err)
	}
	o.tell(Event{Kind: EventClock, Name: probe})
	storeNow, leftover, err := o.probeClock(ctx, b, probe)
	if leftover != nil {
		o.tell(Event{Kind: EventProbeLeft, Name: probe, Err: leftover})
	}
	switch {
	case err != nil && !o.DryRun:
		return nil, fmt.Errorf("reading the storage's clock (nothing deleted): %w", err)
	case err != nil:
		rep.ClockErr = err
		o.tell(Event{Kind: EventNoStoreClock, Name: probe, Err: err})
	case storeNow.IsZero():
		// Such a storage reports no modification time of any object
		// either, so every object is young (kept) whatever now is.
	default:
		rep.StoreNow = storeNow
		if storeNow.Before(rep.Now) {
			rep.Now = storeNow
		}
	}

	o.tell(Event{Kind: EventListing, Name: prefix})
	var listed []backends.ObjectInfo
	st := o.step(ctx, "listing "+prefix, prefix)
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
		o.tell(Event{Kind: EventListingUploads, Name: prefix})
		rep.UploadsChecked = true
		st := o.step(ctx, "listing the incomplete uploads under "+prefix, prefix)
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
	o.tell(Event{Kind: EventDeleting, Objects: len(deletable), Uploads: len(rep.Uploads)})
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
				st = o.step(dctx, "deleting "+obj.Name, obj.Name)
				err = b.Delete(st.ctx, obj.Name)
				fail.Name = obj.Name
			} else {
				u := &rep.Uploads[i-len(deletable)]
				st = o.step(dctx, "aborting the upload "+u.UploadID+" of "+u.Name, u.Name)
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
			o.tell(Event{Kind: EventDeleted, Name: fail.Name, UploadID: fail.UploadID, Err: err,
				Done: rep.Deleted.Objects + rep.UploadsAborted + len(rep.Failed), Total: total})
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
	st := o.step(ctx, "the clock probe "+name, name)
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
	// Also when ctx is done, and bounded also without a timeout: the
	// probe is the collection's own.
	dst := newStep(context.WithoutCancel(ctx), "deleting the clock probe "+name, name, cmp.Or(o.Timeout, DefaultTimeout))
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
	name   string // the object or prefix it waits on
}

// step starts a step bounded by o.Timeout (unbounded when it is 0), that
// waits on the object or prefix name.
func (o *Options) step(ctx context.Context, what, name string) *step {
	return newStep(ctx, what, name, o.Timeout)
}

func newStep(ctx context.Context, what, name string, d time.Duration) *step {
	sctx, cancel := context.WithCancelCause(ctx)
	s := &step{ctx: sctx, cancel: cancel, d: d, what: what, name: name}
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

// done ends the step and returns its error err, as a [*NoAnswerError]
// when the bound ended it.
func (s *step) done(err error) error {
	timedOut := s.timedOut()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.cancel(nil)
	if err != nil && timedOut {
		return &NoAnswerError{Step: s.what, Name: s.name, Timeout: s.d, Err: err}
	}
	return err
}
