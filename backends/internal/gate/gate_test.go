package gate

import (
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	var g Gate
	if !g.Enter() {
		t.Fatal("a new gate refused a call")
	}
	closed := make(chan bool)
	go func() { closed <- g.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a call was in progress")
	case <-time.After(20 * time.Millisecond):
	}
	g.Leave()
	if !<-closed {
		t.Fatal("the first Close reported false")
	}
	if g.Enter() {
		t.Fatal("a closed gate admitted a call")
	}
	if g.Close() {
		t.Fatal("a second Close reported true")
	}
}
