package uploader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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
	// as many object buffers, and one for a batch encoded ahead (see
	// [Preparer]), are kept for reuse.
	Concurrency int
	// FormatVersion is the object format version written: 1 (or 0) or 2
	// (see format.EncoderOptions.Version).
	FormatVersion int
}

// Backend is the default [Uploader]: it encodes a batch into one object
// (see docs/FORMAT.md) and puts it on a backend under a new name that
// sorts by time. It is a [Preparer]: the encoding can run before the
// upload.
type Backend struct {
	backend backends.Backend
	prefix  string
	opts    format.EncoderOptions
	bufSize int
	scratch chan *scratch
}

// scratch is an object buffer and an encoder, reused across uploads.
type scratch struct {
	buf      []byte
	enc      *format.Encoder
	measured format.Measured // the change sets of an object put while encoded
}

// maxPooledObject bounds the object buffers kept for reuse.
const maxPooledObject = 64 << 20

// NewBackend returns the default uploader over backend.
func NewBackend(backend backends.Backend, o Options) *Backend {
	return &Backend{
		backend: backend,
		prefix:  objname.JobPrefix(o.JobID),
		opts:    format.EncoderOptions{Compression: o.Compression, Version: o.FormatVersion},
		bufSize: max(o.BufferSize, 0),
		scratch: make(chan *scratch, max(o.Concurrency, 1)+1),
	}
}

// Upload encodes the batch into one object and puts it. The object is
// built in place in a pooled buffer, which keeps its size for the next
// uploads, and is put from there. Without compression, the object's size
// is known before it is encoded, and the Put of an object of 256 KiB or
// more starts at once: it reads the object's bytes as the encoder writes
// them, on a goroutine of its own (of format version 2 a chunk at a time,
// of version 1 a frame at a time; see format.Encoder.SetProgress). A
// smaller object, or one compressed, is encoded first, then put. Either
// way the backend is given the object's CRC32C, from the frames'
// checksums, for a store that checks one.
func (u *Backend) Upload(ctx context.Context, tasks []*Task) (*Output, error) {
	if !u.opts.Compression {
		return u.uploadStreaming(ctx, tasks)
	}
	e, err := u.encode(tasks)
	if err != nil {
		return nil, err
	}
	defer e.Release()
	return e.Upload(ctx)
}

// minStreamed is the smallest object put while it is encoded: a smaller
// one is encoded first, on the attempt's goroutine, in less time than
// handing it to another goroutine and back would take.
const minStreamed = 256 << 10

// uploadStreaming puts the batch's object while it is encoded.
func (u *Backend) uploadStreaming(ctx context.Context, tasks []*Task) (*Output, error) {
	var sets []*format.ChangeSet
	for _, t := range tasks {
		sets = append(sets, t.ChangeSets...)
	}
	sc := u.getScratch()
	// Measured once: the encoder writes what this read learnt, reading
	// the changes only once more.
	m := &sc.measured
	if err := m.Reset(u.opts, sets...); err != nil {
		u.recycle(sc)
		return nil, fmt.Errorf("dstl: encode an object of %d tasks: %w", len(tasks), err)
	}
	size := m.Size()
	if size < minStreamed {
		u.recycle(sc)
		e, err := u.encode(tasks)
		if err != nil {
			return nil, err
		}
		defer e.Release()
		return e.Upload(ctx)
	}
	var checkpoint int64
	for _, t := range tasks {
		checkpoint = max(checkpoint, t.Checkpoint)
	}
	name, err := objname.NewLog(u.prefix, checkpoint)
	if err != nil {
		u.recycle(sc)
		return nil, err
	}
	if int64(cap(sc.buf)) < size {
		sc.buf = make([]byte, 0, size+size/8) // headroom: the next is often a little larger
	}
	body := newStreamBody(sc.buf, size)
	results := make([]TaskResult, len(tasks))
	go func() {
		enc := sc.enc
		// Capped at the planned size: a change set that a second read
		// makes larger is rejected before it is written (see
		// format.Encoder.SetProgress).
		enc.ResetBuffer(sc.buf[:0:size], u.opts)
		enc.SetProgress(body.final)
		k := 0 // the change set's place in m
		for i, t := range tasks {
			rs := make([]Result, len(t.ChangeSets))
			for j, cs := range t.ChangeSets {
				fi, err := enc.WriteMeasured(m, k)
				k++
				if err != nil {
					body.finish(0, 0, fmt.Errorf("dstl: encode change set %d of log %x: %w", cs.SequenceNumber, t.LogID, err))
					return
				}
				rs[j] = Result{SequenceNumber: cs.SequenceNumber, Object: name, Offset: fi.Offset, Length: fi.Length, LogicalSize: fi.LogicalSize}
			}
			results[i] = TaskResult{Task: t, Results: rs}
		}
		if err := enc.Close(); err != nil {
			body.finish(0, 0, fmt.Errorf("dstl: encode an object of %d tasks: %w", len(tasks), err))
			return
		}
		crc, _ := enc.ObjectCRC32C()
		body.finish(int64(len(enc.Bytes())), crc, nil)
	}()
	err = u.backend.Put(ctx, name, TrackBody(ctx, body, size), size)
	// The buffer is reused only once the encoder is done with it.
	encErr := body.result()
	u.recycle(sc)
	if err != nil {
		return nil, err
	}
	if encErr != nil {
		// A backend that stored the object without reading it all (one
		// that discards objects): the object is not what it should be.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		_ = u.backend.Delete(dctx, name)
		cancel()
		return nil, encErr
	}
	return &Output{Objects: []StoredObject{{Name: name, Size: size}}, Tasks: results}, nil
}

// getScratch returns a pooled object buffer and encoder, or new ones.
func (u *Backend) getScratch() *scratch {
	var sc *scratch
	select {
	case sc = <-u.scratch:
	default:
		sc = &scratch{enc: format.NewEncoder(nil, format.EncoderOptions{})}
	}
	if sc.buf == nil {
		sc.buf = make([]byte, 0, u.bufSize)
	}
	return sc
}

// Prepare encodes the batch into one object, in a pooled buffer, for
// attempts to put under names of their own (see [Preparer]).
func (u *Backend) Prepare(_ context.Context, tasks []*Task) (Prepared, error) {
	e, err := u.encode(tasks)
	if err != nil {
		return nil, err // not a nil *encoded in a non-nil Prepared
	}
	return e, nil
}

// encoded is a batch encoded into one object, not yet named.
type encoded struct {
	u       *Backend
	sc      *scratch
	obj     []byte
	crc     uint32       // the object's CRC32C
	results []TaskResult // the results, Object and LocalObject unset
}

// encode encodes the tasks' change sets into one object, in a pooled
// buffer.
func (u *Backend) encode(tasks []*Task) (*encoded, error) {
	sc := u.getScratch()
	enc := sc.enc
	enc.ResetBuffer(sc.buf, u.opts)
	results := make([]TaskResult, len(tasks))
	for i, t := range tasks {
		rs := make([]Result, len(t.ChangeSets))
		for j, cs := range t.ChangeSets {
			fi, err := enc.WriteChangeSet(cs)
			if err != nil {
				u.recycle(sc)
				return nil, fmt.Errorf("dstl: encode change set %d of log %x: %w", cs.SequenceNumber, t.LogID, err)
			}
			rs[j] = Result{SequenceNumber: cs.SequenceNumber, Offset: fi.Offset, Length: fi.Length, LogicalSize: fi.LogicalSize}
		}
		results[i] = TaskResult{Task: t, Results: rs}
	}
	if err := enc.Close(); err != nil {
		u.recycle(sc)
		return nil, fmt.Errorf("dstl: encode an object of %d tasks: %w", len(tasks), err)
	}
	obj := enc.Bytes()
	sc.buf = obj[:0] // the same array, unless it grew
	crc, _ := enc.ObjectCRC32C()
	return &encoded{u: u, sc: sc, obj: obj, crc: crc, results: results}, nil
}

// recycle resets sc and keeps it for the next uploads, unless its buffer
// is too large to keep or enough are kept.
func (u *Backend) recycle(sc *scratch) {
	sc.enc.ResetBuffer(nil, format.EncoderOptions{}) // keeps nothing of the object, nor its progress function
	sc.measured.Clear()                              // nor its change sets
	if cap(sc.buf) > maxPooledObject {
		return
	}
	select {
	case u.scratch <- sc:
	default: // full: let the garbage collector have it
	}
}

// errReleased is the error of a prepared object's Upload after its
// Release.
var errReleased = errors.New("dstl: upload of a prepared object after its release")

// Upload puts the object under a new name.
func (e *encoded) Upload(ctx context.Context) (*Output, error) {
	if e.sc == nil {
		return nil, errReleased
	}
	var checkpoint int64
	for _, tr := range e.results {
		checkpoint = max(checkpoint, tr.Task.Checkpoint)
	}
	name, err := objname.NewLog(e.u.prefix, checkpoint)
	if err != nil {
		return nil, err
	}
	out := &Output{Tasks: make([]TaskResult, len(e.results))}
	for i, tr := range e.results {
		rs := slices.Clone(tr.Results)
		for j := range rs {
			rs[j].Object = name
		}
		out.Tasks[i] = TaskResult{Task: tr.Task, Results: rs}
	}
	size := int64(len(e.obj))
	if err := e.u.backend.Put(ctx, name, TrackBody(ctx, backends.NewMemoryBody(e.obj).WithCRC32C(e.crc), size), size); err != nil {
		return nil, err
	}
	out.Objects = []StoredObject{{Name: name, Size: size}}
	return out, nil
}

// Release gives the object's buffer back to the uploader's pool.
func (e *encoded) Release() {
	if e.sc != nil {
		e.u.recycle(e.sc)
		e.sc, e.obj = nil, nil
	}
}

// Discard deletes an object the uploader wrote.
func (u *Backend) Discard(ctx context.Context, obj StoredObject) error {
	return u.backend.Delete(ctx, obj.Name)
}
