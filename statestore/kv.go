package statestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"
	"strings"
	"unsafe"

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
	// strKeys: the keys are strings and their codec StringCodec, so a
	// key is its own encoding, used as it is. strValues: so are the
	// values.
	strKeys, strValues bool
	// replay gathers the changes of a restore (replayChange) until
	// endReplay applies them.
	replay kvReplay[K, V]
}

// kvReplay is what a restore's replay of the log gathered and did not
// apply yet: the last change of each key, by key.
type kvReplay[K, V any] struct {
	index map[string]int // encoded key: its change in ops
	// ops are the changes, in chunks of replayChunk (never copied as
	// they grow); n counts them.
	ops [][]kvReplayOp[K, V]
	n   int
	// values holds the string values (strValues) of ops, undecoded, in
	// chunks of replayValueChunk bytes or more: decoding them (a copy,
	// which cannot fail) waits for the last change of each key.
	// valueBytes counts the bytes of the slots taken in values, those that
	// later values outgrew included.
	values     [][]byte
	valueBytes int
}

type kvReplayOp[K, V any] struct {
	it  kvItem[K, V]
	del bool
	// chunk, off, n and room locate the value in values (strValues):
	// room is what the slot holds, which a later value reuses if it fits.
	chunk, off, n, room int
}

const (
	replayChunk      = 1 << 12
	replayValueChunk = 1 << 20
)

// op returns change i.
func (r *kvReplay[K, V]) op(i int) *kvReplayOp[K, V] {
	return &r.ops[i/replayChunk][i%replayChunk]
}

// add appends a change and returns its index.
func (r *kvReplay[K, V]) add(op kvReplayOp[K, V]) int {
	if r.n%replayChunk == 0 {
		r.ops = append(r.ops, make([]kvReplayOp[K, V], 0, replayChunk))
	}
	last := &r.ops[len(r.ops)-1]
	*last = append(*last, op)
	r.n++
	return r.n - 1
}

// setValue keeps v as op's value, in its slot if it fits.
func (r *kvReplay[K, V]) setValue(op *kvReplayOp[K, V], v []byte) {
	if len(v) == 0 {
		op.n = 0 // no slot needed: value reads nothing
		return
	}
	if len(v) <= op.room {
		copy(r.values[op.chunk][op.off:], v)
		op.n = len(v)
		return
	}
	if last := len(r.values) - 1; op.room > 0 && op.chunk == last && op.off+op.room == len(r.values[last]) && op.off+len(v) <= cap(r.values[last]) {
		// The slot ends the last chunk: it grows in place.
		r.values[last] = append(r.values[last][:op.off], v...)
		r.valueBytes += len(v) - op.room
		op.n, op.room = len(v), len(v)
		return
	}
	if len(r.values) == 0 || len(r.values[len(r.values)-1])+len(v) > cap(r.values[len(r.values)-1]) {
		r.values = append(r.values, make([]byte, 0, max(replayValueChunk, len(v))))
	}
	c := &r.values[len(r.values)-1]
	op.chunk, op.off, op.n, op.room = len(r.values)-1, len(*c), len(v), len(v)
	*c = append(*c, v...)
	r.valueBytes += len(v)
}

// value returns op's value.
func (r *kvReplay[K, V]) value(op *kvReplayOp[K, V]) []byte {
	if op.n == 0 {
		return nil
	}
	return r.values[op.chunk][op.off : op.off+op.n]
}

// maxReplayOps bounds the keys a replay gathers before it applies them,
// and maxReplayValueBytes the bytes of string values it holds (a variable
// so that tests can lower it).
var (
	maxReplayOps        = 1 << 20
	maxReplayValueBytes = 64 << 20
)

var _ internalStore = (*KeyValueStore[string, string])(nil)

// NewKeyValueStore returns an empty key-value store that logs to log (nil:
// it never logs). Its key groups are the log's, unless WithKeyGroups says
// otherwise.
func NewKeyValueStore[K, V any](name string, log *dstl.Writer, keys Codec[K], values Codec[V], opts ...Option) (*KeyValueStore[K, V], error) {
	s := &KeyValueStore[K, V]{kc: keys, vc: values, tree: btree.NewG(btreeDegree, kvLess[K, V])}
	var zk K
	_, strCodec := any(keys).(StringCodec)
	_, strType := any(zk).(string)
	s.strKeys = strCodec && strType
	var zv V
	_, strCodec = any(values).(StringCodec)
	_, strType = any(zv).(string)
	s.strValues = strCodec && strType
	if err := s.init(name, KindKeyValue, kvVersion, log, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// Put sets the value of k. A disk-backed store encodes the value whether
// logging is on or not, so a value that does not encode is an error either
// way.
func (s *KeyValueStore[K, V]) Put(k K, v V) error {
	kb, key, kg, err := s.encodeKey(k)
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
	s.tree.ReplaceOrInsert(kvItem[K, V]{key: key, k: k, v: v})
	if logged {
		s.bufferLocked(Change{KeyGroup: kg, Key: kb, Value: vb})
	}
	return nil
}

// encodeKey encodes k and returns its encoding as bytes and as a string,
// and its key group, which the store must own. With string keys (strKeys)
// both alias k, which allocates nothing: the bytes must not be changed.
func (s *KeyValueStore[K, V]) encodeKey(k K) (kb []byte, key string, kg int, err error) {
	if s.strKeys {
		key = *(*string)(unsafe.Pointer(&k))
		kb = unsafe.Slice(unsafe.StringData(key), len(key))
		kg, err = s.keyGroup(kb)
		return kb, key, kg, err
	}
	if kb, kg, err = encodeKey(&s.storeBase, s.kc, k); err != nil {
		return nil, "", kg, err
	}
	return kb, string(kb), kg, nil
}

// Get returns the value of k, and whether there is one.
func (s *KeyValueStore[K, V]) Get(k K) (V, bool, error) {
	var zero V
	kb, key, kg, err := s.encodeKey(k)
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
	it, ok := s.tree.Get(kvItem[K, V]{key: key})
	return it.v, ok, nil
}

// Delete removes k and logs a tombstone.
func (s *KeyValueStore[K, V]) Delete(k K) error {
	kb, key, kg, err := s.encodeKey(k)
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
	s.tree.Delete(kvItem[K, V]{key: key})
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

// replayChange is ApplyChange for a restore (InitializeState), which calls
// endReplay once it replayed the whole log. In memory, it keeps the last
// change of each key and endReplay applies them, by key: the log's order
// of a key's changes is kept, and a key changed many times is inserted
// once, in order, which is cheaper than inserting each change where it
// goes. What it gathered is applied early, between two changes, once it
// holds maxReplayOps keys or maxReplayValueBytes bytes of values. Each
// change is checked and decoded when it is replayed, as ApplyChange does.
func (s *KeyValueStore[K, V]) replayChange(c Change) error {
	if s.disk != nil {
		return s.diskApplyChange(c)
	}
	if c.KeyGroup == dstl.MetaKeyGroup {
		return nil // a key-value store has no stream time
	}
	if _, err := s.keyGroup(c.Key); err != nil {
		return err
	}
	var v V
	if !c.Tombstone && !s.strValues {
		var err error
		if v, err = s.vc.Decode(c.Value); err != nil {
			return fmt.Errorf("%w: store %q: value: %w", ErrLogFormat, s.name, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	r := &s.replay
	if r.valueBytes >= maxReplayValueBytes {
		// Values that grew left their old slots behind: apply what was
		// gathered rather than hold more.
		s.applyReplayLocked()
	}
	if i, ok := r.index[string(c.Key)]; ok {
		op := r.op(i)
		op.it.v, op.del = v, c.Tombstone
		if s.strValues && !c.Tombstone {
			r.setValue(op, c.Value)
		}
		return nil
	}
	if r.n >= maxReplayOps {
		s.applyReplayLocked()
	}
	key := string(c.Key)
	var k K
	if s.strKeys {
		k = *(*K)(unsafe.Pointer(&key))
	} else {
		var err error
		if k, err = s.kc.Decode(c.Key); err != nil {
			return fmt.Errorf("%w: store %q: key: %w", ErrLogFormat, s.name, err)
		}
	}
	if r.index == nil {
		r.index = map[string]int{}
	}
	i := r.add(kvReplayOp[K, V]{it: kvItem[K, V]{key: key, k: k, v: v}, del: c.Tombstone})
	r.index[key] = i
	if s.strValues && !c.Tombstone {
		r.setValue(r.op(i), c.Value)
	}
	return nil
}

// endReplay applies what replayChange gathered.
func (s *KeyValueStore[K, V]) endReplay() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.applyReplayLocked()
	return nil
}

// applyReplayLocked applies the gathered changes to the tree, by key, and
// forgets them.
func (s *KeyValueStore[K, V]) applyReplayLocked() {
	r := &s.replay
	// Sort the keys (small to move), then take their changes in order.
	type keyAt struct {
		key string
		i   int
	}
	order := make([]keyAt, r.n)
	for i := range order {
		order[i] = keyAt{r.op(i).it.key, i}
	}
	slices.SortFunc(order, func(a, b keyAt) int { return strings.Compare(a.key, b.key) })
	empty := s.tree.Len() == 0
	for _, o := range order {
		op := r.op(o.i)
		switch {
		case !op.del:
			if s.strValues {
				v := string(r.value(op))
				op.it.v = *(*V)(unsafe.Pointer(&v))
			}
			s.tree.ReplaceOrInsert(op.it)
		case !empty:
			s.tree.Delete(op.it)
		}
	}
	*r = kvReplay[K, V]{}
}

// Close closes the store and lets go of its buffers and of what a replay
// gathered; later calls fail with ErrClosed.
func (s *KeyValueStore[K, V]) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replay = kvReplay[K, V]{}
	s.closeLocked()
	return nil
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
	s.replay = kvReplay[K, V]{}
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
			var vb, scratch []byte
			t.Ascend(func(it kvItem[K, V]) bool {
				if vb, err = encodeReusing(s.vc, &scratch, it.v); err != nil {
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
