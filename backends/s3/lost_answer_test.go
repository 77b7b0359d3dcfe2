package s3

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/conformance"
)

// dropProxy forwards every request to its target and, for those its rule
// picks, drops the answer once the target has given it: it closes the
// connection instead, so that the request took effect but its client
// never learns so.
type dropProxy struct {
	srv *httptest.Server
	fwd *httputil.ReverseProxy

	mu      sync.Mutex
	drop    func(r *http.Request, n int) bool // n: 1-based count of requests of r's kind
	seen    map[string]int
	dropped int
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{fwd: httputil.NewSingleHostReverseProxy(u), seen: map[string]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() { p.srv.CloseClientConnections(); p.srv.Close() })
	return p
}

// setDrop sets the rule and forgets the counts.
func (p *dropProxy) setDrop(drop func(r *http.Request, n int) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop, p.seen, p.dropped = drop, map[string]int{}, 0
}

func (p *dropProxy) droppedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

func (p *dropProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	k := requestKey(r)
	p.seen[k]++
	drop := p.drop != nil && p.drop(r, p.seen[k])
	if drop {
		p.dropped++
	}
	p.mu.Unlock()
	if !drop {
		p.fwd.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	p.fwd.ServeHTTP(rec, r) // the target has answered: the request took effect
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		_ = conn.Close()
	}
}

// isPutObject and isComplete pick the requests that make an object visible.
func isPutObject(r *http.Request) bool {
	q := r.URL.Query()
	return r.Method == http.MethodPut && !q.Has("partNumber") && !q.Has("uploadId")
}

func isComplete(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Query().Has("uploadId")
}

// TestLostAnswer: when the answer to a PutObject or a
// CompleteMultipartUpload that succeeded is lost, the Put still succeeds
// (its retry meets its own object, or its retries run out) and the object
// reads back; an object that another Put wrote is still ErrExists.
func TestLostAnswer(t *testing.T) {
	env := requireEnv(t)
	proxy := newDropProxy(t, env["DSTL_S3_ENDPOINT"])
	u, _ := testURL(t, proxy.srv.URL, url.Values{"max_attempts": {"3"}, "request_timeout": {"10s"}})
	b := openURL(t, u)

	small := payload(1000)
	large := payload(2*testPartSize + 100)
	first := func(pick func(*http.Request) bool) func(*http.Request, int) bool {
		return func(r *http.Request, n int) bool { return pick(r) && n == 1 }
	}
	all := func(pick func(*http.Request) bool) func(*http.Request, int) bool {
		return func(r *http.Request, _ int) bool { return pick(r) }
	}
	tests := []struct {
		name string
		data []byte
		drop func(*http.Request, int) bool
	}{
		{"single, first answer lost", small, first(isPutObject)},
		{"single, every answer lost", small, all(isPutObject)},
		{"multipart, first answer lost", large, first(isComplete)},
		{"multipart, every answer lost", large, all(isComplete)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "obj" + string(rune('a'+i))
			proxy.setDrop(tt.drop)
			defer proxy.setDrop(nil)
			if err := b.Put(t.Context(), name, bytes.NewReader(tt.data), int64(len(tt.data))); err != nil {
				t.Fatalf("Put: %v", err)
			}
			if proxy.droppedCount() == 0 {
				t.Fatal("no answer was dropped")
			}
			proxy.setDrop(nil)
			got, err := conformance.Read(t.Context(), b, name, 0, -1)
			if err != nil || got != string(tt.data) {
				t.Fatalf("Get: %d bytes, %v; want %d bytes", len(got), err, len(tt.data))
			}

			// The object is there now: another Put of it, whose first
			// answer (a 412) is lost too, must see it is not its own.
			proxy.setDrop(first(func(r *http.Request) bool { return isPutObject(r) || isComplete(r) }))
			err = b.Put(t.Context(), name, bytes.NewReader(tt.data), int64(len(tt.data)))
			conformance.CheckError(t, err, "put", ID, name, backends.ErrExists)
			if proxy.droppedCount() == 0 {
				t.Fatal("no answer was dropped")
			}
		})
	}
}
