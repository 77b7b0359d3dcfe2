package statestore

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"

	"github.com/cockroachdb/pebble/v2"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// The disk-backed stores (Config.Dir) keep their entries in the
// checkpointer's Pebble database. Every key is the store's prefix in the
// entry's key group (package diskstate: key group, store name) followed by
// what the store puts there:
//
//	key-value: the encoded key;
//	window:    0x00, escaped key, window start (data), and
//	           0x01, window start, escaped key (the expiry index, no value);
//	versioned: escaped key, timestamp.
//
// Escaped keys (appendEscaped) sort like the keys and end where the key
// ends; timestamps take 8 bytes big-endian with the sign bit flipped
// (appendTime), so they sort like the numbers.

// diskPrefix appends the prefix of the store's keys in key group kg.
func (b *storeBase) diskPrefix(dst []byte, kg int) []byte {
	return diskstate.AppendStorePrefix(dst, kg, b.name)
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
func cutEscaped(b []byte) (key, rest []byte, err error) {
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

// scanEntry is one entry of a scan: the key group, the part of the key
// after the store's prefix, and the value. Suffix and value are valid until
// the loop's next step.
type scanEntry struct {
	kg            int
	suffix, value []byte
}

// diskScan yields the store's entries of every key group of kgr whose
// suffix (the part after the store's prefix) is in [lower, upper), upper
// nil meaning no bound, in the order of the suffixes across key groups (a
// merge of one iterator per key group), as they were when the loop began.
func (b *storeBase) diskScan(kgr dstl.KeyGroupRange, lower, upper []byte) iter.Seq2[scanEntry, error] {
	return func(yield func(scanEntry, error) bool) {
		snap := b.disk.NewSnapshot()
		defer snap.Close()
		b.diskScanIn(snap, kgr, lower, upper)(yield)
	}
}

// diskScanIn is diskScan over r: a snapshot the caller took (and closes
// after the loop), or the database.
func (b *storeBase) diskScanIn(r pebble.Reader, kgr dstl.KeyGroupRange, lower, upper []byte) iter.Seq2[scanEntry, error] {
	return func(yield func(scanEntry, error) bool) {
		h := &iterHeap{}
		defer func() {
			for _, it := range h.its {
				_ = it.it.Close()
			}
		}()
		for kg := kgr.Start; kg <= kgr.End; kg++ {
			p := b.diskPrefix(nil, kg)
			o := &pebble.IterOptions{LowerBound: append(bytes.Clone(p), lower...)}
			if upper != nil {
				o.UpperBound = append(bytes.Clone(p), upper...)
			} else {
				o.UpperBound = prefixEnd(p)
			}
			it, err := r.NewIter(o)
			if err != nil {
				yield(scanEntry{}, fmt.Errorf("statestore: store %q: scan: %w", b.name, err))
				return
			}
			if !it.First() {
				err := it.Close()
				if err != nil {
					yield(scanEntry{}, fmt.Errorf("statestore: store %q: scan: %w", b.name, err))
					return
				}
				continue
			}
			h.its = append(h.its, kgIter{kg: kg, plen: len(p), it: it})
		}
		heap.Init(h)
		for h.Len() > 0 {
			top := &h.its[0]
			key := top.it.Key()
			if !yield(scanEntry{kg: top.kg, suffix: key[top.plen:], value: top.it.Value()}, nil) {
				return
			}
			if top.it.Next() {
				heap.Fix(h, 0)
				continue
			}
			it := heap.Pop(h).(kgIter)
			if err := it.it.Close(); err != nil {
				yield(scanEntry{}, fmt.Errorf("statestore: store %q: scan: %w", b.name, err))
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

// diskClear deletes every entry of the store, in every key group of its
// range, and tells the database that keys changed that it cannot name.
func (b *storeBase) diskClear() error {
	for kg := b.kgr.Start; kg <= b.kgr.End; kg++ {
		p := b.diskPrefix(nil, kg)
		if err := b.disk.DeleteRange(p, prefixEnd(p), pebble.NoSync); err != nil {
			return fmt.Errorf("statestore: store %q: clear: %w", b.name, err)
		}
	}
	b.disk.TouchAll()
	return nil
}

// diskClearLocked is every disk-backed store's Clear, with its lock held:
// it deletes the store's entries (unless the store, and maybe its
// database, is closed), resets what the base holds, and keeps a failed
// deletion for Err.
func (b *storeBase) diskClearLocked() {
	var err error
	if !b.closed {
		err = b.diskClear()
	}
	b.clearLocked()
	if err != nil {
		b.failLocked(err)
	}
}

// diskSet sets key to value in the database and records the change.
func (b *storeBase) diskSet(key, value []byte) error {
	if err := b.disk.Set(key, value, pebble.NoSync); err != nil {
		return fmt.Errorf("statestore: store %q: %w", b.name, err)
	}
	b.disk.Touch(key)
	return nil
}

// diskDelete deletes key from the database and records the change.
func (b *storeBase) diskDelete(key []byte) error {
	if err := b.disk.Delete(key, pebble.NoSync); err != nil {
		return fmt.Errorf("statestore: store %q: %w", b.name, err)
	}
	b.disk.Touch(key)
	return nil
}

// diskGet returns a copy of the value of key, and false if there is none.
func (b *storeBase) diskGet(key []byte) ([]byte, bool, error) {
	v, closer, err := b.disk.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("statestore: store %q: %w", b.name, err)
	}
	v = bytes.Clone(v)
	_ = closer.Close()
	return v, true, nil
}
