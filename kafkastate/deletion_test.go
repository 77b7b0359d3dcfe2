package kafkastate

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// recordNames returns the names of the records on b, sorted.
func recordNames(b *dstltest.Backend) []string {
	var out []string
	for _, o := range b.Objects() {
		if objname.Parse("job/", o.Name).Kind == objname.Record {
			out = append(out, o.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestCollect: Collect, from outside the job, keeps the records the
// group's committed offsets name with their objects, and deletes the
// other records, logs and snapshots once older than the grace; the job
// then restores as before. A dry run deletes nothing.
func TestCollect(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	b := dstltest.NewBackend()
	prod := newProducer(t, brokers)
	cfg := testConfig(brokers)
	cfg.CollectInterval = -1
	cfg.MaterializeInterval = 300 * time.Millisecond
	prod.produce(t, 300)
	r := startSvc(t, newStorage(t, b), cfg)
	r.waitFor(t, func(s Stats) bool { return s.Commits >= 5 })
	prod.produce(t, 300)
	waitCommitted(t, brokers, time.Minute)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	before := recordNames(b)
	ctx := context.Background()
	ccfg := CollectConfig{Brokers: brokers, Topic: testTopic, Group: testGroup, Grace: 50 * time.Millisecond}
	time.Sleep(100 * time.Millisecond) // every object is older than the grace

	dry, err := Collect(ctx, b, "job", ccfg, collect.Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := recordNames(b); !slices.Equal(got, before) || dry.Deletable.Objects == 0 {
		t.Fatalf("dry run: %d records of %d left, %d deletable: want all left, some deletable", len(got), len(before), dry.Deletable.Objects)
	}
	other := ccfg
	other.Group = "another"
	if _, err := Collect(ctx, b, "job", other, collect.Options{}); !errors.Is(err, ErrNoCommittedRecord) || len(recordNames(b)) != len(before) {
		t.Fatalf("Collect of another group: %v, %d records left of %d: want ErrNoCommittedRecord, nothing deleted", err, len(recordNames(b)), len(before))
	}
	// No grace: every record not committed goes, however young.
	none := ccfg
	none.Grace = NoGrace
	rep, err := Collect(ctx, b, "job", none, collect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := recordNames(b)
	t.Logf("%d records before, %d after (committed %d); %d objects deleted", len(before), len(got), len(rep.CommittedRecords), rep.Deleted.Objects)
	if len(rep.CommittedRecords) == 0 || !slices.Equal(got, rep.CommittedRecords) || len(rep.YoungRecords) != 0 {
		t.Errorf("records left %q, committed %q, young %q: want the committed ones only", got, rep.CommittedRecords, rep.YoungRecords)
	}
	if rep.Deleted.Objects <= len(before)-len(got) {
		t.Errorf("%d objects deleted: want the %d records and logs or snapshots", rep.Deleted.Objects, len(before)-len(got))
	}
	checkFinal(t, b, cfg, prod.want)

	for _, bad := range []CollectConfig{{Topic: testTopic, Group: testGroup}, {Brokers: brokers, Group: testGroup}, {Brokers: brokers, Topic: testTopic},
		{Brokers: brokers, Topic: testTopic, Group: testGroup, Grace: -time.Second}} {
		if _, err := Collect(ctx, b, "job", bad, collect.Options{}); !errors.Is(err, ErrConfig) {
			t.Errorf("Collect(%+v): %v, want ErrConfig", bad, err)
		}
	}
}
