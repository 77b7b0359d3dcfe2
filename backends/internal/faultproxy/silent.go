package faultproxy

import (
	"io"
	"net"
	"sync"
)

// Silent is a TCP listener on 127.0.0.1 that accepts connections, reads
// what they send and never answers: an endpoint whose service hangs.
type Silent struct {
	ln net.Listener
	wg sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
}

// NewSilent starts a silent endpoint. Close it when done.
func NewSilent() (*Silent, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Silent{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return s, nil
}

// Addr is the endpoint's host:port.
func (s *Silent) Addr() string { return s.ln.Addr().String() }

// URL is the endpoint's base URL, http://127.0.0.1:PORT.
func (s *Silent) URL() string { return "http://" + s.Addr() }

// Connections returns how many connections the endpoint accepted.
func (s *Silent) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops accepting, closes every connection and waits for its
// goroutines.
func (s *Silent) Close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
