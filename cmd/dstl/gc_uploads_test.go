package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/s3"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/dstltest"
	"github.com/dstlgo/dstl/statestore"
)

// uploadsBackend is an in-memory backend with incomplete uploads, whose
// aborts fail or stall as told.
type uploadsBackend struct {
	timedBackend
	mu       sync.Mutex
	uploads  []s3.IncompleteUpload
	abortErr map[string]error // by upload id
	stall    map[string]bool  // by upload id: the abort waits for its context
}

func (b *uploadsBackend) ListIncompleteUploads(ctx context.Context, prefix string, fn func(s3.IncompleteUpload) error, page func()) error {
	b.mu.Lock()
	us := slices.Clone(b.uploads)
	b.mu.Unlock()
	for _, u := range us {
		if strings.HasPrefix(u.Name, prefix) {
			if err := fn(u); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *uploadsBackend) AbortIncompleteUpload(ctx context.Context, u s3.IncompleteUpload) error {
	if b.stall[u.UploadID] {
		<-ctx.Done()
		return ctx.Err()
	}
	if err := b.abortErr[u.UploadID]; err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.uploads = slices.DeleteFunc(b.uploads, func(v s3.IncompleteUpload) bool { return v.UploadID == u.UploadID })
	return nil
}

// TestGCUploads: gc aborts the incomplete uploads under the job's prefix
// of log and snapshot names that are old by both clocks, and keeps the
// others; those of snapshots only where gc collects snapshots (with
// --keep-none, or of an operator whose checkpoint handle is kept); a dry
// run, or a run that refuses, aborts none; a failed abort is a FAILED row
// and exit 3; a stalled one ends gc within --timeout.
func TestGCUploads(t *testing.T) {
	now := time.Now()
	old, young := now.Add(-3*time.Hour), now.Add(-10*time.Minute)
	boom := errors.New("boom")
	type upload struct {
		name      string
		initiated time.Time
		abort     bool // old, of an object gc collects
	}
	uploads := map[string]upload{ // by upload id
		"old-log":         {v7Name(t, "job/", old), old, true},
		"old-snapshot":    {snapName(t, "job", "op-0", old), old, true},
		"young-initiated": {v7Name(t, "job/", old), young, false},
		"young-name":      {v7Name(t, "job/", young), old, false},
		"foreign":         {"job/notes.txt", old, false},
	}
	for _, tc := range []struct {
		name     string
		args     []string
		abortErr map[string]error
		stall    map[string]bool
		missing  bool   // a kept handle's object is missing: gc refuses
		keepOp   string // keep a checkpoint handle of this operator (not --keep-none)
		code     int
		aborted  []string // upload ids
		status   string   // of the old uploads' rows
	}{
		{"aborts the old", nil, nil, nil, false, "", exitOK, []string{"old-log", "old-snapshot"}, "aborted"},
		{"dry run", []string{"--dry-run"}, nil, nil, false, "", exitOK, nil, "would abort"},
		{"an abort fails", nil, map[string]error{"old-log": boom}, nil, false, "", exitRuntime, []string{"old-snapshot"}, ""},
		{"an abort stalls", []string{"--timeout", "200ms", "--concurrency", "1"}, nil, map[string]bool{"old-log": true, "old-snapshot": true}, false, "", exitRuntime, nil, ""},
		{"refused", nil, nil, nil, true, "", exitFailed, nil, "would abort (not run)"},
		{"the snapshot's operator kept", nil, nil, nil, false, "op-0", exitOK, []string{"old-log", "old-snapshot"}, "aborted"},
		{"another operator kept", nil, nil, nil, false, "op-1", exitOK, []string{"old-log"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &uploadsBackend{timedBackend: timedBackend{dstltest.NewBackend(), map[string]time.Time{}}, abortErr: tc.abortErr, stall: tc.stall}
			memObjects(t, b.timedBackend, 1, young)
			b.uploads = append(b.uploads, s3.IncompleteUpload{Name: v7Name(t, "other-job/", old), UploadID: "other-job", Initiated: old})
			for id, u := range uploads {
				b.uploads = append(b.uploads, s3.IncompleteUpload{Name: u.name, UploadID: id, Initiated: u.initiated})
			}
			args := append([]string{"--grace", "1h"}, tc.args...)
			switch {
			case tc.missing:
				hs := persistHandles(t, t.TempDir(), "job", 1) // objects of another storage
				args = append(args, "--keep", writeHandleFile(t, t.TempDir()+"/keep.json", false, hs...))
			case tc.keepOp != "":
				snap := snapName(t, "job", tc.keepOp, young)
				if err := b.Put(t.Context(), snap, strings.NewReader("some bytes"), 10); err != nil {
					t.Fatal(err)
				}
				cp := statestore.CheckpointHandle{CheckpointID: 1, Operator: tc.keepOp, KeyGroups: dstl.KeyGroupRange{Start: 0, End: 127}, MaxParallelism: 128,
					Snapshots: []statestore.SnapshotRef{{Object: snap, Size: 10}}}
				args = append(args, "--keep", writeCheckpointHandle(t, t.TempDir()+"/cp", cp))
			default:
				args = append(args, "--keep-none")
			}
			start := time.Now()
			r := runGCOver(t, t.Context(), b, time.Now, args...)
			if r.code != tc.code || time.Since(start) > 5*time.Second {
				t.Fatalf("exit %d after %v\n%s\n%s", r.code, time.Since(start), r.out, r.errOut)
			}
			// The uploads gc would abort: op-0's snapshot's only where gc
			// collects op-0's snapshots.
			collectsOp0 := tc.keepOp == "op-0" || tc.keepOp == "" && !tc.missing
			old := map[bool]int{true: 2, false: 1}[collectsOp0]
			if !r.rep.UploadsChecked || r.rep.UploadsListed != 5 || r.rep.UploadsKept != 5-old || len(r.rep.Uploads) != old || r.rep.UploadsAborted != len(tc.aborted) {
				t.Errorf("report %+v", r.rep)
			}
			var left []string
			for _, u := range b.uploads {
				left = append(left, u.UploadID)
			}
			for id, u := range uploads {
				if gone := !slices.Contains(left, id); gone != slices.Contains(tc.aborted, id) {
					t.Errorf("%s (%+v): aborted %v", id, u, gone)
				}
			}
			if !slices.Contains(left, "other-job") {
				t.Error("another job's upload was aborted")
			}
			for _, u := range r.rep.Uploads {
				if !uploads[u.UploadID].abort || !collectsOp0 && u.UploadID == "old-snapshot" || u.Aborted != slices.Contains(tc.aborted, u.UploadID) {
					t.Errorf("reported %+v", u)
				}
			}
			var text bytes.Buffer
			r.rep.print(&text)
			if tc.status != "" && strings.Count(text.String(), "\n"+tc.status+"  ") != old {
				t.Errorf("want 2 rows %q:\n%s", tc.status, text.String())
			}
			switch tc.name {
			case "an abort fails":
				if len(r.rep.Failed) != 1 || r.rep.Failed[0].UploadID != "old-log" || !strings.Contains(r.errOut, "deletes and aborts failed") ||
					!strings.Contains(text.String(), "\nFAILED  ") {
					t.Errorf("failures %+v\n%s\n%s", r.rep.Failed, r.errOut, text.String())
				}
			case "an abort stalls":
				if !strings.Contains(r.errOut, "did not answer within --timeout 200ms") || !strings.Contains(text.String(), "\nnot aborted  ") {
					t.Errorf("%s\n%s", r.errOut, text.String())
				}
			}
		})
	}
}
