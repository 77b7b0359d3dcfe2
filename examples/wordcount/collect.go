package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/dstl/objname"
)

// collected is what one run of the deletion rule did.
type collected struct {
	plan         *catalog.Plan
	catalogDrops int // catalog objects deleted
	dataDeletes  int // log and snapshot objects deleted
}

// collect applies the catalog's deletion rule once, as the member of the
// live generation: the catalog objects of the plan's Drop list, then the
// job's log and snapshot objects that the plan does not keep and that are
// older than the grace. The age counts to the moment before the catalog
// was listed, so that an object a part committed after the listing names
// is younger than the grace. It fails with catalog.ErrFenced, deleting
// nothing, when a newer generation started.
func collect(ctx context.Context, m *catalog.Member, b backends.Backend, jobID string, grace time.Duration) (collected, error) {
	listed := time.Now()
	plan, err := m.Plan(ctx)
	if err != nil {
		return collected{}, err
	}
	c := collected{plan: plan}
	c.catalogDrops, err = m.DropCatalog(ctx, plan)
	n, derr := deleteUnreferenced(ctx, b, objname.JobPrefix(jobID), plan.Keep, listed.Add(-grace))
	c.dataDeletes = n
	return c, errors.Join(err, derr)
}

// deleteUnreferenced deletes the log and snapshot objects under the job's
// prefix that keep does not name and that are older than cutoff, both by
// the store's modification time and by the time in their names (a UUIDv7:
// an object whose store reports a wrong or no time is still judged by when
// it was named). Catalog objects and objects of other forms are left
// alone. It returns how many it deleted.
//
// TODO(collect): this is the data-object half of the deletion rule until
// package github.com/dstlgo/dstl/collect provides it; switch to it then.
func deleteUnreferenced(ctx context.Context, b backends.Backend, prefix string, keep map[string]bool, cutoff time.Time) (int, error) {
	var doomed []string
	err := b.List(ctx, prefix, func(o backends.ObjectInfo) error {
		n := objname.Parse(prefix, o.Name)
		if (n.Kind == objname.Log || n.Kind == objname.Snapshot) && !keep[o.Name] &&
			o.ModTime.Before(cutoff) && n.Time().Before(cutoff) {
			doomed = append(doomed, o.Name)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("list %q: %w", prefix, err)
	}
	deleted := 0
	var errs []error
	for _, name := range doomed {
		if err := b.Delete(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted++
	}
	return deleted, errors.Join(errs...)
}
