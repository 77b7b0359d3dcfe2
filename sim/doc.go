// Package sim is a seeded simulation of the engine (package dstl), driven
// only through its public API over an in-memory backend of its own that
// injects faults.
//
// A schedule is derived from one seed (math/rand/v2, PCG): the storage's
// configuration (tiny upload.max-in-flight, upload.timeout, max attempts,
// next-attempt delay, retry policy, compression, batch delay and size,
// preemptive persists, upload and discard threads), a fault profile, and
// one to four writers with key-group ranges up to 32768 groups wide. Each
// writer runs its own program of random steps: appends by one to three
// concurrent appenders (disjoint key groups; metadata, zero-length and
// large changes), sequence-number rollovers, persists from any earlier
// boundary, waits, confirms, aborts (Reset) of in-flight or finished
// persists, truncations, and Close or TruncateAndClose at the end; a
// quarter of the schedules close the storage abruptly in the middle.
// Goroutine timing does not shift the decisions: each writer step, each
// appender and the end of each program draw from a generator of their own,
// derived from (seed, writer, step), so a schedule that does not close the
// storage abruptly plans the same operations at every run (Stats.Plan;
// TestSameSeedSamePlan). What the operations return, and so which handles
// exist, still depends on timing.
//
// The backend injects, per call: put errors before storing, lost answers
// (stored, then an error), stalls that honour cancellation, stalls that
// ignore it and then store and succeed, stores after cancellation that
// report the context's error, stores that land in the background after the
// put returned its error, and failing deletes. A quarter of the schedules
// inject nothing. The fault of a call comes from a generator derived from
// the seed, the operation, the object's contents (whose change sets of
// which writer; names are random) and the number of earlier such calls,
// not from one stream shared in arrival order (TestFaultsFollowContent).
//
// Invariants checked for every schedule:
//
//   - Every handle a persist returned, and at the end every confirmed
//     handle and every handle of a checkpoint still pending when its
//     writer closed (whose objects the engine keeps), survives a binary round trip (MarshalBinary, UnmarshalBinary,
//     equal and re-encoding to the same bytes; JSON likewise) and, read
//     through a fresh reader (at the end: a fresh storage, and half the
//     time also a reader of part of the writer's range, as after
//     rescaling) over the backend's contents,
//     yields exactly the changes appended to its range [From, To): per key
//     group (and for metadata) in append order, change sets in ascending
//     sequence-number order, metadata first and key groups ascending within
//     each set. The result's From and To are those of the persist, and the
//     handle names the writer's log and key-group range.
//   - A returned handle is checked when the simulation first sees it
//     resolved, if its objects are certain to exist then: nothing was
//     truncated or closed since the persist, or its checkpoint is still
//     pending (neither reset nor subsumed by a newer confirmed one).
//   - A persist that fails says why: its error wraps an injected fault,
//     ErrClosed, ErrTruncated or a context deadline or cancellation.
//   - Once the storage is closed, every persist is resolved and no byte is
//     counted in flight.
//   - No schedule hangs: each runs under a watchdog that dumps every
//     goroutine and fails.
//   - No goroutine outlives the storages' Close (go.uber.org/goleak, checked
//     after each group of schedules, and after each schedule when one
//     worker runs).
//   - Objects left on the backend at the end are referenced by a confirmed
//     handle or by the handle of a checkpoint still pending when its writer
//     closed (the checkpoint owner's), or were left by an injected fault (a
//     put that stored and reported an error, a failed delete). A
//     fault-free schedule leaves nothing else.
//
// Run it with go test ./sim -run TestSimulation (a short fixed set of
// seeds), or with -sim.seeds=N -sim.start=S for long runs (make sim
// SEEDS=N). A failing seed prints the command that replays it, with -race
// when the test binary has the race detector. The race detector's reports
// name no seed: with it, the test announces each group of seeds as it
// starts (one seed per group with -sim.workers=1), and a report belongs to
// the group announced last before it.
package sim
