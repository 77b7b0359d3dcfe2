package gcs

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/faultproxy"
	"github.com/dstlgo/dstl/conformance"
)

// faults applies its actions, in turn, to the requests that match, and
// forwards everything else.
type faults struct {
	mu      sync.Mutex
	match   func(r *http.Request) bool
	actions []faultproxy.Action
	always  *faultproxy.Action // when set, applied to every match after actions
}

func (f *faults) rule(r *http.Request, _ int) faultproxy.Action {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.match != nil && !f.match(r) {
		return faultproxy.Action{}
	}
	if len(f.actions) > 0 {
		a := f.actions[0]
		f.actions = f.actions[1:]
		return a
	}
	if f.always != nil {
		return *f.always
	}
	return faultproxy.Action{}
}

// redirect sends the requests for the emulator (the resumable session URIs
// it hands out name its own host) through the proxy, with the emulator's
// host in the Host header, which the proxy passes on: fake-gcs-server
// reads other hosts as bucket names.
type redirect struct {
	emulator, proxy string
	base            http.RoundTripper
}

func (r *redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == r.emulator || req.URL.Host == r.proxy {
		req = req.Clone(req.Context())
		req.URL.Host = r.proxy
		req.Host = r.emulator
	}
	return r.base.RoundTrip(req)
}

// faultBackend opens a backend whose requests all go through a fault proxy
// in front of the emulator, with a short per-request timeout. Its client
// is a ready one, given in the Config.
func faultBackend(t *testing.T) (*Backend, *faultproxy.Proxy, Config) {
	t.Helper()
	cfg := testConfig(t)
	p, err := faultproxy.New(cfg.Endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	eu, _ := url.Parse(cfg.Endpoint)
	pu, _ := url.Parse(p.URL())
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = time.Second
	client, err := storage.NewClient(t.Context(), option.WithEndpoint(p.URL()+"/storage/v1/"), option.WithoutAuthentication(),
		option.WithHTTPClient(&http.Client{Transport: &redirect{emulator: eu.Host, proxy: pu.Host, base: tr}}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Client = client
	cfg.Request.Timeout = 500 * time.Millisecond
	cfg.Request.MaxAttempts = 5
	cfg.Request.InitialBackoff, cfg.Request.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		_ = client.Close()
		tr.CloseIdleConnections()
	})
	return b, p, cfg
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

var (
	fail503 = faultproxy.Action{Status: http.StatusServiceUnavailable}
	fail500 = faultproxy.Action{Status: http.StatusInternalServerError}
	stall   = faultproxy.Action{Stall: 3 * time.Second}
	cut     = faultproxy.Action{Reset: true}
)

func isUpload(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/upload/") }
func isChunk(r *http.Request) bool  { return isUpload(r) && r.URL.Query().Has("upload_id") }

// TestFaultsRetried: requests that fail (503, 500), stall past the
// per-request timeout or are cut are retried, and the objects arrive
// whole, in one request and in resumable chunks; reads are retried too.
func TestFaultsRetried(t *testing.T) {
	b, p, _ := faultBackend(t)
	ctx := t.Context()

	small := randomBytes(100 << 10)
	f := &faults{match: isUpload, actions: []faultproxy.Action{fail503, stall, cut, fail500}}
	p.SetRule(f.rule)
	if err := b.Put(ctx, "small", bytes.NewReader(small), int64(len(small))); err != nil {
		t.Fatalf("Put small: %v", err)
	}

	large := randomBytes(3*testPartSize + testPartSize/2)
	// The session's start fails once; then chunks fail, stall and are cut.
	f = &faults{match: isUpload, actions: []faultproxy.Action{fail503, {}, fail503, {}, stall, {}, cut, fail500}}
	p.SetRule(f.rule)
	if err := b.Put(ctx, "large", bytes.NewReader(large), int64(len(large))); err != nil {
		t.Fatalf("Put large: %v", err)
	}

	// Reads: the first attempts fail, stall and are cut.
	f = &faults{match: func(r *http.Request) bool { return r.Method == http.MethodGet }, actions: []faultproxy.Action{fail503, stall, cut}}
	p.SetRule(f.rule)
	for name, want := range map[string][]byte{"small": small, "large": large} {
		got, err := conformance.Read(ctx, b, name, 0, -1)
		if err != nil {
			t.Fatalf("Get %s: %v", name, err)
		}
		if !bytes.Equal([]byte(got), want) {
			t.Fatalf("Get %s: %d bytes, not the %d put", name, len(got), len(want))
		}
	}
	var chunks int
	for _, r := range p.Records() {
		if strings.HasPrefix(r.Path, "/upload/") && strings.Contains(r.Query, "upload_id=") && r.Action == (faultproxy.Action{}) {
			chunks++
		}
	}
	if chunks < 4 {
		t.Errorf("%d chunk requests went through, want at least 4 for %d bytes in %d-byte parts", chunks, len(large), testPartSize)
	}
	if n := p.Faults(); n != 12 {
		t.Errorf("%d faults injected, want 12", n)
	}
}

// TestFaultsForGood: uploads whose requests keep failing fail, and leave
// nothing visible: not the resumable upload whose chunks fail, not the
// single request.
func TestFaultsForGood(t *testing.T) {
	b, p, cfg := faultBackend(t)
	ctx := t.Context()

	large := randomBytes(3*testPartSize + testPartSize/2)
	// The first chunk goes through, every later one fails.
	f := &faults{match: isChunk, actions: []faultproxy.Action{{}}, always: &fail503}
	p.SetRule(f.rule)
	err := b.Put(ctx, "large", bytes.NewReader(large), int64(len(large)))
	conformance.CheckError(t, err, "put", ID, "large", nil)
	if errors.Is(err, backends.ErrExists) {
		t.Fatalf("Put: %v, want a failure that is not ErrExists", err)
	}

	f = &faults{match: isUpload, always: &fail500}
	p.SetRule(f.rule)
	small := randomBytes(1000)
	err = b.Put(ctx, "small", bytes.NewReader(small), int64(len(small)))
	conformance.CheckError(t, err, "put", ID, "small", nil)

	p.SetRule(nil)
	for _, name := range []string{"large", "small"} {
		_, err := b.Get(ctx, name, 0, -1)
		conformance.CheckError(t, err, "get", ID, name, backends.ErrNotFound)
	}
	if names := rawNames(t, cfg.Endpoint, cfg.Bucket, cfg.Prefix); len(names) != 0 {
		t.Fatalf("objects left under %s: %v", cfg.Prefix, names)
	}
	// The names are free: a Put now succeeds.
	if err := b.Put(ctx, "large", bytes.NewReader(large), int64(len(large))); err != nil {
		t.Fatalf("Put after the failure: %v", err)
	}
	got, err := conformance.Read(ctx, b, "large", 0, -1)
	if err != nil || !bytes.Equal([]byte(got), large) {
		t.Fatalf("Get after the failure: %d bytes, %v", len(got), err)
	}
}

// failingBody fails every read that reaches past failAt.
type failingBody struct {
	data   []byte
	failAt int64
}

var errBody = errors.New("the body broke")

func (f *failingBody) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.failAt {
		return 0, errBody
	}
	return copy(p, f.data[off:]), nil
}

// TestBodyFailureNotRetried: a Put whose body fails fails with the body's
// error, is not retried, and leaves nothing: a small object sends nothing
// at all (it is read whole first), a resumable upload stops where the body
// broke.
func TestBodyFailureNotRetried(t *testing.T) {
	b, p, cfg := faultBackend(t)
	for _, tc := range []struct {
		name      string
		size      int64
		failAt    int64
		maxUpload int // upload requests at most
	}{
		{"small", testPartSize, testPartSize / 2, 0},
		{"resumable", 3 * testPartSize, testPartSize + testPartSize/2, 2}, // the session's start, the first chunk
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(p.Records())
			body := &failingBody{data: randomBytes(int(tc.size)), failAt: tc.failAt}
			err := b.Put(t.Context(), tc.name, body, tc.size)
			conformance.CheckError(t, err, "put", ID, tc.name, nil)
			if !errors.Is(err, errBody) {
				t.Fatalf("Put: %v, want the body's error", err)
			}
			uploads := 0
			for _, r := range p.Records()[before:] {
				if strings.HasPrefix(r.Path, "/upload/") {
					uploads++
				}
			}
			if uploads > tc.maxUpload {
				t.Errorf("%d upload requests, want at most %d", uploads, tc.maxUpload)
			}
			if names := rawNames(t, cfg.Endpoint, cfg.Bucket, cfg.Prefix); len(names) != 0 {
				t.Fatalf("objects left under %s: %v", cfg.Prefix, names)
			}
		})
	}
}

// TestResumableAttempts: the client retries a resumable upload's session
// start and chunks itself, at most MaxAttempts times each: an upload whose
// requests keep failing gives up after so many (not when the chunk's retry
// deadline passes), while one whose every chunk goes through at its last
// attempt succeeds, as each chunk that goes through starts the count anew.
func TestResumableAttempts(t *testing.T) {
	b, p, cfg := faultBackend(t)
	large := randomBytes(3*testPartSize + testPartSize/2) // 4 chunks
	count := func(before int, match func(faultproxy.Record) bool) int {
		n := 0
		for _, r := range p.Records()[before:] {
			if match(r) {
				n++
			}
		}
		return n
	}
	isStartRecord := func(r faultproxy.Record) bool {
		return strings.HasPrefix(r.Path, "/upload/") && !strings.Contains(r.Query, "upload_id=")
	}
	isChunkRecord := func(r faultproxy.Record) bool {
		return strings.HasPrefix(r.Path, "/upload/") && strings.Contains(r.Query, "upload_id=")
	}
	isStart := func(r *http.Request) bool { return isUpload(r) && !r.URL.Query().Has("upload_id") }

	for _, tc := range []struct {
		name  string
		match func(*http.Request) bool
		count func(faultproxy.Record) bool
	}{
		{"session start", isStart, isStartRecord},
		{"chunks", isChunk, isChunkRecord},
	} {
		t.Run(tc.name+" keep failing", func(t *testing.T) {
			before := len(p.Records())
			p.SetRule((&faults{match: tc.match, always: &fail503}).rule)
			defer p.SetRule(nil)
			err := b.Put(t.Context(), "failing", bytes.NewReader(large), int64(len(large)))
			conformance.CheckError(t, err, "put", ID, "failing", nil)
			if n := count(before, tc.count); n != cfg.Request.MaxAttempts {
				t.Errorf("%d requests, want MaxAttempts = %d", n, cfg.Request.MaxAttempts)
			}
		})
	}

	t.Run("every chunk at its last attempt", func(t *testing.T) {
		var actions []faultproxy.Action
		for range 4 {
			for range cfg.Request.MaxAttempts - 1 {
				actions = append(actions, fail503)
			}
			actions = append(actions, faultproxy.Action{})
		}
		p.SetRule((&faults{match: isChunk, actions: actions, always: &fail503}).rule)
		defer p.SetRule(nil)
		if err := b.Put(t.Context(), "late", bytes.NewReader(large), int64(len(large))); err != nil {
			t.Fatalf("Put: %v", err)
		}
		got, err := conformance.Read(t.Context(), b, "late", 0, -1)
		if err != nil || !bytes.Equal([]byte(got), large) {
			t.Fatalf("Get: %d bytes, %v", len(got), err)
		}
	})
	if names := rawNames(t, cfg.Endpoint, cfg.Bucket, cfg.Prefix); len(names) != 1 || names[0] != cfg.Prefix+"late" {
		t.Fatalf("objects under %s: %v, want only late", cfg.Prefix, names)
	}
}

// losingAnswers forwards every request and, while lose is above zero,
// drops the answer to an upload request, as a connection cut after the
// service stored the object would.
type losingAnswers struct {
	base    http.RoundTripper
	lose    atomic.Int32
	uploads atomic.Int32
}

func (l *losingAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	if err != nil || !isUpload(req) {
		return resp, err
	}
	l.uploads.Add(1)
	if l.lose.Add(-1) >= 0 {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, io.ErrUnexpectedEOF
	}
	return resp, nil
}

// TestLostAnswer: a small Put whose answer is lost after the object was
// stored succeeds when its retry meets the object with the body's size
// and CRC32C; a 412 fails with ErrExists when the object is another's,
// and at once, without a look at the object, when no attempt was retried
// (even if the object has the same bytes).
func TestLostAnswer(t *testing.T) {
	cfg := testConfig(t)
	tr := &losingAnswers{base: http.DefaultTransport.(*http.Transport).Clone()}
	defer tr.base.(*http.Transport).CloseIdleConnections()
	client, err := storage.NewClient(t.Context(), option.WithEndpoint(cfg.Endpoint+"/storage/v1/"), option.WithoutAuthentication(),
		option.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cfg.Client = client
	cfg.Request.InitialBackoff, cfg.Request.MaxBackoff = time.Millisecond, 10*time.Millisecond
	b, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	put := func(data string, lose int32) (error, int32) {
		tr.uploads.Store(0)
		tr.lose.Store(lose)
		err := b.Put(t.Context(), "obj", strings.NewReader(data), int64(len(data)))
		return err, tr.uploads.Load()
	}

	if err, n := put("mine", 1); err != nil || n != 2 {
		t.Fatalf("Put with its answer lost: %v after %d uploads, want success after 2", err, n)
	}
	if got, err := conformance.Read(t.Context(), b, "obj", 0, -1); err != nil || got != "mine" {
		t.Fatalf("Get: %q, %v", got, err)
	}
	err, n := put("mine", 0)
	conformance.CheckError(t, err, "put", ID, "obj", backends.ErrExists)
	if n != 1 {
		t.Errorf("Put of the same bytes: %d uploads, want 1", n)
	}
	err, n = put("fake", 1) // the 412 of the first attempt is lost
	conformance.CheckError(t, err, "put", ID, "obj", backends.ErrExists)
	if n != 2 {
		t.Errorf("Put of other bytes: %d uploads, want 2", n)
	}
}

// TestListPages: a listing of several pages reports every object under the
// prefix once, in byte order, with names relative to the backend's prefix,
// also when a page's request fails and is retried with its token.
func TestListPages(t *testing.T) {
	b, p, _ := faultBackend(t)
	b.d.cfg.PageSize = 2
	names := []string{"a/1", "a/2", "a/10", "a/B", "a/b", "a/b/c", "a~", "ab", "b"}
	for _, name := range names {
		if err := b.Put(t.Context(), name, strings.NewReader(name), int64(len(name))); err != nil {
			t.Fatalf("Put %s: %v", name, err)
		}
	}
	isList := func(r *http.Request) bool { return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/o") }
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a/1", "a/10", "a/2", "a/B", "a/b", "a/b/c", "ab", "a~", "b"}},
		{"a/", []string{"a/1", "a/10", "a/2", "a/B", "a/b", "a/b/c"}},
		{"a/b", []string{"a/b", "a/b/c"}},
		{"c", nil},
	} {
		// The second page's first attempt fails.
		p.SetRule((&faults{match: isList, actions: []faultproxy.Action{{}, fail503}}).rule)
		var got []string
		err := b.List(t.Context(), tc.prefix, func(o backends.ObjectInfo) error {
			if o.Size != int64(len(o.Name)) {
				t.Errorf("%s: size %d, want %d", o.Name, o.Size, len(o.Name))
			}
			got = append(got, o.Name)
			return nil
		})
		if err != nil {
			t.Fatalf("List %q: %v", tc.prefix, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("List %q = %q, want %q", tc.prefix, got, tc.want)
		}
	}
	p.SetRule(nil)
	if n := p.Faults(); n < 2 {
		t.Errorf("%d faults injected, want at least 2 (a second page of two listings)", n)
	}
}
