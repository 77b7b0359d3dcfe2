package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/kafkastate"
)

// recordsUnder returns the names of the kafkastate records under the
// job's prefix on b, sorted.
func recordsUnder(t *testing.T, b backends.Backend) []string {
	t.Helper()
	var out []string
	if err := b.List(t.Context(), objname.RecordPrefix("job/"), func(oi backends.ObjectInfo) error {
		if objname.Parse("job/", oi.Name).Kind == objname.Record {
			out = append(out, oi.Name)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestGCKafka: dstl gc on a kafkastate job applies the job's deletion
// rule (kafkastate.Collect): it keeps the records the group's committed
// offsets name, with their objects, deletes the other records and the
// logs and snapshots only they named, and the job restores as before.
// Without the --kafka flags, gc says that the job's records need them; a
// group that names no record of the job deletes nothing.
func TestGCKafka(t *testing.T) {
	const partitions = 4
	brokers := newKafkaCluster(t, partitions)
	dir := t.TempDir()
	b, err := local.Open(t.Context(), local.Config{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := kafkaJobConfig(brokers, 50*time.Millisecond)
	cfg.MaterializeInterval = 200 * time.Millisecond
	want := map[string]int64{}
	produceWords(t, brokers, 200, want)
	svc := startKafkaService(t, kafkaStorage(t, b), cfg)
	svc.waitFor(t, "the partitions' restores", func(s kafkastate.Stats) bool { return s.FirstStarts == partitions })
	svc.waitFor(t, "commits", func(s kafkastate.Stats) bool { return s.Commits >= 3 })
	produceWords(t, brokers, 200, want)
	svc.waitFor(t, "the input", func(s kafkastate.Stats) bool { return s.Records == 400 })
	svc.waitFor(t, "more commits", func(s kafkastate.Stats) bool { return s.Commits >= 10 })
	svc.stop(t)
	before := recordsUnder(t, b)
	time.Sleep(100 * time.Millisecond) // older than the grace below

	base := []string{"gc", "--base-path", dir, "--job-id", "job", "--grace", "50ms", "--json"}
	if code, out, errOut := runCLI(t, base...); code != exitUsage || !strings.Contains(errOut, "--kafka-brokers") {
		t.Errorf("gc without --kafka flags: exit %d, %s%s; want a usage error naming --kafka-brokers", code, out, errOut)
	}
	kafka := []string{"--kafka-brokers", strings.Join(brokers, ","), "--kafka-topic", kafkaTopic}
	if code, out, errOut := runCLI(t, append(append(base, kafka...), "--kafka-group", "another")...); code != exitFailed || len(recordsUnder(t, b)) != len(before) {
		t.Errorf("gc with another group: exit %d, %s%s; want exit 1 and nothing deleted", code, out, errOut)
	}
	text := []string{"gc", "--base-path", dir, "--job-id", "job", "--grace", "50ms", "--dry-run", "--kafka-group", kafkaGroup}
	if code, out, errOut := runCLI(t, append(text, kafka...)...); code != exitOK || !strings.Contains(out, "by Kafka group counters of topic words: 1 committed") ||
		len(recordsUnder(t, b)) != len(before) {
		t.Errorf("gc --dry-run: exit %d\n%s%s\nwant the group's record kept and nothing deleted", code, out, errOut)
	}
	code, out, errOut := runCLI(t, append(append(base, kafka...), "--kafka-group", kafkaGroup)...)
	if code != exitOK {
		t.Fatalf("gc: exit %d\n%s\n%s", code, out, errOut)
	}
	var rep gcReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	after := recordsUnder(t, b)
	t.Logf("%d records before, %d after; %d objects deleted; %+v", len(before), len(after), rep.Deleted.Objects, rep.Kafka)
	if rep.Kafka == nil || rep.Kafka.Committed != len(after) || len(after) == 0 || len(after) >= len(before) {
		t.Errorf("records: %d before, %d after, report %+v: want only the committed ones left", len(before), len(after), rep.Kafka)
	}
	if rep.Deleted.Objects <= len(before)-len(after) {
		t.Errorf("%d objects deleted: want the %d records and logs or snapshots", rep.Deleted.Objects, len(before)-len(after))
	}
	if diff := diffCounts(want, loadCounts(t, b, cfg, partitions)); diff != "" {
		t.Errorf("after gc, the job restores other counts: %s", diff)
	}
}

// TestGCKeepRefusedOnKafkaJob: handle files do not name a kafkastate
// job's records, so gc refuses --keep on a prefix that holds them; it
// deleted the log objects the committed records name before.
func TestGCKeepRefusedOnKafkaJob(t *testing.T) {
	const partitions = 4
	brokers := newKafkaCluster(t, partitions)
	dir := t.TempDir()
	b, err := local.Open(t.Context(), local.Config{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := kafkaJobConfig(brokers, 50*time.Millisecond)
	cfg.MaterializeInterval = time.Hour // logs, not snapshots, hold the state
	want := map[string]int64{}
	produceWords(t, brokers, 200, want)
	svc := startKafkaService(t, kafkaStorage(t, b), cfg)
	svc.waitFor(t, "the partitions' restores", func(s kafkastate.Stats) bool { return s.FirstStarts == partitions })
	svc.waitFor(t, "the input", func(s kafkastate.Stats) bool { return s.Records == 200 })
	svc.waitFor(t, "commits", func(s kafkastate.Stats) bool { return s.Commits >= 5 })
	svc.stop(t)
	time.Sleep(100 * time.Millisecond) // every object older than the grace below
	keep := writeHandleFile(t, filepath.Join(t.TempDir(), "h.json"), false, dstl.Handle{KeyGroups: dstl.KeyGroupRange{Start: 0, End: 0}})
	code, _, errOut := runCLI(t, "gc", "--base-path", dir, "--job-id", "job", "--grace", "50ms", "--keep", keep)
	if code != exitUsage || !strings.Contains(errOut, "--kafka-group") {
		t.Errorf("gc --keep on a kafkastate job: exit %d, stderr %q: want %d and a message naming the --kafka flags", code, errOut, exitUsage)
	}
	if diff := diffCounts(want, loadCounts(t, b, cfg, partitions)); diff != "" {
		t.Errorf("after gc --keep, the kafkastate job restores other counts: %s", diff)
	}
}
