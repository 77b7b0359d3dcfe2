package diskstate

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/dstlgo/dstl/dstl"
)

// KeyGroupBytes is the length of the key-group prefix of every key.
const KeyGroupBytes = 2

// MaxStoreName is the longest store name the key layout holds.
const MaxStoreName = 255

// AppendStorePrefix appends the prefix of the keys of store in key group kg:
// the key group, two bytes big-endian, then the name's length (one byte) and
// bytes.
func AppendStorePrefix(dst []byte, kg int, store string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(kg))
	dst = append(dst, byte(len(store)))
	return append(dst, store...)
}

// KeyGroupOf returns the key group a key starts with, and false for a key
// shorter than the prefix.
func KeyGroupOf(key []byte) (int, bool) {
	if len(key) < KeyGroupBytes {
		return 0, false
	}
	return int(binary.BigEndian.Uint16(key)), true
}

// KeyGroupSpan returns the keys of the key groups of r: from lo (included)
// to hi (excluded).
func KeyGroupSpan(r dstl.KeyGroupRange) (lo, hi []byte) {
	lo = binary.BigEndian.AppendUint16(nil, uint16(r.Start))
	hi = binary.BigEndian.AppendUint16(nil, uint16(r.End+1))
	if r.End+1 > 0xFFFF {
		hi = []byte{0xFF, 0xFF, 0xFF}
	}
	return lo, hi
}

// DB is the Pebble database of one operator instance, in a working
// directory of its own, with the set of keys changed since the last
// materialisation. Pebble's write-ahead log is off: what is not yet
// materialised is in the durable short-term log, which a restore replays.
// It is safe for concurrent use.
type DB struct {
	*pebble.DB
	dir string

	mu      sync.Mutex
	changed map[string]struct{}
	all     bool
}

// Open removes whatever dir holds (what an earlier run left behind, a
// materialisation that crashed half-way included) and opens an empty
// database in it. Log messages go to logger at debug level (errors at
// warn).
func Open(dir string, logger *slog.Logger) (*DB, error) {
	return OpenCache(dir, logger, DefaultCacheSize)
}

// DefaultCacheSize is the size of the block cache of a database that Open
// opens: enough to keep the index and filter blocks, and the hot data
// blocks, of a state of a few GiB in memory.
const DefaultCacheSize = 64 << 20

// OpenCache is Open with a block cache of cacheSize bytes (at least 1 MiB).
func OpenCache(dir string, logger *slog.Logger, cacheSize int64) (*DB, error) {
	if dir == "" {
		return nil, fmt.Errorf("diskstate: no working directory")
	}
	if logger == nil {
		logger = slog.Default()
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("diskstate: clean working directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, fmt.Errorf("diskstate: working directory %s: %w", dir, err)
	}
	cache := pebble.NewCache(max(cacheSize, 1<<20))
	defer cache.Unref() // the database holds its own reference
	opts := &pebble.Options{
		Cache:              cache,
		DisableWAL:         true,
		FormatMajorVersion: pebble.FormatNewest,
		MemTableSize:       32 << 20,
		Logger:             slogLogger{logger},
	}
	// Bloom filters in every level (the others inherit L0's), as in the
	// files of snapshots (writerOptions): point reads skip the tables
	// that do not hold the key, ingested ones included.
	opts.Levels[0].FilterPolicy = bloom.FilterPolicy(bloomBitsPerKey)
	opts.Levels[0].FilterType = pebble.TableFilter
	db, err := pebble.Open(filepath.Join(dir, "db"), opts)
	if err != nil {
		return nil, fmt.Errorf("diskstate: open %s: %w", dir, err)
	}
	return &DB{DB: db, dir: dir, changed: map[string]struct{}{}}, nil
}

// Dir returns the instance's working directory.
func (d *DB) Dir() string { return d.dir }

// TempDir returns the directory, on the database's file system, where
// files to ingest and files being written or downloaded go.
func (d *DB) TempDir() string { return filepath.Join(d.dir, "tmp") }

// Touch records that key was set or deleted.
func (d *DB) Touch(key []byte) {
	d.mu.Lock()
	if !d.all {
		d.changed[string(key)] = struct{}{}
	}
	d.mu.Unlock()
}

// TouchAll records that keys were changed that the caller cannot name:
// the next materialisation writes every key.
func (d *DB) TouchAll() {
	d.mu.Lock()
	d.all = true
	clear(d.changed)
	d.mu.Unlock()
}

// TakeChanges returns the keys changed since the last call, sorted, and
// whether every key counts as changed (TouchAll), and forgets them.
func (d *DB) TakeChanges() (keys []string, all bool) {
	d.mu.Lock()
	ch, all := d.changed, d.all
	d.changed, d.all = make(map[string]struct{}, len(ch)/2), false
	d.mu.Unlock()
	if all {
		return nil, true
	}
	keys = make([]string, 0, len(ch))
	for k := range ch {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, false
}

// Restore puts keys back into the set of changes (a materialisation that
// failed after TakeChanges); all restores TouchAll.
func (d *DB) Restore(keys []string, all bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.all {
		return
	}
	if all {
		d.all = true
		clear(d.changed)
		return
	}
	for _, k := range keys {
		d.changed[k] = struct{}{}
	}
}

// Close closes the database. The working directory stays; the next Open
// cleans it.
func (d *DB) Close() error {
	if err := d.DB.Close(); err != nil {
		return fmt.Errorf("diskstate: close %s: %w", d.dir, err)
	}
	return nil
}

// slogLogger passes Pebble's messages to slog.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Infof(format string, args ...any) {
	s.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}
func (s slogLogger) Errorf(format string, args ...any) {
	s.l.Warn("pebble: " + fmt.Sprintf(format, args...))
}
func (s slogLogger) Fatalf(format string, args ...any) {
	s.l.Error("pebble: " + fmt.Sprintf(format, args...))
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// Wipe deletes every key of the database (with one range deletion) and
// counts every key as changed: what a restore starts from, and where a
// failed one leaves it.
func (d *DB) Wipe() error {
	// From 0x00, not the empty key: every key starts with its key group.
	if err := d.DeleteRange([]byte{0x00}, []byte{0xFF, 0xFF, 0xFF}, pebble.NoSync); err != nil {
		return fmt.Errorf("diskstate: wipe %s: %w", d.dir, err)
	}
	d.TouchAll()
	return nil
}
