package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/dstlgo/dstl/dstl"
)

const gcAbout = `Lists the objects under a job's prefix (the base path, then --job-id) and
deletes the dstl objects that no kept handle references and that are older than
the grace period by both of their clocks: their modification time, and the
time in their name (a UUIDv7). An object one clock calls young is kept, so a
skewed clock can only keep an object longer, never delete it early. Objects
not named like dstl objects (UUIDv7.dstl directly under the prefix, such as
snapshots kept beside them) are never deleted.

Keep the handles of every checkpoint that may still be restored. On a running
job, a checkpoint in progress may also reuse change sets uploaded earlier (up
to its writers' last truncation), whose objects no kept handle names yet:
choose a grace period longer than that, or run gc while the job is stopped.

Before deleting anything, gc checks that every object the kept handles
reference under the prefix is there; if one is missing (a wrong base path or
job id, or data already lost), it reports it, deletes nothing and exits 1.

` + handleFileHelp + `

Handle files come after --keep (repeatable) or as arguments. --dry-run prints
what would be deleted and deletes nothing.`

// gcOptions are the flags of a gc run.
type gcOptions struct {
	basePath, storage, jobID string
	keep                     []string
	keepNone                 bool
	grace                    time.Duration
	dryRun                   bool
	concurrency              int
}

// stringsFlag is a repeatable string flag.
type stringsFlag []string

var _ flag.Value = (*stringsFlag)(nil)

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func runGC(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o gcOptions
	fs := newFlagSet("gc", "--base-path URL [--job-id ID] --grace DURATION [--dry-run] --keep FILE [FILE...]", gcAbout, stderr)
	fs.StringVar(&o.basePath, "base-path", "", "the storage's base `URL` or local path, as the job was configured (required)")
	fs.StringVar(&o.storage, "storage", "", "backend `ID` (default: chosen by the base path's URL scheme)")
	fs.StringVar(&o.jobID, "job-id", "", "the job's `ID`, the prefix of its objects under the base path (default: none, the base path's root)")
	fs.Var((*stringsFlag)(&o.keep), "keep", "a handle `FILE` whose objects are kept; repeatable, and further files may follow as arguments")
	fs.BoolVar(&o.keepNone, "keep-none", false, "keep no handle: delete every old dstl object under the prefix (a job that is gone for good)")
	grace := fs.String("grace", "", "delete only objects older than this `DURATION` (e.g. 24h, 90m); required, 0 is allowed")
	fs.BoolVar(&o.dryRun, "dry-run", false, "list what would be deleted; delete nothing")
	fs.IntVar(&o.concurrency, "concurrency", 8, "deletes in flight at once")
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
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
	case *grace == "":
		return usageErr("--grace is required (e.g. --grace 24h): objects younger than it are never deleted")
	case len(o.keep) == 0 && !o.keepNone:
		return usageErr("no handle file to keep: give --keep FILE (or, to delete every old object of the job, --keep-none)")
	case len(o.keep) > 0 && o.keepNone:
		return usageErr("--keep-none and handle files (%q) contradict each other", o.keep)
	case o.concurrency < 1:
		return usageErr("--concurrency must be at least 1")
	}
	var err error
	if o.grace, err = time.ParseDuration(*grace); err != nil || o.grace < 0 {
		return usageErr("--grace %q: want a duration of 0 or more, such as 24h or 90m", *grace)
	}
	prog := newProgress(stderr)
	rep, err := gc(ctx, o, prog, stderr)
	prog.close()
	if rep != nil {
		if code := emit(stdout, stderr, *jsonOut, rep, true); code != exitOK {
			return code
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "dstl gc: %v\n", err)
		switch {
		case errors.Is(err, errMissing):
			return exitFailed
		case errors.Is(err, dstl.ErrUnknownBackend), errors.Is(err, dstl.ErrInvalidConfig), errors.Is(err, errUsage):
			return exitUsage
		}
		return exitRuntime
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

// gcObject is an object gc deleted or would delete.
type gcObject struct {
	Name     string    `json:"name"`
	Size     int64     `json:"size"`
	ModTime  time.Time `json:"mod_time"`
	NameTime time.Time `json:"name_time"` // the time in its UUIDv7 name
}

// gcFailure is a delete that failed.
type gcFailure struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// gcReport is what a gc run found and did.
type gcReport struct {
	BasePath    string      `json:"base_path"`
	Prefix      string      `json:"prefix"`
	Grace       string      `json:"grace"`
	Now         time.Time   `json:"now"`
	DryRun      bool        `json:"dry_run"`
	KeptHandles int         `json:"kept_handles"`
	Listed      gcCount     `json:"listed"`
	Referenced  gcCount     `json:"referenced"` // listed objects a kept handle references
	Young       gcCount     `json:"young"`      // unreferenced, but younger than the grace period by either clock
	Foreign     gcCount     `json:"foreign"`    // not named like a dstl object: never deleted
	Deletable   gcCount     `json:"deletable"`  // old and unreferenced
	Deleted     gcCount     `json:"deleted"`    // zero in a dry run
	Missing     []string    `json:"missing,omitempty"`
	Objects     []gcObject  `json:"objects"` // the deletable ones
	Failed      []gcFailure `json:"failed,omitempty"`
}

// gc runs a collection. It returns a report also with an error once the
// listing is done: errMissing, or the failures it lists.
func gc(ctx context.Context, o gcOptions, prog *progress, stderr io.Writer) (*gcReport, error) {
	prefix := dstl.ObjectPrefix(o.jobID)
	if o.jobID != "" {
		if err := dstl.CheckObjectName(strings.TrimSuffix(prefix, "/")); err != nil {
			return nil, fmt.Errorf("%w: --job-id %q: %w", errUsage, o.jobID, err)
		}
	}
	// What the kept handles reference.
	kept := map[string]bool{}
	rep := &gcReport{BasePath: o.basePath, Prefix: prefix, Grace: o.grace.String(), DryRun: o.dryRun}
	storageIDs := map[string]bool{}
	for _, f := range o.keep {
		hs, err := readHandleFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errUsage, err)
		}
		for _, h := range hs {
			rep.KeptHandles++
			storageIDs[h.StorageID] = true
			for _, e := range h.Entries {
				kept[e.Object] = true
			}
		}
	}
	b, id, err := dstl.OpenBackend(ctx, o.storage, o.basePath)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	for s := range storageIDs {
		if s != "" && s != id {
			fmt.Fprintf(stderr, "dstl gc: warning: a kept handle names storage %q, the base path is on %q; its objects are kept all the same\n", s, id)
		}
	}

	prog.begin("gc: listing " + prefix)
	rep.Now = time.Now()
	var listed []dstl.ObjectInfo
	err = b.List(ctx, prefix, func(oi dstl.ObjectInfo) error {
		listed = append(listed, oi)
		return nil
	})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, oi := range listed {
		rep.Listed.add(oi.Size)
		seen[oi.Name] = true
		nameTime, ours := objectNameTime(prefix, oi.Name)
		switch {
		case kept[oi.Name]:
			rep.Referenced.add(oi.Size)
		case !ours:
			rep.Foreign.add(oi.Size)
		case rep.Now.Sub(oi.ModTime) <= o.grace || rep.Now.Sub(nameTime) <= o.grace:
			rep.Young.add(oi.Size)
		default:
			rep.Deletable.add(oi.Size)
			rep.Objects = append(rep.Objects, gcObject{Name: oi.Name, Size: oi.Size, ModTime: oi.ModTime, NameTime: nameTime})
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
		rep.Missing = slices.Sorted(func(yield func(string) bool) {
			for name := range kept {
				if !yield(name) {
					return
				}
			}
		})
		return rep, fmt.Errorf("%w: none of the %d objects the kept handles reference is under %q (wrong --base-path or --job-id?)", errMissing, len(kept), prefix)
	}
	if o.dryRun || len(rep.Objects) == 0 {
		return rep, nil
	}

	prog.begin(fmt.Sprintf("gc: deleting %d objects", len(rep.Objects)))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.concurrency)
	for _, obj := range rep.Objects {
		g.Go(func() error {
			err := b.Delete(gctx, obj.Name)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rep.Failed = append(rep.Failed, gcFailure{Name: obj.Name, Error: err.Error()})
			} else {
				rep.Deleted.add(obj.Size)
			}
			prog.set(float64(rep.Deleted.Objects+len(rep.Failed)) / float64(len(rep.Objects)))
			return nil
		})
	}
	_ = g.Wait() // every failure is in rep.Failed
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("interrupted after %d of %d deletes: %w", rep.Deleted.Objects, len(rep.Objects), err)
	}
	if len(rep.Failed) > 0 {
		return rep, fmt.Errorf("%d of %d deletes failed, e.g. %s", len(rep.Failed), len(rep.Objects), rep.Failed[0].Error)
	}
	return rep, nil
}

// objectNameTime returns the creation time in the name of a dstl object
// under prefix (prefix + UUIDv7 + ".dstl"); ours is false for any other
// name.
func objectNameTime(prefix, name string) (t time.Time, ours bool) {
	base, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return time.Time{}, false
	}
	base, ok = strings.CutSuffix(base, dstl.ObjectSuffix)
	if !ok || len(base) != 36 {
		return time.Time{}, false
	}
	u, err := uuid.Parse(base)
	if err != nil || u.Version() != 7 {
		return time.Time{}, false
	}
	sec, nsec := u.Time().UnixTime()
	return time.Unix(sec, nsec), true
}

func (r *gcReport) print(w io.Writer) {
	verb := "deleted"
	if r.DryRun {
		verb = "would delete"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(r.Objects) > 0 {
		fmt.Fprintln(tw, "\tOBJECT\tSIZE\tMODIFIED\tNAMED")
		failed := map[string]bool{}
		for _, f := range r.Failed {
			failed[f.Name] = true
		}
		for _, o := range r.Objects {
			v := verb
			if failed[o.Name] {
				v = "FAILED"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\t%s ago\n", v, o.Name, formatBytes(o.Size),
				r.Now.Sub(o.ModTime).Round(time.Second), r.Now.Sub(o.NameTime).Round(time.Second))
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "gc of %s, prefix %q, grace %s, %d kept %s:\n", r.BasePath, r.Prefix, r.Grace, r.KeptHandles, plural(r.KeptHandles, "handle"))
	row := func(what string, c gcCount) {
		fmt.Fprintf(tw, "  %s\t%d %s\t%s\n", what, c.Objects, plural(c.Objects, "object"), formatBytes(c.Bytes))
	}
	row("listed", r.Listed)
	row("referenced (kept)", r.Referenced)
	row("younger than grace (kept)", r.Young)
	row("not dstl objects (kept)", r.Foreign)
	if r.DryRun {
		row("would delete (dry run)", r.Deletable)
	} else {
		row("deleted", r.Deleted)
		if len(r.Failed) > 0 {
			fmt.Fprintf(tw, "  failed\t%d\t\n", len(r.Failed))
		}
	}
	tw.Flush()
	for _, m := range r.Missing {
		fmt.Fprintf(w, "missing: %s (a kept handle references it)\n", m)
	}
}
