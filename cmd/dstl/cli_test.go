package main

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/backends/azure"
	"github.com/dstlgo/dstl/backends/gcs"
	"github.com/dstlgo/dstl/backends/gocloud"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/backends/s3"
	"github.com/dstlgo/dstl/dstl"
)

// TestBackendDocs checks the options "dstl backends" lists against each
// backend's URL parser: every option listed is taken, and every backend
// registered is documented.
func TestBackendDocs(t *testing.T) {
	parsers := map[string]struct {
		base  string
		parse func(string) error
	}{
		"local":   {"file:///tmp/x", func(s string) error { _, err := local.ParseURL(s); return err }},
		"s3":      {"s3://bucket/p", func(s string) error { _, err := s3.ParseURL(s); return err }},
		"gcs":     {"gs://bucket/p", func(s string) error { _, err := gcs.ParseURL(s); return err }},
		"azure":   {"azblob://container/p", func(s string) error { _, err := azure.ParseURL(s); return err }},
		"gocloud": {"mem://bucket/p", func(s string) error { _, err := gocloud.ParseURL(s); return err }},
	}
	samples := map[string]string{"BOOL": "true", "SIZE": "8MiB", "N": "2", "DURATION": "5s", "URL": "http://127.0.0.1:9", "NAME": "acct", "PATH": "/nonexistent", "ID": "key", "MODE": "AES256"}
	for _, b := range dstl.Backends() {
		doc, ok := backendDocs[b.ID]
		if !ok {
			t.Errorf("backend %q is not documented", b.ID)
			continue
		}
		p, ok := parsers[b.ID]
		if !ok {
			t.Errorf("no parser for %q in the test", b.ID)
			continue
		}
		for _, o := range doc.Options {
			if strings.HasPrefix(o.Name, "(") {
				continue
			}
			q := url.Values{o.Name: {samples[o.Value]}}
			if o.Name == "sse_kms_key_id" {
				q.Set("sse", "aws:kms") // it goes only with that
			}
			err := p.parse(p.base + "?" + q.Encode())
			if err != nil && strings.Contains(err.Error(), "unknown") {
				t.Errorf("%s: option %q: %v", b.ID, o.Name, err)
			}
		}
	}
	code, out, _ := runCLI(t, "backends", "--json")
	var reps []backendReport
	if err := json.Unmarshal([]byte(out), &reps); code != exitOK || err != nil || len(reps) != len(dstl.Backends()) {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
}

func TestSplitObjectURL(t *testing.T) {
	for _, tc := range []struct {
		in, base, name string
		isURL, fails   bool
	}{
		{"s3://b/job/x.dstl?region=r", "s3://b/job?region=r", "x.dstl", true, false},
		{"s3://b/x.dstl", "s3://b", "x.dstl", true, false},
		{"file:///tmp/a/x.dstl", "file:///tmp/a", "x.dstl", true, false},
		{"gs://b/", "", "", true, true},
		{"/tmp/a/x.dstl", "", "", false, false},
		{"x.dstl", "", "", false, false},
		{`C:\x.dstl`, "", "", false, false},
	} {
		base, name, isURL, err := splitObjectURL(tc.in)
		if base != tc.base || name != tc.name || isURL != tc.isURL || (err != nil) != tc.fails {
			t.Errorf("splitObjectURL(%q) = %q, %q, %v, %v", tc.in, base, name, isURL, err)
		}
	}
}

func TestFormatAndParseSizes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.00 KiB", 1536: "1.50 KiB", 64 << 10: "64.0 KiB", 1000 << 20: "1000 MiB", 3 << 30: "3.00 GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	for in, want := range map[string]int64{"65536": 65536, "64KiB": 64 << 10, "4 MiB": 4 << 20, "1g": 1 << 30, "10b": 10} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "4 XiB", "1.5MiB"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) did not fail", in)
		}
	}
}

func TestBench(t *testing.T) {
	if testing.Short() {
		t.Skip("a short run of the benchmark takes seconds")
	}
	code, out, errOut := runCLI(t, "bench", "--json", "--base-path", t.TempDir(), "--skip-append", "--rounds", "1",
		"--round-time", "50ms", "--batch-time", "100ms", "--persist-every", "20ms", "--writers", "1,8", "--sizes", "16KiB",
		"--recovery-writers", "4", "--recovery-objects", "2", "--recovery-object-size", "64KiB")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var rep benchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Backend != "local" || len(rep.Upload) != 1 || rep.Upload[0].RawBPS <= 0 || rep.Upload[0].EngineBPS <= 0 ||
		len(rep.Batching.Rows) != 2 || rep.Recovery.FetchedPerNeed < 1 || rep.Recovery.Objects != 2 || len(rep.Targets) != 4 {
		t.Fatalf("report %+v", rep)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bench"}, "--base-path is required"},
		{[]string{"bench", "--base-path", "x", "--sizes", "1KiB,zz"}, "--sizes"},
		{[]string{"bench", "--base-path", "x", "--writers", "0"}, "--writers"},
		{[]string{"bench", "--base-path", "x", "--option", "nope=1", "--skip-append"}, "nope"},
	} {
		if code, _, errOut := runCLI(t, tc.args...); code != exitUsage || !strings.Contains(errOut, tc.msg) {
			t.Errorf("dstl %q: exit %d, stderr %q", tc.args, code, errOut)
		}
	}
}
