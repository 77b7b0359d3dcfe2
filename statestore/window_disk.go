package statestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// A window store on disk (Config.Dir) keeps, in each key group kg, for
// each window (see disk.go for the prefix, escaped keys and times):
//
//	diskPrefix(kg) 0x00 escaped key, start -> encoded value  (the data)
//	diskPrefix(kg) 0x01 start, escaped key -> empty          (the expiry index)
//
// The stream time stays in memory (storeBase), as does, per key group, a
// lower bound of the window starts on disk (winBounds).
//
// Expiry. The memory store deletes the windows older than liveFrom whenever
// the stream time advances. On disk, looking for them in the expiry index of
// every key group on every advance would cost a seek per key group per put,
// most of them finding nothing. Instead:
//
//   - Reads decide by the stream time alone: a window whose start is before
//     liveFrom is absent to Get, Fetch, All, Len and Snapshot, whether or not
//     it is still on disk. What a read sees is thus exactly what the memory
//     store holds, whenever the physical removal runs (or if it failed: it
//     is retried at the next advance).
//   - oldest[kg] is a lower bound of the starts of kg's windows on disk (and
//     of the entries of kg's expiry index): a put or a restore lowers it to
//     the start it writes (never below liveFrom: older windows are dropped),
//     Delete leaves it (it stays a bound), Clear and a wiping restore reset
//     it to none (math.MaxInt64). Once kg's index was scanned up to
//     liveFrom, it is the start of the first window left: exact.
//   - When the stream time advances and liveFrom is not past the least of
//     the bounds, nothing on disk is expired: no I/O at all. Otherwise only
//     the key groups whose bound is below liveFrom are scanned, from their
//     bound (not over the deletions of earlier scans) up to liveFrom, and
//     both keys of each window found are deleted (with diskDelete, so the
//     changed keys are recorded). Each scan removes at least one window,
//     unless the window at the bound was deleted since. The I/O of expiry is
//     thus proportional to the windows it removes, plus one seek per key
//     group that holds one, as in memory; only the comparison of the
//     bounds, in memory, is proportional to the key groups, and only when
//     something expires.

// The two parts of a window store's keys in a key group.
const (
	winData  = 0x00
	winIndex = 0x01
)

// winBounds holds, per key group of the store (indexed from its first), a
// lower bound of the starts of the windows on disk (math.MaxInt64: none),
// and the least of them.
type winBounds struct {
	kg  []int64
	min int64
}

func (o *winBounds) reset() {
	for i := range o.kg {
		o.kg[i] = math.MaxInt64
	}
	o.min = math.MaxInt64
}

// attachDisk makes the store keep its windows in d. The store must be
// empty, without buffered changes.
func (s *WindowStore[K, V]) attachDisk(d *diskstate.DB) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("statestore: store %q: keep on disk: %w", s.name, ErrClosed)
	case s.disk != nil:
		return fmt.Errorf("statestore: store %q: keeps its windows on disk already", s.name)
	case s.tree.Len() > 0 || s.buf.len() > 0:
		return fmt.Errorf("statestore: store %q: holds %d windows and %d buffered changes: only an empty store can keep its windows on disk",
			s.name, s.tree.Len(), s.buf.len())
	}
	s.oldest.kg = make([]int64, s.kgr.End-s.kgr.Start+1)
	s.oldest.reset()
	s.disk = d
	return nil
}

// winDataKey appends the data key of the window of encoded key kb at start.
func (s *WindowStore[K, V]) winDataKey(dst []byte, kg int, kb []byte, start int64) []byte {
	dst = append(s.diskPrefix(dst, kg), winData)
	return appendTime(appendEscaped(dst, kb), start)
}

// winIndexKey appends the expiry index key of the window of kb at start.
func (s *WindowStore[K, V]) winIndexKey(dst []byte, kg int, kb []byte, start int64) []byte {
	dst = appendTime(append(s.diskPrefix(dst, kg), winIndex), start)
	return appendEscaped(dst, kb)
}

// cutWindow decodes the suffix of a data key: the encoded key and start.
func cutWindow(suffix []byte) ([]byte, int64, error) {
	if len(suffix) == 0 || suffix[0] != winData {
		return nil, 0, errors.New("window key: not a data key")
	}
	kb, rest, err := cutEscaped(suffix[1:])
	if err != nil {
		return nil, 0, fmt.Errorf("window key: %w", err)
	}
	if len(rest) != 8 {
		return nil, 0, fmt.Errorf("window key: %d bytes after the key, want 8", len(rest))
	}
	start, err := readTime(rest)
	return kb, start, err
}

// diskSetWindow writes a window: its index entry first, so that every
// window on disk is in the index, whatever fails.
func (s *WindowStore[K, V]) diskSetWindow(kg int, kb []byte, start int64, vb []byte) error {
	i := kg - s.kgr.Start
	s.oldest.kg[i] = min(s.oldest.kg[i], start)
	s.oldest.min = min(s.oldest.min, start)
	if err := s.diskSet(s.winIndexKey(nil, kg, kb, start), nil); err != nil {
		return err
	}
	return s.diskSet(s.winDataKey(nil, kg, kb, start), vb)
}

// diskRemoveWindow deletes a window: its data first, for the same reason.
func (s *WindowStore[K, V]) diskRemoveWindow(kg int, kb []byte, start int64) error {
	if err := s.diskDelete(s.winDataKey(nil, kg, kb, start)); err != nil {
		return err
	}
	return s.diskDelete(s.winIndexKey(nil, kg, kb, start))
}

// diskAdvanceLocked is advanceWindowsLocked on disk.
func (s *WindowStore[K, V]) diskAdvanceLocked(ts int64) error {
	if s.advanceLocked(ts) {
		return s.diskExpireLocked()
	}
	return nil
}

// diskExpireLocked removes from disk the windows expired at the stream time
// (see the top of this file).
func (s *WindowStore[K, V]) diskExpireLocked() error {
	live := s.liveFrom()
	if live <= s.oldest.min {
		return nil
	}
	least := int64(math.MaxInt64)
	for i, o := range s.oldest.kg {
		if o < live {
			next, err := s.expireGroupLocked(s.kgr.Start+i, o, live)
			if err != nil {
				return err // the bounds are still bounds: the next advance retries
			}
			s.oldest.kg[i] = next
		}
		least = min(least, s.oldest.kg[i])
	}
	s.oldest.min = least
	return nil
}

// expireGroupLocked deletes the windows of key group kg whose start is in
// [from, live) and returns the start of the first window left, or
// math.MaxInt64.
func (s *WindowStore[K, V]) expireGroupLocked(kg int, from, live int64) (next int64, err error) {
	p := s.diskPrefix(nil, kg)
	ip := append(bytes.Clone(p), winIndex)
	it, err := s.disk.NewIter(&pebble.IterOptions{LowerBound: appendTime(bytes.Clone(ip), from), UpperBound: prefixEnd(ip)})
	if err != nil {
		return 0, fmt.Errorf("statestore: store %q: expiry in key group %d: %w", s.name, kg, err)
	}
	defer s.closeIter(it, &err)
	var dk []byte
	for ok := it.First(); ok; ok = it.Next() {
		rest := it.Key()[len(ip):]
		start, err := readTime(rest)
		if err != nil {
			return 0, fmt.Errorf("statestore: store %q: expiry index of key group %d: %w", s.name, kg, err)
		}
		if start >= live {
			return start, nil
		}
		dk = appendTime(append(append(append(dk[:0], p...), winData), rest[8:]...), start)
		if err := s.diskDelete(dk); err != nil {
			return 0, err
		}
		if err := s.diskDelete(it.Key()); err != nil {
			return 0, err
		}
	}
	return math.MaxInt64, nil
}

// closeIter closes it and keeps its error in *err unless one is there.
func (b *storeBase) closeIter(it *pebble.Iterator, err *error) {
	if cerr := it.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("statestore: store %q: read: %w", b.name, cerr)
	}
}

// readFailed is the error that ends a loop over the disk that has no error
// to return (All, Fetch, Len): reading the database, or decoding what the
// store wrote there, failed. The loop keeps it for Err (fail) and stops.
func (b *storeBase) readFailed(err error) error {
	return fmt.Errorf("statestore: store %q: read from disk: %w", b.name, err)
}

func (s *WindowStore[K, V]) diskPut(k K, start int64, v V) error {
	kb, kg, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	vb, err := s.vc.Encode(nil, v)
	if err != nil {
		return fmt.Errorf("statestore: store %q: value: %w", s.name, err)
	}
	logged := s.logging.Load()
	put, err := s.diskPutLocked(kg, kb, start, vb)
	if err != nil {
		return err
	}
	if put && logged {
		s.bufferLocked(Change{KeyGroup: kg, Key: kb, Value: vb, Timestamp: start, HasTimestamp: true})
	}
	return nil
}

// diskPutLocked is putLocked on disk.
func (s *WindowStore[K, V]) diskPutLocked(kg int, kb []byte, start int64, vb []byte) (bool, error) {
	if err := s.diskAdvanceLocked(start); err != nil {
		return false, err
	}
	if start < s.liveFrom() {
		return false, nil
	}
	return true, s.diskSetWindow(kg, kb, start, vb)
}

func (s *WindowStore[K, V]) diskDeleteWindow(k K, start int64) error {
	kb, kg, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.diskRemoveWindow(kg, kb, start); err != nil {
		return err
	}
	s.record(Change{KeyGroup: kg, Key: kb, Tombstone: true, Timestamp: start, HasTimestamp: true})
	return nil
}

func (s *WindowStore[K, V]) diskGetWindow(k K, start int64) (V, bool, error) {
	var zero V
	kb, kg, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return zero, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return zero, false, ErrClosed
	}
	if start < s.liveFrom() {
		return zero, false, nil
	}
	vb, ok, err := s.diskGet(s.winDataKey(nil, kg, kb, start))
	if err != nil || !ok {
		return zero, false, err
	}
	v, err := s.vc.Decode(vb)
	if err != nil {
		return zero, false, fmt.Errorf("statestore: store %q: value: %w", s.name, err)
	}
	return v, true, nil
}

// diskView takes, under the lock, a snapshot of the database and the
// liveFrom of that moment; ok is false when the store is closed (and the
// database may be). The caller closes the snapshot.
func (s *WindowStore[K, V]) diskView() (snap *pebble.Snapshot, live int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, 0, false
	}
	return s.disk.NewSnapshot(), s.liveFrom(), true
}

func (s *WindowStore[K, V]) diskFetch(k K, from, to int64) (iter.Seq2[int64, V], error) {
	kb, kg, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return nil, err
	}
	p := appendEscaped(append(s.diskPrefix(nil, kg), winData), kb)
	return func(yield func(int64, V) bool) {
		snap, live, ok := s.diskView()
		if !ok {
			return
		}
		defer snap.Close()
		lo := max(from, live)
		if lo > to {
			return
		}
		it, err := snap.NewIter(&pebble.IterOptions{
			LowerBound: appendTime(bytes.Clone(p), lo),
			UpperBound: append(appendTime(bytes.Clone(p), to), 0),
		})
		if err != nil {
			s.fail(s.readFailed(err))
			return
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			start, err := readTime(it.Key()[len(p):])
			if err != nil {
				s.fail(s.readFailed(err))
				return
			}
			v, err := s.vc.Decode(it.Value())
			if err != nil {
				s.fail(s.readFailed(fmt.Errorf("value: %w", err)))
				return
			}
			if !yield(start, v) {
				return
			}
		}
		if err := it.Error(); err != nil {
			s.fail(s.readFailed(err))
			return
		}
	}, nil
}

func (s *WindowStore[K, V]) diskAll() iter.Seq2[Windowed[K], V] {
	return func(yield func(Windowed[K], V) bool) {
		snap, live, ok := s.diskView()
		if !ok {
			return
		}
		defer snap.Close()
		for e, err := range s.diskScanIn(snap, s.kgr, []byte{winData}, []byte{winIndex}) {
			if err != nil {
				s.fail(s.readFailed(err))
				return
			}
			kb, start, err := cutWindow(e.suffix)
			if err != nil {
				s.fail(s.readFailed(err))
				return
			}
			if start < live {
				continue
			}
			w := Windowed[K]{Start: start}
			if w.Key, err = s.kc.Decode(kb); err != nil {
				s.fail(s.readFailed(fmt.Errorf("key: %w", err)))
				return
			}
			v, err := s.vc.Decode(e.value)
			if err != nil {
				s.fail(s.readFailed(fmt.Errorf("value: %w", err)))
				return
			}
			if !yield(w, v) {
				return
			}
		}
	}
}

// diskLen counts the windows on disk that are not expired.
func (s *WindowStore[K, V]) diskLen() int {
	snap, live, ok := s.diskView()
	if !ok {
		return 0
	}
	defer snap.Close()
	n := 0
	for kg := s.kgr.Start; kg <= s.kgr.End; kg++ {
		p := append(s.diskPrefix(nil, kg), winData)
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			s.fail(s.readFailed(err))
			return n
		}
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()
			if len(k) < len(p)+2+8 {
				_ = it.Close()
				s.fail(s.readFailed(fmt.Errorf("window key of %d bytes in key group %d", len(k), kg)))
				return n
			}
			if start, _ := readTime(k[len(k)-8:]); start >= live {
				n++
			}
		}
		if err := it.Close(); err != nil {
			s.fail(s.readFailed(err))
			return n
		}
	}
	return n
}

func (s *WindowStore[K, V]) diskApplyChange(c Change) error {
	var derr error
	err := applyLogged(&s.storeBase, s.kc, s.vc, c, true,
		func(ts int64) { derr = s.diskAdvanceLocked(ts) },
		func(K, V) {
			kg := KeyGroup(c.Key, s.maxP)
			if c.Tombstone {
				derr = s.diskRemoveWindow(kg, c.Key, c.Timestamp)
				return
			}
			_, derr = s.diskPutLocked(kg, c.Key, c.Timestamp, c.Value)
		})
	if err != nil {
		return err
	}
	return derr
}

func (s *WindowStore[K, V]) diskClearStore() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oldest.reset()
	s.diskClearLocked()
}

// diskCaptureLocked encodes the payload from a snapshot of the database
// taken now: the same payload as in memory.
func (s *WindowStore[K, V]) diskCaptureLocked() func() ([]byte, error) {
	if s.closed {
		return func() ([]byte, error) { return nil, ErrClosed }
	}
	snap, st, live := s.disk.NewSnapshot(), s.streamTime, s.liveFrom()
	return func() ([]byte, error) {
		defer snap.Close()
		return s.encodePayload(func(b []byte) ([]byte, error) {
			b = binary.AppendVarint(b, st)
			var body []byte
			n := 0
			for e, err := range s.diskScanIn(snap, s.kgr, []byte{winData}, []byte{winIndex}) {
				if err != nil {
					return nil, err
				}
				kb, start, err := cutWindow(e.suffix)
				if err != nil {
					return nil, err
				}
				if start < live {
					continue
				}
				body = appendBytes(body, kb)
				body = binary.AppendVarint(body, start)
				body = appendBytes(body, e.value)
				n++
			}
			b = binary.AppendUvarint(b, uint64(n))
			return append(b, body...), nil
		})
	}
}

// rawWindow is a window of a payload, still encoded (aliasing the payload).
type rawWindow struct {
	kb    []byte
	kg    int
	start int64
	vb    []byte
}

func (s *WindowStore[K, V]) diskRestorePayload(payload []byte, kgr dstl.KeyGroupRange, wipe bool) error {
	var st int64
	var items []rawWindow
	parse := func(d *decoder) {
		st, items = parseWindows(d, kgr, s.maxP, func(kb []byte, start int64, vb []byte) (rawWindow, error) {
			// Decoded to reject what the memory store rejects.
			if _, err := s.kc.Decode(kb); err != nil {
				return rawWindow{}, fmt.Errorf("key: %w", err)
			}
			if _, err := s.vc.Decode(vb); err != nil {
				return rawWindow{}, fmt.Errorf("value: %w", err)
			}
			return rawWindow{kb: kb, kg: KeyGroup(kb, s.maxP), start: start, vb: vb}, nil
		})
	}
	var ierr error
	if err := s.loadPayload(payload, parse, func() { ierr = s.diskInstallLocked(st, items, wipe) }); err != nil {
		return err
	}
	return ierr
}

// diskInstallLocked is the install step of restorePayload on disk.
func (s *WindowStore[K, V]) diskInstallLocked(st int64, items []rawWindow, wipe bool) error {
	if wipe {
		if err := s.diskClear(); err != nil {
			return err
		}
		s.oldest.reset()
		s.clearLocked()
	}
	s.advanceLocked(st)
	s.loggedStreamTime = max(s.loggedStreamTime, st)
	live := s.liveFrom()
	for _, it := range items {
		// A window expired at the restored stream time is one the memory
		// store drops at once; the disk holds the store's key groups only
		// (kgr is within them when the checkpointer restores).
		if it.start < live || !s.kgr.Contains(it.kg) {
			continue
		}
		if err := s.diskSetWindow(it.kg, it.kb, it.start, it.vb); err != nil {
			return err
		}
	}
	return s.diskExpireLocked()
}

// restoreStreamTime raises the stream time to st, a disk-backed snapshot's.
// The windows that snapshot's files brought have unknown starts: the
// bounds become none-known (math.MinInt64), so that expiry scans every key
// group once.
func (s *WindowStore[K, V]) restoreStreamTime(st int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.advanceLocked(st)
	s.loggedStreamTime = max(s.loggedStreamTime, st)
	if s.disk == nil {
		s.expireLocked()
		return nil
	}
	for i := range s.oldest.kg {
		s.oldest.kg[i] = math.MinInt64
	}
	s.oldest.min = math.MinInt64
	return s.diskExpireLocked()
}
