package kafkastate

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/dstlgo/dstl/dstltest"
)

const outTopic = "out"

// countAndEmit counts the words and emits one output record per word.
func countAndEmit(ctx context.Context, r *kgo.Record, p *Partition[counts]) error {
	if err := countWords(ctx, r, p); err != nil {
		return err
	}
	for _, w := range strings.Fields(string(r.Value)) {
		p.Produce(&kgo.Record{Topic: outTopic, Key: []byte(w)})
	}
	return nil
}

// readOutput reads the output topic to its end, with isolation
// read_committed, and counts its records by key.
func readOutput(t *testing.T, brokers []string) map[string]int64 {
	t.Helper()
	return readOutputBy(t, brokers, func(r *kgo.Record) string { return string(r.Key) })
}

// readOutputBy reads the output topic to its end, with isolation
// read_committed, and counts its records by what by returns. It waits up
// to 30 s for the first record (a loaded machine is slow to fetch it),
// then reads until three polls of a second find nothing.
func readOutputBy(t *testing.T, brokers []string, by func(*kgo.Record) string) map[string]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(outTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]int64{}
	first := time.Now().Add(30 * time.Second)
	for idle := 0; idle < 3; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			if len(got) > 0 || time.Now().After(first) {
				idle++
			}
			continue
		}
		idle = 0
		fs.EachRecord(func(r *kgo.Record) { got[by(r)]++ })
	}
	return got
}

// TestTransactionalOutput: with transactions, the output read with
// isolation read_committed holds every word of the input exactly once,
// through a crash (whose open transaction is aborted by the next owner), a
// graceful stop and a second member joining.
func TestTransactionalOutput(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(3, outTopic))
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	cfg := testConfig(brokers)
	cfg.Process = countAndEmit
	cfg.TransactionalID = "tx"

	prod.produce(t, 200)
	r := startSvc(t, newStorage(t, b), cfg)
	waitCommitted(t, brokers, 20*time.Second)
	prod.produce(t, 200)
	time.Sleep(150 * time.Millisecond)
	r.crash(t)
	prod.produce(t, 200)
	r2 := startSvc(t, newStorage(t, b), cfg)
	time.Sleep(300 * time.Millisecond)
	r3 := startSvc(t, newStorage(t, b), cfg)
	prod.produce(t, 200)
	waitCommitted(t, brokers, 30*time.Second)
	for _, x := range []*running{r2, r3} {
		if err := x.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.svc.Stats().TransactionFailures + r2.svc.Stats().TransactionFailures + r3.svc.Stats().TransactionFailures; n > 0 {
		t.Logf("%d transactions failed (and were tried again)", n)
	}
	checkFinal(t, b, cfg, prod.want)
	if diff := compareCounts(prod.want, readOutput(t, brokers)); diff != "" {
		t.Errorf("output (read_committed) differs from the input's words:\n%s", diff)
	}
}

// TestAtLeastOnceOutput: without transactions, no output is lost through
// a crash (some may be produced twice).
func TestAtLeastOnceOutput(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(3, outTopic))
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	cfg := testConfig(brokers)
	cfg.Process = countAndEmit
	prod.produce(t, 200)
	r := startSvc(t, newStorage(t, b), cfg)
	time.Sleep(200 * time.Millisecond)
	r.crash(t)
	prod.produce(t, 200)
	r2 := startSvc(t, newStorage(t, b), cfg)
	waitCommitted(t, brokers, 20*time.Second)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	checkFinal(t, b, cfg, prod.want)
	got := readOutput(t, brokers)
	for w, n := range prod.want {
		if got[w] < n {
			t.Errorf("output of %q: %d records, want at least %d", w, got[w], n)
		}
	}
}

// TestCrashBeforeTransaction: every transaction is refused (EndTxn), so
// no checkpoint commits: the records are put, their output stays pending
// in memory, the offsets stay uncommitted; then the process dies. The next
// owner starts each partition from the group's (empty) position, and the
// output read with read_committed is complete and exact.
func TestCrashBeforeTransaction(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(3, outTopic))
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	cfg := testConfig(brokers)
	cfg.Process = countAndEmit
	cfg.TransactionalID = "tx"
	var refuse atomic.Bool
	refuse.Store(true)
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !refuse.Load() || !req.(*kmsg.EndTxnRequest).Commit {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidTxnState.Code
		return resp, nil, true
	})
	prod.produce(t, 200)
	r := startSvc(t, newStorage(t, b), cfg)
	r.waitFor(t, func(st Stats) bool { return st.Records >= 200 && st.TransactionFailures >= 3 })
	r.crash(t)
	if n := r.svc.Stats().Checkpoints; n != 0 {
		t.Fatalf("%d checkpoints committed, want none (every transaction refused)", n)
	}
	if got := readOutput(t, brokers); len(got) != 0 {
		t.Fatalf("output before the restore: %v, want none (every transaction refused)", got)
	}
	refuse.Store(false)
	prod.produce(t, 100)
	r2 := startSvc(t, newStorage(t, b), cfg)
	waitCommitted(t, brokers, 30*time.Second)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := len(r2.eventsOf(EventFirstStart)); n != testPartitions {
		t.Errorf("%d partitions started afresh, want all %d (nothing was committed)", n, testPartitions)
	}
	checkFinal(t, b, cfg, prod.want)
	if diff := compareCounts(prod.want, readOutput(t, brokers)); diff != "" {
		t.Errorf("output (read_committed) differs from the input's words:\n%s", diff)
	}
}
