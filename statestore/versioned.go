package statestore

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"slices"

	"github.com/google/btree"

	"github.com/dstlgo/dstl/dstl"
)

// versionedVersion is the version of the versioned store's snapshot payload.
const versionedVersion = 1

// Version is one version of a key in a VersionedStore: its value from
// Timestamp on, until the next version's timestamp, or a deletion.
type Version[V any] struct {
	Timestamp int64
	Value     V
	Deleted   bool
}

type verItem[K, V any] struct {
	key string
	k   K
	vs  []Version[V] // by timestamp; never changed in place (copy-on-write)
}

func verLess[K, V any](a, b verItem[K, V]) bool { return a.key < b.key }

// VersionedStore keeps the values of each key at timestamps and answers what
// the value was as of a time, in the manner of Kafka Streams' versioned
// key-value stores. Its stream time is the largest timestamp put so far; the
// history retention bounds how far back queries reach: a put or a delete
// older than the stream time minus the history retention is dropped, a query
// as of such a time finds nothing, and versions no query can reach any more
// are removed. Every change is logged with its timestamp. It is safe for
// concurrent use.
//
// Registered with a Checkpointer whose Config.Dir is set, the store keeps
// its versions on disk, with the same results; All then reads the store as
// it was when the loop began, and if reading the disk fails it stops and
// keeps the error for Err (which fails the next Flush and checkpoint).
type VersionedStore[K, V any] struct {
	storeBase
	kc        Codec[K]
	vc        Codec[V]
	retention int64
	tree      *btree.BTreeG[verItem[K, V]]
	// oldest is a lower bound of the timestamps of the versions on disk
	// (versioned_disk.go).
	oldest int64
}

var _ internalStore = (*VersionedStore[string, string])(nil)

// NewVersionedStore returns an empty versioned store with the given
// history retention (>= 0).
func NewVersionedStore[K, V any](name string, log *dstl.Writer, keys Codec[K], values Codec[V], historyRetention int64, opts ...Option) (*VersionedStore[K, V], error) {
	if historyRetention < 0 {
		return nil, fmt.Errorf("statestore: store %q: history retention %d is negative", name, historyRetention)
	}
	s := &VersionedStore[K, V]{kc: keys, vc: values, retention: historyRetention,
		tree: btree.NewG(btreeDegree, verLess[K, V])}
	if err := s.init(name, KindVersioned, versionedVersion, log, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// HistoryRetention returns the history retention.
func (s *VersionedStore[K, V]) HistoryRetention() int64 { return s.retention }

// StreamTime returns the largest timestamp seen, or math.MinInt64.
func (s *VersionedStore[K, V]) StreamTime() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streamTime
}

// horizon returns the oldest time a query may ask about.
func (s *VersionedStore[K, V]) horizon() int64 {
	if s.streamTime < math.MinInt64+s.retention {
		return math.MinInt64
	}
	return s.streamTime - s.retention
}

// compareTimestamp orders a version against a time, for binary searches.
func compareTimestamp[V any](v Version[V], t int64) int { return cmp.Compare(v.Timestamp, t) }

// visible returns the versions a query can still reach at horizon h: the
// one valid at h and all later ones.
func visible[V any](vs []Version[V], h int64) []Version[V] {
	i, _ := slices.BinarySearchFunc(vs, h, compareTimestamp[V])
	// vs[i] is the first version at or after h; the one before it is
	// valid at h unless vs[i] starts exactly at h.
	if i > 0 && (i == len(vs) || vs[i].Timestamp > h) {
		i--
	}
	return vs[i:]
}

// Put records v as the value of k from ts on. It advances the stream time;
// a put older than the history retention allows is dropped (and not logged).
func (s *VersionedStore[K, V]) Put(k K, v V, ts int64) error {
	return s.change(k, v, ts, false)
}

// Delete records that k has no value from ts on (a tombstone version).
func (s *VersionedStore[K, V]) Delete(k K, ts int64) error {
	var zero V
	return s.change(k, zero, ts, true)
}

func (s *VersionedStore[K, V]) change(k K, v V, ts int64, deleted bool) error {
	if s.disk != nil {
		return s.diskChange(k, v, ts, deleted)
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
	var vb []byte
	logged := s.logging.Load()
	if !deleted {
		if vb, logged, err = encodeLogged(&s.storeBase, s.vc, v); err != nil {
			return err
		}
	}
	s.advanceLocked(ts)
	if ts < s.horizon() {
		return nil
	}
	s.insertLocked(string(kb), k, Version[V]{Timestamp: ts, Value: v, Deleted: deleted})
	if logged {
		s.bufferLocked(Change{KeyGroup: kg, Key: kb, Value: vb, Tombstone: deleted, Timestamp: ts, HasTimestamp: true})
	}
	return nil
}

// insertLocked adds (or replaces) a version and drops the versions no
// query can reach.
func (s *VersionedStore[K, V]) insertLocked(key string, k K, ver Version[V]) {
	it, ok := s.tree.Get(verItem[K, V]{key: key})
	if !ok {
		it = verItem[K, V]{key: key, k: k}
	}
	old := it.vs
	i, found := slices.BinarySearchFunc(old, ver.Timestamp, compareTimestamp[V])
	vs := make([]Version[V], 0, len(old)+1)
	vs = append(vs, old[:i]...)
	vs = append(vs, ver)
	if found {
		i++
	}
	vs = append(vs, old[i:]...)
	it.vs = visible(vs, s.horizon())
	s.tree.ReplaceOrInsert(it)
}

// Get returns the latest value of k and its timestamp; ok is false when k
// has none or its latest version is a deletion.
func (s *VersionedStore[K, V]) Get(k K) (v V, ts int64, ok bool, err error) {
	return s.GetAsOf(k, math.MaxInt64)
}

// GetAsOf returns the value k had at time asOf and the timestamp of that
// version; ok is false when it had none, when it was deleted, or when asOf
// is older than the history retention reaches.
func (s *VersionedStore[K, V]) GetAsOf(k K, asOf int64) (v V, ts int64, ok bool, err error) {
	if s.disk != nil {
		return s.diskGetAsOf(k, asOf)
	}
	kb, _, err := encodeKey(&s.storeBase, s.kc, k)
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
	it, found := s.tree.Get(verItem[K, V]{key: string(kb)})
	if !found {
		return v, 0, false, nil
	}
	for i := len(it.vs) - 1; i >= 0; i-- {
		if ver := it.vs[i]; ver.Timestamp <= asOf {
			if ver.Deleted {
				return v, ver.Timestamp, false, nil
			}
			return ver.Value, ver.Timestamp, true, nil
		}
	}
	return v, 0, false, nil
}

// History returns the versions of k that a query can still reach, oldest
// first, deletions included. On disk, it fails with ErrClosed once the
// store is closed.
func (s *VersionedStore[K, V]) History(k K) ([]Version[V], error) {
	if s.disk != nil {
		return s.diskHistory(k)
	}
	kb, _, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it, _ := s.tree.Get(verItem[K, V]{key: string(kb)})
	return slices.Clone(visible(it.vs, s.horizon())), nil
}

// All yields every key with the versions a query can still reach, by key,
// as they were when All was called (on disk: when the loop began).
// Keys whose reachable history is only a deletion are yielded too.
func (s *VersionedStore[K, V]) All() iter.Seq2[K, []Version[V]] {
	if s.disk != nil {
		return s.diskAll()
	}
	s.mu.Lock()
	t, h := s.tree.Clone(), s.horizon()
	s.mu.Unlock()
	return func(yield func(K, []Version[V]) bool) {
		t.Ascend(func(it verItem[K, V]) bool { return yield(it.k, slices.Clone(visible(it.vs, h))) })
	}
}

// Len returns the number of keys with versions. On disk, it reads the
// whole store (and returns 0 once the store is closed).
func (s *VersionedStore[K, V]) Len() int {
	if s.disk != nil {
		return s.diskLen()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tree.Len()
}

// ApplyChange applies a change read back from the log without logging it.
// A logged version was accepted when it was put, so it is inserted whatever
// the stream time; versions no query can reach are dropped as usual.
func (s *VersionedStore[K, V]) ApplyChange(c Change) error {
	if s.disk != nil {
		return s.diskApplyChange(c)
	}
	advance := func(ts int64) { s.advanceLocked(ts) }
	return applyLogged(&s.storeBase, s.kc, s.vc, c, true, advance, func(k K, v V) {
		s.advanceLocked(c.Timestamp)
		s.insertLocked(string(c.Key), k, Version[V]{Timestamp: c.Timestamp, Value: v, Deleted: c.Tombstone})
	})
}

// Clear removes every key and buffered change and resets the stream time,
// logging nothing.
func (s *VersionedStore[K, V]) Clear() {
	if s.disk != nil {
		s.diskClearStore()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tree.Clear(false)
	s.clearLocked()
}

// Snapshot encodes the store (kind "versioned", version 1): the stream time,
// the number of keys, then per key (by key) the key (length-prefixed), the
// number of reachable versions and each version's timestamp, a deletion flag
// byte and, unless deleted, its value (length-prefixed).
func (s *VersionedStore[K, V]) Snapshot() ([]byte, error) { return snapshotOf(s) }

func (s *VersionedStore[K, V]) captureLocked() func() ([]byte, error) {
	if s.disk != nil {
		return s.diskCaptureLocked()
	}
	t, st, h := s.tree.Clone(), s.streamTime, s.horizon()
	return func() ([]byte, error) {
		return s.encodePayload(func(b []byte) ([]byte, error) {
			b = binary.AppendVarint(b, st)
			b = binary.AppendUvarint(b, uint64(t.Len()))
			var err error
			var vb, scratch []byte
			t.Ascend(func(it verItem[K, V]) bool {
				vs := visible(it.vs, h)
				b = appendString(b, it.key)
				b = binary.AppendUvarint(b, uint64(len(vs)))
				for _, ver := range vs {
					b = binary.AppendVarint(b, ver.Timestamp)
					if ver.Deleted {
						b = append(b, 1)
						continue
					}
					if vb, err = encodeReusing(s.vc, &scratch, ver.Value); err != nil {
						return false
					}
					b = append(b, 0)
					b = appendBytes(b, vb)
				}
				return true
			})
			return b, err
		})
	}
}

// RestoreSnapshot wipes the store and loads payload, keeping the keys of the
// store's key groups, without logging.
func (s *VersionedStore[K, V]) RestoreSnapshot(payload []byte) error {
	return s.restorePayload(payload, s.kgr, true)
}

func (s *VersionedStore[K, V]) restorePayload(payload []byte, kgr dstl.KeyGroupRange, wipe bool) error {
	if s.disk != nil {
		return s.diskRestorePayload(payload, kgr, wipe)
	}
	var st int64
	var items []verItem[K, V]
	parse := func(d *decoder) {
		st, items = parseVersioned(d, kgr, s.maxP,
			func(kb []byte, nv int) (verItem[K, V], error) {
				it := verItem[K, V]{key: string(kb), vs: make([]Version[V], 0, nv)}
				var err error
				if it.k, err = s.kc.Decode(kb); err != nil {
					return it, fmt.Errorf("key: %w", err)
				}
				return it, nil
			},
			func(it *verItem[K, V], ver Version[[]byte]) error {
				v := Version[V]{Timestamp: ver.Timestamp, Deleted: ver.Deleted}
				if !ver.Deleted {
					var err error
					if v.Value, err = s.vc.Decode(ver.Value); err != nil {
						return fmt.Errorf("value: %w", err)
					}
				}
				it.vs = append(it.vs, v)
				return nil
			})
	}
	return s.loadPayload(payload, parse, func() {
		if wipe {
			s.tree.Clear(false)
			s.clearLocked()
		}
		s.advanceLocked(st)
		s.loggedStreamTime = max(s.loggedStreamTime, st)
		for _, it := range items {
			it.vs = visible(it.vs, s.horizon())
			s.tree.ReplaceOrInsert(it)
		}
	})
}

// parseVersioned decodes the body of a versioned payload: the stream time,
// then the keys, in order, each with its versions, in order. For each key of
// the key groups of kgr, it calls key with the encoded key and the number
// of versions, then add with each version (the value still encoded), in
// order; their errors fail d.
func parseVersioned[T any](d *decoder, kgr dstl.KeyGroupRange, maxP int, key func(kb []byte, nv int) (T, error), add func(it *T, ver Version[[]byte]) error) (int64, []T) {
	st := d.varint()
	n := d.count()
	items := make([]T, 0, n)
	var prev []byte
	for i := 0; i < n && d.err == nil; i++ {
		kb := d.bytes()
		nv := d.count()
		if d.err != nil {
			break
		}
		if (i > 0 && bytes.Compare(prev, kb) >= 0) || nv == 0 {
			d.fail(fmt.Errorf("keys out of order or without versions"))
			break
		}
		prev = kb
		mine := kgr.Contains(KeyGroup(kb, maxP))
		var it T
		if mine {
			var err error
			if it, err = key(kb, nv); err != nil {
				d.fail(err)
				break
			}
		}
		var prevTs int64
		for j := 0; j < nv && d.err == nil; j++ {
			ver := Version[[]byte]{Timestamp: d.varint()}
			switch d.byte() {
			case 0:
				ver.Value = d.bytes()
			case 1:
				ver.Deleted = true
			default:
				d.fail(fmt.Errorf("bad version flag"))
			}
			if mine && d.err == nil {
				if err := add(&it, ver); err != nil {
					d.fail(err) // ends both loops
				}
			}
			if j > 0 && d.err == nil && ver.Timestamp <= prevTs {
				d.fail(fmt.Errorf("versions out of order"))
			}
			prevTs = ver.Timestamp
		}
		if mine {
			items = append(items, it)
		}
	}
	return st, items
}
