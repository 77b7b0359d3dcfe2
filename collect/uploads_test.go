package collect_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/s3"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl/objname"
)

func s3IncompleteUpload(name, id string, initiated time.Time) s3.IncompleteUpload {
	return s3.IncompleteUpload{Name: name, UploadID: id, Initiated: initiated}
}

// asBackend is a wrapper that hides its backend's upload methods and
// hands them on through As.
type asBackend struct {
	backends.Backend
	uploads collect.UploadCollector
}

func (b asBackend) As(target any) bool {
	if p, ok := target.(*collect.UploadCollector); ok {
		*p = b.uploads
		return true
	}
	return false
}

// TestRunUploads: Run aborts the incomplete uploads under the job's
// prefix of the objects it collects (logs, and snapshots of the operators
// it collects) that are old by both clocks, and keeps the others; a dry
// run, or a run that refuses, aborts none; a failed abort is a failure of
// Run's; a stalled one stops Run within the timeout. The uploads are
// found on the backend, through its As, or given in the options.
func TestRunUploads(t *testing.T) {
	now := time.Now()
	old, young := now.Add(-3*time.Hour), now.Add(-10*time.Minute)
	boom := errors.New("boom")
	uploads := map[string]s3.IncompleteUpload{ // by upload id
		"old-log":         s3IncompleteUpload(logName(t, "job/", old), "old-log", old),
		"old-snapshot":    s3IncompleteUpload(snapName(t, "job/", "op-0", old), "old-snapshot", old),
		"young-initiated": s3IncompleteUpload(logName(t, "job/", old), "young-initiated", young),
		"young-name":      s3IncompleteUpload(logName(t, "job/", young), "young-name", old),
		"foreign":         s3IncompleteUpload("job/notes.txt", "foreign", old),
	}
	for _, tc := range []struct {
		name      string
		o         collect.Options
		abortErr  map[string]error
		stall     map[string]bool
		missing   bool   // a kept object is missing: Run refuses
		keepOp    string // an operator whose snapshots are collected (not AllOperators)
		find      string // how Run finds the uploads: "" (the backend), "as", "options" or "none"
		wantErr   error
		old       []string // upload ids reported (old, of collected objects)
		aborted   []string // upload ids
		errString string
	}{
		{name: "aborts the old", old: []string{"old-log", "old-snapshot"}, aborted: []string{"old-log", "old-snapshot"}},
		{name: "dry run", o: collect.Options{DryRun: true}, old: []string{"old-log", "old-snapshot"}},
		{name: "an abort fails", abortErr: map[string]error{"old-log": boom}, wantErr: boom, old: []string{"old-log", "old-snapshot"},
			aborted: []string{"old-snapshot"}, errString: "1 of 2 deletes and aborts failed (0 of 0 objects deleted, 1 of 2 incomplete uploads aborted), e.g. boom"},
		{name: "an abort stalls", o: collect.Options{Timeout: 200 * time.Millisecond, Concurrency: 1}, stall: map[string]bool{"old-log": true, "old-snapshot": true},
			wantErr: collect.ErrNoAnswer, old: []string{"old-log", "old-snapshot"}, errString: "stopped: 0 of 0 objects deleted, 0 of 2 incomplete uploads aborted: aborting the upload old-log of job/"},
		{name: "refused", missing: true, wantErr: collect.ErrMissing, old: []string{"old-log"}},
		{name: "the snapshot's operator collected", keepOp: "op-0", old: []string{"old-log", "old-snapshot"}, aborted: []string{"old-log", "old-snapshot"}},
		{name: "another operator collected", keepOp: "op-1", old: []string{"old-log"}, aborted: []string{"old-log"}},
		{name: "logs only", o: collect.Options{Kinds: collect.Logs}, old: []string{"old-log"}, aborted: []string{"old-log"}},
		{name: "snapshots only", o: collect.Options{Kinds: collect.Snapshots}, old: []string{"old-snapshot"}, aborted: []string{"old-snapshot"}},
		{name: "found through As", find: "as", old: []string{"old-log", "old-snapshot"}, aborted: []string{"old-log", "old-snapshot"}},
		{name: "given in the options", find: "options", old: []string{"old-log", "old-snapshot"}, aborted: []string{"old-log", "old-snapshot"}},
		{name: "a backend without them", find: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ub := &uploadsBackend{timedBackend: newTimedBackend(), abortErr: tc.abortErr, stall: tc.stall}
			ub.logs(t, 1, young)
			ub.uploads = append(ub.uploads, s3IncompleteUpload(logName(t, "other-job/", old), "other-job", old))
			for _, u := range uploads {
				ub.uploads = append(ub.uploads, u)
			}
			o := tc.o
			o.JobID, o.Grace = "job", time.Hour
			o.Kinds = cmpOr(o.Kinds, collect.Logs|collect.Snapshots)
			o.Keep = new(collect.Keep)
			switch {
			case tc.missing:
				o.Keep.AddObject(logName(t, "job/", old)) // not there
			case tc.keepOp != "":
				o.Keep.AddOperator(tc.keepOp)
			default:
				o.AllOperators = true
			}
			var b backends.Backend = ub
			switch tc.find {
			case "as":
				b = asBackend{ub.timedBackend, ub}
			case "options":
				b, o.Uploads = ub.timedBackend, ub
			case "none":
				b = ub.timedBackend
			}
			start := time.Now()
			rep, err := collect.Run(t.Context(), b, o)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) || !strings.Contains(errString(err), tc.errString) {
				t.Fatalf("error %v, want %v with %q", err, tc.wantErr, tc.errString)
			}
			if tc.find == "none" {
				if rep.UploadsChecked || rep.UploadsListed != 0 || len(ub.left()) != 6 {
					t.Errorf("report %+v, uploads left %q", rep, ub.left())
				}
				return
			}
			if !rep.UploadsChecked || rep.UploadsListed != 5 || rep.UploadsKept != 5-len(tc.old) || rep.UploadsAborted != len(tc.aborted) {
				t.Errorf("report %+v", rep)
			}
			var ids []string
			for _, u := range rep.Uploads {
				ids = append(ids, u.UploadID)
				want := uploads[u.UploadID]
				if u.Name != want.Name || !u.Initiated.Equal(want.Initiated) || u.NameTime.IsZero() || u.Aborted != slices.Contains(tc.aborted, u.UploadID) {
					t.Errorf("reported %+v", u)
				}
			}
			if !slices.IsSortedFunc(rep.Uploads, func(a, b collect.Upload) int { return strings.Compare(a.Name, b.Name) }) {
				t.Errorf("uploads not sorted: %+v", rep.Uploads)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tc.old) {
				t.Errorf("reported %q, want %q", ids, tc.old)
			}
			left := ub.left()
			for id := range uploads {
				if gone := !slices.Contains(left, id); gone != slices.Contains(tc.aborted, id) {
					t.Errorf("%s: aborted %v", id, gone)
				}
			}
			if !slices.Contains(left, "other-job") {
				t.Error("another job's upload was aborted")
			}
			if tc.name == "an abort fails" && (len(rep.Failed) != 1 || rep.Failed[0].UploadID != "old-log" || rep.Failed[0].Name != uploads["old-log"].Name) {
				t.Errorf("failures %+v", rep.Failed)
			}
		})
	}
}

func cmpOr(k, or collect.Kinds) collect.Kinds {
	if k == 0 {
		return or
	}
	return k
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestRunAbortsLeftoverProbeUploads: an incomplete multipart upload of the
// catalog's create-only check (its process killed during the check) is
// aborted once old by both clocks, whatever kinds the collection collects;
// a young one may be a running check's and is kept.
func TestRunAbortsLeftoverProbeUploads(t *testing.T) {
	now := time.Now()
	old, young := now.Add(-3*time.Hour), now.Add(-10*time.Minute)
	probeName := func(at time.Time) string {
		name, err := objname.Format("job/", objname.Name{Kind: objname.CreateOnlyProbe, ID: v7(t, at)})
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	for _, kinds := range []collect.Kinds{collect.Logs, collect.Snapshots} {
		ub := &uploadsBackend{timedBackend: newTimedBackend()}
		ub.uploads = append(ub.uploads,
			s3IncompleteUpload(probeName(old), "old-probe", old),
			s3IncompleteUpload(probeName(young), "young-probe", old),
			s3IncompleteUpload(probeName(old), "young-initiated-probe", young))
		rep, err := collect.Run(t.Context(), ub, collect.Options{JobID: "job", Grace: time.Hour, Kinds: kinds, Keep: new(collect.Keep), AllOperators: true})
		if err != nil {
			t.Fatal(err)
		}
		if left := ub.left(); rep.UploadsAborted != 1 || slices.Contains(left, "old-probe") || len(left) != 2 {
			t.Errorf("kinds %v: %d aborted, uploads left %q; want the old probe's aborted", kinds, rep.UploadsAborted, left)
		}
	}
}
