// Package faultproxy is a loopback HTTP proxy that fails, stalls or cuts
// some of the requests it forwards, so that the cloud backends' tests show
// that their retries deliver the object whole anyway.
package faultproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// Action is what the proxy does with one request.
type Action struct {
	// Status, when non-zero, answers the request with this status code
	// without forwarding it (e.g. 503, 500, 429).
	Status int
	// Stall holds the request this long before forwarding it (or until the
	// client gives up).
	Stall time.Duration
	// Reset closes the connection without an answer.
	Reset bool
}

// Rule decides the action for the nth request (1-based) the proxy sees.
type Rule func(r *http.Request, n int) Action

// Proxy forwards requests to a target, applying a rule.
type Proxy struct {
	srv *httptest.Server

	mu    sync.Mutex
	rule  Rule
	n     int
	log   []Record
	fwd   *httputil.ReverseProxy
	stops chan struct{}
}

// Record is one request the proxy saw and what it did.
type Record struct {
	Method, Path, Query string
	Action              Action
}

// New starts a proxy on 127.0.0.1 in front of target (a base URL such as
// http://127.0.0.1:9000). Close it when done.
func New(target string, rule Rule) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := &Proxy{rule: rule, fwd: httputil.NewSingleHostReverseProxy(u), stops: make(chan struct{})}
	p.fwd.ErrorLog = nil
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p, nil
}

// URL is the proxy's base URL.
func (p *Proxy) URL() string { return p.srv.URL }

// SetRule replaces the rule (nil forwards everything).
func (p *Proxy) SetRule(rule Rule) {
	p.mu.Lock()
	p.rule = rule
	p.mu.Unlock()
}

// Records returns what the proxy did so far.
func (p *Proxy) Records() []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Record(nil), p.log...)
}

// Faults counts the requests that were failed, stalled or cut.
func (p *Proxy) Faults() int {
	n := 0
	for _, r := range p.Records() {
		if r.Action != (Action{}) {
			n++
		}
	}
	return n
}

// Close stops the proxy; stalled requests end at once.
func (p *Proxy) Close() {
	close(p.stops)
	p.srv.CloseClientConnections()
	p.srv.Close()
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.n++
	var a Action
	if p.rule != nil {
		a = p.rule(r, p.n)
	}
	p.log = append(p.log, Record{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Action: a})
	p.mu.Unlock()
	switch {
	case a.Reset:
		_, _ = io.Copy(io.Discard, r.Body)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		w.WriteHeader(http.StatusBadGateway)
		return
	case a.Status != 0:
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(a.Status)
		return
	case a.Stall > 0:
		t := time.NewTimer(a.Stall)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-p.stops:
			return
		}
	}
	p.fwd.ServeHTTP(w, r)
}
