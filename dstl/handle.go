package dstl

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/dstlgo/dstl/dstl/format"
)

// Handle points to the stored bytes of a range of one writer's change sets:
// what a checkpoint keeps to read them back after a crash. A handle has a
// stable, versioned encoding: [Handle.MarshalBinary] and
// [Handle.MarshalJSON] round-trip through their Unmarshal counterparts.
type Handle struct {
	// StorageID is the identifier of the backend that holds the objects
	// ("local", "s3", ...).
	StorageID string
	// LogID is the writer's log.
	LogID LogID
	// KeyGroups is the writer's key-group range.
	KeyGroups KeyGroupRange
	// Entries are the change sets, in sequence-number order.
	Entries []HandleEntry
	// LogicalSize is the size of the changes before encoding and compression.
	LogicalSize int64
	// StoredSize is the number of stored bytes the entries cover.
	StoredSize int64
	// IncrementalSize is the part of StoredSize that no earlier handle of
	// the same writer covered.
	IncrementalSize int64
}

// HandleEntry locates one change set: Length bytes of Object from Offset on.
// Offset and Length count stored (compressed) bytes, so a reader fetches
// exactly this range.
type HandleEntry struct {
	Object         string
	Offset         int64
	Length         int64
	SequenceNumber SequenceNumber
	LogicalSize    int64
}

// Empty reports whether the handle covers no change set.
func (h Handle) Empty() bool { return len(h.Entries) == 0 }

// ErrInvalidHandle is wrapped by every error about a handle that is not
// valid ([Handle.Validate]) or whose encoding does not decode: bad magic,
// unknown version, truncation, trailing bytes, a checksum mismatch, ...
var ErrInvalidHandle = errors.New("dstl: invalid handle")

// HandleVersion is the version of the handle encodings that
// [Handle.MarshalBinary] and [Handle.MarshalJSON] write. The decoders
// reject other versions.
const HandleVersion = 1

// handleMagic starts the binary encoding of a handle.
const handleMagic = "DSTH"

// handleTrailerLen is the size of the CRC32C trailer.
const handleTrailerLen = 4

var handleCRCTable = crc32.MakeTable(crc32.Castagnoli)

var (
	_ encoding.BinaryMarshaler   = Handle{}
	_ encoding.BinaryAppender    = Handle{}
	_ encoding.BinaryUnmarshaler = (*Handle)(nil)
	_ json.Marshaler             = Handle{}
	_ json.Unmarshaler           = (*Handle)(nil)
)

// Validate checks that the handle is consistent: a valid key-group range,
// UTF-8 names, entries with a positive length within an int64 and
// strictly increasing sequence numbers, and sizes that are the sums of the
// entries'. The error wraps [ErrInvalidHandle].
func (h Handle) Validate() error {
	if err := h.KeyGroups.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidHandle, err)
	}
	if !utf8.ValidString(h.StorageID) {
		return fmt.Errorf("%w: storage id %q is not valid UTF-8", ErrInvalidHandle, h.StorageID)
	}
	var stored, logical int64
	for i, e := range h.Entries {
		switch {
		case e.Object == "":
			return fmt.Errorf("%w: entry %d: empty object name", ErrInvalidHandle, i)
		case !utf8.ValidString(e.Object):
			return fmt.Errorf("%w: entry %d: object name %q is not valid UTF-8", ErrInvalidHandle, i, e.Object)
		case e.Offset < 0:
			return fmt.Errorf("%w: entry %d: negative offset %d", ErrInvalidHandle, i, e.Offset)
		case e.Length <= 0:
			return fmt.Errorf("%w: entry %d: length %d, want > 0", ErrInvalidHandle, i, e.Length)
		case e.Length > format.MaxFrameSize:
			return fmt.Errorf("%w: entry %d: length %d exceeds the largest change set frame (%d bytes)", ErrInvalidHandle, i, e.Length, int64(format.MaxFrameSize))
		case e.Offset > math.MaxInt64-e.Length:
			return fmt.Errorf("%w: entry %d: offset %d + length %d overflows", ErrInvalidHandle, i, e.Offset, e.Length)
		case e.LogicalSize < 0:
			return fmt.Errorf("%w: entry %d: negative logical size %d", ErrInvalidHandle, i, e.LogicalSize)
		case i > 0 && e.SequenceNumber <= h.Entries[i-1].SequenceNumber:
			return fmt.Errorf("%w: entry %d: sequence number %d does not follow %d",
				ErrInvalidHandle, i, e.SequenceNumber, h.Entries[i-1].SequenceNumber)
		case stored > math.MaxInt64-e.Length:
			return fmt.Errorf("%w: entry %d: total stored size overflows", ErrInvalidHandle, i)
		case logical > math.MaxInt64-e.LogicalSize:
			return fmt.Errorf("%w: entry %d: total logical size overflows", ErrInvalidHandle, i)
		}
		stored += e.Length
		logical += e.LogicalSize
	}
	switch {
	case h.StoredSize != stored:
		return fmt.Errorf("%w: stored size %d, but the entries' lengths add up to %d", ErrInvalidHandle, h.StoredSize, stored)
	case h.LogicalSize != logical:
		return fmt.Errorf("%w: logical size %d, but the entries' logical sizes add up to %d", ErrInvalidHandle, h.LogicalSize, logical)
	case h.IncrementalSize < 0 || h.IncrementalSize > h.StoredSize:
		return fmt.Errorf("%w: incremental size %d, want 0 to stored size %d", ErrInvalidHandle, h.IncrementalSize, h.StoredSize)
	}
	return nil
}

// MarshalBinary encodes a valid handle (see [Handle.Validate]) in the
// binary encoding of [HandleVersion], laid out in docs/FORMAT.md
// ("Handles"): canonical, so that equal handles encode to equal bytes, and
// checksummed (CRC32C).
func (h Handle) MarshalBinary() ([]byte, error) {
	return h.AppendBinary(nil)
}

// AppendBinary appends the encoding of [Handle.MarshalBinary] to b.
func (h Handle) AppendBinary(b []byte) ([]byte, error) {
	if err := h.Validate(); err != nil {
		return b, err
	}
	start := len(b)
	b = append(b, handleMagic...)
	b = append(b, HandleVersion)
	b = appendHandleString(b, h.StorageID)
	b = append(b, h.LogID[:]...)
	b = binary.AppendUvarint(b, uint64(h.KeyGroups.Start))
	b = binary.AppendUvarint(b, uint64(h.KeyGroups.End))
	b = binary.AppendUvarint(b, uint64(h.LogicalSize))
	b = binary.AppendUvarint(b, uint64(h.StoredSize))
	b = binary.AppendUvarint(b, uint64(h.IncrementalSize))

	index := make(map[string]uint64)
	var objects []string
	for _, e := range h.Entries {
		if _, ok := index[e.Object]; !ok {
			index[e.Object] = uint64(len(objects))
			objects = append(objects, e.Object)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(objects)))
	for _, o := range objects {
		b = appendHandleString(b, o)
	}
	b = binary.AppendUvarint(b, uint64(len(h.Entries)))
	for i, e := range h.Entries {
		sqn := uint64(e.SequenceNumber)
		if i > 0 {
			sqn -= uint64(h.Entries[i-1].SequenceNumber) + 1
		}
		b = binary.AppendUvarint(b, index[e.Object])
		b = binary.AppendUvarint(b, uint64(e.Offset))
		b = binary.AppendUvarint(b, uint64(e.Length))
		b = binary.AppendUvarint(b, sqn)
		b = binary.AppendUvarint(b, uint64(e.LogicalSize))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], handleCRCTable)), nil
}

func appendHandleString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// UnmarshalBinary decodes the encoding of [Handle.MarshalBinary] and
// validates the handle. Damaged, truncated, non-canonical or unknown
// input is an error wrapping [ErrInvalidHandle]; h is then unchanged.
func (h *Handle) UnmarshalBinary(data []byte) error {
	var d Handle
	if err := decodeHandle(&d, data); err != nil {
		return err
	}
	if err := d.Validate(); err != nil {
		return err
	}
	*h = d
	return nil
}

func decodeHandle(h *Handle, data []byte) error {
	if err := checkHandleHeader(data); err != nil {
		return err
	}
	headerLen := len(handleMagic) + 1
	if len(data) < headerLen+handleTrailerLen {
		return fmt.Errorf("%w: truncated: %d bytes", ErrInvalidHandle, len(data))
	}
	body := len(data) - handleTrailerLen
	r := handleReader{b: data[:body], off: headerLen}

	h.StorageID = r.string("storage id")
	copy(h.LogID[:], r.bytes(len(h.LogID), "log id"))
	h.KeyGroups.Start = r.keyGroup("key-group start")
	h.KeyGroups.End = r.keyGroup("key-group end")
	h.LogicalSize = r.int64("logical size")
	h.StoredSize = r.int64("stored size")
	h.IncrementalSize = r.int64("incremental size")
	objects := r.objectNames()
	h.Entries = r.entries(objects)
	if r.err != nil {
		return r.err
	}
	if r.off != body {
		return fmt.Errorf("%w: %d trailing bytes at offset %d", ErrInvalidHandle, body-r.off, r.off)
	}
	stored := binary.LittleEndian.Uint32(data[body:])
	if sum := crc32.Checksum(data[:body], handleCRCTable); sum != stored {
		return fmt.Errorf("%w: checksum mismatch: stored %08x, computed %08x", ErrInvalidHandle, stored, sum)
	}
	return nil
}

// checkHandleHeader checks a binary handle's magic and version.
func checkHandleHeader(data []byte) error {
	if len(data) < len(handleMagic) {
		if strings.HasPrefix(handleMagic, string(data)) {
			return fmt.Errorf("%w: truncated: %d bytes", ErrInvalidHandle, len(data))
		}
		return fmt.Errorf("%w: bad magic %q, want %q", ErrInvalidHandle, data, handleMagic)
	}
	if string(data[:len(handleMagic)]) != handleMagic {
		return fmt.Errorf("%w: bad magic %q, want %q", ErrInvalidHandle, data[:len(handleMagic)], handleMagic)
	}
	if len(data) == len(handleMagic) {
		return fmt.Errorf("%w: truncated: %d bytes", ErrInvalidHandle, len(data))
	}
	if v := data[len(handleMagic)]; v != HandleVersion {
		return fmt.Errorf("%w: unsupported version %d (this build reads version %d)", ErrInvalidHandle, v, HandleVersion)
	}
	return nil
}

// objectNames reads a binary handle's object table: non-empty names, each
// once.
func (r *handleReader) objectNames() []string {
	// An object takes at least 2 bytes (length and a non-empty name).
	objects := make([]string, r.count("object", 2))
	seen := make(map[string]int, len(objects))
	for i := range objects {
		at := r.off
		objects[i] = r.string("object name")
		if r.err != nil {
			return objects
		}
		if objects[i] == "" {
			r.failAt(at, "empty object name %d", i)
			return objects
		}
		// The encoder writes each name once: a repeated one would not
		// re-encode to the same bytes.
		if j, ok := seen[objects[i]]; ok {
			r.failAt(at, "object name %d %q repeats object name %d", i, objects[i], j)
			return objects
		}
		seen[objects[i]] = i
	}
	return objects
}

// entries reads a binary handle's entries over its object table, and fails
// unless every object is used.
func (r *handleReader) entries(objects []string) []HandleEntry {
	var entries []HandleEntry
	// An entry takes at least 5 bytes (five varints).
	if n := r.count("entry", 5); n > 0 {
		entries = make([]HandleEntry, n)
	}
	used := 0 // objects used so far: an entry uses an earlier one or the next
	for i := range entries {
		if r.err != nil {
			return entries
		}
		e := &entries[i]
		at := r.off
		obj := r.uvarint("object index")
		if r.err != nil {
			return entries
		}
		if obj > uint64(used) || obj >= uint64(len(objects)) {
			r.failAt(at, "entry %d: object index %d, want at most %d of %d objects (objects are numbered by first use)", i, obj, used, len(objects))
			return entries
		}
		if obj == uint64(used) {
			used++
		}
		e.Object = objects[obj]
		e.Offset = r.int64("offset")
		e.Length = r.int64("length")
		at = r.off
		sqn := r.uvarint("sequence number")
		if i > 0 && r.err == nil {
			prev := uint64(entries[i-1].SequenceNumber)
			if prev == math.MaxUint64 || sqn > math.MaxUint64-prev-1 {
				r.failAt(at, "entry %d: sequence number overflows", i)
				return entries
			}
			sqn += prev + 1
		}
		e.SequenceNumber = SequenceNumber(sqn)
		e.LogicalSize = r.int64("logical size")
	}
	if r.err == nil && used != len(objects) {
		r.fail("%d of %d objects are not used by any entry", len(objects)-used, len(objects))
	}
	return entries
}

// handleReader reads the body of a binary handle. After the first error,
// every read returns zero values and the error stays in err.
type handleReader struct {
	b   []byte
	off int
	err error
}

func (r *handleReader) failAt(off int, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: at offset %d: %s", ErrInvalidHandle, off, fmt.Sprintf(format, args...))
	}
}

func (r *handleReader) fail(format string, args ...any) { r.failAt(r.off, format, args...) }

func (r *handleReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	switch {
	case n == 0:
		r.fail("truncated %s", what)
		return 0
	case n < 0:
		r.fail("%s overflows 64 bits", what)
		return 0
	case n != uvarintLen(v):
		r.fail("%s is not minimally encoded", what)
		return 0
	}
	r.off += n
	return v
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func (r *handleReader) int64(what string) int64 {
	at := r.off
	v := r.uvarint(what)
	if v > math.MaxInt64 {
		r.failAt(at, "%s %d out of range", what, v)
		return 0
	}
	return int64(v)
}

func (r *handleReader) keyGroup(what string) int {
	at := r.off
	v := r.uvarint(what)
	if v > MaxKeyGroup {
		r.failAt(at, "%s %d out of range (max %d)", what, v, MaxKeyGroup)
		return 0
	}
	return int(v)
}

// count reads a count of items that take at least minSize bytes each, and
// rejects counts the remaining bytes cannot hold.
func (r *handleReader) count(what string, minSize int) int {
	at := r.off
	v := r.uvarint(what + " count")
	if r.err != nil {
		return 0
	}
	if rest := uint64(len(r.b) - r.off); v > rest/uint64(minSize) {
		r.failAt(at, "%s count %d exceeds what the remaining %d bytes can hold", what, v, rest)
		return 0
	}
	return int(v)
}

func (r *handleReader) bytes(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b)-r.off {
		r.fail("truncated %s: %d bytes, want %d", what, len(r.b)-r.off, n)
		return nil
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b
}

func (r *handleReader) string(what string) string {
	at := r.off
	n := r.uvarint(what + " length")
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)-r.off) {
		r.failAt(at, "%s length %d exceeds the remaining %d bytes", what, n, len(r.b)-r.off)
		return ""
	}
	return string(r.bytes(int(n), what))
}

// handleJSON is the JSON encoding of a handle. Pointers tell missing fields
// apart from zero values.
type handleJSON struct {
	Version         *int               `json:"version"`
	Storage         *string            `json:"storage"`
	LogID           *string            `json:"log_id"`
	KeyGroups       *keyGroupsJSON     `json:"key_groups"`
	Entries         *[]handleEntryJSON `json:"entries"`
	LogicalSize     *int64             `json:"logical_size"`
	StoredSize      *int64             `json:"stored_size"`
	IncrementalSize *int64             `json:"incremental_size"`
}

type keyGroupsJSON struct {
	Start *int `json:"start"`
	End   *int `json:"end"`
}

type handleEntryJSON struct {
	Object      *string `json:"object"`
	Offset      *int64  `json:"offset"`
	Length      *int64  `json:"length"`
	SQN         *uint64 `json:"sqn"`
	LogicalSize *int64  `json:"logical_size"`
}

// MarshalJSON encodes a valid handle (see [Handle.Validate]) as a JSON
// object of [HandleVersion], laid out in docs/FORMAT.md ("Handles").
func (h Handle) MarshalJSON() ([]byte, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	v := HandleVersion
	logID := h.LogID.String()
	j := handleJSON{
		Version:         &v,
		Storage:         &h.StorageID,
		LogID:           &logID,
		KeyGroups:       &keyGroupsJSON{Start: &h.KeyGroups.Start, End: &h.KeyGroups.End},
		LogicalSize:     &h.LogicalSize,
		StoredSize:      &h.StoredSize,
		IncrementalSize: &h.IncrementalSize,
	}
	entries := make([]handleEntryJSON, len(h.Entries))
	for i := range h.Entries {
		e := &h.Entries[i]
		entries[i] = handleEntryJSON{
			Object:      &e.Object,
			Offset:      &e.Offset,
			Length:      &e.Length,
			SQN:         (*uint64)(&e.SequenceNumber),
			LogicalSize: &e.LogicalSize,
		}
	}
	j.Entries = &entries
	return json.Marshal(j)
}

// UnmarshalJSON decodes the encoding of [Handle.MarshalJSON] and validates
// the handle: every field is required and unknown ones are refused. Errors
// wrap [ErrInvalidHandle]; h is then unchanged.
func (h *Handle) UnmarshalJSON(data []byte) error {
	if err := checkHandleJSONVersion(data); err != nil {
		return err
	}
	var j handleJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidHandle, err)
	}
	if err := j.checkRequired(); err != nil {
		return err
	}
	logID, err := parseHandleLogID(*j.LogID)
	if err != nil {
		return err
	}
	d := Handle{
		StorageID:       *j.Storage,
		LogID:           logID,
		KeyGroups:       KeyGroupRange{Start: *j.KeyGroups.Start, End: *j.KeyGroups.End},
		LogicalSize:     *j.LogicalSize,
		StoredSize:      *j.StoredSize,
		IncrementalSize: *j.IncrementalSize,
	}
	if d.Entries, err = handleEntriesFromJSON(*j.Entries); err != nil {
		return err
	}
	if err := d.Validate(); err != nil {
		return err
	}
	*h = d
	return nil
}

// checkHandleJSONVersion rejects a JSON handle without the version this
// build reads, before anything else is looked at.
func checkHandleJSONVersion(data []byte) error {
	var probe struct {
		Version json.RawMessage `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidHandle, err)
	}
	if probe.Version == nil {
		return fmt.Errorf("%w: missing field \"version\"", ErrInvalidHandle)
	}
	var version int
	if err := json.Unmarshal(probe.Version, &version); err != nil || version != HandleVersion {
		return fmt.Errorf("%w: unsupported version %s (this build reads version %d)", ErrInvalidHandle, probe.Version, HandleVersion)
	}
	return nil
}

// missingField is the error of a JSON handle without field.
func missingField(field string) error {
	return fmt.Errorf("%w: missing field %q", ErrInvalidHandle, field)
}

// checkRequired fails naming the first required field of the handle
// that is missing (the version is checked before).
func (j *handleJSON) checkRequired() error {
	switch {
	case j.Storage == nil:
		return missingField("storage")
	case j.LogID == nil:
		return missingField("log_id")
	case j.KeyGroups == nil:
		return missingField("key_groups")
	case j.KeyGroups.Start == nil:
		return missingField("key_groups.start")
	case j.KeyGroups.End == nil:
		return missingField("key_groups.end")
	case j.Entries == nil:
		return missingField("entries")
	case j.LogicalSize == nil:
		return missingField("logical_size")
	case j.StoredSize == nil:
		return missingField("stored_size")
	case j.IncrementalSize == nil:
		return missingField("incremental_size")
	}
	return nil
}

// handleEntriesFromJSON converts a JSON handle's entries, failing naming
// the first missing field; no entries give nil.
func handleEntriesFromJSON(entries []handleEntryJSON) ([]HandleEntry, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	out := make([]HandleEntry, len(entries))
	for i, e := range entries {
		field := func(name string) error { return missingField(fmt.Sprintf("entries[%d].%s", i, name)) }
		switch {
		case e.Object == nil:
			return nil, field("object")
		case e.Offset == nil:
			return nil, field("offset")
		case e.Length == nil:
			return nil, field("length")
		case e.SQN == nil:
			return nil, field("sqn")
		case e.LogicalSize == nil:
			return nil, field("logical_size")
		}
		out[i] = HandleEntry{
			Object:         *e.Object,
			Offset:         *e.Offset,
			Length:         *e.Length,
			SequenceNumber: SequenceNumber(*e.SQN),
			LogicalSize:    *e.LogicalSize,
		}
	}
	return out, nil
}

// parseHandleLogID parses a log id in the 36-character UUID form
// (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, hex digits in either case); it
// rejects the other forms uuid.Parse accepts (braces, urn:uuid:, no dashes).
func parseHandleLogID(s string) (LogID, error) {
	if len(s) != 36 {
		return LogID{}, fmt.Errorf("%w: log_id %q is not a UUID (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", ErrInvalidHandle, s)
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return LogID{}, fmt.Errorf("%w: log_id %q: %w", ErrInvalidHandle, s, err)
	}
	return LogID(u), nil
}
