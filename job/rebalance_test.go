package job_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/job"
	"github.com/dstlgo/dstl/statestore"
)

// moving is a Coordinator and Rebalancer of processes among which
// instances move within one generation, as a Kafka consumer group's
// partitions do: it keeps each instance's latest committed part, and
// moves an instance from one process to another, revoked (the old owner
// commits it first) or lost (at once).
type moving struct {
	mu        sync.Mutex
	p         int // instances
	owner     map[int]int
	committed map[int]*catalog.Part
	changes   map[int][]*job.Change
	losing    map[int]int       // instance -> the process that lost it, until it learns so
	epochs    map[int]time.Time // each process's clock: the Epoch of its numbering
	failing   bool              // commits fail (their outcome unknown), committing nothing
	problems  []string
}

func newMoving(p int) *moving {
	return &moving{p: p, owner: map[int]int{}, committed: map[int]*catalog.Part{}, changes: map[int][]*job.Change{},
		losing: map[int]int{}, epochs: map[int]time.Time{}}
}

func (m *moving) keyGroups(i int) dstl.KeyGroupRange {
	per := maxP / m.p
	return dstl.KeyGroupRange{Start: i * per, End: (i+1)*per - 1}
}

// assigned returns what instance i restores.
func (m *moving) assigned(i int) job.Assigned {
	as := job.Assigned{Index: i, KeyGroups: m.keyGroups(i), MaxParallelism: maxP}
	if p := m.committed[i]; p != nil {
		as.Restore, as.Restored = []*catalog.Part{p}, p.Checkpoint
	}
	return as
}

// move moves instance i to process to: revoked from its owner (which
// commits it first), or lost.
func (m *moving) move(i, to int, lost bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	from := m.owner[i]
	if lost {
		// Until process from learns it, its commits of i are refused (as
		// Kafka refuses a member's commit once its session expired).
		m.owner[i], m.losing[i] = to, from
		m.changes[from] = append(m.changes[from], &job.Change{Lost: []int{i}})
		m.changes[to] = append(m.changes[to], &job.Change{Added: []job.Assigned{{Index: -1 - i}}})
		return
	}
	m.changes[from] = append(m.changes[from], &job.Change{Revoked: []int{i}, Done: func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.owner[i] = to
		m.changes[to] = append(m.changes[to], &job.Change{Added: []job.Assigned{{Index: -1 - i}}})
	}})
}

// process is the coordinator of one process.
func (m *moving) process(proc int) *movingProcess { return &movingProcess{m: m, proc: proc} }

type movingProcess struct {
	m    *moving
	proc int
}

func (c *movingProcess) Join(ctx context.Context) (*job.Assignment, error) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	a := &job.Assignment{Generation: 1, Epoch: m.epochs[c.proc], FirstCheckpoint: 1, Unit: time.Millisecond}
	for i := range m.p {
		if m.owner[i] == c.proc {
			a.Instances = append(a.Instances, m.assigned(i))
		}
	}
	return a, nil
}

func (c *movingProcess) Rebalance(ctx context.Context) (*job.Change, error) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.changes[c.proc]
	if len(q) == 0 {
		return nil, nil
	}
	ch := q[0]
	m.changes[c.proc] = q[1:]
	for _, i := range ch.Lost {
		delete(m.losing, i)
	}
	for k, as := range ch.Added {
		if as.Index < 0 { // what it restores is read when the change is applied
			ch.Added[k] = m.assigned(-1 - as.Index)
		}
	}
	return ch, nil
}

func (c *movingProcess) Commit(ctx context.Context, n int64, states []catalog.InstanceState) (int64, error) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failing {
		return 0, errors.New("injected: the commit's outcome is unknown")
	}
	for _, st := range states {
		if from, ok := m.losing[st.Instance]; ok && from == c.proc {
			continue // refused
		}
		if m.owner[st.Instance] != c.proc {
			m.problems = append(m.problems, fmt.Sprintf("process %d committed instance %d, which process %d owns", c.proc, st.Instance, m.owner[st.Instance]))
			continue
		}
		if old := m.committed[st.Instance]; old != nil && old.Checkpoint >= n {
			m.problems = append(m.problems, fmt.Sprintf("process %d committed checkpoint %d of instance %d after %d", c.proc, n, st.Instance, old.Checkpoint))
		}
		m.committed[st.Instance] = &catalog.Part{Name: fmt.Sprintf("commit-%d-%d", c.proc, n), Checkpoint: n,
			Instance: st.Instance, KeyGroups: m.keyGroups(st.Instance), State: st.State, Metadata: st.Metadata, Objects: st.Objects}
	}
	return n, nil
}

func (c *movingProcess) Refresh(ctx context.Context) (int64, error) { return 0, nil }
func (c *movingProcess) Collect(ctx context.Context) error          { return nil }

// startMoving starts process proc of a moving job.
func startMoving(t *testing.T, b backends.Backend, m *moving, proc int, interval time.Duration, errs chan<- error) *process {
	t.Helper()
	dcfg := dstl.DefaultConfig("memory")
	dcfg.JobID = "moving"
	dcfg.BatchPersistDelay = 2 * time.Millisecond
	storage, err := dstl.New(dcfg, b, dstl.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	jcfg := job.Config{Interval: interval, Logger: quiet, State: statestore.Config{MaterializeInterval: -1, MaterializeSize: 4 << 10}}
	ctx, cancel := context.WithCancel(context.Background())
	pr := &process{cancel: cancel, done: make(chan error, 1), events: make(chan job.Event, 10000)}
	jcfg.OnEvent = func(e job.Event) {
		select {
		case pr.events <- e:
		default:
		}
	}
	go func() {
		err := job.Run(ctx, storage, m.process(proc), jcfg, openCounter(0, errs, nil))
		storage.Close()
		pr.done <- err
	}()
	return pr
}

// TestRunRebalance: instances move between two running processes without
// a new generation. A revoked instance takes part in one more checkpoint,
// committed before it closes, and its next owner restores exactly that
// one; a lost one closes without a checkpoint and its next owner restores
// its latest committed one; the instances that stay are never restored
// again; the process whose clock runs an hour behind numbers its
// checkpoints above those it restores; every restored state holds the
// counts of its restored input position; and no process commits an
// instance it no longer runs.
func TestRunRebalance(t *testing.T) {
	b := dstltest.NewBackend()
	errs := make(chan error, 100)
	const interval = 30 * time.Millisecond
	m := newMoving(4)
	m.epochs[0] = time.Unix(0, 0)
	m.epochs[1] = time.Unix(0, 0).Add(time.Hour) // its numbers are an hour's milliseconds lower
	for i := range 4 {
		m.owner[i] = 0
	}
	p0 := startMoving(t, b, m, 0, interval, errs)
	p1 := startMoving(t, b, m, 1, interval, errs)
	var events0, events1 []job.Event
	wait := func(pr *process, into *[]job.Event, what string, ok func(job.Event) bool) job.Event {
		t.Helper()
		e := pr.waitEvent(t, what, func(e job.Event) bool {
			*into = append(*into, e)
			return ok(e)
		})
		return e
	}
	completedOf := func(i int) func(job.Event) bool {
		return func(e job.Event) bool { return e.Kind == job.EventCompleted && e.Instance == i }
	}
	for i := range 4 {
		wait(p0, &events0, "a complete checkpoint", completedOf(i))
	}

	// Instance 2 revoked from process 0, to process 1.
	m.move(2, 1, false)
	rev := wait(p0, &events0, "the revoke", func(e job.Event) bool { return e.Kind == job.EventRevoked && e.Instance == 2 })
	var last int64 // the latest checkpoint of instance 2 that process 0 completed
	for _, e := range events0 {
		if e.Kind == job.EventCompleted && e.Instance == 2 {
			last = e.Checkpoint
		}
	}
	restored := wait(p1, &events1, "the restore of instance 2", func(e job.Event) bool { return e.Kind == job.EventRestored && e.Instance == 2 })
	if restored.Checkpoint != last || last == 0 {
		t.Errorf("instance 2 restored checkpoint %d, want the one its revoke completed, %d (revoked at %+v)", restored.Checkpoint, last, rev)
	}
	after := wait(p1, &events1, "a checkpoint of instance 2 after its restore", completedOf(2))
	if after.Checkpoint <= restored.Checkpoint {
		t.Errorf("process 1 completed checkpoint %d of instance 2 after restoring %d", after.Checkpoint, restored.Checkpoint)
	}

	// Instance 3 lost by process 0, to process 1.
	m.move(3, 1, true)
	wait(p0, &events0, "the loss", func(e job.Event) bool { return e.Kind == job.EventLost && e.Instance == 3 })
	wait(p1, &events1, "the restore of instance 3", func(e job.Event) bool { return e.Kind == job.EventRestored && e.Instance == 3 && e.Checkpoint > 0 })
	wait(p1, &events1, "a checkpoint of instance 3", completedOf(3))

	// Instance 2 back to process 0.
	m.move(2, 0, false)
	wait(p1, &events1, "the revoke", func(e job.Event) bool { return e.Kind == job.EventRevoked && e.Instance == 2 })
	wait(p0, &events0, "the restore of instance 2", func(e job.Event) bool { return e.Kind == job.EventRestored && e.Instance == 2 })
	wait(p0, &events0, "a checkpoint of instance 2", completedOf(2))
	for _, p := range []*process{p0, p1} {
		if err := p.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	close(p0.events)
	close(p1.events)
	for e := range p0.events {
		events0 = append(events0, e)
	}
	for e := range p1.events {
		events1 = append(events1, e)
	}
	restores := map[int]int{}
	for _, e := range events0 {
		if e.Kind == job.EventRestored {
			restores[e.Instance]++
		}
	}
	if restores[0] != 1 || restores[1] != 1 || restores[2] != 2 {
		t.Errorf("process 0 restored instances %v times, want 0 and 1 once (they stayed) and 2 twice", restores)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.problems {
		t.Error(p)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// TestRunSnapshotsTogether: the instances of a process take a checkpoint
// together, so that the storage uploads their logs in few objects: 8
// instances, each with changes at every checkpoint, make at most 3 log
// objects per checkpoint.
func TestRunSnapshotsTogether(t *testing.T) {
	b := dstltest.NewBackend()
	errs := make(chan error, 100)
	const instances = 8
	m := newMoving(instances)
	m.epochs[0] = time.Unix(0, 0)
	for i := range instances {
		m.owner[i] = 0
	}
	p := startMoving(t, b, m, 0, 50*time.Millisecond, errs)
	seen := map[int64]int{}
	p.waitEvent(t, "10 checkpoints", func(e job.Event) bool {
		if e.Kind == job.EventCompleted {
			seen[e.Checkpoint]++
		}
		return len(seen) >= 10
	})
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
	logs := map[int64]int{}
	for _, oi := range b.Objects() {
		if n := objname.Parse("moving/", oi.Name); n.Kind == objname.Log {
			logs[n.Checkpoint]++
		}
	}
	var most []int
	for n, k := range logs {
		if seen[n] == instances {
			most = append(most, k)
		}
	}
	slices.Sort(most)
	if len(most) == 0 || most[len(most)/2] > 3 {
		t.Errorf("log objects per checkpoint of %d instances: %v, want at most 3 (the median)", instances, most)
	}
	t.Logf("log objects per checkpoint of %d instances: %v", instances, most)
}

// TestRunAddedWhileCommitsFail: an instance added while the process's
// commits fail (the checkpoints stay pending) is not told of those
// checkpoints when a later commit completes them: it took no part in them.
func TestRunAddedWhileCommitsFail(t *testing.T) {
	b := dstltest.NewBackend()
	errs := make(chan error, 100)
	m := newMoving(2)
	m.epochs[0], m.epochs[1] = time.Unix(0, 0), time.Unix(0, 0)
	m.owner[0], m.owner[1] = 0, 1
	p0 := startMoving(t, b, m, 0, 30*time.Millisecond, errs)
	p1 := startMoving(t, b, m, 1, 30*time.Millisecond, errs)
	p0.waitEvent(t, "a complete checkpoint", func(e job.Event) bool { return e.Kind == job.EventCompleted })
	p1.waitEvent(t, "a complete checkpoint", func(e job.Event) bool { return e.Kind == job.EventCompleted })
	m.mu.Lock()
	m.failing = true
	m.mu.Unlock()
	p0.waitEvent(t, "a failed commit", func(e job.Event) bool { return e.Kind == job.EventCommitFailed })
	p0.waitEvent(t, "another failed commit", func(e job.Event) bool { return e.Kind == job.EventCommitFailed })
	m.move(1, 0, true)
	p0.waitEvent(t, "the restore of instance 1", func(e job.Event) bool { return e.Kind == job.EventRestored && e.Instance == 1 })
	p0.waitEvent(t, "a failed commit with instance 1", func(e job.Event) bool { return e.Kind == job.EventCommitFailed })
	m.mu.Lock()
	m.failing = false
	m.mu.Unlock()
	p0.waitEvent(t, "a complete checkpoint of instance 1", func(e job.Event) bool { return e.Kind == job.EventCompleted && e.Instance == 1 })
	for _, p := range []*process{p0, p1} {
		if err := p.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}
