package collect

import (
	"time"

	"github.com/dstlgo/dstl/dstl/objname"
)

// Report is what a collection found and did.
type Report struct {
	// Prefix is the job's prefix, [objname.JobPrefix] of the job id.
	Prefix string
	// Grace is the grace period the collection applied: [Options.Grace],
	// its default filled in, and 0 for [NoGrace].
	Grace time.Duration
	// Now is the time ages count from: the earlier of LocalNow and
	// StoreNow.
	Now time.Time
	// LocalNow is the caller's clock ([Options.Now]) at the start.
	LocalNow time.Time
	// StoreNow is the storage's clock, the clock probe's modification
	// time; zero when unknown: the probe failed (ClockErr), or the
	// storage reports no modification times (ClockErr is nil).
	StoreNow time.Time
	// ClockErr is the clock probe's error, when the probe failed in a dry
	// run, which goes on with the caller's clock.
	ClockErr error
	// DryRun is [Options.DryRun].
	DryRun bool
	// DeletesRun says that deletes (and aborts) were started: not in a
	// dry run, nor when the collection refused, nor when there was
	// nothing to delete.
	DeletesRun bool

	// Objects are the objects listed under the prefix (the clock probe
	// excepted), in the listing's order, each with why it is kept or
	// that it is deletable, and whether it was deleted.
	Objects []Object
	// Listed counts the objects listed; Referenced, Held, Young, Foreign,
	// NotCollected and Deletable count them by [Reason] (their sum is
	// Listed), and Deleted the deletable ones deleted.
	Listed, Referenced, Held, Young, Foreign, NotCollected, Deletable, Deleted Count
	// Missing are the names of the kept objects under the prefix that
	// are not there (or, when no listed object is kept, of every kept
	// object), sorted; then the collection refused ([ErrMissing]).
	Missing []string

	// UploadsChecked says that the backend has incomplete uploads (see
	// [UploadCollector]) and that they were listed.
	UploadsChecked bool
	// UploadsListed counts the incomplete uploads listed under the
	// prefix; UploadsKept those younger than the grace by either clock,
	// or not of an object the collection collects; UploadsAborted those
	// aborted.
	UploadsListed, UploadsKept, UploadsAborted int
	// Uploads are the old incomplete uploads of objects the collection
	// collects, sorted by name and upload id, each with whether it was
	// aborted.
	Uploads []Upload

	// Failed are the deletes and aborts that failed, sorted by name and
	// upload id.
	Failed []Failure
}

// Count counts objects and their bytes.
type Count struct {
	// Objects is the number of objects.
	Objects int
	// Bytes is the sum of their sizes.
	Bytes int64
}

func (c *Count) add(size int64) { c.Objects++; c.Bytes += size }

// Reason says why a listed object is kept, or that it is deletable.
type Reason uint8

// The reasons. A collection checks them in the order Referenced,
// Foreign, NotCollected, Held, Young, Deletable: the first that applies is
// an object's.
const (
	// Referenced: a kept object ([Keep.Has]).
	Referenced Reason = iota + 1
	// Foreign: not named like a log or snapshot object (see package
	// objname); never deleted.
	Foreign
	// NotCollected: of a kind the collection does not collect, or a
	// snapshot of an operator whose snapshots it does not collect.
	NotCollected
	// Young: younger than the grace by the storage's clock (its
	// modification time) or by the time in its name, or of an unknown
	// modification time.
	Young
	// Deletable: old by both clocks and unreferenced: deleted, or, in a
	// dry run or a collection that refused, would be.
	Deletable
	// Held: made for a checkpoint that may still complete, by the
	// checkpoint its name records ([Options.HoldFrom]).
	Held
)

// String returns "referenced", "foreign", "not collected", "held",
// "young" or "deletable".
func (r Reason) String() string {
	switch r {
	case Referenced:
		return "referenced"
	case Foreign:
		return "foreign"
	case NotCollected:
		return "not collected"
	case Young:
		return "young"
	case Deletable:
		return "deletable"
	case Held:
		return "held"
	}
	return "unknown"
}

// Object is a listed object and what the collection made of it.
type Object struct {
	// Name is the object's full name, under the prefix.
	Name string
	// Kind is the kind its name says.
	Kind objname.Kind
	// Size is its size in bytes, as listed.
	Size int64
	// ModTime is its modification time, zero when the storage reports
	// none.
	ModTime time.Time
	// NameTime is the time in its UUIDv7 name, zero for a name of
	// another kind.
	NameTime time.Time
	// Reason says why it is kept, or that it is deletable.
	Reason Reason
	// Deleted says that its delete ran and succeeded.
	Deleted bool
}

// Upload is an old incomplete upload of an object the collection
// collects: aborted, or to be.
type Upload struct {
	// Name is the object the upload would have written.
	Name string
	// UploadID is the storage's id of the upload.
	UploadID string
	// Initiated is when the upload started, by the storage's clock.
	Initiated time.Time
	// NameTime is the time in Name's UUIDv7.
	NameTime time.Time
	// Aborted says that its abort ran and succeeded.
	Aborted bool
}

// Failure is a delete, or an upload's abort, that failed.
type Failure struct {
	// Name is the object deleted, or the object of the upload aborted.
	Name string
	// UploadID is the upload's id, for an abort; empty for a delete.
	UploadID string
	// Err is the call's error.
	Err error
}
