package main

import (
	"context"

	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
	"github.com/dstlgo/dstl/dstl/objname"
)

// collected is what one run of the deletion rule did.
type collected struct {
	plan         *catalog.Plan
	catalogDrops int // catalog objects dropped
	dataDeletes  int // log and snapshot objects and snapshot files deleted
	fileDeletes  int // of which snapshot files
}

// collectOnce applies the catalog's deletion rule once, as the member of
// the live generation (catalog.Member.Collect): the job's log and snapshot
// objects and snapshot files that no kept part refers to and that are older than the grace
// by both clocks, then the catalog objects of the plan's Drop list. It
// fails with catalog.ErrFenced, deleting nothing, when a newer generation
// started.
func collectOnce(ctx context.Context, m *catalog.Member) (collected, error) {
	plan, rep, err := m.Collect(ctx, collect.Options{})
	c := collected{plan: plan}
	if plan != nil {
		c.catalogDrops = len(plan.Drop)
	}
	if rep != nil {
		c.dataDeletes = rep.Deleted.Objects
		for _, o := range rep.Objects {
			if o.Deleted && o.Kind == objname.SnapshotFile {
				c.fileDeletes++
			}
		}
	}
	return c, err
}
