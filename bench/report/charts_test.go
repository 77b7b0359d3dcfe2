package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const chartFixture = "testdata/bench-report.json"

// chartFiles are the charts the fixture, which has every section, gives.
var chartFiles = []string{"b-upload-ratio.svg", "c-batching.svg", "d-recovery-ratio.svg", "e-persist-latency.svg", "f-sustained-ratio.svg"}

func TestReportCharts(t *testing.T) {
	data, err := os.ReadFile(chartFixture)
	if err != nil {
		t.Fatal(err)
	}
	// One backend's report, as dstl bench --save writes it.
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		t.Fatal(err)
	}
	single := filepath.Join(t.TempDir(), "minio.json")
	if err := os.WriteFile(single, all["minio"], 0o644); err != nil {
		t.Fatal(err)
	}
	// Without the sustained section, as older reports are.
	var older map[string]map[string]any
	json.Unmarshal(data, &older)
	for _, r := range older {
		delete(r, "sustained")
	}
	olderData, _ := json.Marshal(older)
	olderPath := filepath.Join(t.TempDir(), "older.json")
	os.WriteFile(olderPath, olderData, 0o644)

	for _, tc := range []struct {
		name   string
		in     string
		charts []string
		runs   []string
	}{
		{"make bench's file", chartFixture, chartFiles, []string{"local (local)", "minio (s3)", "gocloud-mem (gocloud)"}},
		{"one backend's --save", single, chartFiles, []string{"s3 (s3)"}},
		{"no sustained section", olderPath, chartFiles[:4], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "charts")
			var stdout, stderr bytes.Buffer
			if code := run([]string{"--in", tc.in, "--out", out}, &stdout, &stderr); code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			entries, _ := os.ReadDir(out)
			var got []string
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".svg") {
					got = append(got, e.Name())
					svg, _ := os.ReadFile(filepath.Join(out, e.Name()))
					if !bytes.HasPrefix(svg, []byte("<?xml")) || !bytes.Contains(svg, []byte("<svg")) || len(svg) < 2000 {
						t.Errorf("%s: not a drawn SVG (%d bytes)", e.Name(), len(svg))
					}
				}
			}
			if !slices.Equal(got, tc.charts) {
				t.Errorf("charts %v, want %v", got, tc.charts)
			}
			index, err := os.ReadFile(filepath.Join(out, "index.html"))
			if err != nil {
				t.Fatal(err)
			}
			srcs := regexp.MustCompile(`<img src="([^"]+)"`).FindAllStringSubmatch(string(index), -1)
			var refs []string
			for _, m := range srcs {
				refs = append(refs, m[1])
			}
			if !slices.Equal(refs, tc.charts) {
				t.Errorf("index.html shows %v, want %v", refs, tc.charts)
			}
			for _, r := range tc.runs {
				if !strings.Contains(string(index), r) {
					t.Errorf("index.html does not name run %q", r)
				}
			}
			// The JSON is linked by a path relative to the index.
			absIn, _ := filepath.Abs(tc.in)
			rel, err := filepath.Rel(out, absIn)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(index), `href="`+filepath.ToSlash(rel)+`"`) {
				t.Errorf("index.html does not link %s:\n%s", rel, index)
			}
		})
	}
}

func TestReportErrors(t *testing.T) {
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "x.json")
	os.WriteFile(notJSON, []byte("not json"), 0o644)
	notReport := filepath.Join(dir, "y.json")
	os.WriteFile(notReport, []byte(`{"a": {"b": 1}}`), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--out", dir}, exitUsage, "--in is required"},
		{[]string{"--in", chartFixture}, exitUsage, "--out is required"},
		{[]string{"--in", chartFixture, "--out", dir, "more"}, exitUsage, `unexpected arguments ["more"]`},
		{[]string{"--in", filepath.Join(dir, "missing.json"), "--out", dir}, exitRuntime, "--in"},
		{[]string{"--in", notJSON, "--out", dir}, exitFailed, "not a bench report"},
		{[]string{"--in", notReport, "--out", dir}, exitFailed, `run "a": not a bench report`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want %d with %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

// TestLatencyLegendSizes: the persist latency chart's legend names the
// object size of each run where they differ, not the last run's for all.
func TestLatencyLegendSizes(t *testing.T) {
	data, err := os.ReadFile(chartFixture)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := decodeBenchRuns(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		sizes []int64 // the middle row's object size of each run
		want  string
	}{
		{"the same size", []int64{1 << 20, 1 << 20, 1 << 20}, "(b) one writer, 1.00 MiB objects"},
		{"sizes differ", []int64{1 << 20, 4 << 20, 1 << 20}, "(b) one writer, 1.00 MiB / 4.00 MiB objects (by run)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := slices.Clone(runs)
			for i := range rs {
				up := slices.Clone(rs[i].Report.Upload)
				up[len(up)/2].ObjectSize = tc.sizes[i]
				rs[i].Report.Upload = up
			}
			dir := t.TempDir()
			if _, err := writeBenchCharts(rs, chartFixture, dir); err != nil {
				t.Fatal(err)
			}
			svg, err := os.ReadFile(filepath.Join(dir, "e-persist-latency.svg"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(svg), tc.want) {
				t.Errorf("legend without %q", tc.want)
			}
		})
	}
}
