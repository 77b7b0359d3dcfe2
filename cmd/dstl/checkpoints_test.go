package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
)

// buildCatalog commits job "job"'s catalog under the base path: in
// generation 1, three instances complete checkpoint 1 and instance 0
// commits 2; instance 1 restarts (generation 2, which restores 1), every
// instance commits 3, and instance 0 commits 4 (pending). Each part
// refers to a log object, instance 0's to a snapshot too.
func buildCatalog(t *testing.T, base string) {
	t.Helper()
	ctx := context.Background()
	b, _, err := backends.Open(ctx, "", base)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	// A restarted process has an owner of its own: with the same owner
	// and clock, its claim would be the one of the process it replaces.
	join := func(i int, owner string) *catalog.Member {
		m, err := catalog.Join(ctx, b, catalog.Config{JobID: "job", Instances: 3, Process: i, MaxParallelism: 12,
			Owner: owner, Now: func() time.Time { return now }, Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	commit := func(m *catalog.Member, n int64) {
		g, i := m.Generation().Number, m.Process()
		objects := []string{fmt.Sprintf("job/log-g%d-i%d-n%d.dstl", g, i, n)}
		if i == 0 {
			objects = append(objects, fmt.Sprintf("job/statestore/op/snap-g%d-n%d.snap", g, n))
		}
		state := []byte(fmt.Sprintf("state of instance %d at checkpoint %d", i, n))
		if _, err := m.Commit(ctx, n, []catalog.InstanceState{{Instance: i, State: state, Objects: objects,
			Metadata: map[string]string{"offset": fmt.Sprint(n * 10), "topic": "words"}}}); err != nil {
			t.Fatal(err)
		}
	}
	ms := []*catalog.Member{join(0, "pod-0"), join(1, "pod-1"), join(2, "pod-2")}
	for _, m := range ms {
		commit(m, 1)
	}
	commit(ms[0], 2)
	ms[1] = join(1, "pod-1-restarted")
	for _, i := range []int{0, 2} {
		if ms[i], err = ms[i].Rejoin(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms {
		commit(m, 3)
	}
	commit(ms[0], 4)
}

// rowRE matches a table row of the given cells, separated by two spaces
// or more.
func rowRE(cells ...string) *regexp.Regexp {
	for i, c := range cells {
		cells[i] = regexp.QuoteMeta(c)
	}
	return regexp.MustCompile(`(?m)^` + strings.Join(cells, ` {2,}`) + `(\s|$)`)
}

func TestCheckpointsList(t *testing.T) {
	dir := t.TempDir()
	buildCatalog(t, "file://"+dir)

	code, out, errOut := runCLI(t, "checkpoints", "--json", "--base-path", dir, "--job-id", "job")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var rep checkpointsReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.LiveGeneration != 2 || rep.Retain != 1 || !slices.Equal(rep.Retained, []int64{3}) || rep.KeptCommits != 4 ||
		rep.Prefix != "job/" || len(rep.Generations) != 2 || len(rep.Problems) != 0 {
		t.Fatalf("report %+v", rep)
	}
	g1, g2 := rep.Generations[0], rep.Generations[1]
	if g1.Status != "fenced" || g1.Fence == "" || g2.Status != "live" || g2.Mode != "aligned" || g2.Instances != 3 || g2.Processes != 3 || g2.MaxParallelism != 12 ||
		g2.RestoredCheckpoint != 1 || len(g2.Restored) != 3 || g2.FirstCheckpoint != 3 || g2.KeyGroups[2] != (dstl.KeyGroupRange{Start: 8, End: 11}) ||
		len(g2.Claims) != 3 || g2.Claims[1].Owner != "pod-1-restarted" || g2.Claims[2].Owner != "pod-2" || g2.Created == nil || g2.Record != objname.CatalogV2GenerationName("job/", 2) {
		t.Fatalf("generations %+v", rep.Generations)
	}
	type row struct {
		n                   int64
		status, kept        string
		commits, kept2      int
		objects             int
		stateSize, retained bool
	}
	var got []row
	for _, g := range rep.Generations {
		for _, c := range g.Checkpoints {
			if !c.OK || c.StoredSize == 0 {
				t.Errorf("checkpoint %d: %+v", c.Checkpoint, c)
			}
			got = append(got, row{c.Checkpoint, c.Status, c.Kept, c.Commits, c.KeptCommits, c.Objects, c.StateSize > 0, c.Retained})
		}
	}
	want := []row{
		{1, "complete", "", 3, 0, 4, true, false},
		{2, "never-complete", "", 1, 0, 2, true, false},
		{3, "complete", "retained", 3, 3, 4, true, true},
		{4, "pending", "pending", 1, 1, 2, true, false},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("checkpoints\n%+v\nwant\n%+v", got, want)
	}

	// The table for people.
	code, out, errOut = runCLI(t, "checkpoints", "--base-path", "file://"+dir, "--job-id", "job")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, re := range []*regexp.Regexp{
		rowRE("GENERATION", "STATUS", "MODE", "INSTANCES", "PROCESSES", "KEY GROUPS", "FIRST", "RESTORED", "CLAIMS", "CREATED", "CHECK"),
		rowRE("1", "fenced", "aligned", "3", "3", "0-3, 4-7, 8-11", "1", "-", "3/3", "2026-01-02T15:04:05Z", "ok"),
		rowRE("2", "live", "aligned", "3", "3", "0-3, 4-7, 8-11", "3", "g1/1 (3 objects)", "3/3", "2026-01-02T15:04:05Z", "ok"),
		rowRE("GENERATION", "CHECKPOINT", "STATUS", "COMMITS", "STORED", "STATE", "OBJECTS", "KEPT", "CHECK"),
		regexp.MustCompile(`(?m)^1 +1 +complete +3/3 +\d+ B +\d+ B +4 +- +ok$`),
		regexp.MustCompile(`(?m)^1 +2 +never-complete +1/3 +\d+ B +\d+ B +2 +- +ok$`),
		regexp.MustCompile(`(?m)^2 +3 +complete +3/3 +\d+ B +\d+ B +4 +retained +ok$`),
		regexp.MustCompile(`(?m)^2 +4 +pending +1/3 +\d+ B +\d+ B +2 +pending +ok$`),
		regexp.MustCompile(`retained with --retain 1: checkpoint 3 of generation 2; 4 catalog objects kept`),
	} {
		if !re.MatchString(out) {
			t.Errorf("no line matches %s in:\n%s", re, out)
		}
	}

	// With --retain 2, the live generation has fewer complete checkpoints
	// than retained: what it restored is kept; checkpoint 2 never
	// completed: retained is 3 alone.
	code, out, _ = runCLI(t, "checkpoints", "--json", "--retain", "2", "--base-path", dir, "--job-id", "job")
	rep = checkpointsReport{}
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || rep.Retain != 2 || !slices.Equal(rep.Retained, []int64{3}) ||
		rep.KeptCommits != 7 || rep.Generations[0].Checkpoints[0].Kept != "restored" {
		t.Fatalf("--retain 2: exit %d, %v, %+v", code, err, rep)
	}
}

func TestCheckpointsShow(t *testing.T) {
	dir := t.TempDir()
	buildCatalog(t, "file://"+dir)
	base := []string{"--base-path", dir, "--job-id", "job"}

	code, out, errOut := runCLI(t, append([]string{"checkpoints", "show", "3"}, base...)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`checkpoint 3 of generation 2 \(live, aligned, 3 instances\) under prefix "job/" of \S+: complete, kept: retained`),
		regexp.MustCompile(`3 parts, stored \d+ B, state \d+ B, 4 objects referred to`),
		rowRE("INSTANCE", "PROCESS", "KEY GROUPS", "STORED", "STATE", "OBJECTS", "CREATED", "KEPT", "COMMIT"),
		regexp.MustCompile(`(?m)^0 +0 +0-3 +\d+ B +35 B +2 +2026-01-02T15:04:05Z +yes +` + regexp.QuoteMeta(objname.CatalogV2CommitName("job/", 2, 3, 0)) + `$`),
		regexp.MustCompile(`(?m)^2 +2 +8-11 +\d+ B +35 B +1 +2026-01-02T15:04:05Z +yes +` + regexp.QuoteMeta(objname.CatalogV2CommitName("job/", 2, 3, 2)) + `$`),
		regexp.MustCompile(`(?m)^instance 0:\n  metadata:\n    offset=30\n    topic=words\n  2 objects:\n    job/log-g2-i0-n3.dstl\n    job/statestore/op/snap-g2-n3.snap$`),
	} {
		if !re.MatchString(out) {
			t.Errorf("no match for %s in:\n%s", re, out)
		}
	}

	for _, tc := range []struct {
		args             []string
		generation       int64
		status           string
		without          []int
		restoredBy       []int64
		parts, stateSize int
	}{
		{[]string{"1"}, 1, "complete", []int{}, []int64{2}, 3, 35},
		{[]string{"2"}, 1, "never-complete", []int{1, 2}, []int64{}, 1, 35},
		{[]string{"4", "--generation", "2"}, 2, "pending", []int{1, 2}, []int64{}, 1, 35},
	} {
		code, out, errOut := runCLI(t, append(append([]string{"checkpoints", "show", "--json"}, tc.args...), base...)...)
		if code != exitOK {
			t.Fatalf("show %q: exit %d\n%s\n%s", tc.args, code, out, errOut)
		}
		var rep checkpointReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Generation != tc.generation || rep.Status != tc.status || !slices.Equal(rep.Without, tc.without) ||
			!slices.Equal(rep.RestoredBy, tc.restoredBy) || len(rep.Parts) != tc.parts || !rep.OK {
			t.Errorf("show %q: %+v", tc.args, rep)
			continue
		}
		p := rep.Parts[0]
		if p.Instance != 0 || p.StateSize != tc.stateSize || p.KeyGroups == nil || *p.KeyGroups != (dstl.KeyGroupRange{Start: 0, End: 3}) ||
			p.Metadata["topic"] != "words" || len(p.Objects) != 2 || p.Created == nil || p.Error != "" {
			t.Errorf("show %q: part %+v", tc.args, p)
		}
	}

	for _, args := range [][]string{{"show", "9"}, {"show", "1", "--generation", "2"}, {"show", "3", "--generation", "7"}} {
		code, out, errOut := runCLI(t, append(append([]string{"checkpoints"}, args...), base...)...)
		if code != exitFailed || !strings.Contains(errOut, "no checkpoint "+args[1]) || out != "" {
			t.Errorf("dstl checkpoints %q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

// TestCheckpointsDamaged: a damaged part or record is reported, named,
// and exits 1, with the rest of the catalog listed; show reports what is
// damaged of its checkpoint only.
func TestCheckpointsDamaged(t *testing.T) {
	for _, tc := range []struct {
		name, object string
		rowRE        *regexp.Regexp // the listing's row of the damaged object
		showBad      string         // a checkpoint whose show exits 1
		showOK       string         // one whose show exits 0
	}{
		{"commit", objname.CatalogV2CommitName("job/", 2, 3, 1), regexp.MustCompile(`(?m)^2 +3 +complete +3/3 +\d+ B +\? +\? +retained +DAMAGED$`), "3", "1"},
		{"generation record", objname.CatalogV2GenerationName("job/", 1), regexp.MustCompile(`(?m)^1 +fenced +\? +\? +\? +\? +\? +\? +3 +- +DAMAGED$`), "2", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			buildCatalog(t, "file://"+dir)
			path := objectPath(dir, tc.object)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)-3] ^= 0x20 // in the checksum
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			base := []string{"--base-path", dir, "--job-id", "job"}
			code, out, errOut := runCLI(t, append([]string{"checkpoints", "--json"}, base...)...)
			if code != exitFailed {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, exitFailed, out, errOut)
			}
			var rep checkpointsReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.OK || len(rep.Problems) != 1 || rep.Problems[0].Kind != "damaged" || rep.Problems[0].Object != tc.object ||
				!strings.Contains(rep.Problems[0].Error, tc.object) || !strings.Contains(rep.Problems[0].Error, "checksum") || len(rep.Generations) != 2 {
				t.Fatalf("report %+v", rep)
			}
			code, out, _ = runCLI(t, append([]string{"checkpoints"}, base...)...)
			if code != exitFailed || !tc.rowRE.MatchString(out) || !strings.Contains(out, "problem (damaged): ") || !strings.Contains(out, tc.object) {
				t.Errorf("text report, exit %d:\n%s", code, out)
			}
			code, out, _ = runCLI(t, append([]string{"checkpoints", "show", tc.showBad}, base...)...)
			if code != exitFailed || !strings.Contains(out, "DAMAGED") && tc.name == "commit" || !strings.Contains(out, "problem (damaged)") {
				t.Errorf("show %s, exit %d:\n%s", tc.showBad, code, out)
			}
			if code, out, _ = runCLI(t, append([]string{"checkpoints", "show", tc.showOK}, base...)...); code != exitOK {
				t.Errorf("show %s, exit %d:\n%s", tc.showOK, code, out)
			}
		})
	}
}

// TestCheckpointsRestoredCommitGone: a commit the live generation
// restored from, and keeps while it has fewer than --retain complete
// checkpoints of its own, that is gone is a problem: a restore from it
// would fail. Its checkpoint, without it, is never-complete.
func TestCheckpointsRestoredCommitGone(t *testing.T) {
	dir := t.TempDir()
	buildCatalog(t, "file://"+dir)
	gone := objname.CatalogV2CommitName("job/", 1, 1, 2)
	if err := os.Remove(objectPath(dir, gone)); err != nil {
		t.Fatal(err)
	}
	args := []string{"--retain", "2", "--base-path", dir, "--job-id", "job"}
	code, out, _ := runCLI(t, append([]string{"checkpoints", "--json"}, args...)...)
	var rep checkpointsReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitFailed || err != nil || rep.OK || len(rep.Problems) != 1 ||
		rep.Problems[0].Kind != "missing" || rep.Problems[0].Object != gone || rep.KeptCommits != 6 {
		t.Fatalf("exit %d, %v: %+v", code, err, rep)
	}
	code, out, _ = runCLI(t, append([]string{"checkpoints"}, args...)...)
	if code != exitFailed || !regexp.MustCompile(`(?m)^1 +1 +never-complete +2/3 +.* +restored +ok$`).MatchString(out) ||
		!strings.Contains(out, "problem (missing): generation 2 restores from \""+gone+"\", which is not in the catalog") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if code, out, _ = runCLI(t, append([]string{"checkpoints", "show", "1"}, args...)...); code != exitFailed || !strings.Contains(out, "problem (missing)") {
		t.Fatalf("show 1: exit %d:\n%s", code, out)
	}
	if code, out, _ = runCLI(t, append([]string{"checkpoints", "show", "3"}, args...)...); code != exitOK {
		t.Fatalf("show 3: exit %d:\n%s", code, out)
	}
}

func TestCheckpointsEmptyJob(t *testing.T) {
	dir := t.TempDir()
	buildCatalog(t, "file://"+dir)
	for _, job := range []string{"other", ""} { // another job's prefix; the root, where the catalog of a job without an id would be
		code, out, errOut := runCLI(t, "checkpoints", "--base-path", dir, "--job-id", job)
		if code != exitOK || !strings.Contains(out, "no checkpoint catalog under prefix") || !strings.Contains(out, "the job has no generation") {
			t.Errorf("job %q: exit %d\n%s\n%s", job, code, out, errOut)
		}
		code, out, _ = runCLI(t, "checkpoints", "--json", "--base-path", dir, "--job-id", job)
		var rep checkpointsReport
		if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || rep.LiveGeneration != 0 || rep.Generations == nil ||
			len(rep.Generations) != 0 || !rep.OK || rep.Retained == nil {
			t.Errorf("job %q: exit %d, %v: %s", job, code, err, out)
		}
		if code, _, errOut = runCLI(t, "checkpoints", "show", "1", "--base-path", dir, "--job-id", job); code != exitFailed || !strings.Contains(errOut, "no checkpoint 1") {
			t.Errorf("job %q: show 1: exit %d, %s", job, code, errOut)
		}
	}
}

func TestCheckpointsUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"checkpoints"}, exitUsage, "--base-path is required"},
		{[]string{"checkpoints", "--base-path", dir, "list"}, exitUsage, `unexpected argument "list"`},
		{[]string{"checkpoints", "--base-path", dir, "show"}, exitUsage, "show takes one checkpoint number"},
		{[]string{"checkpoints", "--base-path", dir, "show", "1", "2"}, exitUsage, "show takes one checkpoint number"},
		{[]string{"checkpoints", "--base-path", dir, "show", "x"}, exitUsage, `show "x": want a checkpoint number`},
		{[]string{"checkpoints", "--base-path", dir, "show", "0"}, exitUsage, `show "0": want a checkpoint number`},
		{[]string{"checkpoints", "--base-path", dir, "--generation", "1"}, exitUsage, "--generation is for show N"},
		{[]string{"checkpoints", "--base-path", dir, "show", "1", "--generation", "-1"}, exitUsage, "--generation -1"},
		{[]string{"checkpoints", "--base-path", dir, "--retain", "0"}, exitUsage, "--retain 0"},
		{[]string{"checkpoints", "--base-path", dir, "--job-id", "a//b"}, exitUsage, "--job-id"},
		{[]string{"checkpoints", "--base-path", dir, "--nope"}, exitUsage, "flag provided but not defined"},
		{[]string{"checkpoints", "--base-path", "nope://x"}, exitUsage, "no backend serves"},
		{[]string{"checkpoints", "--base-path", "s3://b/p?no_such_option=1"}, exitUsage, "no_such_option"},
		{[]string{"checkpoints", "--help"}, exitOK, "Usage: dstl checkpoints"},
		{[]string{"help", "checkpoints"}, exitOK, "dstl checkpoints show N"},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("dstl %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
}

// TestCheckpointsUnreachable: a storage that cannot be read exits 3 with
// an error naming it.
func TestCheckpointsUnreachable(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	base := "s3://b/p?endpoint=http://127.0.0.1:1&use_path_style=true&region=us-east-1&max_attempts=1"
	code, out, errOut := runCLI(t, "checkpoints", "--base-path", base, "--job-id", "job")
	if code != exitRuntime || out != "" || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitRuntime, out, errOut)
	}
}

// TestCheckpointsMinIO: the catalog of a job on MinIO is listed and
// shown as on local disk.
func TestCheckpointsMinIO(t *testing.T) {
	var env []string
	for _, n := range []string{"DSTL_S3_ENDPOINT", "DSTL_S3_REGION", "DSTL_S3_ACCESS_KEY", "DSTL_S3_SECRET_KEY", "DSTL_S3_BUCKET"} {
		v := os.Getenv(n)
		if v == "" {
			t.Skipf("%s not set: this test needs MinIO (run it under minio-test/with-emulators.sh, or `make emulators-up` and load the settings)", n)
		}
		env = append(env, v)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", env[2])
	t.Setenv("AWS_SECRET_ACCESS_KEY", env[3])
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	base := "s3://" + env[4] + "/dstl-checkpoints-test/" + strings.ToLower(rand.Text()[:12]) +
		"?endpoint=" + env[0] + "&region=" + env[1] + "&use_path_style=true"
	buildCatalog(t, base)
	t.Cleanup(func() {
		ctx := context.Background()
		b, _, err := backends.Open(ctx, "", base)
		if err != nil {
			return
		}
		defer b.Close()
		b.List(ctx, "", func(oi backends.ObjectInfo) error { return b.Delete(ctx, oi.Name) })
	})
	code, out, errOut := runCLI(t, "checkpoints", "--json", "--base-path", base, "--job-id", "job")
	var rep checkpointsReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || !rep.OK || rep.LiveGeneration != 2 || len(rep.Generations) != 2 ||
		len(rep.Generations[1].Checkpoints) != 2 || strings.Contains(out, env[3]) {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	code, out, errOut = runCLI(t, "checkpoints", "show", "3", "--base-path", base, "--job-id", "job")
	if code != exitOK || !strings.Contains(out, "job/statestore/op/snap-g2-n3.snap") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// quietLogger is the catalog's logger in these tests.
var quietLogger = slog.New(slog.DiscardHandler)
