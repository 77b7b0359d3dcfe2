// Package benchreport is the JSON report of dstl bench: the types that
// dstl bench writes (--save, --json) and that the repository's chart tool
// (the module under bench/report) reads. The JSON keys are the format;
// both programs use these types, so a change to them reaches both.
package benchreport

import (
	"fmt"
	"time"
)

// Machine describes the computer a benchmark ran on.
type Machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	Memory    int64  `json:"memory_bytes"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
}

// Report is the result of one dstl bench run, on one backend.
type Report struct {
	Machine  Machine           `json:"machine"`
	Backend  string            `json:"backend"`
	BasePath string            `json:"base_path"`
	Start    time.Time         `json:"start"`
	Seconds  float64           `json:"seconds"`
	Config   map[string]string `json:"config"`
	RawPut   string            `json:"raw_put"` // what the SDK baseline does to put an object
	RawGet   string            `json:"raw_get"`
	Append   *Append           `json:"append,omitempty"`
	// Upload is (b) with compression off, the target's rows; and
	// UploadCompressed with compression on (informative), empty when
	// skipped.
	Upload           []Upload `json:"upload"`
	UploadCompressed []Upload `json:"upload_compressed,omitempty"`
	Batching         Batching `json:"batching"`
	Recovery         Recovery `json:"recovery"`
	// Sustained is nil when (f) was skipped.
	Sustained *Sustained `json:"sustained,omitempty"`
	Targets   []Target   `json:"targets"`
}

// Append is section (a): the appender's cost per change.
type Append struct {
	ChangeSize  int       `json:"change_size"`
	NsPerOp     float64   `json:"ns_per_op"` // median of the runs, the appender alone
	MinNsPerOp  float64   `json:"min_ns_per_op"`
	AllocsPerOp int64     `json:"allocs_per_op"`
	Runs        []float64 `json:"runs_ns_per_op"`
	// EncodedNsPerOp is the median with the pre-emptive persists encoded
	// (into a backend that discards them) beside the appender.
	EncodedNsPerOp float64 `json:"encoded_ns_per_op"`
	// TwoWritersNsPerOp is the median time per change of two goroutines
	// appending at once, each to its own writer (alone); Speedup is the
	// changes per second of the two over those of one.
	TwoWritersNsPerOp float64 `json:"two_writers_ns_per_op"`
	Speedup           float64 `json:"two_writers_speedup"`
}

// Upload is one row of section (b): one writer's checkpoint at one
// object size, persist to confirm, beside the backend's Put and the SDK's
// put of as many bytes.
type Upload struct {
	ObjectSize       int64   `json:"object_size"` // average stored size of the engine's objects
	ChangesPerSet    int     `json:"changes_per_object"`
	Compression      bool    `json:"compression"`
	FormatVersion    int     `json:"format_version"`
	StoredPerLogical float64 `json:"stored_per_logical"` // bytes stored per changes' byte: about 1, the changes being random
	// Ratio is the median, over the sets, of the set's persist -> confirm
	// time over the backend's Put of as many bytes (the target); Pairs
	// is how many sets. SDKRatio is the same over the SDK's put.
	Ratio    float64 `json:"ratio"`
	SDKRatio float64 `json:"sdk_ratio"`
	Pairs    int     `json:"pairs"`
	// PersistConfirmP50Ms is the median time from Persist to the end of
	// Confirm; BackendPutP50Ms that of the backend's Put, and RawPutP50Ms
	// that of the SDK's put; each has Pairs samples.
	PersistConfirmP50Ms float64 `json:"persist_confirm_p50_ms"`
	BackendPutP50Ms     float64 `json:"backend_put_p50_ms"`
	BackendPutSamples   int     `json:"backend_put_samples"`
	RawPutP50Ms         float64 `json:"raw_put_p50_ms"`
	RawPutSamples       int     `json:"raw_put_samples"`
	// AppendP50Ms is the median time of a set's appends, which no ratio
	// counts.
	AppendP50Ms float64 `json:"append_p50_ms"`
	// PersistP50Ms and PersistP99Ms are from Persist to the handle.
	PersistP50Ms   float64 `json:"persist_p50_ms"`
	PersistP99Ms   float64 `json:"persist_p99_ms"`
	PersistSamples int     `json:"persist_samples"` // persists the percentiles come from
	// BackendPutBPS is the bytes the backend's Puts of the sets put per
	// second of their time.
	BackendPutBPS float64 `json:"backend_put_bytes_per_second"`
	// PipelinedBPS is the writer's throughput, in changes' bytes per
	// second, when it appends the next set while the last one is
	// persisted (one persist at a time, as a task whose checkpoints are
	// asynchronous does), and PipelinedRatio that over BackendPutBPS.
	PipelinedBPS    float64   `json:"pipelined_bytes_per_second"`
	PipelinedRatio  float64   `json:"pipelined_ratio"`
	PipelinedRounds []float64 `json:"pipelined_rounds"`
}

// Batching is section (c): objects written as writers persist together.
type Batching struct {
	PersistEvery string     `json:"persist_every"`
	Delay        string     `json:"batch_persist_delay"`
	Rows         []BatchRow `json:"rows"`
}

// BatchRow is one writer count of section (c).
type BatchRow struct {
	Writers        int     `json:"writers"`
	Checkpoints    int     `json:"checkpoints"`
	PersistsPerSec float64 `json:"persists_per_second"`
	ObjectsPerSec  float64 `json:"objects_per_second"`
	ObjectsPerCP   float64 `json:"objects_per_checkpoint"`
	Skipped        int     `json:"skipped_ticks"` // ticks a writer missed, its last persist still running
	PersistP50Ms   float64 `json:"persist_p50_ms"`
	PersistP99Ms   float64 `json:"persist_p99_ms"`
	PersistSamples int     `json:"persist_samples"` // persists the percentiles come from
}

// Recovery is section (d): bytes fetched for bytes needed, and the read
// throughput beside the SDK's get.
type Recovery struct {
	Writers        int       `json:"writers"`
	Objects        int       `json:"objects"`
	ObjectBytes    int64     `json:"object_bytes"`
	PartFetched    int64     `json:"one_writer_bytes_fetched"`
	PartNeeded     int64     `json:"one_writer_bytes_needed"`
	PartRequests   int64     `json:"one_writer_requests"`
	FetchedPerNeed float64   `json:"fetched_per_needed"`
	FullRequests   int64     `json:"full_requests"`
	FullNeeded     int64     `json:"full_bytes_needed"`
	FullFetched    int64     `json:"full_bytes_fetched"`
	EngineBPS      float64   `json:"engine_bytes_per_second"` // change sets' bytes read and decoded per second
	RawBPS         float64   `json:"raw_bytes_per_second"`    // bytes got per second by the SDK
	Ratio          float64   `json:"ratio"`
	EngineRounds   []float64 `json:"engine_rounds"`
	RawRounds      []float64 `json:"raw_rounds"`
	EngineReads    int       `json:"engine_full_reads"` // full recoveries, over all rounds
	RawReads       int       `json:"raw_full_reads"`    // passes of the SDK over every object, over all rounds
}

// Sustained is section (f): sustained logging beside the backend's
// parallel Put.
type Sustained struct {
	CheckpointEvery string         `json:"checkpoint_every"`
	Delay           string         `json:"batch_persist_delay"`
	RoundTime       string         `json:"round_time"`
	Warmup          string         `json:"warmup,omitempty"`  // of each round, before its window of RoundTime
	RawThreads      int            `json:"raw_parallel_puts"` // the SDK's puts at once: upload.num-threads
	Rows            []SustainedRow `json:"rows"`
}

// SustainedRow is one writer count of section (f).
type SustainedRow struct {
	Writers           int     `json:"writers"`
	Checkpoints       int     `json:"checkpoints"` // completed, over all rounds
	CheckpointsPerSec float64 `json:"checkpoints_per_second"`
	Objects           int64   `json:"objects"` // objects the engine put, over all rounds
	ObjectsPerSec     float64 `json:"objects_per_second"`
	ObjectSize        int64   `json:"object_size"`             // average stored size of the engine's objects
	EngineBPS         float64 `json:"engine_bytes_per_second"` // changes' bytes of confirmed checkpoints per second
	// BackendBPS is the bytes put per second by the backend's own Put
	// (what the engine stores with), RawThreads puts at once, and Ratio
	// the engine's over it: the target's ratio.
	BackendBPS    float64   `json:"backend_put_bytes_per_second"`
	Ratio         float64   `json:"ratio"`
	BackendRounds []float64 `json:"backend_put_rounds"`
	BackendPuts   int       `json:"backend_puts"` // over all rounds
	// RawBPS is the bytes put per second by the SDK used directly,
	// RawThreads puts at once, and SDKRatio the engine's over it
	// (informative: the SDK's put does not make the object appear whole or
	// not at all, as the backend's Put does).
	RawBPS       float64   `json:"raw_bytes_per_second"`
	SDKRatio     float64   `json:"sdk_ratio"`
	EngineRounds []float64 `json:"engine_rounds"`
	RawRounds    []float64 `json:"raw_rounds"`
	RawPuts      int       `json:"raw_puts"` // over all rounds
	// LoopBPS is the bytes put per second by the raw loop: the writers'
	// changes copied into objects by as many producers and put with the
	// backend's Put, RawThreads at once, without the engine (its
	// producers' and its store's work alone); LoopRatio is the engine's
	// over it (informative: how close the engine comes to the work it
	// cannot avoid on this machine).
	LoopBPS        float64   `json:"loop_bytes_per_second,omitempty"`
	LoopRatio      float64   `json:"loop_ratio,omitempty"`
	LoopRounds     []float64 `json:"loop_rounds,omitempty"`
	LoopPuts       int       `json:"loop_puts,omitempty"` // over all rounds
	PersistP50Ms   float64   `json:"persist_p50_ms"`
	PersistP99Ms   float64   `json:"persist_p99_ms"`
	PersistSamples int       `json:"persist_samples"` // checkpoints the percentiles come from
}

// Target is one target of the design, met or not.
type Target struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Target string `json:"target"`
	Met    bool   `json:"met"`
	// None is true for a row kept in the report where the design sets no
	// target on this store; Target says why, and Met does not count.
	None bool `json:"no_target,omitempty"`
}

// FormatBytes writes n bytes in the largest binary unit below it, with
// three significant digits: "812 B", "1.50 KiB", "64.0 MiB", "2.00 GiB",
// as dstl's reports and the chart tool write them.
func FormatBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for (v >= 1024 || v <= -1024) && i < len(units)-1 {
		v /= 1024
		i++
	}
	switch {
	case v >= 100 || v <= -100:
		return fmt.Sprintf("%.0f %ciB", v, units[i])
	case v >= 10 || v <= -10:
		return fmt.Sprintf("%.1f %ciB", v, units[i])
	}
	return fmt.Sprintf("%.2f %ciB", v, units[i])
}
