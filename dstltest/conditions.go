package dstltest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
)

// Conditions says which create-only conditions a [ConditionStore] honours.
type Conditions int

const (
	// HonourConditions is a store that refuses every Put of an existing
	// name, on both paths, as every backend must.
	HonourConditions Conditions = iota
	// IgnoreOnMultipart is a store that refuses a single-request Put of an
	// existing name but lets the completion of a multipart upload replace
	// it, as one widely used S3 fake does.
	IgnoreOnMultipart
	// IgnoreConditions is a store that ignores create-only conditions on
	// every path, as a proxy that drops the If-None-Match header makes it.
	IgnoreConditions
)

// ConditionStoreID names a [ConditionStore] in its errors.
const ConditionStoreID = "conditions"

// ConditionStore is an in-memory driver (package
// github.com/dstlgo/dstl/backends/driver) whose Puts take two paths, as a
// cloud store's do: a single request up to its part size, and a multipart
// upload above it (and for [driver.MultipartPutter]). It honours or
// ignores the create-only condition on each path as its [Conditions] say,
// so that tests can show what a store that ignores conditional writes
// breaks, and that the checks meant to catch one do. Open it with
// [NewConditionStore], which returns it under the portable layer.
type ConditionStore struct {
	conditions Conditions
	partSize   int64

	mu      sync.Mutex
	objects map[string][]byte
	mtimes  map[string]time.Time
	puts    map[string]int // Puts by path: "single", "multipart"
}

var (
	_ driver.Bucket          = (*ConditionStore)(nil)
	_ driver.MultipartPutter = (*ConditionStore)(nil)
)

var (
	errCondNotFound = errors.New("conditions: no such object")
	errCondExists   = errors.New("conditions: the object exists (If-None-Match)")
	errCondRange    = errors.New("conditions: offset past the end")
	errCondClosed   = errors.New("conditions: closed")
)

// NewConditionStore returns an empty in-memory store under the portable
// layer, with no retries: Puts of more than partSize bytes go up as a
// multipart upload, and c says which paths honour create-only. The
// driver is reachable through As with a **ConditionStore.
func NewConditionStore(c Conditions, partSize int64) *backends.Bucket {
	d := &ConditionStore{conditions: c, partSize: partSize,
		objects: map[string][]byte{}, mtimes: map[string]time.Time{}, puts: map[string]int{}}
	return backends.New(ConditionStoreID, d, backends.NoRetries)
}

// Puts returns how many Puts took each path ("single", "multipart").
func (d *ConditionStore) Puts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.puts)
}

// Put stores body in one request up to the part size, and as a
// multipart upload above it.
func (d *ConditionStore) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	if size > d.partSize {
		return d.PutMultipart(ctx, rt, name, body, size)
	}
	return d.put(ctx, rt, "single", d.conditions == IgnoreConditions, name, body, size)
}

// PutMultipart stores body as a multipart upload, whatever its size.
func (d *ConditionStore) PutMultipart(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	return d.put(ctx, rt, "multipart", d.conditions != HonourConditions, name, body, size)
}

// MinMultipartSize is 1: any size may go up as a multipart upload.
func (d *ConditionStore) MinMultipartSize() int64 { return 1 }

func (d *ConditionStore) put(ctx context.Context, rt driver.Runner, path string, ignore bool, name string, body *driver.Body, size int64) error {
	return rt.Do(ctx, size, func(ctx context.Context) error {
		data, err := body.Bytes(0, size)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.objects == nil {
			return errCondClosed
		}
		d.puts[path]++
		if _, ok := d.objects[name]; ok && !ignore {
			return errCondExists
		}
		d.objects[name], d.mtimes[name] = data, time.Now()
		return nil
	})
}

// Open reads the object from offset on.
func (d *ConditionStore) Open(_ context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	data, ok := d.objects[name]
	switch {
	case !ok:
		return nil, errCondNotFound
	case offset >= int64(len(data)):
		return nil, errCondRange
	}
	data = data[offset:]
	if length >= 0 && length < int64(len(data)) {
		data = data[:length]
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// Size returns the object's size.
func (d *ConditionStore) Size(_ context.Context, name string) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	data, ok := d.objects[name]
	if !ok {
		return 0, errCondNotFound
	}
	return int64(len(data)), nil
}

// Delete removes the object.
func (d *ConditionStore) Delete(_ context.Context, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.objects[name]; !ok {
		return errCondNotFound
	}
	delete(d.objects, name)
	delete(d.mtimes, name)
	return nil
}

// List lists the objects whose names start with prefix, in order.
func (d *ConditionStore) List(ctx context.Context, rt driver.Runner, prefix string, fn func(driver.ObjectInfo) error) error {
	var infos []driver.ObjectInfo
	err := rt.Do(ctx, 0, func(context.Context) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		infos = infos[:0]
		for name, data := range d.objects {
			if strings.HasPrefix(name, prefix) {
				infos = append(infos, driver.ObjectInfo{Name: name, Size: int64(len(data)), ModTime: d.mtimes[name]})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(infos, func(a, b driver.ObjectInfo) int { return strings.Compare(a.Name, b.Name) })
	for _, o := range infos {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// Classify maps the store's errors to their codes.
func (d *ConditionStore) Classify(err error) driver.Code {
	switch {
	case errors.Is(err, errCondNotFound):
		return driver.NotFound
	case errors.Is(err, errCondExists):
		return driver.Exists
	case errors.Is(err, errCondRange):
		return driver.InvalidRange
	}
	return driver.Unknown
}

// Location names the store's condition mode, for error messages.
func (d *ConditionStore) Location(string) string {
	return [...]string{"memory store honouring conditions", "memory store ignoring conditions on multipart uploads", "memory store ignoring conditions"}[d.conditions]
}

// As sets a **ConditionStore to the driver and a *driver.Root to its root.
func (d *ConditionStore) As(target any) bool {
	switch t := target.(type) {
	case **ConditionStore:
		*t = d
		return true
	case *driver.Root:
		*t = driver.Root{Bucket: "memory"}
		return true
	}
	return false
}

// Close drops the objects.
func (d *ConditionStore) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.objects = nil
	return nil
}
