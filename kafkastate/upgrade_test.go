package kafkastate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/internal/catalogv1"
	"github.com/dstlgo/dstl/statestore"
)

// oldPartition is a partition as the release before records ran it
// (kafkastate at commit 9ff1d42): instance p of P of the job's catalog of
// the first layout (independent mode, key group p of P), its state in
// stores of a checkpointer of operator kafka-TOPIC-p (one key group),
// each checkpoint committed as a part whose metadata holds the topic, the
// partition and the next offset. In the transactional mode its state
// also held the pending output, in the store "_kafkastate_output".
type oldPartition struct {
	p        int32
	m        *catalogv1.Member
	cp       *statestore.Checkpointer
	kv       counts
	out      *statestore.KeyValueStore[uint64, oldOutRecord] // the transactional mode's
	next     int64                                           // the next offset to process
	n        int64                                           // the next checkpoint
	notified int64
}

// oldOutRecord is a record of pending output as the release before
// records kept it in the store "_kafkastate_output".
type oldOutRecord struct {
	Input     int64             `json:"input"`
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition,omitempty"`
	Key       []byte            `json:"key,omitempty"`
	Value     []byte            `json:"value,omitempty"`
	Headers   map[string][]byte `json:"headers,omitempty"`
}

// oldCatalogConfig is partition p's catalog configuration in the release
// before records.
func oldCatalogConfig(p int32, partitions int) catalogv1.Config {
	return catalogv1.Config{JobID: "job", Instances: partitions, Index: int(p), MaxParallelism: partitions,
		Mode: catalogv1.Independent, Grace: 6 * time.Second, Owner: fmt.Sprintf("old-%d", p)}
}

// newOldPartition joins partition p to the job's first-layout catalog and
// makes its stores on storage, as the release before records did on a
// first start.
func newOldPartition(t *testing.T, storage *dstl.Storage, p int32, partitions int, transactional bool) *oldPartition {
	t.Helper()
	ctx := context.Background()
	m, err := catalogv1.Join(ctx, storage.Backend(), oldCatalogConfig(p, partitions))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := statestore.NewCheckpointer(storage, statestore.Config{Operator: fmt.Sprintf("kafka-%s-%d", testTopic, p),
		KeyGroups: partitionKeyGroups, MaxParallelism: 1, MaterializeInterval: -1, MaterializeSize: -1, KeepSnapshots: true, Logger: testLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Close() })
	kv, stores, err := newCounts(PartitionInfo{Topic: testTopic, Partition: p}, cp.Log())
	if err != nil {
		t.Fatal(err)
	}
	op := &oldPartition{p: p, m: m, cp: cp, kv: kv, n: m.Generation().FirstCheckpoint}
	if transactional {
		if op.out, err = statestore.NewKeyValueStore("_kafkastate_output", cp.Log(), statestore.Uint64Codec{}, statestore.JSONCodec[oldOutRecord]{}, StoreOptions()...); err != nil {
			t.Fatal(err)
		}
		stores = append(stores, op.out)
	}
	if err := cp.Register(stores...); err != nil {
		t.Fatal(err)
	}
	if err := cp.InitializeState(ctx, statestore.CheckpointInfo{OperatorID: testTopic, TaskID: int(p)}); err != nil {
		t.Fatal(err)
	}
	return op
}

// process counts the words of the partition's records up to offset upTo
// (exclusive); in the transactional mode each record's output ("out"
// and its value) is kept in the state.
func (op *oldPartition) process(t *testing.T, records []*kgo.Record, upTo int64) {
	t.Helper()
	for _, r := range records {
		if r.Offset < op.next || r.Offset >= upTo {
			continue
		}
		if err := countWords(context.Background(), r, &Partition[counts]{State: op.kv}); err != nil {
			t.Fatal(err)
		}
		if op.out != nil {
			if err := op.out.Put(uint64(r.Offset), oldOutRecord{Input: r.Offset, Topic: "out", Value: r.Value}); err != nil {
				t.Fatal(err)
			}
		}
		op.next = r.Offset + 1
	}
}

// checkpoint commits the partition's checkpoint to the catalog and
// confirms it, as the release before records did; it returns the part's
// objects.
func (op *oldPartition) checkpoint(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	n := op.n
	h, err := op.cp.SnapshotState(ctx, statestore.CheckpointInfo{OperatorID: testTopic, TaskID: int(op.p), CheckpointID: n, LastCompletedCheckpointID: op.notified})
	if err != nil {
		t.Fatal(err)
	}
	state, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{"topic": testTopic, "partition": strconv.Itoa(int(op.p)), "offset": strconv.FormatInt(op.next, 10)}
	if _, err := op.m.Commit(ctx, n, state, h.Objects(), meta); err != nil {
		t.Fatalf("partition %d, commit %d: %v", op.p, n, err)
	}
	if err := op.cp.NotifyCheckpointComplete(ctx, n); err != nil {
		t.Fatal(err)
	}
	op.n, op.notified = n+1, n
	return h.Objects()
}

// dropOutputBelow drops the pending output of the input below c, as the
// release before records did once a transaction of offset c committed.
func (op *oldPartition) dropOutputBelow(t *testing.T, c int64) {
	t.Helper()
	var keys []uint64
	for k, o := range op.out.All() {
		if o.Input < c {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if err := op.out.Delete(k); err != nil {
			t.Fatal(err)
		}
	}
}

// partitionRecords reads partition p of the test topic up to its end.
func partitionRecords(t *testing.T, brokers []string, p int32) []*kgo.Record {
	t.Helper()
	end := endOffsets(t, brokers)[p]
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{testTopic: {p: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for int64(len(out)) < end {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("partition %d: %d records of %d read: %v", p, len(out), end, err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// oldJob writes a job as the release before records left it: partitions
// 0 to 4 of the test topic committed checkpoint 1 at offset 3 and
// checkpoint 2 at offset 6 + p%3 (materialised in between, so that their
// states have snapshots and logs), the group's offsets trail at 3 (the
// release committed them after the catalog, without metadata); partition
// 5 never committed. It returns the old partitions, the offsets of
// their latest parts, and the objects those parts name.
func oldJob(t *testing.T, b backends.Backend, brokers []string, transactional bool) ([]*oldPartition, map[int32]int64, []string) {
	t.Helper()
	storage := newStorage(t, b)
	var ops []*oldPartition
	at := map[int32]int64{}
	committed := map[int32]int64{}
	var objects []string
	for p := range int32(testPartitions) {
		op := newOldPartition(t, storage, p, testPartitions, transactional)
		ops = append(ops, op)
		if p == testPartitions-1 {
			continue
		}
		rs := partitionRecords(t, brokers, p)
		op.process(t, rs, 3)
		op.checkpoint(t)
		if transactional {
			op.dropOutputBelow(t, 3) // the transaction of checkpoint 1 committed
		}
		if err := op.cp.Materialize(context.Background()); err != nil {
			t.Fatal(err)
		}
		op.process(t, rs, 6+int64(p%3))
		objects = append(objects, op.checkpoint(t)...)
		at[p], committed[p] = op.next, 3
	}
	commitGroupOffsets(t, brokers, committed, nil)
	slices.Sort(objects)
	return ops, at, slices.Compact(objects)
}

// TestUpgradeFromFirstLayout: a job checkpointed by the release before
// records (its partitions' checkpoints in the catalog's first layout, the
// group's offsets trailing them) restores every partition from its latest
// part, at the part's offset (also when the group's offset is ahead of
// it), on its first start with this release; a partition with no part
// starts afresh at the group's offset. The counts are then exactly the
// input's.
func TestUpgradeFromFirstLayout(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	prod.produce(t, 60)
	_, at, _ := oldJob(t, b, brokers, false)
	// Partition 2's committed offset is ahead of its part (another
	// consumer's): it resumes at the part's all the same.
	commitGroupOffsets(t, brokers, map[int32]int64{2: at[2] + 2}, nil)

	cfg := testConfig(brokers)
	r := startSvc(t, newStorage(t, b), cfg)
	r.waitFor(t, func(s Stats) bool { return s.Restores+s.FirstStarts == testPartitions })
	restored := map[int32]Event{}
	for _, e := range r.eventsOf(EventRestored) {
		restored[e.Partition] = e
	}
	for p := range int32(testPartitions) {
		e, ok := restored[p]
		switch want, has := at[p]; {
		case has && (!ok || e.Offset != want || e.Checkpoint != 2):
			t.Errorf("partition %d: restored %v (%+v), want at offset %d from the first layout's checkpoint 2", p, ok, e, want)
		case !has && ok:
			t.Errorf("partition %d: restored %+v, want a first start", p, e)
		}
	}
	prod.produce(t, 60)
	waitCommitted(t, brokers, time.Minute)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	checkFinal(t, b, cfg, prod.want)
}

// TestUpgradeFencesTheFirstLayout: once a process of this release
// restored the job from its first-layout catalog, a process of the
// release before records can no longer commit (its commit fails with
// the first layout's ErrFenced), nor join the job again.
func TestUpgradeFencesTheFirstLayout(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	prod.produce(t, 60)
	ops, _, _ := oldJob(t, b, brokers, false)

	cfg := testConfig(brokers)
	r := startSvc(t, newStorage(t, b), cfg)
	r.waitFor(t, func(s Stats) bool { return s.Restores+s.FirstStarts == testPartitions && s.Commits > 0 })

	// The old process of partition 0 still runs: it processes and
	// commits as before.
	old := ops[0]
	old.process(t, partitionRecords(t, brokers, 0), 10)
	h, err := old.cp.SnapshotState(context.Background(), statestore.CheckpointInfo{OperatorID: testTopic, CheckpointID: old.n})
	if err != nil {
		t.Fatal(err)
	}
	state, _ := h.MarshalBinary()
	_, err = old.m.Commit(context.Background(), old.n, state, h.Objects(), map[string]string{"topic": testTopic, "partition": "0", "offset": "10"})
	if !errors.Is(err, catalogv1.ErrFenced) {
		t.Errorf("the old process's commit: %v, want the first layout's ErrFenced", err)
	}
	if m, err := catalogv1.Join(context.Background(), b, oldCatalogConfig(0, testPartitions)); err == nil {
		t.Errorf("an old process joined generation %d of the first layout after the upgrade", m.Generation().Number)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeKeepsFirstLayoutObjects: the deletion rule keeps the
// objects that the first layout's parts name while a partition with a
// part has no record committed, however old; once every such partition
// has one, it deletes them, and the first layout's catalog objects but
// the fence's generation record (which keeps the old release from
// starting again).
func TestUpgradeKeepsFirstLayoutObjects(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	prod.produce(t, 60)
	_, _, objects := oldJob(t, b, brokers, false)
	ctx := context.Background()
	up, err := catalogv1.Fence(ctx, b, "job", "new", time.Now(), catalogv1.Independent, 1, 0)
	if err != nil || up == nil {
		t.Fatalf("Fence: %+v, %v", up, err)
	}
	fence := objname.CatalogGenerationName("job/", up.Fence)
	present := func(names []string) (n int) {
		for _, name := range names {
			if _, ok := b.ObjectBytes(name); ok {
				n++
			}
		}
		return n
	}
	catalogObjects := func() (out []string) {
		for _, o := range b.Objects() {
			if ref := objname.ParseCatalog("job/", o.Name); ref.Version == 1 && ref.Kind != objname.CatalogOther {
				out = append(out, o.Name)
			}
		}
		return out
	}
	// Records committed for partitions 0 to 3: partition 4, whose part
	// is there, has none yet.
	name := putRecord(t, b, map[int32]int64{0: 20, 1: 20, 2: 20, 3: 20, 4: 20, 5: 20})
	meta := map[int32]string{0: metadataOf(name), 1: metadataOf(name), 2: metadataOf(name), 3: metadataOf(name)}
	commitGroupOffsets(t, brokers, map[int32]int64{0: 20, 1: 20, 2: 20, 3: 20}, meta)
	time.Sleep(100 * time.Millisecond)
	ccfg := CollectConfig{Brokers: brokers, Topic: testTopic, Group: testGroup, Grace: 50 * time.Millisecond}
	before := catalogObjects()
	rep, err := Collect(ctx, b, "job", ccfg, collect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := present(objects); n != len(objects) || len(catalogObjects()) != len(before) {
		t.Fatalf("partition 4 has no record: %d of the %d objects its parts name left, %d of %d catalog objects (deleted %d): want all",
			n, len(objects), len(catalogObjects()), len(before), rep.Deleted.Objects)
	}
	// Partition 4 committed a record (partition 5 has no part).
	commitGroupOffsets(t, brokers, map[int32]int64{4: 20}, map[int32]string{4: metadataOf(name)})
	if _, err := Collect(ctx, b, "job", ccfg, collect.Options{}); err != nil {
		t.Fatal(err)
	}
	if n := present(objects); n != 0 {
		t.Errorf("every partition with a part has a record: %d of the %d objects its parts name left, want none", n, len(objects))
	}
	if got := catalogObjects(); !slices.Equal(got, []string{fence}) {
		t.Errorf("the first layout's catalog objects left: %q, want the fence's record %q alone", got, fence)
	}
	// The old release can neither join nor start a generation.
	if m, err := catalogv1.Join(ctx, b, oldCatalogConfig(0, testPartitions)); err == nil {
		t.Errorf("an old process joined generation %d after the collection", m.Generation().Number)
	}
}

// TestUpgradeTransactionalOutput: a job of the release before records in
// the transactional mode kept its pending output in its state (the store
// "_kafkastate_output"); the output of the input below the group's
// committed offset was in Kafka. On the upgrade, each partition restores
// that state and produces the rest of it in its first transaction; a
// restart restores the records checkpointed since, which hold the store
// too. The output read with read_committed then holds each input
// record's output exactly once, and the counts are the input's.
func TestUpgradeTransactionalOutput(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(3, outTopic))
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	prod.produce(t, 60)
	_, at, _ := oldJob(t, b, brokers, true)
	// The old release's transactions of checkpoint 1 produced the output
	// of the input below offset 3, the group's committed offset; those of
	// checkpoint 2 of the odd partitions committed too (their output up to
	// the part's offset, which their states still hold, is in Kafka).
	want := map[string]int64{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	odd := map[int32]int64{}
	for p := range int32(testPartitions) {
		c := int64(3)
		if p%2 == 1 && p < testPartitions-1 {
			c = at[p]
			odd[p] = c
		}
		for _, r := range partitionRecords(t, brokers, p) {
			want[string(r.Value)]++
			if r.Offset < c && p < testPartitions-1 {
				if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: outTopic, Value: r.Value}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	commitGroupOffsets(t, brokers, odd, nil)
	cfg := testConfig(brokers)
	cfg.TransactionalID = "tx"
	cfg.Process = func(ctx context.Context, r *kgo.Record, p *Partition[counts]) error {
		if err := countWords(ctx, r, p); err != nil {
			return err
		}
		p.Produce(&kgo.Record{Topic: outTopic, Value: r.Value})
		return nil
	}
	r := startSvc(t, newStorage(t, b), cfg)
	r.waitFor(t, func(s Stats) bool { return s.Upgrades == testPartitions-1 })
	waitCommitted(t, brokers, time.Minute)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	prod.produce(t, 60)
	for p := range int32(testPartitions) {
		for _, r := range partitionRecords(t, brokers, p) {
			if r.Offset >= 10 {
				want[string(r.Value)]++
			}
		}
	}
	r2 := startSvc(t, newStorage(t, b), cfg)
	waitCommitted(t, brokers, time.Minute)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	if st := r2.svc.Stats(); st.Restores != testPartitions || st.Upgrades != 0 {
		t.Errorf("the restart: %d restores, %d of them from the first layout: want %d from records", st.Restores, st.Upgrades, testPartitions)
	}
	checkFinal(t, b, cfg, prod.want)
	got := map[string]int64{}
	for v, n := range readOutputValues(t, brokers) {
		got[v] = n
	}
	if diff := compareCounts(want, got); diff != "" {
		t.Errorf("output (read_committed) differs from one record per input record:\n%s", diff)
	}
}

// readOutputValues reads the output topic to its end, with isolation
// read_committed, and counts its records by value.
func readOutputValues(t *testing.T, brokers []string) map[string]int64 {
	t.Helper()
	return readOutputBy(t, brokers, func(r *kgo.Record) string { return string(r.Value) })
}
