package diskstate

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"os"

	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// bloomBitsPerKey is the size of the bloom filters of the database's
// tables and of the files of snapshots (about 1 % false positives): point
// reads of keys a table does not hold skip it.
const bloomBitsPerKey = 10

// writerOptions returns the options of the SST files this package writes:
// the database's table format and a table-level bloom filter matching the
// database's (see Open).
func writerOptions(format sstable.TableFormat) sstable.WriterOptions {
	return sstable.WriterOptions{
		TableFormat:  format,
		FilterPolicy: bloom.FilterPolicy(bloomBitsPerKey),
		FilterType:   sstable.TableFilter,
	}
}

// localFile is a finished SST file in the temporary directory.
type localFile struct {
	path string
	File       // Object unset until uploaded
	raw  int64 // bytes of keys and values written
}

// crcFile passes writes to a file and computes their CRC-32C and length.
type crcFile struct {
	vfs.File
	crc uint32
	n   int64
}

func (f *crcFile) Write(p []byte) (int, error) {
	// Hash first: a vfs.File may modify p.
	f.crc = crc32.Update(f.crc, castagnoli, p)
	n, err := f.File.Write(p)
	f.n += int64(n)
	if err == nil && n < len(p) {
		err = fmt.Errorf("short write of %d of %d bytes", n, len(p))
	}
	return n, err
}

// tableWriter writes one SST file in a directory.
type tableWriter struct {
	w    *sstable.Writer
	cf   *crcFile
	path string
	raw  int64
	keys int64
	last []byte // the last point key written
}

// newTableWriter creates a new SST file in dir; track records its path
// (for removal on failure).
func newTableWriter(dir string, format sstable.TableFormat, track func(string)) (*tableWriter, error) {
	f, err := os.CreateTemp(dir, "sst-*.sst")
	if err != nil {
		return nil, fmt.Errorf("diskstate: create SST file: %w", err)
	}
	path := f.Name()
	track(path)
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("diskstate: create SST file %s: %w", path, err)
	}
	vf, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("diskstate: create SST file %s: %w", path, err)
	}
	cf := &crcFile{File: vf}
	return &tableWriter{
		w:    sstable.NewWriter(objstorageprovider.NewFileWritable(cf), writerOptions(format)),
		cf:   cf,
		path: path,
	}, nil
}

func (t *tableWriter) set(key, value []byte) error {
	if err := t.w.Set(key, value); err != nil {
		return fmt.Errorf("diskstate: write %s: key %x: %w", t.path, key, err)
	}
	t.raw += int64(len(key) + len(value))
	t.keys++
	t.last = append(t.last[:0], key...)
	return nil
}

func (t *tableWriter) delete(key []byte) error {
	if err := t.w.Delete(key); err != nil {
		return fmt.Errorf("diskstate: write %s: deletion of key %x: %w", t.path, key, err)
	}
	t.raw += int64(len(key))
	t.keys++
	t.last = append(t.last[:0], key...)
	return nil
}

// deleteRange writes a range deletion over [lo, hi); range deletions go
// in ascending order.
func (t *tableWriter) deleteRange(lo, hi []byte) error {
	if err := t.w.DeleteRange(lo, hi); err != nil {
		return fmt.Errorf("diskstate: write %s: range deletion [%x, %x): %w", t.path, lo, hi, err)
	}
	return nil
}

// estimatedSize is about the size of the file if it were closed now.
func (t *tableWriter) estimatedSize() int64 { return int64(t.w.Raw().EstimatedSize()) }

// closedSize is at least the size of the file if it were closed now: the
// estimate, plus what closing adds (index, bloom filter, properties,
// footer), of which the estimate holds little.
func (t *tableWriter) closedSize() int64 {
	const fixed, perKey = 1 << 10, 2 // measured: about 1 KiB and 1.5 bytes a key
	return t.estimatedSize() + fixed + perKey*t.keys
}

// finish writes a segment's range deletion over [lo, hi) (when hi is not
// nil), closes and syncs the file, and returns it.
func (t *tableWriter) finish(kind FileKind, lo, hi []byte) (*localFile, error) {
	if hi != nil {
		if err := t.deleteRange(lo, hi); err != nil {
			t.abort()
			return nil, err
		}
	}
	if err := t.w.Close(); err != nil { // syncs and closes the file
		return nil, fmt.Errorf("diskstate: write %s: %w", t.path, err)
	}
	f := &localFile{path: t.path, raw: t.raw}
	f.Size, f.CRC, f.Kind = t.cf.n, t.cf.crc, kind
	if kind == Segment {
		f.Lo, f.Hi = bytes.Clone(lo), bytes.Clone(hi)
	}
	return f, nil
}

// abort closes the file without finishing it; the caller removes it.
func (t *tableWriter) abort() { _ = t.w.Close() }

// successor returns the smallest key after k: k followed by a zero byte.
func successor(k []byte) []byte {
	out := make([]byte, len(k)+1)
	copy(out, k)
	return out
}
