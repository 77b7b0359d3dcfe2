package discard

import (
	"context"
	"fmt"

	"github.com/dstlgo/dstl/uploader"
)

// Uploader is an [uploader.Uploader] that stores nothing and encodes
// nothing: every change set of a batch gets a result naming one object
// that does not exist, at increasing offsets. It lets a benchmark measure
// what appending costs the appender alone, without the encoding of the
// pre-emptive persists that would run beside it on another core (the
// CLI's bench installs it with [dstl.WithUploader]). Handles it makes
// cannot be read. The zero value is ready to use and safe for concurrent
// use.
type Uploader struct{}

var _ uploader.Uploader = Uploader{}

// nowhere is the name of the object that every result of [Uploader]
// names; no such object is stored.
const nowhere = "nowhere"

// Upload returns results for every change set, storing nothing. A nil
// change set is an error.
func (Uploader) Upload(_ context.Context, tasks []*uploader.Task) (*uploader.Output, error) {
	out := &uploader.Output{Objects: []uploader.StoredObject{{Name: nowhere, Size: 1}}, Tasks: make([]uploader.TaskResult, len(tasks))}
	var off int64
	for i, t := range tasks {
		rs := make([]uploader.Result, len(t.ChangeSets))
		for j, cs := range t.ChangeSets {
			if cs == nil {
				return nil, fmt.Errorf("%s: task %d: change set %d is nil", ID, i, j)
			}
			rs[j] = uploader.Result{SequenceNumber: cs.SequenceNumber, Object: nowhere, Offset: off, Length: 1}
			off++
		}
		out.Tasks[i] = uploader.TaskResult{Task: t, Results: rs}
	}
	return out, nil
}

// Discard deletes nothing: nothing was stored.
func (Uploader) Discard(context.Context, uploader.StoredObject) error { return nil }
