package uploader

import (
	"context"
	"fmt"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/dstl/objname"
)

// Options are what the default uploader needs of the storage's
// configuration.
type Options struct {
	// JobID names the job: objects go under its prefix
	// (objname.JobPrefix).
	JobID string
	// Compression compresses the change sets.
	Compression bool
	// BufferSize is the initial size of an object's buffer, in bytes.
	BufferSize int
	// Concurrency is how many uploads run at once (upload.num-threads):
	// as many object buffers are kept for reuse.
	Concurrency int
}

// Backend is the default [Uploader]: it encodes a batch into one object
// (see docs/FORMAT.md) and puts it on a backend under a new name that
// sorts by time.
type Backend struct {
	backend     backends.Backend
	prefix      string
	compression bool
	bufSize     int
	scratch     chan *scratch
}

// scratch is an object buffer and an encoder, reused across uploads.
type scratch struct {
	buf []byte
	enc *format.Encoder
}

// maxPooledObject bounds the object buffers kept for reuse.
const maxPooledObject = 64 << 20

// NewBackend returns the default uploader over backend.
func NewBackend(backend backends.Backend, o Options) *Backend {
	return &Backend{
		backend:     backend,
		prefix:      objname.JobPrefix(o.JobID),
		compression: o.Compression,
		bufSize:     max(o.BufferSize, 0),
		scratch:     make(chan *scratch, max(o.Concurrency, 1)),
	}
}

// Upload encodes the batch into one object and puts it. The object is
// built in place in a pooled buffer, which grows as a slice does and keeps
// its size for the next uploads, and is put from there.
func (u *Backend) Upload(ctx context.Context, tasks []*Task) (*Output, error) {
	name, err := objname.NewLog(u.prefix)
	if err != nil {
		return nil, err
	}
	var sc *scratch
	select {
	case sc = <-u.scratch:
	default:
		sc = &scratch{enc: format.NewEncoder(nil, format.EncoderOptions{})}
	}
	defer func() {
		sc.enc.ResetBuffer(nil, format.EncoderOptions{})
		if cap(sc.buf) <= maxPooledObject {
			select {
			case u.scratch <- sc:
			default: // full: let the garbage collector have it
			}
		}
	}()
	if sc.buf == nil {
		sc.buf = make([]byte, 0, u.bufSize)
	}
	enc := sc.enc
	enc.ResetBuffer(sc.buf, format.EncoderOptions{Compression: u.compression})
	out := &Output{Tasks: make([]TaskResult, len(tasks))}
	for i, t := range tasks {
		rs := make([]Result, len(t.ChangeSets))
		for j, cs := range t.ChangeSets {
			fi, err := enc.WriteChangeSet(cs)
			if err != nil {
				return nil, fmt.Errorf("dstl: encode change set %d of log %x into %s: %w", cs.SequenceNumber, t.LogID, name, err)
			}
			rs[j] = Result{SequenceNumber: cs.SequenceNumber, Object: name,
				Offset: fi.Offset, Length: fi.Length, LogicalSize: fi.LogicalSize}
		}
		out.Tasks[i] = TaskResult{Task: t, Results: rs}
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("dstl: encode %s: %w", name, err)
	}
	obj := enc.Bytes()
	sc.buf = obj[:0] // the same array, unless it grew
	if err := u.backend.Put(ctx, name, TrackBody(ctx, backends.NewMemoryBody(obj), int64(len(obj))), int64(len(obj))); err != nil {
		return nil, err
	}
	out.Objects = []StoredObject{{Name: name, Size: int64(len(obj))}}
	return out, nil
}

// Discard deletes an object the uploader wrote.
func (u *Backend) Discard(ctx context.Context, obj StoredObject) error {
	return u.backend.Delete(ctx, obj.Name)
}
