package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/format"
)

// errInjected is the cause of every error the fault backend makes up.
var errInjected = errors.New("sim: injected fault")

// faultKind is what the backend does to one call.
type faultKind uint8

const (
	faultNone faultKind = iota
	// putErrBefore fails the put before anything is stored.
	putErrBefore
	// putLostAnswer stores the object, then reports an error: the caller
	// believes the put failed.
	putLostAnswer
	// putStallHonour waits (up to a bound) before storing; cancellation ends
	// the wait and the put fails with nothing stored.
	putStallHonour
	// putStallIgnore sleeps through cancellation, then stores the object
	// and reports success: a request that completed although its caller
	// gave up on it.
	putStallIgnore
	// putStoreAfterCancel waits for cancellation (up to a bound), stores the
	// object anyway and reports the context's error.
	putStoreAfterCancel
	// putLateStore reports the context's error on cancellation at once and
	// stores the object a little later, in the background (a server that
	// finishes a request the client abandoned).
	putLateStore
	// deleteFail fails a delete, leaving the object.
	deleteFail
	// getErr fails a get.
	getErr
	// listErr fails a listing before it reports any object.
	listErr
	numFaultKinds
)

var faultNames = [numFaultKinds]string{"none", "put-error", "put-lost-answer", "put-stall", "put-stall-ignoring-cancel",
	"put-store-after-cancel", "put-late-store", "delete-error", "get-error", "list-error"}

func (k faultKind) String() string { return faultNames[k] }

// injectedString formats the counts of injected faults.
func injectedString(counts [numFaultKinds]int) string {
	var inj []string
	for k := faultKind(1); k < numFaultKinds; k++ {
		if counts[k] > 0 {
			inj = append(inj, fmt.Sprintf("%s:%d", k, counts[k]))
		}
	}
	return "[" + strings.Join(inj, " ") + "]"
}

// faultProfile gives the probability of each fault kind, per call.
type faultProfile struct {
	p        [numFaultKinds]float64
	maxStall time.Duration // bound of every stall and of a late store's delay
}

func (p faultProfile) faultFree() bool {
	for _, x := range p.p {
		if x > 0 {
			return false
		}
	}
	return true
}

func (p faultProfile) String() string {
	var b bytes.Buffer
	for k := faultKind(1); k < numFaultKinds; k++ {
		if p.p[k] > 0 {
			fmt.Fprintf(&b, "%s=%.2f ", k, p.p[k])
		}
	}
	if b.Len() == 0 {
		return "none"
	}
	fmt.Fprintf(&b, "max-stall=%v", p.maxStall)
	return b.String()
}

// memStore is the content shared by the faulty and the clean view of the
// simulated backend.
type memStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	mtime   map[string]time.Time
	// explained names objects that a fault may have left behind: stored
	// although the put reported an error, or kept by a failed delete.
	explained map[string]faultKind
	counts    [numFaultKinds]int
	late      sync.WaitGroup // background stores of putLateStore
	// now, when set, is the clock of the objects' modification times
	// (default time.Now).
	now func() time.Time
	// onChange, when set, is called with mu held after each object stored
	// (data) or deleted (deleted true).
	onChange func(name string, data []byte, deleted bool)
}

var _ backends.Backend = (*backend)(nil)

// backend implements backends.Backend over a memStore, injecting faults when
// faults is set. It is written for this simulation alone.
//
// The fault of a call does not depend on the order in which concurrent
// calls arrive: it is drawn from a generator of its own, derived from the
// seed, the operation, what the object holds (which writer's change sets,
// by sequence number; object names are random) and how many calls of that
// operation on such an object came before.
type backend struct {
	st     *memStore
	seed   uint64
	mu     sync.Mutex // guards everything below
	prof   faultProfile
	faults bool
	closed bool
	logs   map[[16]byte]int // the writer index of each log, for the call keys
	calls  map[string]int   // calls so far per call key
	// nameKeys keys the faults by the object's name rather than its
	// contents (for objects of deterministic names, such as a catalog's).
	nameKeys bool
	// contentKeys keys the faults of objects that are not of the log
	// format (snapshots and their files, of random names) by a hash of
	// their contents, gets included, rather than sharing one key.
	contentKeys bool
}

func newBackend(seed uint64, prof faultProfile) *backend {
	st := &memStore{objects: map[string][]byte{}, mtime: map[string]time.Time{}, explained: map[string]faultKind{}}
	return &backend{st: st, seed: seed, prof: prof, faults: !prof.faultFree(), logs: map[[16]byte]int{}, calls: map[string]int{}}
}

// clean returns a view of the same objects that injects no fault, for the
// checks.
func (b *backend) clean() *backend {
	return &backend{st: b.st}
}

// registerLog names the log's writer in the call keys of its objects.
func (b *backend) registerLog(id dstl.LogID, writer int) {
	b.mu.Lock()
	b.logs[id] = writer
	b.mu.Unlock()
}

// callKey describes an object by its contents: the writer and sequence
// number of each change set in it ("?" when it is no object of the log
// format); with nameKeys, by its name.
func (b *backend) callKey(op, name string, data []byte) string {
	if b.nameKeys {
		return op + " " + name
	}
	var k bytes.Buffer
	k.WriteString(op)
	idx, err := format.ReadIndex("", bytes.NewReader(data), int64(len(data)))
	if data == nil || err != nil {
		if b.contentKeys && data != nil {
			h := fnv.New64a()
			h.Write(data)
			fmt.Fprintf(&k, " #%x", h.Sum64())
			return k.String()
		}
		k.WriteString(" ?")
		return k.String()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range idx {
		if w, ok := b.logs[e.LogID]; ok {
			fmt.Fprintf(&k, " w%d.%d", w, e.SequenceNumber)
		} else {
			fmt.Fprintf(&k, " %x.%d", e.LogID, e.SequenceNumber)
		}
	}
	return k.String()
}

// stopFaults ends fault injection.
func (b *backend) stopFaults() {
	b.mu.Lock()
	b.faults = false
	b.mu.Unlock()
}

// draw picks the fault of one call of op on the object name holding data
// (nil when unknown) among kinds, and a stall duration.
func (b *backend) draw(op, name string, data []byte, kinds ...faultKind) (faultKind, time.Duration) {
	b.mu.Lock()
	faults := b.faults
	b.mu.Unlock()
	if !faults {
		return faultNone, 0
	}
	key := b.callKey(op, name, data)
	h := fnv.New64a()
	h.Write([]byte(key))
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.calls[key]
	b.calls[key]++
	r := rand.New(rand.NewPCG(b.seed^0xfa017, h.Sum64()+uint64(n)))
	x := r.Float64()
	d := time.Duration(r.Int64N(int64(b.prof.maxStall) + 1))
	for _, k := range kinds {
		if x < b.prof.p[k] {
			return k, d
		}
		x -= b.prof.p[k]
	}
	return faultNone, 0
}

func (b *backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

func opErr(op, name string, err error) error { return backends.NewError(op, "sim", name, err) }

// store writes the object unless it exists.
func (st *memStore) store(name string, data []byte, explain faultKind) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.objects[name]; ok {
		return backends.ErrExists
	}
	st.objects[name] = data
	st.mtime[name] = st.clock()
	if explain != faultNone {
		st.explained[name] = explain
	}
	if st.onChange != nil {
		st.onChange(name, data, false)
	}
	return nil
}

func (st *memStore) clock() time.Time {
	if st.now != nil {
		return st.now()
	}
	return time.Now()
}

func (st *memStore) count(k faultKind) {
	st.mu.Lock()
	st.counts[k]++
	st.mu.Unlock()
}

// Put stores size bytes of body under name.
func (b *backend) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	if err := backends.CheckObjectName(name); err != nil {
		return opErr("put", name, err)
	}
	if b.isClosed() {
		return opErr("put", name, dstl.ErrClosed)
	}
	if size < 0 || body == nil {
		return opErr("put", name, errors.New("negative size or nil body"))
	}
	if err := ctx.Err(); err != nil {
		return opErr("put", name, err)
	}
	data := make([]byte, size)
	if n, err := body.ReadAt(data, 0); int64(n) < size {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return opErr("put", name, fmt.Errorf("reading the body: %w", err))
	}
	k, d := b.draw("put", name, data, putErrBefore, putLostAnswer, putStallHonour, putStallIgnore, putStoreAfterCancel, putLateStore)
	if k != faultNone {
		b.st.count(k)
	}
	switch k {
	case putErrBefore:
		return opErr("put", name, errInjected)
	case putLostAnswer:
		if err := b.st.store(name, data, k); err != nil {
			return opErr("put", name, err)
		}
		return opErr("put", name, fmt.Errorf("answer lost: %w", errInjected))
	case putStallHonour:
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return opErr("put", name, ctx.Err())
		case <-t.C:
		}
	case putStallIgnore:
		time.Sleep(d)
		if err := b.st.store(name, data, faultNone); err != nil {
			return opErr("put", name, err)
		}
		return nil
	case putStoreAfterCancel:
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			if err := b.st.store(name, data, k); err != nil {
				return opErr("put", name, err)
			}
			return opErr("put", name, ctx.Err())
		case <-t.C:
		}
	case putLateStore:
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			b.st.late.Add(1)
			go func() {
				defer b.st.late.Done()
				time.Sleep(d / 4)
				b.st.store(name, data, k)
			}()
			return opErr("put", name, ctx.Err())
		case <-t.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return opErr("put", name, err)
	}
	if err := b.st.store(name, data, faultNone); err != nil {
		return opErr("put", name, err)
	}
	return nil
}

// Get returns length bytes of the object from offset on (-1: to the end).
func (b *backend) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if err := backends.CheckObjectName(name); err != nil {
		return nil, opErr("get", name, err)
	}
	if b.isClosed() {
		return nil, opErr("get", name, dstl.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, opErr("get", name, err)
	}
	var data []byte
	if b.contentKeys {
		b.st.mu.Lock()
		data = b.st.objects[name]
		b.st.mu.Unlock()
	}
	if k, _ := b.draw("get", name, data, getErr); k == getErr {
		b.st.count(k)
		return nil, opErr("get", name, errInjected)
	}
	b.st.mu.Lock()
	data, ok := b.st.objects[name]
	b.st.mu.Unlock()
	if !ok {
		return nil, opErr("get", name, backends.ErrNotFound)
	}
	n := int64(len(data))
	if offset < 0 || length < -1 || offset > n {
		return nil, opErr("get", name, fmt.Errorf("%w: offset %d, length %d of %d bytes", backends.ErrInvalidRange, offset, length, n))
	}
	end := n
	if length >= 0 && offset+length < n {
		end = offset + length
	}
	return io.NopCloser(bytes.NewReader(data[offset:end])), nil
}

// Delete removes the object; a missing object is not an error.
func (b *backend) Delete(ctx context.Context, name string) error {
	if err := backends.CheckObjectName(name); err != nil {
		return opErr("delete", name, err)
	}
	if b.isClosed() {
		return opErr("delete", name, dstl.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return opErr("delete", name, err)
	}
	b.st.mu.Lock()
	data := b.st.objects[name]
	b.st.mu.Unlock()
	if k, _ := b.draw("delete", name, data, deleteFail); k == deleteFail {
		b.st.mu.Lock()
		b.st.counts[k]++
		if _, ok := b.st.objects[name]; ok {
			b.st.explained[name] = k
		}
		b.st.mu.Unlock()
		return opErr("delete", name, errInjected)
	}
	b.st.mu.Lock()
	if _, ok := b.st.objects[name]; ok && b.st.onChange != nil {
		b.st.onChange(name, nil, true)
	}
	delete(b.st.objects, name)
	delete(b.st.mtime, name)
	b.st.mu.Unlock()
	return nil
}

// List calls fn for every object whose name starts with prefix, in order.
func (b *backend) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	if b.isClosed() {
		return opErr("list", prefix, dstl.ErrClosed)
	}
	if k, _ := b.draw("list", prefix, nil, listErr); k == listErr {
		b.st.count(k)
		return opErr("list", prefix, errInjected)
	}
	b.st.mu.Lock()
	var infos []backends.ObjectInfo
	for name, data := range b.st.objects {
		if len(name) >= len(prefix) && name[:len(prefix)] == prefix {
			infos = append(infos, backends.ObjectInfo{Name: name, Size: int64(len(data)), ModTime: b.st.mtime[name]})
		}
	}
	b.st.mu.Unlock()
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	for _, info := range infos {
		if err := ctx.Err(); err != nil {
			return opErr("list", prefix, err)
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

// Close makes later calls fail with ErrClosed.
func (b *backend) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// names returns every stored object's name.
func (st *memStore) names() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]string, 0, len(st.objects))
	for n := range st.objects {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// VerifyCreateOnly returns nil: the simulated store refuses a Put of an
// existing name by construction, so the catalog's check of create-only
// puts (backends.VerifyCreateOnly) sends it nothing and draws no fault.
func (b *backend) VerifyCreateOnly(context.Context, string) error { return nil }
