package dstl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/format"
)

// Reader reads handles back after a crash. It fetches only the byte ranges
// a handle points to, merging adjacent ranges of one object into one
// request, and keeps what it fetched in a cache that drops idle ranges, so
// that objects shared by many handles are fetched once. While the caller
// takes the changes of one change set, a goroutine of the reader's
// fetches, checks and decodes the next few; a read that ends early may
// thus have fetched a few sets more than it gave (counted in BytesFetched,
// not in BytesNeeded). A backend's Get must return once its context ends:
// a read returns only when its fetches did. It is safe for concurrent use.
type Reader struct {
	backend   backends.Backend
	local     backends.Backend // local copies, nil without local recovery
	log       *slog.Logger
	storageID string // when set, handles must name this storage
	groups    KeyGroupRange
	cache     *rangeCache
	ownCache  bool

	requests, fetched, needed, hits        atomic.Int64
	localRequests, localFetched, fallbacks atomic.Int64
}

// ErrUnavailable is wrapped by the error of a read that the backend did
// not try, since an earlier read of the same bucket went unanswered; it is
// [backends.ErrUnavailable] (see [backends.Policy.UnansweredHold]).
var ErrUnavailable = backends.ErrUnavailable

// ReadStats counts a reader's work.
type ReadStats struct {
	Requests     int64 // ranged GETs sent to the backend
	BytesFetched int64 // bytes those GETs returned
	BytesNeeded  int64 // stored bytes of the change sets read from the backend
	CacheHits    int64 // change sets served from ranges fetched from the backend without a request
	// LocalRequests and LocalBytesFetched count the reads of local copies
	// ([Reader.ReadPreferLocal]); Fallbacks the change sets read from the
	// backend because their local copy was missing or damaged.
	LocalRequests     int64
	LocalBytesFetched int64
	Fallbacks         int64
}

// NewReader returns a reader over the storage's backend that yields the
// changes of the key groups in groups (and all metadata). It takes the
// storage's settings: it shares the storage's cache (closing the storage
// closes it), reads the local copies of a storage with local recovery,
// and reads only handles that name the storage ([Storage.ID]).
func (s *Storage) NewReader(groups KeyGroupRange) (*Reader, error) {
	if err := groups.Validate(); err != nil {
		return nil, err
	}
	return &Reader{backend: s.backend, local: s.local, log: s.log, storageID: s.id, groups: groups, cache: s.readerCache}, nil
}

// ReaderOptions configure a [Reader] made by [NewReader]. The zero value
// of every field is its default.
type ReaderOptions struct {
	// CacheIdleTimeout is how long the reader's cache keeps a range that
	// no read uses. The default is 10 minutes ([DefaultCacheIdleTimeout]);
	// a negative value is not valid.
	CacheIdleTimeout time.Duration
	// CacheSize bounds the bytes the reader's cache keeps: past it, the
	// least recently used ranges go first. The default is 256 MiB
	// ([DefaultReaderCacheSize]); a negative value is not valid.
	CacheSize int64
	// StorageID, when set, is the storage that every handle read must
	// name ([Handle.StorageID]): reading a handle of another storage is an
	// error that wraps [ErrInvalidHandle]. The default, empty, reads the
	// handles of any storage.
	StorageID string
}

// DefaultReaderCacheSize is the default of [ReaderOptions.CacheSize], and
// the size of a storage's cache for its readers.
const DefaultReaderCacheSize int64 = defaultCacheLimit

// NewReader returns a reader over backend that yields the changes of the
// key groups in groups (and all metadata), with a cache of its own; call
// [Reader.Close] when done. opts' zero fields are their defaults; an
// option that is not valid is an error that wraps [ErrInvalidConfig] and
// names it.
func NewReader(backend backends.Backend, groups KeyGroupRange, opts ReaderOptions) (*Reader, error) {
	if err := groups.Validate(); err != nil {
		return nil, err
	}
	switch {
	case opts.CacheIdleTimeout < 0:
		return nil, fmt.Errorf("%w: reader option CacheIdleTimeout: %v is negative", ErrInvalidConfig, opts.CacheIdleTimeout)
	case opts.CacheSize < 0:
		return nil, fmt.Errorf("%w: reader option CacheSize: %d is negative", ErrInvalidConfig, opts.CacheSize)
	}
	if opts.CacheIdleTimeout == 0 {
		opts.CacheIdleTimeout = DefaultCacheIdleTimeout
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = DefaultReaderCacheSize
	}
	return &Reader{backend: backend, log: slog.Default(), storageID: opts.StorageID, groups: groups,
		cache: newRangeCache(opts.CacheIdleTimeout, opts.CacheSize), ownCache: true}, nil
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
	return ReadStats{Requests: r.requests.Load(), BytesFetched: r.fetched.Load(), BytesNeeded: r.needed.Load(), CacheHits: r.hits.Load(),
		LocalRequests: r.localRequests.Load(), LocalBytesFetched: r.localFetched.Load(), Fallbacks: r.fallbacks.Load()}
}

// Prefetch fetches every range the handles need into the cache, merging
// adjacent ranges across handles: recovering many writers whose handles
// share objects costs one request per run of adjacent ranges. Up to
// [prefetchConcurrency] requests run at once; the first error ends the
// others.
func (r *Reader) Prefetch(ctx context.Context, handles ...Handle) error {
	var entries []HandleEntry
	for i := range handles {
		if err := handles[i].Validate(); err != nil {
			return err
		}
		entries = append(entries, handles[i].Entries...)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(prefetchConcurrency)
	for _, rg := range planRanges(entries) {
		g.Go(func() error {
			rd, err := r.fetchRange(ctx, r.backend, false, rg)
			rd.release() // the cache keeps it
			return err
		})
	}
	return g.Wait()
}

// prefetchConcurrency is how many ranges [Reader.Prefetch] fetches at once.
const prefetchConcurrency = 8

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
		// The changes go to yield directly, not through Read's fn: one
		// call per change less.
		err := r.eachSet(ctx, h, func(cs *format.ChangeSet, e HandleEntry) error {
			for _, g := range cs.Groups {
				kg := int(g.KeyGroup)
				if kg != MetaKeyGroup && !r.groups.Contains(kg) {
					continue
				}
				for _, c := range g.Changes {
					if !yield(Change{KeyGroup: kg, SequenceNumber: e.SequenceNumber, Data: c}, nil) {
						return errStopIteration
					}
				}
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
	return r.eachSet(ctx, h, func(cs *format.ChangeSet, e HandleEntry) error {
		return r.emit(cs, e, fn)
	})
}

// eachSet calls fn with each change set of the handle, decoded whole, in
// sequence-number order; the set is valid until fn returns. An error from
// fn stops reading and is returned.
func (r *Reader) eachSet(ctx context.Context, h Handle, fn func(*format.ChangeSet, HandleEntry) error) error {
	if err := r.checkHandle(h); err != nil {
		return err
	}
	remote := r.newLoader(r.backend, false, h.Entries)
	defer remote.close()
	return r.eachSetAhead(ctx, h, remote, fn)
}

// setsAhead is how many results of [readAhead] wait for the caller, while
// one more is made: a reader fetches and decodes up to setsAhead+1 change
// sets ahead of the one the caller holds.
const setsAhead = 4

// eachSetAhead reads the sets of h with l for eachSet, ahead of fn when
// l has ranges to fetch ([readAhead]): restoring a store applies one set
// while the next ranges are fetched and checked.
func (r *Reader) eachSetAhead(ctx context.Context, h Handle, l *loader, fn func(*format.ChangeSet, HandleEntry) error) error {
	type set struct {
		cs     *format.ChangeSet
		needed int64
	}
	return readAhead(ctx, len(h.Entries), !l.cached(), func(ctx context.Context, i int, dec *format.FrameDecoder) (set, error) {
		cs, needed, err := l.changeSet(ctx, dec, h, h.Entries[i])
		return set{cs, needed}, err
	}, func(i int, s set, err error) error {
		r.needed.Add(s.needed)
		if err != nil {
			return err
		}
		return fn(s.cs, h.Entries[i])
	})
}

// readAhead calls next for i from 0 to n-1, in order, and consume with
// each result, in order, on the caller's goroutine. With ahead (and more
// than one result to make), next runs on a goroutine of its own, up to
// setsAhead+1 results ahead of the one consume holds (setsAhead wait in a
// channel, one more is being made): worth it when next fetches, not when
// it only decodes what is cached. Each call of next then decodes with its
// own decoder of a ring of setsAhead+2, so the result consume holds is not
// overwritten while next works ahead. consume gets a failed result too;
// the read ends with consume's error, else the result's. The goroutine has
// ended when readAhead returns, however it returns (an error, the end of
// ctx, consume's panic or runtime.Goexit), so what next loaded may be
// released then.
func readAhead[T any](ctx context.Context, n int, ahead bool, next func(ctx context.Context, i int, dec *format.FrameDecoder) (T, error), consume func(i int, v T, err error) error) error {
	if !ahead || n < 2 {
		var dec format.FrameDecoder
		for i := range n {
			if err := ctx.Err(); err != nil {
				return err
			}
			v, err := next(ctx, i, &dec)
			if err := consume(i, v, err); err != nil {
				return err
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	type result struct {
		v   T
		err error
	}
	aheadCtx, cancel := context.WithCancel(ctx)
	results := make(chan result, setsAhead)
	decs := decoderRings.Get().(*decoderRing)
	go func() {
		defer close(results)
		for i := range n {
			res := result{err: aheadCtx.Err()}
			if res.err == nil {
				res.v, res.err = next(aheadCtx, i, &decs[i%len(decs)])
			}
			select {
			case results <- res:
			case <-aheadCtx.Done():
				return
			}
			if res.err != nil {
				return
			}
		}
	}()
	defer func() {
		cancel()
		for range results { // until the goroutine ended
		}
		for i := range decs {
			decs[i].Reset() // the pool keeps the memory, not the frames
		}
		decoderRings.Put(decs)
	}()
	i := 0
	for res := range results {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := consume(i, res.v, res.err); err != nil {
			return err
		}
		if res.err != nil {
			return res.err
		}
		i++
	}
	if i < n {
		return ctx.Err() // the goroutine saw ctx end before it could send
	}
	return nil
}

// decoderRing is the decoders of a [readAhead]. A pool keeps them, and
// the memory they grew, from one read to the next.
type decoderRing [setsAhead + 2]format.FrameDecoder

var decoderRings = sync.Pool{New: func() any { return new(decoderRing) }}

// checkHandle checks that h is valid and of the reader's storage.
func (r *Reader) checkHandle(h Handle) error {
	if err := h.Validate(); err != nil {
		return err
	}
	if r.storageID != "" && h.StorageID != r.storageID {
		return fmt.Errorf("dstl: read: the handle of log %s is on storage %q, the reader reads %q: %w", h.LogID, h.StorageID, r.storageID, ErrInvalidHandle)
	}
	return nil
}

// emit calls fn for the changes of the set the reader yields.
func (r *Reader) emit(cs *format.ChangeSet, e HandleEntry, fn func(Change) error) error {
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
	return nil
}

// loader fetches the planned ranges of one handle's entries from one
// backend, each range once; a range that failed fails again without a
// request. It holds the ranges it loaded, and the changes decoded from
// them stay valid, until close.
type loader struct {
	r       *Reader
	backend backends.Backend
	local   bool
	ranges  []fetchRange
	loaded  map[int]rangeData // by index in ranges
	failed  map[int]error
}

func (r *Reader) newLoader(b backends.Backend, local bool, entries []HandleEntry) *loader {
	ranges := planRanges(entries)
	return &loader{r: r, backend: b, local: local, ranges: ranges, loaded: make(map[int]rangeData, len(ranges)), failed: map[int]error{}}
}

// cached takes the loader's ranges that the reader's cache holds (a
// prefetch's), and reports whether it holds them all: then reading the
// sets only decodes.
func (l *loader) cached() bool {
	all := true
	for i, rg := range l.ranges {
		if _, ok := l.loaded[i]; ok {
			continue
		}
		key := rg.object
		if l.local {
			key = localCacheKey + rg.object
		}
		if rd, ok := l.r.cache.get(key, rg.off, rg.len); ok {
			l.loaded[i] = rd // each set read from it counts as a hit
			continue
		}
		all = false
	}
	return all
}

// close releases the loaded ranges; the change sets decoded from them must
// not be used after.
func (l *loader) close() {
	for i, rd := range l.loaded {
		rd.release()
		delete(l.loaded, i)
	}
}

// changeSet fetches the change set of entry e of handle h and decodes it
// with dec. The result is valid until dec's next use, and not after close.
// needed is the bytes of the set read from the backend (0 from a local
// copy, or when the fetch failed), which the caller adds to the reader's
// BytesNeeded when it takes the set: a set read ahead and never taken was
// not needed.
func (l *loader) changeSet(ctx context.Context, dec *format.FrameDecoder, h Handle, e HandleEntry) (cs *format.ChangeSet, needed int64, err error) {
	i := findRange(l.ranges, e)
	if err := l.failed[i]; err != nil {
		return nil, 0, err
	}
	rd, ok := l.loaded[i]
	if !ok {
		var err error
		if rd, err = l.r.fetchRange(ctx, l.backend, l.local, l.ranges[i]); err != nil {
			l.failed[i] = err
			return nil, 0, err
		}
		l.loaded[i] = rd
	} else if !l.local {
		l.r.hits.Add(1)
	}
	rg := l.ranges[i]
	frame := rd.data[e.Offset-rg.off : e.Offset-rg.off+e.Length]
	if !l.local {
		needed = e.Length
	}
	// The changes alias the fetched range, which no one changes; its
	// frames' checksums were verified as it was fetched (the others'
	// are verified now).
	decode := dec.Decode
	if rd.verified.has(e.Offset, e.Length) {
		decode = dec.DecodeVerified
	}
	cs, err = decode(e.Object, e.Offset, frame)
	if err != nil {
		return nil, needed, fmt.Errorf("dstl: read change set %d of log %s: %w", e.SequenceNumber, h.LogID, err)
	}
	if cs.LogID != h.LogID || cs.SequenceNumber != uint64(e.SequenceNumber) {
		return nil, needed, fmt.Errorf("dstl: read %q at offset %d: found change set %d of log %s where the handle expects change set %d of log %s: %w",
			e.Object, e.Offset, cs.SequenceNumber, LogID(cs.LogID), e.SequenceNumber, h.LogID, format.ErrCorrupt)
	}
	return cs, needed, nil
}

// localCacheKey prefixes the cache keys of local copies, which may carry
// the names of the objects they copy.
const localCacheKey = "\x00local\x00"

// fetchRange returns the bytes of a range, from the cache or from b. The
// frames of a range fetched from b are verified ([format.VerifyFrame]) at
// once, by the goroutine that fetched it: a prefetch checks the ranges it
// fetches in parallel, while their bytes are fresh in the processor's
// caches.
func (r *Reader) fetchRange(ctx context.Context, b backends.Backend, local bool, rg fetchRange) (rangeData, error) {
	key := rg.object
	requests, fetched := &r.requests, &r.fetched
	if local {
		key = localCacheKey + rg.object
		requests, fetched = &r.localRequests, &r.localFetched
	}
	data, wasFetched, err := r.cache.fetch(ctx, key, rg.off, rg.len, func(ctx context.Context) (rangeData, error) {
		rc, err := b.Get(ctx, rg.object, rg.off, rg.len)
		if !errors.Is(err, backends.ErrUnavailable) { // a Get held by the backend sent no request
			requests.Add(1)
		}
		if errors.Is(err, backends.ErrInvalidRange) {
			return rangeData{}, fmt.Errorf("dstl: read %q: the handle needs %d bytes at offset %d, the object ends before: %w",
				rg.object, rg.len, rg.off, errors.Join(format.ErrCorrupt, err))
		}
		if err != nil {
			return rangeData{}, err
		}
		defer rc.Close()
		rb := newRangeBuf(rg.len)
		buf := rb.b
		n, err := io.ReadFull(rc, buf)
		fetched.Add(int64(n))
		if err != nil {
			rb.release()
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return rangeData{}, fmt.Errorf("dstl: read %q: the handle needs %d bytes at offset %d, the object ends after %d: %w",
				rg.object, rg.len, rg.off, n, format.ErrCorrupt)
		}
		if err != nil {
			return rangeData{}, fmt.Errorf("dstl: read %q: %d bytes at offset %d, got %d: %w", rg.object, rg.len, rg.off, n, err)
		}
		return rangeData{data: buf, verified: verifyFrames(rg, buf), buf: rb}, nil
	})
	if err == nil && !wasFetched && !local {
		r.hits.Add(1)
	}
	return data, err
}

// fetchRange is one request's worth of an object.
type fetchRange struct {
	object   string
	off, len int64
	frames   []frameSpan // the entries' frames in the range, by offset
}

// frameSpan is where a frame is in its object.
type frameSpan struct{ off, len int64 }

// verifyFrames returns the frames of rg that pass [format.VerifyFrame] in
// data, the bytes of rg. The others are left to the decoder, which fails
// on them with the error that names what is wrong.
func verifyFrames(rg fetchRange, data []byte) frameSet {
	ok := make(frameSet, len(rg.frames))
	for _, f := range rg.frames {
		if f.off < rg.off || f.off+f.len > rg.off+int64(len(data)) {
			continue
		}
		if format.VerifyFrame(rg.object, f.off, data[f.off-rg.off:f.off-rg.off+f.len]) == nil {
			ok[f.off] = f.len
		}
	}
	return ok
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
		return cmp.Or(cmp.Compare(a.object, b.object), cmp.Compare(a.off, b.off), cmp.Compare(a.len, b.len))
	})
	out := rs[:0]
	var frames []frameSpan // of out[len(out)-1]
	for _, rg := range rs {
		f := frameSpan{rg.off, rg.len}
		if n := len(out); n > 0 && out[n-1].object == rg.object &&
			(rg.off < out[n-1].off+out[n-1].len || rg.off == out[n-1].off+out[n-1].len && out[n-1].len+rg.len <= maxCoalesced) {
			last := &out[n-1]
			last.len = max(last.len, rg.off+rg.len-last.off)
			if frames[len(frames)-1] != f { // the same entry in several handles is verified once
				frames = append(frames, f)
			}
			continue
		}
		if n := len(out); n > 0 {
			out[n-1].frames = slices.Clip(frames)
		}
		frames = []frameSpan{f}
		out = append(out, rg)
	}
	if n := len(out); n > 0 {
		out[n-1].frames = slices.Clip(frames)
	}
	return out
}
