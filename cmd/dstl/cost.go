package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/counting"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/kafkastate"
)

const costAbout = `Estimates the requests, the stored bytes and their price per month of a
job's changelog on each cloud's standard tier, with batching (the engine's
options) beside the same job without it (one object per writer per
checkpoint: batch.persist-delay=0 and batch.persist-size-threshold=1, so
that no two upload tasks share an object). Both are measured.

The workload: --writers writers (operator instances) change their state
at --change-rate bytes per second in all, in changes of --change-size
bytes, spread evenly over the writers; every --checkpoint-interval all of
them persist their logs and the checkpoint is confirmed. Every
--materialize-interval the state stores are materialised (written as a
snapshot elsewhere: its bytes are not counted here) and the logs before
it truncated; the job keeps the last --retain checkpoints and deletes the
log objects none of them refers to. A restore (--restores a month) reads
the latest checkpoint: the logs since the last materialisation; a dstl gc
run (--gc-runs a month) lists the job's prefix. --processes splits the
batched side's writers over as many storages (task managers), each
batching only its own writers; 1 (the default) is the best case.

The measurement, on --base-path (mem:// by default), each side apart:
first a calibration, uncounted by the run: checkpoints back to back, each
with the changes of a real interval, that give the objects and bytes a
warm checkpoint puts (the first left out) and time a checkpoint (the
median of the first --calibrate, the first left out); after some of them
a restore, as a restarted process makes it, whose GETs are counted (as
many checkpoints as the run's restore and the month's read, up to one
materialisation period). Then a counted run through a request counter,
compressed in time: a checkpoint every --run-interval (by default four
times the calibration's checkpoint) instead of every
--checkpoint-interval, a materialisation every --run-materialize-every
run checkpoints (by default the job's, at most 5), with the job's
deletions, then one restore of its last checkpoint and one listing.

The model gives the month and the run from the same figures: the
calibration's objects and bytes per checkpoint and GETs per restore
(between the coverages measured, linear). For the run it is evaluated at
the checkpoints the run took, the run's materialisation period, one
restore and one listing, and printed beside what the counter saw; the
command exits 1 when a request count differs by more than 5 % (and half
a request: a count is whole, the estimate an average). A run
that falls behind its schedule (a busy machine) is a warning only.

The month is 30 days: its checkpoints are 30 days over
--checkpoint-interval. Every object written is deleted once; the stored
bytes are the average over the month (the retained checkpoints and, on
average, half a materialisation period); a restore reads, on average,
half a period; a listing of N objects is N/1000 pages (N/5000 on Azure).
Prices are the providers' published list prices (docs/COST.md names them
and their date), per request and per GiB-month; --price
PROVIDER.FIELD=PRICE (PROVIDER s3, gcs or azure; FIELD put, get, list,
delete or storage; PRICE in dollars, or dollars/count: s3.put=0.005/1000)
and --prices FILE (JSON, {"s3": {"put": "0.005/1000"}}) override them.
Transfer out of the region is not counted.` + costJobAbout

// costWorkload is the job dstl cost prices.
type costWorkload struct {
	Writers             int           `json:"writers"`
	CheckpointInterval  time.Duration `json:"checkpoint_interval_ns"`
	ChangeRate          int64         `json:"change_rate_bytes_per_second"` // over all writers
	ChangeSize          int           `json:"change_size"`
	Retain              int           `json:"retained_checkpoints"`
	MaterializeInterval time.Duration `json:"materialize_interval_ns"`
	Restores            float64       `json:"restores_per_month"`
	GCRuns              float64       `json:"gc_runs_per_month"`
}

// changesPerWriter is the number of changes each writer appends between
// two checkpoints.
func (w costWorkload) changesPerWriter() int {
	perWriter := float64(w.ChangeRate) * w.CheckpointInterval.Seconds() / float64(w.Writers)
	return max(1, int(math.Round(perWriter/float64(w.ChangeSize))))
}

// effectiveRate is the bytes of changes per second the run appends:
// whole changes per writer per checkpoint, at least one.
func (w costWorkload) effectiveRate() float64 {
	return float64(w.changesPerWriter()) * float64(w.ChangeSize) * float64(w.Writers) / w.CheckpointInterval.Seconds()
}

// materializeEvery is the number of checkpoints between two
// materialisations.
func (w costWorkload) materializeEvery() int {
	return max(1, int(math.Round(float64(w.MaterializeInterval)/float64(w.CheckpointInterval))))
}

// costMonth is the month dstl cost prices.
const costMonth = 30 * 24 * time.Hour

// costTolerance is how far the estimate of the run may be from the
// requests counted in it.
const costTolerance = 0.05

// costOptions are the flags of a cost run.
type costOptions struct {
	basePath, storage string
	options           []string
	w                 costWorkload
	runInterval       time.Duration
	runCheckpoints    int
	// runMaterializeEvery is the run's materialisation period, in run
	// checkpoints; restoreUpto the longest restore the calibration
	// measures, in checkpoints.
	runMaterializeEvery, restoreUpto int
	calibrationTotal                 int // the calibration's checkpoints, the timing ones included
	calibrate                        int
	processes                        int
	prices                           []price
	job                              costJobOptions
}

func runCost(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := costOptions{prices: defaultPrices()}
	fs := newFlagSet("cost", "[flags]", costAbout, stderr)
	fs.IntVar(&o.w.Writers, "writers", 64, "writers (operator instances) of the job")
	fs.IntVar(&o.w.Writers, "instances", 64, "the same as --writers: the job's instances")
	fs.StringVar(&o.job.coordinator, "coordinator", "catalog", "what commits the checkpoints: catalog (the job's checkpoint catalog on the store), kafka (kafkastate: Kafka's consumer group, a record object per process on the store) or none")
	stateSize := fs.String("state-size", "0", "`BYTES` of state per instance, written as a snapshot at each materialisation (0: no snapshots counted)")
	fs.DurationVar(&o.job.grace, "grace", catalog.DefaultGrace, "the deletion rule's grace, whose quarter is the catalog's sweep interval (with --coordinator kafka, default kafkastate's, 10m)")
	fs.DurationVar(&o.job.collectInterval, "collect-interval", kafkastate.DefaultCollectInterval, "with --coordinator kafka, the time between two runs of kafkastate's deletion rule (Config.CollectInterval)")
	fs.DurationVar(&o.w.CheckpointInterval, "checkpoint-interval", 10*time.Second, "time between two checkpoints")
	rate := fs.String("change-rate", "1MiB", "`BYTES` of changes per second over all writers (e.g. 1MiB, 256KiB)")
	fs.IntVar(&o.w.ChangeSize, "change-size", 100, "bytes per change")
	fs.IntVar(&o.w.Retain, "retain", 1, "completed checkpoints the job keeps (Flink's state.checkpoints.num-retained)")
	fs.DurationVar(&o.w.MaterializeInterval, "materialize-interval", 10*time.Minute, "time between two materialisations of the state stores, which truncate the logs")
	fs.Float64Var(&o.w.Restores, "restores", 1, "restores a month (each reads the latest checkpoint)")
	fs.Float64Var(&o.w.GCRuns, "gc-runs", 30, "dstl gc runs a month (each lists the job's prefix)")
	fs.StringVar(&o.basePath, "base-path", "mem://dstl-cost", "where the measuring run's objects go: a URL or a local path, as for a storage")
	fs.StringVar(&o.storage, "storage", "", "backend `ID` (default: chosen by the base path's URL scheme)")
	fs.Var((*stringsFlag)(&o.options), "option", "an engine option `KEY=VALUE` of both sides (the other turns batching off), e.g. batch.persist-delay=20ms; repeatable")
	fs.DurationVar(&o.runInterval, "run-interval", 0, "time between two checkpoints of the measuring run (0: four times the median calibration checkpoint, the first left out, at least 20ms)")
	fs.IntVar(&o.runCheckpoints, "run-checkpoints", 0, "checkpoints of the measuring run (0: four run materialisation periods plus --retain plus one, at least 40, at most 200)")
	fs.IntVar(&o.runMaterializeEvery, "run-materialize-every", 0, "run checkpoints between two materialisations in the measuring run (0: the job's, at most 5)")
	fs.IntVar(&o.processes, "processes", 1, "processes (task managers) the batched side's writers are split over, each with a storage of its own that batches only its writers")
	fs.IntVar(&o.calibrate, "calibrate", 5, "uncounted checkpoints before the run that time a checkpoint (for the default --run-interval)")
	fs.Func("price", "override a price: `PROVIDER.FIELD=PRICE`, e.g. s3.put=0.005/1000 (repeatable)", func(s string) error {
		return setPrice(o.prices, s)
	})
	pricesFile := fs.String("prices", "", "override prices from a JSON `FILE`: {\"s3\": {\"put\": \"0.005/1000\"}, ...}")
	jsonOut := fs.Bool("json", false, "print a JSON report on stdout")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	usageErr := reporter{stderr, "dstl cost"}.usage
	var err error
	if o.w.ChangeRate, err = parseSize(*rate); err != nil {
		return usageErr("--change-rate: %v", err)
	}
	if *stateSize != "0" {
		if o.job.stateSize, err = parseSize(*stateSize); err != nil {
			return usageErr("--state-size: %v", err)
		}
	}
	switch o.job.coordinator {
	case "catalog", "kafka", "none":
	default:
		return usageErr("--coordinator %q: want catalog, kafka or none", o.job.coordinator)
	}
	if o.job.coordinator == "kafka" && !flagSet(fs, "grace") {
		o.job.grace = kafkastate.DefaultGrace
	}
	if o.job.collectInterval <= 0 {
		return usageErr("--collect-interval %v: want a positive duration", o.job.collectInterval)
	}
	if o.job.grace <= 0 {
		return usageErr("--grace %v: want a positive duration", o.job.grace)
	}
	if o.job.stateSize > 64<<20 {
		return usageErr("--state-size %s: want at most 64 MiB per instance", *stateSize)
	}
	if *pricesFile != "" {
		if err := loadPrices(o.prices, *pricesFile); err != nil {
			return usageErr("--prices: %v", err)
		}
	}
	if err := o.validate(); err != nil {
		return usageErr("%v", err)
	}
	if eff := o.w.effectiveRate(); math.Abs(eff-float64(o.w.ChangeRate)) > costTolerance*float64(o.w.ChangeRate) {
		fmt.Fprintf(stderr, "dstl cost: warning: --change-rate %s is %s per writer per checkpoint, not a whole number of %d-byte changes: the run appends %d per writer per checkpoint, %s in all\n",
			formatRate(float64(o.w.ChangeRate)), formatBytes(int64(float64(o.w.ChangeRate)*o.w.CheckpointInterval.Seconds()/float64(o.w.Writers))),
			o.w.ChangeSize, o.w.changesPerWriter(), formatRate(eff))
	}
	rep, err := cost(ctx, o)
	if err != nil {
		printFailure(stderr, "dstl cost: ", err)
		if errors.Is(err, backends.ErrUnknownBackend) || errors.Is(err, dstl.ErrInvalidConfig) {
			return exitUsage
		}
		return exitRuntime
	}
	return emit(stdout, stderr, *jsonOut, rep, rep.Agree)
}

// maxRunBytes bounds the changes the measuring run keeps at once.
const maxRunBytes = 4 << 30

// validate checks the flags, naming the one that is wrong.
func (o *costOptions) validate() error {
	w := o.w
	switch {
	case w.Writers < 1 || w.Writers > 4096:
		return fmt.Errorf("--writers %d: want 1 to 4096", w.Writers)
	case w.CheckpointInterval <= 0:
		return fmt.Errorf("--checkpoint-interval %v: want a positive duration", w.CheckpointInterval)
	case w.ChangeRate < 1:
		return fmt.Errorf("--change-rate %d: want at least 1 byte per second", w.ChangeRate)
	case w.ChangeSize < 1 || w.ChangeSize > 16<<20:
		return fmt.Errorf("--change-size %d: want 1 byte to 16 MiB", w.ChangeSize)
	case w.Retain < 1:
		return fmt.Errorf("--retain %d: want at least 1 checkpoint", w.Retain)
	case w.MaterializeInterval < w.CheckpointInterval:
		return fmt.Errorf("--materialize-interval %v: want at least the checkpoint interval (%v)", w.MaterializeInterval, w.CheckpointInterval)
	case w.Restores < 0 || math.IsNaN(w.Restores) || math.IsInf(w.Restores, 0):
		return fmt.Errorf("--restores %v: want a number at least 0", w.Restores)
	case w.GCRuns < 0 || math.IsNaN(w.GCRuns) || math.IsInf(w.GCRuns, 0):
		return fmt.Errorf("--gc-runs %v: want a number at least 0", w.GCRuns)
	case o.runInterval < 0:
		return fmt.Errorf("--run-interval %v: want a positive duration (or 0 for the default)", o.runInterval)
	case o.runCheckpoints < 0:
		return fmt.Errorf("--run-checkpoints %d: want at least 1 (or 0 for the default)", o.runCheckpoints)
	case o.calibrate < 1:
		return fmt.Errorf("--calibrate %d: want at least 1 checkpoint", o.calibrate)
	case o.runMaterializeEvery < 0:
		return fmt.Errorf("--run-materialize-every %d: want at least 1 (or 0 for the default)", o.runMaterializeEvery)
	case o.processes < 1 || o.processes > w.Writers:
		return fmt.Errorf("--processes %d: want 1 to --writers (%d)", o.processes, w.Writers)
	}
	m := w.materializeEvery()
	if o.runMaterializeEvery == 0 {
		o.runMaterializeEvery = min(m, 5)
	}
	if o.runCheckpoints == 0 {
		o.runCheckpoints = min(200, max(40, 4*o.runMaterializeEvery+w.Retain+1))
	}
	perCP := int64(w.changesPerWriter()) * int64(w.ChangeSize) * int64(w.Writers)
	// The calibration measures restores up to the month's longest, as
	// far as the bytes kept allow; the model takes them in proportion
	// past that.
	fit := int(max(1, min(1<<20, maxRunBytes/max(perCP, 1)))) // checkpoints whose changes fit at once
	o.restoreUpto = min(max(m, o.runMaterializeEvery), fit)
	// The calibration: the timing checkpoints, then at least 20 more (as
	// far as they fit) for the figures per checkpoint, as many as the
	// longest restore reads.
	o.calibrationTotal = max(o.calibrate, o.restoreUpto, min(o.calibrate+20, fit))
	if kept := int64(min(o.runCheckpoints, o.runMaterializeEvery+w.Retain)) * perCP; kept > maxRunBytes {
		return fmt.Errorf("--run-checkpoints %d: the run would keep %s of changes at once (at most %s): give fewer, a lower --run-materialize-every or a lower --change-rate",
			o.runCheckpoints, formatBytes(kept), formatBytes(maxRunBytes))
	}
	return nil
}

// costReport is the result of a cost run.
type costReport struct {
	Workload            costWorkload `json:"workload"`
	Backend             string       `json:"backend"`
	BasePath            string       `json:"base_path"`
	MaterializeEvery    int          `json:"materialize_every_checkpoints"`
	Calibration         int          `json:"calibration_checkpoints"`
	MonthDays           int          `json:"month_days"`
	MonthCheckpoints    float64      `json:"month_checkpoints"`
	RunMaterializeEvery int          `json:"run_materialize_every_checkpoints"`
	Processes           int          `json:"processes"` // storages the batched side's writers are split over
	Batched             costSide     `json:"batched"`
	Unbatched           costSide     `json:"unbatched"` // one object per writer per checkpoint
	Prices              []price      `json:"prices"`
	PricesDate          string       `json:"prices_date"`
	Agree               bool         `json:"agree"` // every request count of the run's estimate within 5 % of the counted one
	// Job is the rest of the job: its coordinator and its snapshots.
	Job *costJobPart `json:"job"`
}

// costUnits are what the engine did in the calibration, apart from the
// counted run: per checkpoint, and per restore.
type costUnits struct {
	PutsPerCheckpoint   float64 `json:"puts_per_checkpoint"`
	StoredPerCheckpoint float64 `json:"stored_bytes_per_checkpoint"`
	ChangesPerWriter    int     `json:"changes_per_writer_per_checkpoint"`
	// RestoreGets[i] is the GETs a restore of RestoreCheckpoints[i]
	// checkpoints made, which had put RestoreObjects[i] objects.
	RestoreCheckpoints []int     `json:"restore_checkpoints"`
	RestoreGets        []float64 `json:"restore_gets"`
	RestoreObjects     []float64 `json:"restore_objects"`
}

// costCounts are requests and bytes.
type costCounts struct {
	Puts     float64 `json:"puts"`
	Gets     float64 `json:"gets"`
	Lists    float64 `json:"lists"`
	Deletes  float64 `json:"deletes"`
	BytesPut float64 `json:"bytes_put"`
	// Stored is the bytes stored: at the end of a run; averaged over a month.
	Stored float64 `json:"stored_bytes"`
}

// costSide is one column of the report: the engine with batching or
// without.
type costSide struct {
	Name                string            `json:"name"`
	Options             map[string]string `json:"options"`   // the engine options set, beyond the defaults
	Processes           int               `json:"processes"` // storages the writers are split over
	Units               costUnits         `json:"units"`     // measured in the calibration
	RunCheckpoints      int               `json:"run_checkpoints"`
	RunMaterializeEvery int               `json:"run_materialize_every_checkpoints"`
	RunInterval         string            `json:"run_interval"`
	TimeScale           float64           `json:"time_scale"` // checkpoint interval over run interval
	RunSeconds          float64           `json:"run_seconds"`
	RunLag              int               `json:"run_lag_intervals"` // run intervals the run fell behind its schedule
	RunEstimate         costCounts        `json:"run_estimate"`      // the model for the run's checkpoints
	RunCounted          costCounts        `json:"run_counted"`       // what the counting wrapper saw
	Month               costCounts        `json:"month"`
	Bills               []costBill        `json:"bills"`
}

// costBill is a month's price at one provider.
type costBill struct {
	Provider string  `json:"provider"`
	Requests float64 `json:"requests_usd"`
	Storage  float64 `json:"storage_usd"`
	Total    float64 `json:"total_usd"`
}

func cost(ctx context.Context, o costOptions) (*costReport, error) {
	cfg, err := runConfig(o.basePath, o.storage, o.options, "dstl-cost-")
	if err != nil {
		return nil, err
	}
	b, id, err := backends.Open(ctx, cfg.Storage, cfg.BasePath)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	w := o.w
	rep := &costReport{Workload: w, Backend: id, BasePath: backends.RedactURL(o.basePath), MaterializeEvery: w.materializeEvery(),
		Calibration: o.calibrationTotal, RunMaterializeEvery: o.runMaterializeEvery, Processes: o.processes,
		MonthDays: int(costMonth / (24 * time.Hour)), MonthCheckpoints: float64(costMonth) / float64(w.CheckpointInterval),
		Prices: o.prices, PricesDate: pricesDate}
	unbatched := cfg
	unbatched.BatchPersistDelay, unbatched.BatchPersistSizeThreshold = dstl.NoBatchDelay, 1
	unbatched.JobID = cfg.JobID + "-unbatched"
	rep.Agree = true
	rep.Job = &costJobPart{Coordinator: o.job.coordinator, Processes: o.processes, Instances: w.Writers, StateSize: o.job.stateSize, Grace: o.job.grace}
	for _, side := range []struct {
		s     *costSide
		name  string
		cfg   dstl.Config
		set   map[string]string
		procs int
	}{
		{&rep.Batched, "batched", cfg, changedOptions(cfg), o.processes},
		{&rep.Unbatched, "one object per writer", unbatched, changedOptions(unbatched), 1},
	} {
		*side.s = costSide{Name: side.name, Options: side.set}
		var job *costJobPart
		if side.s == &rep.Batched && (o.job.coordinator == "catalog" || o.job.stateSize > 0) {
			job = rep.Job
		}
		if err := measureCostSide(ctx, o, side.cfg, b, id, side.procs, side.s, job); err != nil {
			return nil, fmt.Errorf("%s: %w", side.name, err)
		}
		side.s.Month = costModel(side.s.Units, monthPlan(w, 1000))
		for _, p := range o.prices {
			side.s.Bills = append(side.s.Bills, bill(p, w, side.s.Units))
		}
		for _, c := range compareCounts(side.s.RunEstimate, side.s.RunCounted) {
			if c.request && !c.ok() {
				rep.Agree = false
			}
		}
	}
	// The job beyond the log, a month, and the whole job's bills.
	logPuts := rep.Batched.Units.PutsPerCheckpoint
	rep.Job.MonthCoordinator, rep.Job.MonthSnapshots = jobMonth(w, o.job, o.processes, logPuts, 1000)
	for i, p := range o.prices {
		coord, snaps := jobMonth(w, o.job, o.processes, logPuts, max(p.ListPage, 1))
		jb := priceCounts(p, coord)
		sb := priceCounts(p, snaps)
		jb.Requests, jb.Storage, jb.Total = jb.Requests+sb.Requests, jb.Storage+sb.Storage, jb.Total+sb.Total
		rep.Job.Bills = append(rep.Job.Bills, jb)
		lb := rep.Batched.Bills[i]
		rep.Job.Totals = append(rep.Job.Totals, costBill{Provider: p.Key, Requests: lb.Requests + jb.Requests,
			Storage: lb.Storage + jb.Storage, Total: lb.Total + jb.Total})
	}
	if rep.Job.Coordinator == "catalog" || rep.Job.StateSize > 0 {
		for _, c := range compareCounts(rep.Job.RunEstimate, rep.Job.RunCounted) {
			if c.request && !c.ok() {
				rep.Agree = false
			}
		}
	}
	return rep, nil
}

// changedOptions returns the options of cfg that differ from the
// defaults, but for where the objects go.
func changedOptions(cfg dstl.Config) map[string]string {
	def := dstl.DefaultConfig(cfg.BasePath).Options()
	out := map[string]string{}
	for k, v := range cfg.Options() {
		switch k {
		case "base-path", "job-id", "storage":
			continue
		}
		if def[k] != v {
			out[k] = v
		}
	}
	return out
}

// costPlan is what the model is evaluated for: a month of the job in
// its steady state, or the measuring run from its cold start.
type costPlan struct {
	Checkpoints      float64 // checkpoints taken
	MaterializeEvery int     // checkpoints between two materialisations
	Retain           int     // checkpoints the job keeps
	Restores         float64 // restores of the latest checkpoint
	Listings         float64 // listings of the job's prefix
	ListPage         int     // objects per page of a listing; 0: one request per listing
	// Steady is a window of a steady state (the month): a restore or a
	// listing comes at any moment of a materialisation period, the
	// stored bytes are the window's average, and every object written is
	// deleted once. Otherwise the plan starts empty (the run): the
	// restores and listings come after the last checkpoint, the stored
	// bytes are those left then, and only the checkpoints the job is done
	// with by then are deleted.
	Steady bool
}

// monthPlan is the month of w.
func monthPlan(w costWorkload, listPage int) costPlan {
	return costPlan{Checkpoints: float64(costMonth) / float64(w.CheckpointInterval), MaterializeEvery: w.materializeEvery(),
		Retain: w.Retain, Restores: w.Restores, Listings: w.GCRuns, ListPage: listPage, Steady: true}
}

// costModel returns the requests and bytes of plan p for a job whose
// checkpoints each put u.PutsPerCheckpoint objects of
// u.StoredPerCheckpoint bytes and whose restores make the GETs
// u.restoreGets says. The job deletes the objects of checkpoints 1 to
// jm (materialised after checkpoint jm) once checkpoint jm+Retain
// completes; a restore of checkpoint k reads the checkpoints since the
// last materialisation before it.
func costModel(u costUnits, p costPlan) costCounts {
	k := p.Checkpoints
	m, n := float64(max(1, p.MaterializeEvery)), float64(max(1, p.Retain))
	var alive, covered, deleted float64 // checkpoints whose objects are stored, that a restore reads, deleted
	if p.Steady {
		alive = n + (m-1)/2
		deleted = k
		for c := 1.0; c <= m; c++ { // a restore at any checkpoint of a period
			covered += u.restoreGets(c) / m
		}
	} else {
		if k >= n {
			deleted = m * math.Floor((k-n)/m)
		}
		alive = k - deleted
		if k > 0 {
			covered = u.restoreGets(k - m*math.Floor((k-1)/m))
		}
	}
	objects := u.PutsPerCheckpoint * alive
	pages := 1.0
	if p.ListPage > 0 {
		pages = max(1, math.Ceil(objects/float64(p.ListPage)))
	}
	return costCounts{
		Puts:     u.PutsPerCheckpoint * k,
		Gets:     p.Restores * covered,
		Lists:    p.Listings * pages,
		Deletes:  u.PutsPerCheckpoint * deleted,
		BytesPut: u.StoredPerCheckpoint * k,
		Stored:   u.StoredPerCheckpoint * alive,
	}
}

// restoreGets returns the GETs a restore of c checkpoints makes: their
// objects (c times PutsPerCheckpoint) times the GETs per object restored
// that the calibration measured, exact at the coverages it measured,
// linear between them, the nearest one's outside them. (A restore past the
// reader's cache fetches ranges again: more GETs per object.)
func (u costUnits) restoreGets(c float64) float64 {
	at, gets, objs := u.RestoreCheckpoints, u.RestoreGets, u.RestoreObjects
	perObject := 1.0
	ratio := func(i int) float64 { return gets[i] / max(objs[i], 1) }
	switch {
	case len(at) == 0 || len(gets) != len(at) || len(objs) != len(at):
	case c <= float64(at[0]):
		perObject = ratio(0)
	case c >= float64(at[len(at)-1]):
		perObject = ratio(len(at) - 1)
	default:
		for i := 1; i < len(at); i++ {
			if c <= float64(at[i]) {
				lo, hi := float64(at[i-1]), float64(at[i])
				perObject = ratio(i-1) + (ratio(i)-ratio(i-1))*(c-lo)/(hi-lo)
				break
			}
		}
	}
	return c * u.PutsPerCheckpoint * perObject
}

// bill prices a month at provider p (its listings in pages of its own
// size).
func bill(p price, w costWorkload, u costUnits) costBill {
	month := costModel(u, monthPlan(w, max(p.ListPage, 1)))
	req := month.Puts*p.Put + month.Gets*p.Get + month.Lists*p.List + month.Deletes*p.Delete
	st := month.Stored / (1 << 30) * p.Storage
	return costBill{Provider: p.Key, Requests: req, Storage: st, Total: req + st}
}

// countComparison is one line of the run's check.
type countComparison struct {
	name              string
	estimate, counted float64
	request           bool // a request count (the check), or bytes (informative)
}

// diff returns (estimate - counted) / counted; 0 when both are 0.
func (c countComparison) diff() float64 {
	if c.counted == 0 {
		if math.Abs(c.estimate) < 0.5 {
			return 0
		}
		return math.Inf(1)
	}
	return (c.estimate - c.counted) / c.counted
}

// ok reports whether the estimate agrees with the count: within 5 %, or
// within half a request (the estimate is an average over checkpoints, the
// count a whole number: 5.4 estimated GETs of a restore of 5 objects
// cannot come closer than 5).
func (c countComparison) ok() bool {
	return math.Abs(c.diff()) <= costTolerance || math.Abs(c.estimate-c.counted) <= 0.5
}

// compareCounts lines up a run's estimate and its counted requests.
func compareCounts(est, got costCounts) []countComparison {
	return []countComparison{
		{name: "PUT", estimate: est.Puts, counted: got.Puts, request: true},
		{name: "GET", estimate: est.Gets, counted: got.Gets, request: true},
		{name: "LIST", estimate: est.Lists, counted: got.Lists, request: true},
		{name: "DELETE", estimate: est.Deletes, counted: got.Deletes, request: true},
		{name: "bytes put", estimate: est.BytesPut, counted: got.BytesPut},
		{name: "bytes stored at the end", estimate: est.Stored, counted: got.Stored},
	}
}

// costJob is the measuring run's job: writers that append and checkpoint
// together, split over one storage per process.
type costJob struct {
	w       costWorkload
	ss      []*dstl.Storage // one per process
	proc    []int           // the process of each writer
	ws      []*dstl.Writer
	from    []dstl.SequenceNumber // where each writer's log starts (its last materialisation)
	to      []dstl.SequenceNumber // where each writer's last checkpoint ended
	handles []dstl.Handle         // the last checkpoint's
	changes []byte                // random bytes the changes are cut from
}

// newCostJob makes the job's writers, the first writers/len(ss) on the
// first storage and so on, as task managers each running some of them.
func newCostJob(w costWorkload, ss []*dstl.Storage) (*costJob, error) {
	j := &costJob{w: w, ss: ss, from: make([]dstl.SequenceNumber, w.Writers), to: make([]dstl.SequenceNumber, w.Writers),
		handles: make([]dstl.Handle, w.Writers), changes: randomBytes(1<<20+w.ChangeSize, 5)}
	total := max(128, w.Writers)
	for i := range w.Writers {
		p := i * len(ss) / w.Writers
		wr, err := ss[p].NewWriter(fmt.Sprintf("cost-%d", i), splitRange(total, w.Writers, i))
		if err != nil {
			return nil, err
		}
		j.ws, j.proc = append(j.ws, wr), append(j.proc, p)
	}
	return j, nil
}

// checkpoint appends an interval's changes to every writer, then persists
// all the logs at once as checkpoint cp, waits for the handles and
// confirms them.
func (j *costJob) checkpoint(ctx context.Context, cp int64) error {
	n := j.w.changesPerWriter()
	errs := make([]error, len(j.ws))
	var wg sync.WaitGroup
	for i, w := range j.ws {
		wg.Go(func() {
			kgs := w.KeyGroups()
			width := kgs.End - kgs.Start + 1
			off := (i * 7919) % (1 << 20)
			for c := range n {
				o := (off + c*j.w.ChangeSize) % (1 << 20)
				if err := w.Append(ctx, kgs.Start+c%width, j.changes[o:o+j.w.ChangeSize]); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, w := range j.ws {
		wg.Go(func() {
			f, err := w.Persist(ctx, j.from[i], cp)
			if err != nil {
				errs[i] = err
				return
			}
			r, err := f.Wait(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			j.handles[i], j.to[i] = r.Remote, r.To
			errs[i] = w.Confirm(r.From, r.To, cp)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// materialize truncates every log up to the last checkpoint: the state
// before it is in a snapshot now.
func (j *costJob) materialize() error {
	for i, w := range j.ws {
		if err := w.Truncate(j.to[i]); err != nil {
			return err
		}
		j.from[i] = j.to[i]
	}
	return nil
}

// objects returns the objects the last checkpoint's handles refer to.
func (j *costJob) objects() map[string]bool {
	out := map[string]bool{}
	for _, h := range j.handles {
		for _, e := range h.Entries {
			out[e.Object] = true
		}
	}
	return out
}

// restore reads the last checkpoint back from b as a restarted job would:
// each process with a reader of its own (a cache of the engine's default
// size), its writers' handles prefetched together; it checks the number
// of changes (checkpoints is how many the handles cover).
func (j *costJob) restore(ctx context.Context, b backends.Backend, idle time.Duration, checkpoints int) error {
	got := 0
	for p := range j.ss {
		r, err := dstl.NewReader(b, dstl.KeyGroupRange{Start: 0, End: max(128, j.w.Writers) - 1}, dstl.ReaderOptions{CacheIdleTimeout: idle})
		if err != nil {
			return err
		}
		var hs []dstl.Handle
		for i, h := range j.handles {
			if j.proc[i] == p {
				hs = append(hs, h)
			}
		}
		err = r.Prefetch(ctx, hs...)
		for _, h := range hs {
			if err != nil {
				break
			}
			for _, e := range r.Changes(ctx, h) {
				if e != nil {
					err = e
					break
				}
				got++
			}
		}
		r.Close()
		if err != nil {
			return fmt.Errorf("process %d: %w", p, err)
		}
	}
	if want := checkpoints * j.w.changesPerWriter() * len(j.ws); got != want {
		return fmt.Errorf("restore read %d changes, want %d", got, want)
	}
	return nil
}

func (j *costJob) close() error {
	var err error
	for _, w := range j.ws {
		err = errors.Join(err, w.Close())
	}
	for _, s := range j.ss {
		err = errors.Join(err, s.Close())
	}
	return err
}

// restorePoints returns the coverages (in checkpoints) at which the
// calibration measures a restore: every one up to 5, then doubling, and
// upto, the longest a restore of the run or the month reads.
func restorePoints(upto int) []int {
	var at []int
	for c := 1; c < upto; {
		at = append(at, c)
		if c < 5 {
			c++
		} else {
			c *= 2
		}
	}
	return append(at, upto)
}

// measureCostSide runs the calibration and the counted run of one side
// with the job's writers split over procs storages.
func measureCostSide(ctx context.Context, o costOptions, cfg dstl.Config, b backends.Backend, id string, procs int, side *costSide, job *costJobPart) (err error) {
	w := o.w
	m := o.runMaterializeEvery
	// One storage per process and its writers for the calibration and the
	// run, so that the run starts warm; the counter's figures before the
	// run are subtracted.
	rb := counting.New(noClose{b})
	var ss []*dstl.Storage
	for range procs {
		s, err := dstl.New(cfg, rb, dstl.WithStorageID(id))
		if err != nil {
			for _, s := range ss {
				s.Close()
			}
			return err
		}
		ss = append(ss, s)
	}
	j, err := newCostJob(w, ss)
	if err != nil {
		for _, s := range ss {
			s.Close()
		}
		return err
	}
	defer func() {
		err = errors.Join(err, j.close(), removeJob(context.WithoutCancel(ctx), b, cfg.JobID))
	}()

	// Calibration, apart from the counted run: how long a warm
	// checkpoint takes, to choose the run's interval (the first is cold:
	// it counts only when it is the only one; the median, so that one
	// hiccup does not stretch the run), the objects and bytes a warm
	// checkpoint puts, and the GETs of restores of as many checkpoints as
	// the run's and the month's restores read. Nothing is materialised
	// until its end, so that the restore after checkpoint c reads c.
	points := restorePoints(o.restoreUpto)
	var took []time.Duration
	var puts, bytesPut float64
	calBase := rb.Stats()
	warm := 0
	// The figures per checkpoint leave out the timing checkpoints (the
	// first ones are cold and may batch otherwise), or only the first when
	// there are no others.
	skip := 0
	switch {
	case o.calibrationTotal > o.calibrate:
		skip = o.calibrate
	case o.calibrationTotal > 1:
		skip = 1
	}
	var interval time.Duration
	var pace *pacer
	for cp := 1; cp <= o.calibrationTotal; cp++ {
		if cp == o.calibrate+1 || cp == 1 && o.calibrate >= o.calibrationTotal {
			// Past the timing checkpoints, the run's interval: the
			// figures come from checkpoints paced as the run's are.
			slices.Sort(took)
			interval = o.runInterval
			if interval == 0 {
				typical := took[len(took)/2]
				interval = max(20*time.Millisecond, (4*typical + 9*time.Millisecond).Truncate(10*time.Millisecond))
			}
			pace = &pacer{interval: interval}
		}
		if pace != nil {
			if err := pace.wait(ctx); err != nil {
				return err
			}
		}
		before := rb.Stats()
		t0 := time.Now()
		if err := j.checkpoint(ctx, int64(cp)); err != nil {
			return fmt.Errorf("calibration, checkpoint %d: %w", cp, err)
		}
		d, after := time.Since(t0), rb.Stats()
		if cp <= o.calibrate && (cp > 1 || o.calibrate == 1) {
			took = append(took, d)
		}
		if cp > skip {
			puts += float64(after.Puts - before.Puts)
			bytesPut += float64(after.BytesPut - before.BytesPut)
			warm++
		}
		if slices.Contains(points, cp) {
			before := rb.Stats()
			if err := j.restore(ctx, rb, cfg.CacheIdleTimeout, cp); err != nil {
				return fmt.Errorf("calibration, restore of checkpoint %d: %w", cp, err)
			}
			side.Units.RestoreCheckpoints = append(side.Units.RestoreCheckpoints, cp)
			side.Units.RestoreGets = append(side.Units.RestoreGets, float64(rb.Stats().Gets-before.Gets))
			side.Units.RestoreObjects = append(side.Units.RestoreObjects, float64(before.Puts-calBase.Puts))
		}
	}
	if pace == nil { // only timing checkpoints, all of them measured
		slices.Sort(took)
		interval = o.runInterval
		if interval == 0 {
			interval = max(20*time.Millisecond, (4*took[len(took)/2] + 9*time.Millisecond).Truncate(10*time.Millisecond))
		}
	}
	side.Units.PutsPerCheckpoint, side.Units.StoredPerCheckpoint = puts/float64(warm), bytesPut/float64(warm)
	side.Units.ChangesPerWriter = w.changesPerWriter()
	// The calibration's changes are materialised and its objects deleted,
	// uncounted: the run starts from an empty prefix.
	if err := j.materialize(); err != nil {
		return fmt.Errorf("calibration: %w", err)
	}
	if err := removeJob(ctx, b, cfg.JobID); err != nil {
		return fmt.Errorf("calibration: %w", err)
	}
	first := int64(o.calibrationTotal)

	// The job beyond the log (its catalog and snapshots), in the counted
	// run of the batched side.
	var jr *costJobRun
	if job != nil {
		var kgs []dstl.KeyGroupRange
		for _, wr := range j.ws {
			kgs = append(kgs, wr.KeyGroups())
		}
		if jr, err = newCostJobRun(ctx, o.job, w, b, cfg.JobID, procs, kgs, first); err != nil {
			return err
		}
	}
	var jobBase counting.Stats
	if jr != nil {
		jobBase = jr.base()
	}

	// The counted run.
	base := rb.Stats()
	k := o.runCheckpoints
	var retained []map[string]bool // the objects of each retained checkpoint, oldest first
	deleted := map[string]bool{}
	// The job deletes in the background, as a discard pool does, so that
	// a materialisation period's objects going at once does not hold the
	// next checkpoint.
	deletes := make(chan string, 1024)
	deleteErr := make(chan error, 1)
	go func() {
		var err error
		for name := range deletes {
			if err == nil {
				if err = rb.Delete(ctx, name); err != nil {
					err = fmt.Errorf("run, deleting %s: %w", name, err)
				}
			}
		}
		deleteErr <- err
	}()
	deletesOpen := true
	defer func() {
		if deletesOpen {
			close(deletes)
			<-deleteErr
		}
	}()
	t0 := time.Now()
	pace = &pacer{interval: interval}
	for cp := 1; cp <= k; cp++ {
		if err := pace.wait(ctx); err != nil {
			return err
		}
		if err := j.checkpoint(ctx, first+int64(cp)); err != nil {
			return fmt.Errorf("run, checkpoint %d: %w", cp, err)
		}
		if jr != nil {
			if err := jr.checkpoint(ctx, cp, j.handles); err != nil {
				return fmt.Errorf("run, checkpoint %d: %w", cp, err)
			}
		}
		retained = append(retained, j.objects())
		if len(retained) > w.Retain {
			dropped := retained[0]
			retained = retained[1:]
			for name := range dropped {
				if deleted[name] || inAny(retained, name) {
					continue
				}
				deletes <- name
				deleted[name] = true
			}
		}
		if cp%m == 0 {
			if err := j.materialize(); err != nil {
				return fmt.Errorf("run, materialisation after checkpoint %d: %w", cp, err)
			}
			if jr != nil {
				if err := jr.materialize(ctx, cp); err != nil {
					return fmt.Errorf("run, materialisation after checkpoint %d: %w", cp, err)
				}
			}
		}
	}
	elapsed := time.Since(t0)
	close(deletes)
	deletesOpen = false
	if err := <-deleteErr; err != nil {
		return err
	}
	covered := k - m*((k-1)/m)
	if err := j.restore(ctx, rb, cfg.CacheIdleTimeout, covered); err != nil {
		return fmt.Errorf("run, restore of checkpoint %d: %w", k, err)
	}
	if jr != nil {
		if err := jr.restore(ctx); err != nil {
			return fmt.Errorf("run, restore of the snapshots: %w", err)
		}
	}
	var stored int64
	prefix := objname.JobPrefix(cfg.JobID)
	if err := rb.List(ctx, prefix, func(oi backends.ObjectInfo) error {
		if objname.Parse(prefix, oi.Name).Kind == objname.Log { // the log's: the catalog's and the snapshots' are the job's
			stored += oi.Size
		}
		return nil
	}); err != nil {
		return fmt.Errorf("run, listing: %w", err)
	}
	got := statsSince(rb.Stats(), base)
	side.Processes = procs
	side.RunCheckpoints, side.RunMaterializeEvery, side.RunSeconds = k, m, elapsed.Seconds()
	side.RunLag = pace.lag()
	side.RunInterval, side.TimeScale = interval.String(), float64(w.CheckpointInterval)/float64(interval)
	side.RunCounted = costCounts{Puts: float64(got.Puts), Gets: float64(got.Gets), Lists: float64(got.Lists),
		Deletes: float64(got.Deletes), BytesPut: float64(got.BytesPut), Stored: float64(stored)}
	side.RunEstimate = costModel(side.Units, runPlan(k, m, w.Retain))
	if jr != nil {
		c := statsSince(jr.b.Stats(), jobBase)
		job.RunCounted = costCounts{Puts: float64(c.Puts), Gets: float64(c.Gets), Lists: float64(c.Lists), Deletes: float64(c.Deletes), BytesPut: float64(c.BytesPut)}
		job.RunEstimate = jr.runEstimate(k, m, procs)
	}
	return nil
}

// runPlan is the measuring run's plan: k checkpoints from an empty
// prefix, a materialisation every m, n retained, one restore and one
// listing (one request: the counter counts calls) after the last.
func runPlan(k, m, n int) costPlan {
	return costPlan{Checkpoints: float64(k), MaterializeEvery: m, Retain: n, Restores: 1, Listings: 1}
}

// pacer starts checkpoints on the ticks of an interval: one that overran
// its interval pushes the next one to the tick after it ends.
type pacer struct {
	interval time.Duration
	t0       time.Time
	ticks    int // intervals begun
	started  int // checkpoints started
}

// wait sleeps until the next checkpoint's tick.
func (p *pacer) wait(ctx context.Context) error {
	if p.started == 0 {
		p.t0 = time.Now()
	} else {
		if el := time.Since(p.t0); el > time.Duration(p.ticks)*p.interval {
			p.ticks = int((el + p.interval - 1) / p.interval)
		}
		if err := sleepCtx(ctx, time.Until(p.t0.Add(time.Duration(p.ticks)*p.interval))); err != nil {
			return err
		}
	}
	p.ticks++
	p.started++
	return nil
}

// lag returns the intervals the checkpoints fell behind their schedule,
// the last one's overrun included.
func (p *pacer) lag() int {
	if el := time.Since(p.t0); p.started > 0 && el > time.Duration(p.ticks)*p.interval {
		return int((el+p.interval-1)/p.interval) - p.started
	}
	return p.ticks - p.started
}

// statsSince returns the counts of now since base.
func statsSince(now, base counting.Stats) counting.Stats {
	return counting.Stats{Puts: now.Puts - base.Puts, Gets: now.Gets - base.Gets, Deletes: now.Deletes - base.Deletes,
		Lists: now.Lists - base.Lists, Errors: now.Errors - base.Errors,
		BytesPut: now.BytesPut - base.BytesPut, BytesRead: now.BytesRead - base.BytesRead}
}

// sleepCtx sleeps for d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func inAny(sets []map[string]bool, name string) bool {
	for _, s := range sets {
		if s[name] {
			return true
		}
	}
	return false
}

// removeJob deletes every object under a job's prefix, uncounted.
func removeJob(ctx context.Context, b backends.Backend, jobID string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var names []string
	err := b.List(ctx, objname.JobPrefix(jobID), func(oi backends.ObjectInfo) error {
		names = append(names, oi.Name)
		return nil
	})
	for _, n := range names {
		err = errors.Join(err, b.Delete(ctx, n))
	}
	return err
}

// noClose is a backend whose Close does nothing: the storages of a cost
// run share one backend.
type noClose struct{ backends.Backend }

func (noClose) Close() error { return nil }

// formatCount writes a count with thousands separators, or with a
// fraction below 100.
func formatCount(v float64) string {
	if v != 0 && math.Abs(v) < 100 && v != math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func formatUSD(v float64) string {
	switch {
	case v >= 100:
		return "$" + formatCount(v)
	case v >= 0.01 || v == 0:
		return fmt.Sprintf("$%.2f", v)
	}
	return fmt.Sprintf("$%.4f", v)
}

func formatDiff(c countComparison) string {
	d := c.diff()
	if math.IsInf(d, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", d*100)
}

func (r *costReport) print(w io.Writer) {
	wl := r.Workload
	fmt.Fprintf(w, "dstl cost: %d writers, a checkpoint every %v, %s of changes (%d-byte changes, %d per writer per checkpoint),\n",
		wl.Writers, wl.CheckpointInterval, formatRate(float64(wl.ChangeRate)), wl.ChangeSize, r.Batched.Units.ChangesPerWriter)
	fmt.Fprintf(w, "  %d checkpoint(s) retained, a materialisation every %v (%d checkpoints), %s restore(s) and %s gc run(s) a month\n\n",
		wl.Retain, wl.MaterializeInterval, r.MaterializeEvery, formatCount(wl.Restores), formatCount(wl.GCRuns))
	fmt.Fprintf(w, "Measured on %s (%s), each side: %d calibration checkpoints (restores of %s checkpoints counted),\n",
		r.Backend, r.BasePath, r.Calibration, formatInts(r.Batched.Units.RestoreCheckpoints))
	fmt.Fprintf(w, "then a counted run of %d checkpoints every %s batched, every %s not (time compressed x%s and x%s:\n",
		r.Batched.RunCheckpoints, r.Batched.RunInterval, r.Unbatched.RunInterval, formatCount(r.Batched.TimeScale), formatCount(r.Unbatched.TimeScale))
	fmt.Fprintf(w, "each checkpoint holds the changes of %v), materialised every %d run checkpoints instead of %d\n",
		wl.CheckpointInterval, r.RunMaterializeEvery, r.MaterializeEvery)
	fmt.Fprintf(w, "batched: the writers split over %d process(es), each with a storage of its own\n", r.Processes)
	fmt.Fprintln(w, "the estimate is the month's model for the run's checkpoints, from the calibration's figures")
	fmt.Fprintf(w, "engine options beyond the defaults: batched %s; one object per writer %s\n",
		formatOptions(r.Batched.Options), formatOptions(r.Unbatched.Options))
	var t textTable
	t.add("the run", "batched: estimate", "counted", "diff", "one object per writer: estimate", "counted", "diff")
	b, u := compareCounts(r.Batched.RunEstimate, r.Batched.RunCounted), compareCounts(r.Unbatched.RunEstimate, r.Unbatched.RunCounted)
	for i := range b {
		f := formatCount
		if !b[i].request {
			f = func(v float64) string { return formatBytes(int64(v)) }
		}
		t.add(b[i].name, f(b[i].estimate), f(b[i].counted), formatDiff(b[i]), f(u[i].estimate), f(u[i].counted), formatDiff(u[i]))
	}
	t.add("seconds", fmt.Sprintf("%.2f", r.Batched.RunSeconds), "", "", fmt.Sprintf("%.2f", r.Unbatched.RunSeconds), "", "")
	t.write(w)
	for _, side := range []costSide{r.Batched, r.Unbatched} {
		if side.RunLag > 0 {
			fmt.Fprintf(w, "  warning: %s: the run fell %d interval(s) of %s behind its schedule (a busy machine?); the estimate counts the checkpoints taken\n",
				side.Name, side.RunLag, side.RunInterval)
		}
	}
	if r.Agree {
		fmt.Fprintf(w, "  every request count of the estimate is within %.0f %% of the counted one\n\n", costTolerance*100)
	} else {
		fmt.Fprintf(w, "  MISMATCH: a request count of the estimate is more than %.0f %% off the counted one\n\n", costTolerance*100)
	}

	fmt.Fprintf(w, "A month (%d days, %s checkpoints)\n", r.MonthDays, formatCount(r.MonthCheckpoints))
	t = textTable{}
	t.add("", "batched", "one object per writer", "batched saves")
	bm, um := r.Batched.Month, r.Unbatched.Month
	row := func(name string, a, c float64, f func(float64) string) {
		save := "-"
		if c > 0 {
			save = fmt.Sprintf("%.0f %%", (1-a/c)*100)
		}
		t.add(name, f(a), f(c), save)
	}
	bytesF := func(v float64) string { return formatBytes(int64(v)) }
	row("PUT", bm.Puts, um.Puts, formatCount)
	row("GET", bm.Gets, um.Gets, formatCount)
	row("LIST (pages of 1000)", bm.Lists, um.Lists, formatCount)
	row("DELETE", bm.Deletes, um.Deletes, formatCount)
	row("bytes written", bm.BytesPut, um.BytesPut, bytesF)
	row("bytes stored (average)", bm.Stored, um.Stored, bytesF)
	row("objects per checkpoint", r.Batched.Units.PutsPerCheckpoint, r.Unbatched.Units.PutsPerCheckpoint, func(v float64) string { return fmt.Sprintf("%.2f", v) })
	t.write(w)

	fmt.Fprintf(w, "\nPrice a month, list prices of %s (USD; requests + storage)\n", r.PricesDate)
	t = textTable{}
	t.add("", "batched", "one object per writer", "batched saves")
	for i, p := range r.Prices {
		bb, ub := r.Batched.Bills[i], r.Unbatched.Bills[i]
		t.add(p.Name+", "+p.Region,
			fmt.Sprintf("%s (%s + %s)", formatUSD(bb.Total), formatUSD(bb.Requests), formatUSD(bb.Storage)),
			fmt.Sprintf("%s (%s + %s)", formatUSD(ub.Total), formatUSD(ub.Requests), formatUSD(ub.Storage)),
			formatUSD(ub.Total-bb.Total))
	}
	t.write(w)
	if r.Job != nil {
		r.Job.print(w, r.Prices, r.PricesDate)
	}
	fmt.Fprintln(w, "\nPrices (per request; storage per GiB-month):")
	for _, p := range r.Prices {
		fmt.Fprintf(w, "  %-6s PUT %s, GET %s, LIST %s, DELETE %s, storage %s\n", p.Key,
			perThousand(p.Put), perThousand(p.Get), perThousand(p.List), perThousand(p.Delete), fmt.Sprintf("$%.4g", p.Storage))
	}
}

// textTable is a table for people: the first column left-aligned, the
// others right-aligned, two spaces apart.
type textTable struct{ rows [][]string }

func (t *textTable) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *textTable) write(w io.Writer) {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range t.rows {
		var b strings.Builder
		b.WriteString("  ")
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// formatOptions writes engine options as KEY=VALUE, sorted, or "none".
func formatOptions(opts map[string]string) string {
	if len(opts) == 0 {
		return "none"
	}
	var kvs []string
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		kvs = append(kvs, k+"="+opts[k])
	}
	return strings.Join(kvs, ", ")
}

// formatInts writes numbers separated by commas.
func formatInts(xs []int) string {
	var ss []string
	for _, x := range xs {
		ss = append(ss, strconv.Itoa(x))
	}
	return strings.Join(ss, ", ")
}

func perThousand(v float64) string {
	if v == 0 {
		return "free"
	}
	return fmt.Sprintf("$%.4g/1000", v*1000)
}
