package s3

import (
	"slices"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestIncompleteUploads: uploads started and never completed are listed by
// the prefix of their names (also on MinIO, which lists uploads only by
// exact key or for the whole bucket), without those of other prefixes or
// outside the backend's prefix, and aborting one removes it; aborting it
// again is no error.
func TestIncompleteUploads(t *testing.T) {
	u, prefix := testURL(t, "", nil)
	b := openURL(t, u)
	ctx := t.Context()
	start := func(key string) string {
		out, err := b.Client().CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &b.d.bucket, Key: &key})
		if err != nil {
			t.Fatalf("CreateMultipartUpload %s: %v", key, err)
		}
		t.Cleanup(func() {
			b.Client().AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &b.d.bucket, Key: &key, UploadId: out.UploadId})
		})
		return *out.UploadId
	}
	before := time.Now().Add(-time.Minute)
	ids := map[string]string{} // name -> upload id
	for _, name := range []string{"job/a.dstl", "job/statestore/op/b.snap", "job/a.dstl", "jobs/c.dstl", "other/d.dstl"} {
		ids[name+"#"+start(prefix+name)] = name
	}
	start("outside-" + prefix + "job/e.dstl") // not under the backend's prefix
	list := func(p string) []IncompleteUpload {
		var got []IncompleteUpload
		pages := 0
		if err := b.ListIncompleteUploads(ctx, p, func(u IncompleteUpload) error { got = append(got, u); return nil }, func() { pages++ }); err != nil {
			t.Fatalf("ListIncompleteUploads(%q): %v", p, err)
		}
		if pages == 0 {
			t.Errorf("ListIncompleteUploads(%q): no page reported", p)
		}
		return got
	}
	for _, tc := range []struct {
		prefix string
		want   int
	}{{"job/", 3}, {"job", 4}, {"", 5}, {"other/", 1}, {"none/", 0}} {
		got := list(tc.prefix)
		var names []string
		for _, u := range got {
			names = append(names, u.Name)
			if ids[u.Name+"#"+u.UploadID] != u.Name || u.Initiated.Before(before) || u.Initiated.After(time.Now().Add(time.Minute)) {
				t.Errorf("prefix %q: listed %+v, not one started", tc.prefix, u)
			}
		}
		if len(got) != tc.want {
			t.Errorf("prefix %q: listed %q, want %d", tc.prefix, names, tc.want)
		}
	}
	got := list("job/")
	if len(got) == 0 {
		t.Fatal("no upload listed under job/")
	}
	for _, u := range got {
		if err := b.AbortIncompleteUpload(ctx, u); err != nil {
			t.Fatalf("AbortIncompleteUpload(%+v): %v", u, err)
		}
	}
	if left := list("job/"); len(left) != 0 {
		t.Errorf("left after the aborts: %+v", left)
	}
	if err := b.AbortIncompleteUpload(ctx, got[0]); err != nil {
		t.Errorf("abort of an aborted upload: %v", err)
	}
	if left := list(""); !slices.ContainsFunc(left, func(u IncompleteUpload) bool { return u.Name == "other/d.dstl" }) || len(left) != 2 {
		t.Errorf("the other uploads: %+v", left)
	}
}
