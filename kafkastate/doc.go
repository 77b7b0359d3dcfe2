// Package kafkastate runs a Kafka consumer-group member whose partitions are
// the unit of work and of state: each assigned partition's state lives in
// state stores (package statestore) whose changes go to the durable
// short-term log, and is checkpointed, with the partition's input offset, to
// the job's checkpoint catalog on the object store (package catalog). A
// restart, a rebalance or a crash resumes every partition exactly where its
// restored state left off: the state is exactly-once. docs/KAFKA.md has the
// design and the guarantees at length.
//
// # Design
//
// The topic's P partitions are the job's P key groups and its P catalog
// instances: partition p is instance p of P, owning key group p, in the
// catalog's Independent mode (each instance's latest part is its latest
// checkpoint). Inside a partition, its stores form one operator of one key
// group (maximum parallelism 1, see StoreOptions), so every key of the
// partition is the partition's whatever partitioner the producers used.
// Each partition has its own statestore.Checkpointer; all partitions of a
// process share one dstl.Storage, so their changes are uploaded together.
//
// On assignment (kgo's cooperative-sticky balancer, with
// BlockRebalanceOnPoll so that callbacks never run while records are being
// processed), a partition joins the catalog as its instance
// (catalog.Join), restores the part its generation restores, and the
// consumer is positioned at the offset that part holds (Part.Metadata) —
// never at the group's committed offset, except on the job's first start
// (generation 1, see below). Every Config.CheckpointInterval, each
// partition that processed records (or took the group's offset on the
// job's first start) takes a checkpoint (SnapshotState) and
// commits its part, with its offset, to the catalog (Member.Commit); the
// checkpoints of all partitions run at once. The offsets are then also
// committed to the consumer group (in the transactional mode, by the
// output's transactions), for the group's tools (lag): the
// service itself never reads them back once the job has a checkpoint. On
// revocation a partition checkpoints and is released; a lost partition
// (the member left the group) is released without a checkpoint.
//
// # Fencing
//
// A partition taken by another process is fenced by the catalog: the new
// owner's Join finds the slot held (the old owner's claim) and starts a
// newer generation, which restores each partition's latest part as its
// listing saw it. A part committed after that listing (a late commit of the
// old owner, a zombie's) is never restored; its committer learns at its
// commit's listing that it is fenced (catalog.ErrFenced). A fenced member,
// whichever partition it holds, drops its in-memory state, rejoins the
// latest generation (Member.Rejoin), restores the part that generation
// restores and seeks its consumer there: records it processed since are
// processed again, into the restored state. A member whose slot another
// process holds (catalog.ErrReplaced), or whose output's transactional
// producer another process fenced, releases the partition until Kafka
// assigns it again (after a few checkpoint intervals it joins again, which
// fences the other, if the group's current assignment, asked of the
// group's coordinator, gives the partition to this member).
//
// # Guarantees
//
//   - State: exactly-once. Every restored state is that of the input up to
//     the offset stored beside it, and the input is read again from that
//     offset, after a crash, a graceful stop, a rebalance, a partition
//     moved while its old owner still commits, a zombie, a broker that goes
//     away, and a checkpoint that fails.
//   - Side effects of ProcessFunc outside the state (calls to other
//     services, the DeadLetterFunc): at-least-once; records after the last
//     checkpoint are processed again after a failure.
//   - Rejected records: with no DeadLetterFunc, Run stops with a
//     *RecordError naming topic, partition and offset, and the partition's
//     offset stays before the record (a restart meets it again); with one,
//     the record is skipped and its skip is part of the checkpointed
//     offset.
//   - Output (Partition.Produce) with Config.TransactionalID: exactly-once
//     for readers with isolation read_committed, provided ProcessFunc is
//     deterministic (see Output below). Without: at-least-once.
//   - The group's committed offsets trail the checkpoints (they are written
//     after them); they start a partition only while the job's catalog is
//     in its first generation, where no process of the job held the
//     partition before (offsets of a consumer the job replaces). Later, a
//     partition with no checkpoint starts at the earliest offset.
//
// # Output
//
// Without transactions, Partition.Produce produces at once, and the
// producer is flushed before each checkpoint commits: output of the
// records a checkpoint covers is in Kafka before the checkpoint is, and
// records read again after a failure produce theirs again (at least once).
//
// With Config.TransactionalID, a partition's output is kept in its state
// (an internal store) until the checkpoint that covers it is committed to
// the catalog; then a transaction of the partition's own transactional
// producer (id TransactionalID-TOPIC-PARTITION) produces it and commits
// the checkpoint's offset to the consumer group, and the output is
// dropped from the state. The group's committed offset thus marks which
// output Kafka has. On restore the partition's new producer fences the
// previous owner's (aborting its open transaction), and the group's stable
// committed offset c decides, record by record (each pending output record
// keeps the offset of the input record that produced it; the pending
// output may span several transactions): the output of the input below c
// is in a committed transaction and is dropped, the rest is produced now,
// in a transaction with the restored offset; and as records before c are
// read again, their output is dropped (the restored state is the one that
// produced it, so a deterministic ProcessFunc produces the same). A
// transaction that fails is tried again after the next checkpoint; one
// whose outcome is unknown is settled by the same comparison; one whose
// producer another process fenced releases the partition, whose producer
// is not made again. A checkpoint with no pending output commits no
// offset, which the rule allows (nothing to produce or drop). In this
// mode the service commits no other offsets to the group.
//
// The number of partitions of the topic is the job's: adding partitions
// to the topic of a running job is not supported.
package kafkastate
