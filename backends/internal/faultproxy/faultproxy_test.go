package faultproxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestProxy(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer backend.Close()
	p, err := New(backend.URL, func(r *http.Request, n int) Action {
		switch n {
		case 1:
			return Action{Status: 503}
		case 2:
			return Action{Reset: true}
		case 3:
			return Action{Stall: time.Hour}
		}
		return Action{}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(timeout time.Duration) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/x", nil)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get(time.Second); err != nil || code != 503 {
		t.Fatalf("1: %d %v, want 503", code, err)
	}
	if _, err := get(time.Second); err == nil {
		t.Fatal("2: want a cut connection")
	}
	if _, err := get(50 * time.Millisecond); err == nil {
		t.Fatal("3: want a stall past the client's deadline")
	}
	if code, err := get(time.Second); err != nil || code != 200 {
		t.Fatalf("4: %d %v, want 200", code, err)
	}
	if p.Faults() != 3 || len(p.Records()) != 4 {
		t.Fatalf("faults %d of %d records", p.Faults(), len(p.Records()))
	}
}
