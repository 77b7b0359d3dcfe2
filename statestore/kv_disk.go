package statestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// A disk-backed KeyValueStore (Config.Dir) keeps each entry in the
// checkpointer's database under the store's prefix in the key's key group
// followed by the encoded key (see disk.go); the value is the encoded
// value. Writes hold the store's lock, as in memory, so that the order of
// the log is the order in which the database applied the changes.

// restoreBatchBytes bounds the batches that a restore writes.
const restoreBatchBytes = 4 << 20

// attachDisk makes the store keep its entries in d. The store must hold no
// entries and no buffered changes: those would stay in memory, out of
// every read.
func (s *KeyValueStore[K, V]) attachDisk(d *diskstate.DB) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.disk == d:
		return nil
	case s.disk != nil:
		return fmt.Errorf("statestore: store %q: keeps its entries in another database already", s.name)
	case s.tree.Len() > 0 || s.buf.len() > 0:
		return fmt.Errorf("statestore: store %q: holds %d keys and %d buffered changes: register it with the checkpointer before using it",
			s.name, s.tree.Len(), s.buf.len())
	}
	s.disk = d
	return nil
}

// diskKey returns the database key of the encoded key kb of key group kg.
func (s *KeyValueStore[K, V]) diskKey(kg int, kb []byte) []byte {
	k := s.diskPrefix(make([]byte, 0, diskstate.KeyGroupBytes+1+len(s.name)+len(kb)), kg)
	return append(k, kb...)
}

func (s *KeyValueStore[K, V]) diskPut(kb []byte, kg int, v V) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	vb, err := s.vc.Encode(nil, v)
	if err != nil {
		return fmt.Errorf("statestore: store %q: value: %w", s.name, err)
	}
	if err := s.diskSet(s.diskKey(kg, kb), vb); err != nil {
		return err
	}
	s.record(Change{KeyGroup: kg, Key: kb, Value: vb})
	return nil
}

func (s *KeyValueStore[K, V]) diskGetValue(kb []byte, kg int) (V, bool, error) {
	var zero V
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return zero, false, ErrClosed
	}
	vb, ok, err := s.diskGet(s.diskKey(kg, kb))
	if err != nil || !ok {
		return zero, false, err
	}
	v, err := s.vc.Decode(vb)
	if err != nil {
		return zero, false, fmt.Errorf("statestore: store %q: value of key %q in key group %d: %w", s.name, kb, kg, err)
	}
	return v, true, nil
}

func (s *KeyValueStore[K, V]) diskDel(kb []byte, kg int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.diskDelete(s.diskKey(kg, kb)); err != nil {
		return err
	}
	s.record(Change{KeyGroup: kg, Key: kb, Tombstone: true})
	return nil
}

// diskSnapshot takes a snapshot of the database under the store's lock,
// or fails with ErrClosed: the database of a closed store may be closed.
func (s *KeyValueStore[K, V]) diskSnapshot() (*pebble.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	return s.disk.NewSnapshot(), nil
}

func (s *KeyValueStore[K, V]) diskLen() int {
	snap, err := s.diskSnapshot()
	if err != nil {
		s.fail(err)
		return 0
	}
	defer snap.Close()
	n := 0
	for kg := s.kgr.Start; kg <= s.kgr.End; kg++ {
		p := s.diskPrefix(nil, kg)
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err == nil {
			for ok := it.First(); ok; ok = it.Next() {
				n++
			}
			err = it.Close()
		}
		if err != nil {
			s.fail(fmt.Errorf("statestore: store %q: count key group %d: %w", s.name, kg, err))
			return n
		}
	}
	return n
}

// diskEntries yields the decoded entries whose encoded keys are in
// [lower, upper) (upper nil: no bound), across the store's key groups in
// the order of the encoded keys, as they are when the loop begins. An error
// stops the loop and is kept for Err.
func (s *KeyValueStore[K, V]) diskEntries(lower, upper []byte) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		snap, err := s.diskSnapshot()
		if err != nil {
			s.fail(err)
			return
		}
		defer snap.Close()
		for e, err := range s.diskScanIn(snap, s.kgr, lower, upper) {
			if err != nil {
				s.fail(err)
				return
			}
			k, err := s.kc.Decode(e.suffix)
			if err != nil {
				s.fail(fmt.Errorf("statestore: store %q: key %q in key group %d: %w", s.name, e.suffix, e.kg, err))
				return
			}
			v, err := s.vc.Decode(e.value)
			if err != nil {
				s.fail(fmt.Errorf("statestore: store %q: value of key %q in key group %d: %w", s.name, e.suffix, e.kg, err))
				return
			}
			if !yield(k, v) {
				return
			}
		}
	}
}

func (s *KeyValueStore[K, V]) diskRange(fb, tb []byte) iter.Seq2[K, V] {
	if bytes.Compare(fb, tb) >= 0 {
		return func(func(K, V) bool) {}
	}
	return s.diskEntries(fb, tb)
}

func (s *KeyValueStore[K, V]) diskApplyChange(c Change) error {
	var err error
	aerr := applyLogged(&s.storeBase, s.kc, s.vc, c, false, nil, func(K, V) {
		key := s.diskKey(KeyGroup(c.Key, s.maxP), c.Key)
		if c.Tombstone {
			err = s.diskDelete(key)
			return
		}
		err = s.diskSet(key, c.Value)
	})
	if aerr != nil {
		return aerr
	}
	return err
}

func (s *KeyValueStore[K, V]) diskClearStore() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.diskClearLocked()
}

// diskCaptureLocked takes a snapshot of the database (the caller holds the
// lock) and returns the function that encodes the payload from it, the
// same payload as in memory: the stored values are the codec's encodings.
func (s *KeyValueStore[K, V]) diskCaptureLocked() func() ([]byte, error) {
	if s.closed {
		return func() ([]byte, error) { return nil, ErrClosed }
	}
	snap := s.disk.NewSnapshot()
	return func() ([]byte, error) {
		defer snap.Close()
		return s.encodePayload(func(b []byte) ([]byte, error) {
			// The count comes first: the entries go to a buffer
			// of their own until it is known.
			var entries []byte
			n := 0
			for e, err := range s.diskScanIn(snap, s.kgr, nil, nil) {
				if err != nil {
					return nil, err
				}
				entries = appendBytes(entries, e.suffix)
				entries = appendBytes(entries, e.value)
				n++
			}
			b = binary.AppendUvarint(b, uint64(n))
			return append(b, entries...), nil
		})
	}
}

// diskRestorePayload checks and decodes the whole payload before it
// changes anything, then writes the entries of kgr in batches.
func (s *KeyValueStore[K, V]) diskRestorePayload(payload []byte, kgr dstl.KeyGroupRange, wipe bool) error {
	type entry struct {
		kg     int
		kb, vb []byte // alias the payload
	}
	var entries []entry
	parse := func(d *decoder) {
		n := d.count()
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
			kg := KeyGroup(kb, s.maxP)
			if !kgr.Contains(kg) {
				continue
			}
			if _, err := s.kc.Decode(kb); err != nil {
				d.fail(fmt.Errorf("key: %w", err))
				break
			}
			if _, err := s.vc.Decode(vb); err != nil {
				d.fail(fmt.Errorf("value: %w", err))
				break
			}
			entries = append(entries, entry{kg: kg, kb: kb, vb: vb})
		}
	}
	var err error
	lerr := s.loadPayload(payload, parse, func() {
		if wipe {
			err = s.diskClear()
			s.clearLocked()
			if err != nil {
				return
			}
		}
		batch := s.disk.NewBatch()
		defer func() { _ = batch.Close() }()
		var keys [][]byte
		for i, e := range entries {
			key := s.diskKey(e.kg, e.kb)
			if err = batch.Set(key, e.vb, nil); err != nil {
				break
			}
			keys = append(keys, key)
			if batch.Len() < restoreBatchBytes && i < len(entries)-1 {
				continue
			}
			if err = batch.Commit(pebble.NoSync); err != nil {
				break
			}
			for _, k := range keys {
				s.disk.Touch(k)
			}
			keys = keys[:0]
			batch.Reset()
		}
		if err != nil {
			// What was committed stays: the store holds part of the
			// payload, which no later call must commit.
			s.disk.TouchAll()
			err = fmt.Errorf("statestore: store %q: restore: %w", s.name, err)
			s.failLocked(err)
		}
	})
	if lerr != nil {
		return lerr
	}
	return err
}
