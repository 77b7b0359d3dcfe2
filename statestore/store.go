package statestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// Kind names a store implementation. Snapshot payloads and the descriptors in
// the log carry it.
type Kind string

// The kinds of this package.
const (
	KindKeyValue  Kind = "kv"
	KindWindow    Kind = "window"
	KindVersioned Kind = "versioned"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrSnapshotFormat: a snapshot payload or object is not of the
	// expected kind, magic or version, or is damaged (checksum, truncation).
	ErrSnapshotFormat = errors.New("statestore: snapshot format")
	// ErrLogFormat: a change read back from the log does not decode, or
	// its descriptor does not match the store of that name.
	ErrLogFormat = errors.New("statestore: changelog format")
	// ErrUnknownStore: a snapshot or the log names a store that is not
	// registered.
	ErrUnknownStore = errors.New("statestore: unknown store")
	// ErrInvalidCheckpointHandle: a checkpoint handle does not decode or
	// does not fit the checkpointer (another maximum parallelism).
	ErrInvalidCheckpointHandle = errors.New("statestore: invalid checkpoint handle")
	// ErrUnknownCheckpoint: a checkpoint id that SnapshotState did not
	// return, or that was completed or aborted already.
	ErrUnknownCheckpoint = errors.New("statestore: unknown checkpoint")
	// ErrRestoreFailed: the last InitializeState failed, so the stores
	// hold no committed state; the checkpointer refuses to checkpoint or
	// materialise until an InitializeState succeeds.
	ErrRestoreFailed = errors.New("statestore: the last restore failed")
	// ErrClosed: the store or checkpointer was closed.
	ErrClosed = errors.New("statestore: closed")
)

// Change is one change of a store, as it is logged: a key (in its codec's
// encoding) and a value (in its codec's encoding) or a tombstone, and a
// timestamp for the stores whose entries carry one (window start, version
// timestamp).
//
// A change with KeyGroup dstl.MetaKeyGroup, no key and a timestamp is the
// store's stream time: window and versioned stores log it, as metadata, when
// it advanced, so that expiry on restore, even into a part of the key groups,
// is what it was before.
type Change struct {
	// KeyGroup is the key group of Key (see KeyGroup), or
	// dstl.MetaKeyGroup for the stream time.
	KeyGroup int
	// Key is the encoded key.
	Key []byte
	// Value is the encoded value; nil for a tombstone.
	Value []byte
	// Tombstone marks a deletion.
	Tombstone bool
	// Timestamp is the change's time, when HasTimestamp.
	Timestamp    int64
	HasTimestamp bool
}

// Store is the lifecycle every state store has, whatever it holds (in the
// manner of Kafka Streams' StateStore). While logging is on, every change is
// buffered; Flush appends the buffered changes to the store's log, each to
// the key group of its key. During restore, logging is off and ApplyChange
// applies changes read back from the log without logging them again.
//
// Store is sealed: only the stores of this package (KeyValueStore,
// WindowStore, VersionedStore) implement it, through an unexported method.
// A Checkpointer cuts every registered store at one point of the log under
// the store's lock, encodes it from a copy-on-write view, restores it into
// a part of its key groups and, with Config.Dir, keeps it in its own
// database in a key layout that the files of its snapshots hold; none of
// that is a promise an implementation from outside the package could keep,
// and sealing the interface leaves the package free to change how it is
// done. The interface lets a program hold and register stores of several
// kinds together.
//
// The stores of this package are safe for concurrent use.
type Store interface {
	// Name identifies the store among those sharing a log.
	Name() string
	// Kind is the store's implementation.
	Kind() Kind
	// Log is the writer the store appends its changes to (nil for a store
	// that does not log).
	Log() *dstl.Writer
	// KeyGroups is the range of key groups the store owns, and
	// MaxParallelism the number of key groups.
	KeyGroups() dstl.KeyGroupRange
	MaxParallelism() int
	// TakeChanges returns the changes buffered since the last call (or
	// Flush) and forgets them.
	TakeChanges() []Change
	// ApplyChange applies a change read back from the log, without
	// logging it, whether logging is on or not.
	ApplyChange(c Change) error
	// SetLogging turns logging on or off; Logging reports it.
	SetLogging(on bool)
	Logging() bool
	// Clear removes every entry and every buffered change, without
	// logging anything: the path back to a committed state.
	Clear()
	// Flush appends the buffered changes to the log. On error the changes
	// not appended stay buffered, in order.
	Flush(ctx context.Context) error
	// Close closes the store; later calls fail with ErrClosed.
	Close() error
	// Snapshot encodes the whole store into one payload, which carries
	// the store's kind and format version and a checksum.
	Snapshot() ([]byte, error)
	// RestoreSnapshot wipes the store and loads a payload of Snapshot,
	// without logging; it keeps the keys of the store's key groups only.
	// A payload of another kind or version, or a damaged one, is an error
	// wrapping ErrSnapshotFormat, and leaves the store as it was.
	RestoreSnapshot(payload []byte) error

	// base seals the interface: it returns what every store of this
	// package shares.
	base() *storeBase
}

// internalStore is what a Checkpointer needs beyond Store: every store of
// this package implements it.
type internalStore interface {
	Store
	// captureLocked, called with the store's lock held, returns a function
	// that encodes the store as it is now (a copy-on-write view), to be
	// called after the lock is released.
	captureLocked() func() ([]byte, error)
	// restorePayload loads a payload, keeping the keys of kgr; with wipe,
	// the store is emptied first.
	restorePayload(payload []byte, kgr dstl.KeyGroupRange, wipe bool) error
	// attachDisk makes the store keep its tables in d from now on
	// (Config.Dir): it must be empty. Called by Checkpointer.Register.
	attachDisk(d *diskstate.DB) error
	// restoreStreamTime raises the stream time to a restored one (of a
	// disk-backed snapshot), as restorePayload does for a payload's.
	restoreStreamTime(st int64) error
}

// Option configures a store.
type Option func(*storeOptions)

type storeOptions struct {
	maxParallelism int
	keyGroups      *dstl.KeyGroupRange
}

// WithMaxParallelism sets the number of key groups (default
// DefaultMaxParallelism). Every store of an operator, and its Checkpointer,
// must use the same number, in every run of the job.
func WithMaxParallelism(n int) Option { return func(o *storeOptions) { o.maxParallelism = n } }

// WithKeyGroups sets the key groups the store owns; the default is the
// log's range, or every key group when the store has no log.
func WithKeyGroups(r dstl.KeyGroupRange) Option {
	return func(o *storeOptions) { o.keyGroups = &r }
}

// storeBase is the part every store shares: identity, key groups, the lock,
// logging and the buffer of changes.
type storeBase struct {
	name    string
	kind    Kind
	version int
	log     *dstl.Writer
	maxP    int
	kgr     dstl.KeyGroupRange

	logging atomic.Bool

	mu       sync.Mutex
	closed   bool
	buf      changeBuf // the changes not yet appended to the log
	describe bool      // the next flush appends the store's descriptor first
	scratch  []byte
	// vscratch is the scratch buffer encodeLogged encodes values in
	// (encodeReusing).
	vscratch []byte
	// onFlush, when set (by a Checkpointer), learns the bytes appended.
	onFlush func(n int64)
	// streamTime is the largest timestamp seen (window and versioned
	// stores); logged is the last one logged.
	streamTime, loggedStreamTime int64
	// db, when set (Config.Dir), holds the store's tables instead of
	// memory; set once, by attachDisk, before the store is used.
	db *diskstate.DB
	// tables are the store's tables, which makeTables makes (again) in
	// the store's backing.
	tables     []anyTable
	makeTables func() []anyTable
	// failed is the first error that a method without an error result met
	// (a loop over a disk-backed store that stopped early, a Clear that
	// failed); see Err.
	failed error
}

func (b *storeBase) init(name string, kind Kind, version int, log *dstl.Writer, opts []Option) error {
	o := storeOptions{maxParallelism: DefaultMaxParallelism}
	for _, f := range opts {
		f(&o)
	}
	b.name, b.kind, b.version, b.log, b.maxP, b.describe = name, kind, version, log, o.maxParallelism, true
	b.streamTime, b.loggedStreamTime = minTime, minTime
	if err := checkName("store name", name); err != nil {
		return err
	}
	if b.maxP < 1 || b.maxP > dstl.MaxKeyGroup+1 {
		return fmt.Errorf("statestore: store %q: max parallelism %d not in [1, %d]", name, b.maxP, dstl.MaxKeyGroup+1)
	}
	switch {
	case o.keyGroups != nil:
		b.kgr = *o.keyGroups
	case log != nil:
		b.kgr = log.KeyGroups()
	default:
		b.kgr = dstl.KeyGroupRange{Start: 0, End: b.maxP - 1}
	}
	if err := b.kgr.Validate(); err != nil || b.kgr.End >= b.maxP {
		return fmt.Errorf("statestore: store %q: key groups %v do not fit max parallelism %d", name, b.kgr, b.maxP)
	}
	if log != nil && (b.kgr.Start < log.KeyGroups().Start || b.kgr.End > log.KeyGroups().End) {
		return fmt.Errorf("statestore: store %q: key groups %v outside the log's %v", name, b.kgr, log.KeyGroups())
	}
	b.logging.Store(log != nil)
	return nil
}

func checkName(what, s string) error {
	if s == "" || len(s) > 255 || !utf8.ValidString(s) {
		return fmt.Errorf("statestore: %s %q: must be 1 to 255 bytes of UTF-8", what, s)
	}
	return nil
}

// Name returns the store's name.
func (b *storeBase) Name() string { return b.name }

// Kind returns the store's kind.
func (b *storeBase) Kind() Kind { return b.kind }

// Log returns the writer the store appends to.
func (b *storeBase) Log() *dstl.Writer { return b.log }

// KeyGroups returns the key groups the store owns.
func (b *storeBase) KeyGroups() dstl.KeyGroupRange { return b.kgr }

// MaxParallelism returns the number of key groups.
func (b *storeBase) MaxParallelism() int { return b.maxP }

// SetLogging turns logging on or off. A store without a log never logs.
func (b *storeBase) SetLogging(on bool) { b.logging.Store(on && b.log != nil) }

// Logging reports whether changes are buffered for the log.
func (b *storeBase) Logging() bool { return b.logging.Load() }

func (b *storeBase) base() *storeBase { return b }

// TakeChanges returns the buffered changes and forgets them.
func (b *storeBase) TakeChanges() []Change {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.takeLocked()
	return c
}

func (b *storeBase) takeLocked() []Change {
	b.bufferStreamTimeLocked()
	c := b.buf.changes()
	b.buf.reset()
	return c
}

// bufferStreamTimeLocked buffers the stream time when it advanced since it
// was last logged.
func (b *storeBase) bufferStreamTimeLocked() {
	if b.streamTime > b.loggedStreamTime && b.log != nil && b.logging.Load() {
		b.bufferLocked(Change{KeyGroup: dstl.MetaKeyGroup, Timestamp: b.streamTime, HasTimestamp: true})
		b.loggedStreamTime = b.streamTime
	}
}

// Flush appends the buffered changes to the log.
func (b *storeBase) Flush(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	_, err := b.flushLocked(ctx)
	return err
}

// flushLocked appends the descriptor (once per log segment) and the buffered
// changes. It returns the bytes appended.
func (b *storeBase) flushLocked(ctx context.Context) (int64, error) {
	if b.failed != nil {
		return 0, fmt.Errorf("statestore: store %q: not flushed after an earlier error: %w", b.name, b.failed)
	}
	if b.log == nil {
		b.buf.reset()
		return 0, nil
	}
	b.bufferStreamTimeLocked()
	var n int64
	if b.describe && b.buf.len() > 0 {
		b.scratch = appendDescriptor(b.scratch[:0], b.name, b.kind, b.version)
		if err := b.log.AppendMeta(ctx, b.scratch); err != nil {
			return 0, fmt.Errorf("statestore: store %q: log descriptor: %w", b.name, err)
		}
		n += int64(len(b.scratch))
		b.describe = false
	}
	start := 0
	for i, e := range b.buf.ents {
		var err error
		entry := b.buf.data[start:e.end]
		if e.kg == dstl.MetaKeyGroup {
			err = b.log.AppendMeta(ctx, entry)
		} else {
			err = b.log.Append(ctx, int(e.kg), entry)
		}
		if err != nil {
			b.buf.drop(i)
			b.reportFlush(n)
			return n, fmt.Errorf("statestore: store %q: log: %w", b.name, err)
		}
		n += int64(len(entry))
		start = e.end
	}
	b.buf.reset()
	b.reportFlush(n)
	return n, nil
}

func (b *storeBase) reportFlush(n int64) {
	if b.onFlush != nil && n > 0 {
		b.onFlush(n)
	}
}

// record buffers a change when logging is on. The caller holds the lock.
func (b *storeBase) record(c Change) {
	if b.logging.Load() {
		b.bufferLocked(c)
	}
}

// bufferLocked buffers a change for the log, encoded: it keeps none of c's
// slices. The caller holds the lock.
func (b *storeBase) bufferLocked(c Change) {
	b.buf.data = appendChange(b.buf.data, b.name, c)
	b.buf.ents = append(b.buf.ents, bufEntry{kg: int32(c.KeyGroup), end: len(b.buf.data)})
}

// encodeLogged decides, with the store's lock held, whether a put is
// logged, and then encodes its value. The caller buffers the change (with
// bufferLocked) exactly when on, whatever SetLogging does meanwhile, so
// that a logged put always carries its value. The encoding is valid until
// the next call (it may be the store's scratch), which is why the caller
// buffers it before it releases the lock.
func encodeLogged[V any](b *storeBase, vc Codec[V], v V) (vb []byte, on bool, err error) {
	if !b.logging.Load() {
		return nil, false, nil
	}
	if vb, err = encodeReusing(vc, &b.vscratch, v); err != nil {
		return nil, false, fmt.Errorf("statestore: store %q: value: %w", b.name, err)
	}
	return vb, true, nil
}

// encodeReusing encodes v with vc, appending to the scratch buffer
// *scratch, and returns the encoding, valid until the next call with the
// same scratch. The next call reuses only memory the scratch owns: the
// encoding's when the codec appended to the scratch in place, or a new
// buffer when the encoding outgrew it (unless it is larger than
// maxKeptScratch); never memory that the codec returned of its own (v's
// bytes, a buffer it keeps), which the next encoding would overwrite.
func encodeReusing[V any](vc Codec[V], scratch *[]byte, v V) ([]byte, error) {
	vb, err := vc.Encode((*scratch)[:0], v)
	if err != nil {
		return nil, err
	}
	old := *scratch
	switch {
	case cap(old) > 0 && cap(vb) > 0 && unsafe.SliceData(old[:cap(old)]) == unsafe.SliceData(vb[:cap(vb)]):
		*scratch = vb[:0] // the scratch itself
	case cap(vb) > cap(old) && cap(vb) <= maxKeptScratch:
		// Grown by the codec, or memory it does not give away: either way,
		// the next call gets a buffer of the store's own, as large.
		*scratch = make([]byte, 0, cap(vb))
	}
	return vb, nil
}

// changeBuf holds the changes buffered for the log, each encoded as its log
// entry (appendChange), one after another in data, so that buffering a
// change allocates nothing once the buffer has grown. Flushing appends the
// entries (the log's writer copies them) and reuses the buffer.
type changeBuf struct {
	data []byte
	ents []bufEntry
}

// bufEntry is a buffered entry: its key group and where it ends in data
// (it starts where the one before it ends).
type bufEntry struct {
	kg  int32
	end int
}

// maxKeptBuf is the capacity of a change buffer kept for reuse after a
// flush: a larger one, grown by a burst of changes, is let go.
const maxKeptBuf = 4 << 20

// maxKeptEnts is the capacity of a change buffer's entries kept for reuse:
// as many as take maxKeptBuf bytes.
const maxKeptEnts = maxKeptBuf / int(unsafe.Sizeof(bufEntry{}))

// maxKeptScratch is the capacity of a value scratch buffer kept for reuse.
const maxKeptScratch = 1 << 20

func (c *changeBuf) len() int { return len(c.ents) }

// reset empties the buffer, keeping its memory unless it grew large
// (more than maxKeptBuf bytes, more than maxKeptEnts entries).
func (c *changeBuf) reset() {
	c.data, c.ents = c.data[:0], c.ents[:0]
	if cap(c.data) > maxKeptBuf {
		c.data = nil
	}
	if cap(c.ents) > maxKeptEnts {
		c.ents = nil
	}
}

// drop forgets the first n entries, keeping the others in order.
func (c *changeBuf) drop(n int) {
	if n == 0 {
		return
	}
	start := c.ents[n-1].end
	c.data = c.data[:copy(c.data, c.data[start:])]
	c.ents = c.ents[:copy(c.ents, c.ents[n:])]
	for i := range c.ents {
		c.ents[i].end -= start
	}
}

// changes decodes the buffered entries into changes, which alias a copy of
// the buffer.
func (c *changeBuf) changes() []Change {
	if len(c.ents) == 0 {
		return nil
	}
	data := slices.Clone(c.data)
	out := make([]Change, len(c.ents))
	start := 0
	for i, e := range c.ents {
		en, err := decodeEntry(data[start:e.end:e.end], int(e.kg))
		if err != nil {
			panic(fmt.Sprintf("statestore: a buffered change does not decode: %v", err)) // appendChange wrote it
		}
		out[i] = en.change
		start = e.end
	}
	return out
}

// keyGroup returns the key group of an encoded key, or an error if the
// store does not own it.
func (b *storeBase) keyGroup(key []byte) (int, error) {
	kg := KeyGroup(key, b.maxP)
	if !b.kgr.Contains(kg) {
		return kg, fmt.Errorf("statestore: store %q: key in key group %d, outside %v: %w", b.name, kg, b.kgr, dstl.ErrKeyGroup)
	}
	return kg, nil
}

// loggedKeyGroup checks that key, read back from the log's key group
// logged, is of that key group and that the store owns it, and returns
// the key's murmur3 hash.
func (b *storeBase) loggedKeyGroup(key []byte, logged int) (uint32, error) {
	h := murmur3(key, 0)
	kg := keyGroupOf(h, b.maxP)
	if !b.kgr.Contains(kg) {
		return h, fmt.Errorf("%w: store %q: key of key group %d, outside %v, in the log's key group %d: %w", ErrLogFormat, b.name, kg, b.kgr, logged, dstl.ErrKeyGroup)
	}
	if kg != logged {
		return h, fmt.Errorf("%w: store %q: key of key group %d in the log's key group %d: %w", ErrLogFormat, b.name, kg, logged, dstl.ErrKeyGroup)
	}
	return h, nil
}

// Err returns the first error that a method without an error result met
// since the store was last cleared or restored, or nil: with Config.Dir, an
// error reading the disk or decoding an entry that stopped a loop over All,
// Range or PrefixScan (or a count of Len) early, or a Clear that failed.
// The store keeps it: Flush fails with it, and so does every checkpoint and
// materialisation of the store's Checkpointer, so that what was computed
// from a loop that stopped early is never committed; the way back is a
// restore (InitializeState, RestoreSnapshot, which clear it).
func (b *storeBase) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed
}

// fail keeps err for Err unless an earlier error is kept.
func (b *storeBase) fail(err error) {
	b.mu.Lock()
	b.failLocked(err)
	b.mu.Unlock()
}

func (b *storeBase) failLocked(err error) {
	if b.failed == nil {
		b.failed = err
	}
}

// Close marks the store closed and drops its buffers.
func (b *storeBase) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closeLocked()
	return nil
}

// closeLocked marks the store closed and lets go of its buffers.
func (b *storeBase) closeLocked() {
	b.closed = true
	b.buf = changeBuf{}
	b.scratch, b.vscratch = nil, nil
}

// restoreStreamTime raises the stream time to st, which counts as logged
// (it is in the snapshot).
func (b *storeBase) restoreStreamTime(st int64) error {
	return b.restoreStreamTimeThen(st, func() error { return nil })
}

// restoreStreamTimeThen is restoreStreamTime followed, under the store's
// lock, by then, which returns its error.
func (b *storeBase) restoreStreamTimeThen(st int64, then func() error) error {
	if err := b.lockOpen(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	b.advanceLocked(st)
	b.loggedStreamTime = max(b.loggedStreamTime, st)
	return then()
}

// lockOpen locks the store if it is open; if it is closed, it leaves it
// unlocked and fails with ErrClosed.
func (b *storeBase) lockOpen() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// clearLocked resets what the base holds: the buffer and scratch buffers,
// the stream time and the error kept for Err.
func (b *storeBase) clearLocked() {
	b.buf.reset()
	b.scratch, b.vscratch = nil, nil
	b.failed = nil
	b.streamTime, b.loggedStreamTime = minTime, minTime
}

// advanceLocked raises the stream time and reports whether it moved.
func (b *storeBase) advanceLocked(ts int64) bool {
	if ts > b.streamTime {
		b.streamTime = ts
		return true
	}
	return false
}

// encodeKey encodes k with kc and returns its key group, which the store
// must own.
func encodeKey[K any](b *storeBase, kc Codec[K], k K) ([]byte, int, error) {
	kb, err := kc.Encode(nil, k)
	if err != nil {
		return nil, 0, fmt.Errorf("statestore: store %q: key: %w", b.name, err)
	}
	kg, err := b.keyGroup(kb)
	return kb, kg, err
}

// lockKey is encodeKey followed by lockOpen: when it succeeds, the caller
// holds the store's lock.
func lockKey[K any](b *storeBase, kc Codec[K], k K) ([]byte, int, error) {
	kb, kg, err := encodeKey(b, kc, k)
	if err == nil {
		err = b.lockOpen()
	}
	return kb, kg, err
}

// snapshotOf is every store's Snapshot: a copy-on-write view captured under
// the store's lock, encoded after it is released.
func snapshotOf(s internalStore) ([]byte, error) {
	b := s.base()
	b.mu.Lock()
	enc := s.captureLocked()
	b.mu.Unlock()
	return enc()
}

// encodePayload frames a snapshot payload of the store's kind and version:
// header, the body that body appends, checksum.
func (b *storeBase) encodePayload(body func(p []byte) ([]byte, error)) ([]byte, error) {
	p, err := body(appendPayloadHeader(nil, b.kind, b.version))
	if err != nil {
		return nil, fmt.Errorf("statestore: store %q: snapshot: %w", b.name, err)
	}
	return finishChecksum(p), nil
}

// loadPayload is the frame of every restorePayload: it opens the payload
// (kind, version, checksum), lets parse decode the whole body without the
// lock (a codec's error included: d.fail), and only if all of it decoded, calls install with the lock held, so
// that a rejected payload leaves the store as it was.
func (b *storeBase) loadPayload(payload []byte, parse func(d *decoder), install func()) error {
	body, err := openPayload(payload, b.kind, b.version)
	if err != nil {
		return fmt.Errorf("statestore: store %q: %w", b.name, err)
	}
	d := decoder{b: body}
	parse(&d)
	if d.err == nil && len(d.b) > 0 {
		d.fail(errors.New("trailing bytes"))
	}
	if d.err != nil {
		return fmt.Errorf("statestore: store %q: %w: %w", b.name, ErrSnapshotFormat, d.err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	install()
	return nil
}

// applyLogged is the frame of every ApplyChange. Under the store's lock it
// hands the stream time of a metadata change to meta (nil: ignored); of a
// data change it checks the timestamp (when timed) and the key group,
// decodes the key and, unless it is a tombstone, the value, and hands them
// to apply. The stream time a restore reaches counts as logged: it is in
// the log already.
func applyLogged[K, V any](b *storeBase, kc Codec[K], vc Codec[V], c Change, timed bool, meta func(ts int64), apply func(kg int, k K, v V)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	defer func() { b.loggedStreamTime = max(b.loggedStreamTime, b.streamTime) }()
	if c.KeyGroup == dstl.MetaKeyGroup {
		if c.HasTimestamp && meta != nil {
			meta(c.Timestamp)
		}
		return nil
	}
	if timed && !c.HasTimestamp {
		return fmt.Errorf("%w: store %q: %s change without a timestamp", ErrLogFormat, b.name, b.kind)
	}
	kg, err := b.keyGroup(c.Key)
	if err != nil {
		return err
	}
	k, err := kc.Decode(c.Key)
	if err != nil {
		return fmt.Errorf("%w: store %q: key: %w", ErrLogFormat, b.name, err)
	}
	var v V
	if !c.Tombstone {
		if v, err = vc.Decode(c.Value); err != nil {
			return fmt.Errorf("%w: store %q: value: %w", ErrLogFormat, b.name, err)
		}
	}
	apply(kg, k, v)
	return nil
}

// anyTable is a table, of whatever rows.
type anyTable interface {
	clear() error
	empty() (bool, error)
}

// setTables makes the store's tables, with mk, in memory; attachDisk
// makes them again on disk.
func (b *storeBase) setTables(mk func() []anyTable) {
	b.makeTables = mk
	b.tables = mk()
}

// captureView is every store's captureLocked: with the store's lock held,
// it takes a view of t, and returns what encodes the payload from it once
// the lock is released: the stream time (when timed), then the count of
// the entries that body appends and those entries.
func captureView[R any](b *storeBase, t table[R], timed bool, body func(v tableView[R], p []byte) ([]byte, int, error)) func() ([]byte, error) {
	if b.closed {
		return func() ([]byte, error) { return nil, ErrClosed }
	}
	v, err := t.view()
	if err != nil {
		return func() ([]byte, error) { return nil, err }
	}
	st := b.streamTime
	return func() ([]byte, error) {
		defer v.release()
		return b.encodePayload(func(p []byte) ([]byte, error) {
			if timed {
				p = binary.AppendVarint(p, st)
			}
			return appendCounted(p, func(p []byte) ([]byte, int, error) { return body(v, p) })
		})
	}
}

// openView takes, under the store's lock, a view of t and at(), a bound of
// the store's at that moment (where windows live from, the horizon); ok
// is false when the store is closed, or when the view failed (kept for
// Err). The caller releases the view.
func openView[R any](b *storeBase, t table[R], at func() int64) (v tableView[R], bound int64, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, 0, false
	}
	v, err := t.view()
	if err != nil {
		b.failLocked(b.readFailed(err))
		return nil, 0, false
	}
	return v, at(), true
}

// clearTablesLocked is every store's Clear, with its lock held: it deletes
// the rows of the store's tables (unless the store, and maybe its
// database, is closed), resets what the base holds, and keeps an error
// deleting them for Err, and returns it.
func (b *storeBase) clearTablesLocked() error {
	var err error
	if !b.closed {
		for _, t := range b.tables {
			if err = t.clear(); err != nil {
				break
			}
		}
	}
	b.clearLocked()
	if err != nil {
		b.failLocked(err)
	}
	return err
}

// appendCounted appends to b a count (an unsigned varint) and what fill
// appends after it, fill returning the count: the encoding of a snapshot
// payload's entries, counted as they are written. fill appends after room
// for the longest count; then b's bytes move right to meet the count,
// which takes as few bytes as it needs, and the result starts where they
// begin. b should be short (a payload's header).
func appendCounted(b []byte, fill func(b []byte) ([]byte, int, error)) ([]byte, error) {
	start := len(b)
	b = append(b, make([]byte, binary.MaxVarintLen64)...)
	b, n, err := fill(b)
	if err != nil {
		return nil, err
	}
	var cnt [binary.MaxVarintLen64]byte
	l := binary.PutUvarint(cnt[:], uint64(n))
	shift := binary.MaxVarintLen64 - l
	// Everything before the count moves right by shift: the slice
	// returned starts shift bytes later.
	copy(b[shift:start+shift], b[:start])
	copy(b[start+shift:], cnt[:l])
	return b[shift:], nil
}
