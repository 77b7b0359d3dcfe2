package kafkastate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl/objname"
)

// Collect starts a run of the deletion rule, in the background, if this
// process holds partition 0 and no run is under way (see collector.run).
func (c *coordinator[S]) Collect(ctx context.Context) error {
	c.mu.Lock()
	holds := c.owned[0] && !c.closed
	c.mu.Unlock()
	if !holds || !c.collecting.CompareAndSwap(false, true) {
		return nil
	}
	c.collectWG.Add(1)
	go func() {
		defer c.collectWG.Done()
		defer c.collecting.Store(false)
		s := c.s
		rep, err := c.col.run(ctx, collect.Options{Timeout: s.cfg.CommitTimeout})
		s.c.collections.Add(1)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("kafkastate: deletion rule", "err", err)
		}
		if rep != nil && rep.Report != nil {
			s.log.Debug("kafkastate: deletion rule", "listed", rep.Listed.Objects, "deleted", rep.Deleted.Objects, "held", rep.Held.Objects, "young", rep.Young.Objects)
		}
		s.event(Event{Kind: EventCollected, PartitionInfo: s.info(-1), Generation: s.generation(), Err: err})
	}()
	return nil
}

// collector applies a job's deletion rule: the service's process that
// holds partition 0 every CollectInterval, and Collect once.
type collector struct {
	b          backends.Backend
	jobID      string
	prefix     string
	topic      string
	group      string
	operator   string // the partitions' operators are operator-P
	partitions int
	grace      time.Duration
	// kafkaTimeout bounds the offset fetch; 0: ctx alone.
	kafkaTimeout time.Duration
	cl           *kgo.Client // reads the group's committed offsets
	recs         *records    // records read, by name
	// v1 is what the runs learnt of the job's first-layout catalog.
	v1 firstLayoutState
	// requireCommitted refuses to delete anything when the prefix holds
	// records and the group's offsets name none (Collect: a wrong group
	// or topic).
	requireCommitted bool
}

// ErrNoCommittedRecord is the error of Collect when the job's prefix holds
// records and the group's committed offsets name none of them: the group
// or the topic is not the job's (or no checkpoint of the job was ever
// committed). Nothing is deleted.
var ErrNoCommittedRecord = errors.New("kafkastate: the group's committed offsets name no record of the job; nothing deleted")

// CollectReport is what a run of the deletion rule found and did.
type CollectReport struct {
	// Report is the collection's (package collect): the objects listed
	// under the job's prefix, why each is kept, and those deleted. It is
	// nil when the run failed before its listing.
	*collect.Report
	// CommittedRecords names the records that the group's committed
	// offsets name, and YoungRecords the other records younger than the
	// grace: the records kept, with every object they name. Both are
	// sorted.
	CommittedRecords, YoungRecords []string
	// HoldFrom is the lowest checkpoint whose objects were held however
	// old (see collect.Options.HoldFrom).
	HoldFrom int64
	// FirstLayoutParts names the parts of the job's first-layout catalog
	// (a job of a release before records) whose objects were kept: some
	// partition that restores one has no record committed yet.
	FirstLayoutParts []string
	// FirstLayoutDropped names the objects of that catalog deleted (in a
	// dry run: that would be), once every partition with a part there had
	// a record committed: all of them but the fence's generation record.
	FirstLayoutDropped []string
}

// run applies the deletion rule once, through collect.Run:
//
//  1. it lists the records (PREFIX/_records/), before
//  2. one offset fetch for the group gives the committed records;
//  3. it keeps the committed records, every record younger than the
//     grace (by its name's time or its modification time), and every
//     object they refer to, reading each record once (they are cached by
//     name);
//  4. it holds every object made for a checkpoint at or above the lowest
//     HoldFrom of those records, and at or above the checkpoint of the
//     time one grace before the listing;
//  5. collect.Run deletes the rest of the logs, the partitions' snapshots
//     and the records, once older than the grace by both clocks.
//
// A record it cannot read makes it delete nothing. opts are as for
// collect.Run, whose JobID, Grace, Keep, Kinds and HoldFrom run sets.
func (k *collector) run(ctx context.Context, opts collect.Options) (*CollectReport, error) {
	listedAt := time.Now()
	if opts.Now != nil {
		listedAt = opts.Now()
	}
	listed := map[string]bool{}
	var young []string
	err := k.b.List(ctx, objname.RecordPrefix(k.prefix), func(oi backends.ObjectInfo) error {
		n := objname.Parse(k.prefix, oi.Name)
		if n.Kind != objname.Record {
			return nil
		}
		listed[oi.Name] = true
		if listedAt.Sub(n.Time()) <= k.grace || oi.ModTime.IsZero() || listedAt.Sub(oi.ModTime) <= k.grace {
			young = append(young, oi.Name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kafkastate: listing the records: %w", err)
	}
	k.recs.forget(listed, listedAt)
	fctx, cancel := withTimeout(ctx, k.kafkaTimeout)
	pos, err := fetchPositions(fctx, k.cl, k.group, k.topic, k.prefix, nil, false)
	cancel()
	if err != nil {
		return nil, err
	}
	rep := &CollectReport{}
	keep := new(collect.Keep)
	// The checkpoint of the time one grace before the listing: objects
	// made for it or later are held (see docs/KAFKA.md).
	hold := checkpointOf(listedAt.Add(-k.grace))
	kept := map[string]bool{}
	add := func(name string) error {
		r, err := k.recs.read(ctx, name)
		if err != nil {
			return err
		}
		kept[name] = true
		keep.AddObject(name)
		keep.AddObject(r.objects()...)
		hold = min(hold, r.HoldFrom)
		return nil
	}
	for _, at := range pos {
		if at.record == "" || kept[at.record] {
			continue
		}
		if err := add(at.record); err != nil {
			return nil, fmt.Errorf("kafkastate: a committed record: %w", err)
		}
		rep.CommittedRecords = append(rep.CommittedRecords, at.record)
	}
	for _, name := range young {
		if kept[name] {
			continue
		}
		err := add(name)
		switch {
		case errors.Is(err, backends.ErrNotFound):
			continue // deleted since the listing
		case err != nil:
			return nil, fmt.Errorf("kafkastate: a young record: %w", err)
		}
		rep.YoungRecords = append(rep.YoungRecords, name)
	}
	// The upgrade from the first layout: the objects of the parts that
	// partitions with no record committed restore from.
	v1, err := k.firstLayout(ctx, pos)
	if err != nil {
		return nil, err
	}
	keep.AddObject(v1.objects...)
	rep.FirstLayoutParts = v1.parts
	if k.requireCommitted && len(rep.CommittedRecords) == 0 && len(listed) > 0 {
		return nil, fmt.Errorf("%w: group %s, topic %s, %d records under %q", ErrNoCommittedRecord, k.group, k.topic, len(listed), objname.RecordPrefix(k.prefix))
	}
	slices.Sort(rep.CommittedRecords)
	slices.Sort(rep.YoungRecords)
	for p := range k.partitions {
		keep.AddOperator(fmt.Sprintf("%s-%d", k.operator, p))
	}
	rep.HoldFrom = max(hold, 1)
	opts.JobID, opts.Grace, opts.Keep, opts.HoldFrom = k.jobID, k.grace, keep, rep.HoldFrom
	if k.grace == 0 {
		opts.Grace = collect.NoGrace // collect takes a zero grace for its default
	}
	opts.Kinds = collect.Logs | collect.Snapshots | collect.Records
	rep.Report, err = collect.Run(ctx, k.b, opts)
	if err != nil || len(v1.drop) == 0 {
		return rep, err
	}
	// Each delete is bounded as collect bounds its steps: a zero Timeout
	// is collect's default, NoTimeout no bound.
	timeout := cmp.Or(opts.Timeout, collect.DefaultTimeout)
	if timeout == collect.NoTimeout {
		timeout = 0
	}
	rep.FirstLayoutDropped, err = k.dropFirstLayout(ctx, v1.drop, rep.Now, timeout, opts.DryRun)
	return rep, err
}

// CollectConfig configures Collect: the job's Kafka side, as its
// services' Config has it.
type CollectConfig struct {
	// Brokers are the seed brokers ("host:port"). Required.
	Brokers []string
	// Topic is the job's input topic, and Group its consumer group.
	// Required.
	Topic, Group string
	// Grace is the job's Config.Grace. Default DefaultGrace; NoGrace for
	// none (every record not committed is deleted, and every object only
	// such records name).
	Grace time.Duration
	// Timeout bounds each request to Kafka (the topic's metadata, the
	// group's offsets); 0: ctx alone bounds them.
	Timeout time.Duration
	// ClientOptions are added to the Kafka client's options (TLS, SASL,
	// timeouts).
	ClientOptions []kgo.Opt
}

// NoGrace is the value of CollectConfig.Grace for a collection without
// a grace.
const NoGrace time.Duration = -1

// Collect applies a job's deletion rule once, as the service's process
// that holds partition 0 does every CollectInterval (see docs/KAFKA.md,
// "Deletion rule"): it keeps the records the group's committed offsets
// name and those younger than cfg.Grace, with every object they name, and
// deletes the other records, logs and partitions' snapshots older than
// the grace by both clocks. It is for tools that collect a job's objects
// from outside it, such as "dstl gc". b holds the job's objects, under
// objname.JobPrefix(jobID). opts are as for collect.Run, whose JobID,
// Grace, Keep, Kinds and HoldFrom Collect sets.
//
// Collect reads the group's committed offsets and joins no group: it may
// run beside the job's services. An error wraps ErrConfig for a
// configuration that is not valid, ErrDamaged for a record that does not
// decode, and ErrNoCommittedRecord when the prefix holds records and the
// group's offsets name none (then nothing is deleted). The report comes with the error
// of a collection that listed the job's prefix (see collect.Run).
func Collect(ctx context.Context, b backends.Backend, jobID string, cfg CollectConfig, opts collect.Options) (*CollectReport, error) {
	switch cfg.Grace {
	case 0:
		cfg.Grace = DefaultGrace
	case NoGrace:
		cfg.Grace = 0
	}
	switch {
	case b == nil:
		return nil, fmt.Errorf("%w: the backend is nil", ErrConfig)
	case len(cfg.Brokers) == 0:
		return nil, fmt.Errorf("%w: Brokers: at least one broker is required", ErrConfig)
	case cfg.Topic == "":
		return nil, fmt.Errorf("%w: Topic: required", ErrConfig)
	case cfg.Group == "":
		return nil, fmt.Errorf("%w: Group: required", ErrConfig)
	case cfg.Grace < 0:
		return nil, fmt.Errorf("%w: Grace: %v is negative", ErrConfig, cfg.Grace)
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("%w: Timeout: %v is negative", ErrConfig, cfg.Timeout)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.ClientOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkastate: client: %w", err)
	}
	defer cl.Close()
	mctx, cancel := withTimeout(ctx, cfg.Timeout)
	n, _, err := partitionCount(mctx, cl, cfg.Topic)
	cancel()
	if err != nil {
		return nil, err
	}
	prefix := objname.JobPrefix(jobID)
	k := &collector{b: b, jobID: jobID, prefix: prefix, topic: cfg.Topic, group: cfg.Group, operator: operatorOf(cfg.Topic),
		partitions: n, grace: cfg.Grace, kafkaTimeout: cfg.Timeout, cl: cl, recs: newRecords(b, prefix, cfg.Topic), requireCommitted: true}
	return k.run(ctx, opts)
}

// withTimeout returns ctx bounded by d, or ctx itself for d 0.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}
