package main

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/statestore"
)

// snapshotReport is what inspect finds in a state store's snapshot object.
type snapshotReport struct {
	Kind           string          `json:"kind"` // "snapshot"
	Object         string          `json:"object"`
	Size           int64           `json:"size"`
	OK             bool            `json:"ok"`
	Format         string          `json:"format,omitempty"` // "in-memory" (DSSO) or "disk-backed manifest" (DSSM)
	Version        int             `json:"version,omitempty"`
	Operator       string          `json:"operator,omitempty"`
	KeyGroups      string          `json:"key_groups,omitempty"`
	MaxParallelism int             `json:"max_parallelism,omitempty"`
	LogFrom        uint64          `json:"log_from"` // the log's sequence number a restore replays from
	Stores         []snapshotStore `json:"stores,omitempty"`
	Files          []snapshotFile  `json:"files,omitempty"` // of a disk-backed snapshot
	Problems       []problem       `json:"problems,omitempty"`
}

type snapshotStore struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Size int64  `json:"size"` // payload bytes; 0 in a manifest
}

type snapshotFile struct {
	Object string `json:"object"`
	Size   int64  `json:"size"`
	Kind   string `json:"kind"`   // "delta" or "segment"
	Writer string `json:"writer"` // key groups of the instance that wrote it
}

// catalogReport is what inspect finds in a catalog object.
type catalogReport struct {
	Kind       string              `json:"kind"` // "catalog"
	Object     string              `json:"object"`
	Size       int64               `json:"size"`
	OK         bool                `json:"ok"`
	Record     string              `json:"record,omitempty"` // "generation", "fence", "claim", "commit" or "part" (the first layout's)
	Version    int                 `json:"version,omitempty"`
	Generation *catalog.Generation `json:"generation,omitempty"`
	Fence      *fenceRecord        `json:"fence,omitempty"`
	Claim      *claimRecord        `json:"claim,omitempty"`
	Commit     *commitRecord       `json:"commit,omitempty"`
	Part       *partRecord         `json:"part,omitempty"` // a first-layout part
	Problems   []problem           `json:"problems,omitempty"`
}

type fenceRecord struct {
	Generation int64     `json:"generation,omitempty"` // the fenced one, from the object's name
	Next       int64     `json:"next"`
	Owner      string    `json:"owner"`
	Created    time.Time `json:"created"`
}

type claimRecord struct {
	Generation int64     `json:"generation,omitempty"` // from the object's name; 0 when it is no catalog name
	Process    int       `json:"process"`              // a first-layout claim's instance
	Owner      string    `json:"owner"`
	Created    time.Time `json:"created"`
}

type commitRecord struct {
	Generation int64        `json:"generation,omitempty"` // from the object's name
	Checkpoint int64        `json:"checkpoint"`
	Process    int          `json:"process"`
	HoldFrom   int64        `json:"hold_from"`
	Complete   int64        `json:"complete,omitempty"`
	Created    time.Time    `json:"created"`
	Parts      []partRecord `json:"parts"`
}

type partRecord struct {
	Generation int64             `json:"generation"`
	Checkpoint int64             `json:"checkpoint"`
	Instance   int               `json:"instance"`
	KeyGroups  string            `json:"key_groups"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Objects    []string          `json:"objects"`
	Created    time.Time         `json:"created"`
	StateSize  int               `json:"state_size"`
	State      string            `json:"state"` // what the state is, in words
}

// checkpointHandleReport is a state store's checkpoint handle
// (statestore.CheckpointHandle) in inspect --handle's report; its log
// handles are the report's Handles.
type checkpointHandleReport struct {
	CheckpointID   int64               `json:"checkpoint_id"`
	Operator       string              `json:"operator"`
	KeyGroups      string              `json:"key_groups"`
	MaxParallelism int                 `json:"max_parallelism"`
	Snapshots      []snapshotRefReport `json:"snapshots"`
	Logs           int                 `json:"logs"`       // log handles, listed in the report's handles
	LocalLogs      int                 `json:"local_logs"` // of them, with a handle of local copies (not checked)
}

type snapshotRefReport struct {
	Object string          `json:"object"`
	Size   int64           `json:"size"`
	Files  []string        `json:"files,omitempty"`
	Check  *snapshotReport `json:"check,omitempty"`
}

// The magics of the objects and handles that inspect tells apart by their
// first bytes, beside the log objects' (format.Magic) and the checkpoint
// handles' (checkpointHandleMagic): those of packages statestore, catalog
// and dstl, whose decoders then read the object.
const (
	snapshotMagic         = "DSSO" // an in-memory snapshot, package statestore
	snapshotManifestMagic = "DSSM" // a disk-backed snapshot's manifest
	catalogMagic          = "DSTC" // a catalog object, package catalog
	logHandleMagic        = "DSTH" // a dstl handle's binary encoding
)

// objectKind says what data, read from the object or file name, is: by
// its magic, as handles in JSON, or, for the objects without a magic, by
// its name.
func objectKind(name string, data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte(snapshotMagic)), bytes.HasPrefix(data, []byte(snapshotManifestMagic)):
		return "snapshot"
	case bytes.HasPrefix(data, []byte(catalogMagic)):
		return "catalog"
	case bytes.HasPrefix(data, []byte(logHandleMagic)), bytes.HasPrefix(data, []byte(checkpointHandleMagic)):
		return "handle"
	case bytes.HasPrefix(data, []byte(format.Magic)):
		return "log"
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		if _, err := parseHandles(data); err == nil {
			return "handle" // handles in JSON
		}
	}
	base := path.Base(filepath.ToSlash(name))
	switch {
	case strings.HasSuffix(base, objname.SnapshotFileSuffix):
		return "snapshot file"
	case strings.HasPrefix(base, objname.ClockProbePrefix):
		return "clock probe"
	case strings.HasPrefix(base, objname.CreateOnlyProbePrefix):
		return "create-only probe"
	case demoSnapshotName.MatchString(base) && decodeDemoSnapshot(data) != nil:
		return "demo snapshot"
	}
	return "log" // the log decoder says what is wrong with it
}

// inspectSnapshot describes a state store's snapshot object.
func inspectSnapshot(name string, data []byte) *snapshotReport {
	rep := &snapshotReport{Kind: "snapshot", Object: name, Size: int64(len(data))}
	info, err := statestore.DescribeSnapshot(name, data)
	if err != nil {
		rep.Problems = []problem{snapshotProblem(err)}
		return rep
	}
	rep.OK = true
	rep.Format = "in-memory"
	if info.Manifest {
		rep.Format = "disk-backed manifest"
	}
	rep.Version, rep.Operator, rep.MaxParallelism = info.Version, info.Operator, info.MaxParallelism
	rep.KeyGroups, rep.LogFrom = rangeText(info.KeyGroups), uint64(info.From)
	for _, s := range info.Stores {
		rep.Stores = append(rep.Stores, snapshotStore{Name: s.Name, Kind: string(s.Kind), Size: s.Size})
	}
	for _, f := range info.Files {
		rep.Files = append(rep.Files, snapshotFile{Object: f.Object, Size: f.Size, Kind: f.Kind, Writer: rangeText(f.Writer)})
	}
	return rep
}

// snapshotProblem is the problem of a snapshot that does not decode.
func snapshotProblem(err error) problem {
	kind := "corrupt"
	if strings.Contains(err.Error(), "checksum") {
		kind = "checksum"
	}
	return problem{Offset: -1, Kind: kind, Error: err.Error()}
}

func (r *snapshotReport) print(w io.Writer) {
	if !r.OK {
		fmt.Fprintf(w, "snapshot %s: %s, DAMAGED\n", r.Object, formatBytes(r.Size))
		printProblems(w, r.Problems)
		return
	}
	fmt.Fprintf(w, "snapshot %s: %s, %s (version %d) of operator %s, key groups %s of %d, the log from sequence number %d, OK\n",
		r.Object, formatBytes(r.Size), r.Format, r.Version, r.Operator, r.KeyGroups, r.MaxParallelism, r.LogFrom)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(r.Files) == 0 {
		fmt.Fprintln(tw, "  STORE\tKIND\tPAYLOAD")
		for _, s := range r.Stores {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Name, s.Kind, formatBytes(s.Size))
		}
		tw.Flush()
		return
	}
	fmt.Fprintln(tw, "  STORE\tKIND")
	for _, s := range r.Stores {
		fmt.Fprintf(tw, "  %s\t%s\n", s.Name, s.Kind)
	}
	tw.Flush()
	fmt.Fprintf(w, "  %d SST %s (not read here):\n", len(r.Files), plural(len(r.Files), "file"))
	fmt.Fprintln(tw, "  FILE\tSIZE\tKIND\tWRITTEN BY")
	for _, f := range r.Files {
		fmt.Fprintf(tw, "  %s\t%s\t%s\tkey groups %s\n", f.Object, formatBytes(f.Size), f.Kind, f.Writer)
	}
	tw.Flush()
}

// inspectCatalog describes a catalog object.
func inspectCatalog(name string, data []byte) *catalogReport {
	rep := &catalogReport{Kind: "catalog", Object: name, Size: int64(len(data))}
	r, err := catalog.DecodeRecord(name, data)
	if err != nil {
		p := problem{Offset: -1, Kind: "corrupt", Error: err.Error()}
		if strings.Contains(err.Error(), "checksum") {
			p.Kind = "checksum"
		}
		rep.Problems = []problem{p}
		return rep
	}
	rep.OK, rep.Record, rep.Version = true, string(r.Kind), r.Version
	ref := catalogRef(name)
	switch r.Kind {
	case catalog.GenerationRecord:
		rep.Generation = r.Generation
	case catalog.FenceRecord:
		rep.Fence = &fenceRecord{Generation: ref.Generation, Next: r.Next, Owner: r.Owner, Created: r.Created}
	case catalog.ClaimRecord:
		rep.Claim = &claimRecord{Generation: ref.Generation, Process: max(ref.Process, ref.Instance), Owner: r.Owner, Created: r.Created}
	case catalog.CommitRecord:
		rep.Commit = &commitRecord{Generation: ref.Generation, Checkpoint: r.Checkpoint, Process: r.Process, HoldFrom: r.HoldFrom,
			Complete: r.Complete, Created: r.Created}
		for _, p := range r.Parts {
			rep.Commit.Parts = append(rep.Commit.Parts, partOf(p))
		}
	case catalog.PartRecord:
		pr := partOf(r.Parts[0])
		rep.Part = &pr
	}
	return rep
}

// catalogRef returns what a catalog object's name says, under whatever
// prefix comes before the catalog's directory in it.
func catalogRef(name string) objname.CatalogRef {
	if i := strings.LastIndex(name, objname.CatalogDir); i >= 0 && (i == 0 || name[i-1] == '/') {
		return objname.ParseCatalog(name[:i], name)
	}
	return objname.CatalogRef{}
}

// partOf reports an instance's part.
func partOf(p *catalog.Part) partRecord {
	objects := p.Objects
	if objects == nil {
		objects = []string{}
	}
	return partRecord{Generation: p.Generation, Checkpoint: p.Checkpoint, Instance: p.Instance, KeyGroups: rangeText(p.KeyGroups),
		Metadata: p.Metadata, Objects: objects, Created: p.Created, StateSize: len(p.State), State: describeState(p.State)}
}

// describeState says in words what a catalog part's state is.
func describeState(state []byte) string {
	hs, cps, err := parseKeepFile("state", state)
	switch {
	case err == nil && len(cps) == 1:
		h := cps[0]
		return fmt.Sprintf("a state store checkpoint handle: checkpoint %d of operator %s, %d %s, %d log %s",
			h.CheckpointID, h.Operator, len(h.Snapshots), plural(len(h.Snapshots), "snapshot"), len(h.Logs), plural(len(h.Logs), "handle"))
	case err == nil:
		return fmt.Sprintf("%d log %s", len(hs), plural(len(hs), "handle"))
	}
	return "the application's own bytes"
}

func (r *catalogReport) print(w io.Writer) {
	if !r.OK {
		fmt.Fprintf(w, "catalog object %s: %s, DAMAGED\n", r.Object, formatBytes(r.Size))
		printProblems(w, r.Problems)
		return
	}
	what := ""
	switch {
	case r.Generation != nil:
		what = fmt.Sprintf("record of generation %d", r.Generation.Number)
	case r.Fence != nil:
		what = fmt.Sprintf("fence of generation %d: generation %d starts", r.Fence.Next-1, r.Fence.Next)
	case r.Claim != nil && r.Claim.Generation > 0 && r.Version == 1:
		what = fmt.Sprintf("claim of instance %d of generation %d", r.Claim.Process, r.Claim.Generation)
	case r.Claim != nil && r.Claim.Generation > 0:
		what = fmt.Sprintf("claim of process %d of generation %d", r.Claim.Process, r.Claim.Generation)
	case r.Claim != nil:
		what = "claim of a slot"
	case r.Commit != nil:
		what = fmt.Sprintf("commit of checkpoint %d by process %d", r.Commit.Checkpoint, r.Commit.Process)
		if r.Commit.Generation > 0 {
			what += fmt.Sprintf(" of generation %d", r.Commit.Generation)
		}
	case r.Part != nil:
		what = fmt.Sprintf("part of checkpoint %d of generation %d, instance %d", r.Part.Checkpoint, r.Part.Generation, r.Part.Instance)
	}
	fmt.Fprintf(w, "catalog object %s: %s, %s (version %d), OK\n", r.Object, formatBytes(r.Size), what, r.Version)
	switch {
	case r.Generation != nil:
		g := r.Generation
		fmt.Fprintf(w, "  mode %s, %d %s of %d key groups: %s\n", g.Mode, g.Instances(), plural(g.Instances(), "instance"), g.MaxParallelism,
			rangesText(g.KeyGroups, g.MaxParallelism))
		fmt.Fprintf(w, "  first checkpoint %d, created %s\n", g.FirstCheckpoint, g.Created.Format(time.RFC3339))
		if len(g.Restored) == 0 {
			fmt.Fprintln(w, "  restored nothing: a first start")
		} else {
			fmt.Fprintf(w, "  restored checkpoint %d from %d %s:\n", g.RestoredCheckpoint, len(g.Restored), plural(len(g.Restored), "object"))
			for _, p := range g.Restored {
				fmt.Fprintf(w, "    %s\n", p.Object)
			}
		}
	case r.Fence != nil:
		fmt.Fprintf(w, "  owner %s, created %s\n", r.Fence.Owner, r.Fence.Created.Format(time.RFC3339))
	case r.Claim != nil:
		fmt.Fprintf(w, "  owner %s, created %s\n", r.Claim.Owner, r.Claim.Created.Format(time.RFC3339))
	case r.Commit != nil:
		c := r.Commit
		fmt.Fprintf(w, "  created %s, holds objects made for checkpoint %d on", c.Created.Format(time.RFC3339), c.HoldFrom)
		if c.Complete > 0 {
			fmt.Fprintf(w, ", tells checkpoint %d complete", c.Complete)
		}
		fmt.Fprintf(w, "\n  %d %s:\n", len(c.Parts), plural(len(c.Parts), "part"))
		for _, p := range c.Parts {
			fmt.Fprintf(w, "  instance %d:\n", p.Instance)
			printPart(w, p, "    ")
		}
	case r.Part != nil:
		printPart(w, *r.Part, "  ")
	}
}

// printPart writes an instance's part, each line indented.
func printPart(w io.Writer, p partRecord, indent string) {
	fmt.Fprintf(w, "%skey groups %s, created %s\n", indent, p.KeyGroups, p.Created.Format(time.RFC3339))
	fmt.Fprintf(w, "%sstate: %s, %s\n", indent, formatBytes(int64(p.StateSize)), p.State)
	if len(p.Metadata) > 0 {
		fmt.Fprintf(w, "%smetadata:\n", indent)
		for _, k := range slices.Sorted(maps.Keys(p.Metadata)) {
			fmt.Fprintf(w, "%s  %s=%s\n", indent, k, p.Metadata[k])
		}
	}
	fmt.Fprintf(w, "%s%d %s:\n", indent, len(p.Objects), plural(len(p.Objects), "object"))
	for _, o := range p.Objects {
		fmt.Fprintf(w, "%s  %s\n", indent, o)
	}
}

// checkpointHandleOf describes a state store's checkpoint handle.
func checkpointHandleOf(h statestore.CheckpointHandle) checkpointHandleReport {
	r := checkpointHandleReport{CheckpointID: h.CheckpointID, Operator: h.Operator, KeyGroups: rangeText(h.KeyGroups),
		MaxParallelism: h.MaxParallelism, Snapshots: []snapshotRefReport{}, Logs: len(h.Logs)}
	for _, s := range h.Snapshots {
		r.Snapshots = append(r.Snapshots, snapshotRefReport{Object: s.Object, Size: s.Size, Files: s.Files})
	}
	for _, l := range h.Logs {
		if l.Local != nil {
			r.LocalLogs++
		}
	}
	return r
}

// checkSnapshot reads a snapshot object that a checkpoint handle names
// and describes it. A missing object, or one of another size than the
// handle says, is a problem found, not an error; other errors of the
// backend are returned.
func checkSnapshot(ctx context.Context, b backends.Backend, s snapshotRefReport) (*snapshotReport, error) {
	rc, err := b.Get(ctx, s.Object, 0, -1)
	if errors.Is(err, backends.ErrNotFound) {
		return &snapshotReport{Kind: "snapshot", Object: s.Object, Problems: []problem{{Offset: -1, Kind: "missing", Error: err.Error()}}}, nil
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.Object, err)
	}
	rep := inspectSnapshot(s.Object, data)
	if rep.OK && rep.Size != s.Size {
		rep.OK = false
		rep.Problems = append(rep.Problems, problem{Offset: -1, Kind: "mismatch",
			Error: fmt.Sprintf("snapshot %s: %d bytes, the handle says %d", s.Object, rep.Size, s.Size)})
	}
	return rep, nil
}

// printCheckpoint writes a checkpoint handle's lines of inspect --handle.
func printCheckpoint(w io.Writer, file string, c checkpointHandleReport, checked bool) {
	fmt.Fprintf(w, "checkpoint handle %s: checkpoint %d of operator %s, key groups %s of %d, %d %s, %d log %s\n",
		file, c.CheckpointID, c.Operator, c.KeyGroups, c.MaxParallelism, len(c.Snapshots), plural(len(c.Snapshots), "snapshot"),
		c.Logs, plural(c.Logs, "handle"))
	if c.LocalLogs > 0 {
		fmt.Fprintf(w, "  %d of the log handles with a handle of local copies (not checked)\n", c.LocalLogs)
	}
	if len(c.Snapshots) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if checked {
		fmt.Fprintln(tw, "  SNAPSHOT\tSIZE\tFILES\tSTATUS")
	} else {
		fmt.Fprintln(tw, "  SNAPSHOT\tSIZE\tFILES")
	}
	for _, s := range c.Snapshots {
		fmt.Fprintf(tw, "  %s\t%s\t%d", s.Object, formatBytes(s.Size), len(s.Files))
		if checked {
			status := "ok"
			if s.Check != nil && !s.Check.OK {
				status = "DAMAGED"
				if len(s.Check.Problems) > 0 && s.Check.Problems[0].Kind == "missing" {
					status = "MISSING"
				}
			}
			fmt.Fprintf(tw, "\t%s", status)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// otherReport describes an object of the project that inspect recognises
// by its name alone: an SST file of a disk-backed snapshot, or a probe
// object.
type otherReport struct {
	Kind   string `json:"kind"` // "snapshot file", "clock probe", "create-only probe" or "demo snapshot"
	Object string `json:"object"`
	Size   int64  `json:"size"`
	OK     bool   `json:"ok"`
	About  string `json:"about"`
}

// inspectOther describes an object inspect recognises by its name.
func inspectOther(kind, name string, data []byte) *otherReport {
	about := map[string]string{
		"snapshot file":     "an SST file of a disk-backed snapshot: the manifests that name it hold its size and CRC-32C, which inspect does not check",
		"clock probe":       "gc's clock probe, which gc deletes after reading the storage's clock (one left behind is deleted by a later gc)",
		"create-only probe": "the probe object of the create-only check (dstl backends --check), deleted after the check (one left behind is deleted by gc)",
	}[kind]
	if kind == "demo snapshot" {
		about = describeDemoSnapshot(decodeDemoSnapshot(data))
	}
	return &otherReport{Kind: kind, Object: name, Size: int64(len(data)), OK: true, About: about}
}

// demoSnapshotName matches the name of a snapshot that dstl demo writes
// (snapshots/operator-N-cp-M.snap under the run's prefix).
var demoSnapshotName = regexp.MustCompile(`^operator-\d+-cp-\d+\.snap$`)

// decodeDemoSnapshot decodes a snapshot of dstl demo (gob-encoded, the
// demo's own format); nil if data is none.
func decodeDemoSnapshot(data []byte) *snapshot {
	var s snapshot
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&s); err != nil {
		return nil
	}
	return &s
}

// describeDemoSnapshot says what a demo snapshot holds.
func describeDemoSnapshot(s *snapshot) string {
	keys, groups := 0, 0
	for _, kv := range s.State {
		if len(kv) > 0 {
			groups++
			keys += len(kv)
		}
	}
	return fmt.Sprintf("dstl demo's own snapshot (gob, no library format) of %d keys in %d key groups, the log from sequence number %d",
		keys, groups, s.From)
}

func (r *otherReport) print(w io.Writer) {
	fmt.Fprintf(w, "%s %s: %s, %s\n", r.Kind, r.Object, formatBytes(r.Size), r.About)
}
