package dstl

import (
	"context"

	"github.com/dstlgo/dstl/dstl/format"
)

// An Uploader stores batches of upload tasks. The scheduler hands it every
// task that arrived within one batching window and calls it once per
// attempt; retries, hedging and completion are the scheduler's business.
// The default uploader ([NewBackendUploader]) writes a batch into one object
// on a [Backend]; other uploaders wrap it (to mirror objects to local disk,
// or to inject faults in tests).
type Uploader interface {
	// Upload makes one attempt at storing every task of the batch. On
	// success it returns, for each task in order, one result per change set
	// of the task, and the objects it wrote. When the attempt's context is
	// cancelled, the uploader should stop and leave nothing behind; if it
	// wrote objects anyway, the scheduler discards them.
	Upload(ctx context.Context, tasks []*UploadTask) (*UploadOutput, error)
	// Discard deletes an object this uploader wrote, with its local copy if
	// there is one. Deleting a missing object is not an error.
	Discard(ctx context.Context, obj StoredObject) error
}

// UploadTask is one writer's request to store some of its change sets.
type UploadTask struct {
	// LogID is the writer's log.
	LogID LogID
	// ChangeSets are the change sets to store, in sequence-number order.
	ChangeSets []*format.ChangeSet
	// Size is the logical size of the change sets, in bytes.
	Size int64

	// engine side: who to tell
	writer *Writer
	sets   []*changeSet
}

// UploadOutput is what one successful attempt stored.
type UploadOutput struct {
	// Objects lists every object the attempt wrote.
	Objects []StoredObject
	// Results holds, per task, one result per change set, in order.
	Results [][]UploadResult
}

// StoredObject is one object written by an upload attempt.
type StoredObject struct {
	Name      string // name on the backend
	Size      int64  // stored size in bytes
	LocalName string // name of the local copy, "" when there is none
}

// UploadResult says where one change set was stored.
type UploadResult struct {
	SequenceNumber SequenceNumber
	Object         string // object name on the backend
	Offset         int64  // offset of the change set in the stored object
	Length         int64  // stored length of the change set
	LogicalSize    int64  // size of its changes before encoding
	LocalObject    string // name of the local copy (same offset and length), "" when none
}
