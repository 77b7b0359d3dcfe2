package statestore

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"

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

// A versioned store keeps, in its table, each version of each key (see
// disk.go for escaped keys and times):
//
//	escaped key, timestamp -> 0, encoded value   (a value)
//	                       -> 1                  (a deletion)
//
// and the stream time in memory (storeBase).
//
// History retention. After the store writes a version of a key, it deletes
// that key's versions that no query can reach any more (those before the
// one valid at the horizon); the other keys keep theirs until they change,
// and every read applies the horizon anyway (visible), so what they see
// does not depend on what was deleted. Finding them takes a seek in the
// key's versions; oldest, a lower bound of the timestamps in the table
// (lowered by every write, reset by Clear and a wiping restore), spares the
// seek while the horizon is not past it: a key then has at most one
// version at or before the horizon, which is reachable. A finer bound (per
// key group) would not spare more: once the horizon passes the oldest
// version of a key that no longer changes (it stays, as the version valid
// at the horizon), only a read of the whole key group could raise the
// bound.

// verRow is a row of a versioned store's table: a version of the key k,
// whose timestamp is in the row's key.
type verRow[K, V any] struct {
	k       K
	v       V
	deleted bool
}

// verCodec encodes a versioned store's rows for disk: 0 and the encoded
// value, or 1 for a deletion.
type verCodec[K, V any] struct {
	kc Codec[K]
	vc Codec[V]
}

// verDeleted is the encoding of a deletion.
var verDeleted = []byte{1}

func (c verCodec[K, V]) encode(dst []byte, r *verRow[K, V]) ([]byte, error) {
	if r.deleted {
		return append(dst, 1), nil
	}
	return c.vc.Encode(append(dst, 0), r.v)
}

func (c verCodec[K, V]) decode(key, value []byte, withKey bool) (r verRow[K, V], err error) {
	if withKey {
		kb, _, err := cutVersion(key)
		if err != nil {
			return r, err
		}
		if r.k, err = c.kc.Decode(kb); err != nil {
			return r, fmt.Errorf("key: %w", err)
		}
	}
	switch {
	case len(value) == 1 && value[0] == 1:
		r.deleted = true
	case len(value) >= 1 && value[0] == 0:
		if r.v, err = c.vc.Decode(value[1:]); err != nil {
			return r, fmt.Errorf("value: %w", err)
		}
	default:
		return r, errors.New("version: bad value flag")
	}
	return r, nil
}

// cutVersion decodes a version's key: the encoded key and the timestamp.
func cutVersion(key []byte) ([]byte, int64, error) {
	if len(key) < 2+8 {
		return nil, 0, fmt.Errorf("version key of %d bytes", len(key))
	}
	kb, rest, err := cutEscaped(key[:len(key)-8])
	if err == nil && len(rest) > 0 {
		err = errors.New("escaped key: trailing bytes")
	}
	if err != nil {
		return nil, 0, fmt.Errorf("version key: %w", err)
	}
	ts, err := readTime(key[len(key)-8:])
	return kb, ts, err
}

// VersionedStore keeps the values of each key at timestamps and answers what
// the value was as of a time, in the manner of Kafka Streams' versioned
// key-value stores. Its stream time is the largest timestamp put so far; the
// history retention bounds how far back queries reach: a put or a delete
// older than the stream time minus the history retention is dropped, a query
// as of such a time finds nothing, and versions no query can reach any more
// are removed. Every change is logged with its timestamp. It is safe for
// concurrent use.
//
// All reads the store as it was when the loop began. Registered with a
// Checkpointer whose Config.Dir is set, the store keeps its versions on
// disk, with the same results; if reading the disk fails, All stops and
// keeps the error for Err (which fails the next Flush and checkpoint).
type VersionedStore[K, V any] struct {
	storeBase
	kc        Codec[K]
	vc        Codec[V]
	retention int64
	t         table[verRow[K, V]]
	// oldest is a lower bound of the timestamps of the versions in the
	// table (see above).
	oldest int64
	// kscratch and hscratch hold keys being built, escratch an encoded
	// row, and pruned the keys a prune deletes.
	kscratch, hscratch, escratch, pruned []byte
	prunedAt                             []int
}

var _ internalStore = (*VersionedStore[string, string])(nil)

// NewVersionedStore returns an empty versioned store with the given
// history retention (>= 0).
func NewVersionedStore[K, V any](name string, log *dstl.Writer, keys Codec[K], values Codec[V], historyRetention int64, opts ...Option) (*VersionedStore[K, V], error) {
	if historyRetention < 0 {
		return nil, fmt.Errorf("statestore: store %q: history retention %d is negative", name, historyRetention)
	}
	s := &VersionedStore[K, V]{kc: keys, vc: values, retention: historyRetention, oldest: math.MaxInt64}
	if err := s.init(name, KindVersioned, versionedVersion, log, opts); err != nil {
		return nil, err
	}
	s.setTables(s.makeTables)
	return s, nil
}

// makeTables makes the store's table in its backing.
func (s *VersionedStore[K, V]) makeTables() []anyTable {
	s.t = newTable[verRow[K, V]](&s.storeBase, nil, verCodec[K, V]{s.kc, s.vc})
	return []anyTable{s.t}
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
	kb, kg, err := lockKey(&s.storeBase, s.kc, k)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := verRow[K, V]{k: k, v: v, deleted: deleted}
	var vb, enc []byte
	logged := s.logging.Load()
	switch {
	case deleted:
		enc = verDeleted
	default:
		if vb, logged, err = encodeLogged(&s.storeBase, s.vc, v); err != nil {
			return err
		}
		if logged {
			s.escratch = append(append(s.escratch[:0], 0), vb...)
			enc = s.escratch
		} else if enc, err = s.t.encoding(&r); err != nil {
			return err
		}
	}
	s.advanceLocked(ts)
	if ts < s.horizon() {
		return nil
	}
	if err := s.insertLocked(kg, kb, ts, r, enc, true); err != nil {
		return err
	}
	if logged {
		s.bufferLocked(Change{KeyGroup: kg, Key: kb, Value: vb, Tombstone: deleted, Timestamp: ts, HasTimestamp: true})
	}
	return nil
}

// insertLocked writes (or replaces) a version of the encoded key kb, then
// deletes the key's versions no query can reach.
func (s *VersionedStore[K, V]) insertLocked(kg int, kb []byte, ts int64, r verRow[K, V], enc []byte, encoded bool) error {
	s.oldest = min(s.oldest, ts)
	s.kscratch = appendTime(appendEscaped(s.kscratch[:0], kb), ts)
	if err := s.t.set(kg, string(s.kscratch), r, enc, encoded); err != nil {
		return err
	}
	return s.pruneLocked(kg, s.kscratch[:len(s.kscratch)-8])
}

// pruneLocked deletes the versions of the key whose versions start with p
// (of key group kg) that are older than the one valid at the horizon.
func (s *VersionedStore[K, V]) pruneLocked(kg int, p []byte) error {
	h := s.horizon()
	if h <= s.oldest {
		return nil
	}
	s.hscratch = append(appendTime(append(s.hscratch[:0], p...), h), 0)
	var err error
	if s.pruned, s.prunedAt, err = s.t.appendKeys(kg, p, s.hscratch, s.pruned[:0], s.prunedAt[:0]); err != nil {
		return err
	}
	// The last version at or before the horizon stays.
	return s.deleteKeysLocked(kg, len(s.prunedAt)-1)
}

// deleteKeysLocked deletes the first n keys of pruned, of key group kg.
func (s *VersionedStore[K, V]) deleteKeysLocked(kg, n int) error {
	from := 0
	for _, end := range s.prunedAt[:max(n, 0)] {
		if err := s.t.del(kg, s.pruned[from:end]); err != nil {
			return err
		}
		from = end
	}
	return nil
}

// deleteVersionsLocked deletes every version of the key whose versions
// start with p.
func (s *VersionedStore[K, V]) deleteVersionsLocked(kg int, p []byte) error {
	var err error
	if s.pruned, s.prunedAt, err = s.t.appendKeys(kg, p, prefixEnd(p), s.pruned[:0], s.prunedAt[:0]); err != nil {
		return err
	}
	return s.deleteKeysLocked(kg, len(s.prunedAt))
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
	kb, kg, err := lockKey(&s.storeBase, s.kc, k)
	if err != nil {
		return v, 0, false, err
	}
	defer s.mu.Unlock()
	if asOf < s.horizon() {
		return v, 0, false, nil
	}
	p := appendEscaped(s.kscratch[:0], kb)
	hi := append(appendTime(p, asOf), 0)
	s.kscratch = hi
	e, found, err := s.t.last(kg, p, hi)
	if err != nil || !found {
		return v, 0, false, err
	}
	if ts, err = readTime(e.key[len(p):]); err != nil {
		return v, 0, false, fmt.Errorf("statestore: store %q: %w", s.name, err)
	}
	if e.row.deleted {
		return v, ts, false, nil
	}
	return e.row.v, ts, true, nil
}

// History returns the versions of k that a query can still reach, oldest
// first, deletions included. It fails with ErrClosed once the store is
// closed.
func (s *VersionedStore[K, V]) History(k K) ([]Version[V], error) {
	kb, kg, err := lockKey(&s.storeBase, s.kc, k)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	p := appendEscaped(nil, kb)
	var vs []Version[V]
	for e, err := range s.t.scanIn(kg, p, prefixEnd(p), true) {
		if err != nil {
			return nil, err
		}
		ts, err := readTime(e.key[len(p):])
		if err != nil {
			return nil, fmt.Errorf("statestore: store %q: %w", s.name, err)
		}
		vs = append(vs, Version[V]{Timestamp: ts, Value: e.row.v, Deleted: e.row.deleted})
	}
	if vs = visible(vs, s.horizon()); len(vs) == 0 {
		return nil, nil
	}
	return vs, nil
}

// eachKey calls f with every key of v, in key order (the encoded key,
// valid during the call, and the decoded one) and its versions, in order,
// until f returns false. The versions are f's.
func (s *VersionedStore[K, V]) eachKey(v tableReader[verRow[K, V]], f func(kb []byte, k K, vs []Version[V]) bool) error {
	var cur, kb []byte // the escaped key of vs, and the key
	var k K
	var vs []Version[V]
	flush := func() (bool, error) {
		if len(vs) == 0 {
			return true, nil
		}
		var rest []byte
		var err error
		kb, rest, err = cutEscapedTo(kb[:0], cur)
		if err == nil && len(rest) > 0 {
			err = errors.New("escaped key: trailing bytes")
		}
		if err != nil {
			return false, fmt.Errorf("statestore: store %q: %w", s.name, err)
		}
		more := f(kb, k, vs)
		vs = nil
		return more, nil
	}
	for e, err := range v.scan(nil, nil, true) {
		if err != nil {
			return err
		}
		if len(e.key) < 2+8 {
			return fmt.Errorf("statestore: store %q: version key of %d bytes", s.name, len(e.key))
		}
		ek, ts := e.key[:len(e.key)-8], e.key[len(e.key)-8:]
		if !bytes.Equal(ek, cur) {
			if more, err := flush(); err != nil || !more {
				return err
			}
			cur, k = append(cur[:0], ek...), e.row.k
		}
		t, _ := readTime(ts)
		vs = append(vs, Version[V]{Timestamp: t, Value: e.row.v, Deleted: e.row.deleted})
	}
	_, err := flush()
	return err
}

// All yields every key with the versions a query can still reach, by key,
// as they were when the loop began. Keys whose reachable history is only a
// deletion are yielded too.
func (s *VersionedStore[K, V]) All() iter.Seq2[K, []Version[V]] {
	return func(yield func(K, []Version[V]) bool) {
		v, h, ok := openView(&s.storeBase, s.t, s.horizon)
		if !ok {
			return
		}
		defer v.release()
		err := s.eachKey(v, func(_ []byte, k K, vs []Version[V]) bool {
			return yield(k, visible(vs, h))
		})
		if err != nil {
			s.fail(s.readFailed(err))
		}
	}
}

// Len returns the number of keys with versions. It reads the whole store,
// and returns 0 once the store is closed.
func (s *VersionedStore[K, V]) Len() int {
	v, _, ok := openView(&s.storeBase, s.t, s.horizon)
	if !ok {
		return 0
	}
	defer v.release()
	n := 0
	var prev []byte
	for e, err := range v.scan(nil, nil, false) {
		if err == nil && len(e.key) < 2+8 {
			err = fmt.Errorf("version key of %d bytes", len(e.key))
		}
		if err != nil {
			s.fail(s.readFailed(err))
			return n
		}
		if ek := e.key[:len(e.key)-8]; n == 0 || !bytes.Equal(ek, prev) {
			n++
			prev = append(prev[:0], ek...)
		}
	}
	return n
}

// ApplyChange applies a change read back from the log without logging it.
// A logged version was accepted when it was put, so it is inserted whatever
// the stream time; versions no query can reach are dropped as usual.
func (s *VersionedStore[K, V]) ApplyChange(c Change) error {
	var terr error
	advance := func(ts int64) { s.advanceLocked(ts) }
	err := applyLogged(&s.storeBase, s.kc, s.vc, c, true, advance, func(kg int, k K, v V) {
		s.advanceLocked(c.Timestamp)
		enc := verDeleted
		if !c.Tombstone {
			s.escratch = append(append(s.escratch[:0], 0), c.Value...)
			enc = s.escratch
		}
		terr = s.insertLocked(kg, c.Key, c.Timestamp, verRow[K, V]{k: k, v: v, deleted: c.Tombstone}, enc, true)
	})
	if err != nil {
		return err
	}
	return terr
}

// Clear removes every key and buffered change and resets the stream time,
// logging nothing.
func (s *VersionedStore[K, V]) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oldest = math.MaxInt64
	s.clearTablesLocked()
}

// Snapshot encodes the store (kind "versioned", version 1): the stream time,
// the number of keys, then per key (by key) the key (length-prefixed), the
// number of reachable versions and each version's timestamp, a deletion flag
// byte and, unless deleted, its value (length-prefixed). It fails with
// ErrClosed once the store is closed.
func (s *VersionedStore[K, V]) Snapshot() ([]byte, error) { return snapshotOf(s) }

func (s *VersionedStore[K, V]) captureLocked() func() ([]byte, error) {
	h := s.horizon()
	return captureView(&s.storeBase, s.t, true, func(v tableView[verRow[K, V]], b []byte) ([]byte, int, error) {
		var vb, scratch []byte
		var eerr error
		n := 0
		err := s.eachKey(v, func(kb []byte, _ K, vs []Version[V]) bool {
			vs = visible(vs, h)
			b = appendBytes(b, kb)
			b = binary.AppendUvarint(b, uint64(len(vs)))
			for _, ver := range vs {
				b = binary.AppendVarint(b, ver.Timestamp)
				if ver.Deleted {
					b = append(b, 1)
					continue
				}
				if vb, eerr = encodeReusing(s.vc, &scratch, ver.Value); eerr != nil {
					return false
				}
				b = append(b, 0)
				b = appendBytes(b, vb)
			}
			n++
			return true
		})
		if err == nil {
			err = eerr
		}
		return b, n, err
	})
}

// RestoreSnapshot wipes the store and loads payload, keeping the keys of the
// store's key groups, without logging.
func (s *VersionedStore[K, V]) RestoreSnapshot(payload []byte) error {
	return s.restorePayload(payload, s.kgr, true)
}

// rawVersions is a key of a payload with its versions: the encoded key and
// values alias the payload.
type rawVersions[K, V any] struct {
	kb  []byte
	kg  int
	k   K
	vs  []Version[V]
	raw [][]byte // the encoded values of vs
}

func (s *VersionedStore[K, V]) restorePayload(payload []byte, kgr dstl.KeyGroupRange, wipe bool) error {
	var st int64
	var items []rawVersions[K, V]
	parse := func(d *decoder) {
		st, items = parseVersioned(d, kgr, s.maxP,
			func(kb []byte, nv int) (rawVersions[K, V], error) {
				it := rawVersions[K, V]{kb: kb, kg: KeyGroup(kb, s.maxP), vs: make([]Version[V], 0, nv), raw: make([][]byte, 0, nv)}
				var err error
				if it.k, err = s.kc.Decode(kb); err != nil {
					return it, fmt.Errorf("key: %w", err)
				}
				return it, nil
			},
			func(it *rawVersions[K, V], ver Version[[]byte]) error {
				v := Version[V]{Timestamp: ver.Timestamp, Deleted: ver.Deleted}
				if !ver.Deleted {
					var err error
					if v.Value, err = s.vc.Decode(ver.Value); err != nil {
						return fmt.Errorf("value: %w", err)
					}
				}
				it.vs, it.raw = append(it.vs, v), append(it.raw, ver.Value)
				return nil
			})
	}
	var ierr error
	if err := s.loadPayload(payload, parse, func() { ierr = s.installLocked(st, items, wipe) }); err != nil {
		return err
	}
	return ierr
}

// installLocked is the install step of restorePayload: each key of the
// payload replaces the versions the store had of it.
func (s *VersionedStore[K, V]) installLocked(st int64, items []rawVersions[K, V], wipe bool) error {
	if wipe {
		s.oldest = math.MaxInt64
		if err := s.clearTablesLocked(); err != nil {
			return err
		}
	}
	s.advanceLocked(st)
	s.loggedStreamTime = max(s.loggedStreamTime, st)
	h := s.horizon()
	for _, it := range items {
		if !s.kgr.Contains(it.kg) {
			continue // the table holds the store's key groups only
		}
		p := appendEscaped(nil, it.kb)
		if !wipe {
			if err := s.deleteVersionsLocked(it.kg, p); err != nil {
				return err
			}
		}
		vs := visible(it.vs, h)
		raw := it.raw[len(it.raw)-len(vs):]
		for i, ver := range vs {
			s.oldest = min(s.oldest, ver.Timestamp)
			enc := verDeleted
			if !ver.Deleted {
				enc = append([]byte{0}, raw[i]...)
			}
			r := verRow[K, V]{k: it.k, v: ver.Value, deleted: ver.Deleted}
			if err := s.t.set(it.kg, string(appendTime(bytes.Clone(p), ver.Timestamp)), r, enc, true); err != nil {
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
	return s.restoreStreamTimeThen(st, func() error {
		s.oldest = math.MinInt64
		return nil
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
