package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/kafkastate"
)

const costJobAbout = `
The rest of the job, beside the log (the batched side's --processes and
--writers, which are the job's processes and instances; --instances is the
same as --writers):

  - The coordinator (--coordinator): "catalog" (the checkpoint catalog on the
    same store: per checkpoint, a commit per process, the leader's listing of
    one checkpoint's directory, the others' reads of the leader's commit and
    of the fence, the commits' deletion; a sweep of the job's objects every
    quarter of --grace; and at each restore, every process's join and a new
    generation's start); "kafka" (kafkastate: one record object per process
    per checkpoint, put and later deleted, the offsets committed to Kafka,
    which the store does not bill, and the deletion rule every
    --collect-interval: a listing of the records, a read of each record of
    the other processes, the clock probe's put, listing and delete, and a
    listing of the job's prefix); or "none".
  - The snapshots of the state stores (--state-size bytes per instance): at
    each materialisation, one snapshot object per instance (an in-memory
    store's; a disk-backed store uploads the files that changed, which
    docs/COST.md prices), deleted once no retained checkpoint names it, and
    read at each restore.

With the catalog, the counted run commits every checkpoint to a catalog on
the base path, collects every 5 checkpoints, and writes the snapshots; the
estimate of the run is checked against the counts like the log's. Kafka's
figures are the model's, which a test checks against a counted run of a
kafkastate job on an in-process Kafka.`

// costJobOptions are the flags of the job beyond the log.
type costJobOptions struct {
	coordinator string
	stateSize   int64
	grace       time.Duration
	// collectInterval is kafkastate's time between two runs of its
	// deletion rule (Config.CollectInterval).
	collectInterval time.Duration
}

// costJobPart is the report of the job beyond the log: its coordinator
// and its snapshots.
type costJobPart struct {
	Coordinator string        `json:"coordinator"`
	Processes   int           `json:"processes"`
	Instances   int           `json:"instances"`
	StateSize   int64         `json:"state_size_per_instance"`
	Grace       time.Duration `json:"grace_ns"`
	// RunEstimate and RunCounted are the coordinator's and snapshots'
	// requests in the counted run (with the catalog).
	RunEstimate costCounts `json:"run_estimate"`
	RunCounted  costCounts `json:"run_counted"`
	// Coordinator and snapshots a month.
	MonthCoordinator costCounts `json:"month_coordinator"`
	MonthSnapshots   costCounts `json:"month_snapshots"`
	Bills            []costBill `json:"bills"` // coordinator and snapshots
	// Total bills a month: log, coordinator and snapshots.
	Totals []costBill `json:"totals"`
}

// costCollectEvery is how often, in checkpoints, the counted run's leader
// applies the deletion rule.
const costCollectEvery = 5

// catalogPerCheckpoint returns the catalog's requests per checkpoint of
// q processes in the aligned mode: each commit's put, the leader's listing
// of one checkpoint's directory, the others' reads of the leader's commit
// and of the fence, and the commits' deletion.
func catalogPerCheckpoint(q int) costCounts {
	c := costCounts{Puts: float64(q), Deletes: float64(q)}
	switch {
	case q == 1:
		c.Gets = 1
	default:
		c.Gets = float64(2*q - 1)
		c.Lists = math.Ceil(float64(q) / 1000)
	}
	return c
}

// sweepCounts returns the requests of one sweep of the leader: a listing
// of the live generation's directory (its claims and kept commits), a
// read of each commit kept since the last sweep, the clock probe (a put,
// a listing, a delete) and a listing of the job's prefix of objects
// objects, in pages of page names (0: one request a listing).
func sweepCounts(q, retain int, objects float64, page int) costCounts {
	pagesOf := func(n float64) float64 {
		if page <= 0 {
			return 1
		}
		return max(1, math.Ceil(n/float64(page)))
	}
	kept := float64(q * (retain + 1))
	return costCounts{Puts: 1, Deletes: 1, Gets: kept, Lists: pagesOf(kept+float64(q)) + 1 + pagesOf(objects)}
}

// catalogJoin returns the requests of one restart of the whole job: each
// process's join (a listing of the generation records, reads of the
// latest record and its fence, its claim, the fence again, and the
// restored commit its instances need) and one new generation's start
// (the fence, a check of the next record, a listing of the fenced
// generation's directory, a read of each chosen commit, the record).
func catalogJoin(q, retain, page int) costCounts {
	pagesOf := func(n float64) float64 {
		if page <= 0 {
			return 1
		}
		return max(1, math.Ceil(n/float64(page)))
	}
	fq := float64(q)
	return costCounts{Puts: fq + 2, Gets: 4*fq + fq + 1, Lists: fq + pagesOf(fq*float64(retain+2))}
}

// jobMonth returns the coordinator's and the snapshots' requests and
// bytes of a month of w, with listings in pages of page names, stored
// the log putting logPuts objects a checkpoint.
func jobMonth(w costWorkload, jo costJobOptions, q int, logPuts float64, page int) (coord, snaps costCounts) {
	k := float64(costMonth) / float64(w.CheckpointInterval)
	logObjects := logAlive(w, logPuts)
	switch jo.coordinator {
	case "catalog":
		per := catalogPerCheckpoint(q)
		coord = costCounts{Puts: per.Puts * k, Gets: per.Gets * k, Lists: per.Lists * k, Deletes: per.Deletes * k}
		sweeps := float64(costMonth) / float64(sweepInterval(jo.grace))
		s := sweepCounts(q, w.Retain, logObjects+float64(q*(w.Retain+1))+float64(w.Writers*2), page)
		coord.add(s, sweeps)
		coord.add(catalogJoin(q, w.Retain, page), w.Restores)
		coord.Stored = float64(q*(w.Retain+2)) * 1024 // commits of a few hundred bytes to a few KiB
	case "kafka":
		runs := float64(costMonth) / float64(jo.collectEvery())
		coord = kafkaCounts(q, k, runs, w, jo, logPuts, page)
		coord.Stored = float64(q) * (float64(jo.grace+jo.collectEvery())/float64(w.CheckpointInterval) + 1) * 1024
	}
	if jo.stateSize > 0 {
		mats := float64(costMonth) / float64(w.MaterializeInterval)
		p := float64(w.Writers)
		snaps = costCounts{Puts: p * mats, Deletes: p * mats, BytesPut: p * mats * float64(jo.stateSize),
			Gets: p * w.Restores, Stored: p * float64(jo.stateSize) * (1 + math.Min(1, float64(w.Retain)/float64(w.materializeEvery())))}
	}
	return coord, snaps
}

// collectEvery is kafkastate's time between two runs of its deletion
// rule: collectInterval, or kafkastate's default.
func (jo costJobOptions) collectEvery() time.Duration {
	if jo.collectInterval > 0 {
		return jo.collectInterval
	}
	return kafkastate.DefaultCollectInterval
}

// kafkaCounts returns the requests on the store of a kafkastate job of q
// processes over k checkpoints and runs runs of its deletion rule, with
// listings in pages of page names and the log putting logPuts objects a
// checkpoint (see docs/KAFKA.md, "Deletion rule" and "Requests at
// scale"):
//
//   - each checkpoint, every process puts one record, which the deletion
//     rule deletes once older than the grace; the process that runs the
//     rule reads each record of the other processes once (records are
//     cached by name, and a process knows its own);
//   - each run of the rule lists the records, then puts, lists and
//     deletes its clock probe and lists the job's prefix; both listings
//     hold what the grace keeps: the records, log objects and snapshots
//     of the last grace and collect interval (and at least what the
//     retained checkpoints name); the group's offsets come from Kafka,
//     which the store does not bill;
//   - each restore reads one record per process.
//
// The first run of a process also lists the first layout's catalog, once;
// the model leaves it out.
func kafkaCounts(q int, k, runs float64, w costWorkload, jo costJobOptions, logPuts float64, page int) costCounts {
	pagesOf := func(n float64) float64 {
		if page <= 0 {
			return 1
		}
		return max(1, math.Ceil(n/float64(page)))
	}
	fq := float64(q)
	// The ages of what a listing finds: up to a grace and a collect
	// interval.
	span := float64(jo.grace + jo.collectEvery())
	records := fq * span / float64(w.CheckpointInterval)
	logs := max(logPuts*span/float64(w.CheckpointInterval), logAlive(w, logPuts))
	snapshots := float64(w.Writers) * max(2, span/float64(w.MaterializeInterval))
	c := costCounts{Puts: fq*k + runs, Gets: (fq-1)*k + fq*w.Restores, Deletes: fq*k + runs}
	c.Lists = runs * (pagesOf(records) + 1 + pagesOf(logs+records+snapshots))
	return c
}

// logAlive returns the log's objects that the retained checkpoints and
// the materialisation period name, on average, the log putting logPuts
// objects a checkpoint.
func logAlive(w costWorkload, logPuts float64) float64 {
	return logPuts * (float64(w.Retain) + float64(w.materializeEvery()-1)/2)
}

// sweepInterval is the catalog's default sweep interval for a grace.
func sweepInterval(grace time.Duration) time.Duration { return max(grace/4, time.Minute) }

func (c *costCounts) add(o costCounts, times float64) {
	c.Puts += o.Puts * times
	c.Gets += o.Gets * times
	c.Lists += o.Lists * times
	c.Deletes += o.Deletes * times
	c.BytesPut += o.BytesPut * times
}

// priceCounts prices counts at p.
func priceCounts(p price, c costCounts) costBill {
	req := c.Puts*p.Put + c.Gets*p.Get + c.Lists*p.List + c.Deletes*p.Delete
	st := c.Stored / (1 << 30) * p.Storage
	return costBill{Provider: p.Key, Requests: req, Storage: st, Total: req + st}
}

// costJobRun is the job's catalog and snapshots in the counted run: q
// processes of the writers of the log's run, committing each checkpoint,
// the leader collecting every costCollectEvery, and every instance
// writing a snapshot at each materialisation.
type costJobRun struct {
	jo      costJobOptions
	w       costWorkload
	b       *counting.Backend // the catalog's and the snapshots' requests
	jobID   string
	ms      []*catalog.Member
	clock   time.Time // the catalog's clock: a checkpoint interval a checkpoint
	first   int64
	snaps   [][]string // the snapshot objects of the last two materialisations, oldest first
	payload []byte
}

// newCostJobRun joins the job's q processes, uncounted. Their catalog
// retains the workload's Retain complete checkpoints, as the model does.
func newCostJobRun(ctx context.Context, jo costJobOptions, w costWorkload, b backends.Backend, jobID string, q int, kgs []dstl.KeyGroupRange, first int64) (*costJobRun, error) {
	r := &costJobRun{jo: jo, w: w, jobID: jobID, clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), first: first}
	r.b = counting.New(noClose{b})
	if jo.stateSize > 0 {
		r.payload = randomBytes(int(jo.stateSize), 7)
	}
	if jo.coordinator != "catalog" {
		return r, nil
	}
	maxP := 0
	for _, kg := range kgs {
		maxP = max(maxP, kg.End+1)
	}
	for p := range q {
		m, err := catalog.Join(ctx, r.b, catalog.Config{JobID: jobID, Instances: len(kgs), Processes: q, Process: p,
			MaxParallelism: maxP, KeyGroups: kgs, Retain: w.Retain, Grace: jo.grace, Now: func() time.Time { return r.clock },
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return nil, fmt.Errorf("catalog: process %d: %w", p, err)
		}
		r.ms = append(r.ms, m)
	}
	return r, nil
}

// base returns the counts so far, which the run's counts start from.
func (r *costJobRun) base() counting.Stats { return r.b.Stats() }

// checkpoint commits run checkpoint cp: every process its instances'
// handles, the leader last; the leader collects every costCollectEvery.
func (r *costJobRun) checkpoint(ctx context.Context, cp int, handles []dstl.Handle) error {
	r.clock = r.clock.Add(r.w.CheckpointInterval)
	if len(r.ms) == 0 {
		return nil
	}
	n := r.first + int64(cp)
	for i := len(r.ms) - 1; i >= 0; i-- {
		m := r.ms[i]
		var ps []catalog.InstanceState
		for _, inst := range m.Instances() {
			h := handles[inst]
			state, err := h.MarshalBinary()
			if err != nil {
				return err
			}
			var objects []string
			for _, e := range h.Entries {
				objects = append(objects, e.Object)
			}
			if len(r.snaps) > 0 {
				objects = append(objects, r.snaps[len(r.snaps)-1][inst])
			}
			ps = append(ps, catalog.InstanceState{Instance: inst, State: state, Objects: objects})
		}
		if _, err := m.Commit(ctx, n, ps); err != nil {
			return fmt.Errorf("catalog: process %d, checkpoint %d: %w", i, n, err)
		}
	}
	if cp%costCollectEvery == 0 {
		if _, _, err := r.ms[0].Collect(ctx, collect.Options{}); err != nil {
			return fmt.Errorf("catalog: collection at checkpoint %d: %w", n, err)
		}
	}
	return nil
}

// materialize writes a snapshot object of every instance after run
// checkpoint cp, and deletes the ones no retained checkpoint names.
func (r *costJobRun) materialize(ctx context.Context, cp int) error {
	if r.jo.stateSize <= 0 {
		return nil
	}
	prefix := objname.JobPrefix(r.jobID)
	var names []string
	for i := range r.w.Writers {
		name, err := objname.NewSnapshot(prefix, fmt.Sprintf("cost-%d", i), r.first+int64(cp)+1)
		if err != nil {
			return err
		}
		if err := r.b.Put(ctx, name, bytes.NewReader(r.payload), int64(len(r.payload))); err != nil {
			return err
		}
		names = append(names, name)
	}
	r.snaps = append(r.snaps, names)
	// The snapshot before the previous one: no checkpoint that the job
	// may restore names it (the retained checkpoints are newer than the
	// previous materialisation, which is at least Retain checkpoints
	// ago).
	for len(r.snaps) > 2 {
		for _, name := range r.snaps[0] {
			if err := r.b.Delete(ctx, name); err != nil {
				return err
			}
		}
		r.snaps = r.snaps[1:]
	}
	return nil
}

// restore reads every instance's snapshot, as a restore does.
func (r *costJobRun) restore(ctx context.Context) error {
	if len(r.snaps) == 0 {
		return nil
	}
	for _, name := range r.snaps[len(r.snaps)-1] {
		rc, err := r.b.Get(ctx, name, 0, -1)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// runEstimate returns the model of the run's catalog and snapshots: k
// checkpoints of procs processes, the leader last (each commit of the
// leader completes its checkpoint), a collection every costCollectEvery
// that deletes the commits of the checkpoints before the retained ones
// and, when the catalog's clock says so, sweeps; a materialisation every
// m checkpoints; one restore.
func (r *costJobRun) runEstimate(k, m, procs int) costCounts {
	var c costCounts
	if len(r.ms) > 0 {
		per := catalogPerCheckpoint(procs)
		c = costCounts{Puts: per.Puts * float64(k), Gets: per.Gets * float64(k), Lists: per.Lists * float64(k)}
		if procs > 1 {
			// The first commits read no leader's commit of an earlier
			// checkpoint.
			c.Gets -= float64(procs - 1)
		}
		var lastSweep time.Duration
		swept, gone := false, 0
		for cp := costCollectEvery; cp <= k; cp += costCollectEvery {
			// The commits of 1 to cp-Retain are deleted by now.
			c.Deletes += float64(procs) * float64(max(0, cp-r.w.Retain)-gone)
			gone = max(0, cp-r.w.Retain)
			now := time.Duration(cp) * r.w.CheckpointInterval
			if !swept || now-lastSweep >= sweepInterval(r.jo.grace) {
				swept, lastSweep = true, now
				// A listing of the generation's directory, the clock
				// probe's put, listing and delete, a listing of the
				// job's prefix, and the retained checkpoint's commits.
				c.add(costCounts{Puts: 1, Deletes: 1, Lists: 3, Gets: float64(procs * r.w.Retain)}, 1)
			}
		}
	}
	if r.jo.stateSize > 0 {
		mats := k / m
		p := float64(r.w.Writers)
		c.Puts += p * float64(mats)
		c.BytesPut += p * float64(mats) * float64(r.jo.stateSize)
		// The snapshots before the last two go.
		c.Deletes += p * float64(max(0, mats-2))
		if mats > 0 {
			c.Gets += p
		}
	}
	return c
}

// print writes the job beyond the log: the run's check, the month, and
// the whole job's bills.
func (j *costJobPart) print(w io.Writer, prices []price, date string) {
	fmt.Fprintf(w, "\nThe rest of the job: %d instances in %d process(es), coordinator %s, snapshots of %s per instance\n",
		j.Instances, j.Processes, j.Coordinator, formatBytes(j.StateSize))
	if j.Coordinator == "catalog" || j.StateSize > 0 {
		var t textTable
		t.add("the run (catalog and snapshots)", "estimate", "counted", "diff")
		for _, c := range compareCounts(j.RunEstimate, j.RunCounted) {
			if c.request {
				t.add(c.name, formatCount(c.estimate), formatCount(c.counted), formatDiff(c))
			}
		}
		t.write(w)
	}
	var t textTable
	t.add("a month", "coordinator", "snapshots")
	c, s := j.MonthCoordinator, j.MonthSnapshots
	t.add("PUT", formatCount(c.Puts), formatCount(s.Puts))
	t.add("GET", formatCount(c.Gets), formatCount(s.Gets))
	t.add("LIST (pages of 1000)", formatCount(c.Lists), formatCount(s.Lists))
	t.add("DELETE", formatCount(c.Deletes), formatCount(s.Deletes))
	t.add("bytes stored (average)", formatBytes(int64(c.Stored)), formatBytes(int64(s.Stored)))
	t.write(w)
	fmt.Fprintf(w, "\nThe whole job a month, list prices of %s (USD; requests + storage)\n", date)
	t = textTable{}
	t.add("", "coordinator and snapshots", "log, coordinator and snapshots")
	for i, p := range prices {
		b, tot := j.Bills[i], j.Totals[i]
		t.add(p.Name+", "+p.Region, fmt.Sprintf("%s (%s + %s)", formatUSD(b.Total), formatUSD(b.Requests), formatUSD(b.Storage)),
			fmt.Sprintf("%s (%s + %s)", formatUSD(tot.Total), formatUSD(tot.Requests), formatUSD(tot.Storage)))
	}
	t.write(w)
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
