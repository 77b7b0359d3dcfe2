package request

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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
	if !errors.As(err, &na) || !IsTimeout(err) || !strings.Contains(err.Error(), "no answer from "+host+" within 300ms") {
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
