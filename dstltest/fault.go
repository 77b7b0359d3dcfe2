package dstltest

import (
	"sync/atomic"

	"github.com/dstlgo/dstl/backends/faulty"
)

// Op names a backend operation, for fault injection and counting.
type Op = faulty.Op

// The operations of a [backends.Backend].
const (
	OpPut    = faulty.OpPut
	OpGet    = faulty.OpGet
	OpDelete = faulty.OpDelete
	OpList   = faulty.OpList
)

// Fault is what a [FaultFunc] makes of one call; see [faulty.Fault]. The
// zero Fault lets the call through. Its parts apply in this order: Delay,
// then Stall, then Err. A Delay or Stall ends early when the backend is
// closed; Stall lasts until [Backend.ReleaseStalls].
type Fault = faulty.Fault

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
// their counters advance) and merges the answers: the first non-nil Err
// (with its Lost), the sum of the delays, a stall if any of them stalls,
// and the first OnCancel other than Abort (with its LateBy).
func Combine(fs ...FaultFunc) FaultFunc {
	return func(op Op, name string) Fault {
		var out Fault
		for _, f := range fs {
			if f == nil {
				continue
			}
			ft := f(op, name)
			if out.Err == nil {
				out.Err, out.Lost = ft.Err, ft.Lost
			}
			if out.OnCancel == faulty.Abort {
				out.OnCancel, out.LateBy = ft.OnCancel, ft.LateBy
			}
			out.Delay += ft.Delay
			out.Stall = out.Stall || ft.Stall
		}
		return out
	}
}
