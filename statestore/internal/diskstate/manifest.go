package diskstate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
)

// ErrFormat is wrapped by the errors of a manifest or a file that is
// damaged (bad magic, checksum, size or content) or of another version.
var ErrFormat = errors.New("damaged or of another version")

// castagnoli is the CRC-32C table of manifests and files.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// manifestMagic starts every manifest; manifestVersion follows it.
const (
	manifestMagic   = "DSSM"
	manifestVersion = 1
)

// FileKind is what a file of a snapshot holds.
type FileKind byte

const (
	// Delta holds the keys changed since the previous materialisation: their
	// values at the cut, or a point deletion for a key that was gone.
	Delta FileKind = 1
	// Segment holds a range deletion over its span [File.Lo, File.Hi) and
	// every live key of that span at the cut: ingested alone, it replaces
	// everything older in the span.
	Segment FileKind = 2
)

// String returns "delta" or "segment".
func (k FileKind) String() string {
	switch k {
	case Delta:
		return "delta"
	case Segment:
		return "segment"
	}
	return fmt.Sprintf("FileKind(%d)", byte(k))
}

// File is one SST file of a snapshot, stored as an object of the backend.
type File struct {
	// Object is the file's object name.
	Object string
	// Size is the file's length in bytes.
	Size int64
	// CRC is the CRC-32C (Castagnoli) of the file's bytes.
	CRC uint32
	// Kind is what the file holds.
	Kind FileKind
	// Lo and Hi are a segment's span [Lo, Hi); nil for a delta.
	Lo, Hi []byte
	// Writer is the key-group range of the instance whose materialisation
	// wrote the file. Later manifests of other instances (after a rescale)
	// may name it too: a restoring instance takes as its own (to delete
	// once unreferenced) only the files that an instance of its own name
	// and key groups wrote.
	Writer dstl.KeyGroupRange
}

// StoreMeta describes one store of the snapshot: its name and kind, and
// what else the store needs on restore, in bytes of its own (its stream
// time, say).
type StoreMeta struct {
	// Name is the store's name.
	Name string
	// Kind is the store's kind ("kv", "window", ...).
	Kind string
	// KindVersion is the version of the kind's key and value layout.
	KindVersion int
	// Meta is opaque to this package.
	Meta []byte
}

// Manifest names the files of one snapshot of an operator instance's
// database and what a restore needs besides. Restoring ingests the files
// in order: a later file shadows an earlier one.
type Manifest struct {
	// Operator is the operator's name.
	Operator string
	// KeyGroups are the key groups of the instance that wrote the snapshot.
	KeyGroups dstl.KeyGroupRange
	// MaxParallelism is the operator's number of key groups.
	MaxParallelism int
	// From is the sequence number of the durable short-term log from which
	// a restore replays the changes the snapshot does not hold.
	From dstl.SequenceNumber
	// Cursor is where the next materialisation's sweep starts.
	Cursor []byte
	// Stores are the operator's stores.
	Stores []StoreMeta
	// Files are the snapshot's files, oldest first.
	Files []File
}

// Objects returns the object names of the manifest's files, in order.
func (m *Manifest) Objects() []string {
	out := make([]string, len(m.Files))
	for i, f := range m.Files {
		out[i] = f.Object
	}
	return out
}

// check reports what is wrong with a manifest's fields, or nil.
func (m *Manifest) check() error {
	if err := m.KeyGroups.Validate(); err != nil {
		return fmt.Errorf("key groups: %w", err)
	}
	if m.MaxParallelism < 0 || (m.MaxParallelism > 0 && m.KeyGroups.End >= m.MaxParallelism) {
		return fmt.Errorf("key groups %v do not fit a maximum parallelism of %d", m.KeyGroups, m.MaxParallelism)
	}
	for i, s := range m.Stores {
		if len(s.Name) > MaxStoreName {
			return fmt.Errorf("store %d: name of %d bytes (want at most %d)", i, len(s.Name), MaxStoreName)
		}
	}
	for i, f := range m.Files {
		if err := backends.CheckObjectName(f.Object); err != nil {
			return fmt.Errorf("file %d: object %q: %w", i, f.Object, err)
		}
		if f.Size < 0 {
			return fmt.Errorf("file %d (%s): negative size %d", i, f.Object, f.Size)
		}
		if err := f.Writer.Validate(); err != nil || f.Writer.End >= m.MaxParallelism {
			return fmt.Errorf("file %d (%s): writer's key groups %v do not fit max parallelism %d", i, f.Object, f.Writer, m.MaxParallelism)
		}
		switch f.Kind {
		case Delta:
			if f.Lo != nil || f.Hi != nil {
				return fmt.Errorf("file %d (%s): a delta with a span", i, f.Object)
			}
		case Segment:
			if bytes.Compare(f.Lo, f.Hi) >= 0 {
				return fmt.Errorf("file %d (%s): segment span [%x, %x) is empty", i, f.Object, f.Lo, f.Hi)
			}
		default:
			return fmt.Errorf("file %d (%s): unknown kind %d", i, f.Object, byte(f.Kind))
		}
	}
	return nil
}

// MarshalBinary encodes the manifest: the magic "DSSM", the version (one
// byte), the fields (integers as varints, lengths and counts as unsigned
// varints, a file's CRC as 4 bytes little-endian), then the CRC-32C of all
// that, 4 bytes little-endian. A manifest that [DecodeManifest] would
// reject (an invalid key-group range, an unknown file kind, an empty
// segment span, ...) is an error.
func (m *Manifest) MarshalBinary() ([]byte, error) {
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("diskstate: manifest of %q: %w", m.Operator, err)
	}
	return m.encode(), nil
}

// encode encodes the manifest, checked or not.
func (m *Manifest) encode() []byte {
	b := make([]byte, 0, 64+len(m.Operator)+len(m.Cursor)+len(m.Files)*64)
	b = append(b, manifestMagic...)
	b = append(b, manifestVersion)
	b = appendBytes(b, []byte(m.Operator))
	b = binary.AppendVarint(b, int64(m.KeyGroups.Start))
	b = binary.AppendVarint(b, int64(m.KeyGroups.End))
	b = binary.AppendVarint(b, int64(m.MaxParallelism))
	b = binary.AppendUvarint(b, uint64(m.From))
	b = appendBytes(b, m.Cursor)
	b = binary.AppendUvarint(b, uint64(len(m.Stores)))
	for _, s := range m.Stores {
		b = appendBytes(b, []byte(s.Name))
		b = appendBytes(b, []byte(s.Kind))
		b = binary.AppendVarint(b, int64(s.KindVersion))
		b = appendBytes(b, s.Meta)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Files)))
	for _, f := range m.Files {
		b = appendBytes(b, []byte(f.Object))
		b = binary.AppendVarint(b, f.Size)
		b = binary.LittleEndian.AppendUint32(b, f.CRC)
		b = append(b, byte(f.Kind))
		b = binary.AppendVarint(b, int64(f.Writer.Start))
		b = binary.AppendVarint(b, int64(f.Writer.End))
		if f.Kind == Segment {
			b = appendBytes(b, f.Lo)
			b = appendBytes(b, f.Hi)
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// DecodeManifest decodes a manifest that [Manifest.MarshalBinary] encoded,
// read from object. Bad magic, another version, a checksum mismatch,
// truncation, trailing bytes or an invalid field is an error that wraps
// [ErrFormat] and names the object and what is wrong. The manifest does
// not alias data.
func DecodeManifest(object string, data []byte) (*Manifest, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("diskstate: manifest %s: %s: %w", object, fmt.Sprintf(format, args...), ErrFormat)
	}
	const trailer = 4
	if len(data) < len(manifestMagic)+1+trailer {
		if len(data) >= len(manifestMagic) && string(data[:len(manifestMagic)]) != manifestMagic {
			return nil, bad("bad magic %q", data[:len(manifestMagic)])
		}
		return nil, bad("truncated: %d bytes", len(data))
	}
	if string(data[:len(manifestMagic)]) != manifestMagic {
		return nil, bad("bad magic %q", data[:len(manifestMagic)])
	}
	if v := data[len(manifestMagic)]; v != manifestVersion {
		return nil, bad("version %d (want %d)", v, manifestVersion)
	}
	body := data[:len(data)-trailer]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(data[len(body):]); got != want {
		return nil, bad("checksum %08x, want %08x", got, want)
	}
	d := decoder{b: body[len(manifestMagic)+1:]}
	m := &Manifest{}
	m.Operator = string(d.bytes("operator"))
	m.KeyGroups.Start = d.int("key-group start")
	m.KeyGroups.End = d.int("key-group end")
	m.MaxParallelism = d.int("maximum parallelism")
	m.From = dstl.SequenceNumber(d.uvarint("sequence number"))
	m.Cursor = d.bytes("cursor")
	if n := d.count("stores", 4); n > 0 {
		m.Stores = make([]StoreMeta, n)
		for i := range m.Stores {
			s := &m.Stores[i]
			s.Name = string(d.bytes("store name"))
			s.Kind = string(d.bytes("store kind"))
			s.KindVersion = d.int("store kind version")
			s.Meta = d.bytes("store meta")
		}
	}
	if n := d.count("files", 7); n > 0 {
		m.Files = make([]File, n)
		for i := range m.Files {
			f := &m.Files[i]
			f.Object = string(d.bytes("file object"))
			f.Size = d.varint("file size")
			f.CRC = binary.LittleEndian.Uint32(d.fixed("file CRC", 4))
			f.Kind = FileKind(d.byte("file kind"))
			f.Writer.Start, f.Writer.End = d.int("file writer start"), d.int("file writer end")
			if d.err == nil && f.Kind == Segment {
				f.Lo = d.bytes("segment start")
				f.Hi = d.bytes("segment end")
			}
			if d.err == nil && f.Kind != Segment && f.Kind != Delta {
				return nil, bad("file %d (%s): unknown kind %d", i, f.Object, byte(f.Kind))
			}
		}
	}
	if d.err != nil {
		return nil, bad("%v", d.err)
	}
	if len(d.b) > 0 {
		return nil, bad("%d trailing bytes", len(d.b))
	}
	if err := m.check(); err != nil {
		return nil, bad("%v", err)
	}
	return m, nil
}

// decoder reads the fields of a manifest; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what, why string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %s", what, why)
	}
}

func (d *decoder) uvarint(what string) uint64 { return readVarint(d, what, binary.Uvarint) }

func (d *decoder) varint(what string) int64 { return readVarint(d, what, binary.Varint) }

// readVarint reads a varint with read (binary.Uvarint or binary.Varint).
func readVarint[T uint64 | int64](d *decoder, what string, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.b)
	if n <= 0 {
		d.fail(what, "truncated or overlong varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a varint that must fit an int32 (every int of a manifest does).
func (d *decoder) int(what string) int {
	v := d.varint(what)
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail(what, fmt.Sprintf("%d out of range", v))
		return 0
	}
	return int(v)
}

// count reads a count of items of at least minBytes bytes each.
func (d *decoder) count(what string, minBytes int) int {
	v := d.uvarint(what)
	if d.err == nil && v > uint64(len(d.b)/minBytes) {
		d.fail(what, fmt.Sprintf("%d past the end", v))
		return 0
	}
	return int(v)
}

// bytes reads a length and that many bytes, copied; nil for none.
func (d *decoder) bytes(what string) []byte {
	v := d.uvarint(what)
	if d.err != nil {
		return nil
	}
	if v > uint64(len(d.b)) {
		d.fail(what, fmt.Sprintf("length %d past the end", v))
		return nil
	}
	if v == 0 {
		return nil
	}
	out := bytes.Clone(d.b[:v])
	d.b = d.b[v:]
	return out
}

func (d *decoder) fixed(what string, n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.fail(what, "truncated")
		return make([]byte, n)
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte(what string) byte {
	return d.fixed(what, 1)[0]
}

// IsManifest reports whether data starts as a manifest does (its magic),
// to tell it from the other kinds of snapshot objects before decoding it.
func IsManifest(data []byte) bool {
	return len(data) >= len(manifestMagic) && string(data[:len(manifestMagic)]) == manifestMagic
}
