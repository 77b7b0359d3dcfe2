package backends

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/dstlgo/dstl/backends/driver"
)

// Bucket is the portable type over a driver: the [Backend] that every
// backend package's Open returns. It checks every argument, refuses calls
// once closed (Close waits for the calls in progress), times and retries
// each request under its [Policy], makes readers fail once their context
// is done, wraps every error in an *[Error] with the sentinel of its
// [driver.Code] and the object's location (secrets redacted), and records
// metrics. After a Get or List went unanswered, it fails its further Gets
// and Lists at once for the policy's [Policy.UnansweredHold]. It keeps
// the objects under a key prefix ([WithPrefix]), so that its driver sees
// keys and its callers names. It is safe for concurrent use.
type Bucket struct {
	id      string
	d       driver.Bucket
	policy  Policy
	metrics *metrics
	prefix  string // put before every name the driver sees

	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup

	createOnly createOnly // the verdict of VerifyCreateOnly
	unanswered unanswered
}

// unanswered is the last Get or List of a Bucket that went unanswered
// (its attempts timed out while its caller's context was alive), until an
// answer; see [Policy.UnansweredHold].
type unanswered struct {
	mu     sync.Mutex
	op     string    // "get" or "list"
	err    error     // the call's error, as the caller got it; nil: no hold
	at     time.Time // when it failed
	probe  uint64    // the one call after the hold under way, by number; 0: none
	probes uint64    // the number of the last probe
}

var _ Backend = (*Bucket)(nil)

// Option configures a [Bucket].
type Option func(*bucketOptions)

type bucketOptions struct {
	mp     metric.MeterProvider
	prefix string
}

// WithMeterProvider records the bucket's metrics with mp rather than the
// global OpenTelemetry meter provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *bucketOptions) { o.mp = mp }
}

// WithPrefix keeps the bucket's objects under the key prefix p: the
// driver stores the object name "x" as the key p+"x", and lists, from the
// keys that start with p, the names that follow it. p is used as it is;
// a backend whose prefixes end in a slash adds the slash before. Default
// "": keys are names.
func WithPrefix(p string) Option {
	return func(o *bucketOptions) { o.prefix = p }
}

// New returns the portable backend over the driver d. id names the
// backend in errors and metrics ("s3"); p says how each request is timed
// and retried (a MaxAttempts below 1 counts as 1).
func New(id string, d driver.Bucket, p Policy, opts ...Option) *Bucket {
	var o bucketOptions
	for _, opt := range opts {
		opt(&o)
	}
	p.MaxAttempts = max(p.MaxAttempts, 1)
	return &Bucket{id: id, d: d, policy: p, metrics: newMetrics(o.mp, id), prefix: o.prefix}
}

// ID returns the backend's identifier.
func (b *Bucket) ID() string { return b.id }

// Prefix returns the key prefix of the bucket's objects (see
// [WithPrefix]): the key of the object name "x" is Prefix()+"x".
func (b *Bucket) Prefix() string { return b.prefix }

// key returns the key of the object name: what the driver sees.
func (b *Bucket) key(name string) string { return b.prefix + name }

// Policy returns how the bucket times and retries requests.
func (b *Bucket) Policy() Policy { return b.policy }

// As sets target to the driver's SDK client or another value of the
// driver's (see [driver.Bucket.As]), for calls the portable layer does not
// make, and reports whether it did: for instance
//
//	var client *s3.Client
//	if b.As(&client) { ... }
//
// A *[driver.Root] gets the bucket's key prefix after the driver's own.
func (b *Bucket) As(target any) bool {
	if !b.d.As(target) {
		return false
	}
	if r, ok := target.(*driver.Root); ok {
		r.Prefix += b.prefix
	}
	return true
}

// Close ends a probe of [Bucket.VerifyCreateOnly] under way, waits for
// the calls in progress to return and closes the driver. Later calls fail
// with [ErrClosed]; readers returned by Get stay usable until closed.
// Close must not be called from a List callback. Closing twice is not an
// error.
func (b *Bucket) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.createOnly.stop() // a probe whose callers gave up would run on
	b.calls.Wait()
	if err := b.d.Close(); err != nil {
		return NewError("close", b.id, "", err)
	}
	return nil
}

// enter admits a call of op on name, or fails once the bucket is closed or
// ctx is done. An admitted call runs the returned function when it ends.
func (b *Bucket) enter(ctx context.Context, op, name string) (func(), error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, NewError(op, b.id, name, ErrClosed)
	}
	b.calls.Add(1)
	b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		b.calls.Done()
		return nil, b.wrap(op, name, err)
	}
	return b.calls.Done, nil
}

// Run runs fn, an operation of the driver's own that the portable layer
// does not know (such as listing a service's incomplete uploads), the way
// it runs its own: it fails once the bucket is closed or ctx is done,
// gives fn a [driver.Runner] for its requests, and wraps fn's error as the
// error of op on name. Names stay names in fn: where fn sends one to the
// service, it puts [Bucket.Prefix] before it.
func (b *Bucket) Run(ctx context.Context, op, name string, fn func(ctx context.Context, rt driver.Runner) error) error {
	done, err := b.enter(ctx, op, name)
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	err = ended(ctx, fn(ctx, &runner{b: b, op: op}))
	b.metrics.record(ctx, op, start, err)
	return b.wrap(op, name, err)
}

// Put stores size bytes of body under name, create-only and atomically;
// see [Backend.Put]. Once Put returned, nothing reads body any more (a
// transport that would, after its request ended, gets an error): the
// caller may reuse it at once. For that, Put waits for a read of body in
// progress, so body's ReadAt must not block indefinitely.
func (b *Bucket) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	return b.put(ctx, name, body, size, b.d.Put)
}

// put runs a Put of the driver's, the checks and the body's handling
// around it.
func (b *Bucket) put(ctx context.Context, name string, body io.ReaderAt, size int64,
	putFn func(ctx context.Context, rt driver.Runner, name string, body *driver.Body, size int64) error) error {
	const op = "put"
	switch {
	case CheckObjectName(name) != nil:
		return NewError(op, b.id, name, CheckObjectName(name))
	case size < 0:
		return NewError(op, b.id, name, fmt.Errorf("negative size %d", size))
	case body == nil:
		return NewError(op, b.id, name, errors.New("nil body"))
	}
	done, err := b.enter(ctx, op, name)
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	bd := driver.NewBody(body, size)
	err = putFn(ctx, &runner{b: b, op: op, body: bd}, b.key(name), bd, size)
	bd.Close() // a transport that reads on gets an error, not the caller's bytes
	if berr := bd.Err(); err != nil && berr != nil {
		if be := (*bodyError)(nil); !errors.As(err, &be) {
			err = &bodyError{berr}
		}
	}
	err = ended(ctx, err)
	b.metrics.record(ctx, op, start, err)
	if err == nil {
		b.noteAnswer(ctx, op, 0, nil, nil) // the store answers: a hold ends
	}
	return b.wrap(op, name, err)
}

// Get returns length bytes of the object from offset on (-1: to the end);
// see [Backend.Get].
func (b *Bucket) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	const op = "get"
	if err := CheckObjectName(name); err != nil {
		return nil, NewError(op, b.id, name, err)
	}
	if offset < 0 || length < -1 {
		return nil, NewError(op, b.id, name, fmt.Errorf("%w: offset %d, length %d", ErrInvalidRange, offset, length))
	}
	done, err := b.enter(ctx, op, name)
	if err != nil {
		return nil, err
	}
	defer done()
	probe, err := b.admit(ctx, op, name)
	if err != nil {
		return nil, err
	}
	defer b.endProbe(probe)
	start := time.Now()
	r, err := b.open(ctx, name, offset, length)
	err = ended(ctx, err)
	b.metrics.record(ctx, op, start, err)
	werr := b.wrap(op, name, err)
	b.noteAnswer(ctx, op, probe, err, werr)
	if err != nil {
		return nil, werr
	}
	return r, nil
}

func (b *Bucket) open(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	rt := &runner{b: b, op: "get"}
	if length == 0 {
		return emptyRead(b.checkOffset(ctx, rt, name, offset))
	}
	if length > math.MaxInt64-offset {
		length = -1 // past any possible end: to the end
	}
	var (
		body   io.ReadCloser
		cancel context.CancelFunc
	)
	wait := b.policy.ResponseTimeout // a read is a request without a body
	err := rt.Do(ctx, 0, func(actx context.Context) error {
		// The body outlives the attempt: the request runs on a context of
		// the caller's that only the attempt's deadline cancels, and only
		// until the driver returned. The wait for the answer is bounded by
		// the response timeout too, whatever transport the driver has.
		if wait > 0 {
			var cancel context.CancelFunc
			actx, cancel = context.WithTimeoutCause(actx, wait, fmt.Errorf("no answer within %v: %w", wait, context.DeadlineExceeded))
			defer cancel()
		}
		cctx, ccancel := context.WithCancel(ctx)
		stop := context.AfterFunc(actx, ccancel)
		r, err := b.d.Open(cctx, b.key(name), offset, length)
		if !stop() {
			if err == nil {
				r.Close()
			}
			ccancel()
			if cerr := ctx.Err(); cerr != nil {
				// The caller gave up, no attempt timed out.
				if err == nil {
					err = cerr
				}
				return err
			}
			if err != nil && err.Error() != context.Canceled.Error() && err.Error() != context.DeadlineExceeded.Error() {
				// The driver's own error may name the endpoint.
				return fmt.Errorf("attempt timed out (%w): %w", context.Cause(actx), err)
			}
			return fmt.Errorf("attempt timed out: %w", context.Cause(actx))
		}
		if err != nil {
			ccancel()
			return err
		}
		body, cancel = r, ccancel
		return nil
	})
	if err != nil {
		if b.d.Classify(err) == driver.InvalidRange {
			// The range starts at or past the end: at the end is an empty read.
			return emptyRead(b.checkOffset(ctx, rt, name, offset))
		}
		return nil, err
	}
	return &reader{b: b, ctx: ctx, name: name, body: body, cancel: cancel}, nil
}

func emptyRead(err error) (io.ReadCloser, error) {
	if err != nil {
		return nil, err
	}
	return io.NopCloser(strings.NewReader("")), nil
}

// checkOffset checks that the object exists and offset is not past its end.
func (b *Bucket) checkOffset(ctx context.Context, rt driver.Runner, name string, offset int64) error {
	var size int64
	err := rt.Do(ctx, 0, func(ctx context.Context) error {
		var err error
		size, err = b.d.Size(ctx, b.key(name))
		return err
	})
	if err != nil {
		return err
	}
	if offset > size {
		return fmt.Errorf("%w: offset %d past the end of %d bytes", ErrInvalidRange, offset, size)
	}
	return nil
}

// reader is the body of a Get: it fails once its context is done, its
// errors name the object, and Close also ends the request's context.
type reader struct {
	b      *Bucket
	ctx    context.Context
	name   string
	body   io.ReadCloser
	cancel context.CancelFunc
	once   sync.Once
	err    error
}

func (r *reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, r.b.wrap("get", r.name, err)
	}
	n, err := r.body.Read(p)
	if err != nil && err != io.EOF {
		if cerr := r.ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		err = r.b.wrap("get", r.name, err)
	}
	return n, err
}

func (r *reader) Close() error {
	r.once.Do(func() {
		r.err = r.b.wrap("get", r.name, r.body.Close())
		r.cancel()
	})
	return r.err
}

// Delete removes the object; a missing object is not an error.
func (b *Bucket) Delete(ctx context.Context, name string) error {
	const op = "delete"
	if err := CheckObjectName(name); err != nil {
		return NewError(op, b.id, name, err)
	}
	done, err := b.enter(ctx, op, name)
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	err = (&runner{b: b, op: op}).Do(ctx, 0, func(ctx context.Context) error { return b.d.Delete(ctx, b.key(name)) })
	if err != nil && ctx.Err() == nil && b.d.Classify(err) == driver.NotFound {
		err = nil
	}
	err = ended(ctx, err)
	b.metrics.record(ctx, op, start, err)
	if err == nil {
		b.noteAnswer(ctx, op, 0, nil, nil) // the store answers: a hold ends
	}
	return b.wrap(op, name, err)
}

// List calls fn for every object whose name starts with prefix, in lexical
// order; see [Backend.List]. Objects whose names no Put could have written
// (such as "dir/" markers or "a//b", written by other tools) are skipped.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	const op = "list"
	if fn == nil {
		return NewError(op, b.id, prefix, errors.New("nil callback"))
	}
	done, err := b.enter(ctx, op, prefix)
	if err != nil {
		return err
	}
	defer done()
	if !canMatch(prefix) {
		return nil
	}
	probe, err := b.admit(ctx, op, prefix)
	if err != nil {
		return err
	}
	defer b.endProbe(probe) // also when fn panics
	start := time.Now()
	var fnErr error
	err = b.d.List(ctx, &runner{b: b, op: op}, b.key(prefix), func(o ObjectInfo) error {
		name, ok := strings.CutPrefix(o.Name, b.prefix)
		if !ok || !strings.HasPrefix(name, prefix) || CheckObjectName(name) != nil {
			return nil
		}
		o.Name = name
		if fnErr != nil {
			return &callbackError{fnErr} // the listing stopped
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(o); err != nil {
			fnErr = err
			return &callbackError{err} // never retried, were fn called within a request
		}
		return nil
	})
	if fnErr != nil && err != nil {
		b.metrics.record(ctx, op, start, nil)  // stopped by the caller, no failure of the backend
		b.noteAnswer(ctx, op, probe, nil, nil) // the backend answered with a page
		return fnErr
	}
	b.metrics.record(ctx, op, start, err)
	err = ended(ctx, err)
	werr := b.wrap(op, prefix, err)
	b.noteAnswer(ctx, op, probe, err, werr)
	return werr
}

// admit decides whether a Get or List (op) of name goes to the driver: it
// fails with an *[Error] wrapping [ErrUnavailable] during the hold after
// an unanswered call ([Policy.UnansweredHold]), and while the one call
// after the hold (the probe) is under way. It returns the probe's number
// for the probe, and 0 for any other call.
func (b *Bucket) admit(ctx context.Context, op, name string) (probe uint64, err error) {
	hold := b.policy.UnansweredHold
	if hold <= 0 {
		return 0, nil
	}
	u := &b.unanswered
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err == nil {
		return 0, nil
	}
	since := time.Since(u.at)
	if since >= hold && u.probe == 0 {
		u.probes++
		u.probe = u.probes
		return u.probe, nil
	}
	b.metrics.held(ctx, op)
	// The unanswered call's error is quoted, not wrapped: this call did
	// not time out, and callers that retry timeouts should not retry it.
	return 0, NewError(op, b.id, name, fmt.Errorf("%w: not tried, since a %s of this bucket went unanswered %v ago (%v); one call is tried %v after it",
		ErrUnavailable, u.op, since.Round(time.Millisecond), u.err, hold))
}

// endProbe ends the probe that admit let through, if noteAnswer did not
// (a panic of the driver or of List's callback), so that the hold does
// not fail every later call. A probe that noteAnswer ended is not ended
// again: another call may have become the probe since.
func (b *Bucket) endProbe(probe uint64) {
	if probe == 0 {
		return
	}
	u := &b.unanswered
	u.mu.Lock()
	if u.probe == probe {
		u.probe = 0
	}
	u.mu.Unlock()
}

// noteAnswer records the outcome of a Get or List (op) that admit let
// through, or of a Put or Delete that succeeded: err is its error (nil:
// it succeeded), werr the error its caller got. A timeout while ctx is
// alive starts the hold, any answer ends it, and the caller's
// cancellation tells nothing. probe is the call's probe number from
// admit (0: the call was no probe).
func (b *Bucket) noteAnswer(ctx context.Context, op string, probe uint64, err, werr error) {
	if b.policy.UnansweredHold <= 0 {
		return
	}
	u := &b.unanswered
	u.mu.Lock()
	defer u.mu.Unlock()
	if probe != 0 && u.probe == probe {
		u.probe = 0
	}
	switch {
	case err == nil:
		u.err = nil
	case ctx.Err() != nil:
		// The caller gave up: no news of the backend.
	case isTimeout(err):
		u.op, u.err, u.at = op, werr, time.Now()
	default:
		u.err = nil // an answer, if an error
	}
}

// ended returns err, the error of a call, wrapping the error of ctx once
// ctx is done, whatever the driver made of the cancellation (a service's
// answer, a cut connection), as the Backend contract says.
func ended(ctx context.Context, err error) error {
	if cerr := ctx.Err(); err != nil && cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// wrap turns err into an *Error of op on name, wrapping the sentinel of
// its code, and naming the object's location.
func (b *Bucket) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if e := (*Error)(nil); errors.As(err, &e) {
		return err
	}
	var sentinel error
	if body := (*bodyError)(nil); !errors.As(err, &body) && !classified(err) {
		switch b.d.Classify(err) {
		case driver.NotFound:
			sentinel = ErrNotFound
		case driver.BucketNotFound:
			sentinel, err = ErrNotFound, permanent(err)
		case driver.Exists:
			sentinel = ErrExists
		case driver.Permission:
			sentinel = ErrPermission
		case driver.Precondition:
			sentinel = ErrPrecondition
		case driver.InvalidRange:
			sentinel = ErrInvalidRange
		case driver.Permanent:
			err = permanent(err)
		}
	}
	if loc := b.d.Location(b.key(name)); loc != "" {
		err = fmt.Errorf("%s: %w", loc, err)
	}
	if sentinel != nil {
		err = fmt.Errorf("%w: %w", sentinel, err)
	}
	return NewError(op, b.id, name, RedactError(err))
}

// classified reports whether err wraps a sentinel already.
func classified(err error) bool {
	for _, s := range []error{ErrNotFound, ErrExists, ErrPermission, ErrPrecondition, ErrInvalidName, ErrInvalidRange, ErrClosed, ErrUnavailable} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
