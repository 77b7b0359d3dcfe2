// Package kafkastate runs a Kafka consumer-group member whose partitions
// are the unit of work and of state. Each checkpoint of a process puts one
// record of its partitions' state handles on the object store, and commits
// the partitions' offsets to the group with metadata naming that record. A
// restart, a rebalance or a crash resumes every partition from the record
// its committed offset names, so the state is exactly-once.
//
// Each assigned partition's state lives in state stores (package
// statestore) whose changes go to the durable short-term log. Kafka is the
// job's catalog. docs/KAFKA.md has the design, the fencing argument and
// the guarantees at length.
//
// # Design
//
// The partitions run on package job's runner (job.Run), the group being
// its coordinator: partition p is instance p, its stores one key group of
// their own (maximum parallelism 1, see StoreOptions), so every key of
// the partition is the partition's whatever partitioner the producers
// used. All partitions of a process share one dstl.Storage, so their
// changes are uploaded together.
//
// The group assigns the partitions (cooperative-sticky balancer). A newly
// assigned partition restores the record its committed offset names (one
// offset fetch for the new partitions, one GET a record), or starts with
// an empty state at the committed offset (no record named), or at the
// earliest offset (no offset). A revoked partition takes part in a last
// checkpoint, committed before its revocation returns; a lost one (the
// member's session ended) is dropped; the partitions that stay keep
// running.
//
// Every CheckpointInterval the process takes a checkpoint of all its
// partitions and commits it: one record put
// (PREFIX/_records/UUIDv7.cN.rec), then one OffsetCommit, carrying the
// member's generation, of every partition's next offset with metadata
// "dstl-record:" and the record's name; with output in the transactional
// mode, one transaction that produces the output and commits the offsets
// (TxnOffsetCommit, with the generation). The checkpoint is complete when
// the commit succeeded.
//
// # Fencing and deletion
//
// Kafka fences a member whose session ended or whose generation is stale:
// its commits are refused, so a stalled or partitioned process never
// commits a record once its partitions moved. The process that holds
// partition 0 applies the deletion rule every CollectInterval: it keeps
// the committed records and those younger than the grace, with what they
// name, and deletes the rest once older than the grace (package collect).
// The grace must exceed twice the longest a commit Kafka accepts can land
// after its record's put (the session, rebalance and transaction
// timeouts, plus CommitTimeout); Run checks it.
//
// # Guarantees
//
//   - State: exactly-once, through crashes, graceful stops, rebalances,
//     lost partitions, zombies, broker restarts and failing checkpoints.
//   - Side effects of ProcessFunc outside the state (calls to other
//     services, the DeadLetterFunc): at-least-once; records after the last
//     checkpoint are processed again after a failure.
//   - Rejected records: with no DeadLetterFunc, Run stops with a
//     *RecordError naming topic, partition and offset, and the partition's
//     offset stays before the record; with one, the record is skipped and
//     its skip is part of the checkpointed offset.
//   - Output (Partition.Produce) with Config.TransactionalID: exactly-once
//     for readers with isolation read_committed, provided ProcessFunc is
//     deterministic. Without: at-least-once.
//
// The number of partitions of the topic is the job's: adding partitions
// to the topic of a running job is not supported.
package kafkastate
