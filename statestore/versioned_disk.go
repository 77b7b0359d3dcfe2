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

// A versioned store on disk (Config.Dir) keeps, in each key group kg, each
// version of each key (see disk.go for the prefix, escaped keys and times):
//
//	diskPrefix(kg) escaped key, timestamp -> 0, encoded value   (a value)
//	                                      -> 1                  (a deletion)
//
// and the stream time in memory (storeBase). It keeps on disk the versions
// the memory store keeps.
//
// History retention. When the memory store inserts a version of a key, it
// drops the versions of that key no query can reach any more (those before
// the one valid at the horizon); the other keys keep theirs until they
// change, and every read applies the horizon anyway (visible). The disk
// store does the same: after it writes a version of a key, it deletes that
// key's unreachable versions (with diskDelete, so the changed keys are
// recorded). Reads apply the horizon as in memory, so what they see does
// not depend on what was deleted. Finding them takes a seek in the key's
// versions; s.oldest, a lower bound of the timestamps on disk (lowered by
// every write, reset by Clear and a wiping restore), spares the seek while
// the horizon is not past it: a key then has at most one version at or
// before the horizon, which is reachable. A finer bound (per key group)
// would not spare more: once the horizon passes the oldest version of a key
// that no longer changes (it stays, as the version valid at the horizon),
// only a read of the whole key group could raise the bound.

// attachDisk makes the store keep its versions in d. The store must be
// empty, without buffered changes.
func (s *VersionedStore[K, V]) attachDisk(d *diskstate.DB) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("statestore: store %q: keep on disk: %w", s.name, ErrClosed)
	case s.disk != nil:
		return fmt.Errorf("statestore: store %q: keeps its versions on disk already", s.name)
	case s.tree.Len() > 0 || s.buf.len() > 0:
		return fmt.Errorf("statestore: store %q: holds %d keys and %d buffered changes: only an empty store can keep its versions on disk",
			s.name, s.tree.Len(), s.buf.len())
	}
	s.oldest = math.MaxInt64
	s.disk = d
	return nil
}

// verPrefix appends the prefix of the versions of encoded key kb.
func (s *VersionedStore[K, V]) verPrefix(dst []byte, kg int, kb []byte) []byte {
	return appendEscaped(s.diskPrefix(dst, kg), kb)
}

// verValue is the value of a version on disk.
func verValue(ver Version[[]byte]) []byte {
	if ver.Deleted {
		return []byte{1}
	}
	return append([]byte{0}, ver.Value...)
}

// readVersion decodes a version from the timestamp of its key and its
// value; the version's value aliases value.
func readVersion(ts, value []byte) (Version[[]byte], error) {
	var ver Version[[]byte]
	if len(ts) != 8 {
		return ver, fmt.Errorf("version key: %d bytes of timestamp, want 8", len(ts))
	}
	ver.Timestamp, _ = readTime(ts)
	switch {
	case len(value) == 1 && value[0] == 1:
		ver.Deleted = true
	case len(value) >= 1 && value[0] == 0:
		ver.Value = value[1:]
	default:
		return ver, fmt.Errorf("version at %d: bad value flag", ver.Timestamp)
	}
	return ver, nil
}

// decodeVersions decodes the values of raw versions (nil for none).
func (s *VersionedStore[K, V]) decodeVersions(raw []Version[[]byte]) ([]Version[V], error) {
	if len(raw) == 0 {
		return nil, nil
	}
	vs := make([]Version[V], len(raw))
	for i, r := range raw {
		vs[i] = Version[V]{Timestamp: r.Timestamp, Deleted: r.Deleted}
		if r.Deleted {
			continue
		}
		var err error
		if vs[i].Value, err = s.vc.Decode(r.Value); err != nil {
			return nil, fmt.Errorf("statestore: store %q: value: %w", s.name, err)
		}
	}
	return vs, nil
}

func (s *VersionedStore[K, V]) diskChange(k K, v V, ts int64, deleted bool) error {
	kb, kg, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	var vb []byte
	if !deleted {
		if vb, err = s.vc.Encode(nil, v); err != nil {
			return fmt.Errorf("statestore: store %q: value: %w", s.name, err)
		}
	}
	logged := s.logging.Load()
	s.advanceLocked(ts)
	if ts < s.horizon() {
		return nil
	}
	if err := s.diskInsertLocked(kg, kb, Version[[]byte]{Timestamp: ts, Value: vb, Deleted: deleted}); err != nil {
		return err
	}
	if logged {
		s.bufferLocked(Change{KeyGroup: kg, Key: kb, Value: vb, Tombstone: deleted, Timestamp: ts, HasTimestamp: true})
	}
	return nil
}

// diskInsertLocked is insertLocked on disk: it writes (or replaces) a
// version, then deletes the key's versions no query can reach.
func (s *VersionedStore[K, V]) diskInsertLocked(kg int, kb []byte, ver Version[[]byte]) error {
	p := s.verPrefix(nil, kg, kb)
	s.oldest = min(s.oldest, ver.Timestamp)
	if err := s.diskSet(appendTime(bytes.Clone(p), ver.Timestamp), verValue(ver)); err != nil {
		return err
	}
	return s.diskPruneLocked(p)
}

// diskPruneLocked deletes the versions of the key whose versions start
// with p that are older than the one valid at the horizon.
func (s *VersionedStore[K, V]) diskPruneLocked(p []byte) (err error) {
	h := s.horizon()
	if h <= s.oldest {
		return nil
	}
	it, err := s.disk.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: append(appendTime(bytes.Clone(p), h), 0)})
	if err != nil {
		return fmt.Errorf("statestore: store %q: history retention: %w", s.name, err)
	}
	defer s.closeIter(it, &err)
	if !it.Last() {
		return nil // no version at or before the horizon
	}
	for ok := it.Prev(); ok; ok = it.Prev() {
		if err := s.diskDelete(it.Key()); err != nil {
			return err
		}
	}
	return nil
}

// diskDeleteVersions deletes every version of the key whose versions start
// with p.
func (s *VersionedStore[K, V]) diskDeleteVersions(p []byte) (err error) {
	it, err := s.disk.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return fmt.Errorf("statestore: store %q: %w", s.name, err)
	}
	defer s.closeIter(it, &err)
	for ok := it.First(); ok; ok = it.Next() {
		if err := s.diskDelete(it.Key()); err != nil {
			return err
		}
	}
	return nil
}

func (s *VersionedStore[K, V]) diskGetAsOf(k K, asOf int64) (v V, ts int64, ok bool, err error) {
	kb, kg, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return v, 0, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return v, 0, false, ErrClosed
	}
	if asOf < s.horizon() {
		return v, 0, false, nil
	}
	p := s.verPrefix(nil, kg, kb)
	it, err := s.disk.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: append(appendTime(bytes.Clone(p), asOf), 0)})
	if err != nil {
		return v, 0, false, fmt.Errorf("statestore: store %q: %w", s.name, err)
	}
	defer s.closeIter(it, &err)
	if !it.Last() {
		return v, 0, false, nil
	}
	ver, err := readVersion(it.Key()[len(p):], it.Value())
	if err != nil {
		return v, 0, false, fmt.Errorf("statestore: store %q: %w", s.name, err)
	}
	if ver.Deleted {
		return v, ver.Timestamp, false, nil
	}
	if v, err = s.vc.Decode(ver.Value); err != nil {
		return v, 0, false, fmt.Errorf("statestore: store %q: value: %w", s.name, err)
	}
	return v, ver.Timestamp, true, nil
}

func (s *VersionedStore[K, V]) diskHistory(k K) (vs []Version[V], err error) {
	kb, kg, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	p := s.verPrefix(nil, kg, kb)
	it, err := s.disk.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("statestore: store %q: %w", s.name, err)
	}
	var raw []Version[[]byte]
	for ok := it.First(); ok; ok = it.Next() {
		ver, err := readVersion(it.Key()[len(p):], bytes.Clone(it.Value()))
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("statestore: store %q: %w", s.name, err)
		}
		raw = append(raw, ver)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("statestore: store %q: read: %w", s.name, err)
	}
	return s.decodeVersions(visible(raw, s.horizon()))
}

// diskView takes, under the lock, a snapshot of the database and the
// horizon of that moment; ok is false when the store is closed (and the
// database may be). The caller closes the snapshot.
func (s *VersionedStore[K, V]) diskView() (snap *pebble.Snapshot, h int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, 0, false
	}
	return s.disk.NewSnapshot(), s.horizon(), true
}

// eachKey calls f with every key of snap, in key order, and its versions
// on disk, in order, until f returns false. The versions' values are f's.
func (s *VersionedStore[K, V]) eachKey(snap *pebble.Snapshot, f func(kb []byte, vs []Version[[]byte]) bool) error {
	var cur []byte // the escaped key of vs
	var vs []Version[[]byte]
	flush := func() (bool, error) {
		if len(vs) == 0 {
			return true, nil
		}
		kb, rest, err := cutEscaped(cur)
		if err == nil && len(rest) > 0 {
			err = errors.New("escaped key: trailing bytes")
		}
		if err != nil {
			return false, fmt.Errorf("statestore: store %q: %w", s.name, err)
		}
		more := f(kb, vs)
		vs = nil
		return more, nil
	}
	for e, err := range s.diskScanIn(snap, s.kgr, nil, nil) {
		if err != nil {
			return err
		}
		if len(e.suffix) < 2+8 {
			return fmt.Errorf("statestore: store %q: version key of %d bytes in key group %d", s.name, len(e.suffix), e.kg)
		}
		ek, ts := e.suffix[:len(e.suffix)-8], e.suffix[len(e.suffix)-8:]
		if !bytes.Equal(ek, cur) {
			if more, err := flush(); err != nil || !more {
				return err
			}
			cur = append(cur[:0], ek...)
		}
		ver, err := readVersion(ts, bytes.Clone(e.value))
		if err != nil {
			return fmt.Errorf("statestore: store %q: %w", s.name, err)
		}
		vs = append(vs, ver)
	}
	_, err := flush()
	return err
}

func (s *VersionedStore[K, V]) diskAll() iter.Seq2[K, []Version[V]] {
	return func(yield func(K, []Version[V]) bool) {
		snap, h, ok := s.diskView()
		if !ok {
			return
		}
		defer snap.Close()
		err := s.eachKey(snap, func(kb []byte, raw []Version[[]byte]) bool {
			k, err := s.kc.Decode(kb)
			if err != nil {
				s.fail(s.readFailed(fmt.Errorf("key: %w", err)))
				return false
			}
			vs, err := s.decodeVersions(visible(raw, h))
			if err != nil {
				s.fail(s.readFailed(err))
				return false
			}
			return yield(k, vs)
		})
		if err != nil {
			s.fail(s.readFailed(err))
			return
		}
	}
}

// diskLen counts the keys on disk.
func (s *VersionedStore[K, V]) diskLen() int {
	snap, _, ok := s.diskView()
	if !ok {
		return 0
	}
	defer snap.Close()
	n := 0
	var prev []byte
	for kg := s.kgr.Start; kg <= s.kgr.End; kg++ {
		p := s.diskPrefix(nil, kg)
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			s.fail(s.readFailed(err))
			return n
		}
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()
			if len(k) < len(p)+2+8 {
				_ = it.Close()
				s.fail(s.readFailed(fmt.Errorf("version key of %d bytes in key group %d", len(k), kg)))
				return n
			}
			if ek := k[len(p) : len(k)-8]; !bytes.Equal(ek, prev) {
				n++
				prev = append(prev[:0], ek...)
			}
		}
		if err := it.Close(); err != nil {
			s.fail(s.readFailed(err))
			return n
		}
		prev = prev[:0]
	}
	return n
}

func (s *VersionedStore[K, V]) diskApplyChange(c Change) error {
	var derr error
	advance := func(ts int64) { s.advanceLocked(ts) }
	err := applyLogged(&s.storeBase, s.kc, s.vc, c, true, advance, func(K, V) {
		s.advanceLocked(c.Timestamp)
		ver := Version[[]byte]{Timestamp: c.Timestamp, Value: c.Value, Deleted: c.Tombstone}
		derr = s.diskInsertLocked(KeyGroup(c.Key, s.maxP), c.Key, ver)
	})
	if err != nil {
		return err
	}
	return derr
}

func (s *VersionedStore[K, V]) diskClearStore() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oldest = math.MaxInt64
	s.diskClearLocked()
}

// diskCaptureLocked encodes the payload from a snapshot of the database
// taken now: the same payload as in memory.
func (s *VersionedStore[K, V]) diskCaptureLocked() func() ([]byte, error) {
	if s.closed {
		return func() ([]byte, error) { return nil, ErrClosed }
	}
	snap, st, h := s.disk.NewSnapshot(), s.streamTime, s.horizon()
	return func() ([]byte, error) {
		defer snap.Close()
		return s.encodePayload(func(b []byte) ([]byte, error) {
			b = binary.AppendVarint(b, st)
			var body []byte
			n := 0
			err := s.eachKey(snap, func(kb []byte, vs []Version[[]byte]) bool {
				vs = visible(vs, h)
				body = appendBytes(body, kb)
				body = binary.AppendUvarint(body, uint64(len(vs)))
				for _, ver := range vs {
					body = binary.AppendVarint(body, ver.Timestamp)
					if ver.Deleted {
						body = append(body, 1)
						continue
					}
					body = append(body, 0)
					body = appendBytes(body, ver.Value)
				}
				n++
				return true
			})
			if err != nil {
				return nil, err
			}
			b = binary.AppendUvarint(b, uint64(n))
			return append(b, body...), nil
		})
	}
}

// rawKey is a key of a payload with its versions, still encoded (aliasing
// the payload).
type rawKey struct {
	kb []byte
	kg int
	vs []Version[[]byte]
}

func (s *VersionedStore[K, V]) diskRestorePayload(payload []byte, kgr dstl.KeyGroupRange, wipe bool) error {
	var st int64
	var items []rawKey
	parse := func(d *decoder) {
		// Keys and values are decoded to reject what the memory store
		// rejects.
		st, items = parseVersioned(d, kgr, s.maxP,
			func(kb []byte, nv int) (rawKey, error) {
				if _, err := s.kc.Decode(kb); err != nil {
					return rawKey{}, fmt.Errorf("key: %w", err)
				}
				return rawKey{kb: kb, kg: KeyGroup(kb, s.maxP), vs: make([]Version[[]byte], 0, nv)}, nil
			},
			func(it *rawKey, ver Version[[]byte]) error {
				if !ver.Deleted {
					if _, err := s.vc.Decode(ver.Value); err != nil {
						return fmt.Errorf("value: %w", err)
					}
				}
				it.vs = append(it.vs, ver)
				return nil
			})
	}
	var ierr error
	if err := s.loadPayload(payload, parse, func() { ierr = s.diskInstallLocked(st, items, wipe) }); err != nil {
		return err
	}
	return ierr
}

// diskInstallLocked is the install step of restorePayload on disk: each key
// of the payload replaces the versions the store had of it.
func (s *VersionedStore[K, V]) diskInstallLocked(st int64, items []rawKey, wipe bool) error {
	if wipe {
		if err := s.diskClear(); err != nil {
			return err
		}
		s.oldest = math.MaxInt64
		s.clearLocked()
	}
	s.advanceLocked(st)
	s.loggedStreamTime = max(s.loggedStreamTime, st)
	h := s.horizon()
	for _, it := range items {
		if !s.kgr.Contains(it.kg) {
			continue // the disk holds the store's key groups only
		}
		p := s.verPrefix(nil, it.kg, it.kb)
		if !wipe {
			if err := s.diskDeleteVersions(p); err != nil {
				return err
			}
		}
		for _, ver := range visible(it.vs, h) {
			s.oldest = min(s.oldest, ver.Timestamp)
			if err := s.diskSet(appendTime(bytes.Clone(p), ver.Timestamp), verValue(ver)); err != nil {
				return err
			}
		}
	}
	return nil
}

// restoreStreamTime raises the stream time to st, a disk-backed snapshot's.
// The versions that snapshot's files brought have unknown timestamps: the
// bound becomes none-known (math.MinInt64).
func (s *VersionedStore[K, V]) restoreStreamTime(st int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.advanceLocked(st)
	s.loggedStreamTime = max(s.loggedStreamTime, st)
	if s.disk != nil {
		s.oldest = math.MinInt64
	}
	return nil
}
