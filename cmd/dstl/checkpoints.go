package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
)

const checkpointsAbout = `Lists a job's checkpoint catalog (package catalog; its objects are under
_catalog/v2/ in the job's prefix): every generation of the job, the live one
(the latest, whose processes commit) and the fenced ones, with its mode,
instances and processes, the instances' key groups, the checkpoint it
restored, its first checkpoint and its claimed process slots; and every
checkpoint of each generation: complete, pending (of the live generation,
after its latest complete one: it may still complete) or never-complete, its
commits (one per process, holding its instances' parts), their stored size,
the size of their parts' states and how many objects they refer to, and what
the deletion rule keeps of it under --retain (which should be the job's):
retained, pending, or restored (commits the live generation restored from,
kept while it has fewer than --retain complete checkpoints of its own). It
also counts the objects of the catalog's first layout, which an upgrade
leaves (one generation record stays, to fence processes of older releases).

"dstl checkpoints show N" shows checkpoint N (of the latest generation with
one, or of --generation G): each instance's part with its key groups,
metadata, state size and the objects it refers to.

Every catalog object read is checked (magic, version, checksum, fields
against its name). Nothing is written: a local base path that does not
exist is an error. Exits 1 when an object is damaged, when
a commit the live generation restored from and still needs is gone, or when
show finds no such checkpoint; 3 when the storage cannot be read.`

// checkpointsOptions are the flags of "dstl checkpoints".
type checkpointsOptions struct {
	basePath, storage, jobID string
	retain                   int
	grace                    time.Duration
	generation               int64
	json                     bool
}

func runCheckpoints(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o checkpointsOptions
	fs := newFlagSet("checkpoints", "--base-path URL [--job-id ID] [--retain N] [--grace DURATION] [--json]\n       dstl checkpoints show N --base-path URL [--job-id ID] [--generation G] [--json]", checkpointsAbout, stderr)
	fs.StringVar(&o.basePath, "base-path", "", "the storage's base `URL` or local path, as the job was configured (required)")
	fs.StringVar(&o.storage, "storage", "", "backend `ID` (default: chosen by the base path's URL scheme)")
	fs.StringVar(&o.jobID, "job-id", "", "the job's `ID`, the prefix of its objects under the base path (default: none, the base path's root)")
	fs.IntVar(&o.retain, "retain", catalog.DefaultRetain, "the job's `N` of complete checkpoints retained, for what the deletion rule keeps")
	fs.DurationVar(&o.grace, "grace", 0, "ignored: the deletion rule keeps no superseded checkpoint for a grace any more (accepted for scripts written for older releases)")
	fs.Int64Var(&o.generation, "generation", 0, "with show: the checkpoint of generation `G` (default: the latest generation with one of that number)")
	fs.BoolVar(&o.json, "json", false, "print a JSON report on stdout")
	var pos []string
	if code, ok := parseInterspersed(fs, args, &pos); !ok {
		return code
	}
	r := reporter{stderr, "dstl checkpoints"}
	fail, failErr := r.fail, r.err
	var show int64
	switch {
	case len(pos) == 0:
	case pos[0] != "show":
		return fail(exitUsage, "unexpected argument %q: want none, or show N; see dstl checkpoints --help", pos[0])
	case len(pos) != 2:
		return fail(exitUsage, "show takes one checkpoint number (got %d arguments)", len(pos)-1)
	default:
		n, err := strconv.ParseInt(pos[1], 10, 64)
		if err != nil || n < 1 {
			return fail(exitUsage, "show %q: want a checkpoint number, 1 or more", pos[1])
		}
		show = n
	}
	switch {
	case o.basePath == "":
		return fail(exitUsage, "--base-path is required")
	case o.retain < 1:
		return fail(exitUsage, "--retain %d: want 1 or more", o.retain)
	case o.grace < 0:
		return fail(exitUsage, "--grace %v: want 0 or more", o.grace)
	case o.generation < 0:
		return fail(exitUsage, "--generation %d: want 1 or more", o.generation)
	case o.generation != 0 && show == 0:
		return fail(exitUsage, "--generation is for show N")
	}
	if o.jobID != "" {
		if err := backends.CheckObjectName(o.jobID); err != nil {
			return fail(exitUsage, "--job-id %q: %v", o.jobID, err)
		}
	}
	b, _, err := openExisting(ctx, o.storage, o.basePath)
	if err != nil {
		return failErr(runtimeOrUsage(err), err)
	}
	defer b.Close()
	opts := catalog.InspectOptions{Retain: o.retain, Claims: show == 0, Commits: func(g, n int64) bool {
		return show == 0 || n == show && (o.generation == 0 || g == o.generation)
	}}
	l, err := catalog.Inspect(ctx, b, o.jobID, opts)
	if l == nil {
		return failErr(runtimeOrUsage(err), err)
	}
	if show == 0 {
		rep := listingReport(l, o)
		return emit(stdout, stderr, o.json, rep, rep.OK)
	}
	c := l.Checkpoint(o.generation, show)
	if c == nil {
		where := fmt.Sprintf("the catalog under prefix %q", l.Prefix)
		if o.generation != 0 {
			where = fmt.Sprintf("generation %d of %s", o.generation, where)
		}
		return fail(exitFailed, "no checkpoint %d in %s (see dstl checkpoints)", show, where)
	}
	rep := showReport(l, c, o)
	return emit(stdout, stderr, o.json, rep, rep.OK)
}

// checkpointsProblem is a damaged catalog object, or one that the live
// generation needs and that is gone.
type checkpointsProblem struct {
	Kind   string `json:"kind"` // "damaged" or "missing"
	Object string `json:"object"`
	Error  string `json:"error"`
}

// checkpointsReport is what "dstl checkpoints" lists.
type checkpointsReport struct {
	BasePath       string `json:"base_path"`
	JobID          string `json:"job_id"`
	Prefix         string `json:"prefix"`
	LiveGeneration int64  `json:"live_generation"` // 0: the job has no generation
	Retain         int    `json:"retain"`
	// Retained are the retained checkpoints of the live generation.
	Retained    []int64            `json:"retained"`
	KeptCommits int                `json:"kept_commits"`
	OK          bool               `json:"ok"`
	Generations []generationReport `json:"generations"`
	// FirstLayout counts the objects of the catalog's first layout.
	FirstLayout  int                  `json:"first_layout_objects"`
	OtherObjects []string             `json:"other_objects,omitempty"` // under the catalog, of no catalog name
	Problems     []checkpointsProblem `json:"problems,omitempty"`
}

// generationReport is one generation. Its record's fields are absent when
// the record is not listed or cannot be read (Error says why).
type generationReport struct {
	Generation         int64                `json:"generation"`
	Status             string               `json:"status"` // "live" or "fenced"
	Record             string               `json:"record"` // the record's object; "" when not listed
	Mode               string               `json:"mode,omitempty"`
	Instances          int                  `json:"instances"`
	Processes          int                  `json:"processes"`
	MaxParallelism     int                  `json:"max_parallelism,omitempty"`
	KeyGroups          []dstl.KeyGroupRange `json:"key_groups"`
	FirstCheckpoint    int64                `json:"first_checkpoint,omitempty"`
	RestoredCheckpoint int64                `json:"restored_checkpoint"` // 0: none, or the independent mode
	Restored           []string             `json:"restored"`            // the objects it restored from
	Created            *time.Time           `json:"created,omitempty"`
	Fence              string               `json:"fence,omitempty"` // its fence: a newer generation started or is starting
	Claims             []claimReport        `json:"claims"`
	Checkpoints        []checkpointSummary  `json:"checkpoints"`
	Error              string               `json:"error,omitempty"`
}

type claimReport struct {
	Process int        `json:"process"`
	Object  string     `json:"object"`
	Owner   string     `json:"owner,omitempty"`
	Created *time.Time `json:"created,omitempty"`
	Error   string     `json:"error,omitempty"`
}

// checkpointSummary is one checkpoint in the listing.
type checkpointSummary struct {
	Checkpoint  int64  `json:"checkpoint"`
	Status      string `json:"status"` // "complete", "pending", "never-complete" or "unknown"
	Retained    bool   `json:"retained"`
	Kept        string `json:"kept"` // "retained", "pending", "restored", "" (not kept)
	Commits     int    `json:"commits"`
	KeptCommits int    `json:"kept_commits"`
	Parts       int    `json:"parts"`       // of the commits read
	StoredSize  int64  `json:"stored_size"` // of the commits' catalog objects
	StateSize   int64  `json:"state_size"`  // of the parts' states
	Objects     int    `json:"objects"`     // distinct objects the parts refer to
	OK          bool   `json:"ok"`          // every commit read and checked
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// problems returns the listing's damaged objects and the kept parts that
// are gone.
func problems(l *catalog.Listing) []checkpointsProblem {
	var ps []checkpointsProblem
	add := func(name string, err error) {
		if errors.Is(err, catalog.ErrDamaged) {
			ps = append(ps, checkpointsProblem{Kind: "damaged", Object: name, Error: err.Error()})
		}
	}
	for _, g := range l.Generations {
		add(g.Object.Name, g.Err)
		for _, c := range g.Claims {
			add(c.Object.Name, c.Err)
		}
		for _, c := range g.Checkpoints {
			for _, cm := range c.Commits {
				add(cm.Object.Name, cm.Err)
			}
		}
	}
	for _, name := range l.Retention.Missing {
		ps = append(ps, checkpointsProblem{Kind: "missing", Object: name,
			Error: fmt.Sprintf("generation %d restores from %q, which is not in the catalog", l.Live, name)})
	}
	return ps
}

// keptAs says why the deletion rule keeps (some of) a checkpoint's commits.
func keptAs(c *catalog.CheckpointInfo) string {
	kept := slices.ContainsFunc(c.Commits, func(cm catalog.CommitInfo) bool { return cm.Kept })
	switch {
	case c.Retained:
		return "retained"
	case !kept:
		return ""
	case c.State == catalog.Pending:
		return "pending"
	}
	return "restored"
}

func listingReport(l *catalog.Listing, o checkpointsOptions) *checkpointsReport {
	rep := &checkpointsReport{BasePath: backends.RedactURL(o.basePath), JobID: o.jobID, Prefix: l.Prefix, LiveGeneration: l.Live,
		Retain: l.Retention.Retain, Retained: l.Retention.Retained, KeptCommits: len(l.Retention.Commits) - len(l.Retention.Missing),
		Generations: []generationReport{}, FirstLayout: l.FirstLayout, OtherObjects: l.Other, Problems: problems(l)}
	if rep.Retained == nil {
		rep.Retained = []int64{}
	}
	rep.OK = len(rep.Problems) == 0
	for i := range l.Generations {
		g := &l.Generations[i]
		gr := generationOf(g)
		for _, c := range g.Claims {
			gr.Claims = append(gr.Claims, claimReport{Process: c.Process, Object: c.Object.Name, Owner: c.Owner,
				Created: timePtr(c.Created), Error: errString(c.Err)})
		}
		for j := range g.Checkpoints {
			c := &g.Checkpoints[j]
			s := checkpointSummary{Checkpoint: c.Number, Status: string(c.State), Retained: c.Retained, Kept: keptAs(c),
				Commits: len(c.Commits), OK: true}
			objects := map[string]bool{}
			for _, cm := range c.Commits {
				s.StoredSize += cm.Object.Size
				if cm.Kept {
					s.KeptCommits++
				}
				if cm.Parts == nil {
					s.OK = false
					continue
				}
				for _, p := range cm.Parts {
					s.Parts++
					s.StateSize += int64(len(p.State))
					for _, name := range p.Objects {
						objects[name] = true
					}
				}
			}
			s.Objects = len(objects)
			gr.Checkpoints = append(gr.Checkpoints, s)
		}
		rep.Generations = append(rep.Generations, gr)
	}
	return rep
}

// generationOf reports a generation without its claims and checkpoints.
func generationOf(g *catalog.GenerationInfo) generationReport {
	gr := generationReport{Generation: g.Number, Status: "fenced", Record: g.Object.Name, KeyGroups: []dstl.KeyGroupRange{},
		Restored: []string{}, Claims: []claimReport{}, Checkpoints: []checkpointSummary{}, Error: errString(g.Err), Fence: g.Fence.Name}
	if g.Live {
		gr.Status = "live"
	}
	if r := g.Record; r != nil {
		gr.Mode, gr.Instances, gr.Processes, gr.MaxParallelism, gr.KeyGroups = string(r.Mode), r.Instances(), r.Processes, r.MaxParallelism, r.KeyGroups
		gr.FirstCheckpoint, gr.RestoredCheckpoint, gr.Created = r.FirstCheckpoint, r.RestoredCheckpoint, timePtr(r.Created)
		for _, rs := range r.Restored {
			gr.Restored = append(gr.Restored, rs.Object)
		}
	} else if g.Err == nil {
		gr.Error = "no record listed (dropped by the deletion rule before the generation's other objects)"
	}
	return gr
}

// rangeText writes a key-group range as "0-31".
func rangeText(r dstl.KeyGroupRange) string {
	if r.Start == r.End {
		return strconv.Itoa(r.Start)
	}
	return fmt.Sprintf("%d-%d", r.Start, r.End)
}

// rangesText writes a generation's key groups; more than four ranges as
// "even" when they are the even split, else the first ones and a count.
func rangesText(rs []dstl.KeyGroupRange, maxParallelism int) string {
	if len(rs) == 0 {
		return "?"
	}
	if len(rs) > 4 {
		even := true
		for i, r := range rs {
			even = even && r == catalog.RangeOf(i, len(rs), maxParallelism)
		}
		if even {
			return fmt.Sprintf("even split of %d", maxParallelism)
		}
		return fmt.Sprintf("%s, %s, ..., %s", rangeText(rs[0]), rangeText(rs[1]), rangeText(rs[len(rs)-1]))
	}
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = rangeText(r)
	}
	return strings.Join(s, ", ")
}

// restoredText writes what a generation restored: "g1/4 (3 objects)".
func restoredText(prefix string, names []string) string {
	if len(names) == 0 {
		return "-"
	}
	from := map[string]bool{}
	for _, name := range names {
		ref := objname.ParseCatalog(prefix, name)
		from[fmt.Sprintf("g%d/%d", ref.Generation, ref.Checkpoint)] = true
	}
	return fmt.Sprintf("%s (%d %s)", strings.Join(slices.Sorted(maps.Keys(from)), ", "), len(names), plural(len(names), "object"))
}

func timeText(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func (r *checkpointsReport) print(w io.Writer) {
	if len(r.Generations) == 0 {
		fmt.Fprintf(w, "no checkpoint catalog under prefix %q of %s: the job has no generation\n", r.Prefix, r.BasePath)
		printCheckpointsProblems(w, r.Problems, r.OtherObjects)
		return
	}
	fmt.Fprintf(w, "checkpoint catalog under prefix %q of %s: %d %s, live generation %d\n\n", r.Prefix, r.BasePath,
		len(r.Generations), plural(len(r.Generations), "generation"), r.LiveGeneration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GENERATION\tSTATUS\tMODE\tINSTANCES\tPROCESSES\tKEY GROUPS\tFIRST\tRESTORED\tCLAIMS\tCREATED\tCHECK")
	for _, g := range r.Generations {
		check := "ok"
		switch {
		case g.Record == "":
			check = "no record"
		case r.isDamaged(g.Record):
			check = "DAMAGED"
		case g.Error != "":
			check = "GONE" // deleted since the listing
		}
		for _, c := range g.Claims {
			if r.isDamaged(c.Object) {
				check = "DAMAGED claim"
			}
		}
		if g.Mode == "" {
			fmt.Fprintf(tw, "%d\t%s\t?\t?\t?\t?\t?\t?\t%d\t-\t%s\n", g.Generation, g.Status, len(g.Claims), check)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%d\t%s\t%d/%d\t%s\t%s\n", g.Generation, g.Status, g.Mode, g.Instances, g.Processes,
			rangesText(g.KeyGroups, g.MaxParallelism), g.FirstCheckpoint, restoredText(r.Prefix, g.Restored),
			len(g.Claims), g.Processes, timeText(g.Created), check)
	}
	tw.Flush()
	fmt.Fprintln(w)
	n := 0
	for _, g := range r.Generations {
		n += len(g.Checkpoints)
	}
	if n == 0 {
		fmt.Fprintln(w, "no checkpoint committed yet")
	} else {
		fmt.Fprintln(tw, "GENERATION\tCHECKPOINT\tSTATUS\tCOMMITS\tSTORED\tSTATE\tOBJECTS\tKEPT\tCHECK")
	}
	for _, g := range r.Generations {
		for _, c := range g.Checkpoints {
			commits := strconv.Itoa(c.Commits)
			if g.Processes > 0 {
				commits += "/" + strconv.Itoa(g.Processes)
			}
			state, objects, check := formatBytes(c.StateSize), strconv.Itoa(c.Objects), "ok"
			if !c.OK {
				state, objects, check = "?", "?", "GONE" // a commit deleted since the listing
				if r.damaged(g.Generation, c.Checkpoint) {
					check = "DAMAGED"
				}
			}
			kept := dash(c.Kept)
			if c.Kept != "" && c.KeptCommits < c.Commits {
				kept += fmt.Sprintf(" (%d %s)", c.KeptCommits, plural(c.KeptCommits, "commit"))
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Generation, c.Checkpoint, c.Status, commits,
				formatBytes(c.StoredSize), state, objects, kept, check)
		}
	}
	tw.Flush()
	retained := "none"
	if len(r.Retained) > 0 {
		s := make([]string, len(r.Retained))
		for i, n := range r.Retained {
			s[i] = strconv.FormatInt(n, 10)
		}
		retained = strings.Join(s, ", ")
	}
	fmt.Fprintf(w, "\nretained with --retain %d: %s %s of generation %d; %d catalog %s kept\n", r.Retain,
		plural(len(r.Retained), "checkpoint"), retained, r.LiveGeneration, r.KeptCommits, plural(r.KeptCommits, "object"))
	if r.FirstLayout > 0 {
		fmt.Fprintf(w, "%d %s of the catalog's first layout (an upgrade keeps one generation record, which fences older releases)\n",
			r.FirstLayout, plural(r.FirstLayout, "object"))
	}
	printCheckpointsProblems(w, r.Problems, r.OtherObjects)
}

// damaged reports whether a commit of checkpoint n of generation g is
// damaged.
func (r *checkpointsReport) damaged(g, n int64) bool {
	for _, p := range r.Problems {
		ref := objname.ParseCatalog(r.Prefix, p.Object)
		if p.Kind == "damaged" && ref.Kind == objname.CatalogCommit && ref.Generation == g && ref.Checkpoint == n {
			return true
		}
	}
	return false
}

// isDamaged reports whether the object is damaged.
func (r *checkpointsReport) isDamaged(name string) bool {
	return slices.ContainsFunc(r.Problems, func(p checkpointsProblem) bool { return p.Kind == "damaged" && p.Object == name })
}

func printCheckpointsProblems(w io.Writer, ps []checkpointsProblem, other []string) {
	for _, name := range other {
		fmt.Fprintf(w, "note: %s is under the catalog, and no catalog object's name\n", name)
	}
	for _, p := range ps {
		fmt.Fprintf(w, "problem (%s): %s\n", p.Kind, p.Error)
	}
}

// checkpointReport is what "dstl checkpoints show N" shows.
type checkpointReport struct {
	BasePath         string `json:"base_path"`
	JobID            string `json:"job_id"`
	Prefix           string `json:"prefix"`
	Generation       int64  `json:"generation"`
	GenerationStatus string `json:"generation_status"` // "live" or "fenced"
	Mode             string `json:"mode,omitempty"`
	Instances        int    `json:"instances"` // 0 when the generation's record cannot be read
	Processes        int    `json:"processes"`
	Checkpoint       int64  `json:"checkpoint"`
	Status           string `json:"status"`
	Retained         bool   `json:"retained"`
	Kept             string `json:"kept"`
	// Without are the processes without a commit (of a checkpoint not
	// complete).
	Without []int `json:"processes_without_commit"`
	// RestoredBy are the generations that restored parts of it.
	RestoredBy []int64 `json:"restored_by"`
	// AlsoIn are the other generations with a checkpoint of that number
	// (a fenced generation's instances may go on committing).
	AlsoIn     []int64              `json:"also_in_generations,omitempty"`
	StoredSize int64                `json:"stored_size"`
	StateSize  int64                `json:"state_size"`
	Objects    int                  `json:"objects"`
	OK         bool                 `json:"ok"`
	Parts      []partReport         `json:"parts"`
	Problems   []checkpointsProblem `json:"problems,omitempty"`
}

// partReport is one instance's part; the part's fields are absent when its
// commit could not be read (Error says why; Instance is then -1).
type partReport struct {
	Instance   int                 `json:"instance"`
	Process    int                 `json:"process"`
	Object     string              `json:"object"` // the commit that holds the part
	StoredSize int64               `json:"stored_size"`
	Kept       bool                `json:"kept"`
	KeyGroups  *dstl.KeyGroupRange `json:"key_groups,omitempty"`
	Metadata   map[string]string   `json:"metadata,omitempty"`
	StateSize  int                 `json:"state_size"`
	Objects    []string            `json:"objects"`
	Created    *time.Time          `json:"created,omitempty"`
	Error      string              `json:"error,omitempty"`
}

func showReport(l *catalog.Listing, c *catalog.CheckpointInfo, o checkpointsOptions) *checkpointReport {
	g := l.Generation(c.Generation)
	rep := &checkpointReport{BasePath: backends.RedactURL(o.basePath), JobID: o.jobID, Prefix: l.Prefix, Generation: g.Number,
		GenerationStatus: "fenced", Checkpoint: c.Number, Status: string(c.State), Retained: c.Retained, Kept: keptAs(c),
		Without: []int{}, RestoredBy: []int64{}, Parts: []partReport{}}
	if g.Live {
		rep.GenerationStatus = "live"
	}
	has := map[int]bool{}
	objects := map[string]bool{}
	for _, cm := range c.Commits {
		has[cm.Process] = true
		rep.StoredSize += cm.Object.Size
		if cm.Parts == nil {
			rep.Parts = append(rep.Parts, partReport{Instance: -1, Process: cm.Process, Object: cm.Object.Name, StoredSize: cm.Object.Size,
				Kept: cm.Kept, Objects: []string{}, Error: errString(cm.Err)})
			continue
		}
		for _, part := range cm.Parts {
			kg := part.KeyGroups
			pr := partReport{Instance: part.Instance, Process: cm.Process, Object: cm.Object.Name, StoredSize: cm.Object.Size, Kept: cm.Kept,
				KeyGroups: &kg, Metadata: part.Metadata, StateSize: len(part.State), Objects: part.Objects, Created: timePtr(part.Created)}
			rep.StateSize += int64(len(part.State))
			for _, name := range part.Objects {
				objects[name] = true
			}
			rep.Parts = append(rep.Parts, pr)
		}
	}
	rep.Objects = len(objects)
	if r := g.Record; r != nil {
		rep.Mode, rep.Instances, rep.Processes = string(r.Mode), r.Instances(), r.Processes
		for p := range r.Processes {
			if !has[p] {
				rep.Without = append(rep.Without, p)
			}
		}
	}
	for _, other := range l.Generations {
		if other.Record != nil && slices.ContainsFunc(other.Record.Restored, func(rs catalog.Restored) bool {
			ref := objname.ParseCatalog(l.Prefix, rs.Object)
			return ref.Version == 2 && ref.Generation == c.Generation && ref.Checkpoint == c.Number
		}) {
			rep.RestoredBy = append(rep.RestoredBy, other.Number)
		}
		if other.Number != g.Number && slices.ContainsFunc(other.Checkpoints, func(o catalog.CheckpointInfo) bool { return o.Number == c.Number }) {
			rep.AlsoIn = append(rep.AlsoIn, other.Number)
		}
	}
	// The problems of its generation's record and of its commits (also
	// of those the live generation restored from and that are gone).
	for _, p := range problems(l) {
		ref := objname.ParseCatalog(l.Prefix, p.Object)
		if ref.Version == 2 && ref.Generation == c.Generation && (ref.Kind == objname.CatalogGeneration || ref.Kind == objname.CatalogCommit && ref.Checkpoint == c.Number) {
			rep.Problems = append(rep.Problems, p)
		}
	}
	rep.OK = len(rep.Problems) == 0
	return rep
}

func (r *checkpointReport) print(w io.Writer) {
	gen := r.GenerationStatus
	if r.Mode != "" {
		gen += fmt.Sprintf(", %s, %d %s", r.Mode, r.Instances, plural(r.Instances, "instance"))
	}
	status := r.Status
	if r.Kept != "" {
		status += ", kept: " + r.Kept
	}
	fmt.Fprintf(w, "checkpoint %d of generation %d (%s) under prefix %q of %s: %s\n", r.Checkpoint, r.Generation, gen, r.Prefix, r.BasePath, status)
	unread := ""
	if n := len(slices.DeleteFunc(slices.Clone(r.Parts), func(p partReport) bool { return p.KeyGroups != nil })); n > 0 {
		unread = fmt.Sprintf(" (of the %d %s read)", len(r.Parts)-n, plural(len(r.Parts)-n, "part"))
	}
	fmt.Fprintf(w, "  %d %s, stored %s, state %s, %d %s referred to%s\n", len(r.Parts), plural(len(r.Parts), "part"),
		formatBytes(r.StoredSize), formatBytes(r.StateSize), r.Objects, plural(r.Objects, "object"), unread)
	if len(r.Without) > 0 {
		fmt.Fprintf(w, "  no commit of %s %s\n", plural(len(r.Without), "process"), intsText(r.Without))
	}
	if len(r.RestoredBy) > 0 {
		fmt.Fprintf(w, "  restored by %s %s\n", plural(len(r.RestoredBy), "generation"), int64sText(r.RestoredBy))
	}
	if len(r.AlsoIn) > 0 {
		fmt.Fprintf(w, "  a checkpoint %d is in %s %s too (--generation)\n", r.Checkpoint, plural(len(r.AlsoIn), "generation"), int64sText(r.AlsoIn))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tPROCESS\tKEY GROUPS\tSTORED\tSTATE\tOBJECTS\tCREATED\tKEPT\tCOMMIT")
	for _, p := range r.Parts {
		kept := "no"
		if p.Kept {
			kept = "yes"
		}
		if p.KeyGroups == nil {
			what := "GONE" // deleted since the listing
			if slices.ContainsFunc(r.Problems, func(q checkpointsProblem) bool { return q.Object == p.Object }) {
				what = "DAMAGED"
			}
			fmt.Fprintf(tw, "?\t%d\t%s\t%s\t?\t?\t-\t%s\t%s\n", p.Process, what, formatBytes(p.StoredSize), kept, p.Object)
			continue
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", p.Instance, p.Process, rangeText(*p.KeyGroups), formatBytes(p.StoredSize),
			formatBytes(int64(p.StateSize)), len(p.Objects), timeText(p.Created), kept, p.Object)
	}
	tw.Flush()
	for _, p := range r.Parts {
		if p.KeyGroups == nil {
			continue
		}
		fmt.Fprintf(w, "\ninstance %d:\n", p.Instance)
		if len(p.Metadata) > 0 {
			fmt.Fprintln(w, "  metadata:")
			for _, k := range slices.Sorted(maps.Keys(p.Metadata)) {
				fmt.Fprintf(w, "    %s=%s\n", k, p.Metadata[k])
			}
		}
		fmt.Fprintf(w, "  %d %s:\n", len(p.Objects), plural(len(p.Objects), "object"))
		for _, name := range p.Objects {
			fmt.Fprintf(w, "    %s\n", name)
		}
	}
	if len(r.Problems) > 0 {
		fmt.Fprintln(w)
	}
	printCheckpointsProblems(w, r.Problems, nil)
}

func intsText(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

func int64sText(xs []int64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ", ")
}
