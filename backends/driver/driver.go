// Package driver is the guide and the toolkit of a backend author: what a
// storage service's adapter implements, and nothing an application needs.
//
// A backend has two halves. The driver, written for one service, is a
// [Bucket]: each method makes the SDK calls of one operation and returns
// the SDK's errors as they are, and [Bucket.Classify] says what such an
// error means. The portable layer, package
// github.com/dstlgo/dstl/backends, wraps any driver in one
// [backends.Bucket] that does, once for every service:
//
//   - the checks: object names ([backends.CheckObjectName]), sizes, bodies,
//     ranges, a closed backend, a done context;
//   - timeouts and retries of each request, with exponential backoff and
//     jitter, as [Bucket.Classify] allows (see [Runner]);
//   - readers that fail once their context is done and name their object;
//   - errors that name the operation, the backend and the object and wrap
//     the sentinel the code stands for (backends.ErrNotFound, ...), with
//     secrets redacted;
//   - listings that skip names no Put could have written and stop once the
//     context is done; deletes of missing objects that succeed; empty reads
//     at the end of an object;
//   - metrics of requests and their latencies.
//
// A driver may therefore skip every check: the conformance suite
// (github.com/dstlgo/dstl/conformance) runs each driver through the
// portable layer, which is what users get.
//
// # Writing a driver
//
//  1. Implement [Bucket] with SDK calls. Single requests (Open, Size,
//     Delete) are called inside the portable layer's retry loop: make one
//     request and return. Put and List may send several requests: run each
//     through the [Runner] they are given, which times and retries it.
//  2. Write [Bucket.Classify]: map the service's errors to a [Code]. Use
//     [TransportCode] for what the HTTP transport returns, so that every
//     driver treats cut connections and bad certificates alike.
//  3. Build the HTTP client with [Transport], so that answers that never
//     come are timed out and upload progress is reported ([ReportProgress]).
//  4. Make every As answer a *[Root], and the SDK client for calls the
//     library does not make.
//  5. In the backend's package, give it a Config with documented defaults
//     (among them a backends.Policy for its requests), a Validate, an
//     Open(ctx, Config) that returns the portable type made by
//     backends.New, given the Config's key prefix with
//     backends.WithPrefix (embed it in the package's Backend type to add
//     calls of its own, run through backends.Bucket.Run), a URL form
//     whose parameters are listed as []URLParameter, and register it in
//     init with backends.RegisterURL(ID, ParseURL, Open, scheme).
//  6. Run conformance.TestBackend against an emulator of the service.
//
// The Example of this package is a whole driver, over a directory.
//
// Names given to a driver are keys relative to its root (a bucket, a
// container, a directory): the backend's key prefix, which the portable
// layer adds (backends.WithPrefix), followed by a valid object name. A
// driver uses them as they are, and its List reports keys, from which the
// portable layer takes the prefix off again.
package driver

import (
	"context"
	"io"
	"strconv"
	"time"
)

// Bucket is what a backend implements for one storage service, with SDK
// calls only. It must be safe for concurrent use. The portable layer
// checks every argument before a call and calls neither Put, Open, Size,
// Delete nor List once Close was called; Classify and Location may still
// be called for the errors of readers that Open returned, and As for the
// caller.
type Bucket interface {
	// Put stores size bytes of body under name, create-only and
	// atomically: afterwards the object is either absent or whole, and a
	// name that exists fails with an error that Classify maps to
	// [Exists] (of racing Puts for one name, exactly one succeeds). A
	// failed or cancelled Put leaves nothing visible (abort what it
	// started). Put sends each request through rt, whose Do times and
	// retries it; a request with a body passes the body's size, so that
	// its timeout grows with it. Should the answer to a request that
	// stored the object be lost, its retry meets the object: a Put that
	// can tell its own object (by an id in the metadata, by size and
	// checksum) succeeds then.
	Put(ctx context.Context, rt Runner, name string, body *Body, size int64) error

	// Open makes one ranged read request and returns the object's bytes
	// from offset on: length bytes, or to the end when length is -1
	// (length is never 0). A range that runs past the end is cut at the
	// end. An offset past the end must fail with an error that Classify
	// maps to [InvalidRange] (an offset at the end may do so too, or read
	// no bytes): a service that answers such a read with no bytes needs a
	// check of the size. The portable layer retries Open until it
	// returns, and closes the reader; it cancels ctx once Open failed or
	// the reader was closed, so that a driver may tie the request's
	// resources to ctx.
	Open(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error)

	// Size returns the size of the object, in one request.
	Size(ctx context.Context, name string) (int64, error)

	// Delete removes the object, in one request. A missing object may
	// fail with an error that Classify maps to [NotFound]: the portable
	// layer reports success then.
	Delete(ctx context.Context, name string) error

	// List calls fn for every object whose key starts with prefix, in
	// lexical (byte) order of keys, with its key (relative to the
	// driver's root) as its name. It may report keys that hold no valid
	// object name (written by other tools): the portable layer skips
	// them. It sends each request (a page) through rt. An error of fn is
	// returned as it is; rt makes no other attempt of a request within
	// which fn failed.
	List(ctx context.Context, rt Runner, prefix string, fn func(ObjectInfo) error) error

	// Classify says what an error of the driver means: which sentinel it
	// stands for and whether another attempt may heal it.
	Classify(err error) Code

	// Location describes where the named object is kept, for error
	// messages: "s3://bucket/prefix/name at https://endpoint". It must not
	// hold secrets.
	Location(name string) string

	// As sets target to the driver's SDK client (or another value of the
	// driver's), when target is a pointer to its type, and reports
	// whether it did; every driver sets a *[Root]. It is the escape hatch
	// for calls the portable layer does not make.
	As(target any) bool

	// Close releases the driver's resources (idle connections, files).
	// Readers that Open returned stay usable until closed: the portable
	// layer promises so.
	Close() error
}

// Runner times and retries the requests of one operation.
type Runner interface {
	// Do runs fn, one request, until it succeeds, fails with an error
	// that Classify does not call [Transient], times out too often, or
	// runs out of attempts; or until ctx is done. Each attempt gets a
	// context bounded by the backend's request timeout, grown for a
	// request body of bodySize bytes at [MinThroughput]. The error is the
	// last attempt's.
	Do(ctx context.Context, bodySize int64, fn func(ctx context.Context) error) error
}

// Root is where a backend keeps its objects, as [Bucket.As] reports it to
// a *Root: an object's key is Prefix followed by its name, in Bucket. A
// driver sets Bucket (and a prefix of its own, if it keeps one); the
// portable layer adds the backend's key prefix.
type Root struct {
	// Bucket names the bucket, container or directory (without secrets).
	Bucket string
	// Prefix is the key prefix of the objects: "" or ending in a slash.
	Prefix string
}

// ObjectInfo describes one stored object, as List reports it.
type ObjectInfo struct {
	Name    string    // name relative to the backend's root (a driver reports its key)
	Size    int64     // size in bytes
	ModTime time.Time // time of the last modification
}

// Code is what an error of a driver means.
type Code int

// The codes a [Bucket.Classify] returns.
const (
	// Unknown: an error that fits no other code. It is not retried.
	Unknown Code = iota
	// Transient: another attempt may succeed (throttling, a 5xx answer, a
	// cut or refused connection, a timeout).
	Transient
	// NotFound: the object does not exist.
	NotFound
	// Exists: a create-only Put met an existing object.
	Exists
	// Permission: the credentials do not allow the operation, or are
	// missing or invalid.
	Permission
	// Precondition: a precondition of the request failed.
	Precondition
	// InvalidRange: a read's offset is past the object's end.
	InvalidRange
	// BucketNotFound: the bucket (container, root) does not exist. No
	// attempt heals it, and a Delete reports it.
	BucketNotFound
	// Permanent: no attempt heals it (a bad certificate, https to a
	// plain-HTTP endpoint, a host name that does not resolve).
	Permanent
)

var codeNames = [...]string{"unknown", "transient", "not found", "exists", "permission", "precondition", "invalid range", "bucket not found", "permanent"}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "code(" + strconv.Itoa(int(c)) + ")"
}

// MultipartPutter is a [Bucket] whose Puts above some size take a second
// path: an upload in parts that a last request completes (an S3
// CompleteMultipartUpload, the last chunk of a GCS resumable upload, an
// Azure block list commit). Services differ in which of those requests
// honour a create-only condition, so the portable layer's check of
// create-only (backends.VerifyCreateOnly) tests both paths.
//
// PutMultipart stores size bytes of body under name on the multipart path,
// in as few parts as the service allows (the last part of an S3 upload or
// an Azure block may be of any size, so one part of a few bytes is
// allowed): create-only and atomic, with the same errors and the same
// handling of a lost answer as Put. MinMultipartSize is the smallest size
// that PutMultipart sends on that path: 1 where any size goes, more where
// a client sends smaller bodies in one request whatever it is asked (the
// GCS client does so up to its smallest chunk).
type MultipartPutter interface {
	PutMultipart(ctx context.Context, rt Runner, name string, body *Body, size int64) error
	MinMultipartSize() int64
}
