package kafkastate

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
)

// commitGroupOffsets commits offsets of the test topic to the test group
// from outside it (the group is empty), each partition with its metadata.
func commitGroupOffsets(t *testing.T, brokers []string, at map[int32]int64, meta map[int32]string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var offs kadm.Offsets
	for p, o := range at {
		offs.Add(kadm.Offset{Topic: testTopic, Partition: p, At: o, LeaderEpoch: -1, Metadata: meta[p]})
	}
	resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), testGroup, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// putRecord puts a record of the job with the state of partitions parts,
// empty, at offsets at; it returns its name.
func putRecord(t *testing.T, b backends.Backend, at map[int32]int64) string {
	t.Helper()
	h := statestore.CheckpointHandle{CheckpointID: 7, Operator: "kafka-" + testTopic + "-0", KeyGroups: partitionKeyGroups, MaxParallelism: 1}
	state, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r := &record{Topic: testTopic, Group: testGroup, Checkpoint: 7, HoldFrom: 8, Created: time.Now()}
	for p := range int32(testPartitions) {
		if o, ok := at[p]; ok {
			r.Partitions = append(r.Partitions, recordPartition{Partition: p, Offset: o, State: state})
		}
	}
	name, err := objname.NewRecord("job/", 7)
	if err != nil {
		t.Fatal(err)
	}
	data, err := encodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Put(context.Background(), name, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestRestorePaths: what a newly assigned partition starts from, by what
// the group's committed offset and its metadata say:
//
//   - no offset: an empty state, from the earliest offset;
//   - an offset with no metadata, or a consumer's that is not a record's
//     (another consumer's offsets, replaced by the job): an empty state at
//     that offset;
//   - metadata naming a record: the record's state of the partition, at
//     the offset (TestResumeFromCheckpoint checks the restored state);
//   - metadata naming a record that is missing, or damaged, or that holds
//     no state of the partition, or another job's: Run stops with an error
//     naming the record (backends.ErrNotFound, ErrDamaged).
func TestRestorePaths(t *testing.T) {
	ends := func(brokers []string) map[int32]int64 { return endOffsets(t, brokers) }
	for _, tc := range []struct {
		name string
		// set commits the group's offsets (and puts records), and returns
		// the offsets the partitions must start at (-1: the earliest) and
		// how many of the input's records they then process.
		set     func(t *testing.T, b *dstltest.Backend, brokers []string) (map[int32]int64, int64)
		wantErr error
		errHas  string
	}{
		{"no offset", func(t *testing.T, b *dstltest.Backend, brokers []string) (map[int32]int64, int64) {
			return map[int32]int64{0: -1, 1: -1, 2: -1, 3: -1, 4: -1, 5: -1}, 60
		}, nil, ""},
		{"another consumer's offsets", func(t *testing.T, b *dstltest.Backend, brokers []string) (map[int32]int64, int64) {
			e := ends(brokers)
			commitGroupOffsets(t, brokers, e, map[int32]string{0: "member-abc", 1: "{\"app\":1}"})
			return e, 0
		}, nil, ""},
		{"a record", func(t *testing.T, b *dstltest.Backend, brokers []string) (map[int32]int64, int64) {
			at := map[int32]int64{0: 3, 1: 3, 2: 3, 3: 3, 4: 3, 5: 3}
			name := putRecord(t, b, at)
			meta := map[int32]string{}
			for p := range at {
				meta[p] = metadataOf(name)
			}
			commitGroupOffsets(t, brokers, at, meta)
			return at, 60 - 6*3
		}, nil, ""},
		{"a missing record", func(t *testing.T, b *dstltest.Backend, brokers []string) (map[int32]int64, int64) {
			name, _ := objname.NewRecord("job/", 5)
			commitGroupOffsets(t, brokers, map[int32]int64{2: 4}, map[int32]string{2: metadataOf(name)})
			return nil, 0
		}, backends.ErrNotFound, "_records/"},
		{"a damaged record", func(t *testing.T, b *dstltest.Backend, brokers []string) (map[int32]int64, int64) {
			name := putRecord(t, b, map[int32]int64{2: 4})
			data, _ := b.ObjectBytes(name)
			data = bytes.Clone(data)
			data[len(data)/2] ^= 1
			b.SetObjectBytes(name, data)
			commitGroupOffsets(t, brokers, map[int32]int64{2: 4}, map[int32]string{2: metadataOf(name)})
			return nil, 0
		}, ErrDamaged, "checksum"},
		{"a record without the partition", func(t *testing.T, b *dstltest.Backend, brokers []string) (map[int32]int64, int64) {
			name := putRecord(t, b, map[int32]int64{1: 4})
			commitGroupOffsets(t, brokers, map[int32]int64{2: 4}, map[int32]string{2: metadataOf(name)})
			return nil, 0
		}, ErrDamaged, "no state of partition 2"},
		{"a record at another offset", func(t *testing.T, b *dstltest.Backend, brokers []string) (map[int32]int64, int64) {
			name := putRecord(t, b, map[int32]int64{2: 3})
			commitGroupOffsets(t, brokers, map[int32]int64{2: 4}, map[int32]string{2: metadataOf(name)})
			return nil, 0
		}, ErrDamaged, "committed at 4"},
		{"another job's record", func(t *testing.T, b *dstltest.Backend, brokers []string) (map[int32]int64, int64) {
			name, _ := objname.NewRecord("other-job/", 5)
			commitGroupOffsets(t, brokers, map[int32]int64{2: 4}, map[int32]string{2: metadataOf(name)})
			return nil, 0
		}, ErrDamaged, "not a record of the job"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			brokers := c.ListenAddrs()
			b := dstltest.NewBackend()
			prod := newProducer(t, brokers)
			for p := range int32(testPartitions) {
				for range 10 {
					prod.produceRaw(t, p, "the of and", false)
				}
			}
			want, records := tc.set(t, b, brokers)
			cfg := testConfig(brokers)
			r := startSvc(t, newStorage(t, b), cfg)
			if tc.wantErr != nil {
				var err error
				select {
				case err = <-r.done:
					close(r.done)
				case <-time.After(30 * time.Second):
					t.Fatal("Run goes on")
				}
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("Run: %v, want %v with %q", err, tc.wantErr, tc.errHas)
				}
				return
			}
			r.waitFor(t, func(st Stats) bool { return st.FirstStarts+st.Restores >= testPartitions && st.Records >= records })
			time.Sleep(300 * time.Millisecond)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			for _, e := range append(r.eventsOf(EventFirstStart), r.eventsOf(EventRestored)...) {
				if e.Offset != want[e.Partition] {
					t.Errorf("partition %d started at %d (%s), want %d", e.Partition, e.Offset, e.Kind, want[e.Partition])
				}
			}
			if n := r.svc.Stats().Records; n != records {
				t.Errorf("%d records processed, want %d", n, records)
			}
		})
	}
}

// TestRestoreWaitsForStableOffsets: a transaction holds the group's
// offset of a partition pending (a process killed between its offset
// commit and the transaction's end, say) for 3 s: the restore waits until
// the offsets are stable, and starts at the offset the transaction
// committed.
func TestRestoreWaitsForStableOffsets(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	prod.produce(t, 60)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("other"), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Topic: testTopic, Partition: 0, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	id, epoch, err := tx.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "other", id, epoch, testGroup
	if resp, err := add.RequestWith(ctx, tx); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("add offsets: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch, commit.Generation = "other", testGroup, id, epoch, -1
	_, topicID, err := partitionCount(ctx, tx, testTopic)
	if err != nil {
		t.Fatal(err)
	}
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic, ct.TopicID = testTopic, topicID
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = 0, 5, -1
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp, err := commit.RequestWith(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range cresp.Topics {
		for _, cp := range ct.Partitions {
			if err := kerr.ErrorForCode(cp.ErrorCode); err != nil {
				t.Fatalf("txn offset commit: %v", err)
			}
		}
	}
	r := startSvc(t, newStorage(t, b), testConfig(brokers))
	ended := make(chan error, 1)
	var early int
	go func() {
		time.Sleep(3 * time.Second)
		early = len(r.eventsOf(EventFirstStart)) + len(r.eventsOf(EventRestored))
		ended <- tx.EndTransaction(ctx, kgo.TryCommit)
	}()
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if early > 0 {
		t.Errorf("%d partitions started while the group's offsets were unstable", early)
	}
	r.waitFor(t, func(st Stats) bool { return st.FirstStarts >= testPartitions })
	for _, e := range r.eventsOf(EventFirstStart) {
		if e.Partition == 0 && e.Offset != 5 {
			t.Errorf("partition 0 started at %d, want 5, the transaction's", e.Offset)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestRecordEncoding: a record decodes back whole; a damaged one, one
// under another name's checkpoint or of another topic does not, with an
// error wrapping ErrDamaged that names it.
func TestRecordEncoding(t *testing.T) {
	r := &record{Topic: "t", Group: "g", Checkpoint: 42, HoldFrom: 40, Member: "m", Generation: 3, Created: time.Unix(1, 0).UTC(),
		Partitions: []recordPartition{{Partition: 1, Offset: 10, State: []byte("s1"), Objects: []string{"job/a.dstl"}}, {Partition: 4, Offset: 0, State: []byte("s4")}}}
	data, err := encodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := objname.NewRecord("job/", 42)
	got, err := decodeRecord("job/", name, "t", data)
	if err != nil {
		t.Fatal(err)
	}
	if got.partition(4) == nil || got.partition(1).Offset != 10 || got.partition(2) != nil || got.objects()[0] != "job/a.dstl" || got.Checkpoint != 42 {
		t.Errorf("decoded %+v", got)
	}
	other, _ := objname.NewRecord("job/", 43)
	flipped := bytes.Clone(data)
	flipped[10] ^= 1
	for _, tc := range []struct {
		name, topic string
		data        []byte
		has         string
	}{
		{name, "t", data[:6], "too short"},
		{name, "t", append([]byte("XXXX"), data[4:]...), "magic"},
		{name, "t", flipped, "checksum"},
		{other, "t", data, "checkpoint 42 under the name of checkpoint 43"},
		{name, "u", data, `topic "t", not "u"`},
		{"job/x.rec", "t", data, "not a record name"},
	} {
		if _, err := decodeRecord("job/", tc.name, tc.topic, tc.data); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), tc.has) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("decode %q: %v, want ErrDamaged with %q", tc.has, err, tc.has)
		}
	}
	for _, meta := range []string{"", "member-1", "dstl-record"} {
		if n, err := recordOf("job/", meta); n != "" || err != nil {
			t.Errorf("recordOf(%q) = %q, %v; want none", meta, n, err)
		}
	}
	if n, err := recordOf("job/", metadataOf(name)); n != name || err != nil {
		t.Errorf("recordOf(its metadata) = %q, %v", n, err)
	}
}

// TestRecordsCacheKeepsWhatTheRuleReads: the cache of records keeps a
// record as long as a run of the deletion rule counts it young. The rule
// counts a record young by its name's time or by its modification time,
// which is later by the time a checkpoint takes to put its logs; a record
// learnt within the grace stays cached however old its name, and the rule
// reads each record once.
func TestRecordsCacheKeepsWhatTheRuleReads(t *testing.T) {
	ctx := context.Background()
	const grace = 3 * time.Second
	b := dstltest.NewBackend()
	rs := newRecords(b, "job/", "input")
	now := time.Now()
	// A record named 50 ms past the grace, put and learnt just now.
	named := now.Add(-grace - 50*time.Millisecond)
	n := checkpointOf(named)
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint16(id[4:6], uint16(named.UnixMilli())) // a UUIDv7's first 48 bits are its milliseconds
	binary.BigEndian.PutUint32(id[0:4], uint32(named.UnixMilli()>>16))
	name, err := objname.Format("job/", objname.Name{Kind: objname.Record, ID: id, Checkpoint: n})
	if err != nil {
		t.Fatal(err)
	}
	if got := objname.Parse("job/", name).Time(); got.UnixMilli() != named.UnixMilli() {
		t.Fatalf("the name's time is %v, want %v", got, named)
	}
	data, err := encodeRecord(&record{Topic: "input", Checkpoint: n, Partitions: []recordPartition{{Partition: 0, Offset: 1, State: []byte("s")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, name, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		what string
		do   func()
	}{
		{"retain", func() { rs.retain(nil, now.Add(-grace)) }},
		{"forget after a listing that returned it", func() { rs.forget(map[string]bool{name: true}, now) }},
		{"forget after a listing begun before it was learnt", func() { rs.forget(nil, now.Add(-time.Second)) }},
	} {
		if _, err := rs.read(ctx, name); err != nil {
			t.Fatal(err)
		}
		step.do()
		if _, err := rs.read(ctx, name); err != nil {
			t.Fatal(err)
		}
		if got := rs.gets; got != 1 {
			t.Fatalf("after %s: %d GETs of the record, want 1", step.what, got)
		}
	}
	// Forgotten once learnt before the grace, or not listed by a listing
	// begun after it was learnt (deleted).
	rs.retain(nil, time.Now().Add(time.Second))
	if _, err := rs.read(ctx, name); err != nil {
		t.Fatal(err)
	}
	if got := rs.gets; got != 2 {
		t.Fatalf("after retain past the grace: %d GETs, want 2", got)
	}
	rs.forget(nil, time.Now().Add(time.Second))
	if _, err := rs.read(ctx, name); err != nil {
		t.Fatal(err)
	}
	if got := rs.gets; got != 3 {
		t.Fatalf("after a listing that did not return it: %d GETs, want 3", got)
	}
}
