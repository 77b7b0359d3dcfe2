package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/statestore"
)

const inspectAbout = `Describes an object or file that dstl writes, and checks it. What it is, inspect
tells by its first bytes:

  - a log object ("DSTL", UUIDv7.dstl): its format version (1 or 2, from its
    header) and its change sets, each with its offset
    and stored size, the writer's log id, the sequence number, the key groups
    with their number of changes, the logical (uncompressed) size and whether
    its CRC32C and structure check out. The object's footer index is read and
    checked too; when it is damaged, the change sets are found by walking the
    frames from the front;
  - a state store's snapshot object ("DSSO", or a disk-backed snapshot's
    manifest, "DSSM"; statestore/OPERATOR/UUIDv7.snap): its operator, key
    groups, stores and, for a manifest, the SST files it names (which are not
    read);
  - a catalog object ("DSTC", under _catalog/): a generation's record, an
    instance slot's claim or an instance's part of a checkpoint, checked
    against its name;
  - a handle file: as with --handle, below.

An SST file of a disk-backed snapshot (.sst), the probes of gc and of the
create-only check, and the snapshots that dstl demo --keep leaves
(snapshots/operator-N-cp-M.snap, the demo's own gob encoding) are named as
such. Anything else is no dstl object. An
object is a local FILE or the URL of an object (e.g.
s3://bucket/job/0190....dstl?endpoint=...; the query configures the backend as
in a base path).

With --handle, shows the handles in a handle file instead: the storage, log
id, key groups and sizes of each, and its entries (object, offset, length,
sequence number); of a state store's checkpoint handle, also its operator,
key groups and snapshot objects. Given the BASE-PATH the handles' objects live
under, it also fetches each entry's bytes and checks that they decode to the
change set the handle expects, and reads and checks each snapshot object (not
the SST files that a disk-backed snapshot names).

` + handleFileHelp + `

A handle file may also hold a state store's checkpoint handle in its binary
encoding (CheckpointHandle.MarshalBinary, starting with "DSCP"), as gc --keep
takes it.

Nothing is written: a BASE-PATH, or the directory of an object URL, that does
not exist is an error. Exits 1 when anything is damaged or missing (a handle
file that does not decode included), 3 when the object or file cannot be
read.`

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("inspect", "[flags] OBJECT-URL|FILE\n       dstl inspect [flags] --handle FILE [BASE-PATH]", inspectAbout, stderr)
	storage := fs.String("storage", "", "backend `ID` for a URL (default: chosen by the URL's scheme)")
	handleFile := fs.String("handle", "", "show the handles in this handle `FILE` (and check them, given a BASE-PATH)")
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
	var pos []string
	if code, ok := parseInterspersed(fs, args, &pos); !ok {
		return code
	}
	r := reporter{stderr, "dstl inspect"}
	fail, failErr := r.fail, r.err
	if *handleFile != "" {
		if len(pos) > 1 {
			return fail(exitUsage, "with --handle, give at most one BASE-PATH (got %q)", pos)
		}
		base := ""
		if len(pos) == 1 {
			base = pos[0]
		}
		rep, err := inspectHandles(ctx, *handleFile, *storage, base)
		if errors.Is(err, dstl.ErrInvalidHandle) {
			return failErr(exitFailed, err) // damaged data, found
		}
		if err != nil {
			return failErr(runtimeOrUsage(err), err)
		}
		return emit(stdout, stderr, *jsonOut, rep, rep.OK)
	}
	if len(pos) != 1 {
		return fail(exitUsage, "want one OBJECT-URL or FILE (got %d arguments); see dstl inspect --help", len(pos))
	}
	name, data, err := fetchObject(ctx, *storage, pos[0])
	if err != nil {
		return failErr(runtimeOrUsage(err), err)
	}
	switch kind := objectKind(name, data); kind {
	case "snapshot":
		rep := inspectSnapshot(name, data)
		return emit(stdout, stderr, *jsonOut, rep, rep.OK)
	case "catalog":
		rep := inspectCatalog(name, data)
		return emit(stdout, stderr, *jsonOut, rep, rep.OK)
	case "handle":
		hs, cps, err := parseKeepFile(name, data)
		if err != nil {
			return failErr(exitFailed, err)
		}
		rep, err := handlesReportOf(ctx, name, hs, cps, "", "")
		if err != nil {
			return failErr(runtimeOrUsage(err), err)
		}
		return emit(stdout, stderr, *jsonOut, rep, rep.OK)
	case "log":
		rep := inspectObject(name, data)
		return emit(stdout, stderr, *jsonOut, rep, rep.OK)
	default:
		rep := inspectOther(kind, name, data)
		return emit(stdout, stderr, *jsonOut, rep, rep.OK)
	}
}

// runtimeOrUsage is the exit code of an error: a bad base path or backend
// identifier is a usage error, anything else a runtime one.
func runtimeOrUsage(err error) int {
	if errors.Is(err, backends.ErrUnknownBackend) || errors.Is(err, dstl.ErrInvalidConfig) || errors.Is(err, errUsage) {
		return exitUsage
	}
	return exitRuntime
}

// errUsage marks errors in what the user gave.
var errUsage = errors.New("bad argument")

// fetchObject reads a whole object: a local file, or an object URL.
func fetchObject(ctx context.Context, storage, arg string) (string, []byte, error) {
	base, name, isURL, err := splitObjectURL(arg)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if !isURL {
		if storage != "" {
			return "", nil, fmt.Errorf("%w: --storage is for object URLs, and %q is a file", errUsage, arg)
		}
		data, err := os.ReadFile(arg)
		return arg, data, err
	}
	b, _, err := openExisting(ctx, storage, base)
	if err != nil {
		return "", nil, err
	}
	defer b.Close()
	rc, err := b.Get(ctx, name, 0, -1)
	if err != nil {
		return "", nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", name, err)
	}
	return name, data, nil
}

// objectReport is what inspect finds in an object.
type objectReport struct {
	Kind   string `json:"kind"` // "log"
	Object string `json:"object"`
	Size   int64  `json:"size"`
	// Version is the object's format version, from its header; 0 when
	// the header is not one of a version this release reads.
	Version    int         `json:"version"`
	OK         bool        `json:"ok"`
	Index      string      `json:"index"` // "ok", or what is wrong with it
	ChangeSets []setReport `json:"change_sets"`
	Problems   []problem   `json:"problems,omitempty"`
}

// setReport describes one change set (one frame).
type setReport struct {
	Offset      int64   `json:"offset"`
	Length      int64   `json:"length"`            // stored bytes of the frame
	Version     int     `json:"version,omitempty"` // the frame's format version, once it checked out
	LogID       string  `json:"log_id,omitempty"`
	SQN         *uint64 `json:"sqn,omitempty"`
	Codec       string  `json:"codec,omitempty"`
	KeyGroups   string  `json:"key_groups,omitempty"`
	Groups      []group `json:"groups,omitempty"`
	Changes     int     `json:"changes"`
	LogicalSize int64   `json:"logical_size"` // uncompressed payload bytes
	Checksum    string  `json:"checksum"`     // "ok", "mismatch" or "not checked"
	OK          bool    `json:"ok"`
	Error       string  `json:"error,omitempty"`
}

type group struct {
	KeyGroup int32 `json:"key_group"` // -1: metadata
	Changes  int   `json:"changes"`
	Size     int64 `json:"size"`
}

// problem is one piece of damage: where, of what kind, and the decoder's
// message (which names the object and the offset too).
type problem struct {
	Offset int64  `json:"offset"`
	Kind   string `json:"kind"` // "corrupt", "checksum", "version", "missing", "mismatch"
	Error  string `json:"error"`
}

func problemOf(err error) problem {
	p := problem{Offset: -1, Kind: "corrupt", Error: err.Error()}
	var fe *format.Error
	if errors.As(err, &fe) {
		p.Offset = fe.Offset
	}
	switch {
	case errors.Is(err, format.ErrChecksum):
		p.Kind = "checksum"
	case errors.Is(err, format.ErrVersion):
		p.Kind = "version"
	case errors.Is(err, backends.ErrNotFound):
		p.Kind = "missing"
	}
	return p
}

// inspectObject decodes everything it can of an object's bytes.
func inspectObject(name string, data []byte) *objectReport {
	rep := &objectReport{Kind: "log", Object: name, Size: int64(len(data)), Index: "ok"}
	if len(data) >= format.HeaderSize && string(data[:4]) == format.Magic && (data[4] == format.Version1 || data[4] == format.Version2) {
		rep.Version = int(data[4])
	}
	index, err := format.ReadIndex(name, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		rep.Index = err.Error()
		rep.Problems = append(rep.Problems, problemOf(err))
		index = scanFrames(name, data, rep)
	}
	for i := range index {
		e := &index[i]
		s := checkFrame(name, e.Offset, data[e.Offset:e.Offset+e.Length], e)
		if !s.OK {
			rep.Problems = append(rep.Problems, s.problem)
		}
		rep.ChangeSets = append(rep.ChangeSets, s.setReport)
	}
	rep.OK = len(rep.Problems) == 0
	return rep
}

// scanFrames finds the frames of an object whose index is damaged by
// following the frames' length fields from the header on. It stops at the
// first length that cannot be a frame's: the index (whose first field, the
// first frame's offset, is 8) or damage; it records where it stopped.
func scanFrames(name string, data []byte, rep *objectReport) []format.IndexEntry {
	var out []format.IndexEntry
	off := int64(format.HeaderSize)
	for off+format.MinFrameSize <= int64(len(data)) {
		n := int64(binary.LittleEndian.Uint32(data[off:]))
		if n < format.MinFrameSize || n > int64(len(data))-off {
			break
		}
		out = append(out, format.IndexEntry{Offset: off, Length: n})
		off += n
	}
	if off < int64(len(data)) {
		rep.Problems = append(rep.Problems, problem{Offset: off, Kind: "corrupt",
			Error: fmt.Sprintf("object %q: without a valid index, no change set found from offset %d on (%d bytes: the index, or damage)", name, off, int64(len(data))-off)})
	}
	return out
}

type frameCheck struct {
	setReport
	problem problem
}

// checkFrame decodes one frame; want, when known (from the index or a
// handle), is the log id and sequence number it should hold.
func checkFrame(name string, off int64, frame []byte, want *format.IndexEntry) frameCheck {
	c := frameCheck{setReport: setReport{Offset: off, Length: int64(len(frame)), Checksum: "not checked"}}
	h, err := format.ReadFrameHeader(name, off, frame)
	if err == nil {
		_, err = format.DecodeFrame(name, off, frame) // the payload: decompression, change lengths
	}
	if err != nil {
		c.Error, c.problem = err.Error(), problemOf(err)
		if errors.Is(err, format.ErrChecksum) {
			c.Checksum = "mismatch"
		}
		if want != nil && want.LogID != [16]byte{} { // what it should have held
			c.LogID = uuid.UUID(want.LogID).String()
			sqn := want.SequenceNumber
			c.SQN = &sqn
		}
		return c
	}
	c.Checksum, c.OK = "ok", true
	c.Version = h.Version
	c.LogID = uuid.UUID(h.LogID).String()
	sqn := h.SequenceNumber
	c.SQN = &sqn
	c.Codec = h.Codec.String()
	c.LogicalSize = h.LogicalSize
	kgs := make([]int32, len(h.Groups))
	for i, g := range h.Groups {
		c.Groups = append(c.Groups, group{KeyGroup: g.KeyGroup, Changes: g.Count, Size: g.Size})
		c.Changes += g.Count
		kgs[i] = g.KeyGroup
	}
	c.KeyGroups = keyGroupRanges(kgs)
	if want != nil && want.LogID != [16]byte{} && (want.LogID != h.LogID || want.SequenceNumber != h.SequenceNumber) {
		c.OK = false
		c.Error = fmt.Sprintf("object %q at offset %d: expected the change set of log %s, sequence number %d, found log %s, sequence number %d",
			name, off, uuid.UUID(want.LogID), want.SequenceNumber, uuid.UUID(h.LogID), h.SequenceNumber)
		c.problem = problem{Offset: off, Kind: "mismatch", Error: c.Error}
	}
	return c
}

// keyGroupRanges writes ascending key groups as ranges: "meta, 0-7, 9".
func keyGroupRanges(kgs []int32) string {
	var parts []string
	for i := 0; i < len(kgs); {
		if kgs[i] == format.MetaKeyGroup {
			parts = append(parts, "meta")
			i++
			continue
		}
		j := i
		for j+1 < len(kgs) && kgs[j+1] == kgs[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(int(kgs[i])))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", kgs[i], kgs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

func (r *objectReport) print(w io.Writer) {
	status := "OK"
	if !r.OK {
		status = "DAMAGED"
	}
	version := "format version ?"
	if r.Version != 0 {
		version = fmt.Sprintf("format version %d", r.Version)
	}
	fmt.Fprintf(w, "log object %s: %s, %s, %d change %s, %s\n", r.Object, formatBytes(r.Size), version, len(r.ChangeSets), plural(len(r.ChangeSets), "set"), status)
	if r.Index != "ok" {
		fmt.Fprintf(w, "index: %s\n", r.Index)
	}
	printSets(w, r.ChangeSets, nil)
	printProblems(w, r.Problems)
}

// printSets writes a table of change sets; objects, when not nil, gives
// each row's object name.
func printSets(w io.Writer, sets []setReport, objects []string) {
	if len(sets) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if objects != nil {
		fmt.Fprint(tw, "OBJECT\t")
	}
	fmt.Fprintln(tw, "OFFSET\tSTORED\tLOG ID\tSQN\tCODEC\tKEY GROUPS\tCHANGES\tLOGICAL\tCHECKSUM\tSTATUS")
	for i, s := range sets {
		if objects != nil {
			fmt.Fprintf(tw, "%s\t", objects[i])
		}
		sqn, status := "?", "ok"
		if s.SQN != nil {
			sqn = strconv.FormatUint(*s.SQN, 10)
		}
		if !s.OK {
			status = "DAMAGED"
		}
		logID := s.LogID
		if logID == "" {
			logID = "?"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.Offset, formatBytes(s.Length), logID, sqn,
			dash(s.Codec), dash(s.KeyGroups), s.Changes, formatBytes(s.LogicalSize), s.Checksum, status)
	}
	tw.Flush()
}

func printProblems(w io.Writer, ps []problem) {
	for _, p := range ps {
		fmt.Fprintf(w, "problem (%s): %s\n", p.Kind, p.Error)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// handlesReport is what inspect --handle finds.
type handlesReport struct {
	File     string `json:"file"`
	BasePath string `json:"base_path,omitempty"` // set when the entries were checked
	OK       bool   `json:"ok"`
	// Checkpoints are the state stores' checkpoint handles in the file;
	// their log handles are in Handles.
	Checkpoints []checkpointHandleReport `json:"checkpoints,omitempty"`
	Handles     []handleReport           `json:"handles"`
	Problems    []problem                `json:"problems,omitempty"`
}

type handleReport struct {
	Storage         string        `json:"storage"`
	LogID           string        `json:"log_id"`
	KeyGroups       string        `json:"key_groups"`
	LogicalSize     int64         `json:"logical_size"`
	StoredSize      int64         `json:"stored_size"`
	IncrementalSize int64         `json:"incremental_size"`
	Objects         int           `json:"objects"`
	Entries         []entryReport `json:"entries"`
}

type entryReport struct {
	Object      string     `json:"object"`
	Offset      int64      `json:"offset"`
	Length      int64      `json:"length"`
	SQN         uint64     `json:"sqn"`
	LogicalSize int64      `json:"logical_size"`
	Check       *setReport `json:"check,omitempty"`
}

// inspectHandles reads a handle file and, when base is set, checks every
// entry and snapshot object against the objects under base.
func inspectHandles(ctx context.Context, file, storage, base string) (*handlesReport, error) {
	hs, cps, err := readKeepFile(file)
	if err != nil {
		return nil, err
	}
	return handlesReportOf(ctx, file, hs, cps, storage, base)
}

// handlesReportOf reports the handles hs and the checkpoint handles cps
// of a file and, when base is set, checks them against the objects under
// base.
func handlesReportOf(ctx context.Context, file string, hs []dstl.Handle, cps []statestore.CheckpointHandle, storage, base string) (*handlesReport, error) {
	rep := &handlesReport{File: file, BasePath: backends.RedactURL(base), OK: true}
	var b backends.Backend
	if base != "" {
		var err error
		if b, _, err = openExisting(ctx, storage, base); err != nil {
			return nil, err
		}
		defer b.Close()
	}
	for _, cp := range cps {
		c := checkpointHandleOf(cp)
		for i := range c.Snapshots {
			if b == nil {
				break // nothing to check against
			}
			check, err := checkSnapshot(ctx, b, c.Snapshots[i])
			if err != nil {
				return nil, err
			}
			if !check.OK {
				rep.OK = false
				rep.Problems = append(rep.Problems, check.Problems...)
			}
			c.Snapshots[i].Check = check
		}
		rep.Checkpoints = append(rep.Checkpoints, c)
		for _, l := range cp.Logs {
			hs = append(hs, l.Remote)
		}
	}
	for _, h := range hs {
		hr := handleReport{Storage: h.StorageID, LogID: h.LogID.String(), KeyGroups: h.KeyGroups.String(),
			LogicalSize: h.LogicalSize, StoredSize: h.StoredSize, IncrementalSize: h.IncrementalSize}
		objects := map[string]bool{}
		for _, e := range h.Entries {
			objects[e.Object] = true
			er := entryReport{Object: e.Object, Offset: e.Offset, Length: e.Length, SQN: uint64(e.SequenceNumber), LogicalSize: e.LogicalSize}
			if b != nil {
				c, err := checkEntry(ctx, b, h, e)
				if err != nil {
					return nil, err
				}
				if !c.OK {
					rep.OK = false
					rep.Problems = append(rep.Problems, c.problem)
				}
				er.Check = &c.setReport
			}
			hr.Entries = append(hr.Entries, er)
		}
		hr.Objects = len(objects)
		rep.Handles = append(rep.Handles, hr)
	}
	return rep, nil
}

// checkEntry fetches an entry's bytes and decodes them. A missing object
// or a range past its end is a problem found, not an error; other errors
// of the backend are returned.
func checkEntry(ctx context.Context, b backends.Backend, h dstl.Handle, e dstl.HandleEntry) (frameCheck, error) {
	want := &format.IndexEntry{Offset: e.Offset, Length: e.Length, LogID: h.LogID, SequenceNumber: uint64(e.SequenceNumber)}
	missing := func(err error) frameCheck {
		c := frameCheck{setReport: setReport{Offset: e.Offset, Length: e.Length, Checksum: "not checked",
			LogID: h.LogID.String(), SQN: &want.SequenceNumber, Error: err.Error()}}
		c.problem = problem{Offset: e.Offset, Kind: "missing", Error: err.Error()}
		return c
	}
	rc, err := b.Get(ctx, e.Object, e.Offset, e.Length)
	if errors.Is(err, backends.ErrNotFound) || errors.Is(err, backends.ErrInvalidRange) {
		return missing(err), nil
	}
	if err != nil {
		return frameCheck{}, err
	}
	defer rc.Close()
	frame, err := io.ReadAll(rc)
	if err != nil {
		return frameCheck{}, fmt.Errorf("read %s: %w", e.Object, err)
	}
	if int64(len(frame)) < e.Length {
		return missing(fmt.Errorf("object %q ends %d bytes into the %d-byte change set at offset %d", e.Object, len(frame), e.Length, e.Offset)), nil
	}
	return checkFrame(e.Object, e.Offset, frame, want), nil
}

func (r *handlesReport) print(w io.Writer) {
	for _, c := range r.Checkpoints {
		printCheckpoint(w, r.File, c, r.BasePath != "")
	}
	for i, h := range r.Handles {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "handle %d of %s: storage %s, log %s, key groups %s\n", i+1, r.File, dash(h.Storage), h.LogID, h.KeyGroups)
		fmt.Fprintf(w, "  %d change %s in %d %s; logical %s, stored %s (incremental %s)\n", len(h.Entries), plural(len(h.Entries), "set"),
			h.Objects, plural(h.Objects, "object"), formatBytes(h.LogicalSize), formatBytes(h.StoredSize), formatBytes(h.IncrementalSize))
		if r.BasePath == "" {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "  OBJECT\tOFFSET\tLENGTH\tSQN\tLOGICAL")
			for _, e := range h.Entries {
				fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%s\n", e.Object, e.Offset, formatBytes(e.Length), e.SQN, formatBytes(e.LogicalSize))
			}
			tw.Flush()
			continue
		}
		sets := make([]setReport, len(h.Entries))
		objects := make([]string, len(h.Entries))
		for j, e := range h.Entries {
			sets[j], objects[j] = *e.Check, e.Object
		}
		printSets(w, sets, objects)
	}
	printProblems(w, r.Problems)
	if r.BasePath != "" {
		checked := "every change set"
		if len(r.Checkpoints) > 0 {
			checked = "every snapshot object and change set"
		}
		if r.OK {
			fmt.Fprintf(w, "%s checked under %s: OK\n", checked, r.BasePath)
		} else {
			fmt.Fprintf(w, "DAMAGED: %d %s under %s\n", len(r.Problems), plural(len(r.Problems), "problem"), r.BasePath)
		}
	}
}
