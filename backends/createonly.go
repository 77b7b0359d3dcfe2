package backends

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/dstlgo/dstl/backends/driver"
)

// ErrCreateOnlyIgnored is wrapped by the error of [VerifyCreateOnly] for
// a store that let a Put replace an existing object: a store that ignores
// conditional writes (If-None-Match: * on S3 and Azure, the DoesNotExist
// precondition on GCS) on one of the paths its Puts take. Code that
// relies on create-only Puts, such as the checkpoint catalog's fencing,
// must not use such a store.
var ErrCreateOnlyIgnored = errors.New("store ignores create-only puts")

// CreateOnlyVerifier is a [Backend] that checks by itself that it refuses
// a Put of an existing name; [VerifyCreateOnly] calls it. [Bucket] is one.
// A backend of another kind may implement it, to probe its own paths or
// to say that it needs no probe (an in-memory store that refuses existing
// names by construction). A wrapper that renames objects implements it to
// hand the probe's name on as it renames it (see [VerifyCreateOnly]).
type CreateOnlyVerifier interface {
	// VerifyCreateOnly checks create-only with name as the probe's
	// object; see [VerifyCreateOnly].
	VerifyCreateOnly(ctx context.Context, name string) error
}

// ProbeRequests is the most requests one check of [VerifyCreateOnly]
// sends to a store that honours create-only, retries of failed requests
// not counted: a Put that creates the probe object, a single-request Put
// of the same name that the store refuses, for a driver with a multipart
// path a multipart upload of the same name whose completion the store
// refuses, and the Delete of the probe object. On S3 that is 7 requests
// (the multipart upload's creation, its one part, the refused completion
// and its abort), on GCS 6 (the start of a resumable session and its two
// chunks), on Azure 6 (the refused Put Blob is followed by a HEAD of the
// blob, the multipart path is one staged block and the refused block
// list). The gocloud backend sends more: 11 requests through s3blob (a
// HEAD after each refused Put, and before the Delete; the refused
// multipart upload aborted twice, by the transfer manager and by the
// driver), 8 through gcsblob (a GET of the object's attributes after
// each refused Put). A store that lets a Put through is sent that Put
// once more.
const ProbeRequests = 11

// VerifyCreateOnly checks that b refuses a Put of an existing name on
// every path its Puts take: it puts name, then puts name again in one
// request and, where b is a [Bucket] whose driver has a multipart path
// ([driver.MultipartPutter]), as a one-part multipart upload, each of
// which must fail with [ErrExists]; then it deletes name. The name must
// be one that nothing else writes (a random one under the caller's
// prefix): a process killed during the probe leaves the object behind,
// and so does a Delete that fails, which is logged with [slog.Default]
// and changes no verdict.
//
// A Put that goes through is sent once more: another process may have
// deleted the probe object just before it (a collection with no grace,
// a lifecycle rule), and the Put then wrote it anew. A store that lets
// it through twice in a row fails the check with an error that wraps
// [ErrCreateOnlyIgnored], names the store and the path that ignored the
// condition, and says what to do. Other errors (a store that cannot be
// reached) are returned as they are.
//
// VerifyCreateOnly follows b's Unwrap() Backend methods (such as the
// request-counting wrapper's) to the backend it wraps, and stops at the
// first that implements [CreateOnlyVerifier], which checks itself. A
// Bucket (or a backend package's type that embeds one) is one: it checks
// itself under name as given, with requests of its own that no wrapper
// sees, and keeps its verdict: a process probes each Bucket once, however
// many times and through whatever wrappers it is asked, and asks again
// only after an error that is no verdict (a store that did not answer).
// Concurrent checks of one Bucket share one probe, a check whose ctx ends
// stops waiting for it, and the Bucket's Close ends it. Any other backend
// is probed through b on every call, on its one path.
//
// A wrapper that renames objects (one that keeps them under a prefix of
// its own) must implement CreateOnlyVerifier and hand the probe's name on
// as it renames it, calling VerifyCreateOnly with the backend it wraps
// and the renamed name. A wrapper that only unwraps is passed by: the
// probe object then lies under name as given, outside the wrapper's
// names, where the wrapper's credentials may not reach and a collection
// through the wrapper does not look.
func VerifyCreateOnly(ctx context.Context, b Backend, name string) error {
	inner := b
walk:
	for range 16 {
		switch t := inner.(type) {
		case CreateOnlyVerifier: // a Bucket, a type that embeds one, or a backend that checks itself
			return t.VerifyCreateOnly(ctx, name)
		case interface{ Unwrap() Backend }:
			inner = t.Unwrap()
		default:
			break walk
		}
	}
	return probeCreateOnly(ctx, context.WithoutCancel(ctx), b, nil, "backend", name)
}

// VerifyCreateOnly checks that the bucket refuses a Put of an existing
// name on every path its Puts take, once per Bucket; see the function
// [VerifyCreateOnly].
func (b *Bucket) VerifyCreateOnly(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return NewError("put", b.id, name, fmt.Errorf("check create-only puts: %w", err))
	}
	c := &b.createOnly
	c.mu.Lock()
	if c.checked {
		c.mu.Unlock()
		return c.err
	}
	p := c.running
	if p == nil {
		// The probe runs on a context of its own, bounded, so that a
		// caller that gives up does not fail the others that wait for it;
		// Close ends it.
		base, stop := context.WithCancelCause(context.WithoutCancel(ctx))
		p = &createOnlyProbe{done: make(chan struct{}), stop: stop}
		c.running = p
		go func() {
			defer stop(nil)
			pctx, cancel := context.WithTimeout(base, probeTimeout)
			defer cancel()
			err := probeCreateOnly(pctx, base, b, b, b.id, name)
			verdict := err == nil || errors.Is(err, ErrCreateOnlyIgnored)
			if cause := context.Cause(base); !verdict && errors.Is(cause, ErrClosed) && !errors.Is(err, ErrClosed) {
				err = fmt.Errorf("%w; the bucket was %w", err, cause)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if verdict {
				c.checked, c.err = true, err
			}
			c.running = nil
			p.err = err
			close(p.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return NewError("put", b.id, name, fmt.Errorf("check create-only puts: %w", ctx.Err()))
	}
}

// stop ends the probe under way, if any, for Close: its requests fail
// with the bucket closed rather than run out their attempts.
func (c *createOnly) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running != nil {
		c.running.stop(ErrClosed)
	}
}

// probeTimeout bounds one probe of a Bucket's create-only check.
const probeTimeout = 5 * time.Minute

// createOnly is a Bucket's verdict of [VerifyCreateOnly], and the probe
// under way, which concurrent checks share.
type createOnly struct {
	mu      sync.Mutex
	checked bool
	err     error            // the verdict: nil, or an error wrapping ErrCreateOnlyIgnored
	running *createOnlyProbe // the probe under way, or nil
}

// createOnlyProbe is one probe of a Bucket: done is closed once err is
// set; stop ends the probe's context, and its Delete's.
type createOnlyProbe struct {
	done chan struct{}
	err  error
	stop context.CancelCauseFunc
}

// probeCreateOnly runs the probe of VerifyCreateOnly through b; parts,
// when not nil, is the Bucket whose multipart path is tried too. The
// Delete of the probe object runs on cleanup, bounded, so that it runs
// also after ctx ended.
func probeCreateOnly(ctx, cleanup context.Context, b Backend, parts *Bucket, id, name string) (err error) {
	first := []byte("dstl create-only probe: the first put of this name\n")
	if err := b.Put(ctx, name, bytes.NewReader(first), int64(len(first))); err != nil {
		return fmt.Errorf("%s: check create-only puts: put the probe object: %w", id, err)
	}
	defer func() {
		// The probe object goes, whatever the verdict. A failed delete
		// leaves it for the garbage collector, which deletes probe
		// objects, and changes no verdict: a check that failed here would
		// probe again at the next call and might leave another object.
		dctx, cancel := context.WithTimeout(cleanup, time.Minute)
		defer cancel()
		if derr := b.Delete(dctx, name); derr != nil {
			slog.Default().Warn("dstl: the create-only check could not delete its probe object; the garbage collector deletes it once it is older than the grace",
				"backend", id, "object", name, "error", derr)
		}
	}()
	where := ""
	if parts != nil {
		where = parts.d.Location(parts.key(name))
	}
	// refused runs put, a put over the existing probe object by path,
	// which the store must refuse with ErrExists. A put that goes through
	// is tried once more before the verdict: another process may have
	// deleted the probe object just before it (a collection with no
	// grace, a lifecycle rule), and the put that went through wrote it
	// anew.
	refused := func(path string, put func() error) error {
		for range 2 {
			switch err := put(); {
			case err != nil && ctx.Err() != nil:
				return fmt.Errorf("%s: check create-only puts: %w", id, err)
			case errors.Is(err, ErrExists):
				return nil
			case err != nil:
				return fmt.Errorf("%s: check create-only puts: %s over the probe object failed with another error than %v: %w", id, path, ErrExists, err)
			}
		}
		return fmt.Errorf("%w: %s at %s let %s replace the existing object %q, twice in a row; "+
			"the catalog's fencing needs conditional writes (If-None-Match: * on S3 and Azure, a DoesNotExist precondition on GCS): "+
			"use a release of the store that honours them on every path (see docs/STORES.md)",
			ErrCreateOnlyIgnored, id, cmp.Or(where, "the backend"), path, name)
	}
	// One byte, so that it takes the single-request path whatever the
	// backend's part size.
	second := []byte("2")
	if err := refused("a single-request put", func() error {
		return b.Put(ctx, name, bytes.NewReader(second), int64(len(second)))
	}); err != nil {
		return err
	}
	if parts == nil {
		return nil
	}
	mp, ok := parts.d.(driver.MultipartPutter)
	if !ok {
		return nil
	}
	size := max(mp.MinMultipartSize(), 1)
	third := probeBody(size)
	return refused("the completion of a multipart upload", func() error {
		return parts.PutMultipart(ctx, name, third, size)
	})
}

// probeBody returns size bytes of a repeated line.
func probeBody(size int64) io.ReaderAt {
	const line = "dstl create-only probe: a multipart upload, which the store must refuse\n"
	return strings.NewReader(strings.Repeat(line, int(size)/len(line)+1)[:size])
}

// PutMultipart stores size bytes of body under name as a multipart upload
// in as few parts as the service allows, whatever its size, where the
// driver has a multipart path ([driver.MultipartPutter]); it fails with
// [errors.ErrUnsupported] where it has none. Otherwise it is [Bucket.Put]:
// create-only and atomic, with the same checks and errors. Its size must
// be at least the driver's MinMultipartSize. It serves
// [VerifyCreateOnly] and tests of that path.
func (b *Bucket) PutMultipart(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	mp, ok := b.d.(driver.MultipartPutter)
	if !ok {
		return NewError("put", b.id, name, fmt.Errorf("a multipart put: %w", errors.ErrUnsupported))
	}
	if min := mp.MinMultipartSize(); size < min {
		return NewError("put", b.id, name, fmt.Errorf("a multipart put of %d bytes: the driver's multipart path takes at least %d", size, min))
	}
	return b.put(ctx, name, body, size, mp.PutMultipart)
}
