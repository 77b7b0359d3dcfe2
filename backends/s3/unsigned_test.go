package s3

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/internal/faultproxy"
	"github.com/dstlgo/dstl/conformance"
)

// payloadHashes records the x-amz-content-sha256 header of the PUT
// requests with a body that a proxy sees, and refuses those that carry
// UNSIGNED-PAYLOAD when refuse is set, as a store that does not take
// unsigned bodies does.
type payloadHashes struct {
	mu     sync.Mutex
	seen   []string
	refuse bool
}

func (p *payloadHashes) rule(r *http.Request, _ int) faultproxy.Action {
	if r.Method != http.MethodPut || r.ContentLength <= 0 {
		return faultproxy.Action{}
	}
	h := r.Header.Get("X-Amz-Content-Sha256")
	p.mu.Lock()
	p.seen = append(p.seen, h)
	refuse := p.refuse
	p.mu.Unlock()
	if refuse && h == "UNSIGNED-PAYLOAD" {
		return faultproxy.Action{Status: http.StatusBadRequest}
	}
	return faultproxy.Action{}
}

func (p *payloadHashes) hashes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// TestUnsignedPayload: with unsigned_payload, a Put over plain HTTP sends
// its bodies (of one PutObject, and of the parts of a multipart upload)
// unsigned, which MinIO takes, and the objects read back whole; without
// it, the SDK signs each body's SHA-256. VerifyUnsignedPayload passes.
func TestUnsignedPayload(t *testing.T) {
	env := requireEnv(t)
	hashes := &payloadHashes{}
	proxy, err := faultproxy.New(env["DSTL_S3_ENDPOINT"], hashes.rule)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	small := bytes.Repeat([]byte("unsigned "), 1000)
	large := bytes.Repeat([]byte("0123456789abcdef"), (testPartSize+testPartSize/2)/16) // two parts
	for _, unsigned := range []bool{true, false} {
		u, _ := testURL(t, proxy.URL(), url.Values{"unsigned_payload": {map[bool]string{true: "true", false: "false"}[unsigned]}})
		b := openURL(t, u)
		before := len(hashes.hashes())
		for name, data := range map[string][]byte{"small": small, "large": large} {
			if err := b.Put(t.Context(), name, bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatalf("unsigned %v: Put %s: %v", unsigned, name, err)
			}
			if got, err := conformance.Read(t.Context(), b, name, 0, -1); err != nil || got != string(data) {
				t.Fatalf("unsigned %v: %s read back %d bytes (%v), want %d", unsigned, name, len(got), err, len(data))
			}
		}
		sent := hashes.hashes()[before:]
		if len(sent) < 3 {
			t.Fatalf("unsigned %v: %d requests with a body, want a PutObject and two parts at least", unsigned, len(sent))
		}
		for _, h := range sent {
			if (h == "UNSIGNED-PAYLOAD") != unsigned || h == "" {
				t.Fatalf("unsigned %v: a body sent with x-amz-content-sha256 %q (all: %q)", unsigned, h, sent)
			}
		}
		if err := b.VerifyUnsignedPayload(t.Context()); err != nil {
			t.Fatalf("unsigned %v: VerifyUnsignedPayload on MinIO: %v", unsigned, err)
		}
	}
}

// TestUnsignedPayloadRefused: against a store that refuses unsigned
// bodies (MinIO behind a proxy that answers them 400), a Put with
// unsigned_payload fails with an error that wraps
// ErrUnsignedPayloadRefused and backends.ErrPermanent and names the
// option, found out by a probe whose object is deleted; later Puts fail
// the same at once, and so does VerifyUnsignedPayload. A backend without
// the option puts through the same proxy.
func TestUnsignedPayloadRefused(t *testing.T) {
	env := requireEnv(t)
	hashes := &payloadHashes{refuse: true}
	proxy, err := faultproxy.New(env["DSTL_S3_ENDPOINT"], hashes.rule)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	u, _ := testURL(t, proxy.URL(), url.Values{"unsigned_payload": {"true"}})
	b := openURL(t, u)
	data := []byte("refused")
	err = b.Put(t.Context(), "a", bytes.NewReader(data), int64(len(data)))
	if !errors.Is(err, ErrUnsignedPayloadRefused) || !errors.Is(err, backends.ErrPermanent) || !strings.Contains(err.Error(), "unsigned_payload") {
		t.Fatalf("Put = %v; want ErrUnsignedPayloadRefused, permanent, naming unsigned_payload", err)
	}
	requests := len(proxy.Records())
	if err := b.Put(t.Context(), "b", bytes.NewReader(data), int64(len(data))); !errors.Is(err, ErrUnsignedPayloadRefused) {
		t.Fatalf("second Put = %v; want ErrUnsignedPayloadRefused", err)
	}
	if err := b.VerifyUnsignedPayload(t.Context()); !errors.Is(err, ErrUnsignedPayloadRefused) {
		t.Fatalf("VerifyUnsignedPayload = %v; want ErrUnsignedPayloadRefused", err)
	}
	if n := len(proxy.Records()); n != requests {
		t.Fatalf("a Put after the verdict sent %d requests", n-requests)
	}
	var left []string
	if err := b.List(t.Context(), "", func(o backends.ObjectInfo) error { left = append(left, o.Name); return nil }); err != nil || len(left) != 0 {
		t.Fatalf("objects left: %q, %v", left, err)
	}
	// A fresh backend finds it out ahead.
	fresh := openURL(t, u)
	if err := fresh.VerifyUnsignedPayload(t.Context()); !errors.Is(err, ErrUnsignedPayloadRefused) {
		t.Fatalf("VerifyUnsignedPayload of a fresh backend = %v; want ErrUnsignedPayloadRefused", err)
	}
	signed, _ := testURL(t, proxy.URL(), nil)
	if err := openURL(t, signed).Put(t.Context(), "c", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put without unsigned_payload: %v", err)
	}
}

// TestUnsignedPayloadUndecided: a store that refuses every put, signed or
// not, is no store that refuses unsigned bodies: the Put fails with its
// own error, and the probe that could not tell runs again only later, not
// at each failed Put.
func TestUnsignedPayloadUndecided(t *testing.T) {
	env := requireEnv(t)
	proxy, err := faultproxy.New(env["DSTL_S3_ENDPOINT"], func(r *http.Request, _ int) faultproxy.Action {
		if r.Method == http.MethodPut && r.ContentLength > 0 {
			return faultproxy.Action{Status: http.StatusBadRequest}
		}
		return faultproxy.Action{}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	u, _ := testURL(t, proxy.URL(), url.Values{"unsigned_payload": {"true"}})
	b := openURL(t, u)
	data := []byte("refused anyway")
	puts := func() int {
		n := 0
		for _, r := range proxy.Records() {
			if r.Method == http.MethodPut {
				n++
			}
		}
		return n
	}
	err = b.Put(t.Context(), "a", bytes.NewReader(data), int64(len(data)))
	if err == nil || errors.Is(err, ErrUnsignedPayloadRefused) {
		t.Fatalf("Put = %v; want the store's error, not ErrUnsignedPayloadRefused", err)
	}
	if n := puts(); n != 3 {
		t.Fatalf("%d PUT requests; want the Put's and the probe's two", n)
	}
	err = b.Put(t.Context(), "b", bytes.NewReader(data), int64(len(data)))
	if err == nil || errors.Is(err, ErrUnsignedPayloadRefused) {
		t.Fatalf("second Put = %v; want the store's error", err)
	}
	if n := puts(); n != 4 {
		t.Fatalf("%d PUT requests after the second Put; want one more, no probe", n)
	}
}
