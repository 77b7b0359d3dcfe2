// Package objname makes and parses the names of the objects that dstl
// writes, and reads the time in them. Everything that names or recognises
// an object goes through it, so the scheme lives in one place.
//
// Its users are the engine's uploader, the clean-up of local copies, the
// state stores' checkpointer, and the collection of old objects in
// package collect, which the gc command runs.
//
// Under a job's prefix (see [JobPrefix]) a storage writes these kinds of
// objects:
//
//	PREFIX/UUIDv7.cN.dstl                      a log object (the engine's uploads)
//	PREFIX/statestore/OPERATOR/UUIDv7.cN.snap  a snapshot object of one operator
//	PREFIX/statestore/OPERATOR/UUIDv7.cN.sst   a file of a disk-backed snapshot
//	PREFIX/_records/UUIDv7.cN.rec              a process's checkpoint record (package kafkastate)
//	PREFIX/.gc-clock-UUIDv7                    gc's clock probe, deleted at once
//	PREFIX/.create-only-UUIDv7                 the catalog's check of a store
//
// The UUIDs are in their canonical 36-character form. A UUIDv7 starts with
// the Unix time in milliseconds at which the name was made, so log and
// snapshot names sort by creation time and [Name.Time] tells how old an
// object is even where the storage reports no modification time.
//
// N, the checkpoint part ".cN", is the checkpoint the object was made for
// ([Name.Checkpoint]): a positive decimal without leading zeros (a record's
// is the checkpoint it holds, and always present). A
// checkpoint that references the object has that number or a higher one,
// so the deletion rule (package collect) keeps an object made for a
// checkpoint that may still complete, however old the object is. Names
// made before the checkpoint part existed, and names made with no
// checkpoint known, have none; both forms parse.
//
// The package depends on no SDK and not on the engine.
package objname

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

const (
	// LogSuffix ends the name of every log object.
	LogSuffix = ".dstl"
	// SnapshotSuffix ends the name of every snapshot object.
	SnapshotSuffix = ".snap"
	// SnapshotFileSuffix ends the name of every file of a disk-backed
	// snapshot (an SST file that snapshot objects name).
	SnapshotFileSuffix = ".sst"
	// SnapshotDir is the directory, under a job's prefix, that holds one
	// directory of snapshot objects per operator.
	SnapshotDir = "statestore/"
	// RecordDir is the directory, under a job's prefix, of the checkpoint
	// records: one object per process and checkpoint that holds the state
	// handles of the process's instances (package kafkastate writes them,
	// and names them in the Kafka consumer group's committed offsets).
	RecordDir = "_records/"
	// RecordSuffix ends the name of every checkpoint record.
	RecordSuffix = ".rec"
	// ClockProbePrefix starts the base name of gc's clock probe. It starts
	// with a dot, so it is no log or snapshot name, and every backend's
	// name rules allow it.
	ClockProbePrefix = ".gc-clock-"
	// CreateOnlyProbePrefix starts the base name of the object of the
	// check of create-only puts (backends.VerifyCreateOnly) that the
	// catalog runs before it trusts a store. Like gc's clock probe, it
	// is no log or snapshot name.
	CreateOnlyProbePrefix = ".create-only-"
)

// uuidLen is the length of a UUID's canonical form.
const uuidLen = 36

// Kind says what an object is by its name.
type Kind uint8

// The kinds of object names.
const (
	Other           Kind = iota // not a name of this scheme
	Log                         // PREFIX/UUIDv7.dstl
	Snapshot                    // PREFIX/statestore/OPERATOR/UUIDv7.snap
	ClockProbe                  // PREFIX/.gc-clock-UUIDv7 (or a random UUID, as written before)
	SnapshotFile                // PREFIX/statestore/OPERATOR/UUIDv7.sst
	CreateOnlyProbe             // PREFIX/.create-only-UUIDv7
	Record                      // PREFIX/_records/UUIDv7.cN.rec
)

// String returns "log", "snapshot", "clock probe", "snapshot file",
// "create-only probe", "record" or "other".
func (k Kind) String() string {
	switch k {
	case Log:
		return "log"
	case Snapshot:
		return "snapshot"
	case ClockProbe:
		return "clock probe"
	case SnapshotFile:
		return "snapshot file"
	case CreateOnlyProbe:
		return "create-only probe"
	case Record:
		return "record"
	default:
		return "other"
	}
}

// Name is an object name of the scheme, relative to a job's prefix.
type Name struct {
	Kind     Kind
	ID       uuid.UUID // version 7 for Log, Snapshot, SnapshotFile and Record; version 7 or 4 for ClockProbe
	Operator string    // of a Snapshot or SnapshotFile: one name segment, without "/"
	// Checkpoint is the checkpoint a Log, Snapshot or SnapshotFile was
	// made for, or the one a Record holds; 0 when the name records none
	// (never for a Record).
	Checkpoint int64
}

// Time returns the time in a log, snapshot, snapshot file, record or clock
// probe name's UUIDv7, in whole milliseconds, or the zero time for another kind
// (or a clock probe named by a random UUID, as before version 7 names).
func (n Name) Time() time.Time {
	if n.Kind == Other || n.ID.Version() != 7 {
		return time.Time{}
	}
	sec, nsec := n.ID.Time().UnixTime()
	return time.Unix(sec, nsec)
}

// JobPrefix returns the prefix of the names of a job's objects: jobID and
// a slash, or "" for an empty job id.
func JobPrefix(jobID string) string {
	if jobID == "" {
		return ""
	}
	return jobID + "/"
}

// SnapshotPrefix returns the prefix of the names of operator's snapshot
// objects under a job's prefix.
func SnapshotPrefix(prefix, operator string) string {
	return prefix + SnapshotDir + operator + "/"
}

// NewLog returns a new log object's name under prefix, made for
// checkpoint (0: none known).
func NewLog(prefix string, checkpoint int64) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("objname: new log object name: %w", err)
	}
	return Format(prefix, Name{Kind: Log, ID: id, Checkpoint: checkpoint})
}

// NewSnapshot returns a new name of a snapshot object of operator under a
// job's prefix, made for checkpoint (0: none known). operator must be a
// non-empty segment without "/".
func NewSnapshot(prefix, operator string, checkpoint int64) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("objname: new snapshot object name: %w", err)
	}
	return Format(prefix, Name{Kind: Snapshot, ID: id, Operator: operator, Checkpoint: checkpoint})
}

// NewSnapshotFile returns a new name of a file of a disk-backed snapshot of
// operator under a job's prefix, made for checkpoint (0: none known).
// operator must be a non-empty segment without "/".
func NewSnapshotFile(prefix, operator string, checkpoint int64) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("objname: new snapshot file name: %w", err)
	}
	return Format(prefix, Name{Kind: SnapshotFile, ID: id, Operator: operator, Checkpoint: checkpoint})
}

// RecordPrefix returns the prefix of the names of the checkpoint records
// under a job's prefix: one listing of it finds them all.
func RecordPrefix(prefix string) string { return prefix + RecordDir }

// NewRecord returns a new name of a checkpoint record under a job's prefix,
// of checkpoint (at least 1).
func NewRecord(prefix string, checkpoint int64) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("objname: new record name: %w", err)
	}
	return Format(prefix, Name{Kind: Record, ID: id, Checkpoint: checkpoint})
}

// NewClockProbe returns a new name of gc's clock probe under prefix: a
// UUIDv7, whose random bits keep probes of concurrent runs apart and
// whose time lets a later collection tell a probe left behind (by a
// process killed between its put and its delete) from a running one's.
func NewClockProbe(prefix string) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("objname: new clock probe name: %w", err)
	}
	return Format(prefix, Name{Kind: ClockProbe, ID: id})
}

// NewCreateOnlyProbe returns a new name of the create-only check's object
// under prefix: a UUIDv7, whose random bits keep the probes of concurrent
// processes apart and whose time lets a collection tell a probe left
// behind (by a process killed during its check) from a running one's.
func NewCreateOnlyProbe(prefix string) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("objname: new create-only probe name: %w", err)
	}
	return Format(prefix, Name{Kind: CreateOnlyProbe, ID: id})
}

// Format returns n's object name under prefix; [Parse] reads it back. It
// fails for the kind Other, for a log, snapshot or record ID that is no
// UUIDv7, for a snapshot's operator that is empty or holds a "/", for a
// negative checkpoint or one given to another kind, and for a record of
// no checkpoint.
func Format(prefix string, n Name) (string, error) {
	if n.Checkpoint < 0 || n.Checkpoint != 0 && n.Kind != Log && n.Kind != Snapshot && n.Kind != SnapshotFile && n.Kind != Record {
		return "", fmt.Errorf("objname: checkpoint %d in a %s name: want 0, or a positive one in a log, snapshot or record name", n.Checkpoint, n.Kind)
	}
	switch n.Kind {
	case Record:
		if v := n.ID.Version(); v != 7 {
			return "", fmt.Errorf("objname: a %s name needs a UUIDv7, %s is version %d", n.Kind, n.ID, v)
		}
		if n.Checkpoint < 1 {
			return "", fmt.Errorf("objname: a record name needs a checkpoint, not %d", n.Checkpoint)
		}
		return RecordPrefix(prefix) + n.ID.String() + checkpointMark + strconv.FormatInt(n.Checkpoint, 10) + RecordSuffix, nil
	case Log, Snapshot, SnapshotFile:
		if v := n.ID.Version(); v != 7 {
			return "", fmt.Errorf("objname: a %s name needs a UUIDv7, %s is version %d", n.Kind, n.ID, v)
		}
		base := n.ID.String()
		if n.Checkpoint > 0 {
			base += checkpointMark + strconv.FormatInt(n.Checkpoint, 10)
		}
		if n.Kind == Log {
			return prefix + base + LogSuffix, nil
		}
		if n.Operator == "" || strings.Contains(n.Operator, "/") {
			return "", fmt.Errorf("objname: snapshot operator %q: must be a non-empty name segment without \"/\"", n.Operator)
		}
		suffix := SnapshotSuffix
		if n.Kind == SnapshotFile {
			suffix = SnapshotFileSuffix
		}
		return SnapshotPrefix(prefix, n.Operator) + base + suffix, nil
	case ClockProbe:
		return prefix + ClockProbePrefix + n.ID.String(), nil
	case CreateOnlyProbe:
		if v := n.ID.Version(); v != 7 {
			return "", fmt.Errorf("objname: a %s name needs a UUIDv7, %s is version %d", n.Kind, n.ID, v)
		}
		return prefix + CreateOnlyProbePrefix + n.ID.String(), nil
	default:
		return "", fmt.Errorf("objname: no name of the kind %s", n.Kind)
	}
}

// Parse returns what name, an object name under prefix, is. Its Kind is
// Other for a name outside prefix or of another form: a UUID that is not
// in its 36-character form, a log, snapshot or record UUID that is not of
// version 7, a log name in a directory below prefix, a snapshot name with
// no operator or in a directory below the operator's, a record name with
// no checkpoint. Hexadecimal digits may be of either case.
func Parse(prefix, name string) Name {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return Name{}
	}
	if base, ok := strings.CutSuffix(rest, LogSuffix); ok {
		if id, cp, ok := parseMadeFor(base); ok {
			return Name{Kind: Log, ID: id, Checkpoint: cp}
		}
		return Name{}
	}
	if base, ok := strings.CutPrefix(rest, ClockProbePrefix); ok {
		if id, ok := parseID(base); ok {
			return Name{Kind: ClockProbe, ID: id}
		}
		return Name{}
	}
	if base, ok := strings.CutPrefix(rest, CreateOnlyProbePrefix); ok {
		if id, ok := parseID(base); ok && id.Version() == 7 {
			return Name{Kind: CreateOnlyProbe, ID: id}
		}
		return Name{}
	}
	if base, ok := strings.CutPrefix(rest, RecordDir); ok {
		if base, ok := strings.CutSuffix(base, RecordSuffix); ok {
			if id, cp, ok := parseMadeFor(base); ok && cp > 0 {
				return Name{Kind: Record, ID: id, Checkpoint: cp}
			}
		}
		return Name{}
	}
	rest, ok = strings.CutPrefix(rest, SnapshotDir)
	if !ok {
		return Name{}
	}
	op, base, ok := strings.Cut(rest, "/")
	if !ok || op == "" {
		return Name{}
	}
	for kind, suffix := range map[Kind]string{Snapshot: SnapshotSuffix, SnapshotFile: SnapshotFileSuffix} {
		if base, ok := strings.CutSuffix(base, suffix); ok {
			if id, cp, ok := parseMadeFor(base); ok {
				return Name{Kind: kind, ID: id, Operator: op, Checkpoint: cp}
			}
		}
	}
	return Name{}
}

// checkpointMark starts the checkpoint part of a name: UUIDv7.cN.
const checkpointMark = ".c"

// parseMadeFor parses the base of a log or snapshot name less its
// suffix: a UUIDv7, then optionally ".c" and a positive decimal without
// leading zeros.
func parseMadeFor(base string) (uuid.UUID, int64, bool) {
	var cp int64
	if len(base) > uuidLen {
		digits, ok := strings.CutPrefix(base[uuidLen:], checkpointMark)
		if !ok || digits == "" || digits[0] == '0' || len(digits) > 19 {
			return uuid.UUID{}, 0, false
		}
		for _, c := range []byte(digits) {
			if c < '0' || c > '9' {
				return uuid.UUID{}, 0, false
			}
		}
		n, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			return uuid.UUID{}, 0, false
		}
		cp, base = n, base[:uuidLen]
	}
	id, ok := parseID(base)
	if !ok || id.Version() != 7 {
		return uuid.UUID{}, 0, false
	}
	return id, cp, true
}

// parseID parses a UUID in its canonical 36-character form only (uuid.Parse
// also takes braces, "urn:uuid:" and the form without dashes).
func parseID(s string) (uuid.UUID, bool) {
	if len(s) != uuidLen {
		return uuid.UUID{}, false
	}
	id, err := uuid.Parse(s)
	return id, err == nil
}
