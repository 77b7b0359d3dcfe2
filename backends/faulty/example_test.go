package faulty_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dstlgo/dstl/backends/faulty"
	"github.com/dstlgo/dstl/backends/mem"
)

// A Put whose answer is lost: the object is stored, and its caller is
// told the Put failed.
func Example() {
	ctx := context.Background()
	m, err := mem.Open(ctx, mem.Config{})
	if err != nil {
		panic(err)
	}
	errReset := errors.New("connection reset")
	b := faulty.New(m, func(c faulty.Call) faulty.Fault {
		if c.Op == faulty.OpPut {
			return faulty.Fault{Err: errReset, Lost: true}
		}
		return faulty.Fault{}
	})
	defer b.Close()

	err = b.Put(ctx, "x", strings.NewReader("data"), 4)
	_, stored := m.Store().Object("x")
	fmt.Println(errors.Is(err, errReset), stored, b.Leftovers())
	// Output: true true [x]
}
