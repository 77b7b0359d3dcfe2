package collect_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl/objname"
	"github.com/dstlgo/dstl/dstltest"
)

// TestRunClassifies: each listed object gets the first reason that
// applies, referenced, foreign, not collected (a kind, or an operator's
// snapshots, the caller does not collect), young by either clock (or of
// an unknown modification time), or deletable; the deletable ones, and
// only they, are deleted, outside a dry run; another job's objects are
// not even listed.
func TestRunClassifies(t *testing.T) {
	now := time.Now()
	old, young := now.Add(-3*time.Hour), now.Add(-10*time.Minute)
	type object struct {
		name string
		mod  time.Time
	}
	objects := map[string]object{ // by a key the cases name
		"log old":              {logName(t, "job/", old), old},
		"log young by name":    {logName(t, "job/", young), old},
		"log young by time":    {logName(t, "job/", old), young},
		"log from the future":  {logName(t, "job/", now.Add(time.Hour)), old},
		"log of unknown time":  {logName(t, "job/", old), time.Time{}},
		"log referenced":       {logName(t, "job/", old), old},
		"op-0 old":             {snapName(t, "job/", "op-0", old), old},
		"op-0 referenced":      {snapName(t, "job/", "op-0", old), old},
		"op-0 young":           {snapName(t, "job/", "op-0", young), old},
		"op-1 old":             {snapName(t, "job/", "op-1", old), old},
		"op-0 file old":        {opName(t, objname.SnapshotFile, "job/", "op-0", old), old},
		"op-0 file referenced": {opName(t, objname.SnapshotFile, "job/", "op-0", old), old},
		"op-0 file young":      {opName(t, objname.SnapshotFile, "job/", "op-0", young), old},
		"notes":                {"job/notes.txt", old},
		"not a uuid":           {"job/not-a-uuid.dstl", old},
		"snapshot not a uuid":  {"job/statestore/op-0/not-a-uuid.snap", old},
		"log beside snapshots": {logName(t, "job/statestore/op-0/", old), old},
	}
	otherJob := logName(t, "other-job/", old)
	foreign := []string{"notes", "not a uuid", "snapshot not a uuid", "log beside snapshots"}
	logs := []string{"log old", "log young by name", "log young by time", "log from the future", "log of unknown time", "log referenced"}
	snapshots := []string{"op-0 old", "op-0 referenced", "op-0 young", "op-1 old", "op-0 file old", "op-0 file referenced", "op-0 file young"}
	for _, tc := range []struct {
		name         string
		kinds        collect.Kinds
		allOperators bool
		keep         []string // kept objects, by key
		keepOps      []string // operators added
		dryRun       bool
		referenced   []string
		notCollected []string
		deletable    []string
		// every other object is foreign (those of foreign) or young
	}{
		{"checkpoint handles kept", collect.Logs | collect.Snapshots, false, []string{"log referenced", "op-0 referenced", "op-0 file referenced"}, []string{"op-0"}, false,
			[]string{"log referenced", "op-0 referenced", "op-0 file referenced"}, []string{"op-1 old"}, []string{"log old", "op-0 old", "op-0 file old"}},
		{"checkpoint handles kept, dry run", collect.Logs | collect.Snapshots, false, []string{"log referenced", "op-0 referenced", "op-0 file referenced"}, []string{"op-0"}, true,
			[]string{"log referenced", "op-0 referenced", "op-0 file referenced"}, []string{"op-1 old"}, []string{"log old", "op-0 old", "op-0 file old"}},
		{"log handles kept only", collect.Logs | collect.Snapshots, false, []string{"log referenced"}, nil, false,
			[]string{"log referenced"}, snapshots, []string{"log old"}},
		{"every operator's snapshots", collect.Logs | collect.Snapshots, true, []string{"log referenced", "op-0 referenced"}, nil, false,
			[]string{"log referenced", "op-0 referenced"}, nil, []string{"log old", "op-0 old", "op-1 old", "op-0 file old", "op-0 file referenced"}},
		{"keep nothing", collect.Logs | collect.Snapshots, true, nil, nil, false,
			nil, nil, []string{"log old", "log referenced", "op-0 old", "op-0 referenced", "op-1 old", "op-0 file old", "op-0 file referenced"}},
		{"snapshots only", collect.Snapshots, true, []string{"op-0 referenced"}, nil, false,
			[]string{"op-0 referenced"}, logs, []string{"op-0 old", "op-1 old", "op-0 file old", "op-0 file referenced"}},
		{"logs only", collect.Logs, false, []string{"log referenced"}, []string{"op-0"}, false,
			[]string{"log referenced"}, snapshots, []string{"log old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTimedBackend()
			for _, o := range objects {
				b.put(t, o.name, o.mod)
			}
			b.put(t, otherJob, old)
			keep := new(collect.Keep)
			for _, k := range tc.keep {
				keep.AddObject(objects[k].name)
			}
			for _, op := range tc.keepOps {
				keep.AddOperator(op)
			}
			rep, err := collect.Run(t.Context(), b, collect.Options{JobID: "job", Grace: time.Hour, Keep: keep,
				Kinds: tc.kinds, AllOperators: tc.allOperators, DryRun: tc.dryRun})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]collect.Reason{}
			for key, o := range objects {
				switch {
				case slices.Contains(tc.referenced, key):
					want[o.name] = collect.Referenced
				case slices.Contains(foreign, key):
					want[o.name] = collect.Foreign
				case slices.Contains(tc.notCollected, key):
					want[o.name] = collect.NotCollected
				case slices.Contains(tc.deletable, key):
					want[o.name] = collect.Deletable
				default:
					want[o.name] = collect.Young
				}
			}
			counts := map[collect.Reason]collect.Count{}
			for _, o := range rep.Objects {
				if o.Reason != want[o.Name] {
					t.Errorf("%s: %v, want %v", o.Name, o.Reason, want[o.Name])
				}
				if n := objname.Parse("job/", o.Name); o.Kind != n.Kind || !o.NameTime.Equal(n.Time()) || o.Size != 10 {
					t.Errorf("%s: %+v", o.Name, o)
				}
				if o.Deleted != (o.Reason == collect.Deletable && !tc.dryRun) {
					t.Errorf("%s (%v): deleted %v in a dry run %v", o.Name, o.Reason, o.Deleted, tc.dryRun)
				}
				if _, stored := b.ObjectBytes(o.Name); stored == o.Deleted {
					t.Errorf("%s: reported deleted %v, stored %v", o.Name, o.Deleted, stored)
				}
				c := counts[o.Reason]
				c.Objects, c.Bytes = c.Objects+1, c.Bytes+o.Size
				counts[o.Reason] = c
			}
			if len(rep.Objects) != len(objects) || rep.Listed != (collect.Count{Objects: len(objects), Bytes: 10 * int64(len(objects))}) {
				t.Errorf("listed %d objects, %+v; want %d", len(rep.Objects), rep.Listed, len(objects))
			}
			for r, c := range map[collect.Reason]collect.Count{collect.Referenced: rep.Referenced, collect.Foreign: rep.Foreign,
				collect.NotCollected: rep.NotCollected, collect.Young: rep.Young, collect.Deletable: rep.Deletable} {
				if c != counts[r] {
					t.Errorf("%v: counted %+v, listed %+v", r, c, counts[r])
				}
			}
			wantDeleted := collect.Count{}
			if !tc.dryRun {
				wantDeleted = rep.Deletable
			}
			if rep.Deleted != wantDeleted || rep.DeletesRun == tc.dryRun || len(rep.Failed) != 0 || len(rep.Missing) != 0 {
				t.Errorf("deleted %+v, deletes run %v, failed %v, missing %v", rep.Deleted, rep.DeletesRun, rep.Failed, rep.Missing)
			}
			if _, ok := b.ObjectBytes(otherJob); !ok {
				t.Error("another job's object was deleted")
			}
			if rep.Prefix != "job/" || rep.DryRun != tc.dryRun || rep.UploadsChecked {
				t.Errorf("report %+v", rep)
			}
		})
	}
}

// TestRunHolds: an unreferenced object whose name records a checkpoint at
// or above HoldFrom is kept however old (it may be referenced by a
// checkpoint that may still complete); one made for an earlier checkpoint,
// or whose name records none, is deleted once old; a referenced one stays
// referenced.
func TestRunHolds(t *testing.T) {
	now := time.Now()
	old := now.Add(-30 * 24 * time.Hour)
	name := func(kind objname.Kind, checkpoint int64) string {
		op := ""
		if kind != objname.Log {
			op = "op"
		}
		n, err := objname.Format("job/", objname.Name{Kind: kind, ID: v7(t, old), Operator: op, Checkpoint: checkpoint})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	type object struct {
		name string
		want collect.Reason
	}
	for _, tc := range []struct {
		name     string
		holdFrom int64
		objects  []object
		keep     int // index of a kept object, or -1
	}{
		{"no hold", 0, []object{
			{name(objname.Log, 7), collect.Deletable},
			{name(objname.Log, 0), collect.Deletable},
		}, -1},
		{"held by checkpoint", 7, []object{
			{name(objname.Log, 6), collect.Deletable},
			{name(objname.Log, 7), collect.Held},
			{name(objname.Log, 8), collect.Held},
			{name(objname.Log, 0), collect.Deletable}, // records none: by age
			{name(objname.Snapshot, 7), collect.Held},
			{name(objname.SnapshotFile, 9), collect.Held},
			{name(objname.SnapshotFile, 1), collect.Deletable},
		}, -1},
		{"referenced before held", 7, []object{
			{name(objname.Log, 9), collect.Referenced},
			{name(objname.Log, 9), collect.Held},
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTimedBackend()
			want := map[string]collect.Reason{}
			keep := new(collect.Keep)
			for i, o := range tc.objects {
				b.put(t, o.name, old)
				want[o.name] = o.want
				if i == tc.keep {
					keep.AddObject(o.name)
				}
			}
			rep, err := collect.Run(t.Context(), b, collect.Options{JobID: "job", Grace: time.Hour, Keep: keep,
				Kinds: collect.Logs | collect.Snapshots, AllOperators: true, HoldFrom: tc.holdFrom})
			if err != nil {
				t.Fatal(err)
			}
			held := 0
			for _, o := range rep.Objects {
				if o.Reason != want[o.Name] {
					t.Errorf("%s: %v, want %v", o.Name, o.Reason, want[o.Name])
				}
				if o.Reason == collect.Held {
					held++
				}
				if _, stored := b.ObjectBytes(o.Name); stored == (o.Reason == collect.Deletable) {
					t.Errorf("%s (%v): stored %v", o.Name, o.Reason, stored)
				}
			}
			if rep.Held.Objects != held {
				t.Errorf("counted %d held, listed %d", rep.Held.Objects, held)
			}
		})
	}
}

// TestRunClock: ages count from the earlier of the caller's clock and the
// storage's, read from a probe object that Run deletes again (also in a
// dry run); an object whose modification time is unknown is young, and so
// is every object of a storage that reports no modification times.
func TestRunClock(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name       string
		skew       time.Duration // of the caller's clock
		zeroMod    bool          // the storage reports no modification time of the object
		noModTimes bool          // the storage reports none at all
		mod, named time.Duration // ago, by the storage's clock
		dryRun     bool
		deleted    bool
	}{
		{"old by both clocks", 0, false, false, 3 * time.Hour, 3 * time.Hour, false, true},
		{"young: the caller's clock 2h ahead", 2 * time.Hour, false, false, 10 * time.Minute, 10 * time.Minute, false, false},
		{"young: the caller's clock 2h ahead, dry run", 2 * time.Hour, false, false, 10 * time.Minute, 10 * time.Minute, true, false},
		{"old: the caller's clock 2h behind", -2 * time.Hour, false, false, 3*time.Hour + 5*time.Minute, 3*time.Hour + 5*time.Minute, false, true},
		{"old by name, modification time unknown", 0, true, false, 0, 3 * time.Hour, false, false},
		{"a storage without modification times", 0, false, true, 3 * time.Hour, 3 * time.Hour, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTimedBackend()
			names := tb.logs(t, 1, now.Add(-tc.named))
			tb.mod[names[0]] = now.Add(-tc.mod)
			if tc.zeroMod {
				tb.mod[names[0]] = time.Time{}
			}
			var b backends.Backend = tb
			if tc.noModTimes {
				b = noModTimes{tb}
			}
			var warnings []collect.Event
			rep, err := collect.Run(t.Context(), b, collect.Options{JobID: "job", Grace: time.Hour, Kinds: collect.Logs, DryRun: tc.dryRun,
				Now: func() time.Time { return time.Now().Add(tc.skew) }, OnEvent: warningsTo(&warnings)})
			if err != nil || len(warnings) > 0 {
				t.Fatalf("%v, warnings %+v", err, warnings)
			}
			if gone := tb.Len() == 0; gone != (tc.deleted && !tc.dryRun) {
				t.Errorf("deleted %v, want %v; report %+v", gone, tc.deleted, rep)
			}
			if got := rep.Deletable.Objects == 1; got != tc.deleted {
				t.Errorf("deletable %v, want %v; report %+v", got, tc.deleted, rep)
			}
			if rep.Now.After(rep.LocalNow) {
				t.Errorf("now %v after the local clock's %v", rep.Now, rep.LocalNow)
			}
			if tc.noModTimes {
				if !rep.StoreNow.IsZero() || rep.ClockErr != nil {
					t.Errorf("store now %v, clock error %v", rep.StoreNow, rep.ClockErr)
				}
			} else if rep.StoreNow.IsZero() || rep.Now.After(rep.StoreNow) || rep.ClockErr != nil {
				t.Errorf("now %v, store %v, clock error %v", rep.Now, rep.StoreNow, rep.ClockErr)
			}
			// The probe was put and deleted, whatever else happened.
			if c := tb.Counts(); c[dstltest.OpPut] != 2 {
				t.Errorf("%d puts, want the object's and the probe's", c[dstltest.OpPut])
			}
			for _, oi := range tb.Objects() {
				if isProbe(oi.Name) {
					t.Errorf("the clock probe %s was left behind", oi.Name)
				}
			}
		})
	}
}

// noModTimes is a backend that reports no modification times.
type noModTimes struct{ timedBackend }

func (b noModTimes) List(ctx context.Context, prefix string, fn func(backends.ObjectInfo) error) error {
	return b.timedBackend.List(ctx, prefix, func(oi backends.ObjectInfo) error {
		oi.ModTime = time.Time{}
		return fn(oi)
	})
}

// TestRunClockProbe: without the storage's clock, Run deletes nothing and
// fails; a dry run goes on with the caller's clock and says so. A probe
// that cannot be deleted is a warning, and stays behind.
func TestRunClockProbe(t *testing.T) {
	isProbeOp := func(op dstltest.Op) dstltest.FaultFunc {
		return func(o dstltest.Op, name string) dstltest.Fault {
			if o == op && isProbe(name) {
				return dstltest.Fault{Err: backends.ErrPermission}
			}
			return dstltest.Fault{}
		}
	}
	for _, tc := range []struct {
		name    string
		fault   dstltest.FaultFunc
		dryRun  bool
		wantErr bool
		warning collect.EventKind // a warning of this kind
		left    int               // objects left, probes included
	}{
		{"its put fails", isProbeOp(dstltest.OpPut), false, true, "", 2},
		{"its put fails, dry run", isProbeOp(dstltest.OpPut), true, false, collect.EventNoStoreClock, 2},
		{"its listing fails", isProbeOp(dstltest.OpList), false, true, "", 2},
		{"its delete fails", isProbeOp(dstltest.OpDelete), false, false, collect.EventProbeLeft, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTimedBackend()
			b.logs(t, 2, time.Now().Add(-3*time.Hour))
			b.SetFault(tc.fault)
			var warnings []collect.Event
			rep, err := collect.Run(t.Context(), b, collect.Options{JobID: "job", Grace: time.Hour, Kinds: collect.Logs, DryRun: tc.dryRun,
				OnEvent: warningsTo(&warnings)})
			if tc.wantErr {
				if rep != nil || !errors.Is(err, backends.ErrPermission) || !strings.Contains(err.Error(), "reading the storage's clock (nothing deleted)") {
					t.Fatalf("report %+v, error %v", rep, err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != map[bool]int{true: 1}[tc.warning != ""] ||
				tc.warning != "" && (warnings[0].Kind != tc.warning || !isProbe(warnings[0].Name) || !errors.Is(warnings[0].Err, backends.ErrPermission)) {
				t.Errorf("warnings %+v, want one %q of the probe with its error", warnings, tc.warning)
			}
			if b.Len() != tc.left {
				t.Errorf("%d objects left, want %d: %v", b.Len(), tc.left, b.Objects())
			}
			switch tc.name {
			case "its put fails, dry run":
				if !rep.StoreNow.IsZero() || rep.ClockErr != warnings[0].Err || !rep.Now.Equal(rep.LocalNow) || rep.Deletable.Objects != 2 {
					t.Errorf("report %+v", rep)
				}
			case "its delete fails": // the probe stays, and is no object of the job's
				if rep.Listed.Objects != 2 || rep.Deleted.Objects != 2 || rep.StoreNow.IsZero() {
					t.Errorf("report %+v", rep)
				}
			}
		})
	}
}

// TestRunClockProbeCancelled: a probe that was put is deleted even when
// the context is done by then: it is the collection's own.
func TestRunClockProbeCancelled(t *testing.T) {
	for _, timeout := range []time.Duration{collect.NoTimeout, 0, 5 * time.Second} {
		b := newTimedBackend()
		b.logs(t, 1, time.Now().Add(-3*time.Hour))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		b.SetFault(func(op dstltest.Op, name string) dstltest.Fault {
			if op == dstltest.OpList && isProbe(name) {
				cancel() // once the probe is put
			}
			return dstltest.Fault{}
		})
		rep, err := collect.Run(ctx, b, collect.Options{JobID: "job", Grace: time.Hour, Kinds: collect.Logs, Timeout: timeout})
		if rep != nil || !errors.Is(err, context.Canceled) {
			t.Fatalf("timeout %v: report %+v, error %v", timeout, rep, err)
		}
		if c := b.Counts(); c[dstltest.OpPut] != 2 || c[dstltest.OpDelete] != 1 || b.Len() != 1 {
			t.Errorf("timeout %v: calls %v, objects %v", timeout, c, b.Objects())
		}
	}
}

// TestRunRefuses: when an object the kept handles reference is not under
// the prefix, or none of them is, Run reports the missing ones and what
// it would have deleted, deletes nothing (nor aborts), and fails with
// ErrMissing, in a dry run too. Kept objects of another prefix are not
// missing while one under the prefix is there.
func TestRunRefuses(t *testing.T) {
	old := time.Now().Add(-3 * time.Hour)
	present, absent := logName(t, "job/", old), logName(t, "job/", old)
	elsewhere := logName(t, "other-job/", old)
	for _, tc := range []struct {
		name    string
		keep    []string
		dryRun  bool
		missing []string // nil: no refusal
	}{
		{"a kept object missing", []string{present, absent}, false, []string{absent}},
		{"a kept object missing, dry run", []string{present, absent}, true, []string{absent}},
		{"none under the prefix", []string{elsewhere}, false, []string{elsewhere}},
		{"one under the prefix, one elsewhere", []string{present, elsewhere}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &uploadsBackend{timedBackend: newTimedBackend()}
			b.put(t, present, old)
			stale := b.logs(t, 1, old)[0]
			b.uploads = append(b.uploads, s3IncompleteUpload(logName(t, "job/", old), "old", old))
			keep := new(collect.Keep)
			keep.AddObject(tc.keep...)
			rep, err := collect.Run(t.Context(), b, collect.Options{JobID: "job", Grace: time.Hour, Keep: keep, Kinds: collect.Logs, DryRun: tc.dryRun})
			if tc.missing == nil {
				if err != nil || rep.Deleted.Objects != 1 || rep.UploadsAborted != 1 {
					t.Fatalf("%v; report %+v", err, rep)
				}
				return
			}
			if !errors.Is(err, collect.ErrMissing) || rep == nil {
				t.Fatalf("error %v, report %+v", err, rep)
			}
			if !slices.Equal(rep.Missing, tc.missing) || rep.DeletesRun || rep.Deleted.Objects != 0 || rep.UploadsAborted != 0 {
				t.Errorf("report %+v, want missing %q", rep, tc.missing)
			}
			if _, ok := b.ObjectBytes(stale); !ok || len(b.left()) != 1 {
				t.Error("an object was deleted, or an upload aborted")
			}
			// What it would have deleted is reported all the same (present
			// too, where it is not kept).
			wantDeletable := map[bool]int{true: 1, false: 2}[slices.Contains(tc.keep, present)]
			if rep.Deletable.Objects != wantDeletable || len(rep.Uploads) != 1 {
				t.Errorf("deletable %+v, uploads %+v", rep.Deletable, rep.Uploads)
			}
		})
	}
}

// TestRunDeleteFailures: deletes that fail, all or some, are reported
// beside the deleted ones and make Run fail with an error that wraps the
// first failure; a delete that the storage does not answer within the
// timeout stops the deletes not started; a cancelled context stops them
// too.
func TestRunDeleteFailures(t *testing.T) {
	boom := errors.New("boom")
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name    string
		fault   func(victim string) dstltest.FaultFunc
		timeout time.Duration
		cancel  bool // cancel the context once a call stalls
		wantErr error
		msg     string
		failed  int
		deleted int // of 5
	}{
		{"one delete fails", func(victim string) dstltest.FaultFunc {
			return func(op dstltest.Op, name string) dstltest.Fault {
				return dstltest.Fault{Err: map[bool]error{true: boom}[op == dstltest.OpDelete && name == victim]}
			}
		}, 0, false, boom, "1 of 5 deletes failed (4 of 5 objects deleted), e.g. ", 1, 4},
		{"every delete fails", func(string) dstltest.FaultFunc { return dstltest.FailAll(dstltest.OpDelete, boom) }, 0, false, boom,
			"5 of 5 deletes failed (0 of 5 objects deleted)", 5, 0},
		{"a delete stalls", func(victim string) dstltest.FaultFunc {
			return func(op dstltest.Op, name string) dstltest.Fault {
				return dstltest.Fault{Stall: op == dstltest.OpDelete && name == victim}
			}
		}, timeout, false, collect.ErrNoAnswer, "stopped: 1 of 5 objects deleted: deleting job/", 1, 1},
		{"interrupted", func(victim string) dstltest.FaultFunc {
			var once sync.Once
			return func(op dstltest.Op, name string) dstltest.Fault {
				stall := false
				if op == dstltest.OpDelete && name == victim {
					once.Do(func() { stall = true })
				}
				return dstltest.Fault{Stall: stall}
			}
		}, 0, true, context.Canceled, "interrupted: 1 of 5 objects deleted: ", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTimedBackend()
			names := b.logs(t, 5, time.Now().Add(-3*time.Hour))
			b.SetFault(tc.fault(names[1]))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.cancel {
				go func() {
					if b.WaitStalled(t.Context(), 1) == nil {
						cancel()
					}
				}()
			}
			start := time.Now()
			rep, err := collect.Run(ctx, b, collect.Options{JobID: "job", Grace: time.Hour, Kinds: collect.Logs, Concurrency: 1,
				Timeout: tc.timeout})
			if took := time.Since(start); took > 10*timeout {
				t.Errorf("took %v", took)
			}
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.msg) || rep == nil {
				t.Fatalf("error %v, want %v with %q", err, tc.wantErr, tc.msg)
			}
			var na *collect.NoAnswerError
			if tc.timeout > 0 && (!errors.As(err, &na) || na.Name != names[1] || na.Step != "deleting "+names[1] || na.Timeout != timeout ||
				!strings.Contains(err.Error(), "deleting "+names[1]+": the storage did not answer within 300ms")) {
				t.Errorf("error %v, want a NoAnswerError naming %s", err, names[1])
			}
			if len(rep.Failed) != tc.failed || rep.Deleted.Objects != tc.deleted || !rep.DeletesRun || rep.Deletable.Objects != 5 {
				t.Errorf("report %+v", rep)
			}
			if !slices.IsSortedFunc(rep.Failed, func(a, b collect.Failure) int { return strings.Compare(a.Name, b.Name) }) {
				t.Errorf("failures not sorted: %+v", rep.Failed)
			}
			for _, f := range rep.Failed {
				if f.Err == nil || f.UploadID != "" {
					t.Errorf("failure %+v", f)
				}
			}
			for _, o := range rep.Objects {
				if _, stored := b.ObjectBytes(o.Name); stored == o.Deleted {
					t.Errorf("%s: reported deleted %v, stored %v", o.Name, o.Deleted, stored)
				}
			}
			if left := len(b.names()); left != 5-tc.deleted {
				t.Errorf("%d objects left, want %d", left, 5-tc.deleted)
			}
		})
	}
}

// TestRunStepTimeout: a storage that stops answering at a step before
// the deletes (the clock probe, the listing) fails Run within about one
// timeout (a dry run, which goes on without the storage's clock, two),
// with a NoAnswerError that names the step, its object or prefix and the
// bound, and nothing is deleted.
func TestRunStepTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	stallOn := func(op dstltest.Op, match func(string) bool) dstltest.FaultFunc {
		return func(o dstltest.Op, name string) dstltest.Fault {
			return dstltest.Fault{Stall: o == op && match(name)}
		}
	}
	for _, tc := range []struct {
		name   string
		fault  dstltest.FaultFunc
		dryRun bool
		msg    string
		what   string // the step's object or prefix: "probe" for the clock probe's
	}{
		{"probe put stalls", stallOn(dstltest.OpPut, isProbe), false,
			"the clock probe job/.gc-clock-", "probe"},
		{"probe listing stalls", stallOn(dstltest.OpList, isProbe), false,
			"the clock probe job/.gc-clock-", "probe"},
		{"listing stalls", stallOn(dstltest.OpList, func(p string) bool { return p == "job/" }), false,
			"listing job/: the storage did not answer within 300ms", "job/"},
		{"every call stalls, dry run", func(dstltest.Op, string) dstltest.Fault { return dstltest.Fault{Stall: true} }, true,
			"listing job/: the storage did not answer within 300ms", "job/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTimedBackend()
			b.logs(t, 3, time.Now().Add(-3*time.Hour))
			b.SetFault(tc.fault)
			o := collect.Options{JobID: "job", Grace: time.Hour, Kinds: collect.Logs, DryRun: tc.dryRun, Timeout: timeout}
			start := time.Now()
			rep, err := collect.Run(t.Context(), b, o)
			took := time.Since(start)
			var na *collect.NoAnswerError
			if rep != nil || !errors.Is(err, collect.ErrNoAnswer) || !errors.As(err, &na) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("report %+v, error %v; want %q", rep, err, tc.msg)
			}
			if named := na.Name == tc.what || tc.what == "probe" && isProbe(na.Name); !named || na.Timeout != timeout {
				t.Errorf("no answer of %q within %v, want of %q within %v", na.Name, na.Timeout, tc.what, timeout)
			}
			if took > 10*timeout {
				t.Errorf("failed after %v; want about %v", took, timeout)
			}
			if n := len(b.names()); n != 3 {
				t.Errorf("%d objects left, want 3", n)
			}
		})
	}
}

// TestRunEvents: OnEvent is told of each step as it begins and of each
// delete and abort as it ends, with how many ended, in order.
func TestRunEvents(t *testing.T) {
	old := time.Now().Add(-3 * time.Hour)
	b := &uploadsBackend{timedBackend: newTimedBackend()}
	names := b.logs(t, 3, old)
	upload := logName(t, "job/", old)
	b.uploads = append(b.uploads, s3IncompleteUpload(upload, "old", old))
	var events []collect.Event
	_, err := collect.Run(t.Context(), b, collect.Options{JobID: "job", Grace: time.Hour, Kinds: collect.Logs, Concurrency: 1,
		OnEvent: func(e collect.Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || !isProbe(events[0].Name) {
		t.Fatalf("events %+v: want the clock probe's first", events)
	}
	want := []collect.Event{{Kind: collect.EventClock, Name: events[0].Name}, {Kind: collect.EventListing, Name: "job/"},
		{Kind: collect.EventListingUploads, Name: "job/"}, {Kind: collect.EventDeleting, Objects: 3, Uploads: 1}}
	for i, n := range names {
		want = append(want, collect.Event{Kind: collect.EventDeleted, Name: n, Done: i + 1, Total: 4})
	}
	want = append(want, collect.Event{Kind: collect.EventDeleted, Name: upload, UploadID: "old", Done: 4, Total: 4})
	if !slices.Equal(events, want) {
		t.Errorf("events\n%+v\nwant\n%+v", events, want)
	}
}

// TestRunOptions: options that are not valid fail Run before it calls the
// backend, with an error wrapping backends.ErrInvalidConfig; a job id of
// several segments is valid.
func TestRunOptions(t *testing.T) {
	valid := collect.Options{JobID: "job", Grace: time.Hour, Kinds: collect.Logs}
	for _, tc := range []struct {
		name   string
		change func(*collect.Options)
		ok     bool
	}{
		{"valid", func(*collect.Options) {}, true},
		{"job id of two segments", func(o *collect.Options) { o.JobID = "team/job" }, true},
		{"no job id: the root", func(o *collect.Options) { o.JobID = "" }, true},
		{"job id escaping the root", func(o *collect.Options) { o.JobID = "../x" }, false},
		{"job id with an empty segment", func(o *collect.Options) { o.JobID = "a//b" }, false},
		{"zero: the defaults", func(o *collect.Options) { *o = collect.Options{DryRun: true} }, true},
		{"no grace", func(o *collect.Options) { o.Grace = collect.NoGrace }, true},
		{"negative grace", func(o *collect.Options) { o.Grace = -time.Second }, false},
		{"no kinds: the default", func(o *collect.Options) { o.Kinds = 0 }, true},
		{"an unknown kind", func(o *collect.Options) { o.Kinds = collect.Logs | 1<<5 }, false},
		{"negative concurrency", func(o *collect.Options) { o.Concurrency = -1 }, false},
		{"no timeout", func(o *collect.Options) { o.Timeout = collect.NoTimeout }, true},
		{"negative timeout", func(o *collect.Options) { o.Timeout = -time.Second }, false},
		{"negative hold", func(o *collect.Options) { o.HoldFrom = -1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTimedBackend()
			o := valid
			o.DryRun = true
			tc.change(&o)
			rep, err := collect.Run(t.Context(), b, o)
			if tc.ok {
				if err != nil || rep.Prefix != objname.JobPrefix(o.JobID) {
					t.Fatalf("%v, report %+v", err, rep)
				}
				return
			}
			if rep != nil || !errors.Is(err, backends.ErrInvalidConfig) {
				t.Fatalf("report %+v, error %v", rep, err)
			}
			if c := b.Counts(); len(c) > 0 {
				t.Errorf("calls %v", c)
			}
		})
	}
	if _, err := collect.Run(t.Context(), nil, valid); !errors.Is(err, backends.ErrInvalidConfig) {
		t.Errorf("nil backend: %v", err)
	}
}

// TestRunDeletesLeftoverProbes: a clock probe that a collection left
// behind (its process was killed between the put and the delete) is
// deleted by a later collection once it is older than the grace by both
// clocks (a probe of an older version, named by a random UUID, by its
// modification time alone); a younger one may be a running collection's
// and is kept, and a dry run deletes none.
func TestRunDeletesLeftoverProbes(t *testing.T) {
	now := time.Now()
	old, recent := now.Add(-3*time.Hour), now.Add(-time.Minute)
	probe := func(kind objname.Kind, id uuid.UUID) string {
		name, err := objname.Format("job/", objname.Name{Kind: kind, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	for _, tc := range []struct {
		name    string
		id      uuid.UUID
		mod     time.Time
		dryRun  bool
		deleted bool
		kind    objname.Kind // default ClockProbe
	}{
		{"old", v7(t, old), old, false, true, 0},
		{"old create-only probe", v7(t, old), old, false, true, objname.CreateOnlyProbe},
		{"create-only probe named recently", v7(t, recent), old, false, false, objname.CreateOnlyProbe},
		{"create-only probe modified recently", v7(t, old), recent, false, false, objname.CreateOnlyProbe},
		{"old, dry run", v7(t, old), old, true, false, 0},
		{"old random name", uuid.New(), old, false, true, 0},
		{"modified recently", v7(t, old), recent, false, false, 0},
		{"named recently", v7(t, recent), old, false, false, 0},
		{"random name modified recently", uuid.New(), recent, false, false, 0},
		{"no modification time", v7(t, old), time.Time{}, false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTimedBackend()
			left := probe(cmp.Or(tc.kind, objname.ClockProbe), tc.id)
			b.put(t, left, tc.mod)
			rep, err := collect.Run(t.Context(), b, collect.Options{JobID: "job", Grace: time.Hour, Kinds: collect.Logs, DryRun: tc.dryRun})
			if err != nil {
				t.Fatal(err)
			}
			if _, there := b.ObjectBytes(left); there == tc.deleted {
				t.Errorf("probe deleted %v, want %v; objects %v", !there, tc.deleted, b.Objects())
			}
			if b.Len() != map[bool]int{true: 0, false: 1}[tc.deleted] {
				t.Errorf("objects left %v", b.Objects())
			}
			if tc.deleted && rep.Deleted.Objects != 1 {
				t.Errorf("report %+v", rep)
			}
		})
	}
}

// TestRunRecords: checkpoint records are collected with the kind Records
// only: a kept record stays, an unkept one is deleted once old by both
// clocks, a young one stays, one made for a checkpoint at or above
// HoldFrom stays however old; without the kind, records are not
// collected.
func TestRunRecords(t *testing.T) {
	now := time.Now()
	old, young := now.Add(-3*time.Hour), now.Add(-10*time.Minute)
	record := func(at time.Time, checkpoint int64) string {
		name, err := objname.Format("job/", objname.Name{Kind: objname.Record, ID: v7(t, at), Checkpoint: checkpoint})
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	kept, deletable, youngRec, held := record(old, 5), record(old, 6), record(young, 7), record(old, 9)
	for _, tc := range []struct {
		kinds collect.Kinds
		want  map[string]collect.Reason
	}{
		{collect.Logs | collect.Records, map[string]collect.Reason{kept: collect.Referenced, deletable: collect.Deletable, youngRec: collect.Young, held: collect.Held}},
		{collect.Logs | collect.Snapshots, map[string]collect.Reason{kept: collect.Referenced, deletable: collect.NotCollected, youngRec: collect.NotCollected, held: collect.NotCollected}},
	} {
		b := newTimedBackend()
		for _, name := range []string{kept, deletable, youngRec, held} {
			b.put(t, name, old)
		}
		keep := new(collect.Keep)
		keep.AddObject(kept)
		rep, err := collect.Run(t.Context(), b, collect.Options{JobID: "job", Grace: time.Hour, Keep: keep, Kinds: tc.kinds, HoldFrom: 8})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range rep.Objects {
			if o.Kind != objname.Record || o.Reason != tc.want[o.Name] {
				t.Errorf("kinds %#x: %s: %v (%v), want %v", tc.kinds, o.Name, o.Reason, o.Kind, tc.want[o.Name])
			}
			if _, stored := b.ObjectBytes(o.Name); stored == (tc.want[o.Name] == collect.Deletable) {
				t.Errorf("kinds %#x: %s: stored %v", tc.kinds, o.Name, stored)
			}
		}
	}
}
