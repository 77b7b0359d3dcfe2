package collect_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl/objname"
)

// A checkpoint catalog collects what its retained checkpoints no longer
// reference: it keeps their objects, and owns every snapshot of the job.
// Here the objects were all just written, so the dry run keeps them as
// younger than the grace; once an object the catalog keeps is gone, Run
// refuses to delete anything.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dstl-collect-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	b, err := local.Open(ctx, local.DefaultConfig(dir))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	// A retained checkpoint's snapshot, and what a crash left beside it.
	prefix := objname.JobPrefix("job-1")
	put := func(name string, err error) string {
		if err != nil {
			log.Fatal(err)
		}
		if err := b.Put(ctx, name, strings.NewReader("state"), 5); err != nil {
			log.Fatal(err)
		}
		return name
	}
	snapshot := put(objname.NewSnapshot(prefix, "counter", 0))
	put(objname.NewSnapshot(prefix, "counter", 0))
	put(objname.NewLog(prefix, 0))

	// The retained checkpoint's objects (a state store's checkpoint
	// handle names them: CheckpointHandle.Objects) and its operator.
	keep := new(collect.Keep)
	keep.AddOperator("counter")
	keep.AddObject(snapshot)
	// The zero grace and kinds are the defaults: a day, and log and
	// snapshot objects.
	opts := collect.Options{
		JobID:        "job-1",
		Keep:         keep,
		AllOperators: true,
		DryRun:       true,
	}
	rep, err := collect.Run(ctx, b, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listed %d: %d referenced, %d young, %d deletable\n",
		rep.Listed.Objects, rep.Referenced.Objects, rep.Young.Objects, rep.Deletable.Objects)

	if err := b.Delete(ctx, snapshot); err != nil {
		log.Fatal(err)
	}
	rep, err = collect.Run(ctx, b, opts)
	fmt.Println(errors.Is(err, collect.ErrMissing), len(rep.Missing), rep.DeletesRun)
	// Output:
	// listed 3: 1 referenced, 2 young, 0 deletable
	// true 1 false
}
