package azure

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/conformance"
)

// loseAnswer is an HTTP transport that, for the first request its rule
// picks, either sends the request and loses the answer (the request took
// effect, its client never learns so) or fails it before sending.
type loseAnswer struct {
	rt http.RoundTripper

	mu   sync.Mutex
	pick func(*http.Request) bool // nil: none
	send bool
	lost int
}

// arm makes the next request that pick picks fail, after it was sent when
// send is set.
func (l *loseAnswer) arm(pick func(*http.Request) bool, send bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pick, l.send, l.lost = pick, send, 0
}

func (l *loseAnswer) lostCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

func (l *loseAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	hit := l.pick != nil && l.pick(r)
	send := l.send
	if hit {
		l.pick = nil
		l.lost++
	}
	l.mu.Unlock()
	if !hit {
		return l.rt.RoundTrip(r)
	}
	if send {
		resp, err := l.rt.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return nil, io.ErrUnexpectedEOF
}

// isPutBlob and isCommit pick the requests that make a blob visible.
func isPutBlob(r *http.Request) bool {
	return r.Method == http.MethodPut && !r.URL.Query().Has("comp") && !r.URL.Query().Has("restype")
}

func isCommit(r *http.Request) bool {
	return r.Method == http.MethodPut && r.URL.Query().Get("comp") == "blocklist"
}

// TestLostAnswer: a create whose first attempt succeeded but whose answer
// was lost is not reported as ErrExists, as its retry finds its own upload
// id on the blob; one whose retry meets another Put's blob is.
func TestLostAnswer(t *testing.T) {
	cfg := testConfig(t, "")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	lose := &loseAnswer{rt: tr}
	cfg.HTTPClient = &http.Client{Transport: lose}
	b := open(t, cfg)

	small, staged := data(1000), data(2*testPartSize+1)
	for _, tc := range []struct {
		name string
		data []byte
		pick func(*http.Request) bool
	}{
		{"single", small, isPutBlob},
		{"staged", staged, isCommit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lose.arm(tc.pick, true)
			defer lose.arm(nil, false)
			if err := b.Put(t.Context(), tc.name, bytes.NewReader(tc.data), int64(len(tc.data))); err != nil {
				t.Fatalf("Put whose answer was lost: %v", err)
			}
			if lose.lostCount() != 1 {
				t.Fatalf("%d answers lost, want 1", lose.lostCount())
			}
			if got, err := conformance.Read(t.Context(), b, tc.name, 0, -1); err != nil || got != string(tc.data) {
				t.Fatalf("read back %d bytes, %v; want the %d put", len(got), err, len(tc.data))
			}
		})
	}

	t.Run("another Put's blob", func(t *testing.T) {
		c := client(t, b)
		if _, err := c.NewBlockBlobClient(b.Prefix()+"other").UploadBuffer(t.Context(), []byte("theirs"), nil); err != nil {
			t.Fatal(err)
		}
		lose.arm(isPutBlob, false) // the first attempt fails unsent: the retry meets the blob
		defer lose.arm(nil, false)
		err := b.Put(t.Context(), "other", strings.NewReader("ours"), 4)
		if !errors.Is(err, backends.ErrExists) {
			t.Fatalf("retried Put that meets another Put's blob: %v, want ErrExists", err)
		}
		if lose.lostCount() != 1 {
			t.Fatalf("%d attempts failed, want 1", lose.lostCount())
		}
		if got, err := conformance.Read(t.Context(), b, "other", 0, -1); err != nil || got != "theirs" {
			t.Fatalf("the other blob reads %q, %v", got, err)
		}
	})
}
