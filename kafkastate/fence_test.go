package kafkastate

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/dstlgo/dstl/dstltest"
)

// stallConfig is testConfig with a group that drops a silent member after
// half a second, and the shortest grace it allows (3 s).
func stallConfig(brokers []string) Config[counts] {
	cfg := testConfig(brokers)
	cfg.CommitTimeout, cfg.Grace, cfg.CollectInterval = 500*time.Millisecond, 3*time.Second, 300*time.Millisecond
	cfg.ClientOptions = []kgo.Opt{
		kgo.SessionTimeout(500 * time.Millisecond), kgo.HeartbeatInterval(50 * time.Millisecond),
		kgo.RebalanceTimeout(time.Second), kgo.TransactionTimeout(time.Second), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}
	return cfg
}

// TestStalledCommitterFenced: a process's offset commit, naming the
// record it put, is held on its way to the broker for longer than the
// grace (and the heartbeats behind it on its connection with it, as a
// network partition or a paused broker connection would hold them). The
// group drops the process; the other process takes its partitions,
// restores them from the records committed before, and applies the
// deletion rule, which deletes the held commit's record (and objects that
// only it names). When the commit lands, Kafka refuses it: no committed
// offset names the deleted record, every committed record restores, and
// the counts are exact.
func TestStalledCommitterFenced(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	cfg := stallConfig(brokers)
	prod.produce(t, 120)
	a := startSvc(t, newStorage(t, b), cfg)
	a.waitFor(t, func(st Stats) bool { return st.Records >= 120 && st.Commits > 0 })
	bb := startSvc(t, newStorage(t, b), cfg)
	bb.waitFor(t, func(st Stats) bool { return st.Commits > 0 })

	// A's next offset commit is held at the broker.
	var (
		mu      sync.Mutex
		armed   = true
		stalled string // the record the held commit names
	)
	held, release := make(chan struct{}), make(chan struct{})
	memberA, _ := a.svc.cl.GroupMetadata()
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		oc := req.(*kmsg.OffsetCommitRequest)
		mu.Lock()
		hold := armed && oc.MemberID == memberA && len(oc.Topics) > 0 && len(oc.Topics[0].Partitions) > 0
		if hold {
			armed = false
			if m := oc.Topics[0].Partitions[0].Metadata; m != nil {
				stalled, _ = recordOf("job/", *m)
			}
		}
		mu.Unlock()
		if hold {
			close(held)
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	prod.produce(t, 120) // new objects for the held commit's record
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no commit of A held")
	}
	mu.Lock()
	name := stalled
	mu.Unlock()
	data, ok := b.ObjectBytes(name)
	if !ok {
		t.Fatalf("the held commit's record %q is not there", name)
	}
	rec, err := decodeRecord("job/", name, testTopic, data)
	if err != nil {
		t.Fatal(err)
	}
	// B takes every partition and deletes the held commit's record (and
	// objects that nothing else keeps), once older than the grace.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := b.ObjectBytes(name); !ok {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, ok := b.ObjectBytes(name); ok {
		t.Fatalf("the held commit's record was not deleted in 30 s (B's stats %+v)", bb.svc.Stats())
	}
	deleted := 0
	for _, o := range rec.objects() {
		if _, ok := b.ObjectBytes(o); !ok {
			deleted++
		}
	}
	t.Logf("the held commit's record deleted, and %d of its %d objects; B %+v", deleted, len(rec.objects()), bb.svc.Stats())
	close(release) // the commit lands
	a.waitFor(t, func(st Stats) bool { return st.Lost > 0 })
	prod.produce(t, 120)
	waitCommitted(t, brokers, 30*time.Second)
	for _, r := range []*running{a, bb} {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pos, err := fetchPositions(t.Context(), cl, testGroup, testTopic, "job/", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	for p, at := range pos {
		if at.record == name {
			t.Errorf("partition %d: committed with the held commit's record", p)
		}
	}
	checkFinal(t, b, cfg, prod.want) // restores every committed record
}

// TestStaleCheckpointRestores: the partitions start with no committed
// offset and every record put fails for longer than half the grace, while
// the logs go up: the first checkpoint that can be put would name objects
// older than half the grace that no committed record keeps (the deletion
// rule may delete them before its commit lands). The process does not
// commit it: it drops every partition's state and restores each from the
// group's position (here: empty, from the earliest offset), and the
// counts are exact.
func TestStaleCheckpointRestores(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	cfg := stallConfig(brokers)
	failing := errors.New("injected")
	b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
		if op == dstltest.OpPut && strings.Contains(name, "/_records/") {
			return dstltest.Fault{Err: failing}
		}
		return dstltest.Fault{}
	})
	prod.produce(t, 120)
	r := startSvc(t, newStorage(t, b), cfg)
	r.waitFor(t, func(st Stats) bool { return st.Records >= 120 && st.CheckpointFailures > 0 })
	time.Sleep(cfg.Grace/2 + 500*time.Millisecond)
	b.SetFault(nil)
	r.waitFor(t, func(st Stats) bool { return st.Fenced > 0 && st.Commits > 0 })
	fenced := r.eventsOf(EventFenced)
	if !errors.Is(fenced[0].Err, errStalled) {
		t.Errorf("fenced: %v, want errStalled", fenced[0].Err)
	}
	prod.produce(t, 60)
	waitCommitted(t, brokers, 30*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := r.svc.Stats().Records; n < 240 {
		t.Errorf("%d records processed, want the 120 first ones twice (restored empty) and the 60 others", n)
	}
	checkFinal(t, b, cfg, prod.want)
}

// TestTransactionOutcomeUnknown: a transaction's EndTxn is held at the
// broker past the commit's timeout, so that the process does not learn
// its outcome. A new producer of the id ends it, and the group's stable
// offsets say whether it committed: aborted (the output stays pending and
// goes in the next transaction), committed (the output is dropped), or,
// when Kafka cannot be asked, unknown (the process drops its partitions'
// state and restores it from the group's position). The output read with
// read_committed is exact in each case.
func TestTransactionOutcomeUnknown(t *testing.T) {
	for _, outcome := range []string{"aborted", "committed", "unknown"} {
		t.Run(outcome, func(t *testing.T) {
			c := newCluster(t, kfake.SeedTopics(3, outTopic))
			brokers := c.ListenAddrs()
			b := dstltest.NewBackend()
			prod := newProducer(t, brokers)
			cfg := testConfig(brokers)
			cfg.Process, cfg.TransactionalID = countAndEmit, "tx"
			prod.produce(t, 60)
			r := startSvc(t, newStorage(t, b), cfg)
			r.waitFor(t, func(st Stats) bool { return st.Records >= 60 && st.Commits > 0 })

			var mu sync.Mutex
			armed, heldOne, inits := true, false, 0
			release := make(chan struct{})
			c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				mu.Lock()
				hold := armed && req.(*kmsg.EndTxnRequest).Commit
				armed = armed && !hold
				heldOne = heldOne || hold
				mu.Unlock()
				if hold {
					c.SleepControl(func() { <-release })
				}
				return nil, nil, false
			})
			c.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				mu.Lock()
				after := heldOne
				if after {
					inits++
				}
				n := inits
				mu.Unlock()
				switch {
				case !after:
				case outcome == "aborted" && n == 1:
					// The new producer aborts the held transaction, then
					// its EndTxn goes on, fenced.
					defer close(release)
				case outcome == "committed" && n == 1:
					// The held EndTxn commits first.
					close(release)
					c.SleepControl(func() { time.Sleep(200 * time.Millisecond) })
				case outcome == "unknown" && n == 1:
					// Kafka cannot be asked: the outcome stays unknown.
					close(release)
					resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
					resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
					return resp, nil, true
				}
				return nil, nil, false
			})
			prod.produce(t, 60)
			r.waitFor(t, func(Stats) bool {
				mu.Lock()
				defer mu.Unlock()
				return inits > 0 // the process settles the held transaction
			})
			prod.produce(t, 60)
			waitCommitted(t, brokers, 30*time.Second)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			st := r.svc.Stats()
			t.Logf("%s: stats %+v", outcome, st)
			for _, e := range append(r.eventsOf(EventCheckpointFailed), r.eventsOf(EventFenced)...) {
				t.Logf("%s: %s: %v", outcome, e.Kind, e.Err)
			}
			if outcome == "unknown" && st.Fenced == 0 {
				t.Error("the outcome unknown, the process did not restore its partitions")
			}
			checkFinal(t, b, cfg, prod.want)
			if diff := compareCounts(prod.want, readOutput(t, brokers)); diff != "" {
				t.Errorf("output (read_committed) differs from the input's words:\n%s", diff)
			}
		})
	}
}
