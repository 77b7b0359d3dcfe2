package statestore

import (
	"iter"
	"unsafe"

	"github.com/google/btree"
)

// A store keeps its entries in tables: ordered maps from keys (bytes) to
// rows of the store's type R, each key in a key group. A table is in memory
// (memTable, a B-tree of decoded rows) until the store is registered with a
// checkpointer whose Config.Dir is set; it is then in the checkpointer's
// Pebble database (pebbleTable, rows encoded by a rowCodec, see disk.go for
// the key layout). The store kinds are written once, on this interface;
// what differs between the two is the cost of each operation and when a
// disk-backed table encodes and decodes.
//
// A table is used with its store's lock held, except its views, which are
// read without it. A key of a store's table is the part of the database key
// after the store's prefix (and the table's section, for a store of several
// tables): the keys of one table sort like the bytes, across key groups.
type table[R any] interface {
	tableReader[R]
	// get returns the row of key, of key group kg; the row's part that the
	// key holds (rowCodec.decode withKey) may be missing.
	get(kg int, key []byte) (R, bool, error)
	// set sets the row of key, of key group kg, to r. When encoded, enc
	// is r's encoding (rowCodec.encode): a table that stores encodings
	// takes it rather than encode r again. The table may keep key.
	set(kg int, key string, r R, enc []byte, encoded bool) error
	// encoding returns what set stores for r, for a table that stores
	// encodings (valid until the table's next write), or nil: a store
	// that changes anything before set encodes first, so that a value
	// that does not encode changes nothing.
	encoding(r *R) ([]byte, error)
	// del deletes the row of key, of key group kg, if there is one.
	del(kg int, key []byte) error
	// counter returns what counts the rows as they are now, to be called
	// once, without the store's lock.
	counter() func() (int, error)
	// empty reports whether the table has no row.
	empty() (bool, error)
	// clear deletes every row.
	clear() error
	// view returns a read-only view of the table as it is now, which the
	// store may change meanwhile; release it once read.
	view() (tableView[R], error)
}

// tableReader reads a table or a view of it. A loop over the table itself
// must not change it.
type tableReader[R any] interface {
	// scan yields the rows of every key group whose keys are in [lo, hi)
	// (hi nil: no bound), in key order. With rows false, the rows may be
	// left zero (not decoded).
	scan(lo, hi []byte, rows bool) iter.Seq2[tableEntry[R], error]
	// scanIn is scan for a range whose keys are all of key group kg
	// (the keys of one encoded key).
	scanIn(kg int, lo, hi []byte, rows bool) iter.Seq2[tableEntry[R], error]
	// appendKeys appends the keys in [lo, hi) to keys, a range whose keys
	// are all of key group kg, each ending at the offset it appends to
	// ends.
	appendKeys(kg int, lo, hi []byte, keys []byte, ends []int) ([]byte, []int, error)
	// last returns the row of the greatest key in [lo, hi), a range whose
	// keys are all of key group kg; the row's part that the key holds may
	// be missing.
	last(kg int, lo, hi []byte) (tableEntry[R], bool, error)
}

// tableView is a table as it was when it was taken.
type tableView[R any] interface {
	tableReader[R]
	release()
}

// tableEntry is a row of a scan with its key group and key, which is valid
// until the loop's next step. A table in memory does not keep key groups:
// its entries' kg is -1, which its own methods ignore.
type tableEntry[R any] struct {
	kg  int
	key []byte
	row R
}

// rowCodec encodes the rows of a table for a Pebble database and decodes
// them from a key and a value.
type rowCodec[R any] interface {
	// encode appends the value that holds r to dst.
	encode(dst []byte, r *R) ([]byte, error)
	// decode decodes a row from its key and value; without withKey, the
	// part of the row that the key holds is left zero.
	decode(key, value []byte, withKey bool) (R, error)
}

// newTable returns a table of the store b in its backing: memory, or b's
// database (with the key prefix section after the store's, and rows
// encoded by c).
func newTable[R any](b *storeBase, section []byte, c rowCodec[R]) table[R] {
	if b.db == nil {
		return newMemTable[R]()
	}
	return newPebbleTable(b, section, c)
}

// memItem is a row of a memTable: the store's key group is not kept (the
// key implies it).
type memItem[R any] struct {
	key string
	row R
}

func memLess[R any](a, b memItem[R]) bool { return a.key < b.key }

// memTable is a table in memory: a B-tree of the rows, decoded, by key.
type memTable[R any] struct {
	tree *btree.BTreeG[memItem[R]]
}

const btreeDegree = 32

func newMemTable[R any]() *memTable[R] {
	return &memTable[R]{tree: btree.NewG(btreeDegree, memLess[R])}
}

// bytesString returns b as a string without copying: for lookups, which
// keep no key.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// stringBytes returns s as bytes without copying; they must not change.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func (t *memTable[R]) get(_ int, key []byte) (R, bool, error) {
	it, ok := t.tree.Get(memItem[R]{key: bytesString(key)})
	return it.row, ok, nil
}

func (t *memTable[R]) set(_ int, key string, r R, _ []byte, _ bool) error {
	t.tree.ReplaceOrInsert(memItem[R]{key: key, row: r})
	return nil
}

func (t *memTable[R]) encoding(*R) ([]byte, error) { return nil, nil }

func (t *memTable[R]) del(_ int, key []byte) error {
	t.tree.Delete(memItem[R]{key: bytesString(key)})
	return nil
}

func (t *memTable[R]) counter() func() (int, error) {
	n := t.tree.Len()
	return func() (int, error) { return n, nil }
}

func (t *memTable[R]) empty() (bool, error) { return t.tree.Len() == 0, nil }

func (t *memTable[R]) clear() error {
	t.tree.Clear(false)
	return nil
}

func (t *memTable[R]) view() (tableView[R], error) { return memView[R]{t.tree.Clone()}, nil }

func (t *memTable[R]) scan(lo, hi []byte, _ bool) iter.Seq2[tableEntry[R], error] {
	return memScan(t.tree, lo, hi)
}

func (t *memTable[R]) scanIn(_ int, lo, hi []byte, _ bool) iter.Seq2[tableEntry[R], error] {
	return memScan(t.tree, lo, hi)
}

func (t *memTable[R]) appendKeys(_ int, lo, hi []byte, keys []byte, ends []int) ([]byte, []int, error) {
	keys, ends = memAppendKeys(t.tree, lo, hi, keys, ends)
	return keys, ends, nil
}

func (t *memTable[R]) last(_ int, lo, hi []byte) (tableEntry[R], bool, error) {
	return memLast(t.tree, lo, hi)
}

// memView is a copy-on-write clone of a memTable's tree.
type memView[R any] struct {
	tree *btree.BTreeG[memItem[R]]
}

func (v memView[R]) scan(lo, hi []byte, _ bool) iter.Seq2[tableEntry[R], error] {
	return memScan(v.tree, lo, hi)
}

func (v memView[R]) scanIn(_ int, lo, hi []byte, _ bool) iter.Seq2[tableEntry[R], error] {
	return memScan(v.tree, lo, hi)
}

func (v memView[R]) appendKeys(_ int, lo, hi []byte, keys []byte, ends []int) ([]byte, []int, error) {
	keys, ends = memAppendKeys(v.tree, lo, hi, keys, ends)
	return keys, ends, nil
}

func (v memView[R]) last(_ int, lo, hi []byte) (tableEntry[R], bool, error) {
	return memLast(v.tree, lo, hi)
}

func (v memView[R]) release() {}

// memScan yields the items of t in [lo, hi) (hi nil: no bound). The key
// group of an entry is not known: -1.
func memScan[R any](t *btree.BTreeG[memItem[R]], lo, hi []byte) iter.Seq2[tableEntry[R], error] {
	return func(yield func(tableEntry[R], error) bool) {
		each := func(it memItem[R]) bool {
			return yield(tableEntry[R]{kg: -1, key: stringBytes(it.key), row: it.row}, nil)
		}
		switch {
		case hi == nil:
			t.AscendGreaterOrEqual(memItem[R]{key: bytesString(lo)}, each)
		case string(lo) < string(hi):
			t.AscendRange(memItem[R]{key: bytesString(lo)}, memItem[R]{key: bytesString(hi)}, each)
		}
	}
}

// memAppendKeys appends the keys of t in [lo, hi) to keys, with their ends.
func memAppendKeys[R any](t *btree.BTreeG[memItem[R]], lo, hi []byte, keys []byte, ends []int) ([]byte, []int) {
	if string(lo) < string(hi) {
		t.AscendRange(memItem[R]{key: bytesString(lo)}, memItem[R]{key: bytesString(hi)}, func(it memItem[R]) bool {
			keys = append(keys, it.key...)
			ends = append(ends, len(keys))
			return true
		})
	}
	return keys, ends
}

// memLast returns the item of t with the greatest key in [lo, hi).
func memLast[R any](t *btree.BTreeG[memItem[R]], lo, hi []byte) (tableEntry[R], bool, error) {
	var e tableEntry[R]
	found := false
	t.DescendLessOrEqual(memItem[R]{key: bytesString(hi)}, func(it memItem[R]) bool {
		if it.key == string(hi) {
			return true
		}
		if it.key >= string(lo) {
			e, found = tableEntry[R]{kg: -1, key: stringBytes(it.key), row: it.row}, true
		}
		return false
	})
	return e, found, nil
}
