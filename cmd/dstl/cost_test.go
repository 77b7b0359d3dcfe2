package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCostEstimateMatchesCounted runs dstl cost on small workloads and
// checks that the estimate for the run's own duration is within 5 % of
// the requests the counting wrapper saw, on both sides, and that the
// counts are the ones the workload implies.
func TestCostEstimateMatchesCounted(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		// objects per checkpoint, batched and not
		batched, unbatched float64
		deletes            bool // the run deletes objects
		// varies: the batches differ from checkpoint to checkpoint (a
		// batch cut by size where the tasks' timing decides how they
		// pair), so that tens of requests differ by more than 5 % between
		// two samples of the same engine: the counts are checked within
		// this, and the command's verdict is not.
		varies float64
	}{
		{"8 writers, materialised twice", []string{"--writers", "8", "--change-rate", "64KiB", "--materialize-interval", "30s", "--run-checkpoints", "31"}, 1, 8, true, 0},
		{"one writer, 3 retained", []string{"--writers", "1", "--change-rate", "8KiB", "--retain", "3", "--materialize-interval", "20s", "--run-checkpoints", "30"}, 1, 1, true, 0},
		{"batches split by size", []string{"--writers", "8", "--change-rate", "64KiB", "--option", "batch.persist-size-threshold=200KiB",
			"--option", "batch.persist-delay=100ms", "--materialize-interval", "30s", "--run-checkpoints", "30"}, 4, 8, true, 0.2},
		{"4 processes of 2 writers", []string{"--writers", "8", "--processes", "4", "--change-rate", "64KiB", "--materialize-interval", "30s",
			"--run-checkpoints", "30"}, 4, 8, true, 0},
		// Pre-emptive persists come as the appends go: how many share an
		// object, and which checkpoint's restore reads them, follow the
		// goroutines' timing (under the race detector the counts of two
		// samples differ by up to half): checked for what it does, not
		// for the count.
		{"pre-emptive persists", []string{"--writers", "4", "--change-rate", "64KiB", "--option", "preemptive-persist-threshold=64KiB",
			"--option", "batch.persist-delay=5ms", "--materialize-interval", "1m", "--run-checkpoints", "30"}, 0, 8, true, 1},
		{"local disk, 2 KiB changes", []string{"--writers", "4", "--change-size", "2048", "--change-rate", "32KiB", "--base-path", "file://" + t.TempDir(),
			"--materialize-interval", "20s", "--run-checkpoints", "30"}, 1, 4, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			// A short interval: on a loaded machine the checkpoints overrun
			// it, which the estimate does not depend on.
			args := append([]string{"cost", "--json", "--run-interval", "20ms", "--calibrate", "1"}, tc.args...)
			code := run(context.Background(), args, &out, &errOut)
			var rep costReport
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("exit %d: %v\nstdout:\n%s\nstderr:\n%s", code, err, out.String(), errOut.String())
			}
			tol := costTolerance
			if tc.varies > 0 {
				tol = tc.varies
			} else if code != exitOK {
				t.Errorf("exit %d, stderr %q; calibration: batched %+v, one object per writer %+v", code, errOut.String(), rep.Batched.Units, rep.Unbatched.Units)
			}
			if !rep.Agree && tc.varies == 0 {
				t.Errorf("report says the estimate disagrees")
			}
			for _, side := range []costSide{rep.Batched, rep.Unbatched} {
				for _, c := range compareCounts(side.RunEstimate, side.RunCounted) {
					if c.request && math.Abs(c.diff()) > tol && math.Abs(c.estimate-c.counted) > 0.5 {
						t.Errorf("%s: %s estimated %.1f, counted %.0f (%+.1f%%)", side.Name, c.name, c.estimate, c.counted, c.diff()*100)
					}
				}
				if side.RunCounted.Puts < float64(side.RunCheckpoints) || side.RunCounted.Gets < 1 || side.RunCounted.Lists != 1 {
					t.Errorf("%s: implausible counts %+v for %d checkpoints", side.Name, side.RunCounted, side.RunCheckpoints)
				}
				if got := side.RunCounted.Deletes > 0; got != tc.deletes {
					t.Errorf("%s: %v deletes, want some: %v", side.Name, side.RunCounted.Deletes, tc.deletes)
				}
			}
			// Batching: the objects per checkpoint the workload implies.
			if got := rep.Batched.Units.PutsPerCheckpoint; tc.batched > 0 && (got < tc.batched || got >= tc.unbatched && tc.unbatched > 1) {
				t.Errorf("batched: %.2f objects per checkpoint, want from %v to under %v", got, tc.batched, tc.unbatched)
			}
			if tc.batched == 0 && rep.Batched.Units.PutsPerCheckpoint >= rep.Unbatched.Units.PutsPerCheckpoint {
				t.Errorf("batched: %.2f objects per checkpoint, not fewer than unbatched %.2f", rep.Batched.Units.PutsPerCheckpoint, rep.Unbatched.Units.PutsPerCheckpoint)
			}
			if rep.Unbatched.Units.PutsPerCheckpoint < tc.unbatched {
				t.Errorf("unbatched: %.2f objects per checkpoint, want at least %v", rep.Unbatched.Units.PutsPerCheckpoint, tc.unbatched)
			}
		})
	}
}

// TestCostModelRun checks the model of a run from a cold start against
// counts worked out by hand, so that a wrong formula fails even where the
// engine agrees.
func TestCostModelRun(t *testing.T) {
	// Restores: 1.5 GETs per object restored up to 2 checkpoints, 2 at 4
	// (the reader's cache overflowing), linear between, 2 past 4.
	u := costUnits{PutsPerCheckpoint: 2, StoredPerCheckpoint: 1000, RestoreCheckpoints: []int{1, 2, 4}, RestoreGets: []float64{3, 6, 16},
		RestoreObjects: []float64{2, 4, 8}}
	for _, tc := range []struct {
		k, m, n int
		want    costCounts
	}{
		// materialised after 3 and 6; one retained: checkpoints 1-3 go
		// once 4 completes, 4-6 once 7 does; the restore of 8 reads 7-8.
		{8, 3, 1, costCounts{Puts: 16, Gets: 6, Lists: 1, Deletes: 12, BytesPut: 8000, Stored: 2000}},
		// the restore of 3 reads 1-3: 1.75 GETs for each of 6 objects.
		{3, 3, 1, costCounts{Puts: 6, Gets: 10.5, Lists: 1, Deletes: 0, BytesPut: 3000, Stored: 3000}},
		{4, 3, 1, costCounts{Puts: 8, Gets: 3, Lists: 1, Deletes: 6, BytesPut: 4000, Stored: 1000}},
		// two retained: checkpoints 1-3 go once 5 completes.
		{5, 3, 2, costCounts{Puts: 10, Gets: 6, Lists: 1, Deletes: 6, BytesPut: 5000, Stored: 2000}},
		{4, 3, 2, costCounts{Puts: 8, Gets: 3, Lists: 1, Deletes: 0, BytesPut: 4000, Stored: 4000}},
		{1, 1, 1, costCounts{Puts: 2, Gets: 3, Lists: 1, Deletes: 0, BytesPut: 1000, Stored: 1000}},
		// past the measured restores: 16 GETs for 4, so 32 for 8.
		{8, 8, 1, costCounts{Puts: 16, Gets: 32, Lists: 1, Deletes: 0, BytesPut: 8000, Stored: 8000}},
	} {
		if got := costModel(u, runPlan(tc.k, tc.m, tc.n)); got != tc.want {
			t.Errorf("costModel(run k=%d, m=%d, n=%d) = %+v, want %+v", tc.k, tc.m, tc.n, got, tc.want)
		}
	}
}

func TestCostMonthAndBill(t *testing.T) {
	w := costWorkload{Writers: 64, CheckpointInterval: 10e9, ChangeRate: 1 << 20, ChangeSize: 100, Retain: 1,
		MaterializeInterval: 40e9, Restores: 2, GCRuns: 30}
	// A materialisation every 4 checkpoints; a restore reads 1 to 4 of
	// them: 3, 6, 10.5 or 16 GETs, 8.875 on average.
	u := costUnits{PutsPerCheckpoint: 1000, StoredPerCheckpoint: 10 << 20, RestoreCheckpoints: []int{1, 2, 4}, RestoreGets: []float64{3, 6, 16},
		RestoreObjects: []float64{1000, 2000, 4000}}
	m := costModel(u, monthPlan(w, 1000))
	// 2.5 checkpoints alive on average: 2500 objects, 3 pages a listing.
	want := costCounts{Puts: 259200 * 1000, Gets: 2 * 8.875, Lists: 30 * 3, Deletes: 259200 * 1000, BytesPut: 259200 * (10 << 20), Stored: 2.5 * (10 << 20)}
	if m != want {
		t.Errorf("month = %+v, want %+v", m, want)
	}
	p := price{Key: "x", Put: 0.005 / 1000, Get: 0.0004 / 1000, List: 0.005 / 1000, Storage: 0.023, ListPage: 5000}
	b := bill(p, w, u)
	// Pages of 5000: one a listing.
	wantReq := 259200*1000*0.005/1000 + 17.75*0.0004/1000 + 30*0.005/1000
	wantSt := 2.5 * 10 / 1024 * 0.023
	if math.Abs(b.Requests-wantReq) > 1e-9 || math.Abs(b.Storage-wantSt) > 1e-9 || math.Abs(b.Total-wantReq-wantSt) > 1e-9 {
		t.Errorf("bill = %+v, want requests %v, storage %v", b, wantReq, wantSt)
	}
}

// TestCostRunIsNoIdentity: the run's estimate comes from the calibration's
// figures, not from the run's own counts, so figures that are off make
// the check fail.
func TestCostRunIsNoIdentity(t *testing.T) {
	right := costUnits{PutsPerCheckpoint: 2, StoredPerCheckpoint: 1000, RestoreCheckpoints: []int{1, 2, 3}, RestoreGets: []float64{2, 4, 6},
		RestoreObjects: []float64{2, 4, 6}}
	counted := costModel(right, runPlan(10, 3, 1))
	for _, tc := range []struct {
		name string
		u    costUnits
		plan costPlan
	}{
		{"a third more objects per checkpoint", costUnits{PutsPerCheckpoint: 3, StoredPerCheckpoint: 1000, RestoreCheckpoints: []int{1, 2, 3}, RestoreGets: []float64{3, 6, 9},
			RestoreObjects: []float64{3, 6, 9}}, runPlan(10, 3, 1)},
		{"two GETs per object restored", costUnits{PutsPerCheckpoint: 2, StoredPerCheckpoint: 1000, RestoreCheckpoints: []int{1, 2, 3}, RestoreGets: []float64{4, 8, 12},
			RestoreObjects: []float64{2, 4, 6}}, runPlan(10, 3, 1)},
		{"materialised every 5", right, runPlan(10, 5, 1)},
		{"two retained", right, runPlan(10, 3, 2)},
	} {
		est := costModel(tc.u, tc.plan)
		agree := true
		for _, c := range compareCounts(est, counted) {
			agree = agree && (!c.request || c.ok())
		}
		if agree {
			t.Errorf("%s: estimate %+v agrees with %+v", tc.name, est, counted)
		}
	}
}

func TestCostCountComparison(t *testing.T) {
	for _, tc := range []struct {
		estimate, counted float64
		ok                bool
	}{
		{100, 105, true}, {100, 106, false}, {5.4, 5, true}, {5.6, 5, false}, {0.4, 0, true}, {1, 0, false}, {44, 42, true},
	} {
		if got := (countComparison{estimate: tc.estimate, counted: tc.counted, request: true}).ok(); got != tc.ok {
			t.Errorf("estimate %v, counted %v: ok %v, want %v", tc.estimate, tc.counted, got, tc.ok)
		}
	}
}

// TestCostOverrunIsNotAModelError: a run whose checkpoints overrun its
// interval (1ms: every checkpoint takes longer) is estimated at the
// checkpoints it took; its lag is a warning, not a mismatch. One writer:
// two writers' persists that a loaded machine spreads beyond the batch
// delay split a checkpoint's batch, which is a count the timing decides
// (see TestCostEstimateMatchesCounted), not the overrun under test.
func TestCostOverrunIsNotAModelError(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"cost", "--json", "--calibrate", "3", "--run-interval", "1ms",
		"--writers", "1", "--change-rate", "8KiB", "--materialize-interval", "30s", "--run-checkpoints", "10"}, &out, &errOut)
	var rep costReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d: %v\n%s", code, err, errOut.String())
	}
	if code != exitOK || !rep.Agree {
		t.Errorf("exit %d (agree=%v): a run that fell behind its compressed schedule is reported as the estimate being off", code, rep.Agree)
		for _, s := range []costSide{rep.Batched, rep.Unbatched} {
			t.Logf("%s: estimate %+v, counted %+v", s.Name, s.RunEstimate, s.RunCounted)
		}
		if rep.Job != nil {
			t.Logf("the rest of the job: estimate %+v, counted %+v", rep.Job.RunEstimate, rep.Job.RunCounted)
		}
	}
	for _, s := range []costSide{rep.Batched, rep.Unbatched} {
		if s.RunEstimate.Puts != s.Units.PutsPerCheckpoint*10 {
			t.Errorf("%s: %v PUTs estimated, want 10 checkpoints of %v", s.Name, s.RunEstimate.Puts, s.Units.PutsPerCheckpoint)
		}
	}
	rep.Batched.RunLag = 3
	var text bytes.Buffer
	rep.print(&text)
	if !strings.Contains(text.String(), "warning: batched: the run fell 3 interval(s)") {
		t.Errorf("no warning of the lag in:\n%s", text.String())
	}
}

// TestCostRunMaterializes: a job whose materialisation period is longer
// than a run is compressed so that the run materialises, deletes and
// reaches its steady state.
func TestCostRunMaterializes(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"cost", "--json", "--calibrate", "2", "--run-interval", "5ms",
		"--writers", "4", "--checkpoint-interval", "2s", "--change-rate", "16KiB"}, &out, &errOut)
	var rep costReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d: %v\n%s", code, err, errOut.String())
	}
	if code != exitOK {
		t.Errorf("exit %d\n%s", code, errOut.String())
	}
	if rep.MaterializeEvery != 300 || rep.RunMaterializeEvery != 5 {
		t.Errorf("materialised every %d checkpoints, in the run every %d; want 300 and 5", rep.MaterializeEvery, rep.RunMaterializeEvery)
	}
	for _, s := range []costSide{rep.Batched, rep.Unbatched} {
		if s.RunCounted.Deletes == 0 {
			t.Errorf("%s: the run deleted nothing in %d checkpoints", s.Name, s.RunCheckpoints)
		}
		// At the end at most a run period and the retained checkpoint.
		if max := 6 * s.Units.StoredPerCheckpoint; s.RunCounted.Stored > max*1.05 {
			t.Errorf("%s: %v bytes stored at the end, want at most %v", s.Name, s.RunCounted.Stored, max)
		}
	}
	var text bytes.Buffer
	rep.print(&text)
	if !strings.Contains(text.String(), "materialised every 5 run checkpoints instead of 300") {
		t.Errorf("the text does not say how the run was scaled:\n%s", text.String())
	}
}

// TestCostChangeRateRounded: a --change-rate that is not a whole number
// of changes per writer per checkpoint is named in a warning.
func TestCostChangeRateRounded(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"cost", "--calibrate", "1", "--run-interval", "20ms", "--run-checkpoints", "2",
		"--writers", "4", "--change-rate", "10", "--materialize-interval", "20s"}, &out, &errOut)
	if code != exitOK || !strings.Contains(errOut.String(), "warning: --change-rate") {
		t.Errorf("exit %d, stderr %q: want a warning naming --change-rate", code, errOut.String())
	}
}

func TestCostPrices(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"s3": {"put": "0.006/1000", "storage": 0.03}, "azure": {"get": "$0.004/10,000"}}`), 0o644)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"s3": {"puts": 1}}`), 0o644)
	null := filepath.Join(dir, "null.json")
	os.WriteFile(null, []byte(`{"s3": {"put": null}}`), 0o644)
	for _, tc := range []struct {
		overrides []string
		file      string
		check     func([]price) bool
		err       string
	}{
		{overrides: []string{"s3.put=0.006/1000"}, check: func(p []price) bool { return p[0].Put == 0.006/1000 }},
		{overrides: []string{"gcs.storage=$0.026"}, check: func(p []price) bool { return p[1].Storage == 0.026 }},
		{overrides: []string{"azure.delete=0"}, check: func(p []price) bool { return p[2].Delete == 0 }},
		{file: good, check: func(p []price) bool { return p[0].Put == 0.006/1000 && p[0].Storage == 0.03 && p[2].Get == 0.004/10000 }},
		{overrides: []string{"s4.put=1"}, err: `unknown provider "s4"`},
		{overrides: []string{"s3.puts=1"}, err: `unknown field "puts"`},
		{overrides: []string{"s3.put=-1"}, err: `is not a price`},
		{overrides: []string{"s3.put=1/0"}, err: `no positive count`},
		{overrides: []string{"s3put"}, err: `want PROVIDER.FIELD=PRICE`},
		{file: bad, err: `unknown field "puts"`},
		{file: filepath.Join(dir, "missing.json"), err: "no such file"},
		{file: null, err: "s3.put: want a number or a string, got null"},
	} {
		p := defaultPrices()
		var err error
		for _, o := range tc.overrides {
			if err = setPrice(p, o); err != nil {
				break
			}
		}
		if err == nil && tc.file != "" {
			err = loadPrices(p, tc.file)
		}
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v %s: error %v, want one with %q", tc.overrides, tc.file, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%v %s: %v", tc.overrides, tc.file, err)
		case tc.err == "" && !tc.check(p):
			t.Errorf("%v %s: prices not applied: %+v", tc.overrides, tc.file, p)
		}
	}
}

func TestCostUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--writers", "0"}, "--writers 0"},
		{[]string{"--checkpoint-interval", "0s"}, "--checkpoint-interval 0s"},
		{[]string{"--change-rate", "lots"}, "--change-rate"},
		{[]string{"--change-size", "0"}, "--change-size 0"},
		{[]string{"--retain", "0"}, "--retain 0"},
		{[]string{"--materialize-interval", "1s"}, "--materialize-interval 1s"},
		{[]string{"--restores", "-1"}, "--restores -1"},
		{[]string{"--gc-runs", "-2"}, "--gc-runs -2"},
		{[]string{"--run-interval", "-1s"}, "--run-interval -1s"},
		{[]string{"--run-checkpoints", "-1"}, "--run-checkpoints -1"},
		{[]string{"--calibrate", "0"}, "--calibrate 0"},
		{[]string{"--processes", "0"}, "--processes 0"},
		{[]string{"--writers", "4", "--processes", "5"}, "--processes 5"},
		{[]string{"--run-materialize-every", "-1"}, "--run-materialize-every -1"},
		{[]string{"--price", "s3.nope=1"}, `unknown field "nope"`},
		{[]string{"--prices", "/nonexistent/prices.json"}, "--prices"},
		{[]string{"--change-rate", "1GiB", "--run-checkpoints", "100"}, "--run-checkpoints 100"},
		{[]string{"--base-path", "nope://x"}, "nope"},
		{[]string{"--option", "batch.persist-delay=-1s"}, "batch.persist-delay"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"cost"}, tc.args...), &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d naming %q", tc.args, code, errOut.String(), exitUsage, tc.want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"cost", "--help"}, &out, &errOut); code != exitOK || !strings.Contains(errOut.String(), "--checkpoint-interval") {
		t.Errorf("--help: exit %d, %q", code, errOut.String())
	}
}

// TestCostJob: the job beyond the log (the catalog's commits, collections
// and sweeps, and the snapshots) is counted in the run and agrees with
// its estimate, and the month's model takes a put and a commit's gets
// per process and checkpoint.
func TestCostJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"8 instances in 2 processes, snapshots", []string{"--instances", "8", "--processes", "2", "--state-size", "4KiB"}},
		{"one process", []string{"--instances", "4", "--processes", "1"}},
		{"kafka", []string{"--instances", "8", "--processes", "2", "--coordinator", "kafka"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"cost", "--json", "--run-interval", "20ms", "--calibrate", "1", "--change-rate", "64KiB",
				"--materialize-interval", "30s", "--run-checkpoints", "30"}, tc.args...)
			code := run(context.Background(), args, &out, &errOut)
			var rep costReport
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("exit %d: %v\n%s\n%s", code, err, out.String(), errOut.String())
			}
			j := rep.Job
			if j == nil {
				t.Fatal("no job in the report")
			}
			for _, c := range compareCounts(j.RunEstimate, j.RunCounted) {
				if c.request && !c.ok() {
					t.Errorf("%s: estimate %v, counted %v", c.name, c.estimate, c.counted)
				}
			}
			q := float64(j.Processes)
			k := rep.MonthCheckpoints
			switch j.Coordinator {
			case "catalog":
				if j.RunCounted.Puts == 0 || j.MonthCoordinator.Puts < q*k || j.MonthCoordinator.Puts > q*k*1.01 {
					t.Errorf("catalog: run %+v, month %+v", j.RunCounted, j.MonthCoordinator)
				}
			case "kafka":
				if j.RunCounted.Puts != 0 || j.MonthCoordinator.Puts < q*k || j.MonthCoordinator.Lists > k {
					t.Errorf("kafka: run %+v, month %+v", j.RunCounted, j.MonthCoordinator)
				}
			}
			if (j.StateSize > 0) != (j.MonthSnapshots.Puts > 0) || len(j.Totals) != len(rep.Prices) || j.Totals[0].Total <= rep.Batched.Bills[0].Total {
				t.Errorf("snapshots %+v, totals %+v", j.MonthSnapshots, j.Totals)
			}
		})
	}
}
