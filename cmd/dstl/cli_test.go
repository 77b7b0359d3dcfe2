package main

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/mem"
	"github.com/dstlgo/dstl/backends/s3"
)

// TestBackends: every registered backend is documented, and "dstl
// backends" lists exactly the URL parameters its package exports (which
// each backend's own tests hold its parser to; only the memory backend
// takes none).
func TestBackends(t *testing.T) {
	code, out, _ := runCLI(t, "backends", "--json")
	var reps []backendReport
	if err := json.Unmarshal([]byte(out), &reps); code != exitOK || err != nil || len(reps) != len(backends.Backends()) {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	for _, r := range reps {
		params, ok := backendParameters[r.ID]
		if !ok || backendDocs[r.ID].BasePath == "" {
			t.Errorf("backend %q is not documented", r.ID)
			continue
		}
		if !reflect.DeepEqual(r.Options, params) || len(r.Options) == 0 && r.ID != mem.ID {
			t.Errorf("%s: listed %+v, the package has %+v", r.ID, r.Options, params)
		}
	}
	code, out, _ = runCLI(t, "backends")
	for _, p := range s3.URLParameters {
		if code != exitOK || !strings.Contains(out, p.Name+"="+p.Value) {
			t.Errorf("exit %d; the listing lacks s3's %q:\n%s", code, p.Name, out)
		}
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
		{"s3://b/a%zz/x.dstl", "", "", true, true},
		{"s3://dstl test/x.dstl", "", "", true, true},
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
	for _, option := range []string{"compression.enabled=false", "compression.enabled=true"} {
		dir := t.TempDir()
		code, out, errOut := runCLI(t, "bench", "--json", "--base-path", dir, "--skip-append", "--rounds", "1",
			"--round-time", "50ms", "--batch-time", "100ms", "--persist-every", "20ms", "--writers", "1,8", "--sizes", "16KiB",
			"--recovery-writers", "4", "--recovery-objects", "2", "--recovery-object-size", "64KiB",
			"--sustained-writers", "2,3", "--sustained-time", "300ms", "--sustained-warmup", "100ms", "--checkpoint-every", "50ms", "--option", option,
			// Not this test's concern: the stall of an upload on a disk
			// that the tests running beside it keep busy.
			"--option", "upload.timeout=10s")
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s", option, code, errOut)
		}
		var rep benchReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Backend != "local" || len(rep.Upload) != 1 || len(rep.UploadCompressed) != 1 || rep.Upload[0].Ratio <= 0 || rep.Upload[0].BackendPutBPS <= 0 ||
			len(rep.Batching.Rows) != 2 || rep.Recovery.FetchedPerNeed < 1 || rep.Recovery.Objects != 2 || len(rep.Targets) != 6 {
			t.Fatalf("%s: report %+v", option, rep)
		}
		// Random changes: what is stored is about what was appended, with
		// compression too, so that the upload ratio compares like with like.
		for i, u := range []uploadResult{rep.Upload[0], rep.UploadCompressed[0]} {
			if u.StoredPerLogical < 1 || u.StoredPerLogical > 1.2 || u.PersistSamples == 0 || u.RawPutSamples == 0 || u.Compression != (i == 1) ||
				u.PipelinedBPS <= 0 || u.PipelinedRatio != u.PipelinedBPS/u.BackendPutBPS {
				t.Errorf("%s: upload %+v", option, u)
			}
		}
		if rep.Batching.Rows[0].PersistSamples == 0 || rep.Recovery.EngineReads == 0 || rep.Recovery.RawReads == 0 || rep.RawPut == "" {
			t.Errorf("%s: report %+v", option, rep)
		}
		if su := rep.Sustained; su == nil || len(su.Rows) != 2 || su.RawThreads != 5 || su.CheckpointEvery != "50ms" || su.Warmup != "100ms" {
			t.Errorf("%s: sustained %+v", option, su)
		} else {
			for i, row := range su.Rows {
				if row.Writers != []int{2, 3}[i] || row.EngineBPS <= 0 || row.RawBPS <= 0 || row.Ratio != row.EngineBPS/row.BackendBPS ||
					row.SDKRatio != row.EngineBPS/row.RawBPS || row.LoopBPS <= 0 || row.LoopRatio != row.EngineBPS/row.LoopBPS || len(row.LoopRounds) != 1 || row.LoopPuts == 0 ||
					row.ObjectsPerSec <= 0 || row.ObjectSize <= 0 || row.CheckpointsPerSec <= 0 || row.PersistSamples == 0 {
					t.Errorf("%s: sustained row %+v", option, row)
				}
			}
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Errorf("%s: left %v in the base path (%v)", option, entries, err)
		}
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bench"}, "--base-path is required"},
		{[]string{"bench", "--base-path", "x", "--sizes", "1KiB,zz"}, "--sizes"},
		{[]string{"bench", "--base-path", "x", "--writers", "0"}, "--writers"},
		{[]string{"bench", "--base-path", "x", "--sustained-writers", "16,129"}, "--sustained-writers"},
		{[]string{"bench", "--base-path", "x", "--checkpoint-every", "0s"}, "--checkpoint-every"},
		{[]string{"bench", "--base-path", "x", "--option", "nope=1", "--skip-append"}, "nope"},
	} {
		if code, _, errOut := runCLI(t, tc.args...); code != exitUsage || !strings.Contains(errOut, tc.msg) {
			t.Errorf("dstl %q: exit %d, stderr %q", tc.args, code, errOut)
		}
	}
}

// TestBackendsCheck: "dstl backends --check" runs the create-only check
// on a store, leaving nothing, and says so; --storage goes with --check.
func TestBackendsCheck(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "backends", "--check", dir)
	if code != exitOK || !strings.Contains(out, "honours create-only puts") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "backends", "--check", dir, "--json")
	var rep createOnlyReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || !rep.CreateOnly || rep.Backend != "local" {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the check left %d entries in %s", len(left), dir)
	}
	if code, _, errOut := runCLI(t, "backends", "--storage", "s3"); code != exitUsage || !strings.Contains(errOut, "--storage is for --check") {
		t.Fatalf("--storage alone: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "backends", "--check", "nosuch://x"); code != exitUsage {
		t.Fatalf("unknown scheme: exit %d: %s", code, errOut)
	}
}

// TestBackendsCheckFails: "dstl backends --check" exits 1 on a store that
// ignores create-only (an S3 endpoint that lets every PutObject through,
// If-None-Match or not) and 3 on one it cannot reach.
func TestBackendsCheckFails(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	var mu sync.Mutex
	var seen []string
	ignoring := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		switch {
		case r.Method == http.MethodPut && !r.URL.Query().Has("uploadId"): // PutObject
			w.Header().Set("ETag", `"probe"`)
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNotImplemented)
		}
	}))
	defer ignoring.Close()
	query := "?endpoint=" + ignoring.URL + "&region=us-east-1&use_path_style=true"
	code, out, errOut := runCLI(t, "backends", "--check", "s3://bucket/prefix"+query)
	if code != exitFailed || !strings.Contains(errOut, backends.ErrCreateOnlyIgnored.Error()) || !strings.Contains(errOut, "a single-request put") {
		t.Fatalf("a store that ignores create-only: exit %d: %s%s", code, out, errOut)
	}
	mu.Lock()
	t.Logf("requests: %q", seen)
	if n := len(seen); n == 0 || seen[n-1] != "DELETE "+seen[0][len("PUT "):] {
		t.Errorf("requests %q: want the probe object deleted last", seen)
	}
	mu.Unlock()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close() // nothing listens there: every connection is refused
	code, out, errOut = runCLI(t, "backends", "--check", "s3://bucket/prefix?endpoint="+closed+"&region=us-east-1&use_path_style=true", "--json")
	var rep createOnlyReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitRuntime || err != nil || rep.CreateOnly || rep.Error == "" {
		t.Fatalf("an unreachable store: exit %d, %v: %s%s", code, err, out, errOut)
	}
}

// TestBackendsCheckUnsignedPayloadMinIO: on an s3 base path with
// unsigned_payload=true, "dstl backends --check" also checks that the
// store takes unsigned bodies, which MinIO does, and says so; without the
// parameter it does not check them.
func TestBackendsCheckUnsignedPayloadMinIO(t *testing.T) {
	var env []string
	for _, n := range []string{"DSTL_S3_ENDPOINT", "DSTL_S3_REGION", "DSTL_S3_ACCESS_KEY", "DSTL_S3_SECRET_KEY", "DSTL_S3_BUCKET"} {
		v := os.Getenv(n)
		if v == "" {
			t.Skipf("%s not set: this test needs MinIO (run it under minio-test/with-emulators.sh)", n)
		}
		env = append(env, v)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", env[2])
	t.Setenv("AWS_SECRET_ACCESS_KEY", env[3])
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	base := "s3://" + env[4] + "/dstl-backends-check/" + strings.ToLower(rand.Text()[:12]) +
		"?endpoint=" + env[0] + "&region=" + env[1] + "&use_path_style=true"
	for _, unsigned := range []bool{true, false} {
		u := base
		if unsigned {
			u += "&unsigned_payload=true"
		}
		code, out, errOut := runCLI(t, "backends", "--check", u, "--json")
		var rep createOnlyReport
		if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || !rep.CreateOnly || (rep.UnsignedPayload == "taken") != unsigned {
			t.Fatalf("unsigned %v: exit %d, %v: %s%s", unsigned, code, err, out, errOut)
		}
		if unsigned {
			code, out, errOut = runCLI(t, "backends", "--check", u)
			if code != exitOK || !strings.Contains(out, "takes upload bodies that are not signed") {
				t.Fatalf("exit %d: %s%s", code, out, errOut)
			}
		}
	}
}
