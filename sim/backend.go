package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/faulty"
	"github.com/dstlgo/dstl/backends/mem"
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

// memStore is the in-memory store shared by the faulty and the clean
// view of the simulated backend, with the counts of the faults injected.
type memStore struct {
	*mem.Store
	mu     sync.Mutex // guards counts
	counts [numFaultKinds]int
	// now, when set, is the clock of the objects' modification times
	// (default time.Now).
	now func() time.Time
	// onChange, when set, is called with the store locked after each
	// object a backend stored (data) or deleted (deleted true).
	onChange func(name string, data []byte, deleted bool)
}

func newMemStore() *memStore {
	st := &memStore{Store: mem.NewStore()}
	st.SetClock(func() time.Time {
		if st.now != nil {
			return st.now()
		}
		return time.Now()
	})
	st.OnChange(func(name string, data []byte, deleted bool) {
		if st.onChange != nil {
			st.onChange(name, data, deleted)
		}
	})
	return st
}

// bucket returns a backend of its own over the store's objects.
func (st *memStore) bucket() backends.Backend {
	b, err := mem.Open(context.Background(), mem.Config{Store: st.Store})
	if err != nil {
		panic(fmt.Sprintf("sim: open an in-memory backend: %v", err)) // its Config is valid
	}
	return b
}

// has reports whether an object is stored under name.
func (st *memStore) has(name string) bool {
	_, ok := st.Object(name)
	return ok
}

func (st *memStore) count(k faultKind) {
	st.mu.Lock()
	st.counts[k]++
	st.mu.Unlock()
}

// names returns every stored object's name.
func (st *memStore) names() []string {
	var out []string
	for _, o := range st.Objects("") {
		out = append(out, o.Name)
	}
	return out
}

var _ backends.Backend = (*backend)(nil)

// backend is a view of the simulated store: the in-memory backend under
// the fault-injecting wrapper, whose faults it draws, or the in-memory
// backend alone (the clean view, for the checks).
//
// The fault of a call does not depend on the order in which concurrent
// calls arrive: it is drawn from a generator of its own, derived from the
// seed, the operation, what the object holds (which writer's change sets,
// by sequence number; object names are random) and how many calls of that
// operation on such an object came before.
type backend struct {
	backends.Backend
	st *memStore
	f  *faulty.Backend // nil in the clean view

	seed   uint64
	mu     sync.Mutex // guards everything below
	prof   faultProfile
	faults bool
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
	b := &backend{st: newMemStore(), seed: seed, prof: prof, faults: !prof.faultFree(), logs: map[[16]byte]int{}, calls: map[string]int{}}
	b.f = faulty.New(b.st.bucket(), b.fault)
	b.Backend = b.f
	return b
}

// clean returns a view of the same objects that injects no fault, for the
// checks.
func (b *backend) clean() *backend {
	return &backend{Backend: b.st.bucket(), st: b.st}
}

// explained reports whether a fault may have left the object name behind:
// stored although the put reported an error, or kept by a failed delete.
func (b *backend) explained() map[string]bool {
	out := map[string]bool{}
	for _, name := range b.f.Leftovers() {
		out[name] = true
	}
	return out
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

// fault draws the fault of a call, for the fault-injecting wrapper.
func (b *backend) fault(c faulty.Call) faulty.Fault {
	var (
		k faultKind
		d time.Duration
	)
	switch c.Op {
	case faulty.OpPut:
		data := make([]byte, c.Size)
		if n, _ := c.Body.ReadAt(data, 0); int64(n) < c.Size {
			return faulty.Fault{} // the backend fails the put on its body
		}
		k, d = b.draw("put", c.Name, data, putErrBefore, putLostAnswer, putStallHonour, putStallIgnore, putStoreAfterCancel, putLateStore)
	case faulty.OpGet:
		var data []byte
		if b.contentKeys {
			data, _ = b.st.Object(c.Name)
		}
		k, _ = b.draw("get", c.Name, data, getErr)
	case faulty.OpDelete:
		data, _ := b.st.Object(c.Name)
		k, _ = b.draw("delete", c.Name, data, deleteFail)
	case faulty.OpList:
		k, _ = b.draw("list", c.Name, nil, listErr)
	}
	if k == faultNone {
		return faulty.Fault{}
	}
	b.st.count(k)
	switch k {
	case putLostAnswer:
		return faulty.Fault{Err: errInjected, Lost: true}
	case putStallHonour:
		return faulty.Fault{Delay: d}
	case putStallIgnore:
		return faulty.Fault{Delay: d, OnCancel: faulty.Ignore}
	case putStoreAfterCancel:
		return faulty.Fault{Delay: d, OnCancel: faulty.Complete}
	case putLateStore:
		return faulty.Fault{Delay: d, OnCancel: faulty.Late, LateBy: d / 4}
	}
	return faulty.Fault{Err: errInjected} // putErrBefore, getErr, deleteFail, listErr
}

func opErr(op, name string, err error) error { return backends.NewError(op, "sim", name, err) }

// VerifyCreateOnly returns nil: the simulated store refuses a Put of an
// existing name by construction, so the catalog's check of create-only
// puts (backends.VerifyCreateOnly) sends it nothing and draws no fault.
func (b *backend) VerifyCreateOnly(context.Context, string) error { return nil }
