package s3

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/faultproxy"
	"github.com/dstlgo/dstl/conformance"
)

// faults are what the proxy does to the first attempt of a request, in
// turn.
var faults = []faultproxy.Action{
	{Status: http.StatusServiceUnavailable},
	{Status: http.StatusInternalServerError},
	{Stall: 30 * time.Second}, // past the request timeout
	{Reset: true},
}

// requestKey names a request apart from its attempts: method, path and
// the query parameters that tell multipart calls apart.
func requestKey(r *http.Request) string {
	q := r.URL.Query()
	return fmt.Sprintf("%s %s part=%s uploads=%v upload=%v range=%s",
		r.Method, r.URL.Path, q.Get("partNumber"), q.Has("uploads"), q.Has("uploadId"), r.Header.Get("Range"))
}

// TestFaults: through a proxy that fails, stalls or cuts the first attempt
// of every request, Puts (single and multipart), Gets, Lists and Deletes
// still succeed and the objects read back whole; a multipart Put whose
// part fails for good is aborted and leaves no incomplete upload; a 403 is
// not retried.
func TestFaults(t *testing.T) {
	env := requireEnv(t)
	seen := map[string]int{}
	var i int
	firstAttempts := func(r *http.Request, _ int) faultproxy.Action {
		k := requestKey(r)
		seen[k]++
		if seen[k] > 1 {
			return faultproxy.Action{}
		}
		i++
		return faults[i%len(faults)]
	}
	proxy, err := faultproxy.New(env["DSTL_S3_ENDPOINT"], firstAttempts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close) // after the backend's cleanup, which goes through it
	u, _ := testURL(t, proxy.URL(), url.Values{
		"request_timeout": {"2s"}, "max_attempts": {"4"}, "concurrency": {"2"},
	})
	b := openURL(t, u)

	small := payload(1000)
	large := payload(3*testPartSize + testPartSize/2)
	for name, data := range map[string][]byte{"small": small, "large": large} {
		if err := b.Put(t.Context(), name, bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatalf("Put %s: %v", name, err)
		}
		got, err := conformance.Read(t.Context(), b, name, 0, -1)
		if err != nil || got != string(data) {
			t.Fatalf("Get %s: %d bytes, %v; want %d bytes", name, len(got), err, len(data))
		}
		off := int64(testPartSize - 100)
		if int64(len(data)) < off {
			off = 10
		}
		got, err = conformance.Read(t.Context(), b, name, off, 200)
		if err != nil || got != string(data[off:off+200]) {
			t.Fatalf("Get %s [%d, +200): %q, %v", name, off, got, err)
		}
	}
	var names []string
	if err := b.List(t.Context(), "", func(o backends.ObjectInfo) error { names = append(names, o.Name); return nil }); err != nil {
		t.Fatalf("List: %v", err)
	}
	if strings.Join(names, ",") != "large,small" {
		t.Fatalf("List = %q", names)
	}
	if err := b.Delete(t.Context(), "small"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if n := proxy.Faults(); n < 10 {
		t.Fatalf("only %d faults injected", n)
	}
	kinds := map[string]bool{}
	for _, r := range proxy.Records() {
		switch a := r.Action; {
		case a.Status != 0:
			kinds[fmt.Sprint(a.Status)] = true
		case a.Stall > 0:
			kinds["stall"] = true
		case a.Reset:
			kinds["reset"] = true
		}
	}
	if len(kinds) != len(faults) {
		t.Fatalf("fault kinds injected: %v, want all %d", kinds, len(faults))
	}

	t.Run("part fails for good", func(t *testing.T) {
		proxy.SetRule(func(r *http.Request, _ int) faultproxy.Action {
			if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
				return faultproxy.Action{Status: http.StatusServiceUnavailable}
			}
			return faultproxy.Action{}
		})
		defer proxy.SetRule(nil)
		err := b.Put(t.Context(), "doomed", bytes.NewReader(large), int64(len(large)))
		conformance.CheckError(t, err, "put", ID, "doomed", nil)
		if !strings.Contains(err.Error(), b.d.bucket) {
			t.Errorf("error %q does not name the bucket", err)
		}
		if ids := uploads(t, b, b.Prefix()+"doomed"); len(ids) != 0 {
			t.Fatalf("incomplete uploads left: %v", ids)
		}
		_, err = b.Get(t.Context(), "doomed", 0, -1)
		conformance.CheckError(t, err, "get", ID, "doomed", backends.ErrNotFound)
	})

	t.Run("forbidden is not retried", func(t *testing.T) {
		before := len(proxy.Records())
		proxy.SetRule(func(*http.Request, int) faultproxy.Action { return faultproxy.Action{Status: http.StatusForbidden} })
		defer proxy.SetRule(nil)
		err := b.Put(t.Context(), "denied", bytes.NewReader(small), int64(len(small)))
		conformance.CheckError(t, err, "put", ID, "denied", backends.ErrPermission)
		if n := len(proxy.Records()) - before; n != 1 {
			t.Fatalf("%d requests for a forbidden put, want 1", n)
		}
		if errors.Is(err, backends.ErrExists) {
			t.Fatalf("forbidden reported as exists: %v", err)
		}
	})
}

// TestBodyFailureIsNotRetried: a Put whose body fails or ends early fails
// with the body's error after one attempt of the request that read it,
// whatever the transport made of it, and leaves nothing.
func TestBodyFailureIsNotRetried(t *testing.T) {
	env := requireEnv(t)
	proxy, err := faultproxy.New(env["DSTL_S3_ENDPOINT"], nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	u, _ := testURL(t, proxy.URL(), url.Values{"max_attempts": {"4"}})
	b := openURL(t, u)
	errBroken := errors.New("broken body")
	large := payload(2*testPartSize + 100)
	tests := []struct {
		name string
		body io.ReaderAt
		size int64
		want error
	}{
		{"short", bytes.NewReader(large[:100]), 1000, io.ErrUnexpectedEOF},
		{"failing part", &brokenAt{r: bytes.NewReader(large), at: testPartSize + 10, err: errBroken}, int64(len(large)), errBroken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(proxy.Records())
			err := b.Put(t.Context(), tt.name, tt.body, tt.size)
			conformance.CheckError(t, err, "put", ID, tt.name, tt.want)
			sent := map[string]int{}
			for _, r := range proxy.Records()[before:] {
				if r.Method == http.MethodPut {
					sent[r.Query]++
				}
			}
			for q, n := range sent {
				if n > 1 {
					t.Errorf("PUT ?%s sent %d times", q, n)
				}
			}
			_, err = b.Get(t.Context(), tt.name, 0, -1)
			conformance.CheckError(t, err, "get", ID, tt.name, backends.ErrNotFound)
		})
	}
	if ids := uploads(t, b, b.Prefix()+"failing part"); len(ids) != 0 {
		t.Fatalf("incomplete uploads left: %v", ids)
	}
}

// brokenAt reads from r, and fails with err from offset at on.
type brokenAt struct {
	r   io.ReaderAt
	at  int64
	err error
}

func (b *brokenAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > b.at {
		n, _ := b.r.ReadAt(p[:max(b.at-off, 0)], off)
		return n, b.err
	}
	return b.r.ReadAt(p, off)
}
