package main

import (
	"cmp"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dstlgo/dstl/dstl/objname"
)

// fakeS3 is an S3 service of one bucket, "bucket", enough for gc: puts,
// deletes, a listing of objects by prefix, and listings of incomplete
// uploads (in pages of pageSize, each answered after delay) and their
// aborts.
type fakeS3 struct {
	// honoursPrefix: uploads are listed by prefix, as S3 does; otherwise
	// as MinIO does, by exact key or for the whole bucket only.
	honoursPrefix bool
	pageSize      int
	delay         time.Duration
	// scope: when not empty, a put or delete of a key outside it is
	// denied, as by credentials scoped to BUCKET/scope*.
	scope string

	mu            sync.Mutex
	objects       map[string]time.Time // key -> modification time
	uploads       []fakeUpload
	uploadLists   int      // listings of uploads answered
	wholeListings int      // of them, pages of the whole bucket of more than one upload
	puts          []string // keys put
	aborted       []string // upload ids
}

type fakeUpload struct {
	Key       string
	UploadID  string `xml:"UploadId"`
	Initiated string
}

// newFakeS3 starts s on 127.0.0.1 and returns a base path of the bucket's
// prefix "dstl" there.
func newFakeS3(t *testing.T, s *fakeS3) string {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	if s.objects == nil {
		s.objects = map[string]time.Time{}
	}
	slices.SortFunc(s.uploads, func(a, b fakeUpload) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.UploadID, b.UploadID))
	})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	q := url.Values{"endpoint": {srv.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}}
	return "s3://bucket/dstl?" + q.Encode()
}

func (s *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	key, ok := strings.CutPrefix(r.URL.Path, "/bucket")
	if !ok {
		http.Error(w, "no such bucket", http.StatusNotFound)
		return
	}
	key = strings.TrimPrefix(key, "/")
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	if (r.Method == http.MethodPut || r.Method == http.MethodDelete) && s.scope != "" && !strings.HasPrefix(key, s.scope) {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
		return
	}
	switch {
	case r.Method == http.MethodGet && key == "" && q.Has("uploads"):
		s.listUploads(w, q)
	case r.Method == http.MethodGet && key == "" && q.Get("list-type") == "2":
		type content struct {
			Key          string
			LastModified string
			ETag         string
			Size         int
		}
		var res struct {
			XMLName     xml.Name `xml:"ListBucketResult"`
			Name        string
			Prefix      string
			KeyCount    int
			MaxKeys     int
			IsTruncated bool
			Contents    []content
		}
		res.Name, res.Prefix, res.MaxKeys = "bucket", q.Get("prefix"), 1000
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range s.objects {
				if !yield(k) {
					return
				}
			}
		}) {
			if strings.HasPrefix(k, res.Prefix) {
				res.Contents = append(res.Contents, content{k, s.objects[k].UTC().Format("2006-01-02T15:04:05.000Z"), `"e"`, 10})
			}
		}
		res.KeyCount = len(res.Contents)
		writeXML(w, res)
	case r.Method == http.MethodPut && key != "" && !q.Has("uploadId"):
		s.objects[key] = time.Now()
		s.puts = append(s.puts, key)
		w.Header().Set("ETag", `"e"`)
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		id := q.Get("uploadId")
		s.uploads = slices.DeleteFunc(s.uploads, func(u fakeUpload) bool { return u.Key == key && u.UploadID == id })
		s.aborted = append(s.aborted, id)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodDelete:
		delete(s.objects, key)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusNotImplemented)
		fmt.Fprintf(w, `<Error><Code>NotImplemented</Code><Message>%s %s</Message></Error>`, r.Method, r.URL)
	}
}

// listUploads answers a page of uploads, after s.delay (the lock held:
// the service answers one listing at a time).
func (s *fakeS3) listUploads(w http.ResponseWriter, q url.Values) {
	time.Sleep(s.delay)
	prefix, keyMarker, idMarker := q.Get("prefix"), q.Get("key-marker"), q.Get("upload-id-marker")
	max := s.pageSize
	if m, err := strconv.Atoi(q.Get("max-uploads")); err == nil && m < max {
		max = m
	}
	var res struct {
		XMLName            xml.Name `xml:"ListMultipartUploadsResult"`
		Bucket             string
		Prefix             string
		MaxUploads         int
		IsTruncated        bool
		NextKeyMarker      string `xml:",omitempty"`
		NextUploadIdMarker string `xml:",omitempty"`
		Upload             []fakeUpload
	}
	res.Bucket, res.Prefix, res.MaxUploads = "bucket", prefix, max
	for _, u := range s.uploads {
		switch {
		case keyMarker != "" && cmp.Or(strings.Compare(u.Key, keyMarker), strings.Compare(u.UploadID, idMarker)) <= 0:
		case s.honoursPrefix && !strings.HasPrefix(u.Key, prefix):
		case !s.honoursPrefix && prefix != "" && u.Key != prefix:
		case len(res.Upload) == max:
			res.IsTruncated = true
		default:
			res.Upload = append(res.Upload, u)
		}
	}
	if res.IsTruncated {
		last := res.Upload[len(res.Upload)-1]
		res.NextKeyMarker, res.NextUploadIdMarker = last.Key, last.UploadID
	}
	s.uploadLists++
	if prefix == "" && max > 1 {
		s.wholeListings++
	}
	writeXML(w, res)
}

func writeXML(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/xml")
	b, err := xml.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Write(b)
}

// TestGCUploadListingPages: gc lists a job's incomplete uploads on S3,
// which lists them by prefix, and on MinIO, which lists them only by exact
// key or for the whole bucket, among thousands of other jobs' uploads in
// pages answered slowly. Every page is progress within --timeout, also a
// page of other jobs' uploads only, and S3 is not asked for the whole
// bucket's uploads: gc finds the job's old upload, aborts it and leaves the
// others.
func TestGCUploadListingPages(t *testing.T) {
	old := time.Now().Add(-3 * time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")
	for _, tc := range []struct {
		name          string
		honoursPrefix bool
		jobUpload     bool // the job has an old incomplete upload
		maxLists      int  // listings of uploads; 0: any
	}{
		{"S3, the job has none", true, false, 3},
		{"S3, the job has one", true, true, 1},
		{"MinIO, the job has none", false, false, 0},
		{"MinIO, the job has one", false, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &fakeS3{honoursPrefix: tc.honoursPrefix, pageSize: 10, delay: 40 * time.Millisecond}
			// Other jobs' uploads, 15 pages before the job's keys and 15
			// after: 1.2 s of pages, three times --timeout.
			for i := range 150 {
				s.uploads = append(s.uploads,
					fakeUpload{"dstl/" + v7Name(t, fmt.Sprintf("a-%03d/", i), time.Now().Add(-3*time.Hour)), fmt.Sprintf("a-%03d", i), old},
					fakeUpload{"dstl/" + v7Name(t, fmt.Sprintf("z-%03d/", i), time.Now().Add(-3*time.Hour)), fmt.Sprintf("z-%03d", i), old})
			}
			if tc.jobUpload {
				s.uploads = append(s.uploads, fakeUpload{"dstl/" + v7Name(t, "job/", time.Now().Add(-3*time.Hour)), "job-upload", old})
			}
			others := len(s.uploads) - map[bool]int{true: 1}[tc.jobUpload]
			base := newFakeS3(t, s)
			code, out, errOut := runCLI(t, "gc", "--json", "--base-path", base, "--job-id", "job", "--grace", "1h", "--keep-none", "--timeout", "400ms")
			var rep gcReport
			if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil {
				t.Fatalf("exit %d, %v\n%s\n%s", code, err, out, errOut)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			want := map[bool]int{true: 1}[tc.jobUpload]
			if !rep.UploadsChecked || rep.UploadsListed != want || rep.UploadsAborted != want || len(s.aborted) != want {
				t.Errorf("report %+v; aborted %q", rep, s.aborted)
			}
			if tc.jobUpload && (len(s.aborted) != 1 || s.aborted[0] != "job-upload") {
				t.Errorf("aborted %q, want the job's upload", s.aborted)
			}
			if len(s.uploads) != others {
				t.Errorf("%d uploads left, want the %d of other jobs", len(s.uploads), others)
			}
			if tc.maxLists > 0 && (s.uploadLists > tc.maxLists || s.wholeListings > 0) {
				t.Errorf("%d listings of uploads, %d of them pages of the whole bucket; want at most %d and none", s.uploadLists, s.wholeListings, tc.maxLists)
			}
		})
	}
}

// TestGCScopedCredentials: with credentials that allow writes only under
// the job's prefix (BUCKET/PREFIX/JOB/*), gc runs: its clock probe is put,
// and deleted, under the job's prefix.
func TestGCScopedCredentials(t *testing.T) {
	s := &fakeS3{honoursPrefix: true, pageSize: 1000, scope: "dstl/job/"}
	s.objects = map[string]time.Time{"dstl/" + v7Name(t, "job/", time.Now().Add(-3*time.Hour)): time.Now().Add(-3 * time.Hour)}
	base := newFakeS3(t, s)
	code, out, errOut := runCLI(t, "gc", "--json", "--base-path", base, "--job-id", "job", "--grace", "1h", "--keep-none")
	var rep gcReport
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rep.Listed.Objects != 1 || rep.Deleted.Objects != 1 || rep.Foreign.Objects != 0 || rep.StoreNow == nil {
		t.Errorf("report %+v", rep)
	}
	if len(s.puts) != 1 || !strings.HasPrefix(s.puts[0], "dstl/job/"+objname.ClockProbePrefix) {
		t.Errorf("puts %q, want the clock probe under dstl/job/", s.puts)
	}
	if len(s.objects) != 0 {
		t.Errorf("left %v", s.objects)
	}
}
