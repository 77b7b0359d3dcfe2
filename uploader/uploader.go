// Package uploader is the seam between the engine and what stores its
// batches. Applications need it only to write an uploader of their own,
// for instance to inject faults.
//
// It defines the [Uploader] interface with its tasks and results, and the
// default uploader [Backend], which encodes a batch into one object on a
// backend. [LocalRecovery] is the seam of local recovery, which package
// github.com/dstlgo/dstl/duplicating implements. The engine is package
// github.com/dstlgo/dstl/dstl.
package uploader

import (
	"context"
	"io"

	"github.com/dstlgo/dstl/dstl/format"
)

// An Uploader stores batches of upload tasks. The engine's scheduler hands
// it every task that arrived within one batching window and calls it once
// per attempt; retries, hedging and completion are the scheduler's
// business.
type Uploader interface {
	// Upload makes one attempt at storing every task of the batch. On
	// success it returns, for each task, one result per change set of the
	// task (see [Output.Tasks]), and the objects it wrote. Several attempts
	// at one batch may run at once: an uploader writes its results into the
	// output, never into the tasks. When the attempt's context is
	// cancelled, the uploader should stop and leave nothing behind; if it
	// wrote objects anyway, the scheduler discards them.
	Upload(ctx context.Context, tasks []*Task) (*Output, error)
	// Discard deletes an object this uploader wrote, with its local copy if
	// there is one. Deleting a missing object is not an error.
	Discard(ctx context.Context, obj StoredObject) error
}

// A Preparer is an [Uploader] that can encode a batch before its upload
// starts. While every upload slot (upload.num-threads) is busy and a full
// batch is queued, the engine's scheduler has that batch encoded, so that
// the next free slot only puts it: the batch's attempts put the prepared
// object, each under a name of its own, instead of encoding the batch
// again. [Backend] and the local recovery of package duplicating
// implement it; a storage uses it only from its own uploader, not through
// a wrapper of dstl.WithUploader (which may override Upload).
type Preparer interface {
	Uploader
	// Prepare encodes the batch into an object. The tasks and their
	// change sets stay unchanged until the Prepared is released. An error
	// leaves nothing to release; the scheduler then has each attempt call
	// Upload instead.
	Prepare(ctx context.Context, tasks []*Task) (Prepared, error)
}

// Prepared is a batch encoded ahead of its upload by a [Preparer].
type Prepared interface {
	// Upload makes one attempt at storing the prepared object, under a
	// new name, with the results and the contract of [Uploader.Upload].
	// Several attempts may run at once.
	Upload(ctx context.Context) (*Output, error)
	// Release gives the object's memory back, once no attempt runs; an
	// Upload after it fails. A storage that closes while attempts may
	// still run never calls it: a Prepared must hold nothing that the
	// garbage collector does not reclaim.
	Release()
}

// Task is one writer's request to store some of its change sets.
type Task struct {
	// LogID is the writer's log (a dstl.LogID).
	LogID [16]byte
	// ChangeSets are the change sets to store, in sequence-number order.
	// The engine gives each change set's changes in append order,
	// through a reader over the writer's memory
	// (format.ChangeSet.AppendedFrom), which format.Encoder stores by key
	// group; an uploader that reads the changes itself takes them by
	// group with format.ChangeSet.ByGroup. Either way, nothing of them may
	// be kept once the upload's attempts have ended: the writer reuses
	// its memory.
	ChangeSets []*format.ChangeSet
	// LogicalSize is the size of the change sets' changes, in bytes.
	LogicalSize int64
	// Checkpoint is the checkpoint the change sets are uploaded for: the
	// ID of the persist that uploads them, or, for an upload before its
	// persist, the writer's next checkpoint (see dstl's
	// Writer.SetNextCheckpoint); 0 when unknown. An object records the
	// highest of its tasks' in its name (objname.NewLog), and the
	// deletion rule keeps an object made for a checkpoint that may still
	// complete, however old.
	Checkpoint int64
}

// Output is what one successful attempt stored.
type Output struct {
	// Objects lists every object the attempt wrote.
	Objects []StoredObject
	// Tasks holds the results of each task of the batch, one entry per
	// task, in any order.
	Tasks []TaskResult
}

// TaskResult says where the change sets of one task were stored.
type TaskResult struct {
	// Task is the task, as the uploader received it.
	Task *Task
	// Results holds one result per change set of the task, in order.
	Results []Result
}

// StoredObject is one object written by an upload attempt.
type StoredObject struct {
	Name      string // name on the backend
	Size      int64  // stored size in bytes
	LocalName string // name of the local copy, "" when there is none
}

// Result says where one change set was stored.
type Result struct {
	SequenceNumber uint64 // the change set's (a dstl.SequenceNumber)
	Object         string // object name on the backend
	Offset         int64  // offset of the change set in the stored object
	Length         int64  // stored length of the change set
	LogicalSize    int64  // size of its changes before encoding
	LocalObject    string // name of the local copy (same offset and length), "" when none
}

type trackerKey struct{}

// WithBodyTracker returns ctx carrying track, which [TrackBody] applies.
// The engine sets one for every upload attempt, to count reads of an
// object's body as the attempt's progress.
func WithBodyTracker(ctx context.Context, track func(body io.ReaderAt, size int64) io.ReaderAt) context.Context {
	return context.WithValue(ctx, trackerKey{}, track)
}

// TrackBody returns the body of an object of size bytes that an uploader
// is about to put, such that the engine counts its reads as progress of
// the upload attempt that ctx belongs to, until the backend reports bytes
// sent. An uploader that puts objects of its own calls it with each
// object's body; outside an attempt it returns body.
func TrackBody(ctx context.Context, body io.ReaderAt, size int64) io.ReaderAt {
	if track, ok := ctx.Value(trackerKey{}).(func(io.ReaderAt, int64) io.ReaderAt); ok {
		return track(body, size)
	}
	return body
}
