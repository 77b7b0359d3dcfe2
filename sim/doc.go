// Package sim is a seeded simulation of the engine (package dstl), driven
// only through its public API over the in-memory backend (package
// backends/mem) under the fault-injecting wrapper (package
// backends/faulty), whose faults it draws, of the checkpoint catalog
// (package catalog) over the same backend (see The catalog simulation,
// below), and of the state stores' checkpointer (package statestore),
// disk-backed and in memory (see The state-store simulation).
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
// # The catalog simulation
//
// RunCatalog (TestCatalogSimulation) simulates the checkpoint catalog
// (package catalog, docs/CATALOG.md) of one job over the same backend,
// which then also fails gets and listings and keys its faults by object
// name. A schedule draws from its seed a configuration (1 to 8 instances
// run by as many processes or fewer, each process committing its
// instances' parts in one object; the aligned or the independent mode),
// Retain (1 to 3), the number of key groups, the sweep interval, a fault
// profile (put errors, lost answers: stored, then an error; get, list and
// delete errors), call delays and how stormy it is, then runs 150 to 600
// steps. A quarter of the schedules start from a catalog of the first
// layout: processes of an older release (package internal/catalogv1, whose
// listings omit the second layout's names, as that release's parser did)
// run the job, commit, plan and collect, until, at a step of the seed's,
// processes of the second layout replace them one at a time (a rolling
// upgrade) while the old ones go on or restart; a tenth of the schedules
// damage catalog objects (a bit flipped, truncated, replaced, removed):
// from the first damage on, the rule keeps by listings the damage changed
// (a removed commit makes an older one the latest), so what is stored is
// no longer held to what the truth says the rule keeps (invariants 2 and
// 3), while every restore still is (5).
//
// Its processes are goroutines, but only one runs at a time: every
// backend call parks the caller, and at each step the scheduler chooses,
// from the seed alone, which parked process goes on, which idle one
// starts an operation (join, rejoin after ErrFenced, a commit of its next
// checkpoint after uploading an object for each instance, an upload ahead
// of its next checkpoint, a step of a materialisation, refresh, collect),
// or which event happens: a checkpoint trigger, a kill (in the middle of
// an operation or not), a stall (the process pauses across other
// processes' steps, then goes on: a zombie; a process stalled in a commit,
// its objects uploaded, usually past the grace), a clock jump, a process's
// clock set off the store's, a restart (a new process for a slot; the old
// one is killed, stalled or left running; sometimes it restores a
// checkpoint by number, Config.RestoreFrom), a rescale (another instance
// or process count, now and then another mode), the upgrade's next
// process, a damage. A seed's schedule is thus the same at every run
// (TestCatalogSameSeedSameRun), and -sim.trace prints all of it. The
// calls of a collection's clock probe, whose name is random, draw their
// faults from the schedule's generator.
//
// Each process keeps a value per key group of its instances; a part's
// state encodes them, and its objects name log objects the process put
// itself, each named with the checkpoint it was made for
// (UUIDv7.cN.dstl, its UUID from the simulated clock): the checkpoint
// committed, or the process's next one for an upload ahead of its commit
// (after a restore, the restored one plus one), or, for a
// materialisation's objects, the next checkpoint when it started; its
// commits hold from that checkpoint while it runs (InstanceState.HoldFrom).
// A part refers to the objects it did before, to those uploaded ahead, and
// to a new one, or, after a compaction or at the end of a materialisation,
// to others. The leader (process 0) collects (Member.Collect, package
// collect underneath) at random moments, by the simulated clock, with a
// grace of 10 minutes. A process of the second layout may stall anywhere,
// for any time; one of the first layout keeps to what its grace rests on
// (an operation takes less than a quarter of the grace, and it uploads
// anew an object it uploaded longer ago than that and no part names yet).
//
// The simulation records every change of the store and decodes every
// catalog record strictly (catalog_truth.go), so that each check asks
// what a given listing saw: which checkpoints were complete (a commit of
// every process stored at once) and when, what each generation record
// restores, what members confirmed, what the deletion rule must keep.
// Invariants checked on every schedule:
//
//  1. Every generation record restores what docs/CATALOG.md chooses as of
//     its starter's listing of the generation before (made after that
//     generation's fence): the commits of the latest complete checkpoint,
//     or of the one asked for by number, or what the generation before
//     restored; in the independent mode each process's latest commit or
//     its fallback; after an upgrade, the first layout's choice after its
//     fence. Its first checkpoint is above every checkpoint of that
//     listing. It never restores two parts of one key group, and, for a
//     complete checkpoint of the aligned mode, every key group.
//  2. No rollback: a generation never restores, for any key group, a
//     checkpoint older than one a member (of either layout) confirmed in
//     an earlier generation (Status.Complete returned without an error),
//     unless it was started with RestoreFrom, which resets the bound.
//  3. No complete checkpoint of a generation that has no successor yet,
//     and no restored part, names a data object that was deleted (a
//     process that uploads for checkpoint N, stalls past the grace while
//     collections run, then commits N is among the schedules); after every
//     collection, everything the deletion rule keeps is stored.
//  4. No commit stored after its generation's successor's starter listed
//     it is restored (one stored after the fence, before that listing, may
//     be, as documented, and is counted); a member whose generation's fence
//     was stored before its read of the fence neither joins nor says a
//     checkpoint is complete.
//  5. A damaged or missing object gives an error that names it, never a
//     wrong restore: every member restores, for each instance, exactly the
//     parts its generation's record names for the instance's key groups,
//     with the state, objects and metadata their committer committed.
//  6. The upgrade fences the first layout: no process of the first layout
//     starts a generation after the fence, joins, or is told a checkpoint
//     is complete by a listing made after the fence.
//
// Other checks hold the members to the rest of their documentation: one
// process per slot of a generation that is not fenced; ErrFenced only
// when a read of the operation found the fence; ErrReplaced only when the
// commit stored is not the process's own with the same parts; a status
// only of a complete checkpoint (in the independent mode, of a commit of
// the process's), never going back; a successful Commit's object stored as
// committed; a collection by a process other than the leader makes no
// call; every error names a cause (an injected fault, a fence, a damaged
// object...); a retry of a failed commit with the same parts succeeds
// when the first attempt stored it. No schedule hangs (the watchdog, and
// a bound on each operation's calls), and no goroutine is left (goleak,
// as above). At the end, fresh processes of the latest configuration join
// with faults off and restore; each commits Retain+1 checkpoints, the
// leader last, and learns each checkpoint at the next one; past the
// grace, the leader collects, and what is left is what its plan keeps or
// holds.
// TestCatalogChecks breaks the protocol on purpose (records that restore
// other commits, collectors that ignore the plan or the hold, members
// that never find a fence, forged commits, old processes that miss the
// upgrade's fence) to show that each invariant's check fails.
//
// A schedule that meets one of the defects of package catalog that
// failing tests of that package show (catDefect: a fenced generation's
// fence deleted while a stalled member of it lives; the independent
// mode's fallback that restores a process's key groups from before its
// confirmed commit; the leader's deletion of commits by a decision no read
// of the fence followed) counts it, and ends there but for the fallback,
// after which what members confirmed before no longer bounds what later
// generations restore; -sim.strict makes it fail.
//
// # The state-store simulation
//
// RunState (TestStateSimulation) runs an operator's state stores (a
// key-value, a window and a versioned store) under statestore's
// Checkpointer over the fault backend, which keys the faults of snapshot
// objects and files by their contents. A schedule draws from its seed the
// kind (disk-backed, with Config.Dir, half the time; in memory
// otherwise), the maximum parallelism (1 to 32768) and the job's key
// groups, one or two instances splitting them, a small materialisation
// size and interval (so that background materialisations race with
// checkpoints), KeepSnapshots or not, local recovery or not, the
// retentions, the key space (keys with bytes 0x00 and 0xFF, the empty
// key), and a fault profile (put errors, lost answers, stalls, late
// stores, failed deletes, failed gets; a quarter of the schedules inject
// nothing), then 20 to 60 steps, each from a generator of its own
// derived from (seed, step), so a schedule plans the same steps at every
// run (TestStateSameSeedSamePlan): writes to every instance, late and
// early (puts into expired windows and past the history retention,
// deletions, jumps of the stream time); concurrent writes by up to three
// goroutines per instance on keys of their own, while the checkpointer
// flushes and materialises; explicit materialisations, sometimes while a
// checkpoint completes or aborts; checkpoints (SnapshotState on every
// instance, in the background); completions and aborts, some while the
// uploads run; crashes (every instance closed, maybe while checkpoints
// are under way; new storages and checkpointers on the same backend, on
// the same machines or new ones, restoring the last completed
// checkpoint), a quarter of them rescales (one instance's checkpoint
// restored by two with the key groups split, two merged into one, or
// another split); comparisons of the live stores with the model; pauses.
//
// The model keeps each instance's stores in maps by the rules statestore
// documents (window expiry and the dropped late puts, versions no query
// reaches); a restore into some key groups from some handles yields, in
// the model, the keys of those key groups and the largest stream time.
// Invariants checked for every schedule:
//
//   - Every completed checkpoint, its handles through a binary round trip,
//     restored into a fresh checkpointer over the backend without faults
//     (disk-backed for disk-backed handles, either kind for in-memory
//     ones) for the key groups of a part, part of them, the whole job's
//     (merging the parts) or any, yields exactly the model's state at that
//     checkpoint: every store read whole (in order), its stream times, and
//     point reads (Get, Range, Fetch, GetAsOf, History). Every restore
//     after a crash (with faults, from local copies or not) yields the
//     model too, and so do the live stores when compared.
//   - A restore that fails says why: after a crash, an injected fault; in
//     the fresh checkpointer, where an object that the handles name was
//     first damaged, truncated or removed, ErrSnapshotFormat or
//     ErrNotFound naming the object (a restore that did not need the
//     object must restore exactly). It leaves the stores empty, and
//     SnapshotState and Materialize fail with ErrRestoreFailed.
//   - Every error of SnapshotState, Materialize, the notifications, and
//     every warning the checkpointers log, names an injected fault, a
//     crash or a deadline.
//   - Every object of the last completed checkpoint is on the backend
//     whenever the live stores are compared and before each crash; with
//     KeepSnapshots, no snapshot object or file that a handle named is
//     ever deleted.
//   - At the end, without faults, every instance checkpoints, materialises
//     and checkpoints again, and the checkpoints complete: with
//     KeepSnapshots, every object of every completed checkpoint is on the
//     backend (and some older checkpoints are restored again); without,
//     the backend's snapshot objects and files are those the last
//     checkpoint names, and besides only those an injected fault left
//     (a put that stored and failed, a failed delete) or that the running
//     instances neither wrote nor took back as their own (left by the
//     instances before the last crash, or shared after a rescale).
//   - No hang (the watchdog) and no goroutine left (goleak), as above.
//
// With -sim.trace and -v, a single seed logs its events (steps,
// checkpoints and what their handles name, restores, puts and deletions
// of snapshot objects); a failure about an object lists the events that
// name it.
//
// Run them with go test ./sim -run TestSimulation, -run
// TestCatalogSimulation or -run TestStateSimulation (a short fixed set of
// seeds), or with -sim.seeds=N -sim.start=S for long runs (make sim
// SEEDS=N runs all three). A failing seed prints the command that replays
// it, with -race when the test binary has the race detector. The race detector's reports
// name no seed: with it, the test announces each group of seeds as it
// starts (one seed per group with -sim.workers=1), and a report belongs to
// the group announced last before it.
package sim
