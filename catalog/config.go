package catalog

import (
	"cmp"
	"crypto/rand"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
)

// Defaults of [Config].
const (
	// DefaultMaxParallelism is the number of key groups, as Flink's
	// default maximum parallelism.
	DefaultMaxParallelism = 128
	// DefaultRetain is how many complete checkpoints are kept.
	DefaultRetain = 1
	// DefaultGrace is how old an object that no kept checkpoint
	// references must be before the deletion rule deletes it: a day, as
	// SlateDB's collector waits. What it protects, and what keeping a
	// day of superseded objects costs, is in docs/CATALOG.md. It is
	// package collect's default grace.
	DefaultGrace = collect.DefaultGrace
)

// Config configures a process's membership of a job's catalog. The zero
// value of every field but JobID and Instances is its default (Process 0
// is the leader's).
type Config struct {
	// JobID is the job: its objects and its catalog are under its prefix
	// ([objname.JobPrefix]). Required.
	JobID string
	// Instances is how many instances the job runs as (P), 1 to
	// [objname.MaxInstances]. Required.
	Instances int
	// Processes is how many processes run the instances (Q), 1 to
	// Instances: process p runs the instances of [InstancesOf](p,
	// Processes, Instances) and commits their parts of a checkpoint in
	// one object. The default is Instances: each process runs one
	// instance.
	Processes int
	// Process is this process's index, 0 to Processes-1 (a StatefulSet's
	// ordinal). Process 0 leads: in the aligned mode it learns which
	// checkpoints are complete and tells the others through its commits,
	// and it applies the deletion rule. The default is 0.
	Process int
	// MaxParallelism is the number of key groups, at least Instances and
	// at most dstl.MaxKeyGroup+1. The default is
	// [DefaultMaxParallelism].
	MaxParallelism int
	// KeyGroups, when set, assigns each instance its key-group range (one
	// range per instance, not overlapping, within MaxParallelism). By
	// default, the key groups are split evenly ([RangeOf]), as Flink
	// does.
	KeyGroups []dstl.KeyGroupRange
	// Mode is [Aligned] or [Independent]. The default is Aligned.
	Mode Mode
	// Retain is how many complete checkpoints are kept (per process in
	// the independent mode), at least 1. The default is [DefaultRetain].
	Retain int
	// Grace is how old an object that no kept checkpoint references must
	// be, by the store's clock and by the time in its name, before the
	// deletion rule deletes it. It must exceed the longest an upload
	// takes from its start to the commit that references it and the
	// clocks' skew. The default is a day ([DefaultGrace]); [NoGrace] is
	// none. Another negative value is not valid.
	Grace time.Duration
	// SweepInterval is how often [Member.Collect] lists the job's objects
	// to delete those that no kept checkpoint references (at most once
	// per interval; the commits of dropped checkpoints are deleted at
	// every call). The default is a quarter of the grace, at least a
	// minute; a negative value is not valid.
	SweepInterval time.Duration
	// RestoreFrom, when this process starts a generation, restores the
	// retained checkpoint of that number rather than the latest one
	// (aligned mode only): one of the last Retain complete checkpoints of
	// the latest generation, or the one it restored while it keeps it;
	// any other fails with ErrNoCheckpoint. The default, 0, is the
	// latest; a negative value is not valid.
	RestoreFrom int64
	// Owner names this process in its claims and fences. The default is
	// a random id.
	Owner string
	// Now is the clock. The default is time.Now.
	Now func() time.Time
	// MeterProvider receives the catalog's metrics (see docs/CATALOG.md).
	// The default is the global provider of go.opentelemetry.io/otel, a
	// no-op unless the program installs one.
	MeterProvider metric.MeterProvider
	// Logger receives what the catalog does that no error reports: a
	// join that started a generation, a fence found, a collection's
	// outcome. The default is slog.Default().
	Logger *slog.Logger
}

// NoGrace is the value of Config.Grace (and of the deletion rule's
// collect.Options.Grace) for no grace period at all: an object that no
// kept checkpoint references is deleted however young. Only for tests and
// jobs that stopped. It is collect.NoGrace.
const NoGrace = collect.NoGrace

func (c Config) withDefaults() (Config, error) {
	c.Processes = cmp.Or(c.Processes, c.Instances)
	c.MaxParallelism = cmp.Or(c.MaxParallelism, DefaultMaxParallelism)
	c.Mode = cmp.Or(c.Mode, Aligned)
	c.Retain = cmp.Or(c.Retain, DefaultRetain)
	c.Grace = cmp.Or(c.Grace, DefaultGrace)
	if c.Grace < 0 && c.Grace != NoGrace {
		return c, fmt.Errorf("catalog: grace %v: want 0 (the default), NoGrace or more", c.Grace)
	}
	c.SweepInterval = cmp.Or(c.SweepInterval, max(c.Grace/4, time.Minute)) // a minute under NoGrace
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Owner == "" {
		c.Owner = rand.Text()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.JobID == "":
		return c, fmt.Errorf("catalog: no job id")
	case c.Instances < 1 || c.Instances > objname.MaxInstances:
		return c, fmt.Errorf("catalog: instances %d: want 1 to %d", c.Instances, objname.MaxInstances)
	case c.Processes < 1 || c.Processes > c.Instances:
		return c, fmt.Errorf("catalog: processes %d: want 1 to the instances, %d", c.Processes, c.Instances)
	case c.Process < 0 || c.Process >= c.Processes:
		return c, fmt.Errorf("catalog: process %d: want 0 to %d", c.Process, c.Processes-1)
	case c.MaxParallelism < c.Instances || c.MaxParallelism > dstl.MaxKeyGroup+1:
		return c, fmt.Errorf("catalog: max parallelism %d: want %d to %d", c.MaxParallelism, c.Instances, dstl.MaxKeyGroup+1)
	case c.Mode != Aligned && c.Mode != Independent:
		return c, fmt.Errorf("catalog: mode %q: want %q or %q", c.Mode, Aligned, Independent)
	case c.Retain < 1:
		return c, fmt.Errorf("catalog: retain %d: want at least 1", c.Retain)
	case c.SweepInterval < 0:
		return c, fmt.Errorf("catalog: sweep interval %v is negative", c.SweepInterval)
	case c.RestoreFrom < 0:
		return c, fmt.Errorf("catalog: restore from checkpoint %d is negative", c.RestoreFrom)
	}
	if c.KeyGroups == nil {
		c.KeyGroups = make([]dstl.KeyGroupRange, c.Instances)
		for i := range c.Instances {
			c.KeyGroups[i] = RangeOf(i, c.Instances, c.MaxParallelism)
		}
	} else if len(c.KeyGroups) != c.Instances {
		return c, fmt.Errorf("catalog: %d key-group ranges for %d instances", len(c.KeyGroups), c.Instances)
	}
	if err := checkAssignment(c.KeyGroups, c.MaxParallelism); err != nil {
		return c, fmt.Errorf("catalog: key groups: %w", err)
	}
	return c, nil
}

// RangeOf returns the key groups of instance i of p, splitting
// maxParallelism key groups evenly as Flink does.
func RangeOf(i, p, maxParallelism int) dstl.KeyGroupRange {
	return dstl.KeyGroupRange{Start: (i*maxParallelism + p - 1) / p, End: ((i+1)*maxParallelism+p-1)/p - 1}
}

// InstancesOf returns the first and the last of the instances that
// process p of processes runs, when instances instances are split evenly
// over them (as key groups over instances: [RangeOf]).
func InstancesOf(p, processes, instances int) (first, last int) {
	r := RangeOf(p, processes, instances)
	return r.Start, r.End
}

// ProcessOf returns the process that runs instance i when instances
// instances are split evenly over processes.
func ProcessOf(i, processes, instances int) int {
	// RangeOf's start of process p is ceil(p*instances/processes): the
	// process of i is the largest p whose start is at most i.
	p := (i*processes + processes - 1) / instances
	for p > 0 && RangeOf(p, processes, instances).Start > i {
		p--
	}
	for p+1 < processes && RangeOf(p+1, processes, instances).Start <= i {
		p++
	}
	return p
}
