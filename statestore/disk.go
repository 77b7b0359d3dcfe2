package statestore

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// The disk-backed stores (Config.Dir) keep their tables in the
// checkpointer's Pebble database. Every key is the store's prefix in the
// entry's key group (package diskstate: key group, store name), the
// table's section, then the table's key:
//
//	key-value: the encoded key;
//	window:    0x00, escaped key, window start (data), and
//	           0x01, window start, escaped key (the expiry index, no value);
//	versioned: escaped key, timestamp.
//
// Escaped keys (appendEscaped) sort like the keys and end where the key
// ends; timestamps take 8 bytes big-endian with the sign bit flipped
// (appendTime), so they sort like the numbers.

// pebbleTable is a table in a Pebble database: each row under the store's
// prefix in its key group, the table's section and its key, encoded by
// the table's rowCodec. Every key it sets or deletes is recorded as
// changed for the next materialisation (diskstate.DB.Touch).
type pebbleTable[R any] struct {
	b       *storeBase // the store: name, key groups
	db      *diskstate.DB
	section []byte
	codec   rowCodec[R]
	// scratch holds the database key of the last operation and vscratch
	// an encoded row: the store's lock guards them.
	scratch, vscratch []byte
}

func newPebbleTable[R any](b *storeBase, section []byte, c rowCodec[R]) *pebbleTable[R] {
	return &pebbleTable[R]{b: b, db: b.db, section: section, codec: c}
}

// prefix appends the prefix of the table's keys in key group kg.
func (t *pebbleTable[R]) prefix(dst []byte, kg int) []byte {
	return append(diskstate.AppendStorePrefix(dst, kg, t.b.name), t.section...)
}

// dbKey returns the database key of key in key group kg, in the scratch
// buffer: valid until the next call.
func (t *pebbleTable[R]) dbKey(kg int, key []byte) []byte {
	t.scratch = append(t.prefix(t.scratch[:0], kg), key...)
	return t.scratch
}

func (t *pebbleTable[R]) err(what string, err error) error {
	return fmt.Errorf("statestore: store %q: %s: %w", t.b.name, what, err)
}

func (t *pebbleTable[R]) get(kg int, key []byte) (R, bool, error) {
	var r R
	v, closer, err := t.db.Get(t.dbKey(kg, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return r, false, nil
	}
	if err != nil {
		return r, false, t.err("read", err)
	}
	defer closer.Close()
	if r, err = t.codec.decode(key, v, false); err != nil {
		return r, false, fmt.Errorf("statestore: store %q: key %q in key group %d: %w", t.b.name, key, kg, err)
	}
	return r, true, nil
}

func (t *pebbleTable[R]) encoding(r *R) ([]byte, error) {
	enc, err := t.codec.encode(t.vscratch[:0], r)
	if err != nil {
		return nil, fmt.Errorf("statestore: store %q: value: %w", t.b.name, err)
	}
	if cap(enc) <= maxKeptScratch {
		t.vscratch = enc[:0]
	}
	return enc, nil
}

func (t *pebbleTable[R]) set(kg int, key string, r R, enc []byte, encoded bool) error {
	if !encoded {
		var err error
		if enc, err = t.encoding(&r); err != nil {
			return err
		}
	}
	k := t.dbKey(kg, stringBytes(key))
	if err := t.db.Set(k, enc, pebble.NoSync); err != nil {
		return t.err("write", err)
	}
	t.db.Touch(k)
	return nil
}

func (t *pebbleTable[R]) del(kg int, key []byte) error {
	k := t.dbKey(kg, key)
	if err := t.db.Delete(k, pebble.NoSync); err != nil {
		return t.err("delete", err)
	}
	t.db.Touch(k)
	return nil
}

func (t *pebbleTable[R]) counter() func() (int, error) {
	snap := t.db.NewSnapshot()
	return func() (int, error) {
		defer snap.Close()
		return t.countIn(snap)
	}
}

// countIn counts the table's rows in r.
func (t *pebbleTable[R]) countIn(r pebble.Reader) (int, error) {
	n := 0
	for kg := t.b.kgr.Start; kg <= t.b.kgr.End; kg++ {
		p := t.prefix(nil, kg)
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err == nil {
			for ok := it.First(); ok; ok = it.Next() {
				n++
			}
			err = it.Close()
		}
		if err != nil {
			return n, t.err(fmt.Sprintf("count key group %d", kg), err)
		}
	}
	return n, nil
}

func (t *pebbleTable[R]) empty() (bool, error) {
	for kg := t.b.kgr.Start; kg <= t.b.kgr.End; kg++ {
		p := t.prefix(nil, kg)
		it, err := t.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return false, t.err("read", err)
		}
		found := it.First()
		if err := it.Close(); err != nil {
			return false, t.err("read", err)
		}
		if found {
			return false, nil
		}
	}
	return true, nil
}

// clear deletes the table's rows, in every key group of the store's range,
// and tells the database that keys changed that it cannot name.
func (t *pebbleTable[R]) clear() error {
	for kg := t.b.kgr.Start; kg <= t.b.kgr.End; kg++ {
		p := t.prefix(nil, kg)
		if err := t.db.DeleteRange(p, prefixEnd(p), pebble.NoSync); err != nil {
			return t.err("clear", err)
		}
	}
	t.db.TouchAll()
	return nil
}

func (t *pebbleTable[R]) view() (tableView[R], error) {
	return &pebbleView[R]{t: t, snap: t.db.NewSnapshot()}, nil
}

func (t *pebbleTable[R]) scan(lo, hi []byte, rows bool) iter.Seq2[tableEntry[R], error] {
	return t.scanOf(t.db, lo, hi, rows)
}

func (t *pebbleTable[R]) scanIn(kg int, lo, hi []byte, rows bool) iter.Seq2[tableEntry[R], error] {
	return t.scanInOf(t.db, kg, lo, hi, rows)
}

func (t *pebbleTable[R]) appendKeys(kg int, lo, hi []byte, keys []byte, ends []int) ([]byte, []int, error) {
	return t.appendKeysOf(t.db, kg, lo, hi, keys, ends)
}

func (t *pebbleTable[R]) last(kg int, lo, hi []byte) (tableEntry[R], bool, error) {
	return t.lastOf(t.db, kg, lo, hi)
}

// pebbleView is a pebbleTable as of a snapshot of the database.
type pebbleView[R any] struct {
	t    *pebbleTable[R]
	snap *pebble.Snapshot
}

func (v *pebbleView[R]) scan(lo, hi []byte, rows bool) iter.Seq2[tableEntry[R], error] {
	return v.t.scanOf(v.snap, lo, hi, rows)
}

func (v *pebbleView[R]) scanIn(kg int, lo, hi []byte, rows bool) iter.Seq2[tableEntry[R], error] {
	return v.t.scanInOf(v.snap, kg, lo, hi, rows)
}

func (v *pebbleView[R]) appendKeys(kg int, lo, hi []byte, keys []byte, ends []int) ([]byte, []int, error) {
	return v.t.appendKeysOf(v.snap, kg, lo, hi, keys, ends)
}

func (v *pebbleView[R]) last(kg int, lo, hi []byte) (tableEntry[R], bool, error) {
	return v.t.lastOf(v.snap, kg, lo, hi)
}

func (v *pebbleView[R]) release() { _ = v.snap.Close() }

// bounds returns the iterator bounds of [lo, hi) in key group kg (hi nil:
// to the end of the table's keys in kg), and false when the range is empty.
func (t *pebbleTable[R]) bounds(kg int, lo, hi []byte) (*pebble.IterOptions, bool) {
	if hi != nil && bytes.Compare(lo, hi) >= 0 {
		return nil, false
	}
	p := t.prefix(nil, kg)
	o := &pebble.IterOptions{LowerBound: append(bytes.Clone(p), lo...)}
	if hi != nil {
		o.UpperBound = append(p, hi...)
	} else {
		o.UpperBound = prefixEnd(p)
	}
	return o, true
}

// entry returns the entry at it, of key group kg, whose table key starts
// at plen; with rows, decoded (withKey: what the key holds too).
func (t *pebbleTable[R]) entry(it *pebble.Iterator, kg, plen int, rows, withKey bool) (tableEntry[R], error) {
	e := tableEntry[R]{kg: kg, key: it.Key()[plen:]}
	if rows {
		v, err := it.ValueAndErr()
		if err != nil {
			return e, t.err("read", err)
		}
		if e.row, err = t.codec.decode(e.key, v, withKey); err != nil {
			return e, fmt.Errorf("statestore: store %q: key %q in key group %d: %w", t.b.name, e.key, kg, err)
		}
	}
	return e, nil
}

func (t *pebbleTable[R]) scanInOf(r pebble.Reader, kg int, lo, hi []byte, rows bool) iter.Seq2[tableEntry[R], error] {
	return func(yield func(tableEntry[R], error) bool) {
		o, ok := t.bounds(kg, lo, hi)
		if !ok {
			return
		}
		it, err := r.NewIter(o)
		if err != nil {
			yield(tableEntry[R]{}, t.err("read", err))
			return
		}
		plen := len(o.LowerBound) - len(lo)
		for ok := it.First(); ok; ok = it.Next() {
			e, err := t.entry(it, kg, plen, rows, true)
			if !yield(e, err) || err != nil {
				_ = it.Close()
				return
			}
		}
		if err := it.Close(); err != nil {
			yield(tableEntry[R]{}, t.err("read", err))
		}
	}
}

func (t *pebbleTable[R]) appendKeysOf(r pebble.Reader, kg int, lo, hi []byte, keys []byte, ends []int) ([]byte, []int, error) {
	o, ok := t.bounds(kg, lo, hi)
	if !ok {
		return keys, ends, nil
	}
	it, err := r.NewIter(o)
	if err != nil {
		return keys, ends, t.err("read", err)
	}
	plen := len(o.LowerBound) - len(lo)
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, it.Key()[plen:]...)
		ends = append(ends, len(keys))
	}
	if err := it.Close(); err != nil {
		return keys, ends, t.err("read", err)
	}
	return keys, ends, nil
}

func (t *pebbleTable[R]) lastOf(r pebble.Reader, kg int, lo, hi []byte) (e tableEntry[R], found bool, err error) {
	o, ok := t.bounds(kg, lo, hi)
	if !ok {
		return e, false, nil
	}
	it, err := r.NewIter(o)
	if err != nil {
		return e, false, t.err("read", err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = t.err("read", cerr)
		}
	}()
	if !it.Last() {
		return e, false, nil
	}
	e, err = t.entry(it, kg, len(o.LowerBound)-len(lo), true, false)
	if err != nil {
		return e, false, err
	}
	// The key and the row alias the iterator, closed on return.
	e.key = bytes.Clone(e.key)
	return e, true, nil
}

// scanOf yields the table's rows in r of every key group of the store
// whose keys are in [lo, hi), in key order across key groups: a merge of
// one iterator per key group.
func (t *pebbleTable[R]) scanOf(r pebble.Reader, lo, hi []byte, rows bool) iter.Seq2[tableEntry[R], error] {
	return func(yield func(tableEntry[R], error) bool) {
		h := &iterHeap{}
		defer func() {
			for _, it := range h.its {
				_ = it.it.Close()
			}
		}()
		for kg := t.b.kgr.Start; kg <= t.b.kgr.End; kg++ {
			o, ok := t.bounds(kg, lo, hi)
			if !ok {
				return
			}
			it, err := r.NewIter(o)
			if err != nil {
				yield(tableEntry[R]{}, t.err("scan", err))
				return
			}
			if !it.First() {
				if err := it.Close(); err != nil {
					yield(tableEntry[R]{}, t.err("scan", err))
					return
				}
				continue
			}
			h.its = append(h.its, kgIter{kg: kg, plen: len(o.LowerBound) - len(lo), it: it})
		}
		heap.Init(h)
		for h.Len() > 0 {
			top := &h.its[0]
			e, err := t.entry(top.it, top.kg, top.plen, rows, true)
			if !yield(e, err) || err != nil {
				return
			}
			if top.it.Next() {
				heap.Fix(h, 0)
				continue
			}
			it := heap.Pop(h).(kgIter)
			if err := it.it.Close(); err != nil {
				yield(tableEntry[R]{}, t.err("scan", err))
				return
			}
		}
	}
}

type kgIter struct {
	kg   int
	plen int
	it   *pebble.Iterator
}

type iterHeap struct{ its []kgIter }

func (h *iterHeap) Len() int { return len(h.its) }
func (h *iterHeap) Less(i, j int) bool {
	a, b := h.its[i], h.its[j]
	return bytes.Compare(a.it.Key()[a.plen:], b.it.Key()[b.plen:]) < 0
}
func (h *iterHeap) Swap(i, j int) { h.its[i], h.its[j] = h.its[j], h.its[i] }
func (h *iterHeap) Push(x any)    { h.its = append(h.its, x.(kgIter)) }
func (h *iterHeap) Pop() any {
	x := h.its[len(h.its)-1]
	h.its = h.its[:len(h.its)-1]
	return x
}

// prefixEnd returns the smallest key greater than every key starting with
// p, or nil if there is none (p is all 0xFF).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// appendEscaped appends b so that the results sort like the inputs and no
// result is a prefix of another: 0x00 becomes 0x00 0xFF, and 0x00 0x01
// ends it.
func appendEscaped(dst, b []byte) []byte {
	for {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			break
		}
		dst = append(dst, b[:i+1]...)
		dst = append(dst, 0xFF)
		b = b[i+1:]
	}
	dst = append(dst, b...)
	return append(dst, 0x00, 0x01)
}

// cutEscaped decodes what appendEscaped wrote at the start of b and returns
// the key and what follows it.
func cutEscaped(b []byte) (key, rest []byte, err error) { return cutEscapedTo(nil, b) }

// cutEscapedTo is cutEscaped appending the key to dst.
func cutEscapedTo(dst, b []byte) (key, rest []byte, err error) {
	key = dst
	for {
		i := bytes.IndexByte(b, 0)
		if i < 0 || i+1 >= len(b) {
			return nil, nil, errors.New("escaped key: no end")
		}
		switch b[i+1] {
		case 0xFF:
			key = append(key, b[:i+1]...)
			b = b[i+2:]
		case 0x01:
			return append(key, b[:i]...), b[i+2:], nil
		default:
			return nil, nil, fmt.Errorf("escaped key: byte %#x after 0x00", b[i+1])
		}
	}
}

// appendTime appends t in 8 bytes, big-endian with the sign bit flipped.
func appendTime(dst []byte, t int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(t)^(1<<63))
}

// readTime decodes what appendTime wrote.
func readTime(b []byte) (int64, error) {
	if len(b) < 8 {
		return 0, fmt.Errorf("timestamp: %d bytes, want 8", len(b))
	}
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)), nil
}

// attachDisk makes the store keep its tables in d from now on
// (Config.Dir), making them anew: the store must be empty. Called by
// Checkpointer.Register.
func (b *storeBase) attachDisk(d *diskstate.DB) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return fmt.Errorf("statestore: store %q: keep on disk: %w", b.name, ErrClosed)
	case b.db == d:
		return nil
	case b.db != nil:
		return fmt.Errorf("statestore: store %q: keeps its entries in another database already", b.name)
	}
	empty := b.buf.len() == 0
	for _, t := range b.tables {
		e, _ := t.empty()
		empty = empty && e
	}
	if !empty {
		return fmt.Errorf("statestore: store %q: holds entries or buffered changes: register it with the checkpointer before using it", b.name)
	}
	b.db = d
	b.tables = b.makeTables()
	return nil
}
