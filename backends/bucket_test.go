package backends_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/driver"
	"github.com/dstlgo/dstl/conformance"
)

// naive is a driver that checks nothing: no names, sizes, bodies,
// ranges, contexts or closed state. The portable layer must make it a
// backend that meets the whole contract.
type naive struct {
	mu      sync.Mutex
	objects map[string][]byte
	mtimes  map[string]time.Time
}

var errNaiveNotFound = errors.New("naive: no such object")
var errNaiveExists = errors.New("naive: object exists")
var errNaiveRange = errors.New("naive: offset past the end")

func newNaive() *naive {
	return &naive{objects: map[string][]byte{}, mtimes: map[string]time.Time{}}
}

func (d *naive) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
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
		if _, ok := d.objects[name]; ok {
			return errNaiveExists
		}
		d.objects[name], d.mtimes[name] = data, time.Now()
		return nil
	})
}

func (d *naive) Open(_ context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	data, ok := d.objects[name]
	switch {
	case !ok:
		return nil, errNaiveNotFound
	case offset >= int64(len(data)):
		return nil, errNaiveRange
	}
	data = data[offset:]
	if length >= 0 && length < int64(len(data)) {
		data = data[:length]
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (d *naive) Size(_ context.Context, name string) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	data, ok := d.objects[name]
	if !ok {
		return 0, errNaiveNotFound
	}
	return int64(len(data)), nil
}

func (d *naive) Delete(_ context.Context, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.objects[name]; !ok {
		return errNaiveNotFound
	}
	delete(d.objects, name)
	return nil
}

func (d *naive) List(ctx context.Context, rt driver.Runner, prefix string, fn func(driver.ObjectInfo) error) error {
	var page []driver.ObjectInfo
	if err := rt.Do(ctx, 0, func(context.Context) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		page = page[:0]
		for name, data := range d.objects {
			if strings.HasPrefix(name, prefix) {
				page = append(page, driver.ObjectInfo{Name: name, Size: int64(len(data)), ModTime: d.mtimes[name]})
			}
		}
		return nil
	}); err != nil {
		return err
	}
	slices.SortFunc(page, func(a, b driver.ObjectInfo) int { return strings.Compare(a.Name, b.Name) })
	for _, o := range page {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

func (d *naive) Classify(err error) driver.Code {
	switch {
	case errors.Is(err, errNaiveNotFound):
		return driver.NotFound
	case errors.Is(err, errNaiveExists):
		return driver.Exists
	case errors.Is(err, errNaiveRange):
		return driver.InvalidRange
	}
	return driver.Unknown
}

func (d *naive) Location(name string) string { return "naive:" + name }

func (d *naive) As(target any) bool {
	if p, ok := target.(**naive); ok {
		*p = d
		return true
	}
	return false
}

func (d *naive) Close() error { return nil }

// rawPut writes an object under any name, as another tool could.
func rawPut(t *testing.T, b backends.Backend, name string, data []byte) error {
	var d *naive
	if !b.(*backends.Bucket).As(&d) {
		t.Fatal("As(**naive) = false")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.objects[name], d.mtimes[name] = slices.Clone(data), time.Now()
	return nil
}

// TestNaiveDriverMeetsTheContract: a driver that checks nothing passes the
// whole backend suite through the portable layer, which does every check.
func TestNaiveDriverMeetsTheContract(t *testing.T) {
	conformance.TestBackend(t, func(t *testing.T) backends.Backend {
		return backends.New("naive", newNaive(), backends.NoRetries)
	}, conformance.WithRawPut(rawPut))
}

// flaky fails its first requests of each kind with a transient error, or
// with what fail says.
type flaky struct {
	*naive
	fail  func(op string, n int64) error
	calls map[string]*atomic.Int64
}

var errTransient = errors.New("flaky: try again")

func newFlaky(fail func(op string, n int64) error) *flaky {
	f := &flaky{naive: newNaive(), fail: fail, calls: map[string]*atomic.Int64{}}
	for _, op := range []string{"put", "open", "size", "delete", "list"} {
		f.calls[op] = &atomic.Int64{}
	}
	return f
}

func (f *flaky) hit(op string) error { return f.fail(op, f.calls[op].Add(1)) }

func (f *flaky) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	return rt.Do(ctx, size, func(ctx context.Context) error {
		if err := f.hit("put"); err != nil {
			return err
		}
		return f.naive.Put(ctx, rt, name, body, size)
	})
}

func (f *flaky) Open(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if err := f.hit("open"); err != nil {
		return nil, err
	}
	return f.naive.Open(ctx, name, offset, length)
}

func (f *flaky) Delete(ctx context.Context, name string) error {
	if err := f.hit("delete"); err != nil {
		return err
	}
	return f.naive.Delete(ctx, name)
}

func (f *flaky) Classify(err error) driver.Code {
	if errors.Is(err, errTransient) {
		return driver.Transient
	}
	return f.naive.Classify(err)
}

var fastPolicy = backends.Policy{Timeout: time.Second, MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}

// TestRetries: the portable layer retries what the classifier calls
// transient, up to the policy's attempts, and nothing else.
func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failures  int64 // the first so many requests of each kind fail
		err       error
		wantCalls int64
		wantErr   error
	}{
		{"transient then success", 2, errTransient, 3, nil},
		{"transient past the attempts", 5, errTransient, 3, errTransient},
		{"not transient", 5, errors.New("flaky: broken"), 1, errors.New("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, op := range []string{"put", "open", "delete"} {
				f := newFlaky(func(o string, n int64) error {
					if o == op && n <= tc.failures {
						return tc.err
					}
					return nil
				})
				b := backends.New("flaky", f, fastPolicy)
				ctx := t.Context()
				if op != "put" {
					f.naive.objects["x"] = []byte("data")
				}
				var err error
				switch op {
				case "put":
					err = b.Put(ctx, "x", strings.NewReader("data"), 4)
				case "open":
					var r io.ReadCloser
					if r, err = b.Get(ctx, "x", 0, -1); err == nil {
						r.Close()
					}
				case "delete":
					err = b.Delete(ctx, "x")
				}
				if got := f.calls[op].Load(); got != tc.wantCalls {
					t.Errorf("%s: %d requests, want %d", op, got, tc.wantCalls)
				}
				if (err == nil) != (tc.wantErr == nil) {
					t.Errorf("%s: err = %v, want an error: %v", op, err, tc.wantErr != nil)
				}
				if err != nil && !strings.Contains(err.Error(), "flaky "+map[string]string{"put": "put", "open": "get", "delete": "delete"}[op]+` "x": naive:x: `) {
					t.Errorf("%s: error %q does not name the op, backend, object and location", op, err)
				}
			}
		})
	}
}

// failingBody fails its reads after n bytes.
type failingBody struct{ n int64 }

func (b failingBody) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > b.n {
		return 0, errors.New("disk on fire")
	}
	return len(p), nil
}

// TestBodyFailureIsNotRetried: a failure of the caller's body ends the Put
// at once, as that error, however the driver reported it.
func TestBodyFailureIsNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		body io.ReaderAt
		size int64
		want string
	}{
		{"failing", failingBody{n: 2}, 10, "disk on fire"},
		{"short", strings.NewReader("abc"), 10, "body ends after 3 of 10 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlaky(func(string, int64) error { return nil })
			b := backends.New("flaky", f, fastPolicy)
			err := b.Put(t.Context(), "x", tc.body, tc.size)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Put = %v, want an error about the body (%q)", err, tc.want)
			}
			if tc.name == "short" && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("Put = %v, want it to wrap io.ErrUnexpectedEOF", err)
			}
			if n := f.calls["put"].Load(); n != 1 {
				t.Fatalf("%d attempts, want 1: a body failure is not retried", n)
			}
			if _, err := b.Get(t.Context(), "x", 0, -1); !errors.Is(err, backends.ErrNotFound) {
				t.Fatalf("Get after the failed Put = %v, want ErrNotFound", err)
			}
		})
	}
}

// hanging is a driver whose first Open waits for its context.
type hanging struct {
	*naive
	opens atomic.Int64
}

func (h *hanging) Open(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if n := h.opens.Add(1); n == 1 || n < 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.naive.Open(ctx, name, offset, length)
}

func (h *hanging) Classify(err error) driver.Code { return h.naive.Classify(err) }

// TestOpenAttemptTimesOut: an Open that does not return within the
// request timeout is cut and tried again, and the body of the attempt
// that answered stays readable after its attempt's deadline.
func TestOpenAttemptTimesOut(t *testing.T) {
	h := &hanging{naive: newNaive()}
	h.objects["x"] = []byte("data")
	b := backends.New("hanging", h, backends.Policy{Timeout: 50 * time.Millisecond, MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	r, err := b.Get(t.Context(), "x", 0, -1)
	if err != nil {
		t.Fatalf("Get = %v, want success at the second attempt", err)
	}
	defer r.Close()
	time.Sleep(80 * time.Millisecond) // past the attempt's timeout
	got, err := io.ReadAll(r)
	if err != nil || string(got) != "data" {
		t.Fatalf("read %q, %v", got, err)
	}
	if n := h.opens.Load(); n != 2 {
		t.Fatalf("%d opens, want 2", n)
	}
}

// TestDeleteMissingBucket: a delete that fails because the bucket is
// missing is an error (ErrNotFound and ErrPermanent), unlike the delete of
// a missing object.
func TestDeleteMissingBucket(t *testing.T) {
	errNoBucket := errors.New("no such bucket")
	d := &classified{naive: newNaive(), err: errNoBucket, code: driver.BucketNotFound}
	b := backends.New("nobucket", d, backends.NoRetries)
	err := b.Delete(t.Context(), "x")
	if !errors.Is(err, backends.ErrNotFound) || !errors.Is(err, backends.ErrPermanent) || !errors.Is(err, errNoBucket) {
		t.Fatalf("Delete = %v, want ErrNotFound, ErrPermanent and the cause", err)
	}
	var be *backends.Error
	if !errors.As(err, &be) || be.Op != "delete" || be.Backend != "nobucket" || be.Object != "x" {
		t.Fatalf("Delete = %#v, want a *backends.Error naming delete, the backend and x", err)
	}
}

// classified fails every Delete with err, classified as code.
type classified struct {
	*naive
	err  error
	code driver.Code
}

func (c *classified) Delete(context.Context, string) error { return c.err }

func (c *classified) Classify(err error) driver.Code {
	if errors.Is(err, c.err) {
		return c.code
	}
	return c.naive.Classify(err)
}

func ExampleBucket_As() {
	b := backends.New("naive", newNaive(), backends.NoRetries)
	defer b.Close()
	var d *naive
	fmt.Println(b.As(&d), d != nil)
	// Output: true true
}

// TestOpenResponseTimeout: the wait for a read's answer is bounded by the
// policy's response timeout, even without a request timeout and whatever
// transport the driver has, and the attempt counts as timed out.
func TestOpenResponseTimeout(t *testing.T) {
	h := &hanging{naive: newNaive()}
	h.objects["x"] = []byte("data")
	b := backends.New("hanging", h, backends.Policy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		ResponseTimeout: 50 * time.Millisecond, TimeoutAttempts: 2})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, err := b.Get(ctx, "x", 0, -1)
	if err != nil {
		t.Fatalf("Get = %v, want success at the second attempt", err)
	}
	r.Close()
	if n := h.opens.Load(); n != 2 {
		t.Fatalf("%d opens, want 2", n)
	}

	silent := &hanging{naive: newNaive()}
	silent.opens.Store(-10) // every open hangs
	b = backends.New("silent", silent, backends.Policy{MaxAttempts: 5, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		ResponseTimeout: 20 * time.Millisecond, TimeoutAttempts: 2})
	_, err = b.Get(ctx, "x", 0, -1)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "giving up after 2 attempts that timed out") ||
		!strings.Contains(err.Error(), "no answer within 20ms") {
		t.Fatalf("Get = %v, want a timeout after 2 unanswered attempts", err)
	}
	if n := silent.opens.Load() + 10; n != 2 {
		t.Fatalf("%d opens, want 2", n)
	}
}

// named fails every Open, once its context is done, with an error that
// names the endpoint, as an HTTP client's does.
type named struct{ *naive }

func (n named) Open(ctx context.Context, _ string, _, _ int64) (io.ReadCloser, error) {
	<-ctx.Done()
	return nil, fmt.Errorf(`Get "http://10.0.0.1:9000/b/x": %w`, ctx.Err())
}

// TestOpenTimeoutNamesTheEndpoint: the error of a read whose attempts
// went unanswered keeps the driver's words, which name the endpoint.
func TestOpenTimeoutNamesTheEndpoint(t *testing.T) {
	b := backends.New("named", named{newNaive()}, backends.Policy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		ResponseTimeout: 20 * time.Millisecond})
	_, err := b.Get(t.Context(), "x", 0, -1)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "http://10.0.0.1:9000/b/x") || !strings.Contains(err.Error(), "no answer within 20ms") {
		t.Fatalf("Get = %v, want a timeout that names the endpoint", err)
	}
}

// TestMetrics: every operation is counted by op and outcome, with its
// latency, and every attempt after a request's first as a retry; a
// listing stopped by its callback's error counts as ok. The latency
// histogram's buckets resolve operations of milliseconds.
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	f := newFlaky(func(op string, n int64) error {
		if op == "put" && n == 1 {
			return errTransient
		}
		return nil
	})
	b := backends.New("flaky", f, fastPolicy, backends.WithMeterProvider(mp))
	ctx := t.Context()
	if err := b.Put(ctx, "x", strings.NewReader("data"), 4); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "missing", 0, -1); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get = %v", err)
	}
	// A listing that its callback stops is no failure of the backend.
	errStop := errors.New("stop")
	if err := b.List(ctx, "", func(backends.ObjectInfo) error { return errStop }); err != errStop {
		t.Fatalf("List = %v", err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	durations := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					op, _ := p.Attributes.Value("op")
					outcome, _ := p.Attributes.Value("outcome")
					backend, _ := p.Attributes.Value("backend")
					got[m.Name+" "+backend.AsString()+" "+op.AsString()+" "+outcome.AsString()] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					durations += int(p.Count)
					// The operations took well under a second: their
					// buckets must tell so (latencies are in seconds).
					for i, n := range p.BucketCounts {
						if n > 0 && (i >= len(p.Bounds) || p.Bounds[i] > 1) {
							t.Errorf("%s: %d fast operations in the bucket up to %v s of bounds %v", m.Name, n, append(p.Bounds, math.Inf(1))[i], p.Bounds)
						}
					}
				}
			}
		}
	}
	want := map[string]int64{
		"dstl.backend.operations flaky put ok":    1,
		"dstl.backend.operations flaky get error": 1,
		"dstl.backend.operations flaky list ok":   1,
		"dstl.backend.retries flaky put ":         1,
	}
	if !reflect.DeepEqual(got, want) || durations != 3 {
		t.Fatalf("metrics %v with %d latencies, want %v with 3", got, durations, want)
	}
}

// cutOff cancels the caller's context in the middle of each call and then
// fails it as a service may: with an error of its own that does not wrap
// the context's (a transient failure, a missing object).
type cutOff struct {
	*naive
	cancel context.CancelFunc
}

func (c *cutOff) Put(ctx context.Context, rt driver.Runner, _ string, _ *driver.Body, size int64) error {
	return rt.Do(ctx, size, func(context.Context) error { c.cancel(); return errTransient })
}

func (c *cutOff) Open(ctx context.Context, _ string, _, _ int64) (io.ReadCloser, error) {
	c.cancel()
	return nil, errTransient
}

func (c *cutOff) Delete(context.Context, string) error { c.cancel(); return errNaiveNotFound }

func (c *cutOff) List(ctx context.Context, rt driver.Runner, _ string, _ func(driver.ObjectInfo) error) error {
	return rt.Do(ctx, 0, func(context.Context) error { c.cancel(); return errTransient })
}

func (c *cutOff) Classify(err error) driver.Code {
	if errors.Is(err, errTransient) {
		return driver.Transient
	}
	return c.naive.Classify(err)
}

// TestContextEndsDuringCall: a call whose context ends while the driver
// works fails with an error that wraps the context's error, whatever the
// driver answered, as the Backend contract says.
func TestContextEndsDuringCall(t *testing.T) {
	for _, op := range []string{"put", "get", "delete", "list"} {
		t.Run(op, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			b := backends.New("cut", &cutOff{naive: newNaive(), cancel: cancel}, fastPolicy)
			var err error
			switch op {
			case "put":
				err = b.Put(ctx, "x", strings.NewReader("data"), 4)
			case "get":
				_, err = b.Get(ctx, "x", 0, -1)
			case "delete":
				err = b.Delete(ctx, "x")
			case "list":
				err = b.List(ctx, "", func(backends.ObjectInfo) error { return nil })
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s = %v, want an error wrapping context.Canceled", op, err)
			}
			if be, ok := errors.AsType[*backends.Error](err); !ok || be.Op != op || be.Backend != "cut" {
				t.Fatalf("%s = %#v, want a *backends.Error naming the op and backend", op, err)
			}
		})
	}
}

// TestOpenCancelledIsNoTimeout: a read whose caller gives up while the
// driver waits for the answer fails with the caller's cancellation, and
// its error does not say that an attempt timed out.
func TestOpenCancelledIsNoTimeout(t *testing.T) {
	silent := &hanging{naive: newNaive()}
	silent.opens.Store(-10) // every open hangs
	b := backends.New("silent", silent, backends.Policy{Timeout: time.Minute, MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		ResponseTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := b.Get(ctx, "x", 0, -1)
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "timed out") {
		t.Fatalf("Get = %v, want the caller's cancellation, not a timeout", err)
	}
	if n := silent.opens.Load() + 10; n != 1 {
		t.Fatalf("%d opens, want 1", n)
	}
}

// pageFn is a driver that reports each page's objects to List's callback
// within the page's request, inside the runner.
type pageFn struct{ *naive }

func (p pageFn) List(ctx context.Context, rt driver.Runner, prefix string, fn func(driver.ObjectInfo) error) error {
	return rt.Do(ctx, 0, func(ctx context.Context) error {
		return p.naive.List(ctx, noRetries{}, prefix, fn)
	})
}

// noRetries runs a request once.
type noRetries struct{}

func (noRetries) Do(ctx context.Context, _ int64, fn func(ctx context.Context) error) error {
	return fn(ctx)
}

// TestListCallbackErrorInsideRequest: an error of List's callback stops
// the listing, and is returned as it is, also when the driver calls the
// callback within a page's request and the error looks transient (here a
// timeout of the caller's own): the page is not listed again.
func TestListCallbackErrorInsideRequest(t *testing.T) {
	d := pageFn{newNaive()}
	d.objects["a"], d.objects["b"] = []byte("1"), []byte("2")
	b := backends.New("pages", d, fastPolicy)
	errMine := fmt.Errorf("my own read: %w", context.DeadlineExceeded)
	var seen []string
	err := b.List(t.Context(), "", func(o backends.ObjectInfo) error {
		seen = append(seen, o.Name)
		return errMine
	})
	if err != errMine || !slices.Equal(seen, []string{"a"}) {
		t.Fatalf("List = %v after the callback saw %q; want the callback's error as it is, after a", err, seen)
	}
}

// blocking is a driver whose Puts wait for release, and which records its
// Close.
type blocking struct {
	*naive
	entered chan struct{}
	release chan struct{}
	closed  atomic.Bool
}

func (d *blocking) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	close(d.entered)
	<-d.release
	return d.naive.Put(ctx, rt, name, body, size)
}

func (d *blocking) Close() error { d.closed.Store(true); return nil }

// TestCloseWaitsForCalls: Close waits for the calls in progress before it
// closes the driver, later calls fail with ErrClosed, and a reader that
// Get returned before stays readable after Close.
func TestCloseWaitsForCalls(t *testing.T) {
	d := &blocking{naive: newNaive(), entered: make(chan struct{}), release: make(chan struct{})}
	d.objects["a"] = []byte("abc")
	b := backends.New("blocking", d, backends.NoRetries)
	r, err := b.Get(t.Context(), "a", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	put := make(chan error, 1)
	go func() { put <- b.Put(t.Context(), "b", strings.NewReader("x"), 1) }()
	<-d.entered
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a Put was in progress", err)
	case <-time.After(20 * time.Millisecond):
	}
	if d.closed.Load() {
		t.Fatal("the driver was closed while a Put was in progress")
	}
	close(d.release)
	if err := <-put; err != nil {
		t.Fatalf("the Put in progress: %v", err)
	}
	if err := <-closed; err != nil || !d.closed.Load() {
		t.Fatalf("Close = %v, driver closed %v", err, d.closed.Load())
	}
	if err := b.Delete(t.Context(), "a"); !errors.Is(err, backends.ErrClosed) {
		t.Fatalf("Delete after Close = %v, want ErrClosed", err)
	}
	if got, err := io.ReadAll(r); err != nil || string(got) != "abc" {
		t.Fatalf("reader after Close: %q, %v", got, err)
	}
}

// lingering keeps the body of its last Put, as a transport that reads on
// after its round trip ended would.
type lingering struct {
	*naive
	body *driver.Body
}

func (l *lingering) Put(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error {
	l.body = body
	return l.naive.Put(ctx, rt, name, body, size)
}

// TestPutBodyUnreadableAfterPut: once Put returned, the driver's body no
// longer reads the caller's bytes (the caller may reuse them at once).
func TestPutBodyUnreadableAfterPut(t *testing.T) {
	d := &lingering{naive: newNaive()}
	b := backends.New("naive", d, backends.NoRetries)
	defer b.Close()
	data := []byte("abcdef")
	if err := b.Put(context.Background(), "o", backends.NewMemoryBody(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 3)
	if n, err := d.body.ReadAt(p, 0); n != 0 || !errors.Is(err, driver.ErrBodyClosed) {
		t.Fatalf("a read of the body after Put: %d bytes, %v; want driver.ErrBodyClosed", n, err)
	}
	if _, err := io.ReadAll(d.body.Section(0, 6)); !errors.Is(err, driver.ErrBodyClosed) {
		t.Fatalf("a section read after Put: %v; want driver.ErrBodyClosed", err)
	}
}

// gate is a driver whose Opens, Sizes and List requests answer (as naive
// does), go unanswered until their context ends (silent), or wait until
// released (stall), and counts them: the driver double of the tests of
// the hold after an unanswered call.
type gate struct {
	*naive
	mode    atomic.Int32 // gateAnswer, gateSilent or gateStall
	calls   atomic.Int64
	stalled chan struct{} // a stalled request began
	release chan struct{} // closed: stalled requests go on
}

const (
	gateAnswer = iota
	gateSilent
	gateStall
)

func newGate() *gate {
	g := &gate{naive: newNaive(), stalled: make(chan struct{}, 16), release: make(chan struct{})}
	g.objects["x"] = []byte("data")
	return g
}

// wait is the request's fate under the gate's mode: nil goes on to naive.
func (g *gate) wait(ctx context.Context, what string) error {
	g.calls.Add(1)
	switch g.mode.Load() {
	case gateSilent:
		<-ctx.Done()
		return fmt.Errorf(`%s "http://10.0.0.1:9000/b": %w`, what, ctx.Err())
	case gateStall:
		g.stalled <- struct{}{}
		select {
		case <-g.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (g *gate) Open(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if err := g.wait(ctx, "Get"); err != nil {
		return nil, err
	}
	return g.naive.Open(ctx, name, offset, length)
}

func (g *gate) Size(ctx context.Context, name string) (int64, error) {
	if err := g.wait(ctx, "Head"); err != nil {
		return 0, err
	}
	return g.naive.Size(ctx, name)
}

func (g *gate) List(ctx context.Context, rt driver.Runner, prefix string, fn func(driver.ObjectInfo) error) error {
	if err := rt.Do(ctx, 0, func(ctx context.Context) error { return g.wait(ctx, "List") }); err != nil {
		return err
	}
	return g.naive.List(ctx, noRetries{}, prefix, fn)
}

// holdPolicy times each attempt out after 50 ms, gives up at the first
// attempt that timed out, and holds Gets and Lists for hold after one
// went unanswered.
func holdPolicy(hold time.Duration) backends.Policy {
	return backends.Policy{Timeout: 50 * time.Millisecond, ResponseTimeout: 50 * time.Millisecond, MaxAttempts: 3,
		InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, TimeoutAttempts: 1, UnansweredHold: hold}
}

// holdCalls are the calls a hold covers, by name.
var holdCalls = []struct {
	name string
	call func(ctx context.Context, b *backends.Bucket) error
}{
	{"get", func(ctx context.Context, b *backends.Bucket) error {
		rc, err := b.Get(ctx, "x", 0, -1)
		if err == nil {
			_, err = io.ReadAll(rc)
			rc.Close()
		}
		return err
	}},
	{"get of no bytes", func(ctx context.Context, b *backends.Bucket) error { // its check of the size
		rc, err := b.Get(ctx, "x", 1, 0)
		if err == nil {
			rc.Close()
		}
		return err
	}},
	{"list", func(ctx context.Context, b *backends.Bucket) error {
		return b.List(ctx, "", func(backends.ObjectInfo) error { return nil })
	}},
}

// heldCount returns the bucket's dstl.backend.held count.
func heldCount(t *testing.T, reader *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "dstl.backend.held" {
				for _, p := range d.DataPoints {
					n += p.Value
				}
			}
		}
	}
	return n
}

// TestUnansweredHold: a Get (its check of the size too) or List whose
// attempts went unanswered starts the hold: every later Get and List of
// the bucket fails at once with ErrUnavailable, no timeout, quoting the
// unanswered call's error (which names the endpoint), without a request;
// a body that Get returned before stays readable; the held calls are
// counted.
func TestUnansweredHold(t *testing.T) {
	for _, first := range holdCalls {
		t.Run(first.name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			defer mp.Shutdown(context.Background())
			g := newGate()
			b := backends.New("gate", g, holdPolicy(time.Minute), backends.WithMeterProvider(mp))
			open, err := b.Get(t.Context(), "x", 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			defer open.Close()
			g.mode.Store(gateSilent)
			err = first.call(t.Context(), b)
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "10.0.0.1:9000") {
				t.Fatalf("unanswered call = %v, want a timeout naming the endpoint", err)
			}
			quoted := err.Error()
			n := g.calls.Load()
			g.mode.Store(gateAnswer)
			for _, c := range holdCalls {
				start := time.Now()
				err := c.call(t.Context(), b)
				if !errors.Is(err, backends.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), quoted) {
					t.Errorf("%s during the hold = %v, want ErrUnavailable (no deadline) quoting %q", c.name, err, quoted)
				}
				if be, ok := errors.AsType[*backends.Error](err); !ok || be.Backend != "gate" {
					t.Errorf("%s during the hold = %#v, want a *backends.Error", c.name, err)
				}
				if took := time.Since(start); took > 40*time.Millisecond {
					t.Logf("%s during the hold took %v", c.name, took) // a busy machine; the count below is the check
				}
			}
			if got := g.calls.Load() - n; got != 0 {
				t.Errorf("%d requests sent during the hold, want none", got)
			}
			if got := heldCount(t, reader); got != int64(len(holdCalls)) {
				t.Errorf("dstl.backend.held = %d, want %d", got, len(holdCalls))
			}
			if data, err := io.ReadAll(open); err != nil || string(data) != "data" {
				t.Errorf("read of a body opened before the hold: %q, %v", data, err)
			}
			// Puts and Deletes are not held.
			if err := b.Put(t.Context(), "y", strings.NewReader("y"), 1); err != nil {
				t.Errorf("put during the hold: %v", err)
			}
			if err := b.Delete(t.Context(), "y"); err != nil {
				t.Errorf("delete during the hold: %v", err)
			}
		})
	}
}

// TestUnansweredHoldNotStarted: answers, error answers included, and the
// caller's giving up start no hold; nor does a timeout with the hold
// turned off (0, as in NoRetries): every later call sends its request.
func TestUnansweredHoldNotStarted(t *testing.T) {
	if backends.NoRetries.UnansweredHold != 0 || backends.DefaultPolicy.UnansweredHold != backends.DefaultUnansweredHold {
		t.Fatalf("NoRetries holds %v, DefaultPolicy %v", backends.NoRetries.UnansweredHold, backends.DefaultPolicy.UnansweredHold)
	}
	for _, tc := range []struct {
		name   string
		policy backends.Policy
		mode   int32
		ctx    func(t *testing.T) context.Context
		call   func(ctx context.Context, b *backends.Bucket) error
		want   error
	}{
		{"success", holdPolicy(time.Minute), gateAnswer, nil, holdCalls[0].call, nil},
		{"not found", holdPolicy(time.Minute), gateAnswer, nil, func(ctx context.Context, b *backends.Bucket) error {
			_, err := b.Get(ctx, "missing", 0, -1)
			return err
		}, backends.ErrNotFound},
		{"hold off", holdPolicy(0), gateSilent, nil, holdCalls[0].call, context.DeadlineExceeded},
		{"caller cancels a get", holdPolicy(time.Minute), gateSilent, cancelSoon, holdCalls[0].call, context.Canceled},
		{"caller cancels a list", holdPolicy(time.Minute), gateSilent, cancelSoon, holdCalls[2].call, context.Canceled},
		{"caller's deadline", func() backends.Policy {
			p := holdPolicy(time.Minute)
			p.Timeout, p.ResponseTimeout = time.Minute, time.Minute
			return p
		}(),
			gateSilent, func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			}, holdCalls[0].call, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate()
			b := backends.New("gate", g, tc.policy)
			g.mode.Store(tc.mode)
			ctx := t.Context()
			if tc.ctx != nil {
				ctx = tc.ctx(t)
			}
			for i := range 2 {
				if err := tc.call(ctx, b); !errors.Is(err, tc.want) || errors.Is(err, backends.ErrUnavailable) {
					t.Fatalf("call %d = %v, want %v", i, err, tc.want)
				}
				ctx = t.Context()
				if tc.ctx != nil {
					ctx = tc.ctx(t)
				}
			}
			g.mode.Store(gateAnswer)
			for _, c := range holdCalls {
				if err := c.call(t.Context(), b); err != nil {
					t.Errorf("%s after: %v", c.name, err)
				}
			}
			if got := g.calls.Load(); got != 2+int64(len(holdCalls)) {
				t.Errorf("%d requests, want %d (none held)", got, 2+len(holdCalls))
			}
		})
	}
}

// cancelSoon returns a context that is cancelled 20 ms from now.
func cancelSoon(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(20*time.Millisecond, cancel)
	t.Cleanup(cancel)
	return ctx
}

// TestUnansweredHoldProbe: after the hold, one call (the probe) goes
// through while the others still fail at once; the probe's timeout starts
// the hold again, its answer (an error answer too) ends it.
func TestUnansweredHoldProbe(t *testing.T) {
	for _, answer := range []struct {
		name string
		obj  string
		want error
	}{
		{"success", "x", nil},
		{"not found", "missing", backends.ErrNotFound},
	} {
		t.Run(answer.name, func(t *testing.T) {
			const hold = 150 * time.Millisecond
			g := newGate()
			b := backends.New("gate", g, holdPolicy(hold))
			get := func(name string) error {
				rc, err := b.Get(t.Context(), name, 0, -1)
				if err == nil {
					rc.Close()
				}
				return err
			}
			list := holdCalls[2].call
			g.mode.Store(gateSilent)
			if err := get("x"); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("first get: %v", err)
			}
			n := g.calls.Load()
			if err := get("x"); !errors.Is(err, backends.ErrUnavailable) || g.calls.Load() != n {
				t.Fatalf("get during the hold: err %v, %d requests, want ErrUnavailable and none", err, g.calls.Load()-n)
			}
			time.Sleep(hold)
			// The probe meets no answer either: the hold starts again.
			if err := list(t.Context(), b); !errors.Is(err, context.DeadlineExceeded) || g.calls.Load() != n+1 {
				t.Fatalf("probe: err %v, %d requests, want the timeout of 1", err, g.calls.Load()-n)
			}
			if err := get("x"); !errors.Is(err, backends.ErrUnavailable) || g.calls.Load() != n+1 {
				t.Fatalf("get after a failed probe: err %v, want ErrUnavailable without a request", err)
			}
			// While a probe is under way, the other calls fail at once.
			time.Sleep(hold)
			g.mode.Store(gateStall)
			probe := make(chan error, 1)
			go func() { probe <- get(answer.obj) }()
			<-g.stalled
			for _, c := range holdCalls {
				if err := c.call(t.Context(), b); !errors.Is(err, backends.ErrUnavailable) {
					t.Errorf("%s while the probe runs: err %v, want ErrUnavailable", c.name, err)
				}
			}
			if got := g.calls.Load(); got != n+2 {
				t.Errorf("%d requests while the probe ran, want only the probe's", got-n-1)
			}
			g.mode.Store(gateAnswer)
			close(g.release)
			if err := <-probe; !errors.Is(err, answer.want) || answer.want == nil && err != nil {
				t.Fatalf("probe = %v, want %v", err, answer.want)
			}
			for _, c := range holdCalls {
				if err := c.call(t.Context(), b); err != nil {
					t.Errorf("%s after the answered probe: %v", c.name, err)
				}
			}
		})
	}
}

// TestUnansweredHoldProbePanics: a probe whose List callback panics ends
// the probe, so that the next call after the hold is let through again.
func TestUnansweredHoldProbePanics(t *testing.T) {
	const hold = 50 * time.Millisecond
	g := newGate()
	b := backends.New("gate", g, holdPolicy(hold))
	g.mode.Store(gateSilent)
	if err := holdCalls[2].call(t.Context(), b); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first list: %v", err)
	}
	g.mode.Store(gateAnswer)
	time.Sleep(hold)
	func() {
		defer func() { recover() }()
		b.List(t.Context(), "", func(backends.ObjectInfo) error { panic("callback") })
	}()
	// The panicking probe got no answer recorded: the hold goes on, and
	// the next call after it is the probe again.
	time.Sleep(hold)
	if err := holdCalls[2].call(t.Context(), b); err != nil {
		t.Fatalf("list after a probe that panicked: %v, want the probe let through", err)
	}
}

// TestUnansweredHoldEndsOnWrite: a Put or Delete that succeeds during the
// hold shows that the store answers: it ends the hold, and the next Get
// goes through. One that fails does not.
func TestUnansweredHoldEndsOnWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, b *backends.Bucket) error
		ends  bool
	}{
		{"put", func(ctx context.Context, b *backends.Bucket) error { return b.Put(ctx, "y", strings.NewReader("y"), 1) }, true},
		{"delete", func(ctx context.Context, b *backends.Bucket) error { return b.Delete(ctx, "y") }, true},
		{"put that fails", func(ctx context.Context, b *backends.Bucket) error { return b.Put(ctx, "x", strings.NewReader("x"), 1) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate()
			b := backends.New("gate", g, holdPolicy(time.Minute))
			g.mode.Store(gateSilent)
			if err := holdCalls[0].call(t.Context(), b); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("unanswered get: %v", err)
			}
			g.mode.Store(gateAnswer)
			if err := tc.write(t.Context(), b); (err == nil) != tc.ends {
				t.Fatalf("%s during the hold: %v", tc.name, err)
			}
			err := holdCalls[0].call(t.Context(), b)
			switch {
			case tc.ends && err != nil:
				t.Fatalf("get after a %s that succeeded: %v, want the hold ended", tc.name, err)
			case !tc.ends && !errors.Is(err, backends.ErrUnavailable):
				t.Fatalf("get after a %s that failed: %v, want ErrUnavailable", tc.name, err)
			}
		})
	}
}
