package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/s3"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/statestore"
)

const gcAbout = `Lists the objects under a job's prefix (the base path, then --job-id) and
deletes the dstl objects that no kept handle references and that are older than
the grace period by both of their clocks: their modification time, and the
time in their name (a UUIDv7). An object one clock calls young is kept, and
an object whose modification time the storage does not report is kept.

Two kinds of objects are collected: log objects (UUIDv7.dstl directly
under the prefix) and the state stores' snapshot objects
(statestore/OPERATOR/UUIDv7.snap under the prefix). Snapshots are collected
only under statestore/OPERATOR/ of the operators of the kept statestore
checkpoint handles (or of every operator, with --keep-none): gc then takes
the kept checkpoint handles of an operator as every checkpoint of it that
may still be restored. The snapshots of an operator no kept checkpoint
handle names (with only log handles kept, of every operator) are never
deleted, and counted as not collected ("no checkpoint handle kept for the
operator"). Objects named otherwise are never deleted.

On S3, gc also lists the incomplete multipart uploads under the prefix
(what a writer killed mid-upload leaves) and aborts those of objects it
collects (of a snapshot, only where it collects its operator's snapshots)
that are older than the grace period by both clocks: the upload's start, by
the storage's clock, and the time in the name. A dry run lists them only.
When the prefix has none, two more requests ask whether the storage lists
uploads by prefix at all; one that does not (MinIO) has every upload of the
bucket listed, page by page. A bucket lifecycle rule
AbortIncompleteMultipartUpload (DaysAfterInitiation) removes what no gc run
reaches.

Ages are measured from "now", the earlier of this machine's clock and the
storage's: before listing, gc puts a small probe object (.gc-clock-UUID
under the job's prefix, not a dstl object's name; on a file system, a wrong
--job-id leaves its empty directory), reads its modification time back
through the listing and deletes it; it does so in a dry run too. So a
clock of this machine that runs ahead cannot make objects look older than
the storage says they are. What is guaranteed: no object is deleted that,
by the storage's clock, was modified within the grace period, or whose
name's time (the clock of the machine that wrote it) is within the grace
period of now. A writer whose clock ran behind makes names look older; its
objects are then protected by their modification time alone. A storage
whose clock runs behind only keeps objects longer.

Keep the handles of every checkpoint that may still be restored. On a running
job, a checkpoint in progress may also reuse change sets uploaded earlier (up
to its writers' last truncation), and the snapshot materialised since the
last checkpoint, whose objects no kept handle names yet: choose a grace
period longer than that, or run gc while the job is stopped.

Before deleting anything, gc checks that every object the kept handles
reference under the prefix is there; if one is missing (a wrong base path or
job id, or data already lost), it reports it, deletes nothing and exits 1.
A handle file that cannot be read exits 3; one that does not decode, 1.

` + handleFileHelp + `

A --keep file may also hold a statestore checkpoint handle in its binary
encoding (CheckpointHandle.MarshalBinary, starting with "DSCP"): gc keeps
the snapshot objects it names and the objects of its log handles.

Each step that waits for the storage fails after --timeout: the clock
probe's put and listing together, its delete, the wait for the next object
of a listing (or page of incomplete uploads), each delete. So a storage that does not answer fails gc
within one --timeout (a dry run, which goes on without the storage's
clock, within two), with an error naming the base path; once a delete
times out, no further delete starts.

Handle files come after --keep (repeatable) or as arguments. --dry-run prints
what would be deleted and deletes nothing but the clock probe it put (if the
probe cannot be put, a dry run goes on with this machine's clock and says
so).`

// gcOptions are the flags of a gc run.
type gcOptions struct {
	basePath, storage, jobID string
	keep                     []string
	keepNone                 bool
	grace                    time.Duration
	dryRun                   bool
	concurrency              int
	graceText                string        // --grace as given
	timeout                  time.Duration // of one step; 0: none
	json                     bool

	// What gc reaches outside itself; tests replace them.
	open func(ctx context.Context, storage, basePath string) (backends.Backend, string, error)
	now  func() time.Time // this machine's clock
}

// gcFlags defines gc's flags on a new flag set, setting o.
func gcFlags(o *gcOptions, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("gc", "--base-path URL [--job-id ID] --grace DURATION [--dry-run] --keep FILE [FILE...]", gcAbout, stderr)
	fs.StringVar(&o.basePath, "base-path", "", "the storage's base `URL` or local path, as the job was configured (required)")
	fs.StringVar(&o.storage, "storage", "", "backend `ID` (default: chosen by the base path's URL scheme)")
	fs.StringVar(&o.jobID, "job-id", "", "the job's `ID`, the prefix of its objects under the base path (default: none, the base path's root)")
	fs.Var((*stringsFlag)(&o.keep), "keep", "a handle `FILE` whose objects are kept; repeatable, and further files may follow as arguments")
	fs.BoolVar(&o.keepNone, "keep-none", false, "keep no handle: delete every old log and snapshot object under the prefix (a job that is gone for good)")
	fs.StringVar(&o.graceText, "grace", "", "delete only objects older than this `DURATION` (e.g. 24h, 90m); required, 0 is allowed")
	fs.BoolVar(&o.dryRun, "dry-run", false, "list what would be deleted; delete nothing")
	fs.IntVar(&o.concurrency, "concurrency", 8, "deletes (and aborts) in flight at once")
	fs.DurationVar(&o.timeout, "timeout", gcDefaultTimeout, "the longest `DURATION` gc waits for the storage in one step (the clock probe's put and listing, its delete, the next object of a listing or page of incomplete uploads, a delete) before it fails; 0: no bound")
	fs.BoolVar(&o.json, "json", false, "print a JSON report on stdout")
	return fs
}

// gcDefaultTimeout is the default of --timeout.
const gcDefaultTimeout = 8 * time.Second

// gcWaits is the most waits of --timeout a gc run spends before it fails
// on a storage that stops answering: the clock probe's put and listing,
// the probe's delete and, in a dry run (which goes on without the
// storage's clock), the listing. A storage that never answers fails a
// real run after one, a dry run after two.
const gcWaits = 3

// stringsFlag is a repeatable string flag.
type stringsFlag []string

var _ flag.Value = (*stringsFlag)(nil)

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func runGC(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runGCWith(ctx, args, stdout, stderr, gcOptions{open: backends.Open, now: time.Now})
}

// runGCWith runs gc with the backend opener and clock of o.
func runGCWith(ctx context.Context, args []string, stdout, stderr io.Writer, o gcOptions) int {
	fs := gcFlags(&o, stderr)
	var files []string
	if code, ok := parseInterspersed(fs, args, &files); !ok {
		return code
	}
	o.keep = append(o.keep, files...)
	usageErr := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "dstl gc: "+format+"\n", args...)
		return exitUsage
	}
	switch {
	case o.basePath == "":
		return usageErr("--base-path is required")
	case o.graceText == "":
		return usageErr("--grace is required (e.g. --grace 24h): objects younger than it are never deleted")
	case len(o.keep) == 0 && !o.keepNone:
		return usageErr("no handle file to keep: give --keep FILE (or, to delete every old object of the job, --keep-none)")
	case len(o.keep) > 0 && o.keepNone:
		return usageErr("--keep-none and handle files (%q) contradict each other", o.keep)
	case o.concurrency < 1:
		return usageErr("--concurrency must be at least 1")
	}
	var err error
	if o.grace, err = time.ParseDuration(o.graceText); err != nil || o.grace < 0 {
		return usageErr("--grace %q: want a duration of 0 or more, such as 24h or 90m", o.graceText)
	}
	if o.timeout < 0 {
		return usageErr("--timeout %v: want 0 (no bound) or more", o.timeout)
	}
	prog := newProgress(stderr)
	rep, err := gc(ctx, o, prog, stderr)
	prog.close()
	if rep != nil {
		if code := emit(stdout, stderr, o.json, rep, true); code != exitOK {
			return code
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "dstl gc: %v\n", err)
		switch {
		case errors.Is(err, errMissing), errors.Is(err, dstl.ErrInvalidHandle):
			return exitFailed // a handle's object missing, or a handle file that does not decode
		case errors.Is(err, backends.ErrUnknownBackend), errors.Is(err, dstl.ErrInvalidConfig), errors.Is(err, errUsage):
			return exitUsage
		}
		return exitRuntime // storage errors, a handle file that cannot be read, failed deletes
	}
	return exitOK
}

// errMissing: an object a kept handle references is not there.
var errMissing = errors.New("kept handles reference objects that are not there; nothing deleted")

// gcCount counts objects and their bytes.
type gcCount struct {
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
}

func (c *gcCount) add(size int64) { c.Objects++; c.Bytes += size }

// gcObject is an object old and unreferenced: gc deleted it, or would.
type gcObject struct {
	Name     string    `json:"name"`
	Kind     string    `json:"kind"` // "log" (UUIDv7.dstl) or "snapshot" (statestore/OPERATOR/UUIDv7.snap)
	Size     int64     `json:"size"`
	ModTime  time.Time `json:"mod_time"`
	NameTime time.Time `json:"name_time"` // the time in its UUIDv7 name
	Deleted  bool      `json:"deleted"`   // its delete ran and succeeded
}

// gcFailure is a delete, or an upload's abort, that failed.
type gcFailure struct {
	Name     string `json:"name"`
	UploadID string `json:"upload_id,omitempty"` // of an abort
	Error    string `json:"error"`
}

// gcUpload is an incomplete upload, old, of an object gc collects: gc
// aborted it, or would.
type gcUpload struct {
	Name      string    `json:"name"` // of the object it would have written
	UploadID  string    `json:"upload_id"`
	Initiated time.Time `json:"initiated"`
	NameTime  time.Time `json:"name_time"`
	Aborted   bool      `json:"aborted"` // its abort ran and succeeded
}

// gcReport is what a gc run found and did.
type gcReport struct {
	BasePath    string     `json:"base_path"`
	Prefix      string     `json:"prefix"`
	Grace       string     `json:"grace"`
	Now         time.Time  `json:"now"`                  // the earlier of LocalNow and StoreNow: ages count from it
	LocalNow    time.Time  `json:"local_now"`            // this machine's clock
	StoreNow    *time.Time `json:"store_now,omitempty"`  // the clock probe's modification time; absent when unknown
	ClockNote   string     `json:"clock_note,omitempty"` // why StoreNow is unknown
	DryRun      bool       `json:"dry_run"`
	DeletesRun  bool       `json:"deletes_run"` // deletes were started (not in a dry run, nor when gc refused)
	KeptHandles int        `json:"kept_handles"`
	Listed      gcCount    `json:"listed"`
	Referenced  gcCount    `json:"referenced"` // listed objects a kept handle references
	Young       gcCount    `json:"young"`      // unreferenced, but younger than the grace period by either clock, or of unknown modification time
	Foreign     gcCount    `json:"foreign"`    // not named like a dstl object: never deleted
	// SnapshotsKept are unreferenced snapshot objects, not collected
	// since no checkpoint handle is kept.
	SnapshotsKept gcCount `json:"snapshots_not_collected"`
	Deletable     gcCount `json:"deletable"` // old and unreferenced
	Deleted       gcCount `json:"deleted"`   // zero in a dry run
	// Incomplete uploads under the prefix (S3 multipart uploads), when
	// the backend has them: UploadsChecked says so.
	UploadsChecked bool        `json:"incomplete_uploads_checked"`
	UploadsListed  int         `json:"incomplete_uploads_listed"`
	UploadsKept    int         `json:"incomplete_uploads_kept"`    // younger than the grace by either clock, or not of an object gc collects
	UploadsAborted int         `json:"incomplete_uploads_aborted"` // zero in a dry run
	Uploads        []gcUpload  `json:"incomplete_uploads"`         // the old ones, each with whether it was aborted
	Missing        []string    `json:"missing,omitempty"`
	Objects        []gcObject  `json:"objects"` // the deletable ones, each with whether it was deleted
	Failed         []gcFailure `json:"failed,omitempty"`
}

// gc runs a collection. It returns a report also with an error once the
// listing is done: errMissing, or the failures it lists.
func gc(ctx context.Context, o gcOptions, prog *progress, stderr io.Writer) (*gcReport, error) {
	if o.open == nil {
		o.open = backends.Open
	}
	if o.now == nil {
		o.now = time.Now
	}
	prefix := objname.JobPrefix(o.jobID)
	if o.jobID != "" {
		if err := backends.CheckObjectName(strings.TrimSuffix(prefix, "/")); err != nil {
			return nil, fmt.Errorf("%w: --job-id %q: %w", errUsage, o.jobID, err)
		}
	}
	// What the kept handles reference.
	kept := map[string]bool{}
	rep := &gcReport{BasePath: backends.RedactURL(o.basePath), Prefix: prefix, Grace: o.grace.String(), DryRun: o.dryRun, Objects: []gcObject{}, Uploads: []gcUpload{}}
	storageIDs := map[string]bool{}
	keepLog := func(h dstl.Handle) {
		storageIDs[h.StorageID] = true
		for _, e := range h.Entries {
			kept[e.Object] = true
		}
	}
	snapshotOps := map[string]bool{} // the operators of the kept checkpoint handles
	for _, f := range o.keep {
		hs, cps, err := readKeepFile(f)
		if err != nil {
			return nil, fmt.Errorf("--keep: %w", err)
		}
		for _, h := range hs {
			rep.KeptHandles++
			keepLog(h)
		}
		for _, cp := range cps {
			rep.KeptHandles++
			snapshotOps[cp.Operator] = true
			for _, s := range cp.Snapshots {
				kept[s.Object] = true
			}
			for _, l := range cp.Logs {
				keepLog(l.Remote) // l.Local names local copies, not the storage's objects
			}
		}
	}
	// Only with an operator's checkpoint handles does gc know which of its
	// snapshots the job may still restore: it takes them as all of them.
	// The snapshots of an operator none names are kept.
	// collect reports whether gc deletes an old object of the name n: a
	// log object, or a snapshot of an operator whose snapshots it collects.
	collect := func(n objname.Name) bool {
		return n.Kind == objname.Log || n.Kind == objname.Snapshot && (o.keepNone || snapshotOps[n.Operator])
	}
	b, id, err := o.open(ctx, o.storage, o.basePath)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	for _, s := range slices.Sorted(maps.Keys(storageIDs)) {
		if s != "" && s != id {
			prog.printf(stderr, "dstl gc: warning: a kept handle names storage %q, the base path is on %q; its objects are kept all the same\n", s, id)
		}
	}

	prog.begin("gc: reading the storage's clock")
	rep.LocalNow = o.now()
	rep.Now = rep.LocalNow
	// Under the job's prefix, where credentials scoped to the job allow
	// writes.
	probe, err := objname.NewClockProbe(prefix)
	if err != nil {
		return nil, fmt.Errorf("reading the storage's clock (nothing deleted): %w", err)
	}
	storeNow, leftover, err := o.probeClock(ctx, b, probe)
	if leftover != nil {
		prog.printf(stderr, "dstl gc: warning: %v\n", leftover)
	}
	switch {
	case err != nil && !o.dryRun:
		return nil, fmt.Errorf("reading the storage's clock (nothing deleted): %w", err)
	case err != nil:
		rep.ClockNote = fmt.Sprintf("the clock probe failed (%v): ages are by this machine's clock", err)
		prog.printf(stderr, "dstl gc: warning: %s\n", rep.ClockNote)
	case storeNow.IsZero():
		// Such a storage reports no modification time of any object
		// either, so every object is young (kept) whatever now is.
		rep.ClockNote = "the storage reports no modification times"
	default:
		rep.StoreNow = &storeNow
		if storeNow.Before(rep.Now) {
			rep.Now = storeNow
		}
	}

	prog.begin("gc: listing " + prefix)
	var listed []backends.ObjectInfo
	st := o.step(ctx, "listing "+prefix)
	err = st.done(b.List(st.ctx, prefix, func(oi backends.ObjectInfo) error {
		st.kick() // each object is progress
		// gc's clock probe is no object of the job's (listed when its
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
	var uploads []s3.IncompleteUpload
	if uc, ok := b.(uploadCollector); ok {
		prog.begin("gc: listing the incomplete uploads under " + prefix)
		rep.UploadsChecked = true
		st := o.step(ctx, "listing the incomplete uploads under "+prefix)
		err = st.done(uc.ListIncompleteUploads(st.ctx, prefix, func(u s3.IncompleteUpload) error {
			uploads = append(uploads, u)
			return nil
		}, st.kick)) // each page is progress, also one of other jobs' uploads only
		if err != nil {
			return nil, err
		}
	}
	young := func(t time.Time) bool { return t.IsZero() || rep.Now.Sub(t) <= o.grace }
	for _, u := range uploads {
		rep.UploadsListed++
		// Only uploads of objects gc collects, old by both clocks: a
		// younger one may still be running.
		n := objname.Parse(prefix, u.Name)
		nameTime := n.Time()
		if !collect(n) || young(u.Initiated) || young(nameTime) {
			rep.UploadsKept++
			continue
		}
		rep.Uploads = append(rep.Uploads, gcUpload{Name: u.Name, UploadID: u.UploadID, Initiated: u.Initiated, NameTime: nameTime})
	}
	slices.SortFunc(rep.Uploads, func(a, b gcUpload) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.UploadID, b.UploadID))
	})
	seen := map[string]bool{}
	for _, oi := range listed {
		rep.Listed.add(oi.Size)
		seen[oi.Name] = true
		n := objname.Parse(prefix, oi.Name)
		nameTime := n.Time()
		switch {
		case kept[oi.Name]:
			rep.Referenced.add(oi.Size)
		case n.Kind != objname.Log && n.Kind != objname.Snapshot:
			rep.Foreign.add(oi.Size)
		case !collect(n):
			rep.SnapshotsKept.add(oi.Size)
		case young(oi.ModTime) || young(nameTime): // a zero modification time is unknown: young
			rep.Young.add(oi.Size)
		default:
			rep.Deletable.add(oi.Size)
			rep.Objects = append(rep.Objects, gcObject{Name: oi.Name, Kind: n.Kind.String(), Size: oi.Size, ModTime: oi.ModTime, NameTime: nameTime})
		}
	}
	for name := range kept {
		if strings.HasPrefix(name, prefix) && !seen[name] {
			rep.Missing = append(rep.Missing, name)
		}
	}
	slices.Sort(rep.Missing)
	if len(rep.Missing) > 0 {
		return rep, fmt.Errorf("%w: %d under %q, e.g. %q (wrong --base-path or --job-id?)", errMissing, len(rep.Missing), prefix, rep.Missing[0])
	}
	if len(kept) > 0 && rep.Referenced.Objects == 0 {
		rep.Missing = slices.Sorted(maps.Keys(kept))
		return rep, fmt.Errorf("%w: none of the %d objects the kept handles reference is under %q (wrong --base-path or --job-id?)", errMissing, len(kept), prefix)
	}
	if o.dryRun || len(rep.Objects)+len(rep.Uploads) == 0 {
		return rep, nil
	}

	prog.begin(fmt.Sprintf("gc: deleting %d objects, aborting %d uploads", len(rep.Objects), len(rep.Uploads)))
	rep.DeletesRun = true
	uc, _ := b.(uploadCollector)
	var mu sync.Mutex
	var stalled error // the first call the storage did not answer in time
	// A storage that stops answering stops the calls not yet started.
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	g := new(errgroup.Group)
	g.SetLimit(o.concurrency)
	total := len(rep.Objects) + len(rep.Uploads)
	for i := range total {
		if dctx.Err() != nil {
			break // the rest are not deleted
		}
		g.Go(func() error {
			if dctx.Err() != nil {
				return nil
			}
			var st *gcStep
			var err error
			var fail gcFailure
			if i < len(rep.Objects) {
				obj := &rep.Objects[i]
				st = o.step(dctx, "deleting "+obj.Name)
				err = b.Delete(st.ctx, obj.Name)
				fail.Name = obj.Name
			} else {
				u := &rep.Uploads[i-len(rep.Objects)]
				st = o.step(dctx, "aborting the upload "+u.UploadID+" of "+u.Name)
				err = uc.AbortIncompleteUpload(st.ctx, s3.IncompleteUpload{Name: u.Name, UploadID: u.UploadID, Initiated: u.Initiated})
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
				fail.Error = err.Error()
				rep.Failed = append(rep.Failed, fail)
			case i < len(rep.Objects):
				rep.Objects[i].Deleted = true
				rep.Deleted.add(rep.Objects[i].Size)
			default:
				rep.Uploads[i-len(rep.Objects)].Aborted = true
				rep.UploadsAborted++
			}
			prog.set(float64(rep.Deleted.Objects+rep.UploadsAborted+len(rep.Failed)) / float64(total))
			return nil
		})
	}
	_ = g.Wait() // every failure is in rep.Failed
	slices.SortFunc(rep.Failed, func(a, b gcFailure) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.UploadID, b.UploadID))
	})
	done := fmt.Sprintf("%d of %d objects deleted", rep.Deleted.Objects, len(rep.Objects))
	if len(rep.Uploads) > 0 {
		done += fmt.Sprintf(", %d of %d incomplete uploads aborted", rep.UploadsAborted, len(rep.Uploads))
	}
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("interrupted: %s: %w", done, err)
	}
	if stalled != nil {
		return rep, fmt.Errorf("stopped: %s: %w", done, stalled)
	}
	if len(rep.Failed) > 0 {
		what := "deletes"
		if len(rep.Uploads) > 0 {
			what = "deletes and aborts"
		}
		return rep, fmt.Errorf("%d of %d %s failed (%s), e.g. %s", len(rep.Failed), total, what, done, rep.Failed[0].Error)
	}
	return rep, nil
}

// uploadCollector is a backend whose incomplete uploads gc lists and
// aborts: s3's multipart uploads, which a writer killed mid-upload (or
// whose abort failed) leaves behind.
type uploadCollector interface {
	ListIncompleteUploads(ctx context.Context, prefix string, fn func(s3.IncompleteUpload) error, page func()) error
	AbortIncompleteUpload(ctx context.Context, u s3.IncompleteUpload) error
}

var _ uploadCollector = (*s3.Backend)(nil)

// errNoAnswer is the cause of a step's context that its bound ended.
var errNoAnswer = errors.New("no answer in time")

// gcStep is one step of gc that waits for the storage, bounded by
// --timeout: a call, or a listing whose every object restarts the bound.
type gcStep struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer // nil without a bound
	d      time.Duration
	what   string // the step, for errors
	base   string // the base path
	limit  string // the bound, for errors
}

// step starts a step bounded by --timeout (unbounded when it is 0).
func (o *gcOptions) step(ctx context.Context, what string) *gcStep {
	return newStep(ctx, what, readableURL(o.basePath), o.timeout, "--timeout "+o.timeout.String())
}

// readableURL returns a base path with its query unescaped, so that an
// error shows its parameters (such as the endpoint) as a person reads
// them.
func readableURL(base string) string {
	before, query, ok := strings.Cut(base, "?")
	if !ok {
		return base
	}
	if q, err := url.QueryUnescape(query); err == nil {
		return before + "?" + q
	}
	return base
}

func newStep(ctx context.Context, what, base string, d time.Duration, limit string) *gcStep {
	sctx, cancel := context.WithCancelCause(ctx)
	s := &gcStep{ctx: sctx, cancel: cancel, d: d, what: what, base: backends.RedactURL(base), limit: limit}
	if d > 0 {
		s.timer = time.AfterFunc(d, func() { cancel(errNoAnswer) })
	}
	return s
}

// kick restarts the bound: the storage made progress.
func (s *gcStep) kick() {
	if s.timer != nil {
		s.timer.Reset(s.d)
	}
}

// timedOut reports whether the bound ended the step.
func (s *gcStep) timedOut() bool { return context.Cause(s.ctx) == errNoAnswer }

// done ends the step and returns its error err, saying so when the bound
// ended it.
func (s *gcStep) done(err error) error {
	timedOut := s.timedOut()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.cancel(nil)
	if err != nil && timedOut {
		return fmt.Errorf("%s: the storage at %s did not answer within %s: %w", s.what, s.base, s.limit, err)
	}
	return err
}

// probeClock returns the storage's "now": it puts a small object name
// (under the job's prefix, [objname.ClockProbePrefix] and a UUID), reads its
// modification time back through List, and deletes it. The put and the listing are one step of --timeout, the
// delete another. The time is zero when the storage reports none.
// leftover is the error of deleting the probe, which then stays behind (no
// gc deletes it as a dstl object).
func (o *gcOptions) probeClock(ctx context.Context, b backends.Backend, name string) (t time.Time, leftover, err error) {
	body := []byte("dstl gc reads the storage's clock from this object's modification time, then deletes it\n")
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
	// Also when ctx is done: the probe is gc's own.
	dst := o.step(context.WithoutCancel(ctx), "deleting the clock probe "+name)
	if o.timeout == 0 {
		dst = newStep(context.WithoutCancel(ctx), "deleting the clock probe "+name, readableURL(o.basePath), 30*time.Second, "30s")
	}
	if derr := dst.done(b.Delete(dst.ctx, name)); derr != nil {
		leftover = fmt.Errorf("the clock probe %q could not be deleted: %w", name, derr)
	}
	return t, leftover, err
}

// checkpointHandleMagic starts the binary encoding of a
// statestore.CheckpointHandle.
const checkpointHandleMagic = "DSCP"

// readKeepFile reads a file given to --keep: a handle file (see
// handleFileHelp), or a statestore checkpoint handle in its binary
// encoding (CheckpointHandle.MarshalBinary), which names snapshot objects
// and log handles. Errors name the file; one of decoding wraps
// [dstl.ErrInvalidHandle], one of reading the file does not.
func readKeepFile(path string) ([]dstl.Handle, []statestore.CheckpointHandle, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if bytes.HasPrefix(data, []byte(checkpointHandleMagic)) {
		var h statestore.CheckpointHandle
		if err := h.UnmarshalBinary(data); err != nil {
			return nil, nil, fmt.Errorf("checkpoint handle file %s: %w: %w", path, dstl.ErrInvalidHandle, err)
		}
		return nil, []statestore.CheckpointHandle{h}, nil
	}
	hs, err := parseHandles(data)
	if err != nil {
		if !errors.Is(err, dstl.ErrInvalidHandle) {
			err = fmt.Errorf("%w: %w", dstl.ErrInvalidHandle, err)
		}
		return nil, nil, fmt.Errorf("handle file %s: %w", path, err)
	}
	return hs, nil, nil
}

// status says what became of a deletable object or an abortable upload:
// verb is "delete" or "abort", past "deleted" or "aborted"; done and failed say whether its call ran
// and succeeded or failed.
func (r *gcReport) status(verb, past string, done, failed bool) string {
	switch {
	case r.DryRun:
		return "would " + verb
	case done:
		return past
	case failed:
		return "FAILED"
	case !r.DeletesRun:
		return "would " + verb + " (not run)" // gc refused before deleting anything
	}
	return "not " + past // interrupted before its turn
}

func (r *gcReport) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	failed := map[gcFailure]bool{} // by name and upload id
	for _, f := range r.Failed {
		failed[gcFailure{Name: f.Name, UploadID: f.UploadID}] = true
	}
	if len(r.Uploads) > 0 {
		fmt.Fprintln(tw, "\tINCOMPLETE UPLOAD OF\tUPLOAD ID\tINITIATED\tNAMED")
		for _, u := range r.Uploads {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\t%s ago\n", r.status("abort", "aborted", u.Aborted, failed[gcFailure{Name: u.Name, UploadID: u.UploadID}]),
				u.Name, u.UploadID, r.Now.Sub(u.Initiated).Round(time.Second), r.Now.Sub(u.NameTime).Round(time.Second))
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	if len(r.Objects) > 0 {
		fmt.Fprintln(tw, "\tOBJECT\tSIZE\tMODIFIED\tNAMED")
		for _, o := range r.Objects {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\t%s ago\n", r.status("delete", "deleted", o.Deleted, failed[gcFailure{Name: o.Name}]), o.Name, formatBytes(o.Size),
				r.Now.Sub(o.ModTime).Round(time.Second), r.Now.Sub(o.NameTime).Round(time.Second))
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "gc of %s, prefix %q, grace %s, %d kept %s:\n", r.BasePath, r.Prefix, r.Grace, r.KeptHandles, plural(r.KeptHandles, "handle"))
	if r.StoreNow != nil {
		fmt.Fprintf(w, "  now: %s (the earlier of the storage's clock, %s, and this machine's, %s)\n", r.Now.Format(time.RFC3339),
			r.StoreNow.Format(time.RFC3339), r.LocalNow.Format(time.RFC3339))
	} else {
		fmt.Fprintf(w, "  now: %s, this machine's clock (%s)\n", r.Now.Format(time.RFC3339), r.ClockNote)
	}
	row := func(what string, c gcCount) {
		fmt.Fprintf(tw, "  %s\t%d %s\t%s\n", what, c.Objects, plural(c.Objects, "object"), formatBytes(c.Bytes))
	}
	row("listed", r.Listed)
	row("referenced (kept)", r.Referenced)
	row("younger than grace (kept)", r.Young)
	row("not dstl objects (kept)", r.Foreign)
	if r.SnapshotsKept.Objects > 0 {
		row("snapshots, no checkpoint handle kept for the operator (kept)", r.SnapshotsKept)
	}
	switch {
	case r.DryRun:
		row("would delete (dry run)", r.Deletable)
	case !r.DeletesRun && r.Deletable.Objects > 0:
		row("would delete (not run)", r.Deletable)
		row("deleted", r.Deleted)
	default:
		row("deleted", r.Deleted)
		if len(r.Failed) > 0 {
			fmt.Fprintf(tw, "  failed\t%d\t\n", len(r.Failed))
		}
		failedObjects := 0
		for f := range failed {
			if f.UploadID == "" {
				failedObjects++
			}
		}
		if n := len(r.Objects) - r.Deleted.Objects - failedObjects; n > 0 {
			fmt.Fprintf(tw, "  not deleted (interrupted)\t%d\t\n", n)
		}
	}
	if r.UploadsChecked {
		fmt.Fprintf(tw, "  incomplete uploads listed\t%d\t\n", r.UploadsListed)
		fmt.Fprintf(tw, "  incomplete uploads younger than grace or not dstl's (kept)\t%d\t\n", r.UploadsKept)
		switch {
		case r.DryRun:
			fmt.Fprintf(tw, "  incomplete uploads, would abort (dry run)\t%d\t\n", len(r.Uploads))
		case !r.DeletesRun && len(r.Uploads) > 0:
			fmt.Fprintf(tw, "  incomplete uploads, would abort (not run)\t%d\t\n", len(r.Uploads))
		default:
			fmt.Fprintf(tw, "  incomplete uploads aborted\t%d\t\n", r.UploadsAborted)
		}
	}
	tw.Flush()
	for _, m := range r.Missing {
		fmt.Fprintf(w, "missing: %s (a kept handle references it)\n", m)
	}
}
