// Package mem is the dstl backend that keeps objects in memory: a driver
// under the portable layer like the others, so that an in-memory store
// gets the checks, errors, timeouts, retries and metrics of
// [backends.Bucket]. Tests, simulations and demonstrations use it; its
// objects live as long as its [Store].
//
// It registers itself in init under the identifier "memory" and the URL
// scheme "memory" (gocloud.dev's in-memory buckets keep the scheme
// "mem"); import it for its side effect to make it available to
// [backends.Open]:
//
//	import _ "github.com/dstlgo/dstl/backends/mem"
//
// Package github.com/dstlgo/dstl/backends/all does not link it: it keeps
// nothing past its process.
//
// Every Open of a base path "memory://NAME/PREFIX" makes a new, empty
// store (see [ParseURL]). Programs that share a store between backends,
// inspect or plant its objects, or set its clock open backends with
// [Open] and a [Config] that names the [Store].
//
// Puts are create-only and atomic, as every backend's: an object is
// stored whole once its body was read, and a name that exists fails with
// [backends.ErrExists]. The modification times that List reports come
// from the store's clock ([Store.SetClock]).
package mem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
)

// ID is the backend's identifier in the registry and in its errors.
const ID = "memory"

// Scheme is the URL scheme of the backend's base paths.
const Scheme = "memory"

func init() { backends.RegisterURL(ID, ParseURL, Open, Scheme) }

// Store holds objects in memory, by key. Backends opened on one Store
// ([Config.Store]) share its objects, each under its own key prefix.
// Besides serving drivers, it lets tests inspect its objects, plant or
// replace them, watch the puts and deletes of its backends and set the
// clock of modification times; none of those goes through a backend, so
// no fault injected into one applies to them. It is safe for concurrent
// use.
type Store struct {
	mu       sync.Mutex
	objects  map[string]object
	now      func() time.Time
	onChange func(key string, data []byte, deleted bool)
}

// object is a stored object; its bytes never change once stored.
type object struct {
	data    []byte
	modTime time.Time
}

// NewStore returns an empty store whose clock is [time.Now].
func NewStore() *Store { return &Store{objects: map[string]object{}} }

// SetClock makes now the clock of the modification times of the objects
// stored from then on; nil restores [time.Now].
func (s *Store) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// OnChange makes fn see every later change that a backend on the store
// makes: an object stored by a Put (data holds its bytes, which fn does
// not change) or removed by a Delete (deleted is true). fn is called
// with the store locked, in the order of the changes, so that a test can
// keep a history in the store's own order; it must not call the store.
// The store's own SetObject and DeleteObject, which tests call, are not
// reported. nil removes it.
func (s *Store) OnChange(fn func(key string, data []byte, deleted bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = fn
}

// Object returns a copy of the bytes stored under key, and whether there
// are any.
func (s *Store) Object(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return nil, false
	}
	return bytes.Clone(o.data), true
}

// Objects returns the objects whose keys start with prefix, sorted by
// key, with their keys as names.
func (s *Store) Objects(prefix string) []backends.ObjectInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []backends.ObjectInfo
	for key, o := range s.objects {
		if strings.HasPrefix(key, prefix) {
			out = append(out, backends.ObjectInfo{Name: key, Size: int64(len(o.data)), ModTime: o.modTime})
		}
	}
	slices.SortFunc(out, func(x, y backends.ObjectInfo) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// Len returns the number of stored objects.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objects)
}

// SetObject stores a copy of data under key, replacing the object there
// if any, with the clock's time. Tests use it to plant or damage
// objects; readers opened before keep the old bytes.
func (s *Store) SetObject(key string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.store(key, bytes.Clone(data), false)
}

// DeleteObject removes the object under key, and reports whether there
// was one.
func (s *Store) DeleteObject(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delete(key, false)
}

// create stores data under key unless an object is there; data is the
// store's from then on.
func (s *Store) create(key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[key]; ok {
		return errExists
	}
	s.store(key, data, true)
	return nil
}

// remove removes the object under key, for a backend.
func (s *Store) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delete(key, true)
}

// store stores data under key, and tells onChange when notify is set;
// s.mu is held.
func (s *Store) store(key string, data []byte, notify bool) {
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	s.objects[key] = object{data: data, modTime: now()}
	if notify && s.onChange != nil {
		s.onChange(key, data, false)
	}
}

// delete removes the object under key, and tells onChange when notify is
// set; s.mu is held.
func (s *Store) delete(key string, notify bool) bool {
	if _, ok := s.objects[key]; !ok {
		return false
	}
	delete(s.objects, key)
	if notify && s.onChange != nil {
		s.onChange(key, nil, true)
	}
	return true
}

// get returns the bytes under key, which nobody changes.
func (s *Store) get(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	return o.data, ok
}

// The driver's errors, which Classify maps.
var (
	errNotFound = errors.New("memory: no such object")
	errExists   = errors.New("memory: the object exists")
	errRange    = errors.New("memory: offset past the end of the object")
)

// bucket is the driver: the objects of a Store.
type bucket struct {
	s    *Store
	name string // labels the store in As
}

var _ driver.Bucket = (*bucket)(nil)

// NewDriver returns the driver over s, for a [backends.Bucket] of one's
// own ([backends.New]) or a driver that wraps it. Its As sets a **Store
// to s and a *driver.Root to Root{Bucket: "memory"}.
func NewDriver(s *Store) driver.Bucket { return &bucket{s: s, name: ID} }

// Put stores a copy of the body in one request of rt, unless the key
// exists.
func (d *bucket) Put(ctx context.Context, rt driver.Runner, key string, body *driver.Body, size int64) error {
	return rt.Do(ctx, size, func(ctx context.Context) error {
		data, err := body.Bytes(0, size)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err // a cancelled Put stores nothing
		}
		return d.s.create(key, data)
	})
}

// Open reads the object's bytes from offset on.
func (d *bucket) Open(_ context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	data, ok := d.s.get(key)
	switch {
	case !ok:
		return nil, errNotFound
	case offset > int64(len(data)):
		return nil, errRange
	}
	data = data[offset:]
	if length >= 0 && length < int64(len(data)) {
		data = data[:length]
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// Size returns the object's size.
func (d *bucket) Size(_ context.Context, key string) (int64, error) {
	data, ok := d.s.get(key)
	if !ok {
		return 0, errNotFound
	}
	return int64(len(data)), nil
}

// Delete removes the object; a missing one is no error.
func (d *bucket) Delete(_ context.Context, key string) error {
	d.s.remove(key)
	return nil
}

// List reports the objects under prefix as they were when the listing's
// one request ran, in order; fn is called with the store unlocked.
func (d *bucket) List(ctx context.Context, rt driver.Runner, prefix string, fn func(driver.ObjectInfo) error) error {
	var objs []driver.ObjectInfo
	if err := rt.Do(ctx, 0, func(context.Context) error {
		objs = d.s.Objects(prefix)
		return nil
	}); err != nil {
		return err
	}
	for _, o := range objs {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// Classify maps the driver's errors.
func (d *bucket) Classify(err error) driver.Code {
	switch {
	case errors.Is(err, errNotFound):
		return driver.NotFound
	case errors.Is(err, errExists):
		return driver.Exists
	case errors.Is(err, errRange):
		return driver.InvalidRange
	}
	return driver.Unknown
}

// Location names nothing: the errors say it all.
func (d *bucket) Location(string) string { return "" }

// As sets a **Store to the store and a *driver.Root to the store's label.
func (d *bucket) As(target any) bool {
	switch p := target.(type) {
	case **Store:
		*p = d.s
	case *driver.Root:
		*p = driver.Root{Bucket: d.name}
	default:
		return false
	}
	return true
}

// Close does nothing: the objects stay in the store.
func (d *bucket) Close() error { return nil }

// Backend is the in-memory backend: the portable [backends.Bucket] over
// the objects of a [Store]. It is safe for concurrent use.
type Backend struct {
	*backends.Bucket
	s *Store
}

// Store returns the store that holds the backend's objects, under the
// backend's key prefix ([backends.Bucket.Prefix]).
func (b *Backend) Store() *Store { return b.s }

// New opens a backend from a base path "memory://NAME/PREFIX" (see
// [ParseURL]). It is the factory the backend registers.
func New(ctx context.Context, basePath string) (*Backend, error) {
	return backends.OpenURL(ctx, basePath, ParseURL, Open)
}

// Open opens a backend with cfg, on cfg.Store or on a new, empty store.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory: open: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, backends.Invalid(err)
	}
	s := cfg.Store
	if s == nil {
		s = NewStore()
	}
	d := &bucket{s: s, name: ID}
	if cfg.Name != "" {
		d.name = Scheme + "://" + cfg.Name
	}
	p := cfg.Request
	if p == (backends.Policy{}) {
		p = backends.NoRetries
	}
	return &Backend{Bucket: backends.New(ID, d, p, backends.WithPrefix(cfg.prefix())), s: s}, nil
}
