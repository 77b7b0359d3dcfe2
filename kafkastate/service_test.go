package kafkastate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/dstltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValidate(t *testing.T) {
	ok := testConfig([]string{"127.0.0.1:9092"})
	for _, tc := range []struct {
		name  string
		edit  func(*Config[counts])
		field string
	}{
		{"ok", func(*Config[counts]) {}, ""},
		{"no brokers", func(c *Config[counts]) { c.Brokers = nil }, "Brokers"},
		{"empty broker", func(c *Config[counts]) { c.Brokers = []string{""} }, "Brokers"},
		{"no topic", func(c *Config[counts]) { c.Topic = "" }, "Topic"},
		{"no group", func(c *Config[counts]) { c.Group = "" }, "Group"},
		{"no state", func(c *Config[counts]) { c.NewState = nil }, "NewState"},
		{"no process", func(c *Config[counts]) { c.Process = nil }, "Process"},
		{"negative interval", func(c *Config[counts]) { c.CheckpointInterval = -1 }, "CheckpointInterval"},
		{"short grace", func(c *Config[counts]) { c.Grace = 3 * c.CheckpointInterval }, "Grace"},
		{"default grace, long interval", func(c *Config[counts]) { c.Grace, c.CheckpointInterval = 0, 3*time.Minute }, "Grace"},
		{"negative restore attempts", func(c *Config[counts]) { c.RestoreAttempts = -1 }, "RestoreAttempts"},
		{"negative commit timeout", func(c *Config[counts]) { c.CommitTimeout = -1 }, "CommitTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.field != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field+":")):
				t.Fatalf("Validate: %v, want an ErrConfig naming %s", err, tc.field)
			}
		})
	}
}

// TestExactAcrossRebalances runs several members of one group, each with a
// storage of its own as a process would, joining, leaving gracefully and
// crashing while records arrive; the final checkpoints hold exactly the
// input's counts at the partitions' ends.
func TestExactAcrossRebalances(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	cfg := testConfig(brokers)

	prod.produce(t, 300)
	a := startSvc(t, newStorage(t, b), cfg)
	time.Sleep(500 * time.Millisecond)
	prod.produce(t, 300)
	bb := startSvc(t, newStorage(t, b), cfg)
	time.Sleep(700 * time.Millisecond)
	prod.produce(t, 300)
	cc := startSvc(t, newStorage(t, b), cfg)
	time.Sleep(700 * time.Millisecond)
	a.crash(t) // no last checkpoint: its partitions go back to their latest
	prod.produce(t, 300)
	time.Sleep(700 * time.Millisecond)
	d := startSvc(t, newStorage(t, b), cfg)
	prod.produce(t, 300)
	time.Sleep(500 * time.Millisecond)
	if err := bb.stop(t); err != nil {
		t.Fatal(err)
	}
	prod.produce(t, 300)
	waitCommitted(t, brokers, 30*time.Second)
	for _, r := range []*running{cc, d} {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	restores := 0
	for _, r := range []*running{a, bb, cc, d} {
		restores += len(r.eventsOf(EventRestored))
	}
	if restores == 0 {
		t.Error("no partition was restored from a checkpoint")
	}
	t.Logf("restores %d, stats a %+v, d %+v", restores, a.svc.Stats(), d.svc.Stats())
	checkFinal(t, b, cfg, prod.want)
}

// TestResumeFromCheckpoint stops a service gracefully and starts another:
// it resumes every partition at the offset of its last checkpoint and
// processes only the records after it.
func TestResumeFromCheckpoint(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	cfg := testConfig(brokers)

	prod.produce(t, 240)
	first := startSvc(t, newStorage(t, b), cfg)
	waitCommitted(t, brokers, 20*time.Second)
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := first.svc.Stats().Records; n != 240 {
		t.Fatalf("first service processed %d records, want 240", n)
	}
	half := endOffsets(t, brokers)
	prod.produce(t, 120)
	second := startSvc(t, newStorage(t, b), cfg)
	waitCommitted(t, brokers, 20*time.Second)
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
	restored := second.eventsOf(EventRestored)
	if len(restored) != testPartitions {
		t.Fatalf("%d partitions restored, want %d: %+v", len(restored), testPartitions, restored)
	}
	for _, e := range restored {
		if e.Offset != half[e.Partition] {
			t.Errorf("partition %d resumed at %d, want its checkpoint's %d", e.Partition, e.Offset, half[e.Partition])
		}
	}
	if n := second.svc.Stats().Records; n != 120 {
		t.Errorf("second service processed %d records, want the 120 after the checkpoint", n)
	}
	checkFinal(t, b, cfg, prod.want)
}

// TestRejectedRecordStops: with no dead-letter function, a rejected record
// stops the service with an error naming topic, partition and offset, and
// the state keeps nothing of it or after it.
func TestRejectedRecordStops(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	prod.produce(t, 60)
	prod.produceRaw(t, 2, "he bad was", false)
	cfg := testConfig(brokers)
	r := startSvc(t, newStorage(t, b), cfg)
	ends := endOffsets(t, brokers)
	var err error
	select {
	case err = <-r.done:
		close(r.done)
	case <-time.After(30 * time.Second):
		t.Fatal("the service did not stop at the rejected record")
	}
	var re *RecordError
	if !errors.As(err, &re) || re.Topic != testTopic || re.Partition != 2 || re.Offset != ends[2]-1 {
		t.Fatalf("Run: %v, want a RecordError at %s/2 offset %d", err, testTopic, ends[2]-1)
	}
	if !strings.Contains(err.Error(), "words/2 at offset") {
		t.Errorf("error %q does not name the record", err)
	}
}

// TestDeadLetter: a dead-letter function takes the rejected records, which
// are skipped and counted once; a crash and a restore neither count a word
// twice nor lose one.
func TestDeadLetter(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	var dead atomic.Int64
	cfg := testConfig(brokers)
	cfg.DeadLetter = func(_ context.Context, r *kgo.Record, err error) error {
		dead.Add(1)
		return nil
	}
	prod.produce(t, 100)
	for p := range int32(testPartitions) {
		prod.produceRaw(t, p, "bad bad", false)
	}
	r := startSvc(t, newStorage(t, b), cfg)
	waitCommitted(t, brokers, 20*time.Second)
	r.crash(t)
	prod.produce(t, 100)
	r2 := startSvc(t, newStorage(t, b), cfg)
	waitCommitted(t, brokers, 20*time.Second)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := r.svc.Stats().Skipped + r2.svc.Stats().Skipped; n != testPartitions {
		t.Errorf("%d records skipped, want %d", n, testPartitions)
	}
	if dead.Load() != testPartitions {
		t.Errorf("dead-letter function called %d times, want %d", dead.Load(), testPartitions)
	}
	checkFinal(t, b, cfg, prod.want)
}

// TestCheckpointFailures: the object store fails every put for a while
// (the partitions' snapshots fail), then only the records' puts (the
// process's commits fail); checkpoints fail and are tried again,
// processing goes on, and a crash after the store is back restores exact
// counts.
func TestCheckpointFailures(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	cfg := testConfig(brokers)
	prod.produce(t, 100)
	r := startSvc(t, newStorage(t, b), cfg)
	waitCommitted(t, brokers, 20*time.Second)
	failing := errors.New("injected")
	for _, what := range []string{"every put", "record puts"} {
		b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
			if op == dstltest.OpPut && (what == "every put" || strings.Contains(name, "/_records/")) {
				return dstltest.Fault{Err: failing}
			}
			return dstltest.Fault{}
		})
		before := len(r.eventsOf(EventCheckpointFailed))
		prod.produce(t, 100)
		deadline := time.Now().Add(10 * time.Second)
		for len(r.eventsOf(EventCheckpointFailed)) < before+3 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		failed := r.eventsOf(EventCheckpointFailed)[before:]
		if len(failed) == 0 || !errors.Is(failed[0].Err, failing) {
			t.Fatalf("%s failing: checkpoint failures %+v, want some with the injected error", what, failed)
		}
		if what == "record puts" && failed[0].Partition != -1 {
			t.Errorf("a record put failing: %+v, want the process's commit (partition -1)", failed[0])
		}
		b.SetFault(nil)
		prod.produce(t, 100)
		waitCommitted(t, brokers, 20*time.Second)
	}
	r.crash(t)
	prod.produce(t, 50)
	r2 := startSvc(t, newStorage(t, b), cfg)
	waitCommitted(t, brokers, 20*time.Second)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("stats %+v", r.svc.Stats())
	checkFinal(t, b, cfg, prod.want)
}

// TestBrokerRestart closes the cluster (its data on disk) while the
// service runs and restarts it on the same port: the service goes on, and
// the counts are exact.
func TestBrokerRestart(t *testing.T) {
	dir := t.TempDir()
	c, err := kfakeWithData(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	brokers := c.ListenAddrs()
	port := portOf(t, brokers[0])
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	cfg := testConfig(brokers)
	prod.produce(t, 100)
	r := startSvc(t, newStorage(t, b), cfg)
	waitCommitted(t, brokers, 20*time.Second)
	c.Close()
	time.Sleep(1500 * time.Millisecond) // the service polls a broker that is gone
	c, err = kfakeWithData(dir, port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prod.produce(t, 100)
	waitCommitted(t, brokers, 30*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	checkFinal(t, b, cfg, prod.want)
}

// TestStartRestoresEveryPartition starts services one after the other, each
// in a new group: each must restore (here: first-start) every partition.
// The group's client may be assigned partitions before any other call of
// the service returns, so the partition count must be known first.
func TestStartRestoresEveryPartition(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	for i := range 12 {
		cfg := testConfig(brokers)
		cfg.Group = fmt.Sprintf("start-%d", i)
		r := startSvc(t, newStorage(t, b), cfg)
		r.waitFor(t, func(st Stats) bool { return st.FirstStarts+st.Restores >= testPartitions })
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOnEventNeverConcurrent: Config.OnEvent is documented as never called
// concurrently; a callback that relies on it (no lock) must not race,
// though checkpointAll's goroutines report checkpoints.
func TestOnEventNeverConcurrent(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	prod := newProducer(t, brokers)
	cfg := testConfig(brokers)
	seen := map[EventKind]int{} // no lock: one goroutine, per the godoc
	cfg.OnEvent = func(e Event) { seen[e.Kind]++ }
	s, err := New(newStorage(t, dstltest.NewBackend()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	prod.produce(t, 120)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitCommitted(t, brokers, 20*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestMissingTopic: Run stops with an error that names the topic and keeps
// the brokers' cause.
func TestMissingTopic(t *testing.T) {
	c := newCluster(t)
	cfg := testConfig(c.ListenAddrs())
	cfg.Topic = "absent"
	s, err := New(newStorage(t, dstltest.NewBackend()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = s.Run(ctx)
	if !errors.Is(err, kerr.UnknownTopicOrPartition) || !strings.Contains(fmt.Sprint(err), `"absent"`) {
		t.Errorf("Run: %v, want UNKNOWN_TOPIC_OR_PARTITION naming the topic", err)
	}
}

// TestGraceChecked: Run refuses a grace that is not twice the longest a
// commit can land after its record's put (the session, rebalance and
// transaction timeouts, plus the commit timeout), naming the field.
func TestGraceChecked(t *testing.T) {
	c := newCluster(t)
	for _, tc := range []struct {
		name string
		edit func(*Config[counts])
		ok   bool
	}{
		{"the tests' grace", func(*Config[counts]) {}, true},
		{"below twice the rebalance timeout", func(c *Config[counts]) { c.Grace = 5 * time.Second }, false},
		{"below twice the transaction timeout", func(c *Config[counts]) {
			c.TransactionalID = "tx"
			c.ClientOptions = append(c.ClientOptions, kgo.TransactionTimeout(4*time.Second))
		}, false},
		{"the client's defaults", func(c *Config[counts]) { c.ClientOptions, c.Grace = nil, 0 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(c.ListenAddrs())
			tc.edit(&cfg)
			s, err := New(newStorage(t, dstltest.NewBackend()), cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err = s.Run(ctx)
			if tc.ok != (err == nil) || err != nil && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Grace:")) {
				t.Errorf("Run: %v, want ok %v (or an ErrConfig naming Grace)", err, tc.ok)
			}
		})
	}
}

// TestRebalanceKeepsPartitions: a second member joins a running one and
// the cooperative-sticky balancer moves half the partitions. The first
// member's partitions that stay are never restored again; each revoked one
// takes part in a last checkpoint committed before it goes, and the second
// member resumes it exactly there; the counts are exact.
func TestRebalanceKeepsPartitions(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	cfg := testConfig(brokers)
	prod.produce(t, 300)
	a := startSvc(t, newStorage(t, b), cfg)
	a.waitFor(t, func(st Stats) bool { return st.Records >= 300 })
	prod.produce(t, 300)
	bb := startSvc(t, newStorage(t, b), cfg)
	bb.waitFor(t, func(st Stats) bool { return st.Restores > 0 })
	prod.produce(t, 300)
	waitCommitted(t, brokers, 30*time.Second)
	for _, r := range []*running{a, bb} {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	revoked := map[int32]int64{}
	for _, e := range a.eventsOf(EventRevoked) {
		revoked[e.Partition] = e.Offset
	}
	starts := map[int32]int{}
	for _, e := range append(a.eventsOf(EventFirstStart), a.eventsOf(EventRestored)...) {
		starts[e.Partition]++
	}
	if len(revoked) == 0 || len(revoked) == testPartitions {
		t.Fatalf("%d partitions revoked from the first member, want some: %+v", len(revoked), revoked)
	}
	for p := range int32(testPartitions) {
		if _, ok := revoked[p]; !ok && starts[p] != 1 {
			t.Errorf("partition %d stayed with the first member, which started it %d times", p, starts[p])
		}
	}
	for _, e := range bb.eventsOf(EventRestored) {
		if off, ok := revoked[e.Partition]; ok && e.Offset != off {
			t.Errorf("partition %d revoked at offset %d, resumed at %d", e.Partition, off, e.Offset)
		}
	}
	if n := len(bb.eventsOf(EventRestored)); n != len(revoked) {
		t.Errorf("the second member restored %d partitions, %d were revoked", n, len(revoked))
	}
	if a.svc.Stats().Fenced+bb.svc.Stats().Fenced > 0 {
		t.Errorf("fenced: %d, %d; want none", a.svc.Stats().Fenced, bb.svc.Stats().Fenced)
	}
	checkFinal(t, b, cfg, prod.want)
}
