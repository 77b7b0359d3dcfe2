package dstltest

import (
	"context"
	"fmt"

	"github.com/dstlgo/dstl/uploader"
)

// NoUploader is an [uploader.Uploader] that stores nothing and encodes
// nothing: every change set of a batch gets a result naming one object
// that does not exist, at increasing offsets. It lets a benchmark measure
// what appending costs the appender alone, without the encoding of the
// pre-emptive persists that would run beside it on another core. Handles
// it makes cannot be read. It is safe for concurrent use.
type NoUploader struct{}

// Upload returns results for every change set, storing nothing.
func (NoUploader) Upload(_ context.Context, tasks []*uploader.Task) (*uploader.Output, error) {
	const name = "nowhere"
	out := &uploader.Output{Objects: []uploader.StoredObject{{Name: name, Size: 1}}, Tasks: make([]uploader.TaskResult, len(tasks))}
	var off int64
	for i, t := range tasks {
		rs := make([]uploader.Result, len(t.ChangeSets))
		for j, cs := range t.ChangeSets {
			if cs == nil {
				return nil, fmt.Errorf("dstltest: task %d: change set %d is nil", i, j)
			}
			rs[j] = uploader.Result{SequenceNumber: cs.SequenceNumber, Object: name, Offset: off, Length: 1}
			off++
		}
		out.Tasks[i] = uploader.TaskResult{Task: t, Results: rs}
	}
	return out, nil
}

// Discard deletes nothing: nothing was stored.
func (NoUploader) Discard(context.Context, uploader.StoredObject) error { return nil }
