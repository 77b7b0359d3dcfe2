// Package catalog is a job's checkpoint catalog on the object store alone.
// It lets a job run as many processes on one bucket, with no other
// service. docs/CATALOG.md describes the objects, the commit protocol, the
// fencing argument and the deletion rule.
//
// A job runs as P instances, each owning a key-group range, in Q
// processes; process p runs the instances of [InstancesOf](p, Q, P). A
// process joins the job with [Join]. It claims its slot in the latest
// generation, or it starts a new generation when that generation has
// another configuration (a rescale) or its slot is held (a restart). A new
// generation restores the latest complete checkpoint and fences every
// older generation. [Member.Restore] names the parts an instance restores:
// those of the restored checkpoint whose key-group ranges overlap the
// instance's.
//
// At each checkpoint a process commits its instances' parts in one object
// with one create-only put ([Member.Commit]). A part holds an instance's
// state handle, the objects it refers to, and metadata such as input
// offsets. The commit also tells which checkpoints are complete: in the
// [Aligned] mode once every instance committed its part, in the
// [Independent] mode each part at once. Process 0, the leader, learns it
// from one listing of one checkpoint's directory, and tells the others
// through its commits. A fenced member's commits fail with [ErrFenced]; a
// part written after the newer generation started is never restored (one
// written before may be: see [Member.Commit]).
//
// [Member.Collect] applies the deletion rule on the leader. It keeps what
// the retained checkpoints, the pending ones of the live generation and
// the restored parts refer to, and deletes the rest once older than the
// grace period. [CollectJob] does the same from outside the job, as
// "dstl gc" does.
//
// Every catalog object is versioned and checksummed: a damaged one is an
// error that names it ([ErrDamaged]), never a wrong restore. A job whose
// catalog is of the first layout moves to the second at its first Join of
// a release with the second layout.
package catalog
