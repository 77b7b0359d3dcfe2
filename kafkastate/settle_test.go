package kafkastate

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/dstlgo/dstl/dstltest"
)

// newMember makes a service that holds partition 0 of the test topic,
// joined and restored, outside of any group.
func newMember(t *testing.T, b *dstltest.Backend, cfg Config[counts]) (*Service[counts], *partState[counts]) {
	t.Helper()
	ctx := context.Background()
	s, err := New(newStorage(t, b), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mdcl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	n, id, err := partitionCount(ctx, mdcl, testTopic)
	mdcl.Close()
	if err != nil {
		t.Fatal(err)
	}
	s.partitions, s.topicID, s.parts = n, id, map[int32]*partState[counts]{}
	ps := newPartState(s, 0)
	if err := s.join(ctx, ps); err != nil {
		t.Fatal(err)
	}
	return s, ps
}

// createGroup makes the test group exist, as its members would have.
func createGroup(t *testing.T, brokers []string) {
	t.Helper()
	gcl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer gcl.Close()
	var create kadm.Offsets
	create.Add(kadm.Offset{Topic: testTopic, Partition: 5, At: 0, LeaderEpoch: -1})
	if _, err := kadm.NewClient(gcl).CommitOffsets(context.Background(), testGroup, create); err != nil {
		t.Fatal(err)
	}
}

// TestUnsettledOutputNotDuplicated: a transaction whose outcome the
// client does not learn (its EndTxn is committed by the broker after the
// client gave up) and whose settle cannot reach Kafka leaves its output in
// the state; the next checkpoint commits to the catalog and the process
// dies before settling. The next owner restores that checkpoint and
// compares the group's committed offset with each pending record's input
// offset: it produces only the output of the input from that offset on.
func TestUnsettledOutputNotDuplicated(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, outTopic))
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	cfg := testConfig(brokers)
	cfg.Process = countAndEmit
	cfg.TransactionalID = "tx"
	ctx := context.Background()

	newMember := func() (*Service[counts], *partState[counts]) { return newMember(t, b, cfg) }
	createGroup(t, brokers)
	s, ps := newMember()
	feed := func(from, to int64) {
		for o := from; o < to; o++ {
			if err := s.process(ctx, ps, &kgo.Record{Topic: testTopic, Partition: 0, Offset: o, Value: []byte("w")}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Checkpoint at offset 10: the broker holds its EndTxn until the client
	// gave up, then commits it.
	feed(0, 10)
	release := make(chan struct{})
	var held atomic.Bool
	c.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		held.Store(true)
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	var failInit atomic.Bool
	c.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !failInit.Load() {
			return nil, nil, false
		}
		c.KeepControl()
		r := kmsg.NewPtrInitProducerIDResponse()
		r.ErrorCode = 15 // COORDINATOR_NOT_AVAILABLE: Kafka unreachable for the settle
		return r, nil, true
	})
	failInit.Store(true) // the settle's new producer
	// ... but the transaction's own producer exists already (made on join).
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if err := s.checkpointOne(cctx, ps); err != nil {
		t.Fatalf("checkpoint 1: %v", err)
	}
	cancel()
	if !held.Load() {
		t.Fatal("EndTxn was not held")
	}
	close(release)
	time.Sleep(500 * time.Millisecond)
	if ps.unsettled == nil {
		t.Fatalf("want an unsettled transaction; committedOffset %d, out %d", ps.committedOffset, ps.out.Len())
	}
	committed := func() int64 {
		cl, _ := kgo.NewClient(kgo.SeedBrokers(brokers...))
		defer cl.Close()
		offs, err := kadm.NewClient(cl).FetchOffsets(kadm.RequireStable(ctx), testGroup)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := offs.Lookup(testTopic, 0)
		return o.At
	}
	if c := committed(); c != 10 {
		t.Fatalf("group offset %d, want 10 (the held EndTxn committed)", c)
	}

	// Checkpoint at offset 20 commits to the catalog; Kafka is still
	// unreachable for the settle; the process dies.
	feed(10, 20)
	cctx, cancel = context.WithTimeout(ctx, 2*time.Second)
	if err := s.checkpointOne(cctx, ps); err != nil {
		t.Fatalf("checkpoint 2: %v", err)
	}
	cancel()
	if ps.committedOffset != 20 {
		t.Fatalf("checkpoint 2 not committed: %d", ps.committedOffset)
	}
	ps.close() // killed
	failInit.Store(false)

	// The next owner restores checkpoint 2.
	_, ps2 := newMember()
	defer ps2.close()
	got := readOutput(t, brokers)["w"]
	t.Logf("group offset now %d; output records of \"w\": %d", committed(), got)
	if got != 20 {
		t.Errorf("read_committed output has %d records of the 20 input records' words, want exactly 20", got)
	}
}

// TestFencedProducerReleases: another process made the partition's
// transactional producer (it took the partition over). The partition's
// next transaction fails as fenced: the checkpoint reports
// errProducerFenced (the service releases the partition) and the producer
// is not made again, which would fence the other process in turn.
func TestFencedProducerReleases(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, outTopic))
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	cfg := testConfig(brokers)
	cfg.Process = countAndEmit
	cfg.TransactionalID = "tx"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createGroup(t, brokers)
	s, ps := newMember(t, b, cfg)
	defer ps.close()
	for o := range int64(5) {
		if err := s.process(ctx, ps, &kgo.Record{Topic: testTopic, Partition: 0, Offset: o, Value: []byte("w")}); err != nil {
			t.Fatal(err)
		}
	}
	other, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(s.transactionalID(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, _, err := other.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	err = s.checkpointOne(ctx, ps)
	if !errors.Is(err, errProducerFenced) {
		t.Errorf("checkpoint: %v, want errProducerFenced", err)
	}
	// The other's producer is still the partition's.
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := other.ProduceSync(ctx, &kgo.Record{Topic: outTopic, Key: []byte("other")}).FirstErr(); err != nil {
		t.Fatalf("the other producer, fenced in turn: %v", err)
	}
	if err := other.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("the other producer's commit: %v", err)
	}
	if got := readOutput(t, brokers); got["w"] != 0 || got["other"] != 1 {
		t.Errorf("output %v, want only the other's record", got)
	}
}

// TestOutputFailureNotCheckpointed: when the output of a record cannot be
// kept in the state, the record's other changes are in the state while the
// offset is before it: no checkpoint may commit that state (a restore would
// count the record twice).
func TestOutputFailureNotCheckpointed(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, outTopic))
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	cfg := testConfig(brokers)
	failAt := int64(3)
	cfg.Process = func(ctx context.Context, r *kgo.Record, p *Partition[counts]) error {
		if err := countAndEmit(ctx, r, p); err != nil {
			return err
		}
		if r.Offset == failAt {
			p.ps.outErr = errors.New("output store failed")
		}
		return nil
	}
	cfg.TransactionalID = "tx"
	ctx := context.Background()
	createGroup(t, brokers)
	s, ps := newMember(t, b, cfg)
	defer ps.close()
	var err error
	for o := int64(0); o < 5 && err == nil; o++ {
		err = s.process(ctx, ps, &kgo.Record{Topic: testTopic, Partition: 0, Offset: o, Value: []byte("w")})
	}
	if err == nil || ps.next != failAt {
		t.Fatalf("process: %v, next offset %d; want the output's failure at offset %d", err, ps.next, failAt)
	}
	if err := s.checkpointOne(ctx, ps); err == nil {
		t.Errorf("checkpoint committed at offset %d with the changes of record %d", ps.committedOffset, failAt)
	}
	if ps.committedOffset >= 0 {
		t.Errorf("committed offset %d, want none", ps.committedOffset)
	}
}

// TestUnstableOffsetsWaited: a transaction holds offsets of the group
// pending (here another partition's, which kfake counts for the whole
// group) for longer than the catalog join's retries: the restore's settle
// waits until the offsets are stable instead of failing the join.
func TestUnstableOffsetsWaited(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, outTopic))
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	cfg := testConfig(brokers)
	cfg.Process = countAndEmit
	cfg.TransactionalID = "tx"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createGroup(t, brokers)
	s, ps := newMember(t, b, cfg) // partition 0
	ps.close()
	// Partition 0 has a committed offset (the stable check is of those).
	acl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: testTopic, Partition: 0, At: 0, LeaderEpoch: -1})
	_, err = kadm.NewClient(acl).CommitOffsets(ctx, testGroup, offs)
	acl.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Partition 5's producer: a transaction that commits its offset to the
	// group, left open for 5 s.
	other := newPartState(s, 5)
	if err := s.startOutputClient(ctx, other); err != nil {
		t.Fatal(err)
	}
	defer other.close()
	if err := other.txcl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := other.txcl.ProduceSync(ctx, &kgo.Record{Topic: outTopic, Key: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := s.addOffsets(ctx, other, 7); err != nil {
		t.Fatal(err)
	}
	held := time.Now()
	txcl, ended := other.txcl, make(chan error, 1)
	go func() {
		time.Sleep(5 * time.Second)
		ended <- txcl.EndTransaction(ctx, kgo.TryCommit)
	}()
	_, ps2 := newMember(t, b, cfg) // partition 0 again, settled on restore
	defer ps2.close()
	if d := time.Since(held); d < 4*time.Second {
		t.Errorf("restored after %v, while the group's offsets were unstable", d)
	}
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
}
