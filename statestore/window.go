package statestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"
	"math"

	"github.com/dstlgo/dstl/dstl"
)

// windowVersion is the version of the window store's snapshot payload.
const windowVersion = 1

// A window store keeps two tables (see disk.go for escaped keys and
// times):
//
//	data:  escaped key, start -> encoded value
//	index: start, escaped key -> empty (the expiry index)
//
// and the stream time in memory (storeBase). On disk, the data table's
// keys follow the store's prefix and 0x00, the index's 0x01.
//
// Expiry. Reads decide by the stream time alone: a window whose start is
// before liveFrom is absent to Get, Fetch, All, Len and Snapshot, whether
// or not it is still in the tables. oldest is a lower bound of the starts
// of the windows in the tables (math.MaxInt64: none; math.MinInt64:
// unknown): a put or a restore lowers it to the start it writes (never
// below liveFrom: older windows are dropped), Delete leaves it (it stays a
// bound), Clear and a wiping restore reset it to none. When the stream time
// advances and liveFrom is past oldest, expiry scans the index from oldest
// up to the first window still live, deletes both rows of every window
// before it, and takes that window's start as oldest: exact. So expiry
// reads only what it deletes, plus, on disk, one seek per key group; and
// nothing at all while no window expires. If it fails, the bound stays a
// bound and the next advance retries; meanwhile Len reads the data table
// (expireFailed), which it otherwise counts.

// The sections of a window store's tables on disk.
var (
	winDataSection  = []byte{0x00}
	winIndexSection = []byte{0x01}
)

// noRow is the row of an index, which holds keys only.
type noRow struct{}

// noRowCodec encodes index rows: empty values.
type noRowCodec struct{}

func (noRowCodec) encode(dst []byte, _ *noRow) ([]byte, error) { return dst, nil }

func (noRowCodec) decode(_, _ []byte, _ bool) (noRow, error) { return noRow{}, nil }

// cutWindowKey returns the encoded key of a data key.
func cutWindowKey(key []byte) ([]byte, error) {
	kb, _, err := cutWindowTo(nil, key)
	return kb, err
}

// cutWindowTo decodes a data key: the encoded key, appended to dst, and
// the start.
func cutWindowTo(dst, key []byte) ([]byte, int64, error) {
	if len(key) < 2+8 {
		return nil, 0, fmt.Errorf("window key of %d bytes", len(key))
	}
	kb, rest, err := cutEscapedTo(dst, key)
	if err != nil {
		return nil, 0, fmt.Errorf("window key: %w", err)
	}
	if len(rest) != 8 {
		return nil, 0, fmt.Errorf("window key: %d bytes after the key, want 8", len(rest))
	}
	start, err := readTime(rest)
	return kb, start, err
}

// Windowed is a key and the start of one of its windows.
type Windowed[K any] struct {
	Key   K
	Start int64
}

// WindowStore keeps values per key per time window, a window being named by
// its start (in the stream's time unit, for instance milliseconds). Its
// stream time is the largest window start put so far; a window is kept
// while its start is greater than the stream time minus the retention, and a
// put into an older window is dropped, as in Kafka Streams. Each change is
// logged with the window start as its timestamp, in the key group of the
// key, so all windows of a key live in one key group. It is safe for
// concurrent use.
//
// A restore from several instances (rescaling) takes the largest of their
// stream times: windows that the slower instance still held but that are
// expired at the merged stream time are dropped.
//
// Its loops (Fetch, All) read the store as it was when the loop began.
// Registered with a Checkpointer whose Config.Dir is set, the store keeps
// its windows on disk, with the same results; if reading the disk fails,
// its loops stop and keep the error for Err (which fails the next Flush and
// checkpoint).
type WindowStore[K, V any] struct {
	storeBase
	kc        Codec[K]
	vc        Codec[V]
	retention int64
	data      table[kvRow[K, V]]
	index     table[noRow]
	// oldest bounds the window starts in the tables (see above);
	// expireFailed: the last expiry failed, so windows before liveFrom
	// may be left in them.
	oldest       int64
	expireFailed bool
	// kscratch holds keys being built, and expired the keys an expiry
	// deletes (with their key groups in expiredAt).
	kscratch, expired []byte
	expiredAt         []expiredKey
}

// expiredKey is an index key that an expiry deletes: its key group and
// where it ends in WindowStore.expired.
type expiredKey struct {
	kg, end int
}

var _ internalStore = (*WindowStore[string, string])(nil)

// NewWindowStore returns an empty window store keeping windows for
// retention (> 0) past the stream time.
func NewWindowStore[K, V any](name string, log *dstl.Writer, keys Codec[K], values Codec[V], retention int64, opts ...Option) (*WindowStore[K, V], error) {
	if retention <= 0 {
		return nil, fmt.Errorf("statestore: store %q: retention %d must be positive", name, retention)
	}
	s := &WindowStore[K, V]{kc: keys, vc: values, retention: retention, oldest: math.MaxInt64}
	if err := s.init(name, KindWindow, windowVersion, log, opts); err != nil {
		return nil, err
	}
	s.setTables(s.makeTables)
	return s, nil
}

// makeTables makes the store's tables in its backing.
func (s *WindowStore[K, V]) makeTables() []anyTable {
	s.data = newTable[kvRow[K, V]](&s.storeBase, winDataSection, kvCodec[K, V]{kc: s.kc, vc: s.vc, cut: cutWindowKey})
	s.index = newTable[noRow](&s.storeBase, winIndexSection, noRowCodec{})
	return []anyTable{s.data, s.index}
}

// Retention returns the retention.
func (s *WindowStore[K, V]) Retention() int64 { return s.retention }

// StreamTime returns the largest window start seen, or math.MinInt64.
func (s *WindowStore[K, V]) StreamTime() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streamTime
}

// liveFrom returns the smallest window start that is not expired.
func (s *WindowStore[K, V]) liveFrom() int64 {
	if s.streamTime < math.MinInt64+s.retention {
		return math.MinInt64
	}
	return s.streamTime - s.retention + 1
}

// dataKey returns the data key of the window of encoded key kb at start,
// in the scratch buffer: valid until the next call.
func (s *WindowStore[K, V]) dataKey(kb []byte, start int64) []byte {
	s.kscratch = appendTime(appendEscaped(s.kscratch[:0], kb), start)
	return s.kscratch
}

// advanceWindowsLocked raises the stream time to ts and expires the
// windows it leaves behind.
func (s *WindowStore[K, V]) advanceWindowsLocked(ts int64) error {
	if s.advanceLocked(ts) {
		return s.expireLocked()
	}
	return nil
}

// expireLocked deletes the windows that are expired at the stream time
// (see the top of this file).
func (s *WindowStore[K, V]) expireLocked() error {
	live := s.liveFrom()
	if live <= s.oldest {
		return nil
	}
	s.expireFailed = true // until it is done
	s.expired, s.expiredAt = s.expired[:0], s.expiredAt[:0]
	next := int64(math.MaxInt64)
	for e, err := range s.index.scan(appendTime(nil, s.oldest), nil, false) {
		if err != nil {
			return err
		}
		start, err := readTime(e.key)
		if err != nil {
			return fmt.Errorf("statestore: store %q: expiry index: %w", s.name, err)
		}
		if start >= live {
			next = start
			break
		}
		s.expired = append(s.expired, e.key...)
		s.expiredAt = append(s.expiredAt, expiredKey{kg: e.kg, end: len(s.expired)})
	}
	from := 0
	for _, x := range s.expiredAt {
		ik := s.expired[from:x.end]
		from = x.end
		// The data first, so that every window in the tables is in the
		// index, whatever fails.
		s.kscratch = append(append(s.kscratch[:0], ik[8:]...), ik[:8]...)
		if err := s.data.del(x.kg, s.kscratch); err != nil {
			return err
		}
		if err := s.index.del(x.kg, ik); err != nil {
			return err
		}
	}
	if cap(s.expired) > maxKeptScratch {
		s.expired, s.expiredAt = nil, nil
	}
	s.oldest, s.expireFailed = next, false
	return nil
}

// putLocked writes a window unless it is expired, after advancing the
// stream time; enc is the encoded value when encoded. The index row goes
// first, so that every window in the tables is in the index, whatever
// fails.
func (s *WindowStore[K, V]) putLocked(kg int, kb []byte, start int64, r kvRow[K, V], enc []byte, encoded bool) (bool, error) {
	if err := s.advanceWindowsLocked(start); err != nil {
		return false, err
	}
	if start < s.liveFrom() {
		return false, nil
	}
	s.oldest = min(s.oldest, start)
	s.kscratch = appendEscaped(appendTime(s.kscratch[:0], start), kb)
	if err := s.index.set(kg, string(s.kscratch), noRow{}, nil, true); err != nil {
		return false, err
	}
	return true, s.data.set(kg, string(s.dataKey(kb, start)), r, enc, encoded)
}

// removeLocked deletes a window: its data first, for the same reason.
func (s *WindowStore[K, V]) removeLocked(kg int, kb []byte, start int64) error {
	if err := s.data.del(kg, s.dataKey(kb, start)); err != nil {
		return err
	}
	s.kscratch = appendEscaped(appendTime(s.kscratch[:0], start), kb)
	return s.index.del(kg, s.kscratch)
}

// Put sets the value of k in the window starting at start. It advances the
// stream time; a put into an expired window is dropped (and not logged).
func (s *WindowStore[K, V]) Put(k K, start int64, v V) error {
	kb, kg, err := lockKey(&s.storeBase, s.kc, k)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := kvRow[K, V]{k: k, v: v}
	vb, logged, err := encodeLogged(&s.storeBase, s.vc, v)
	enc := vb
	if err == nil && !logged {
		enc, err = s.data.encoding(&r)
	}
	if err != nil {
		return err
	}
	put, err := s.putLocked(kg, kb, start, r, enc, true)
	if err != nil {
		return err
	}
	if put && logged {
		s.bufferLocked(Change{KeyGroup: kg, Key: kb, Value: vb, Timestamp: start, HasTimestamp: true})
	}
	return nil
}

// Delete removes the window of k starting at start and logs a tombstone.
func (s *WindowStore[K, V]) Delete(k K, start int64) error {
	kb, kg, err := lockKey(&s.storeBase, s.kc, k)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := s.removeLocked(kg, kb, start); err != nil {
		return err
	}
	s.record(Change{KeyGroup: kg, Key: kb, Tombstone: true, Timestamp: start, HasTimestamp: true})
	return nil
}

// Get returns the value of k in the window starting at start.
func (s *WindowStore[K, V]) Get(k K, start int64) (V, bool, error) {
	var zero V
	kb, kg, err := lockKey(&s.storeBase, s.kc, k)
	if err != nil {
		return zero, false, err
	}
	defer s.mu.Unlock()
	if start < s.liveFrom() {
		return zero, false, nil
	}
	r, ok, err := s.data.get(kg, s.dataKey(kb, start))
	return r.v, ok, err
}

// readFailed is the error that ends a loop that has no error to return
// (All, Fetch, Len): reading the table, or decoding what the store wrote
// there, failed. The loop keeps it for Err (fail) and stops.
func (b *storeBase) readFailed(err error) error {
	return fmt.Errorf("statestore: store %q: read: %w", b.name, err)
}

// Fetch yields the windows of k whose start is in [from, to], by start, as
// they were when the loop began.
func (s *WindowStore[K, V]) Fetch(k K, from, to int64) (iter.Seq2[int64, V], error) {
	kb, kg, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return nil, err
	}
	p := appendEscaped(nil, kb)
	return func(yield func(int64, V) bool) {
		v, live, ok := openView(&s.storeBase, s.data, s.liveFrom)
		if !ok {
			return
		}
		defer v.release()
		lo := max(from, live)
		if lo > to {
			return
		}
		for e, err := range v.scanIn(kg, appendTime(bytes.Clone(p), lo), append(appendTime(bytes.Clone(p), to), 0), true) {
			if err != nil {
				s.fail(s.readFailed(err))
				return
			}
			start, err := readTime(e.key[len(p):])
			if err != nil {
				s.fail(s.readFailed(err))
				return
			}
			if !yield(start, e.row.v) {
				return
			}
		}
	}, nil
}

// All yields every window, by key then start, as they were when the loop
// began.
func (s *WindowStore[K, V]) All() iter.Seq2[Windowed[K], V] {
	return func(yield func(Windowed[K], V) bool) {
		v, live, ok := openView(&s.storeBase, s.data, s.liveFrom)
		if !ok {
			return
		}
		defer v.release()
		for e, err := range v.scan(nil, nil, true) {
			if err != nil {
				s.fail(s.readFailed(err))
				return
			}
			start, err := readTime(e.key[max(len(e.key)-8, 0):])
			if err != nil {
				s.fail(s.readFailed(err))
				return
			}
			if start < live {
				continue
			}
			if !yield(Windowed[K]{Key: e.row.k, Start: start}, e.row.v) {
				return
			}
		}
	}
}

// Len returns the number of windows. On disk, it reads the whole store;
// it returns 0 once the store is closed.
func (s *WindowStore[K, V]) Len() int {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0
	}
	if !s.expireFailed {
		// The tables hold the live windows only.
		count := s.data.counter()
		s.mu.Unlock()
		n, err := count()
		if err != nil {
			s.fail(s.readFailed(err))
		}
		return n
	}
	s.mu.Unlock()
	v, live, ok := openView(&s.storeBase, s.data, s.liveFrom)
	if !ok {
		return 0
	}
	defer v.release()
	n := 0
	for e, err := range v.scan(nil, nil, false) {
		if err == nil && len(e.key) < 8 {
			err = fmt.Errorf("window key of %d bytes", len(e.key))
		}
		if err != nil {
			s.fail(s.readFailed(err))
			return n
		}
		if start, _ := readTime(e.key[len(e.key)-8:]); start >= live {
			n++
		}
	}
	return n
}

// ApplyChange applies a change read back from the log without logging it:
// a put, a tombstone, or the stream time.
func (s *WindowStore[K, V]) ApplyChange(c Change) error {
	var terr error
	err := applyLogged(&s.storeBase, s.kc, s.vc, c, true,
		func(ts int64) { terr = s.advanceWindowsLocked(ts) },
		func(kg int, k K, v V) {
			if c.Tombstone {
				terr = s.removeLocked(kg, c.Key, c.Timestamp)
				return
			}
			_, terr = s.putLocked(kg, c.Key, c.Timestamp, kvRow[K, V]{k: k, v: v}, c.Value, true)
		})
	if err != nil {
		return err
	}
	return terr
}

// Clear removes every window and buffered change and resets the stream
// time, logging nothing.
func (s *WindowStore[K, V]) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oldest, s.expireFailed = math.MaxInt64, false
	s.clearTablesLocked()
}

// Snapshot encodes the store (kind "window", version 1): the stream time,
// the number of windows, then each key (length-prefixed), window start and
// value (length-prefixed), by key then start. It fails with ErrClosed once
// the store is closed.
func (s *WindowStore[K, V]) Snapshot() ([]byte, error) { return snapshotOf(s) }

func (s *WindowStore[K, V]) captureLocked() func() ([]byte, error) {
	live := s.liveFrom()
	return captureView(&s.storeBase, s.data, true, func(v tableView[kvRow[K, V]], b []byte) ([]byte, int, error) {
		var vb, scratch, kb []byte
		n := 0
		for e, err := range v.scan(nil, nil, true) {
			if err != nil {
				return nil, 0, err
			}
			var start int64
			if kb, start, err = cutWindowTo(kb[:0], e.key); err != nil {
				return nil, 0, err
			}
			if start < live {
				continue
			}
			if vb, err = encodeReusing(s.vc, &scratch, e.row.v); err != nil {
				return nil, 0, err
			}
			b = appendBytes(b, kb)
			b = binary.AppendVarint(b, start)
			b = appendBytes(b, vb)
			n++
		}
		return b, n, nil
	})
}

// RestoreSnapshot wipes the store and loads payload, keeping the windows of
// keys in the store's key groups, without logging.
func (s *WindowStore[K, V]) RestoreSnapshot(payload []byte) error {
	return s.restorePayload(payload, s.kgr, true)
}

// rawWindow is a window of a payload: the encoded key and value alias the
// payload.
type rawWindow[K, V any] struct {
	kb    []byte
	kg    int
	start int64
	vb    []byte
	row   kvRow[K, V]
}

func (s *WindowStore[K, V]) restorePayload(payload []byte, kgr dstl.KeyGroupRange, wipe bool) error {
	var st int64
	var items []rawWindow[K, V]
	parse := func(d *decoder) {
		st, items = parseWindows(d, kgr, s.maxP, func(kb []byte, start int64, vb []byte) (rawWindow[K, V], error) {
			w := rawWindow[K, V]{kb: kb, kg: KeyGroup(kb, s.maxP), start: start, vb: vb}
			var err error
			if w.row.k, err = s.kc.Decode(kb); err != nil {
				return w, fmt.Errorf("key: %w", err)
			}
			if w.row.v, err = s.vc.Decode(vb); err != nil {
				return w, fmt.Errorf("value: %w", err)
			}
			return w, nil
		})
	}
	var ierr error
	if err := s.loadPayload(payload, parse, func() { ierr = s.installLocked(st, items, wipe) }); err != nil {
		return err
	}
	return ierr
}

// installLocked is the install step of restorePayload.
func (s *WindowStore[K, V]) installLocked(st int64, items []rawWindow[K, V], wipe bool) error {
	if wipe {
		s.oldest, s.expireFailed = math.MaxInt64, false
		if err := s.clearTablesLocked(); err != nil {
			return err
		}
	}
	s.advanceLocked(st)
	s.loggedStreamTime = max(s.loggedStreamTime, st)
	live := s.liveFrom()
	for _, it := range items {
		// A window expired at the restored stream time is dropped at
		// once; the tables hold the store's key groups only (kgr is
		// within them when the checkpointer restores).
		if it.start < live || !s.kgr.Contains(it.kg) {
			continue
		}
		if _, err := s.putLocked(it.kg, it.kb, it.start, it.row, it.vb, true); err != nil {
			return err
		}
	}
	return s.expireLocked()
}

// restoreStreamTime raises the stream time to st, a disk-backed snapshot's.
// The windows that snapshot's files brought have unknown starts: the
// bound becomes none-known (math.MinInt64), so that expiry reads the whole
// index once.
func (s *WindowStore[K, V]) restoreStreamTime(st int64) error {
	return s.restoreStreamTimeThen(st, func() error {
		s.oldest = math.MinInt64
		return s.expireLocked()
	})
}

// parseWindows decodes the body of a window payload: the stream time, then
// the windows, which must be in order (by key, then start); it hands those
// of the key groups of kgr to keep, whose error fails d.
func parseWindows[T any](d *decoder, kgr dstl.KeyGroupRange, maxP int, keep func(kb []byte, start int64, vb []byte) (T, error)) (int64, []T) {
	st := d.varint()
	n := d.count()
	items := make([]T, 0, n)
	var prevKey []byte
	var prevStart int64
	for i := 0; i < n && d.err == nil; i++ {
		kb, start, vb := d.bytes(), d.varint(), d.bytes()
		if d.err != nil {
			break
		}
		if c := bytes.Compare(prevKey, kb); i > 0 && (c > 0 || c == 0 && prevStart >= start) {
			d.fail(fmt.Errorf("windows out of order"))
			break
		}
		prevKey, prevStart = kb, start
		if !kgr.Contains(KeyGroup(kb, maxP)) {
			continue
		}
		it, err := keep(kb, start, vb)
		if err != nil {
			d.fail(err)
			break
		}
		items = append(items, it)
	}
	return st, items
}
