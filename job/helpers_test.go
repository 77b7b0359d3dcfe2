package job_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/job"
	"github.com/dstlgo/dstl/statestore"
)

var quiet = slog.New(slog.DiscardHandler)

const maxP = 16

// wordsOf holds, for each key group, the words whose keys fall in it.
var wordsOf = func() [][]string {
	out := make([][]string, maxP)
	for i := 0; ; i++ {
		w := "w" + strconv.Itoa(i)
		kg := statestore.KeyGroup([]byte(w), maxP)
		if len(out[kg]) < 5 {
			out[kg] = append(out[kg], w)
		}
		full := true
		for _, ws := range out {
			full = full && len(ws) == 5
		}
		if full {
			return out
		}
	}
}()

// word returns the word of record offset of key group kg's input.
func word(kg int, offset int64) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%d/%d", kg, offset)
	ws := wordsOf[kg]
	return ws[int(h.Sum32())%len(ws)]
}

// expected returns the counts of key groups kgs' input up to offsets.
func expected(offsets map[int]int64) map[string]int64 {
	out := map[string]int64{}
	for kg, n := range offsets {
		for o := range n {
			out[word(kg, o)]++
		}
	}
	return out
}

func offsetKey(kg int) string { return fmt.Sprintf("offset-%02d", kg) }

// counter is a task that counts the words of its key groups' inputs, one
// record of each key group per Process call, and checks at its first call
// that the restored counts are those of the restored offsets.
type counter struct {
	in      *job.Instance
	counts  *statestore.KeyValueStore[string, int64]
	offsets map[int]int64
	checked bool
	limit   int64 // stop reading a key group at this offset; 0: no limit
	taking  int64 // the checkpoint Metadata was last asked for
	errs    chan<- error
	done    *sync.Map // instance -> checkpoints completed
}

func openCounter(limit int64, errs chan<- error, done *sync.Map) job.Open {
	return func(ctx context.Context, in *job.Instance) (job.Task, error) {
		counts, err := statestore.NewKeyValueStore("counts", in.Log(), statestore.StringCodec{}, statestore.Int64Codec{},
			statestore.WithKeyGroups(in.KeyGroups), statestore.WithMaxParallelism(in.MaxParallelism))
		if err != nil {
			return nil, err
		}
		if err := in.Register(counts); err != nil {
			return nil, err
		}
		c := &counter{in: in, counts: counts, offsets: map[int]int64{}, limit: limit, errs: errs, done: done}
		for kg := in.KeyGroups.Start; kg <= in.KeyGroups.End; kg++ {
			c.offsets[kg] = 0
		}
		for _, meta := range in.Restored {
			for kg := in.KeyGroups.Start; kg <= in.KeyGroups.End; kg++ {
				if v, ok := meta[offsetKey(kg)]; ok {
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						return nil, err
					}
					c.offsets[kg] = n
				}
			}
		}
		return c, nil
	}
}

func (c *counter) Process(ctx context.Context) (int, error) {
	if !c.checked {
		c.checked = true
		want := expected(c.offsets)
		got := map[string]int64{}
		for w, n := range c.counts.All() {
			got[w] = n
		}
		if !maps.Equal(got, want) {
			c.errs <- fmt.Errorf("instance %d of generation %d restored counts %v, want %v (offsets %v)", c.in.Index, c.in.Generation, got, want, c.offsets)
		}
	}
	n := 0
	for kg, o := range c.offsets {
		if c.limit > 0 && o >= c.limit {
			continue
		}
		w := word(kg, o)
		v, _, err := c.counts.Get(w)
		if err != nil {
			return n, err
		}
		if err := c.counts.Put(w, v+1); err != nil {
			return n, err
		}
		c.offsets[kg] = o + 1
		n++
	}
	return n, nil
}

func (c *counter) Metadata(n int64) map[string]string {
	if n <= c.taking {
		c.errs <- fmt.Errorf("instance %d: Metadata of checkpoint %d after that of %d", c.in.Index, n, c.taking)
	}
	c.taking = n
	meta := map[string]string{}
	for kg, o := range c.offsets {
		meta[offsetKey(kg)] = strconv.FormatInt(o, 10)
	}
	return meta
}

func (c *counter) Complete(ctx context.Context, n int64) error {
	if c.done != nil {
		c.done.Store(c.in.Index, n)
	}
	return nil
}

// process runs one process of a counting job until its context ends.
type process struct {
	cancel context.CancelFunc
	done   chan error
	events chan job.Event
}

// startProcess starts process proc of a job of p instances in q
// processes, counting.
func startProcess(t *testing.T, b backends.Backend, p, q, proc int, interval time.Duration, errs chan<- error, change func(*job.Config, *catalog.Config)) *process {
	t.Helper()
	dcfg := dstl.DefaultConfig("memory")
	dcfg.JobID = "count"
	dcfg.BatchPersistDelay = time.Millisecond
	storage, err := dstl.New(dcfg, b, dstl.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	ccfg := catalog.Config{JobID: "count", Instances: p, Processes: q, Process: proc, MaxParallelism: maxP, Grace: time.Hour, Logger: quiet}
	jcfg := job.Config{Interval: interval, Logger: quiet, State: statestore.Config{MaterializeInterval: -1, MaterializeSize: 4 << 10}}
	if change != nil {
		change(&jcfg, &ccfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr := &process{cancel: cancel, done: make(chan error, 1), events: make(chan job.Event, 10000)}
	jcfg.OnEvent = func(e job.Event) {
		select {
		case pr.events <- e:
		default:
		}
	}
	coord := job.NewCatalog(b, ccfg, interval, collect.Options{})
	go func() {
		err := job.Run(ctx, storage, coord, jcfg, openCounter(0, errs, nil))
		storage.Close()
		pr.done <- err
	}()
	return pr
}

// stop stops the process and returns Run's error.
func (pr *process) stop(t *testing.T) error {
	t.Helper()
	pr.cancel()
	select {
	case err := <-pr.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not stop")
		return nil
	}
}

// waitEvent waits for an event that ok accepts.
func (pr *process) waitEvent(t *testing.T, what string, ok func(job.Event) bool) job.Event {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e := <-pr.events:
			if ok(e) {
				return e
			}
		case err := <-pr.done:
			t.Fatalf("the process ended waiting for %s: %v", what, err)
		case <-timeout:
			t.Fatalf("no %s", what)
		}
	}
}
