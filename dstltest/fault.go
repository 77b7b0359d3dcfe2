package dstltest

import (
	"sync/atomic"
	"time"
)

// Op names a backend operation, for fault injection and counting.
type Op string

// The operations of a [backends.Backend].
const (
	OpPut    Op = "put"
	OpGet    Op = "get"
	OpDelete Op = "delete"
	OpList   Op = "list"
)

// Fault is what a [FaultFunc] makes of one call. The zero Fault lets the call
// through. Its parts apply in this order: Delay, then Stall, then Err.
type Fault struct {
	// Err, when not nil, fails the call with an error that wraps it (a
	// failed Put stores nothing).
	Err error
	// Delay is slept before the call does anything, as by a slow service;
	// the sleep ends early when the call's context is done or the backend
	// is closed.
	Delay time.Duration
	// Stall blocks the call until its context is done, the backend is
	// closed, or [Backend.ReleaseStalls] is called.
	Stall bool
}

// FaultFunc decides the fault of one call of op on name (the prefix, for
// OpList). It is called once per call, from the calling goroutine, without
// any lock of the backend held, so it may call the backend's inspection
// methods; it must be safe for concurrent use.
type FaultFunc func(op Op, name string) Fault

// FailNth returns a FaultFunc that fails the nth call of op (counting from
// 1) with err and lets every other call through.
func FailNth(op Op, n int, err error) FaultFunc {
	var calls atomic.Int64
	return func(o Op, _ string) Fault {
		if o == op && calls.Add(1) == int64(n) {
			return Fault{Err: err}
		}
		return Fault{}
	}
}

// FailAll returns a FaultFunc that fails every call of op with err.
func FailAll(op Op, err error) FaultFunc {
	return func(o Op, _ string) Fault {
		if o == op {
			return Fault{Err: err}
		}
		return Fault{}
	}
}

// StallFirst returns a FaultFunc that stalls the first call of op and lets
// every other call through.
func StallFirst(op Op) FaultFunc {
	var calls atomic.Int64
	return func(o Op, _ string) Fault {
		if o == op && calls.Add(1) == 1 {
			return Fault{Stall: true}
		}
		return Fault{}
	}
}

// Combine returns a FaultFunc that asks every one of fs (each is called, so
// their counters advance) and merges the answers: the first non-nil Err, the
// sum of the delays, and a stall if any of them stalls.
func Combine(fs ...FaultFunc) FaultFunc {
	return func(op Op, name string) Fault {
		var out Fault
		for _, f := range fs {
			if f == nil {
				continue
			}
			ft := f(op, name)
			if out.Err == nil {
				out.Err = ft.Err
			}
			out.Delay += ft.Delay
			out.Stall = out.Stall || ft.Stall
		}
		return out
	}
}
