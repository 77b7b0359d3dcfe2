// Package job runs the instances of one process of a stateful job. Its
// runner joins the job, restores each instance's state stores, runs the
// user's processing, and takes, commits and confirms a checkpoint at each
// interval. It is the instance loop that package kafkastate, the examples
// and a service of one's own share.
//
// The runner also applies the deletion rule, and rejoins and restores
// again when a newer generation fences its process.
//
// The user gives an [Open] function, called for each instance the process
// runs: it makes the instance's state stores on the instance's log,
// registers them, reads the input position the instance restores from
// ([Instance.Restored]) and returns a [Task]. The runner restores the
// stores, then calls the task's Process in a loop, and between two calls,
// at each checkpoint, takes a snapshot of every instance's stores with the
// metadata its task returns (its input offsets), so that state and input
// position are cut at one point.
//
// Where a checkpoint is committed is the [Coordinator]'s: [NewCatalog]
// commits through the job's checkpoint catalog on the object store
// (package catalog: processes of a generation, fencing, the deletion
// rule), for a job that has no other coordinator; package kafkastate
// commits through a Kafka consumer group, whose rebalances move instances
// between running processes ([Rebalancer]): a revoked instance takes part
// in a last checkpoint before it goes, a lost one goes without, an added
// one restores, and the others keep running.
//
// The instances of a process take each checkpoint together: every task's
// metadata is read, then their snapshots are taken at once, so that their
// logs go up in one object. Checkpoint numbers grow with the clock
// ([Assignment]) and stay above every checkpoint an instance restored.
//
// [Run] returns when its context ends, after a last checkpoint of every
// instance (ErrStopped is not returned: a stop is no error), or with the
// first error it cannot handle. A fenced process rejoins the latest
// generation and restores again; one that another process replaced, or
// that the job outgrew (a rescale to fewer processes), stops with the
// coordinator's error.
package job
