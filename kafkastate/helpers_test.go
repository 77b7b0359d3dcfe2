package kafkastate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/statestore"
)

const (
	testTopic      = "words"
	testGroup      = "counters"
	testPartitions = 6
)

// counts is the state of a partition in the tests: a word count.
type counts = *statestore.KeyValueStore[string, int64]

func newCounts(_ PartitionInfo, log *dstl.Writer) (counts, []statestore.Store, error) {
	kv, err := statestore.NewKeyValueStore("counts", log, statestore.StringCodec{}, statestore.Int64Codec{}, StoreOptions()...)
	if err != nil {
		return nil, nil, err
	}
	return kv, []statestore.Store{kv}, nil
}

// countWords is the tests' ProcessFunc: it rejects a record with the word
// "bad" before changing anything.
func countWords(_ context.Context, r *kgo.Record, p *Partition[counts]) error {
	words := strings.Fields(string(r.Value))
	for _, w := range words {
		if w == "bad" {
			return errors.New("bad word")
		}
	}
	for _, w := range words {
		n, _, err := p.State.Get(w)
		if err != nil {
			return err
		}
		if err := p.State.Put(w, n+1); err != nil {
			return err
		}
	}
	return nil
}

// newCluster starts a kfake cluster with the test topic.
func newCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(testPartitions, testTopic), kfake.GroupMinSessionTimeout(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newStorage returns a process's storage of the job on b.
func newStorage(t testing.TB, b backends.Backend) *dstl.Storage {
	t.Helper()
	cfg := dstl.DefaultConfig("mem://kafkastate")
	cfg.JobID = "job"
	cfg.BatchPersistDelay = dstl.NoBatchDelay
	s, err := dstl.New(cfg, b, dstl.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testConfig is the tests' configuration: checkpoints every 100 ms, a
// group whose session, rebalance and transaction timeouts are short, and
// the shortest grace they allow (twice the longest of them plus the
// commit timeout: 6 s).
func testConfig(brokers []string) Config[counts] {
	return Config[counts]{
		Brokers: brokers, Topic: testTopic, Group: testGroup,
		NewState: newCounts, Process: countWords,
		CheckpointInterval: 100 * time.Millisecond, Grace: 6 * time.Second, CollectInterval: 500 * time.Millisecond,
		CommitTimeout: time.Second, ClientOptions: fastGroup(), Logger: testLogger,
	}
}

// fastGroup makes the group rebalance quickly.
func fastGroup() []kgo.Opt {
	return []kgo.Opt{
		kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.RebalanceTimeout(2 * time.Second), kgo.TransactionTimeout(2 * time.Second), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}
}

var vocabulary = strings.Fields("the of and to in is was he for it with as his on be at by had are but from or have an they")

// producer produces records of words and counts them independently.
type producer struct {
	cl   *kgo.Client
	rng  *rand.Rand
	want map[string]int64
	n    int
}

func newProducer(t testing.TB, brokers []string) *producer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(testTopic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &producer{cl: cl, rng: rand.New(rand.NewPCG(1, 2)), want: map[string]int64{}}
}

// produce produces n records of 1 to 5 words.
func (p *producer) produce(t testing.TB, n int) {
	t.Helper()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		words := make([]string, 1+p.rng.IntN(5))
		for j := range words {
			words[j] = vocabulary[p.rng.IntN(len(vocabulary))]
			p.want[words[j]]++
		}
		rs[i] = &kgo.Record{Value: []byte(strings.Join(words, " "))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p.n += n
}

// produceRaw produces one record with this value, counted as its words.
func (p *producer) produceRaw(t testing.TB, partition int32, value string, count bool) {
	t.Helper()
	if count {
		for _, w := range strings.Fields(value) {
			p.want[w]++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.cl.OptValue(kgo.SeedBrokers).([]string)...), kgo.DefaultProduceTopic(testTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: partition, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// running is a service running in its goroutine.
type running struct {
	svc    *Service[counts]
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	events []Event
}

func startSvc(t testing.TB, storage *dstl.Storage, cfg Config[counts]) *running {
	t.Helper()
	r := &running{done: make(chan error, 1)}
	cfg.OnEvent = func(e Event) {
		r.mu.Lock()
		r.events = append(r.events, e)
		r.mu.Unlock()
	}
	svc, err := New(storage, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.svc = svc
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- svc.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop stops the service gracefully (or, crash set, as if killed) and
// returns Run's error.
func (r *running) stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("service did not stop")
		return nil
	}
}

// crash stops the service as a killed process would: no checkpoint (it
// leaves the group, which a killed process does not: the group need not
// wait for its session to end).
func (r *running) crash(t testing.TB) {
	r.svc.crash.Store(true)
	if err := r.stop(t); err != nil {
		t.Fatalf("crashed service: %v", err)
	}
}

// waitFor waits until cond holds of the service's stats; it fails if the
// service stops or a minute passes.
func (r *running) waitFor(t testing.TB, cond func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond(r.svc.Stats()) {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("the service stopped: %v (stats %+v)", err, r.svc.Stats())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out; stats %+v", r.svc.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

func (r *running) eventsOf(kind EventKind) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var es []Event
	for _, e := range r.events {
		if e.Kind == kind {
			es = append(es, e)
		}
	}
	return es
}

// waitCommitted waits until the group's committed offsets reach the ends
// of every partition.
func waitCommitted(t testing.TB, brokers []string, timeout time.Duration) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ends, err1 := adm.ListEndOffsets(ctx, testTopic)
		committed, err2 := adm.FetchOffsets(ctx, testGroup)
		cancel()
		if err1 == nil && err2 == nil {
			behind := 0
			ends.Each(func(o kadm.ListedOffset) {
				c, ok := committed.Lookup(o.Topic, o.Partition)
				if !ok || c.At < o.Offset {
					behind++
				}
			})
			if behind == 0 {
				return
			}
			last = fmt.Sprintf("%d partition(s) behind", behind)
		} else {
			last = fmt.Sprint(err1, err2)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the group did not catch up in %v: %s", timeout, last)
}

// endOffsets returns the end offset of every partition.
func endOffsets(t testing.TB, brokers []string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, testTopic)
	if err != nil {
		t.Fatal(err)
	}
	m := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { m[o.Partition] = o.Offset })
	return m
}

// checkFinal loads the committed records and checks that every partition
// is checkpointed at its end offset and that the counts are want.
func checkFinal(t testing.TB, b backends.Backend, cfg Config[counts], want map[string]int64) {
	t.Helper()
	brokers := cfg.Brokers
	storage := newStorage(t, b)
	states, release, err := Load(context.Background(), storage, cfg, testPartitions)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ends := endOffsets(t, brokers)
	got := map[string]int64{}
	for _, st := range states {
		if st.Offset != ends[st.Partition.Partition] {
			t.Errorf("partition %d: checkpoint at offset %d, want the end %d", st.Partition.Partition, st.Offset, ends[st.Partition.Partition])
		}
		for w, n := range st.State.All() {
			got[w] += n
		}
	}
	if diff := compareCounts(want, got); diff != "" {
		t.Errorf("counts differ from the input's:\n%s", diff)
	}
}

func compareCounts(want, got map[string]int64) string {
	var b strings.Builder
	for w, n := range want {
		if got[w] != n {
			fmt.Fprintf(&b, "%q: %d, want %d\n", w, got[w], n)
		}
	}
	for w, n := range got {
		if _, ok := want[w]; !ok {
			fmt.Fprintf(&b, "%q: %d, want none\n", w, n)
		}
	}
	return b.String()
}

// kindCounter counts a backend's requests by the kind of object they
// name (a list by the kind of its prefix's objects: "records" for the
// records' directory, "prefix" for a job's prefix; with the names it
// returned, "names list ...", and its pages of listPage names, "pages
// list ...").
type kindCounter struct {
	backends.Backend
	prefix string
	mu     sync.Mutex
	counts map[string]int // "put log", "get record", "list records", ...
	byCP   map[int64]int  // record puts by checkpoint
}

func newKindCounter(b backends.Backend, prefix string) *kindCounter {
	return &kindCounter{Backend: b, prefix: prefix, counts: map[string]int{}, byCP: map[int64]int{}}
}

func (k *kindCounter) count(op, name string) {
	n := objname.Parse(k.prefix, name)
	what := n.Kind.String()
	k.mu.Lock()
	defer k.mu.Unlock()
	if op == "put" && n.Kind == objname.Record {
		k.byCP[n.Checkpoint]++
	}
	k.counts[op+" "+what]++
}

func (k *kindCounter) Put(ctx context.Context, name string, body io.ReaderAt, size int64) error {
	k.count("put", name)
	return k.Backend.Put(ctx, name, body, size)
}

func (k *kindCounter) Get(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	k.count("get", name)
	return k.Backend.Get(ctx, name, offset, length)
}

func (k *kindCounter) Delete(ctx context.Context, name string) error {
	k.count("delete", name)
	return k.Backend.Delete(ctx, name)
}

func (k *kindCounter) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	what := "prefix"
	if prefix == objname.RecordPrefix(k.prefix) {
		what = "records"
	}
	names := 0
	err := k.Backend.List(ctx, prefix, func(oi backends.ObjectInfo) error {
		names++
		return fn(oi)
	})
	k.mu.Lock()
	k.counts["list "+what]++
	k.counts["names list "+what] += names
	k.counts["pages list "+what] += max(1, (names+listPage-1)/listPage)
	k.mu.Unlock()
	return err
}

// listPage is the names a page of a listing holds, as S3 and GCS return
// them.
const listPage = 1000

// Unwrap returns the counted backend.
func (k *kindCounter) Unwrap() backends.Backend { return k.Backend }

// snapshot returns the counts so far.
func (k *kindCounter) snapshot() (map[string]int, map[int64]int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.counts), maps.Clone(k.byCP)
}

// kfakeWithData starts a cluster that keeps its data in dir, on port (0:
// any); the topic is created on the first start.
func kfakeWithData(dir string, port int) (*kfake.Cluster, error) {
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.DataDir(dir), kfake.GroupMinSessionTimeout(100 * time.Millisecond)}
	if port > 0 {
		opts = append(opts, kfake.Ports(port))
	} else {
		opts = append(opts, kfake.SeedTopics(testPartitions, testTopic))
	}
	return kfake.NewCluster(opts...)
}

func portOf(t testing.TB, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// testLogger discards, unless KAFKASTATE_TEST_LOG is set.
var testLogger = func() *slog.Logger {
	if os.Getenv("KAFKASTATE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}()
