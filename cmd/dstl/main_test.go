package main

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/dstlgo/dstl/dstl"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDemo(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"defaults, smaller", []string{"-checkpoints", "8", "-changes", "200"}},
		{"compressed, rescaled to 3 writers", []string{"-checkpoints", "7", "-changes", "100", "-compression", "-recover-writers", "3"}},
		{"no materialisation, no aborts", []string{"-checkpoints", "5", "-changes", "50", "-materialize-every", "0", "-abort-every", "0", "-writers", "2"}},
		{"explicit base path", []string{"-checkpoints", "3", "-changes", "20", "-base-path", "file://" + t.TempDir()}},
		{"explicit base path, kept", []string{"-checkpoints", "6", "-changes", "20", "-keep", "-base-path", t.TempDir()}},
		{"local recovery, rescaled", []string{"-checkpoints", "9", "-changes", "100", "-local-recovery", "-recover-writers", "5"}},
		{"local recovery in a given directory", []string{"-checkpoints", "4", "-changes", "50", "-local-recovery", "-local-dir", t.TempDir()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"demo"}, tc.args...), &out, &errOut)
			if code != exitOK {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), "verification:       OK") {
				t.Fatalf("no verification line:\n%s", out.String())
			}
			if slices.Contains(tc.args, "-local-recovery") && !strings.Contains(out.String(), "0 (0.00 MiB) from the backend, 0 fallbacks") {
				t.Fatalf("local recovery read from the backend:\n%s", out.String())
			}
			// The objects left once the storages closed: as many as
			// the base path holds with --keep, deleted without it.
			m := regexp.MustCompile(`objects left: +(\d+) \(.*\) once the storages closed, snapshots included, (\d+) of them named by checkpoint \d+; (?:(\d+) deleted at the end|kept under (\S+) )`).FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("no objects line:\n%s", out.String())
			}
			left, _ := strconv.Atoi(m[1])
			if named, _ := strconv.Atoi(m[2]); named < 1 || named > left {
				t.Errorf("%d objects left, %d named by the last checkpoint:\n%s", left, named, out.String())
			}
			keep := slices.Contains(tc.args, "-keep")
			if deleted, _ := strconv.Atoi(m[3]); !keep && deleted != left {
				t.Errorf("%d objects left, %d deleted:\n%s", left, deleted, out.String())
			}
			if i := slices.Index(tc.args, "-base-path"); i >= 0 {
				files, dirs := 0, 0 // dirs: under the base path
				root := strings.TrimPrefix(tc.args[i+1], "file://")
				err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
					switch {
					case err != nil:
					case !d.IsDir():
						files++
					case p != root:
						dirs++
					}
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if want := map[bool]int{true: left}[keep]; files != want {
					t.Errorf("%d files under the base path, want %d:\n%s", files, want, out.String())
				}
				// Without --keep, the directories the run made go too.
				if !keep && dirs != 0 {
					t.Errorf("%d directories left under the base path, want none", dirs)
				}
				if keep && !strings.Contains(out.String(), "kept under demo-") {
					t.Errorf("the kept prefix not named:\n%s", out.String())
				}
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{nil, exitUsage},
		{[]string{"nope"}, exitUsage},
		{[]string{"demo", "-writers", "0"}, exitUsage},
		{[]string{"demo", "extra"}, exitUsage},
		{[]string{"demo", "-h"}, exitOK},
		{[]string{"backends"}, exitOK},
		{[]string{"demo", "-base-path", "nope://x", "-checkpoints", "1"}, exitUsage},
		{[]string{"demo", "-abort-every", "1"}, exitUsage},
		{[]string{"demo", "-recover-writers", "200"}, exitUsage},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errOut); code != tc.code {
			t.Errorf("dstl %q: exit %d, want %d (stderr %s)", tc.args, code, tc.code, errOut.String())
		}
	}
}

func TestCompareStates(t *testing.T) {
	base := func() state {
		return state{1: {"a": []byte("1"), "b": []byte("2")}, 2: {"c": []byte("3")}}
	}
	for _, tc := range []struct {
		name   string
		mutate func(state)
		ok     bool
	}{
		{"equal", func(state) {}, true},
		{"value differs", func(s state) { s[1]["a"] = []byte("x") }, false},
		{"key missing", func(s state) { delete(s[1], "b") }, false},
		{"extra key", func(s state) { s[2]["z"] = []byte("9") }, false},
		{"extra key group", func(s state) { s[9] = map[string][]byte{"q": nil} }, false},
		{"empty key group is no key group", func(s state) { s[7] = map[string][]byte{} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := base()
			tc.mutate(got)
			if err := compareStates(base(), got); (err == nil) != tc.ok {
				t.Fatalf("compareStates = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// TestBadBasePathExitsUsage: a base path that does not parse, or whose
// parameters are bad, is bad configuration (exit 2), like an unknown
// scheme, in every command; and nothing is written to a local directory.
func TestBadBasePathExitsUsage(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	keep := writeHandleFile(t, filepath.Join(t.TempDir(), "keep.json"), false, dstl.Handle{})
	for _, base := range []string{
		"s3://b/a%zz",
		"s3://dstl test/x",
		"s3://b/p?part_size=huge",
		"s3://b/p?no_such_option=1",
		"s3://b/p?endpoint=ftp://x",
		"gs://b/p?timeout=-1s",
		"azblob://c/p?timeout=soon&endpoint=http://127.0.0.1:1/a",
		"file:///tmp/x?fsync=maybe",
		"nope://x",
	} {
		for _, args := range [][]string{
			{"demo", "--base-path", base, "--checkpoints", "1"},
			{"inspect", strings.TrimSuffix(base, "/") + "/obj.dstl"},
			{"gc", "--base-path", base, "--grace", "1h", "--keep", keep},
			{"checkpoints", "--base-path", base, "--job-id", "job"},
		} {
			t.Run(args[0]+" "+base, func(t *testing.T) {
				code, _, errOut := runCLI(t, args...)
				if code != exitUsage {
					t.Errorf("dstl %q: exit %d, want %d (stderr %s)", args, code, exitUsage, errOut)
				}
			})
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Fatalf("a bad base path wrote %s in the working directory", ents[0].Name())
	}
}

// TestDemoFailureIsQuiet: a demo whose storage fails prints the error that
// ends it, not a warning per failed attempt before it.
func TestDemoFailureIsQuiet(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	// What goes to the default logger counts as printed too.
	var logged bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	base := "s3://b/p?endpoint=http://127.0.0.1:1&use_path_style=true&region=us-east-1&max_attempts=2"
	code, _, errOut := runCLI(t, "demo", "--base-path", base, "--checkpoints", "2", "--writers", "2")
	t.Logf("stderr:\n%s", errOut)
	errOut += logged.String()
	if code != exitRuntime {
		t.Fatalf("exit %d, want %d (stderr %s)", code, exitRuntime, errOut)
	}
	if n := strings.Count(errOut, "WARN"); n > 0 {
		t.Errorf("%d WARN lines before the error:\n%s", n, errOut)
	}
	if !strings.Contains(errOut, "127.0.0.1:1") {
		t.Errorf("the error does not name the endpoint:\n%s", errOut)
	}
}
