package statestore

import (
	"bytes"
	"fmt"
	"iter"
	"math/bits"
	"slices"
	"strings"
	"unsafe"

	"github.com/dstlgo/dstl/dstl"
)

// kvVersion is the version of the key-value store's snapshot payload.
const kvVersion = 1

// kvRow is a row of a key and a value: of a key-value store's table,
// under the encoded key, or of a window store's data.
type kvRow[K, V any] struct {
	k K
	v V
}

// kvCodec encodes kvRows for disk: the value is the encoded value; the
// encoded key is the row's key, or what cut finds in it.
type kvCodec[K, V any] struct {
	kc  Codec[K]
	vc  Codec[V]
	cut func(key []byte) ([]byte, error)
}

func (c kvCodec[K, V]) encode(dst []byte, r *kvRow[K, V]) ([]byte, error) {
	return c.vc.Encode(dst, r.v)
}

func (c kvCodec[K, V]) decode(key, value []byte, withKey bool) (r kvRow[K, V], err error) {
	if withKey {
		kb := key
		if c.cut != nil {
			if kb, err = c.cut(key); err != nil {
				return r, err
			}
		}
		if r.k, err = c.kc.Decode(kb); err != nil {
			return r, fmt.Errorf("key: %w", err)
		}
	}
	if r.v, err = c.vc.Decode(value); err != nil {
		return r, fmt.Errorf("value: %w", err)
	}
	return r, nil
}

// KeyValueStore is a store of values by key, kept in the order of the keys'
// encodings. Put logs the key and value, Delete a tombstone. It is safe for
// concurrent use.
//
// Registered with a Checkpointer whose Config.Dir is set, the store keeps
// its entries on local disk rather than in memory, with the same behaviour
// but for what the methods' documentation says of a disk-backed store.
type KeyValueStore[K, V any] struct {
	storeBase
	kc Codec[K]
	vc Codec[V]
	// t holds the entries by encoded key.
	t table[kvRow[K, V]]
	// strKeys: the keys are strings and their codec StringCodec, so a
	// key is its own encoding, used as it is. strValues: so are the
	// values.
	strKeys, strValues bool
	// replay gathers the changes of a restore (replayChange) until
	// endReplay applies them.
	replay kvReplay[V]
}

// kvReplay is what a restore's replay of the log gathered and did not
// apply yet: changes, their keys and string values copied into chunks
// that are filled in turn. A change replaces the gathered change of its
// key that the index finds; the index is lossy (a key it lost, or never
// had, takes a new change), so a key may have several, the latest last:
// applyReplayLocked finds the last change of each key by sorting the
// changes by the hash of their keys.
type kvReplay[V any] struct {
	// ops are the changes, in chunks of replayChunk (never copied as
	// they grow); n counts them. Of the changes of a key, the later
	// holds the later value.
	ops [][]kvReplayOp
	n   int
	// index is a direct-mapped table of ops by the hash of their keys:
	// slot hash*replayHashMul>>shift holds 1 + the index of the change
	// whose key last took it, 0 when none did.
	index []int32
	shift uint
	// vals are the decoded values of ops, unless the values are strings
	// (strValues).
	vals []V
	// keys holds the keys of ops, in chunks of replayKeyChunk bytes or
	// more.
	keys [][]byte
	// values holds the string values (strValues) of ops, undecoded, in
	// chunks of replayValueChunk bytes or more: decoding them (a copy,
	// which cannot fail) waits for the last change of each key.
	// valueBytes counts the bytes of the keys and of the value slots
	// taken, those that later values outgrew included.
	values     [][]byte
	valueBytes int
}

// kvReplayOp is a gathered change. Its offsets and lengths fit in 32 bits:
// a change in the log is at most format.MaxPayloadSize bytes, and so is
// a chunk it begins.
type kvReplayOp struct {
	hash uint32 // murmur3 of the key, as KeyGroup hashes it
	// kchunk, koff and klen locate the key in keys.
	kchunk, koff, klen int32
	// chunk, off, n and room locate the value in values (strValues):
	// room is what the slot holds, which a later value of the key
	// reuses if it fits.
	chunk, off, n, room int32
	del                 bool
}

const (
	replayChunk      = 1 << 12
	replayIndexMin   = 1 << 12
	replayIndexMax   = 1 << 20
	replayHashMul    = 0x9e3779b1 // 2^32 over the golden ratio: spreads the hash over the slot's bits
	replayKeyChunk   = 1 << 16
	replayValueChunk = 1 << 20
	// maxReplayChange bounds the key and the value of a change that a
	// replay gathers; the log holds none larger (format.MaxPayloadSize).
	maxReplayChange = 1 << 30
)

// op returns change i.
func (r *kvReplay[V]) op(i int) *kvReplayOp {
	return &r.ops[i/replayChunk][i%replayChunk]
}

// key returns the key of op.
func (r *kvReplay[V]) key(op *kvReplayOp) []byte {
	return r.keys[op.kchunk][op.koff : op.koff+op.klen]
}

// find returns the index of the gathered change that the index holds for
// key (of murmur3 hash h), or -1.
func (r *kvReplay[V]) find(key []byte, h uint32) int {
	if r.index == nil {
		return -1
	}
	i := int(r.index[h*replayHashMul>>r.shift]) - 1
	if i < 0 {
		return -1
	}
	if op := r.op(i); op.hash != h || !bytes.Equal(r.key(op), key) {
		return -1
	}
	return i
}

// add appends a change of key (of murmur3 hash h) and returns it; keepV:
// v is its value (the values are not strings).
func (r *kvReplay[V]) add(key []byte, h uint32, del bool, v V, keepV bool) *kvReplayOp {
	if len(r.keys) == 0 || len(r.keys[len(r.keys)-1])+len(key) > cap(r.keys[len(r.keys)-1]) {
		r.keys = append(r.keys, make([]byte, 0, max(replayKeyChunk, len(key))))
	}
	c := &r.keys[len(r.keys)-1]
	if r.n%replayChunk == 0 {
		r.ops = append(r.ops, make([]kvReplayOp, 0, replayChunk))
	}
	last := &r.ops[len(r.ops)-1]
	*last = append(*last, kvReplayOp{hash: h, del: del, kchunk: int32(len(r.keys) - 1), koff: int32(len(*c)), klen: int32(len(key))})
	*c = append(*c, key...)
	r.valueBytes += len(key)
	if keepV {
		r.vals = append(r.vals, v)
	}
	r.n++
	if r.n > len(r.index)/2 && len(r.index) < replayIndexMax {
		// A larger index, of the changes in order: where keys share a
		// slot, the later takes it.
		n := max(replayIndexMin, 2*len(r.index))
		r.index, r.shift = make([]int32, n), uint(32-bits.TrailingZeros(uint(n)))
		for i := range r.n - 1 {
			r.index[r.op(i).hash*replayHashMul>>r.shift] = int32(i + 1)
		}
	}
	r.index[h*replayHashMul>>r.shift] = int32(r.n)
	return &(*last)[len(*last)-1]
}

// setValue keeps v as op's value, in its slot if it fits.
func (r *kvReplay[V]) setValue(op *kvReplayOp, v []byte) {
	if len(v) == 0 {
		op.n = 0 // no slot needed: value reads nothing
		return
	}
	n := int32(len(v))
	if n <= op.room {
		copy(r.values[op.chunk][op.off:], v)
		op.n = n
		return
	}
	if last := int32(len(r.values) - 1); op.room > 0 && op.chunk == last && int(op.off+op.room) == len(r.values[last]) && int(op.off)+len(v) <= cap(r.values[last]) {
		// The slot ends the last chunk: it grows in place.
		r.values[last] = append(r.values[last][:op.off], v...)
		r.valueBytes += int(n - op.room)
		op.n, op.room = n, n
		return
	}
	if len(r.values) == 0 || len(r.values[len(r.values)-1])+len(v) > cap(r.values[len(r.values)-1]) {
		r.values = append(r.values, make([]byte, 0, max(replayValueChunk, len(v))))
	}
	c := &r.values[len(r.values)-1]
	op.chunk, op.off, op.n, op.room = int32(len(r.values)-1), int32(len(*c)), n, n
	*c = append(*c, v...)
	r.valueBytes += len(v)
}

// value returns op's value.
func (r *kvReplay[V]) value(op *kvReplayOp) []byte {
	if op.n == 0 {
		return nil
	}
	return r.values[op.chunk][op.off : op.off+op.n]
}

// replayKey is the key of the last change of a key, ops[i].
type replayKey struct {
	key string
	i   int
}

// last returns the last change of each key among the gathered ones, in no
// particular order, with its key: a copy (the store's own string) unless
// the change is a delete. It sorts the changes by their keys' hashes (the
// log's order kept among equal hashes), takes the last change of each hash,
// then checks, in the log's order, that each change has the key of the
// last of its hash; the changes of a hash that several keys share are
// sorted by key.
func (r *kvReplay[V]) last() []replayKey {
	order := make([]uint64, r.n) // hash, then index
	for i := range order {
		order[i] = uint64(r.op(i).hash)<<32 | uint64(i)
	}
	order = sortByHash(order)
	idx := func(o uint64) int { return int(uint32(o)) }
	var last []replayKey
	var starts []int         // of each hash's changes in order, and the end
	of := make([]int32, r.n) // the hash of each change, as its index in last
	for a := 0; a < len(order); {
		b := a + 1
		for b < len(order) && order[b]>>32 == order[a]>>32 {
			b++
		}
		j := int32(len(last))
		i := idx(order[b-1])
		op := r.op(i)
		kb := r.key(op)
		key := unsafe.String(unsafe.SliceData(kb), len(kb)) // a delete keeps no key
		if !op.del {
			key = string(kb)
		}
		last = append(last, replayKey{key, i})
		starts = append(starts, a)
		for _, o := range order[a:b] {
			of[idx(o)] = j
		}
		a = b
	}
	starts = append(starts, len(order))
	var shared []int32 // hashes of several keys
	var seen map[int32]bool
	for i := range r.n {
		if j := of[i]; last[j].i != i && last[j].key != string(r.key(r.op(i))) && !seen[j] {
			if seen == nil {
				seen = map[int32]bool{}
			}
			seen[j] = true
			shared = append(shared, j)
		}
	}
	for _, j := range shared {
		// The changes of one hash: by key, each key's changes in the
		// log's order; the last of each key.
		run := order[starts[j]:starts[j+1]]
		slices.SortStableFunc(run, func(x, y uint64) int {
			return bytes.Compare(r.key(r.op(idx(x))), r.key(r.op(idx(y))))
		})
		first := true
		for k, o := range run {
			if k < len(run)-1 && bytes.Equal(r.key(r.op(idx(o))), r.key(r.op(idx(run[k+1])))) {
				continue
			}
			op := r.op(idx(o))
			kb := r.key(op)
			key := unsafe.String(unsafe.SliceData(kb), len(kb))
			if !op.del {
				key = string(kb)
			}
			if first {
				last[j], first = replayKey{key, idx(o)}, false
			} else {
				last = append(last, replayKey{key, idx(o)})
			}
		}
	}
	return last
}

// sortByHash sorts hash-and-index pairs (hash in the high 32 bits) by
// hash, keeping the order of equal hashes: a radix sort of the hashes, in
// three passes, or a plain sort of the pairs when they are few (the same
// order, as the indexes of equal hashes ascend). It returns the sorted
// slice, a or one as long.
func sortByHash(a []uint64) []uint64 {
	if len(a) < 1<<10 {
		slices.Sort(a)
		return a
	}
	const bits = 11
	tmp := make([]uint64, len(a))
	for shift := 32; shift < 64; shift += bits {
		var count [1 << bits]int
		for _, x := range a {
			count[x>>shift&(1<<bits-1)]++
		}
		sum := 0
		for i, c := range count {
			count[i], sum = sum, sum+c
		}
		for _, x := range a {
			d := x >> shift & (1<<bits - 1)
			tmp[count[d]] = x
			count[d]++
		}
		a, tmp = tmp, a
	}
	return a
}

// maxReplayOps bounds the changes a replay gathers before it applies them
// (a change of a key that the replay's index finds replaces the key's last
// one and counts no more), and maxReplayValueBytes the bytes of keys and
// of string values it holds (variables so that tests can lower them).
var (
	maxReplayOps        = 1 << 20
	maxReplayValueBytes = 64 << 20
)

var _ internalStore = (*KeyValueStore[string, string])(nil)

// NewKeyValueStore returns an empty key-value store that logs to log (nil:
// it never logs). Its key groups are the log's, unless WithKeyGroups says
// otherwise.
func NewKeyValueStore[K, V any](name string, log *dstl.Writer, keys Codec[K], values Codec[V], opts ...Option) (*KeyValueStore[K, V], error) {
	s := &KeyValueStore[K, V]{kc: keys, vc: values}
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
	s.setTables(s.makeTables)
	return s, nil
}

// makeTables makes the store's table in its backing.
func (s *KeyValueStore[K, V]) makeTables() []anyTable {
	s.t = newTable[kvRow[K, V]](&s.storeBase, nil, kvCodec[K, V]{kc: s.kc, vc: s.vc})
	return []anyTable{s.t}
}

// Put sets the value of k. A disk-backed store encodes the value whether
// logging is on or not, so a value that does not encode is an error either
// way.
func (s *KeyValueStore[K, V]) Put(k K, v V) error {
	kb, key, kg, err := s.lockKey(k)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	vb, logged, err := encodeLogged(&s.storeBase, s.vc, v)
	if err != nil {
		return err
	}
	if err := s.t.set(kg, key, kvRow[K, V]{k: k, v: v}, vb, logged); err != nil {
		return err
	}
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
		kb = stringBytes(key)
		kg, err = s.keyGroup(kb)
		return kb, key, kg, err
	}
	if kb, kg, err = encodeKey(&s.storeBase, s.kc, k); err != nil {
		return nil, "", kg, err
	}
	return kb, string(kb), kg, nil
}

// lockKey is encodeKey followed by lockOpen: when it succeeds, the caller
// holds the store's lock.
func (s *KeyValueStore[K, V]) lockKey(k K) (kb []byte, key string, kg int, err error) {
	if kb, key, kg, err = s.encodeKey(k); err == nil {
		err = s.lockOpen()
	}
	return kb, key, kg, err
}

// Get returns the value of k, and whether there is one.
func (s *KeyValueStore[K, V]) Get(k K) (V, bool, error) {
	var zero V
	kb, _, kg, err := s.lockKey(k)
	if err != nil {
		return zero, false, err
	}
	defer s.mu.Unlock()
	r, ok, err := s.t.get(kg, kb)
	return r.v, ok, err
}

// Delete removes k and logs a tombstone.
func (s *KeyValueStore[K, V]) Delete(k K) error {
	kb, _, kg, err := s.lockKey(k)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := s.t.del(kg, kb); err != nil {
		return err
	}
	s.record(Change{KeyGroup: kg, Key: kb, Tombstone: true})
	return nil
}

// Len returns the number of keys. A disk-backed store counts them: Len
// reads the whole store on disk. An error that stops the count is kept for
// Err; after Close, Len is 0.
func (s *KeyValueStore[K, V]) Len() int {
	s.mu.Lock()
	if s.closed {
		s.failLocked(ErrClosed)
		s.mu.Unlock()
		return 0
	}
	count := s.t.counter()
	s.mu.Unlock()
	n, err := count()
	if err != nil {
		s.fail(err)
	}
	return n
}

// All yields every key and value in key order, as they were when the loop
// began (each loop over the result reads the store anew); the loop may
// change the store.
//
// An error reading a disk-backed store or decoding an entry stops the loop
// early; the store keeps it for Err, and fails Flush with it. After Close,
// the loop yields nothing (and Err is ErrClosed).
func (s *KeyValueStore[K, V]) All() iter.Seq2[K, V] { return s.entries(nil, nil) }

// Range yields the keys from from (included) to to (excluded), in key order,
// as they were when the loop began; its errors are those of All.
func (s *KeyValueStore[K, V]) Range(from, to K) (iter.Seq2[K, V], error) {
	fb, err := s.kc.Encode(nil, from)
	if err != nil {
		return nil, fmt.Errorf("statestore: store %q: key: %w", s.name, err)
	}
	tb, err := s.kc.Encode(nil, to)
	if err != nil {
		return nil, fmt.Errorf("statestore: store %q: key: %w", s.name, err)
	}
	if bytes.Compare(fb, tb) >= 0 {
		return func(func(K, V) bool) {}, nil
	}
	return s.entries(fb, tb), nil
}

// PrefixScan yields the keys whose encoding starts with the encoding of
// prefix, in key order, as they were when the loop began; its errors are
// those of All.
func (s *KeyValueStore[K, V]) PrefixScan(prefix K) (iter.Seq2[K, V], error) {
	pb, err := s.kc.Encode(nil, prefix)
	if err != nil {
		return nil, fmt.Errorf("statestore: store %q: key: %w", s.name, err)
	}
	return s.entries(pb, prefixEnd(pb)), nil
}

// entries yields the entries whose encoded keys are in [lower, upper)
// (upper nil: no bound), in the order of the encoded keys, as they are when
// the loop begins. An error stops the loop and is kept for Err.
func (s *KeyValueStore[K, V]) entries(lower, upper []byte) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		v, err := s.view()
		if err != nil {
			s.fail(err)
			return
		}
		defer v.release()
		for e, err := range v.scan(lower, upper, true) {
			if err != nil {
				s.fail(err)
				return
			}
			if !yield(e.row.k, e.row.v) {
				return
			}
		}
	}
}

// view returns a view of the table as it is now, or fails with ErrClosed.
func (s *KeyValueStore[K, V]) view() (tableView[kvRow[K, V]], error) {
	if err := s.lockOpen(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.t.view()
}

// ApplyChange applies a put or a tombstone read back from the log, without
// logging it.
func (s *KeyValueStore[K, V]) ApplyChange(c Change) error {
	var terr error
	err := applyLogged(&s.storeBase, s.kc, s.vc, c, false, nil, func(kg int, k K, v V) {
		if c.Tombstone {
			terr = s.t.del(kg, c.Key)
			return
		}
		terr = s.t.set(kg, string(c.Key), kvRow[K, V]{k: k, v: v}, c.Value, true)
	})
	if err != nil {
		return err
	}
	return terr
}

// replayChange is ApplyChange for a restore (InitializeState), which calls
// endReplay once it replayed the whole log. It gathers the changes, and
// endReplay applies the last change of each key, by key: a key changed
// many times is written once, in order, which is cheaper than writing each
// change where it goes. What it gathered is applied early, between two
// changes, once it holds maxReplayOps changes or maxReplayValueBytes bytes
// of keys and values. Each change is checked (its key must be of the key
// group the log holds it in, one of the store's) and its value decoded
// when it is replayed, as ApplyChange does; a key that is not a string is
// decoded once, when its last change is applied.
func (s *KeyValueStore[K, V]) replayChange(c Change) error {
	if c.KeyGroup == dstl.MetaKeyGroup {
		return nil // a key-value store has no stream time
	}
	h, err := s.loggedKeyGroup(c.Key, c.KeyGroup)
	if err != nil {
		return err
	}
	if len(c.Key) > maxReplayChange || len(c.Value) > maxReplayChange {
		return fmt.Errorf("%w: store %q: a change of a %d-byte key and a %d-byte value, larger than a log holds", ErrLogFormat, s.name, len(c.Key), len(c.Value))
	}
	var v V
	if !c.Tombstone && !s.strValues {
		if v, err = s.vc.Decode(c.Value); err != nil {
			return fmt.Errorf("%w: store %q: value: %w", ErrLogFormat, s.name, err)
		}
	}
	if err := s.lockOpen(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := &s.replay
	if r.valueBytes >= maxReplayValueBytes {
		// Values that grew left their old slots behind: apply what was
		// gathered rather than hold more.
		if err := s.applyReplayLocked(); err != nil {
			return fmt.Errorf("applying the changes gathered before this one: %w", err)
		}
	}
	var op *kvReplayOp
	if i := r.find(c.Key, h); i >= 0 {
		// The latest change of the key: this one replaces it.
		op = r.op(i)
		op.del = c.Tombstone
		if !s.strValues {
			r.vals[i] = v
		}
	} else {
		if r.n >= maxReplayOps {
			if err := s.applyReplayLocked(); err != nil {
				return fmt.Errorf("applying the changes gathered before this one: %w", err)
			}
		}
		op = r.add(c.Key, h, c.Tombstone, v, !s.strValues)
	}
	if s.strValues && !c.Tombstone {
		r.setValue(op, c.Value)
	}
	return nil
}

// endReplay applies what replayChange gathered.
func (s *KeyValueStore[K, V]) endReplay() error {
	if err := s.lockOpen(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return s.applyReplayLocked()
}

// applyReplayLocked applies the last gathered change of each key to the
// table, by key, and forgets the changes. A key that does not decode fails
// it before the table changes.
func (s *KeyValueStore[K, V]) applyReplayLocked() error {
	r := &s.replay
	defer func() { *r = kvReplay[V]{} }()
	if r.n == 0 {
		return nil
	}
	// Sort the last changes by key (their own strings, next to each
	// other), then apply them in order.
	order := r.last()
	slices.SortFunc(order, func(a, b replayKey) int { return strings.Compare(a.key, b.key) })
	var ks []K
	if !s.strKeys {
		ks = make([]K, len(order))
		// Every key is decoded, a deleted one too: a key that does not
		// decode is a damaged log, whatever its last change.
		for j, o := range order {
			key := r.key(r.op(o.i))
			k, err := s.kc.Decode(key)
			if err != nil {
				return fmt.Errorf("%w: store %q: key %x: %w", ErrLogFormat, s.name, key, err)
			}
			ks[j] = k
		}
	}
	// A key deleted from an empty table needs no deletion: the changes
	// are one a key.
	empty, err := s.t.empty()
	if err != nil {
		return err
	}
	for j, o := range order {
		op := r.op(o.i)
		kg := keyGroupOf(op.hash, s.maxP)
		if op.del {
			if !empty {
				if err := s.t.del(kg, stringBytes(o.key)); err != nil {
					return err
				}
			}
			continue
		}
		var row kvRow[K, V]
		if s.strKeys {
			row.k = *(*K)(unsafe.Pointer(&o.key))
		} else {
			row.k = ks[j]
		}
		var enc []byte
		if s.strValues {
			enc = r.value(op)
			v := string(enc)
			row.v = *(*V)(unsafe.Pointer(&v))
		} else {
			row.v = r.vals[o.i]
		}
		if err := s.t.set(kg, o.key, row, enc, s.strValues); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the store and lets go of its buffers and of what a replay
// gathered; later calls fail with ErrClosed.
func (s *KeyValueStore[K, V]) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replay = kvReplay[V]{}
	s.closeLocked()
	return nil
}

// Clear removes every key and buffered change, logging nothing. A
// disk-backed store keeps an error deleting its entries for Err.
func (s *KeyValueStore[K, V]) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replay = kvReplay[V]{}
	s.clearTablesLocked()
}

// Snapshot encodes the store into one payload (kind "kv", version 1): the
// number of keys, then each key and value, length-prefixed, in key order.
// It fails with ErrClosed once the store is closed.
func (s *KeyValueStore[K, V]) Snapshot() ([]byte, error) { return snapshotOf(s) }

func (s *KeyValueStore[K, V]) captureLocked() func() ([]byte, error) {
	return captureView(&s.storeBase, s.t, false, func(v tableView[kvRow[K, V]], b []byte) ([]byte, int, error) {
		var vb, scratch []byte
		n := 0
		for e, err := range v.scan(nil, nil, true) {
			if err != nil {
				return nil, 0, err
			}
			if vb, err = encodeReusing(s.vc, &scratch, e.row.v); err != nil {
				return nil, 0, err
			}
			b = appendBytes(b, e.key)
			b = appendBytes(b, vb)
			n++
		}
		return b, n, nil
	})
}

// RestoreSnapshot wipes the store and loads payload, keeping the keys of the
// store's key groups, without logging.
func (s *KeyValueStore[K, V]) RestoreSnapshot(payload []byte) error {
	return s.restorePayload(payload, s.kgr, true)
}

func (s *KeyValueStore[K, V]) restorePayload(payload []byte, kgr dstl.KeyGroupRange, wipe bool) error {
	type entry struct {
		kg  int
		key string
		vb  []byte // aliases the payload
		row kvRow[K, V]
	}
	var entries []entry
	parse := func(d *decoder) {
		n := d.count()
		entries = make([]entry, 0, n)
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
			entries = append(entries, entry{kg: kg, key: string(kb), vb: vb, row: kvRow[K, V]{k: k, v: v}})
		}
	}
	var err error
	lerr := s.loadPayload(payload, parse, func() {
		if wipe {
			if err = s.clearTablesLocked(); err != nil {
				return
			}
		}
		for _, e := range entries {
			if !s.kgr.Contains(e.kg) {
				continue // the table holds the store's key groups only
			}
			if err = s.t.set(e.kg, e.key, e.row, e.vb, true); err != nil {
				// What was written stays: the store holds part of the
				// payload, which no later call must commit.
				err = fmt.Errorf("statestore: store %q: restore: %w", s.name, err)
				s.failLocked(err)
				return
			}
		}
	})
	if lerr != nil {
		return lerr
	}
	return err
}
