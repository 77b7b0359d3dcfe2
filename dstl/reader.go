package dstl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dstlgo/dstl/dstl/format"
)

// Reader reads handles back after a crash. It fetches only the byte ranges
// a handle points to, merging adjacent ranges of one object into one
// request, and keeps what it fetched in a cache that drops idle ranges, so
// that objects shared by many handles are fetched once. It is safe for
// concurrent use.
type Reader struct {
	backend   Backend
	storageID string // when set, handles must name this storage
	groups    KeyGroupRange
	cache     *rangeCache
	ownCache  bool

	requests, fetched, needed, hits atomic.Int64
}

// ReadStats counts a reader's work.
type ReadStats struct {
	Requests     int64 // ranged GETs sent to the backend
	BytesFetched int64 // bytes those GETs returned
	BytesNeeded  int64 // stored bytes of the change sets read
	CacheHits    int64 // change sets served from fetched ranges without a request
}

// NewReader returns a reader over the storage's backend that yields the
// changes of the key groups in groups (and all metadata). It shares the
// storage's cache; closing the storage closes it.
func (s *Storage) NewReader(groups KeyGroupRange) (*Reader, error) {
	if err := groups.Validate(); err != nil {
		return nil, err
	}
	return &Reader{backend: s.backend, storageID: s.id, groups: groups, cache: s.readerCache}, nil
}

// NewReader returns a reader over backend, with a cache of its own whose
// ranges are dropped after idle; call [Reader.Close] when done.
func NewReader(backend Backend, groups KeyGroupRange, idle time.Duration) (*Reader, error) {
	if err := groups.Validate(); err != nil {
		return nil, err
	}
	return &Reader{backend: backend, groups: groups, cache: newRangeCache(idle, DefaultCacheLimit), ownCache: true}, nil
}

// Close drops the reader's own cache. A reader made by [Storage.NewReader]
// has none.
func (r *Reader) Close() error {
	if r.ownCache {
		r.cache.close()
	}
	return nil
}

// Stats returns what the reader did so far.
func (r *Reader) Stats() ReadStats {
	return ReadStats{Requests: r.requests.Load(), BytesFetched: r.fetched.Load(), BytesNeeded: r.needed.Load(), CacheHits: r.hits.Load()}
}

// Prefetch fetches every range the handles need into the cache, merging
// adjacent ranges across handles: recovering many writers whose handles
// share objects costs one request per run of adjacent ranges.
func (r *Reader) Prefetch(ctx context.Context, handles ...Handle) error {
	var entries []HandleEntry
	for i := range handles {
		if err := handles[i].Validate(); err != nil {
			return err
		}
		entries = append(entries, handles[i].Entries...)
	}
	for _, rg := range planRanges(entries) {
		if _, err := r.fetchRange(ctx, rg); err != nil {
			return err
		}
	}
	return nil
}

// Changes yields the changes of the handle: for each change set in
// sequence-number order, its metadata first, then each key group of the
// reader's range in ascending order, each group's changes in append order.
// Key groups outside the reader's range are skipped (rescaling). A change's
// Data is valid until the next iteration. A damaged object ends the
// iteration with an error naming the object and offset that wraps
// format.ErrChecksum (a checksum mismatch) or format.ErrCorrupt (any other
// damage, a truncated object included); never with wrong data. A handle
// that is not valid, or that names another storage than the reader's, is an
// error wrapping ErrInvalidHandle.
func (r *Reader) Changes(ctx context.Context, h Handle) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
		err := r.Read(ctx, h, func(c Change) error {
			if !yield(c, nil) {
				return errStopIteration
			}
			return nil
		})
		if err != nil && err != errStopIteration {
			yield(Change{}, err)
		}
	}
}

var errStopIteration = errors.New("stop iteration")

// Read calls fn for each change of the handle, in the order of
// [Reader.Changes]. An error from fn stops reading and is returned.
func (r *Reader) Read(ctx context.Context, h Handle, fn func(Change) error) error {
	if err := h.Validate(); err != nil {
		return err
	}
	if r.storageID != "" && h.StorageID != r.storageID {
		return fmt.Errorf("dstl: read: the handle of log %s is on storage %q, the reader reads %q: %w", h.LogID, h.StorageID, r.storageID, ErrInvalidHandle)
	}
	ranges := planRanges(h.Entries)
	loaded := make(map[int][]byte, len(ranges)) // by index in ranges
	for _, e := range h.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		i := findRange(ranges, e)
		data, ok := loaded[i]
		if !ok {
			var err error
			if data, err = r.fetchRange(ctx, ranges[i]); err != nil {
				return err
			}
			loaded[i] = data
		} else {
			r.hits.Add(1)
		}
		rg := ranges[i]
		frame := data[e.Offset-rg.off : e.Offset-rg.off+e.Length]
		r.needed.Add(e.Length)
		cs, err := format.DecodeFrame(e.Object, e.Offset, frame)
		if err != nil {
			return fmt.Errorf("dstl: read change set %d of log %s: %w", e.SequenceNumber, h.LogID, err)
		}
		if cs.LogID != h.LogID || cs.SequenceNumber != uint64(e.SequenceNumber) {
			return fmt.Errorf("dstl: read %q at offset %d: found change set %d of log %s where the handle expects change set %d of log %s: %w",
				e.Object, e.Offset, cs.SequenceNumber, LogID(cs.LogID), e.SequenceNumber, h.LogID, format.ErrCorrupt)
		}
		for _, g := range cs.Groups {
			kg := int(g.KeyGroup)
			if kg != MetaKeyGroup && !r.groups.Contains(kg) {
				continue
			}
			for _, c := range g.Changes {
				if err := fn(Change{KeyGroup: kg, SequenceNumber: e.SequenceNumber, Data: c}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// fetchRange returns the bytes of a range, from the cache or the backend.
func (r *Reader) fetchRange(ctx context.Context, rg fetchRange) ([]byte, error) {
	data, fetched, err := r.cache.fetch(ctx, rg.object, rg.off, rg.len, func(ctx context.Context) ([]byte, error) {
		r.requests.Add(1)
		rc, err := r.backend.Get(ctx, rg.object, rg.off, rg.len)
		if errors.Is(err, ErrInvalidRange) {
			return nil, fmt.Errorf("dstl: read %q: the handle needs %d bytes at offset %d, the object ends before: %w",
				rg.object, rg.len, rg.off, errors.Join(format.ErrCorrupt, err))
		}
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		buf := make([]byte, rg.len)
		n, err := io.ReadFull(rc, buf)
		r.fetched.Add(int64(n))
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("dstl: read %q: the handle needs %d bytes at offset %d, the object ends after %d: %w",
				rg.object, rg.len, rg.off, n, format.ErrCorrupt)
		}
		if err != nil {
			return nil, fmt.Errorf("dstl: read %q: %d bytes at offset %d, got %d: %w", rg.object, rg.len, rg.off, n, err)
		}
		return buf, nil
	})
	if err == nil && !fetched {
		r.hits.Add(1)
	}
	return data, err
}

// fetchRange is one request's worth of an object.
type fetchRange struct {
	object   string
	off, len int64
}

// findRange returns the index of the planned range that holds the entry:
// the last range of its object starting at or before it.
func findRange(ranges []fetchRange, e HandleEntry) int {
	i, _ := slices.BinarySearchFunc(ranges, e, func(rg fetchRange, e HandleEntry) int {
		return cmp.Or(cmp.Compare(rg.object, e.Object), cmp.Compare(rg.off, e.Offset+1))
	})
	return i - 1 // ranges are merged, so the one before the insertion point holds it
}

// maxCoalesced bounds a range made of touching entries: one request, and
// one buffer, stays at most this large (an overlapping entry still joins).
const maxCoalesced = 64 << 20

// planRanges merges the entries' ranges: per object, ranges that overlap
// become one, and ranges that touch too, up to maxCoalesced bytes.
func planRanges(entries []HandleEntry) []fetchRange {
	rs := make([]fetchRange, 0, len(entries))
	for _, e := range entries {
		rs = append(rs, fetchRange{object: e.Object, off: e.Offset, len: e.Length})
	}
	slices.SortFunc(rs, func(a, b fetchRange) int {
		return cmp.Or(cmp.Compare(a.object, b.object), cmp.Compare(a.off, b.off))
	})
	out := rs[:0]
	for _, rg := range rs {
		if n := len(out); n > 0 && out[n-1].object == rg.object &&
			(rg.off < out[n-1].off+out[n-1].len || rg.off == out[n-1].off+out[n-1].len && out[n-1].len+rg.len <= maxCoalesced) {
			last := &out[n-1]
			last.len = max(last.len, rg.off+rg.len-last.off)
			continue
		}
		out = append(out, rg)
	}
	return out
}
