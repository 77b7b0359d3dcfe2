// Package gate lets a backend's Close wait for the calls in progress and
// refuse new ones.
package gate

import "sync"

// Gate counts the calls in progress. The zero Gate is open.
type Gate struct {
	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup
}

// Enter admits a call, or reports false once the gate is closed. A call
// admitted must Leave.
func (g *Gate) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.calls.Add(1)
	return true
}

// Leave ends a call admitted by Enter.
func (g *Gate) Leave() { g.calls.Done() }

// Close refuses new calls and waits for those in progress. It reports
// whether this was the first Close: later ones return false at once.
func (g *Gate) Close() bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	g.closed = true
	g.mu.Unlock()
	g.calls.Wait()
	return true
}
