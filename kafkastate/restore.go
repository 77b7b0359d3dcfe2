package kafkastate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/job"
	"github.com/dstlgo/dstl/statestore"
)

// position is a partition's committed position in the group.
type position struct {
	// offset is the committed offset, -1 for none.
	offset int64
	// record is the object name of the record its metadata names; ""
	// when the metadata names none.
	record string
}

// stableWait bounds how long a fetch of the group's offsets waits for
// them to be stable (no transaction holding them pending): a transaction
// ends by its commit, its abort, or its timeout.
const stableWait = 2 * time.Minute

// fetchPositions fetches the group's committed offsets (one OffsetFetch)
// and returns those of the topic's partitions: of the partitions parts,
// named in the request, or of every partition for nil. stable waits until
// no transaction holds the offsets of parts pending
// (UNSTABLE_OFFSET_COMMIT, which Kafka reports for the partitions named),
// up to stableWait.
func fetchPositions(ctx context.Context, cl *kgo.Client, group, topic, prefix string, parts []int32, stable bool) (map[int32]position, error) {
	deadline := time.Now().Add(stableWait)
	wait := 20 * time.Millisecond
	for {
		fetched, err := fetchOffsets(ctx, cl, group, topic, parts, stable)
		if errors.Is(err, kerr.GroupIDNotFound) {
			return map[int32]position{}, nil // no group yet: no offsets
		}
		if err != nil && !errors.Is(err, kerr.UnstableOffsetCommit) {
			return nil, fmt.Errorf("kafkastate: the committed offsets of group %s: %w", group, err)
		}
		unstable := err
		if err == nil {
			out := map[int32]position{}
			var perr error
			for _, f := range fetched {
				switch {
				case errors.Is(f.err, kerr.UnstableOffsetCommit):
					unstable = f.err
					continue
				case f.err != nil:
					perr = cmp.Or(perr, fmt.Errorf("partition %d: %w", f.partition, f.err))
					continue
				case f.offset < 0:
					continue
				}
				rec, rerr := recordOf(prefix, f.meta)
				if rerr != nil {
					perr = cmp.Or(perr, fmt.Errorf("partition %d: %w", f.partition, rerr))
					continue
				}
				out[f.partition] = position{offset: f.offset, record: rec}
			}
			switch {
			case perr != nil:
				return nil, fmt.Errorf("kafkastate: the committed offsets of group %s: %w", group, perr)
			case unstable == nil:
				return out, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kafkastate: the committed offsets of group %s, after %v: %w", group, stableWait, unstable)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kafkastate: the committed offsets of group %s: %w (%w)", group, unstable, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// fetched is a partition's committed offset as an OffsetFetch returns it.
type fetched struct {
	partition int32
	offset    int64
	meta      string
	err       error
}

// fetchOffsets issues one OffsetFetch of the group: for the partitions
// parts of topic, or for every partition for nil.
func fetchOffsets(ctx context.Context, cl *kgo.Client, group, topic string, parts []int32, stable bool) ([]fetched, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = group, stable
	if parts != nil {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, parts
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	var out []fetched
	add := func(t string, p int32, offset int64, meta *string, code int16) {
		if t != topic {
			return
		}
		f := fetched{partition: p, offset: offset, err: kerr.ErrorForCode(code)}
		if meta != nil {
			f.meta = *meta
		}
		out = append(out, f)
	}
	if len(resp.Groups) > 0 {
		g := resp.Groups[0]
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, err
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode)
			}
		}
		return out, nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			add(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode)
		}
	}
	return out, nil
}

// records reads checkpoint records and keeps them by name: a record never
// changes, so each is read once. It is safe for concurrent use.
type records struct {
	b      backends.Backend
	prefix string
	topic  string
	mu     sync.Mutex
	byName map[string]cachedRecord
	gets   int // records read from the store, for tests
}

// cachedRecord is a record kept, and when the process learnt it: when it
// read the record, or when it put it. The store's modification time of
// the record is no later than that.
type cachedRecord struct {
	r      *record
	learnt time.Time
}

func newRecords(b backends.Backend, prefix, topic string) *records {
	return &records{b: b, prefix: prefix, topic: topic, byName: map[string]cachedRecord{}}
}

// read returns the record of the object name: from the cache, or from
// one GET.
func (rs *records) read(ctx context.Context, name string) (*record, error) {
	rs.mu.Lock()
	c, ok := rs.byName[name]
	rs.mu.Unlock()
	if ok {
		return c.r, nil
	}
	data, err := readObject(ctx, rs.b, name)
	if err != nil {
		return nil, fmt.Errorf("kafkastate: reading record %q: %w", name, err)
	}
	r, err := decodeRecord(rs.prefix, name, rs.topic, data)
	if err != nil {
		return nil, err
	}
	rs.mu.Lock()
	rs.byName[name] = cachedRecord{r: r, learnt: time.Now()}
	rs.gets++
	rs.mu.Unlock()
	return r, nil
}

// readObject reads the whole object name.
func readObject(ctx context.Context, b backends.Backend, name string) ([]byte, error) {
	rc, err := b.Get(ctx, name, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// add keeps a record the process put.
func (rs *records) add(name string, r *record) {
	rs.mu.Lock()
	rs.byName[name] = cachedRecord{r: r, learnt: time.Now()}
	rs.mu.Unlock()
}

// retain forgets the records that are not in keep and that are older than
// since both by their name and by when the process learnt them: a process
// keeps the records committed for its partitions, and the young ones. A
// run of the deletion rule reads every record young by its name or by its
// modification time, which is later than its name by the time its put
// took; keeping a record learnt within the grace keeps every record that
// such a run reads.
func (rs *records) retain(keep map[string]bool, since time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for n, c := range rs.byName {
		if !keep[n] && c.learnt.Before(since) && objname.Parse(rs.prefix, n).Time().Before(since) {
			delete(rs.byName, n)
		}
	}
}

// forget forgets the records that a listing begun at since did not
// return, though the process learnt them before it: they were deleted.
func (rs *records) forget(listed map[string]bool, since time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for n, c := range rs.byName {
		if !listed[n] && c.learnt.Before(since) {
			delete(rs.byName, n)
		}
	}
}

// start is what a partition starts from: its committed position, and the
// state of the record its metadata names, or of its part of the job's
// first-layout catalog.
type start struct {
	offset     int64 // the next offset to process; -1: from the first record on
	record     string
	checkpoint int64
	state      *recordPartition
	// part is the first layout's part restored (an upgrade from a release
	// before records), when no record is committed for the partition.
	part string
	// legacyOutput says that the state may hold the first layout's
	// store of pending output (legacyOutputStore); its output of the
	// input below settleBelow is in Kafka, the rest is pending.
	legacyOutput bool
	settleBelow  int64
}

// restored says whether the partition restores a state.
func (st *start) restored() bool { return st.state != nil }

// starts reads what the partitions start from: one offset fetch for the
// group (waiting until their offsets are stable), and one GET of each
// record named (shared by the partitions that name one record). A
// partition whose committed offset names no record restores its part of
// the job's first-layout catalog, if it has one: readV1 returns what that
// catalog restores, and is called once, if any partition needs it.
// An error wraps ErrDamaged when a record or part is damaged or is not
// the partition's, and backends.ErrNotFound when a record is missing.
func starts(ctx context.Context, cl *kgo.Client, rs *records, group, topic string, parts []int32, readV1 func(context.Context) (*firstLayout, error)) (map[int32]*start, error) {
	if len(parts) == 0 {
		return map[int32]*start{}, nil
	}
	pos, err := fetchPositions(ctx, cl, group, topic, rs.prefix, parts, true)
	if err != nil {
		return nil, err
	}
	var fl *firstLayout
	out := map[int32]*start{}
	for _, p := range parts {
		at, ok := pos[p]
		if !ok || at.record == "" {
			if fl == nil {
				if fl, err = readV1(ctx); err != nil {
					return nil, err
				}
			}
			if part := fl.part(p); part != nil {
				off := fl.offsets[p]
				settle := int64(-1)
				if ok {
					settle = at.offset
				}
				out[p] = &start{offset: off, checkpoint: part.Checkpoint, part: part.Name, legacyOutput: true, settleBelow: settle,
					state: &recordPartition{Partition: p, Offset: off, State: part.State, Objects: part.Objects}}
				continue
			}
		}
		if !ok {
			out[p] = &start{offset: -1}
			continue
		}
		st := &start{offset: at.offset, record: at.record}
		if at.record != "" {
			r, err := rs.read(ctx, at.record)
			if err != nil {
				return nil, fmt.Errorf("kafkastate: partition %s/%d: %w", topic, p, err)
			}
			rp := r.partition(p)
			switch {
			case rp == nil:
				return nil, fmt.Errorf("%w %q: no state of partition %d, whose committed offset names it", ErrDamaged, at.record, p)
			case rp.Offset != at.offset:
				return nil, fmt.Errorf("%w %q: partition %d at offset %d, committed at %d", ErrDamaged, at.record, p, rp.Offset, at.offset)
			}
			st.checkpoint, st.state = r.Checkpoint, rp
			st.legacyOutput, st.settleBelow = rp.LegacyOutput, rp.Offset
		}
		out[p] = st
	}
	return out, nil
}

// assigned returns the runner's assignment of partition p, restoring st.
func assigned(p int32, st *start) job.Assigned {
	as := job.Assigned{Index: int(p), KeyGroups: partitionKeyGroups, MaxParallelism: 1}
	if st.state != nil {
		as.Restore = []*catalog.Part{{Name: cmp.Or(st.record, st.part), Checkpoint: st.checkpoint, Instance: int(p), KeyGroups: partitionKeyGroups,
			State: st.state.State, Objects: st.state.Objects, Metadata: map[string]string{offsetKey: strconv.FormatInt(st.offset, 10)}}}
		as.Restored = st.checkpoint
	}
	return as
}

// Loaded is a partition's state as the record its committed offset names
// holds it (or, for a job of a release before records, its part of the
// job's first-layout catalog).
type Loaded[S any] struct {
	Partition[S]
	// Offset is the offset the partition resumes at: its committed
	// offset, or the offset of the first layout's part restored; -1 when
	// it has none.
	Offset int64
	// Checkpoint is the checkpoint of the record (or part) restored, 0
	// for none.
	Checkpoint int64
	// Record is the object name of the record restored, "" for none.
	Record string
	// FirstLayoutPart is the object name of the first layout's part
	// restored, when the partition has no record (see docs/KAFKA.md,
	// "Upgrade"); "" for none.
	FirstLayoutPart string
}

// Load restores the state of every one of the topic's partitions (0 to
// partitions-1) from the records the group's committed offsets name, as
// a service would on assignment, without joining the group: for tools and
// tests. It reads the offsets once (waiting until they are stable). A
// partition with no record restores its part of the job's first-layout
// catalog, if it has one, as a service would; Load reads that catalog
// without fencing it. It fences nothing, and may run beside the job's
// services. close releases the states.
func Load[S any](ctx context.Context, storage *dstl.Storage, cfg Config[S], partitions int) (states []Loaded[S], close func(), err error) {
	s, err := New(storage, cfg)
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.ClientOptions...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafkastate: load: client: %w", err)
	}
	defer cl.Close()
	parts := make([]int32, partitions)
	for p := range parts {
		parts[p] = int32(p)
	}
	rs := newRecords(storage.Backend(), s.prefix, s.cfg.Topic)
	readV1 := func(ctx context.Context) (*firstLayout, error) {
		return readFirstLayout(ctx, storage.Backend(), s.jobID, s.cfg.Topic, partitions, false)
	}
	st, err := starts(ctx, cl, rs, s.cfg.Group, s.cfg.Topic, parts, readV1)
	if err != nil {
		return nil, nil, fmt.Errorf("kafkastate: load: %w", err)
	}
	var cps []*statestore.Checkpointer
	close = func() {
		for _, cp := range cps {
			cp.Close()
		}
	}
	for _, p := range parts {
		cp, err := statestore.NewCheckpointer(storage, statestore.Config{Operator: fmt.Sprintf("%s-%d", s.operator(), p),
			KeyGroups: partitionKeyGroups, MaxParallelism: 1, MaterializeInterval: -1, KeepSnapshots: true, Logger: s.log})
		if err != nil {
			close()
			return nil, nil, fmt.Errorf("kafkastate: load: %w", err)
		}
		cps = append(cps, cp)
		state, stores, err := s.cfg.NewState(s.info(p), cp.Log())
		if err == nil && st[p].legacyOutput {
			var legacy *statestore.KeyValueStore[uint64, legacyOutput]
			if legacy, err = newLegacyOutputStore(cp.Log()); err == nil {
				stores = append(stores, legacy)
			}
		}
		if err == nil {
			err = cp.Register(stores...)
		}
		if err != nil {
			close()
			return nil, nil, fmt.Errorf("kafkastate: load: partition %s: state: %w", s.info(p), err)
		}
		l := Loaded[S]{Partition: Partition[S]{PartitionInfo: s.info(p), State: state}, Offset: st[p].offset, Checkpoint: st[p].checkpoint,
			Record: st[p].record, FirstLayoutPart: st[p].part}
		var handles []*statestore.CheckpointHandle
		if sp := st[p].state; sp != nil {
			h := new(statestore.CheckpointHandle)
			if err := h.UnmarshalBinary(sp.State); err != nil {
				close()
				return nil, nil, fmt.Errorf("kafkastate: load: the state of partition %d in %s: %w", p, st[p].record, err)
			}
			handles = append(handles, h)
		}
		info := statestore.CheckpointInfo{OperatorID: s.operator(), TaskID: int(p), CheckpointID: l.Checkpoint}
		if err := cp.InitializeState(ctx, info, handles...); err != nil {
			close()
			return nil, nil, fmt.Errorf("kafkastate: load: partition %s: %w", s.info(p), err)
		}
		states = append(states, l)
	}
	return states, close, nil
}
