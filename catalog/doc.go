// Package catalog is a job's checkpoint catalog on the object store alone:
// it lets a job run as many processes (instances) on one bucket, with no
// other service. See docs/CATALOG.md for the object layout, the commit
// protocol, the fencing argument and the deletion rule.
//
// A process joins the job as instance i of P ([Join]): it claims its slot
// in the latest generation, or, when that generation has another instance
// set (a rescale) or its slot is held (a restart), starts a new generation,
// which restores the latest complete checkpoint and fences every older
// generation. [Member.Restore] names the parts to restore: those of the
// restored checkpoint whose key-group ranges overlap the instance's.
//
// At each checkpoint an instance commits its part ([Member.Commit]: its
// state handle, the objects it refers to and metadata such as input
// offsets) with one create-only put, and learns from one listing which
// checkpoints are complete: in the [Aligned] mode once every instance
// committed its part of it, in the [Independent] mode each part at once.
// A fenced member's commits fail with [ErrFenced]; a part written after the
// newer generation started is never restored (one written before may be:
// see [Member.Commit]).
//
// [Member.Plan] applies the deletion rule: it keeps what the retained
// checkpoints, the pending ones of the live generation and the restored
// parts refer to (and, for a grace period, what they superseded), and
// drops the rest once older than the grace period.
//
// Every catalog object is versioned and checksummed: a damaged one is an
// error that names it ([ErrDamaged]), never a wrong restore.
package catalog
