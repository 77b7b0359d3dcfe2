package dstltest

import (
	"context"
	"maps"
	"sync"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/backends/mem"
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
// breaks, and that the checks meant to catch one do. It is the driver of
// package github.com/dstlgo/dstl/backends/mem with the second path and
// the ignoring Puts added. Open it with [NewConditionStore], which
// returns it under the portable layer.
type ConditionStore struct {
	driver.Bucket // the in-memory driver
	store         *mem.Store
	conditions    Conditions
	partSize      int64

	mu   sync.Mutex
	puts map[string]int // Puts by path: "single", "multipart"
}

var (
	_ driver.Bucket          = (*ConditionStore)(nil)
	_ driver.MultipartPutter = (*ConditionStore)(nil)
)

// NewConditionStore returns an empty in-memory store under the portable
// layer, with no retries: Puts of more than partSize bytes go up as a
// multipart upload, and c says which paths honour create-only. The
// driver is reachable through As with a **ConditionStore.
func NewConditionStore(c Conditions, partSize int64) *backends.Bucket {
	s := mem.NewStore()
	d := &ConditionStore{Bucket: mem.NewDriver(s), store: s, conditions: c, partSize: partSize, puts: map[string]int{}}
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

// put counts a Put of path, and stores the body create-only, or over an
// existing object when ignore is set.
func (d *ConditionStore) put(ctx context.Context, rt driver.Runner, path string, ignore bool, name string, body *driver.Body, size int64) error {
	d.mu.Lock()
	d.puts[path]++
	d.mu.Unlock()
	if !ignore {
		return d.Bucket.Put(ctx, rt, name, body, size)
	}
	return rt.Do(ctx, size, func(ctx context.Context) error {
		data, err := body.Bytes(0, size)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		d.store.SetObject(name, data)
		return nil
	})
}

// Location names the store's condition mode, for error messages.
func (d *ConditionStore) Location(string) string {
	return [...]string{"memory store honouring conditions", "memory store ignoring conditions on multipart uploads", "memory store ignoring conditions"}[d.conditions]
}

// As sets a **ConditionStore to the driver, and other targets as the
// in-memory driver does.
func (d *ConditionStore) As(target any) bool {
	if t, ok := target.(**ConditionStore); ok {
		*t = d
		return true
	}
	return d.Bucket.As(target)
}
