package main

import (
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

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/kafkastate"
	"github.com/dstlgo/dstl/statestore"
)

const gcAbout = `Lists the objects under a job's prefix (the base path, then --job-id) and
deletes the dstl objects that no kept handle references and that are older than
the grace period by both of their clocks: their modification time, and the
time in their name (a UUIDv7). An object one clock calls young is kept, and
an object whose modification time the storage does not report is kept.

Two kinds of objects are collected: log objects (UUIDv7.dstl directly
under the prefix) and the state stores' snapshot objects and the files of
disk-backed snapshots (statestore/OPERATOR/UUIDv7.snap and .sst under the
prefix). Snapshots and their files are collected
only under statestore/OPERATOR/ of the operators of the kept statestore
checkpoint handles (or of every operator, with --keep-none): gc then takes
the kept checkpoint handles of an operator as every checkpoint of it that
may still be restored. The snapshots of an operator no kept checkpoint
handle names (with only log handles kept, of every operator) are never
deleted, and counted as not collected ("no checkpoint handle kept for the
operator"). Objects named otherwise are never deleted.

Without --keep or --keep-none, gc keeps what the job's checkpoint catalog
(package catalog, docs/CATALOG.md) keeps: the objects of the last --retain
complete checkpoints of its live generation, of its pending checkpoints and
of the parts it restored; every snapshot under the prefix is then gc's to
collect, and the catalog's own objects that nothing keeps and that are
older than the grace are dropped after the collection. A job with neither
handle files nor a catalog (nor the --kafka flags below) is a usage error.

With --kafka-brokers, --kafka-topic and --kafka-group, gc collects a
kafkastate job (docs/KAFKA.md) by the rule its services apply: it reads the
group's committed offsets, and keeps the checkpoint records they name
(_records/UUIDv7.cN.rec under the prefix) and the records younger than the
grace, with every log and snapshot object those records name; the other
records, and the logs and the partitions' snapshots that are older than the
grace, are deleted. Give the job's grace (kafkastate's Config.Grace). gc
joins no group, so it may run beside the job; it connects to the brokers in
plain text (no TLS or SASL), and each request to them fails after
--timeout. When the prefix holds records and the group's offsets name none
of them (a wrong group or topic), gc deletes nothing and exits 1. Without
the --kafka flags, a job whose prefix holds records and no catalog is a
usage error, and --keep-none deletes its old records too.

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
storage's: before listing, gc puts a small probe object (.gc-clock-UUIDv7
under the job's prefix, not a dstl object's name), reads its modification
time back through the listing and deletes it; it does so in a dry run too,
which writes nothing else. On a file system, a base path or a job's
directory that does not exist is an error: gc creates neither. A probe
left behind by a gc that was killed is deleted by a later run once it is
older than the grace by both clocks. So a
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
	retain                   int // complete checkpoints the catalog keeps
	grace                    time.Duration
	dryRun                   bool
	concurrency              int
	graceText                string        // --grace as given
	timeout                  time.Duration // of one step; 0: none
	json                     bool
	// The job's Kafka side, for a kafkastate job: its brokers (comma
	// separated), input topic and consumer group.
	kafkaBrokers, kafkaTopic, kafkaGroup string

	// What gc reaches outside itself; tests replace them.
	open func(ctx context.Context, storage, basePath string) (backends.Backend, string, error)
	now  func() time.Time // this machine's clock
}

// gcFlags defines gc's flags on a new flag set, setting o.
func gcFlags(o *gcOptions, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("gc", "--base-path URL [--job-id ID] --grace DURATION [--dry-run] [--keep FILE [FILE...] | --keep-none | --retain N]", gcAbout, stderr)
	fs.StringVar(&o.basePath, "base-path", "", "the storage's base `URL` or local path, as the job was configured (required)")
	fs.StringVar(&o.storage, "storage", "", "backend `ID` (default: chosen by the base path's URL scheme)")
	fs.StringVar(&o.jobID, "job-id", "", "the job's `ID`, the prefix of its objects under the base path (default: none, the base path's root)")
	fs.Var((*stringsFlag)(&o.keep), "keep", "a handle `FILE` whose objects are kept; repeatable, and further files may follow as arguments")
	fs.BoolVar(&o.keepNone, "keep-none", false, "keep no handle: delete every old log and snapshot object under the prefix (a job that is gone for good)")
	fs.IntVar(&o.retain, "retain", catalog.DefaultRetain, "with the job's checkpoint catalog (no --keep): the complete checkpoints kept")
	fs.StringVar(&o.graceText, "grace", "", "delete only objects older than this `DURATION` (e.g. 24h, 90m); required, 0 is allowed")
	fs.BoolVar(&o.dryRun, "dry-run", false, "list what would be deleted; delete nothing")
	fs.IntVar(&o.concurrency, "concurrency", 8, "deletes (and aborts) in flight at once")
	fs.DurationVar(&o.timeout, "timeout", gcDefaultTimeout, "the longest `DURATION` gc waits for the storage in one step (the clock probe's put and listing, its delete, the next object of a listing or page of incomplete uploads, a delete) before it fails; 0: no bound")
	fs.BoolVar(&o.json, "json", false, "print a JSON report on stdout")
	fs.StringVar(&o.kafkaBrokers, "kafka-brokers", "", "for a kafkastate job: its Kafka brokers, `HOST:PORT[,HOST:PORT...]` (with --kafka-topic and --kafka-group: the records its group's committed offsets name are kept)")
	fs.StringVar(&o.kafkaTopic, "kafka-topic", "", "for a kafkastate job: its input `TOPIC`")
	fs.StringVar(&o.kafkaGroup, "kafka-group", "", "for a kafkastate job: its consumer `GROUP`")
	return fs
}

// kafka reports whether gc collects a kafkastate job (a --kafka flag is
// given).
func (o *gcOptions) kafka() bool {
	return o.kafkaBrokers != "" || o.kafkaTopic != "" || o.kafkaGroup != ""
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
	return runGCWith(ctx, args, stdout, stderr, gcOptions{open: openExisting, now: time.Now})
}

// runGCWith runs gc with the backend opener and clock of o.
func runGCWith(ctx context.Context, args []string, stdout, stderr io.Writer, o gcOptions) int {
	fs := gcFlags(&o, stderr)
	var files []string
	if code, ok := parseInterspersed(fs, args, &files); !ok {
		return code
	}
	o.keep = append(o.keep, files...)
	usageErr := reporter{stderr, "dstl gc"}.usage
	switch {
	case o.basePath == "":
		return usageErr("--base-path is required")
	case o.graceText == "":
		return usageErr("--grace is required (e.g. --grace 24h): objects younger than it are never deleted")
	case len(o.keep) > 0 && o.keepNone:
		return usageErr("--keep-none and handle files (%q) contradict each other", o.keep)
	case o.concurrency < 1:
		return usageErr("--concurrency must be at least 1")
	case o.retain < 1:
		return usageErr("--retain %d: want at least 1", o.retain)
	case o.kafka() && (o.kafkaBrokers == "" || o.kafkaTopic == "" || o.kafkaGroup == ""):
		return usageErr("--kafka-brokers, --kafka-topic and --kafka-group go together: give all three")
	case o.kafka() && (len(o.keep) > 0 || o.keepNone):
		return usageErr("--kafka-brokers and --keep or --keep-none contradict each other: the job's group says what is kept")
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
		printFailure(stderr, "dstl gc: ", err)
		switch {
		case errors.Is(err, collect.ErrMissing), errors.Is(err, dstl.ErrInvalidHandle), errors.Is(err, catalog.ErrDamaged),
			errors.Is(err, kafkastate.ErrDamaged), errors.Is(err, kafkastate.ErrNoCommittedRecord):
			// A handle's object missing; a handle file, catalog object or
			// record that does not decode; a group that commits no record.
			return exitFailed
		case errors.Is(err, backends.ErrUnknownBackend), errors.Is(err, dstl.ErrInvalidConfig), errors.Is(err, errUsage), errors.Is(err, kafkastate.ErrConfig):
			return exitUsage
		}
		return exitRuntime // storage errors, a handle file that cannot be read, failed deletes
	}
	return exitOK
}

// gcCatalog is what gc did with a job's checkpoint catalog.
type gcCatalog struct {
	Generation int64   `json:"generation"` // the live one
	Retained   []int64 `json:"retained"`   // its retained complete checkpoints
	PartsKept  int     `json:"parts_kept"` // catalog parts whose objects are kept
	Drop       int     `json:"drop"`       // old catalog objects nothing keeps
	Dropped    int     `json:"dropped"`    // of them, deleted (none in a dry run)
}

// gcKafka is what gc kept of a kafkastate job's records, by its group's
// committed offsets.
type gcKafka struct {
	Topic     string `json:"topic"`
	Group     string `json:"group"`
	Committed int    `json:"committed_records"` // records the group's committed offsets name
	Young     int    `json:"young_records"`     // other records younger than the grace
	HoldFrom  int64  `json:"hold_from"`         // objects made for this checkpoint or later are held
	// The job's catalog of the first layout (a job of a release before
	// records): its parts whose objects are kept (a partition restores
	// one), and its objects dropped once no partition does.
	FirstLayoutParts   int `json:"first_layout_parts_kept,omitempty"`
	FirstLayoutDropped int `json:"first_layout_dropped,omitempty"`
}

// gcCount counts objects and their bytes.
type gcCount struct {
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
}

func (c *gcCount) add(size int64) { c.Objects++; c.Bytes += size }

// gcObject is an object old and unreferenced: gc deleted it, or would.
type gcObject struct {
	Name     string    `json:"name"`
	Kind     string    `json:"kind"` // "log" (UUIDv7.dstl), "snapshot" (statestore/OPERATOR/UUIDv7.snap) or "snapshot file" (.sst)
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
	// Catalog is what the job's checkpoint catalog kept and dropped, when
	// gc ran on it (no handle files).
	Catalog *gcCatalog `json:"catalog,omitempty"`
	// Kafka is what a kafkastate job's group kept, when gc ran on it
	// (--kafka-brokers).
	Kafka      *gcKafka `json:"kafka,omitempty"`
	Listed     gcCount  `json:"listed"`
	Referenced gcCount  `json:"referenced"` // listed objects a kept handle references
	Young      gcCount  `json:"young"`      // unreferenced, but younger than the grace period by either clock, or of unknown modification time
	Held       gcCount  `json:"held"`       // unreferenced, but made for a checkpoint that may still complete (by the checkpoint its name records)
	Foreign    gcCount  `json:"foreign"`    // not named like a dstl object: never deleted
	// SnapshotsKept are unreferenced snapshot objects, not collected
	// since no checkpoint handle is kept.
	SnapshotsKept gcCount `json:"snapshots_not_collected"`
	// RecordsKept are kafkastate's checkpoint records, not collected
	// since gc ran with handle files.
	RecordsKept gcCount `json:"records_not_collected"`
	Deletable   gcCount `json:"deletable"` // old and unreferenced
	Deleted     gcCount `json:"deleted"`   // zero in a dry run
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

// gc runs a collection: it reads the kept handles, opens the backend and
// runs collect.Run over it. It returns a report also with an error once
// the listing is done: collect.ErrMissing, or the failures it lists.
func gc(ctx context.Context, o gcOptions, prog *progress, stderr io.Writer) (*gcReport, error) {
	if o.open == nil {
		o.open = openExisting
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
	keep := new(collect.Keep)
	keptHandles := 0
	storageIDs := map[string]bool{}
	for _, f := range o.keep {
		hs, cps, err := readKeepFile(f)
		if err != nil {
			return nil, fmt.Errorf("--keep: %w", err)
		}
		for _, h := range hs {
			keptHandles++
			storageIDs[h.StorageID] = true
			keep.AddHandle(h)
		}
		for _, cp := range cps {
			keptHandles++
			for _, l := range cp.Logs {
				storageIDs[l.Remote.StorageID] = true
			}
			// Only with an operator's checkpoint handles does gc know
			// which of its snapshots the job may still restore: it takes
			// them as all of them. The snapshots of an operator none
			// names are kept.
			keep.AddOperator(cp.Operator)
			keep.AddObject(cp.Objects()...)
		}
	}
	b, id, err := o.open(ctx, o.storage, o.basePath)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if err := checkJobDir(b, o.jobID); err != nil {
		return nil, err
	}
	for _, s := range slices.Sorted(maps.Keys(storageIDs)) {
		if s != "" && s != id {
			prog.printf(stderr, "dstl gc: warning: a kept handle names storage %q, the base path is on %q; its objects are kept all the same\n", s, id)
		}
	}
	// One collection, of the job's checkpoint catalog, of its Kafka
	// group's records or of the kept handles: gc words what it reports.
	words := gcWords{location: readableURL(o.basePath), timeout: o.timeout}
	ev := &gcEvents{prog: prog, words: words}
	kinds := collect.Logs | collect.Snapshots
	if o.keepNone {
		kinds |= collect.Records // a job gone for good: its records too
	}
	opts := collect.Options{
		JobID:        o.jobID,
		Grace:        o.grace,
		Keep:         keep,
		Kinds:        kinds,
		AllOperators: o.keepNone,
		DryRun:       o.dryRun,
		Concurrency:  o.concurrency,
		Timeout:      o.timeout,
		Now:          o.now,
		OnEvent:      ev.on,
	}
	if o.grace == 0 {
		opts.Grace = collect.NoGrace // --grace 0: none
	}
	if o.timeout == 0 {
		opts.Timeout = collect.NoTimeout // --timeout 0: no bound
	}
	// Without handle files, the job's checkpoint catalog says what is
	// kept: its deletion rule runs as the job's leader runs it.
	var plan *catalog.Plan
	var res *collect.Report
	var kres *kafkastate.CollectReport
	switch {
	case o.kafka():
		// A kafkastate job: its group's committed offsets say which
		// records are kept, as the job's own deletion rule runs.
		prog.begin("gc: reading the committed offsets of group " + o.kafkaGroup)
		kres, err = collectKafka(ctx, b, o, opts)
		if kres != nil {
			res = kres.Report
		}
	case len(o.keep) == 0 && !o.keepNone:
		prog.begin("gc: reading the checkpoint catalog")
		plan, res, err = catalog.CollectJob(ctx, b, catalog.PlanOptions{Retain: o.retain}, opts)
		switch {
		case plan == nil && res == nil && err == nil:
			if hasRecords(ctx, b, prefix) {
				return nil, fmt.Errorf("%w: %q holds kafkastate's checkpoint records, whose group's committed offsets say which are kept: give --kafka-brokers, --kafka-topic and --kafka-group", errUsage, objname.RecordPrefix(prefix))
			}
			return nil, fmt.Errorf("%w: no handle file to keep and no checkpoint catalog under %q: give --keep FILE (or, to delete every old object of the job, --keep-none)", errUsage, prefix)
		case err != nil && res == nil:
			// A damaged catalog object is a problem found (it wraps
			// catalog.ErrDamaged); other errors are the storage's.
			err = fmt.Errorf("the job's checkpoint catalog: %w", err)
		}
	case len(o.keep) > 0 && hasRecords(ctx, b, prefix):
		// Handle files say nothing of the records a kafkastate job's
		// group commits, nor of the log objects those records name.
		return nil, fmt.Errorf("%w: %q holds kafkastate's checkpoint records, which handle files do not name: give --kafka-brokers, --kafka-topic and --kafka-group instead of --keep (or, to delete every old object of the job, --keep-none)", errUsage, objname.RecordPrefix(prefix))
	default:
		res, err = collect.Run(ctx, b, opts)
	}
	err = words.err(err)
	ev.printWarnings(stderr, err)
	if errors.Is(err, collect.ErrMissing) {
		err = fmt.Errorf("%w (wrong --base-path or --job-id?)", err)
	}
	if res == nil {
		return nil, err
	}
	rep := newGCReport(res, o, keptHandles, words)
	if kres != nil {
		rep.Kafka = &gcKafka{Topic: o.kafkaTopic, Group: o.kafkaGroup, Committed: len(kres.CommittedRecords), Young: len(kres.YoungRecords), HoldFrom: kres.HoldFrom,
			FirstLayoutParts: len(kres.FirstLayoutParts), FirstLayoutDropped: len(kres.FirstLayoutDropped)}
	}
	if plan != nil {
		rep.Catalog = &gcCatalog{Generation: plan.Generation, Retained: plan.Retained, PartsKept: len(plan.Commits), Drop: len(plan.Drop)}
		if err == nil && !o.dryRun {
			rep.Catalog.Dropped = len(plan.Drop)
		}
	}
	return rep, err
}

// gcEvents shows a collection's progress as its events come, and keeps
// its warnings to print once it ended.
type gcEvents struct {
	prog  *progress
	words gcWords

	mu       sync.Mutex
	warnings []collect.Event
}

// on takes an event of the collection.
func (e *gcEvents) on(ev collect.Event) {
	switch ev.Kind {
	case collect.EventClock:
		e.prog.begin("gc: reading the storage's clock")
	case collect.EventListing:
		e.prog.begin("gc: listing " + ev.Name)
	case collect.EventListingUploads:
		e.prog.begin("gc: listing the incomplete uploads under " + ev.Name)
	case collect.EventDeleting:
		e.prog.begin(fmt.Sprintf("gc: deleting %d objects, aborting %d uploads", ev.Objects, ev.Uploads))
	case collect.EventDeleted:
		e.prog.set(float64(ev.Done) / float64(ev.Total))
	case collect.EventProbeLeft, collect.EventNoStoreClock:
		e.mu.Lock()
		defer e.mu.Unlock()
		e.warnings = append(e.warnings, ev)
	}
}

// printWarnings prints the warnings of a collection that ended with err
// (nil when it did not fail). A dry run's note that it goes on by this
// machine's clock, since the clock probe failed, is left out once the run
// failed: the failure's line says what went wrong.
func (e *gcEvents) printWarnings(stderr io.Writer, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range e.warnings {
		switch {
		case w.Kind == collect.EventProbeLeft:
			e.prog.printf(stderr, "dstl gc: warning: the clock probe %q could not be deleted: %v\n", w.Name, e.words.err(w.Err))
		case err == nil:
			e.prog.printf(stderr, "dstl gc: warning: %s\n", e.words.clockNote(w.Err))
		}
	}
}

// gcWords words what a collection reports for gc's output: a step that
// the storage did not answer in time names the base path, and --timeout
// when that was the bound.
type gcWords struct {
	location string        // the base path, its query readable
	timeout  time.Duration // --timeout
}

// err returns err, but for the message of a step the storage did not
// answer in time (collect.NoAnswerError), which names the storage and the
// flag; the error wraps err.
func (w gcWords) err(err error) error {
	var na *collect.NoAnswerError
	if !errors.As(err, &na) {
		return err
	}
	limit := na.Timeout.String()
	if na.Timeout == w.timeout {
		limit = "--timeout " + limit
	}
	ours := fmt.Sprintf("%s: the storage at %s did not answer within %s: %v", na.Step, backends.RedactURL(w.location), limit, na.Err)
	return &rewordedError{msg: strings.ReplaceAll(err.Error(), na.Error(), ours), err: err}
}

// clockNote says why ages are by this machine's clock: the clock probe
// failed with err, or (err nil) the storage reports no modification
// times.
func (w gcWords) clockNote(err error) string {
	if err == nil {
		return "the storage reports no modification times"
	}
	return fmt.Sprintf("the clock probe failed (%v): ages are by this machine's clock", w.err(err))
}

// rewordedError is an error in other words than the one it wraps.
type rewordedError struct {
	msg string
	err error
}

func (e *rewordedError) Error() string { return e.msg }
func (e *rewordedError) Unwrap() error { return e.err }

// newGCReport returns gc's report of a collection's, in gc's words.
func newGCReport(r *collect.Report, o gcOptions, keptHandles int, words gcWords) *gcReport {
	count := func(c collect.Count) gcCount { return gcCount{Objects: c.Objects, Bytes: c.Bytes} }
	rep := &gcReport{
		BasePath:       backends.RedactURL(o.basePath),
		Prefix:         r.Prefix,
		Grace:          r.Grace.String(),
		Now:            r.Now,
		LocalNow:       r.LocalNow,
		DryRun:         r.DryRun,
		DeletesRun:     r.DeletesRun,
		KeptHandles:    keptHandles,
		Listed:         count(r.Listed),
		Referenced:     count(r.Referenced),
		Young:          count(r.Young),
		Held:           count(r.Held),
		Foreign:        count(r.Foreign),
		Deletable:      count(r.Deletable),
		Deleted:        count(r.Deleted),
		UploadsChecked: r.UploadsChecked,
		UploadsListed:  r.UploadsListed,
		UploadsKept:    r.UploadsKept,
		UploadsAborted: r.UploadsAborted,
		Uploads:        []gcUpload{},
		Missing:        r.Missing,
		Objects:        []gcObject{},
	}
	if !r.StoreNow.IsZero() {
		storeNow := r.StoreNow
		rep.StoreNow = &storeNow
	} else {
		rep.ClockNote = words.clockNote(r.ClockErr)
	}
	for _, u := range r.Uploads {
		rep.Uploads = append(rep.Uploads, gcUpload{Name: u.Name, UploadID: u.UploadID, Initiated: u.Initiated, NameTime: u.NameTime, Aborted: u.Aborted})
	}
	for _, obj := range r.Objects {
		if obj.Reason == collect.NotCollected {
			// gc collects every log object: what it does not collect are
			// snapshots, and records with handle files.
			if obj.Kind == objname.Record {
				rep.RecordsKept.add(obj.Size)
			} else {
				rep.SnapshotsKept.add(obj.Size)
			}
		}
		if obj.Reason == collect.Deletable {
			rep.Objects = append(rep.Objects, gcObject{Name: obj.Name, Kind: obj.Kind.String(), Size: obj.Size, ModTime: obj.ModTime, NameTime: obj.NameTime, Deleted: obj.Deleted})
		}
	}
	for _, f := range r.Failed {
		rep.Failed = append(rep.Failed, gcFailure{Name: f.Name, UploadID: f.UploadID, Error: words.err(f.Err).Error()})
	}
	return rep
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
	return parseKeepFile(path, data)
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
	if k := r.Kafka; k != nil {
		fmt.Fprintf(w, "gc of %s, prefix %q, grace %s, by Kafka group %s of topic %s: %d committed and %d young %s kept",
			r.BasePath, r.Prefix, r.Grace, k.Group, k.Topic, k.Committed, k.Young, plural(k.Committed+k.Young, "record"))
		if k.FirstLayoutParts > 0 || k.FirstLayoutDropped > 0 {
			fmt.Fprintf(w, "; the first layout's catalog: %d %s kept, %d %s dropped", k.FirstLayoutParts, plural(k.FirstLayoutParts, "part"),
				k.FirstLayoutDropped, plural(k.FirstLayoutDropped, "object"))
		}
		fmt.Fprintln(w, ":")
	} else if c := r.Catalog; c != nil {
		fmt.Fprintf(w, "gc of %s, prefix %q, grace %s, by the checkpoint catalog: generation %d, retained checkpoints %v, %d catalog parts kept, %d old catalog objects dropped of %d:\n",
			r.BasePath, r.Prefix, r.Grace, c.Generation, c.Retained, c.PartsKept, c.Dropped, c.Drop)
	} else {
		fmt.Fprintf(w, "gc of %s, prefix %q, grace %s, %d kept %s:\n", r.BasePath, r.Prefix, r.Grace, r.KeptHandles, plural(r.KeptHandles, "handle"))
	}
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
	if r.Held.Objects > 0 {
		row("made for a checkpoint that may still complete (kept)", r.Held)
	}
	row("not dstl objects (kept)", r.Foreign)
	if r.SnapshotsKept.Objects > 0 {
		row("snapshots, no checkpoint handle kept for the operator (kept)", r.SnapshotsKept)
	}
	if r.RecordsKept.Objects > 0 {
		row("kafkastate records, not collected with handle files (kept)", r.RecordsKept)
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

// collectKafka applies a kafkastate job's deletion rule
// (kafkastate.Collect): the records its group's committed offsets name,
// and those younger than the grace, are kept with what they name. Each
// request to Kafka is bounded by --timeout, as the storage's steps are.
func collectKafka(ctx context.Context, b backends.Backend, o gcOptions, opts collect.Options) (*kafkastate.CollectReport, error) {
	var brokers []string
	for _, br := range strings.Split(o.kafkaBrokers, ",") {
		if br = strings.TrimSpace(br); br != "" {
			brokers = append(brokers, br)
		}
	}
	cfg := kafkastate.CollectConfig{Brokers: brokers, Topic: o.kafkaTopic, Group: o.kafkaGroup, Grace: o.grace, Timeout: o.timeout}
	if o.grace == 0 {
		cfg.Grace = kafkastate.NoGrace
	}
	rep, err := kafkastate.Collect(ctx, b, o.jobID, cfg, opts)
	if err != nil && (rep == nil || rep.Report == nil) {
		return nil, fmt.Errorf("the job's Kafka group %s: %w", o.kafkaGroup, err)
	}
	return rep, err
}

// hasRecords reports whether the job's prefix holds kafkastate's
// checkpoint records (one listing of their directory, stopped at the
// first).
func hasRecords(ctx context.Context, b backends.Backend, prefix string) bool {
	found := errors.New("found")
	err := b.List(ctx, objname.RecordPrefix(prefix), func(oi backends.ObjectInfo) error {
		if objname.Parse(prefix, oi.Name).Kind == objname.Record {
			return found
		}
		return nil
	})
	return errors.Is(err, found)
}
