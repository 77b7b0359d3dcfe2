package driver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dstlgo/dstl/backends/internal/transportcase"
)

// TestResponseTimeout: a request without a body fails when no answer
// comes within the response timeout, naming the endpoint, as a timeout;
// an answer in time keeps its body readable past the timeout; a large
// upload read slowly is not bounded by it.
func TestResponseTimeout(t *testing.T) {
	const d = 300 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/silent":
			<-r.Context().Done()
		case "/slow-body":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			time.Sleep(2 * d)
			io.WriteString(w, "late body")
		case "/slow-read":
			buf := make([]byte, 32<<10)
			for {
				if _, err := io.ReadFull(r.Body, buf); err != nil {
					break
				}
				time.Sleep(10 * time.Millisecond) // about 3 MiB/s
			}
		}
	}))
	defer srv.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: ResponseTimeout(tr, d)}

	start := time.Now()
	_, err := hc.Get(srv.URL + "/silent")
	if took := time.Since(start); err == nil || took > 3*d {
		t.Fatalf("get of a silent endpoint: err %v after %v, want a failure within %v", err, took, 3*d)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	var na *NoAnswerError
	if !errors.As(err, &na) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer from "+host+" within 300ms") {
		t.Errorf("err %v: want a timeout saying no answer from %s within 300ms", err, host)
	}

	resp, err := hc.Get(srv.URL + "/slow-body")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "late body" {
		t.Errorf("body read past the response timeout: %q, %v", body, err)
	}

	// 3 MiB at about 3 MiB/s: the answer comes about 1 s after the start.
	big := bytes.Repeat([]byte("x"), 3<<20)
	resp, err = hc.Post(srv.URL+"/slow-read", "application/octet-stream", bytes.NewReader(big))
	if err != nil {
		t.Fatalf("upload read slowly: %v", err)
	}
	resp.Body.Close()
}

func TestSmallBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		body io.Reader
		n    int64
		want bool
	}{
		{"none", nil, 0, true},
		{"no body", http.NoBody, 0, true},
		{"small", strings.NewReader("x"), 1, true},
		{"at the bound", bytes.NewReader(make([]byte, SmallBody)), SmallBody, true},
		{"large", bytes.NewReader(make([]byte, SmallBody+1)), SmallBody + 1, false},
		{"unknown length", io.MultiReader(strings.NewReader("x")), -1, false},
	} {
		req, err := http.NewRequest(http.MethodPut, "http://h/x", tc.body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = tc.n
		if got := smallBody(req); got != tc.want {
			t.Errorf("%s: smallBody = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCountSent: the bytes of a request body that the transport sends are
// reported to the recorder in the request's context, all of them, for
// bodies of every size; requests without a recorder or a body pass as
// they are.
func TestCountSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	client := &http.Client{Transport: CountSent(ResponseTimeout(http.DefaultTransport, time.Second))}
	for _, tc := range []struct {
		name     string
		size     int
		recorder bool
	}{
		{"no body", 0, true},
		{"small body", 100, true},
		{"large body", 3 << 20, true},
		{"no recorder", 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent atomic.Int64
			ctx := t.Context()
			if tc.recorder {
				ctx = WithProgress(ctx, func(n int64) { sent.Add(n) })
			}
			var body io.Reader
			if tc.size > 0 {
				body = bytes.NewReader(make([]byte, tc.size))
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/x", body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := int64(tc.size)
			if !tc.recorder {
				want = 0
			}
			if got := sent.Load(); got != want {
				t.Fatalf("reported %d bytes sent, want %d", got, want)
			}
		})
	}
}

// TestTransportCode: the transport errors every driver must classify
// alike: the permanent ones are never retried, the others always are.
func TestTransportCode(t *testing.T) {
	wrap := func(err error) error { return &url.Error{Op: "Get", URL: "https://x/", Err: err} }
	for _, tc := range []struct {
		name string
		err  error
		want Code
		ok   bool
	}{
		{"unknown authority", wrap(x509.UnknownAuthorityError{}), Permanent, true},
		{"wrong host name", wrap(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "x"}), Permanent, true},
		{"expired", wrap(x509.CertificateInvalidError{Reason: x509.Expired}), Permanent, true},
		{"verification", wrap(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), Permanent, true},
		{"not TLS", wrap(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), Permanent, true},
		{"https to a plain-HTTP endpoint", wrap(http.ErrSchemeMismatch), Permanent, true},
		{"no such host", wrap(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}}), Permanent, true},
		{"DNS error", wrap(&net.DNSError{Err: "server misbehaving", Name: "x"}), Permanent, true},
		{"temporary DNS error", wrap(&net.DNSError{Err: "try again", Name: "x", IsTemporary: true}), Transient, true},
		{"DNS timeout", wrap(&net.DNSError{Err: "i/o timeout", Name: "x", IsTimeout: true}), Transient, true},
		{"reset", wrap(&net.OpError{Op: "read", Err: fmt.Errorf("read: %w", syscall.ECONNRESET)}), Transient, true},
		{"refused", wrap(&net.OpError{Op: "dial", Err: fmt.Errorf("connect: %w", syscall.ECONNREFUSED)}), Transient, true},
		{"cut answer", wrap(io.ErrUnexpectedEOF), Transient, true},
		{"no answer", &NoAnswerError{Host: "x", Wait: time.Second}, Transient, true},
		{"deadline", context.DeadlineExceeded, Transient, true},
		{"cancelled", context.Canceled, Unknown, false},
		{"other", errors.New("403 forbidden"), Unknown, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := TransportCode(tc.err); got != tc.want || ok != tc.ok {
				t.Fatalf("TransportCode(%v) = %v, %v; want %v, %v", tc.err, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestTransportCases: TransportCode agrees with the cases every driver's
// tests check their classifier against.
func TestTransportCases(t *testing.T) {
	for _, tc := range transportcase.TransportCases() {
		want := Transient
		if tc.Permanent {
			want = Permanent
		}
		if got, ok := TransportCode(tc.Err); got != want || !ok {
			t.Errorf("%s: TransportCode = %v, %v; want %v", tc.Name, got, ok, want)
		}
	}
}

func TestNewHTTPTransportKeepsIdleConnections(t *testing.T) {
	tr := NewHTTPTransport()
	if tr.MaxIdleConnsPerHost != IdleConnsPerHost {
		t.Fatalf("MaxIdleConnsPerHost = %d, want %d", tr.MaxIdleConnsPerHost, IdleConnsPerHost)
	}
	if d := http.DefaultTransport.(*http.Transport); d.MaxIdleConnsPerHost == IdleConnsPerHost || tr == d {
		t.Fatalf("NewHTTPTransport changed http.DefaultTransport")
	}
	if tr.MaxIdleConns < IdleConnsPerHost && tr.MaxIdleConns != 0 {
		t.Fatalf("MaxIdleConns = %d bounds the idle connections per host below %d", tr.MaxIdleConns, IdleConnsPerHost)
	}
}
