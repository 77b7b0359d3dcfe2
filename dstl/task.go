package dstl

import (
	"github.com/dstlgo/dstl/dstl/format"
	"github.com/dstlgo/dstl/uploader"
)

// uploadTask is one writer's request to store some of its change sets: the
// task the uploader sees, and the engine's side of it.
type uploadTask struct {
	uploader.Task

	sets  []*changeSet
	build func() []*format.ChangeSet // builds ChangeSets, off the writer's lock
	// done takes the task's outcome, once: its results (one per change set,
	// in order) or the error that failed it.
	done func(results []uploader.Result, err error)
	// release runs once every attempt at the task has ended: no upload
	// reads its change sets any more.
	release func()
}

// prepare builds the task's change sets for the uploader, once.
func (t *uploadTask) prepare() {
	if t.ChangeSets == nil {
		t.ChangeSets = t.build()
	}
}

// uploaderTasks returns what the uploader sees of a batch.
func uploaderTasks(batch []*uploadTask) []*uploader.Task {
	tasks := make([]*uploader.Task, len(batch))
	for i, t := range batch {
		tasks[i] = &t.Task
	}
	return tasks
}

// uploadOptions are the storage's settings of the default uploader.
func uploadOptions(cfg Config) uploader.Options {
	return uploader.Options{JobID: cfg.JobID, Compression: cfg.CompressionEnabled,
		BufferSize: int(cfg.UploadBufferSize), Concurrency: cfg.UploadNumThreads, FormatVersion: cfg.FormatVersion}
}

// engineTasks maps what the uploader saw of a batch's tasks to the tasks.
func engineTasks(batch []*uploadTask) map[*uploader.Task]*uploadTask {
	m := make(map[*uploader.Task]*uploadTask, len(batch))
	for _, t := range batch {
		m[&t.Task] = t
	}
	return m
}
