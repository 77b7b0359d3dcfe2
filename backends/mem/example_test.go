package mem_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/mem"
)

// Two backends on one store, one under a prefix, with the store's clock
// set.
func Example() {
	ctx := context.Background()
	s := mem.NewStore()
	s.SetClock(func() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) })
	job, err := mem.Open(ctx, mem.Config{Store: s, Prefix: "jobs/42"})
	if err != nil {
		panic(err)
	}
	defer job.Close()
	if err := job.Put(ctx, "a", strings.NewReader("data"), 4); err != nil {
		panic(err)
	}
	all, err := mem.Open(ctx, mem.Config{Store: s})
	if err != nil {
		panic(err)
	}
	defer all.Close()
	err = all.List(ctx, "", func(o backends.ObjectInfo) error {
		fmt.Println(o.Name, o.Size, o.ModTime.Year())
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output: jobs/42/a 4 2030
}
