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
// (package catalog) of one job over the same backend, which then also
// fails gets and listings, and keys its faults by object name. A schedule
// draws from its seed the instance count P (1 to 5), the mode (aligned or
// independent), Retain (1 to 3), the number of key groups, a fault
// profile, call delays and how stormy it is, then runs a few hundred
// steps. Its processes are goroutines, but only one runs at a time: every
// backend call parks the caller, and at each step the scheduler chooses,
// from the seed alone, which parked process goes on, which idle one starts
// an operation (join, rejoin after ErrFenced, commit of its part of the
// next checkpoint, refresh, plan with drop and collection), or which event
// happens: a checkpoint trigger, a kill (the process stops for good, in
// the middle of an operation or not), a stall (it pauses across other
// processes' steps, then goes on: a zombie), a restart (a new process for
// a slot; the old one is killed, stalled or left running; sometimes it
// restores a retained checkpoint by number), a rescale (every process
// replaced by P' new ones), or time passing. A seed's schedule is thus the
// same at every run (TestCatalogSameSeedSameRun), and -sim.trace prints
// all of it.
//
// Each process keeps a value per key group of its range; a part's state
// encodes them, and its objects name data objects the process put itself
// (new ones at each checkpoint, older ones until it compacts). The leader
// of a generation, and sometimes another member, plans, drops the
// catalog's objects of the plan and collects: it deletes the data objects
// not in Plan.Keep and older than the grace, by the simulated clock.
// Processes keep to what the grace rests on: an operation, with the stalls
// and delays inside it, takes less than a quarter of the grace, and a
// process uploads anew an object that it uploaded longer ago than that and
// that no part of its own names yet. Between operations a stall has no
// bound.
//
// The simulation records every change of the store and decodes every
// record, so that each check asks what a given listing saw. Invariants
// checked on every schedule:
//
//  1. No restore of a fenced part: each new generation's record restores
//     parts of a checkpoint complete in the previous generation when its
//     starter listed the catalog (in the independent mode, each instance's
//     latest part), or parts the previous generation restored, never a
//     part stored after its generation was fenced; and it restores what
//     the documentation says (the latest complete checkpoint, or the one
//     asked for) as of that listing.
//  2. A restored state is exactly that of a complete checkpoint: no two
//     parts of one generation among those a generation restores hold a
//     key group (an older part is superseded where a newer one holds the
//     key group), and in the aligned mode every key group is held; each
//     member restores every key group of its range from exactly one part,
//     the one its generation restores it from, whose state and objects
//     are those its committer committed, and takes the value committed.
//  3. No deletion of a referenced object: after every drop and collection
//     (and at the end), every part of the live generation's retained and
//     pending checkpoints, and every part it restored while a member may
//     still restore it, is stored with every data object it names; a plan
//     keeps them; a new generation's record names only stored parts; a
//     Join never meets a missing part, and at the end fresh processes
//     join, with faults off, and restore.
//  4. No hang: each schedule runs under the watchdog and a bound on each
//     operation's calls, and no goroutine is left (goleak, as above).
//
// Other checks hold the members to the rest of their documentation: one
// process per slot of a generation that is not fenced, ErrFenced exactly
// when a newer generation was listed, ErrReplaced only when another
// process committed the part, the status a listing gives, a successful
// Commit's part stored as committed, a Plan only by the live
// generation, and after a final collection past the grace nothing left but
// what the plan keeps. TestCatalogChecks breaks the protocol on purpose
// (a collector that ignores the plan, parts that hold other states, a
// generation that restores the newest parts) to show the checks catch it.
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
