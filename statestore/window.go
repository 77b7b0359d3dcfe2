package statestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"
	"math"

	"github.com/google/btree"

	"github.com/dstlgo/dstl/dstl"
)

// windowVersion is the version of the window store's snapshot payload.
const windowVersion = 1

type winItem[K, V any] struct {
	key   string // encoded key
	start int64  // window start
	k     K
	v     V
}

func winLess[K, V any](a, b winItem[K, V]) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return a.start < b.start
}

// winAge orders the expiry index by window start, then key.
type winAge struct {
	start int64
	key   string
}

func ageLess(a, b winAge) bool {
	if a.start != b.start {
		return a.start < b.start
	}
	return a.key < b.key
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
// Registered with a Checkpointer whose Config.Dir is set, the store keeps
// its windows on disk, with the same results; its loops (Fetch, All) then
// read the store as it was when the loop began, and if reading the disk
// fails they stop and keep the error for Err (which fails the next Flush
// and checkpoint).
type WindowStore[K, V any] struct {
	storeBase
	kc        Codec[K]
	vc        Codec[V]
	retention int64
	tree      *btree.BTreeG[winItem[K, V]]
	age       *btree.BTreeG[winAge]
	// oldest bounds the window starts on disk (window_disk.go).
	oldest winBounds
}

var _ internalStore = (*WindowStore[string, string])(nil)

// NewWindowStore returns an empty window store keeping windows for
// retention (> 0) past the stream time.
func NewWindowStore[K, V any](name string, log *dstl.Writer, keys Codec[K], values Codec[V], retention int64, opts ...Option) (*WindowStore[K, V], error) {
	if retention <= 0 {
		return nil, fmt.Errorf("statestore: store %q: retention %d must be positive", name, retention)
	}
	s := &WindowStore[K, V]{kc: keys, vc: values, retention: retention,
		tree: btree.NewG(btreeDegree, winLess[K, V]), age: btree.NewG(btreeDegree, ageLess)}
	if err := s.init(name, KindWindow, windowVersion, log, opts); err != nil {
		return nil, err
	}
	return s, nil
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

// advanceWindowsLocked raises the stream time to ts and drops expired
// windows.
func (s *WindowStore[K, V]) advanceWindowsLocked(ts int64) {
	if s.advanceLocked(ts) {
		s.expireLocked()
	}
}

// expireLocked drops the windows that are expired at the stream time.
func (s *WindowStore[K, V]) expireLocked() {
	live := s.liveFrom()
	for {
		a, ok := s.age.Min()
		if !ok || a.start >= live {
			return
		}
		s.age.DeleteMin()
		s.tree.Delete(winItem[K, V]{key: a.key, start: a.start})
	}
}

// Put sets the value of k in the window starting at start. It advances the
// stream time; a put into an expired window is dropped (and not logged).
func (s *WindowStore[K, V]) Put(k K, start int64, v V) error {
	if s.disk != nil {
		return s.diskPut(k, start, v)
	}
	kb, kg, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	vb, logged, err := encodeLogged(&s.storeBase, s.vc, v)
	if err != nil {
		return err
	}
	if s.putLocked(string(kb), start, k, v) && logged {
		s.bufferLocked(Change{KeyGroup: kg, Key: kb, Value: vb, Timestamp: start, HasTimestamp: true})
	}
	return nil
}

func (s *WindowStore[K, V]) putLocked(key string, start int64, k K, v V) bool {
	s.advanceWindowsLocked(start)
	if start < s.liveFrom() {
		return false
	}
	s.tree.ReplaceOrInsert(winItem[K, V]{key: key, start: start, k: k, v: v})
	s.age.ReplaceOrInsert(winAge{start: start, key: key})
	return true
}

func (s *WindowStore[K, V]) deleteLocked(key string, start int64) {
	s.tree.Delete(winItem[K, V]{key: key, start: start})
	s.age.Delete(winAge{start: start, key: key})
}

// Delete removes the window of k starting at start and logs a tombstone.
func (s *WindowStore[K, V]) Delete(k K, start int64) error {
	if s.disk != nil {
		return s.diskDeleteWindow(k, start)
	}
	kb, kg, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.deleteLocked(string(kb), start)
	s.record(Change{KeyGroup: kg, Key: kb, Tombstone: true, Timestamp: start, HasTimestamp: true})
	return nil
}

// Get returns the value of k in the window starting at start.
func (s *WindowStore[K, V]) Get(k K, start int64) (V, bool, error) {
	if s.disk != nil {
		return s.diskGetWindow(k, start)
	}
	var zero V
	kb, _, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return zero, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return zero, false, ErrClosed
	}
	it, ok := s.tree.Get(winItem[K, V]{key: string(kb), start: start})
	return it.v, ok, nil
}

func (s *WindowStore[K, V]) view() *btree.BTreeG[winItem[K, V]] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tree.Clone()
}

// Fetch yields the windows of k whose start is in [from, to], by start, as
// they were when Fetch was called (on disk: when the loop began).
func (s *WindowStore[K, V]) Fetch(k K, from, to int64) (iter.Seq2[int64, V], error) {
	if s.disk != nil {
		return s.diskFetch(k, from, to)
	}
	kb, _, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return nil, err
	}
	t := s.view()
	return func(yield func(int64, V) bool) {
		t.AscendGreaterOrEqual(winItem[K, V]{key: string(kb), start: from}, func(it winItem[K, V]) bool {
			if it.key != string(kb) || it.start > to {
				return false
			}
			return yield(it.start, it.v)
		})
	}, nil
}

// All yields every window, by key then start, as they were when All was
// called (on disk: when the loop began).
func (s *WindowStore[K, V]) All() iter.Seq2[Windowed[K], V] {
	if s.disk != nil {
		return s.diskAll()
	}
	t := s.view()
	return func(yield func(Windowed[K], V) bool) {
		t.Ascend(func(it winItem[K, V]) bool { return yield(Windowed[K]{Key: it.k, Start: it.start}, it.v) })
	}
}

// Len returns the number of windows. On disk, it reads the whole store
// (and returns 0 once the store is closed).
func (s *WindowStore[K, V]) Len() int {
	if s.disk != nil {
		return s.diskLen()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tree.Len()
}

// ApplyChange applies a change read back from the log without logging it:
// a put, a tombstone, or the stream time.
func (s *WindowStore[K, V]) ApplyChange(c Change) error {
	if s.disk != nil {
		return s.diskApplyChange(c)
	}
	return applyLogged(&s.storeBase, s.kc, s.vc, c, true, s.advanceWindowsLocked, func(k K, v V) {
		if c.Tombstone {
			s.deleteLocked(string(c.Key), c.Timestamp)
			return
		}
		s.putLocked(string(c.Key), c.Timestamp, k, v)
	})
}

// Clear removes every window and buffered change and resets the stream
// time, logging nothing.
func (s *WindowStore[K, V]) Clear() {
	if s.disk != nil {
		s.diskClearStore()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tree.Clear(false)
	s.age.Clear(false)
	s.clearLocked()
}

// Snapshot encodes the store (kind "window", version 1): the stream time,
// the number of windows, then each key (length-prefixed), window start and
// value (length-prefixed), by key then start.
func (s *WindowStore[K, V]) Snapshot() ([]byte, error) { return snapshotOf(s) }

func (s *WindowStore[K, V]) captureLocked() func() ([]byte, error) {
	if s.disk != nil {
		return s.diskCaptureLocked()
	}
	t, st := s.tree.Clone(), s.streamTime
	return func() ([]byte, error) {
		return s.encodePayload(func(b []byte) ([]byte, error) {
			b = binary.AppendVarint(b, st)
			b = binary.AppendUvarint(b, uint64(t.Len()))
			var err error
			var vb, scratch []byte
			t.Ascend(func(it winItem[K, V]) bool {
				if vb, err = encodeReusing(s.vc, &scratch, it.v); err != nil {
					return false
				}
				b = appendString(b, it.key)
				b = binary.AppendVarint(b, it.start)
				b = appendBytes(b, vb)
				return true
			})
			return b, err
		})
	}
}

// RestoreSnapshot wipes the store and loads payload, keeping the windows of
// keys in the store's key groups, without logging.
func (s *WindowStore[K, V]) RestoreSnapshot(payload []byte) error {
	return s.restorePayload(payload, s.kgr, true)
}

func (s *WindowStore[K, V]) restorePayload(payload []byte, kgr dstl.KeyGroupRange, wipe bool) error {
	if s.disk != nil {
		return s.diskRestorePayload(payload, kgr, wipe)
	}
	var st int64
	var items []winItem[K, V]
	parse := func(d *decoder) {
		st, items = parseWindows(d, kgr, s.maxP, func(kb []byte, start int64, vb []byte) (winItem[K, V], error) {
			cur := winItem[K, V]{key: string(kb), start: start}
			var err error
			if cur.k, err = s.kc.Decode(kb); err != nil {
				return cur, fmt.Errorf("key: %w", err)
			}
			if cur.v, err = s.vc.Decode(vb); err != nil {
				return cur, fmt.Errorf("value: %w", err)
			}
			return cur, nil
		})
	}
	return s.loadPayload(payload, parse, func() {
		if wipe {
			s.tree.Clear(false)
			s.age.Clear(false)
			s.clearLocked()
		}
		for _, it := range items {
			s.tree.ReplaceOrInsert(it)
			s.age.ReplaceOrInsert(winAge{start: it.start, key: it.key})
		}
		s.advanceLocked(st)
		s.expireLocked()
		s.loggedStreamTime = max(s.loggedStreamTime, st)
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
