package statestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"

	"github.com/google/btree"

	"github.com/dstlgo/dstl/dstl"
)

// kvVersion is the version of the key-value store's snapshot payload.
const kvVersion = 1

const btreeDegree = 32

type kvItem[K, V any] struct {
	key string // encoded key
	k   K
	v   V
}

func kvLess[K, V any](a, b kvItem[K, V]) bool { return a.key < b.key }

// KeyValueStore is a store of values by key, kept in the order of the keys'
// encodings. Put logs the key and value, Delete a tombstone. It is safe for
// concurrent use.
//
// Registered with a Checkpointer whose Config.Dir is set, the store keeps
// its entries on local disk rather than in memory, with the same behaviour
// but for what the methods' documentation says of a disk-backed store.
type KeyValueStore[K, V any] struct {
	storeBase
	kc   Codec[K]
	vc   Codec[V]
	tree *btree.BTreeG[kvItem[K, V]]
}

var _ internalStore = (*KeyValueStore[string, string])(nil)

// NewKeyValueStore returns an empty key-value store that logs to log (nil:
// it never logs). Its key groups are the log's, unless WithKeyGroups says
// otherwise.
func NewKeyValueStore[K, V any](name string, log *dstl.Writer, keys Codec[K], values Codec[V], opts ...Option) (*KeyValueStore[K, V], error) {
	s := &KeyValueStore[K, V]{kc: keys, vc: values, tree: btree.NewG(btreeDegree, kvLess[K, V])}
	if err := s.init(name, KindKeyValue, kvVersion, log, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// Put sets the value of k. A disk-backed store encodes the value whether
// logging is on or not, so a value that does not encode is an error either
// way.
func (s *KeyValueStore[K, V]) Put(k K, v V) error {
	kb, kg, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return err
	}
	if s.disk != nil {
		return s.diskPut(kb, kg, v)
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
	s.tree.ReplaceOrInsert(kvItem[K, V]{key: string(kb), k: k, v: v})
	if logged {
		s.buf = append(s.buf, Change{KeyGroup: kg, Key: kb, Value: vb})
	}
	return nil
}

// Get returns the value of k, and whether there is one.
func (s *KeyValueStore[K, V]) Get(k K) (V, bool, error) {
	var zero V
	kb, kg, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return zero, false, err
	}
	if s.disk != nil {
		return s.diskGetValue(kb, kg)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return zero, false, ErrClosed
	}
	it, ok := s.tree.Get(kvItem[K, V]{key: string(kb)})
	return it.v, ok, nil
}

// Delete removes k and logs a tombstone.
func (s *KeyValueStore[K, V]) Delete(k K) error {
	kb, kg, err := encodeKey(&s.storeBase, s.kc, k)
	if err != nil {
		return err
	}
	if s.disk != nil {
		return s.diskDel(kb, kg)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.tree.Delete(kvItem[K, V]{key: string(kb)})
	s.record(Change{KeyGroup: kg, Key: kb, Tombstone: true})
	return nil
}

// Len returns the number of keys. A disk-backed store counts them: Len
// reads the whole store on disk. An error that stops the count is kept for
// Err; after Close, a disk-backed store's Len is 0.
func (s *KeyValueStore[K, V]) Len() int {
	if s.disk != nil {
		return s.diskLen()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tree.Len()
}

// view returns a copy-on-write view of the tree: reading it needs no lock,
// and the store may change meanwhile.
func (s *KeyValueStore[K, V]) view() *btree.BTreeG[kvItem[K, V]] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tree.Clone()
}

// All yields every key and value in key order, as they were when All was
// called; the loop may change the store.
//
// A disk-backed store yields them as they were when the loop began (each
// loop over the result reads the store anew), in the order of the keys'
// encodings across key groups. An error reading the disk or decoding an
// entry stops the loop early; the store keeps it for Err, and fails Flush
// with it. After Close, the loop yields nothing (and Err is ErrClosed).
func (s *KeyValueStore[K, V]) All() iter.Seq2[K, V] {
	if s.disk != nil {
		return s.diskEntries(nil, nil)
	}
	t := s.view()
	return func(yield func(K, V) bool) {
		t.Ascend(func(it kvItem[K, V]) bool { return yield(it.k, it.v) })
	}
}

// Range yields the keys from from (included) to to (excluded), in key order,
// as they were when Range was called. A disk-backed store yields them as
// they were when the loop began; its errors are those of All.
func (s *KeyValueStore[K, V]) Range(from, to K) (iter.Seq2[K, V], error) {
	fb, err := s.kc.Encode(nil, from)
	if err != nil {
		return nil, fmt.Errorf("statestore: store %q: key: %w", s.name, err)
	}
	tb, err := s.kc.Encode(nil, to)
	if err != nil {
		return nil, fmt.Errorf("statestore: store %q: key: %w", s.name, err)
	}
	if s.disk != nil {
		return s.diskRange(fb, tb), nil
	}
	t := s.view()
	return func(yield func(K, V) bool) {
		t.AscendRange(kvItem[K, V]{key: string(fb)}, kvItem[K, V]{key: string(tb)}, func(it kvItem[K, V]) bool {
			return yield(it.k, it.v)
		})
	}, nil
}

// PrefixScan yields the keys whose encoding starts with the encoding of
// prefix, in key order, as they were when PrefixScan was called. A
// disk-backed store yields them as they were when the loop began; its
// errors are those of All.
func (s *KeyValueStore[K, V]) PrefixScan(prefix K) (iter.Seq2[K, V], error) {
	pb, err := s.kc.Encode(nil, prefix)
	if err != nil {
		return nil, fmt.Errorf("statestore: store %q: key: %w", s.name, err)
	}
	if s.disk != nil {
		return s.diskEntries(pb, prefixEnd(pb)), nil
	}
	t := s.view()
	return func(yield func(K, V) bool) {
		t.AscendGreaterOrEqual(kvItem[K, V]{key: string(pb)}, func(it kvItem[K, V]) bool {
			if len(it.key) < len(pb) || it.key[:len(pb)] != string(pb) {
				return false
			}
			return yield(it.k, it.v)
		})
	}, nil
}

// ApplyChange applies a put or a tombstone read back from the log, without
// logging it.
func (s *KeyValueStore[K, V]) ApplyChange(c Change) error {
	if s.disk != nil {
		return s.diskApplyChange(c)
	}
	return applyLogged(&s.storeBase, s.kc, s.vc, c, false, nil, func(k K, v V) {
		if c.Tombstone {
			s.tree.Delete(kvItem[K, V]{key: string(c.Key)})
			return
		}
		s.tree.ReplaceOrInsert(kvItem[K, V]{key: string(c.Key), k: k, v: v})
	})
}

// Clear removes every key and buffered change, logging nothing. A
// disk-backed store keeps an error deleting its entries for Err.
func (s *KeyValueStore[K, V]) Clear() {
	if s.disk != nil {
		s.diskClearStore()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tree.Clear(false)
	s.clearLocked()
}

// Snapshot encodes the store into one payload (kind "kv", version 1): the
// number of keys, then each key and value, length-prefixed, in key order.
// A disk-backed store reads the disk as it was when Snapshot was called,
// and fails with ErrClosed once closed.
func (s *KeyValueStore[K, V]) Snapshot() ([]byte, error) { return snapshotOf(s) }

func (s *KeyValueStore[K, V]) captureLocked() func() ([]byte, error) {
	if s.disk != nil {
		return s.diskCaptureLocked()
	}
	t := s.tree.Clone()
	return func() ([]byte, error) {
		return s.encodePayload(func(b []byte) ([]byte, error) {
			b = binary.AppendUvarint(b, uint64(t.Len()))
			var err error
			var vb []byte
			t.Ascend(func(it kvItem[K, V]) bool {
				if vb, err = s.vc.Encode(vb[:0], it.v); err != nil {
					return false
				}
				b = appendString(b, it.key)
				b = appendBytes(b, vb)
				return true
			})
			return b, err
		})
	}
}

// RestoreSnapshot wipes the store and loads payload, keeping the keys of the
// store's key groups, without logging.
func (s *KeyValueStore[K, V]) RestoreSnapshot(payload []byte) error {
	return s.restorePayload(payload, s.kgr, true)
}

func (s *KeyValueStore[K, V]) restorePayload(payload []byte, kgr dstl.KeyGroupRange, wipe bool) error {
	if s.disk != nil {
		return s.diskRestorePayload(payload, kgr, wipe)
	}
	var items []kvItem[K, V]
	parse := func(d *decoder) {
		n := d.count()
		items = make([]kvItem[K, V], 0, n)
		var prev []byte
		for i := 0; i < n && d.err == nil; i++ {
			kb, vb := d.bytes(), d.bytes()
			if d.err != nil {
				break
			}
			if i > 0 && bytes.Compare(prev, kb) >= 0 {
				d.fail(fmt.Errorf("keys out of order"))
				break
			}
			prev = kb
			if !kgr.Contains(KeyGroup(kb, s.maxP)) {
				continue
			}
			k, err := s.kc.Decode(kb)
			if err != nil {
				d.fail(fmt.Errorf("key: %w", err))
				break
			}
			v, err := s.vc.Decode(vb)
			if err != nil {
				d.fail(fmt.Errorf("value: %w", err))
				break
			}
			items = append(items, kvItem[K, V]{key: string(kb), k: k, v: v})
		}
	}
	return s.loadPayload(payload, parse, func() {
		if wipe {
			s.tree.Clear(false)
			s.clearLocked()
		}
		for _, it := range items {
			s.tree.ReplaceOrInsert(it)
		}
	})
}
