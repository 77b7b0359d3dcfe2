package main

import (
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dstlgo/dstl/dstl/objname"
)

// refusedAddr returns an address on loopback that refuses connections: a
// port that was free.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestCLITable: what the commands say of the project's own files, of
// paths that do not exist, of a storage that refuses connections and of
// bad command lines: each case's exit code and the first line of its
// output (stdout when it succeeds, stderr when it fails). A failure is one
// line per distinct failure; usage is printed only when asked for.
func TestCLITable(t *testing.T) {
	logDir := t.TempDir()
	hs := persistHandles(t, logDir, "job", 1)
	logObject := objectPath(logDir, hs[0].Entries[0].Object)

	stateDir := t.TempDir()
	cp, cpFile := stateCheckpoint(t, stateDir, false)
	snapshot := objectPath(stateDir, cp.Snapshots[0].Object)

	catalogDir := t.TempDir()
	buildCatalog(t, "file://"+catalogDir)
	part := objectPath(catalogDir, objname.CatalogV2CommitName("job/", 2, 3, 0))
	generation := objectPath(catalogDir, objname.CatalogV2GenerationName("job/", 2))

	missing := filepath.Join(t.TempDir(), "missing")
	refused := refusedAddr(t)
	s3URL := "s3://bkt/job?endpoint=http://" + refused + "&region=us-east-1&use_path_style=true"
	credentials := map[string]string{"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none")}
	// No credentials, and an instance metadata service that refuses
	// tokens: the SDK falls back to IMDSv1, and says so to its logger.
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			http.Error(w, "no token", http.StatusForbidden)
			return
		}
		http.NotFound(w, r)
	}))
	defer imds.Close()
	noCredentials := map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "",
		"AWS_EC2_METADATA_DISABLED": "false", "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.URL,
		"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none")}
	// No credentials, as on a machine without an instance metadata
	// service.
	noIMDS := map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none")}
	noAzure := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "", "AZURE_STORAGE_ACCOUNT": "", "AZURE_STORAGE_KEY": "",
		"AZURE_CLIENT_ID": "", "AZURE_TENANT_ID": "", "AZURE_CLIENT_SECRET": "", "AZURE_FEDERATED_TOKEN_FILE": "",
		"IDENTITY_ENDPOINT": "", "MSI_ENDPOINT": "", "HOME": t.TempDir(), "PATH": t.TempDir(),
		// The developer tools alone (not found on an empty PATH), not a
		// managed identity, which asks the metadata address of the
		// machine, whatever answers there.
		"AZURE_TOKEN_CREDENTIALS": "dev"}
	q := regexp.QuoteMeta
	refusedRE := `dial tcp ` + q(refused) + `: connect: connection refused \(`

	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		code  int
		first string // a regular expression the first line matches
		lines int    // lines of stderr when the command fails; 0: any
	}{
		// The project's own files.
		{"log object", []string{"inspect", logObject}, nil, exitOK, `^log object ` + q(logObject) + `: .*, 1 change set, OK$`, 0},
		{"snapshot", []string{"inspect", snapshot}, nil, exitOK,
			`^snapshot ` + q(snapshot) + `: \d+ B, in-memory \(version 1\) of operator op-0, key groups 0-7 of 8, the log from sequence number \d+, OK$`, 0},
		{"catalog commit", []string{"inspect", part}, nil, exitOK,
			`^catalog object ` + q(part) + `: \d+ B, commit of checkpoint 3 by process 0 of generation 2 \(version 2\), OK$`, 0},
		{"catalog generation", []string{"inspect", generation}, nil, exitOK,
			`^catalog object ` + q(generation) + `: \d+ B, record of generation 2 \(version 2\), OK$`, 0},
		{"checkpoint handle", []string{"inspect", "--handle", cpFile}, nil, exitOK,
			`^checkpoint handle ` + q(cpFile) + `: checkpoint 1 of operator op-0, key groups 0-7 of 8, 1 snapshot, 1 log handle$`, 0},
		{"checkpoint handle checked", []string{"inspect", "--handle", cpFile, stateDir}, nil, exitOK,
			`^checkpoint handle ` + q(cpFile) + `: checkpoint 1 of operator op-0`, 0},
		{"checkpoint handle as a file", []string{"inspect", cpFile}, nil, exitOK, `^checkpoint handle ` + q(cpFile) + `: checkpoint 1 `, 0},

		// Paths that do not exist.
		{"checkpoints, missing", []string{"checkpoints", "--base-path", missing}, nil, exitRuntime, `^dstl checkpoints: ` + q(missing) + ` does not exist$`, 1},
		{"inspect, missing", []string{"inspect", "file://" + missing + "/x.dstl"}, nil, exitRuntime, `^dstl inspect: ` + q(missing) + ` does not exist$`, 1},
		{"inspect --handle, missing", []string{"inspect", "--handle", cpFile, missing}, nil, exitRuntime, `^dstl inspect: ` + q(missing) + ` does not exist$`, 1},
		{"gc --dry-run, missing", []string{"gc", "--dry-run", "--grace", "1h", "--keep-none", "--base-path", missing}, nil, exitRuntime,
			`^dstl gc: ` + q(missing) + ` does not exist$`, 1},

		// A storage that refuses connections.
		{"checkpoints, refused", []string{"checkpoints", "--base-path", s3URL}, credentials, exitRuntime, `^dstl checkpoints: ` + refusedRE, 1},
		{"inspect, refused", []string{"inspect", strings.Replace(s3URL, "/job?", "/job/x.dstl?", 1)}, credentials, exitRuntime,
			`^dstl inspect: ` + refusedRE + `s3 get "x.dstl"`, 1},
		{"demo, refused", []string{"demo", "--base-path", s3URL, "--checkpoints", "2", "--changes", "10"}, credentials, exitRuntime,
			`^dstl demo: ` + refusedRE + `checkpoint 1: persist .*, and 7 more failures of this cause$`, 1},
		{"gc --dry-run, refused", []string{"gc", "--dry-run", "--grace", "1h", "--keep-none", "--base-path", s3URL}, credentials, exitRuntime,
			`^dstl gc: ` + refusedRE + `s3 list`, 1},
		{"checkpoints, no credentials", []string{"checkpoints", "--base-path", s3URL}, noCredentials, exitRuntime,
			`^dstl checkpoints: no credentials for s3: .*no EC2 IMDS role found.* \(catalog: list "_catalog/": s3 list `, 1},
		{"inspect, no credentials", []string{"inspect", strings.Replace(s3URL, "/job?", "/job/x.dstl?", 1)}, noIMDS, exitRuntime,
			`^dstl inspect: no credentials for s3: .*no EC2 IMDS role found.* \(s3 get "x.dstl": .*GetObject\)$`, 1},
		{"checkpoints, no azure credentials", []string{"checkpoints", "--base-path", "azblob://c/p?account=acct&endpoint=https://" + refused}, noAzure, exitRuntime,
			`^dstl checkpoints: missing or refused Azure credentials .* \(catalog: list "_catalog/": azure list `, 1},
		{"checkpoints, no azure account", []string{"checkpoints", "--base-path", "azblob://c/p"}, noAzure, exitUsage,
			`^dstl checkpoints: open azure backend at "azblob://c/p": azure: base path "azblob://c/p": an account URL`, 1},

		// Bad command lines.
		{"bad price", []string{"cost", "--price", "foo"}, nil, exitUsage,
			`^dstl cost: invalid value "foo" for flag --price: .*want PROVIDER.FIELD=PRICE.* \(see dstl cost --help\)$`, 1},
		{"unknown flag", []string{"gc", "--nope"}, nil, exitUsage, `^dstl gc: flag provided but not defined: --nope \(see dstl gc --help\)$`, 1},
		{"flag without its value", []string{"checkpoints", "--base-path"}, nil, exitUsage,
			`^dstl checkpoints: flag needs an argument: --base-path \(see dstl checkpoints --help\)$`, 1},
		{"demo, bad value", []string{"demo", "--writers", "0"}, nil, exitUsage, `^dstl demo: --writers must be at least 1$`, 1},
		{"demo, help", []string{"demo", "--help"}, nil, exitOK, `^Usage: dstl demo \[flags\]$`, 0},
		{"both names of the request timeout", []string{"checkpoints", "--base-path", "gs://b/p?timeout=1s&request_timeout=1s"}, nil, exitUsage,
			`^dstl checkpoints: .*"timeout" is the deprecated name of "request_timeout": give request_timeout alone$`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, out, errOut := runCLI(t, tc.args...)
			output := out
			if code != exitOK || strings.HasPrefix(tc.name, "demo, help") {
				output = errOut
			}
			first := firstLine(output)
			if code != tc.code || !regexp.MustCompile(tc.first).MatchString(first) {
				t.Fatalf("dstl %q: exit %d, first line\n%s\nwant exit %d and a first line matching\n%s\nstdout:\n%s\nstderr:\n%s",
					tc.args, code, first, tc.code, tc.first, out, errOut)
			}
			if n := strings.Count(errOut, "\n"); tc.lines > 0 && n != tc.lines {
				t.Errorf("dstl %q: %d lines on stderr, want %d:\n%s", tc.args, n, tc.lines, errOut)
			}
		})
	}
}

// TestDemoFlagStyle: the demo's help names its flags with two dashes, as
// every other command does.
func TestDemoFlagStyle(t *testing.T) {
	code, _, errOut := runCLI(t, "demo", "--help")
	if code != exitOK || !strings.Contains(errOut, "  --writers int") || regexp.MustCompile(`(?m)(^|\s)-[a-z]`).MatchString(errOut) {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
}

// TestRunRestoresLoggers: run puts back slog's default logger and package
// log's output and flags, which it sets for the command.
func TestRunRestoresLoggers(t *testing.T) {
	logger, out, flags := slog.Default(), log.Writer(), log.Flags()
	runCLI(t, "backends")
	if slog.Default() != logger || log.Writer() != out || log.Flags() != flags {
		t.Fatal("run left slog's default logger or package log's output or flags changed")
	}
}
