package dstl

import (
	"bytes"
	"context"
	"fmt"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/dstl/objname"
)

// An Uploader stores batches of upload tasks. The scheduler hands it every
// task that arrived within one batching window and calls it once per
// attempt; retries, hedging and completion are the scheduler's business.
// The default uploader ([NewBackendUploader]) writes a batch into one object
// on a [backends.Backend]; other uploaders wrap it (to mirror objects to local disk,
// or to inject faults in tests).
type Uploader interface {
	// Upload makes one attempt at storing every task of the batch. On
	// success it returns, for each task, one result per change set of the
	// task (see [UploadOutput.Tasks]), and the objects it wrote. Several
	// attempts at one batch may run at once: an uploader writes its results
	// into the output, never into the tasks. When the attempt's context is
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
	// LogicalSize is the size of the change sets' changes, in bytes.
	LogicalSize int64

	// engine side, set by the writer that made the task
	sets  []*changeSet
	build func() []*format.ChangeSet // builds ChangeSets, off the writer's lock
	// done takes the task's outcome, once: its results (one per change set,
	// in order) or the error that failed it.
	done func(results []UploadResult, err error)
	// release runs once every attempt at the task has ended: no upload
	// reads its change sets any more.
	release func()
}

// prepare builds the task's change sets for the uploader, once.
func (t *UploadTask) prepare() {
	if t.ChangeSets == nil {
		t.ChangeSets = t.build()
	}
}

// UploadOutput is what one successful attempt stored.
type UploadOutput struct {
	// Objects lists every object the attempt wrote.
	Objects []StoredObject
	// Tasks holds the results of each task of the batch, one entry per
	// task, in any order.
	Tasks []TaskResult
}

// TaskResult says where the change sets of one task were stored.
type TaskResult struct {
	// Task is the task, as the uploader received it.
	Task *UploadTask
	// Results holds one result per change set of the task, in order.
	Results []UploadResult
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

// BackendUploader is the default [Uploader]: it encodes a batch into one
// object (see docs/FORMAT.md) and puts it on a [backends.Backend] under a new name
// that sorts by time.
type BackendUploader struct {
	backend     backends.Backend
	prefix      string
	compression bool
	bufSize     int
	scratch     freeList[*uploadScratch]
}

// uploadScratch is an object buffer and an encoder, reused across uploads.
type uploadScratch struct {
	buf *bytes.Buffer
	enc *format.Encoder
}

// maxPooledObject bounds the object buffers kept for reuse.
const maxPooledObject = 64 << 20

// NewBackendUploader returns the default uploader for cfg (job prefix,
// compression, buffer size) over backend.
func NewBackendUploader(backend backends.Backend, cfg Config) *BackendUploader {
	return &BackendUploader{
		backend:     backend,
		prefix:      ObjectPrefix(cfg.JobID),
		compression: cfg.CompressionEnabled,
		bufSize:     int(cfg.UploadBufferSize),
		scratch:     newFreeList[*uploadScratch](max(cfg.UploadNumThreads, 1)),
	}
}

// ObjectPrefix returns the prefix of the names of a job's objects; package
// [objname] owns the naming scheme.
func ObjectPrefix(jobID string) string { return objname.JobPrefix(jobID) }

// Upload encodes the batch into one object and puts it.
func (u *BackendUploader) Upload(ctx context.Context, tasks []*UploadTask) (*UploadOutput, error) {
	name, err := objname.NewLog(u.prefix)
	if err != nil {
		return nil, err
	}
	sc, ok := u.scratch.get()
	if !ok {
		sc = &uploadScratch{buf: bytes.NewBuffer(make([]byte, 0, u.bufSize)), enc: format.NewEncoder(nil, format.EncoderOptions{})}
	}
	defer func() {
		sc.buf.Reset()
		sc.enc.Reset(nil, format.EncoderOptions{})
		if sc.buf.Cap() <= maxPooledObject {
			u.scratch.put(sc)
		}
	}()
	buf, enc := sc.buf, sc.enc
	enc.Reset(buf, format.EncoderOptions{Compression: u.compression})
	out := &UploadOutput{Tasks: make([]TaskResult, len(tasks))}
	for i, t := range tasks {
		rs := make([]UploadResult, len(t.ChangeSets))
		for j, cs := range t.ChangeSets {
			fi, err := enc.WriteChangeSet(cs)
			if err != nil {
				return nil, fmt.Errorf("dstl: encode change set %d of log %s into %s: %w", cs.SequenceNumber, t.LogID, name, err)
			}
			rs[j] = UploadResult{SequenceNumber: SequenceNumber(cs.SequenceNumber), Object: name,
				Offset: fi.Offset, Length: fi.Length, LogicalSize: fi.LogicalSize}
		}
		out.Tasks[i] = TaskResult{Task: t, Results: rs}
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("dstl: encode %s: %w", name, err)
	}
	size := int64(buf.Len())
	if err := u.backend.Put(ctx, name, trackBody(ctx, bytes.NewReader(buf.Bytes()), size), size); err != nil {
		return nil, err
	}
	out.Objects = []StoredObject{{Name: name, Size: size}}
	return out, nil
}

// Discard deletes an object the uploader wrote.
func (u *BackendUploader) Discard(ctx context.Context, obj StoredObject) error {
	return u.backend.Delete(ctx, obj.Name)
}
