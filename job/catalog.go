package job

import (
	"context"
	"errors"
	"time"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/catalog"
	"github.com/dstlgo/dstl/collect"
)

// Catalog is the Coordinator of a job on its checkpoint catalog (package
// catalog): the processes of a generation, each running its instances,
// commit every checkpoint; the leader (process 0) learns which are
// complete and applies the deletion rule; a restart or a rescale starts a
// generation that fences the older ones.
type Catalog struct {
	b        backends.Backend
	cfg      catalog.Config
	interval time.Duration
	collect  collect.Options
	m        *catalog.Member
}

// NewCatalog returns the Coordinator of process cfg.Process of the job on
// b's catalog. interval is the runner's checkpoint interval
// (Config.Interval; 0: DefaultInterval): the leader commits each
// checkpoint half an interval late, so that its commit finds the other
// processes' and completes it, and every process learns a checkpoint
// complete at its next commit. collectOpts sets the deletion rule's
// options but for those the catalog sets (see catalog.Member.Collect).
func NewCatalog(b backends.Backend, cfg catalog.Config, interval time.Duration, collectOpts collect.Options) *Catalog {
	if interval == 0 {
		interval = DefaultInterval
	}
	return &Catalog{b: b, cfg: cfg, interval: interval, collect: collectOpts}
}

// Member returns the catalog member of the latest Join, nil before one.
func (c *Catalog) Member() *catalog.Member { return c.m }

// rejoinAttempts bounds the rejoins that find the latest generation
// fenced and its successor not written yet, one interval apart, before
// the process joins (which finishes the start).
const rejoinAttempts = 3

// Join joins the job: at the start with catalog.Join, which starts a
// generation when this process's slot is held or the configuration
// changed; after a fence with Member.Rejoin, which only joins, and
// returns the catalog's ErrReplaced or ErrMismatch when this process must
// stop.
func (c *Catalog) Join(ctx context.Context) (*Assignment, error) {
	var m *catalog.Member
	var err error
	if c.m == nil {
		m, err = catalog.Join(ctx, c.b, c.cfg)
	} else {
		for attempt := 0; ; attempt++ {
			m, err = c.m.Rejoin(ctx)
			if !errors.Is(err, catalog.ErrFenced) {
				break
			}
			if attempt == rejoinAttempts {
				// The successor's starter stopped: finish its start.
				m, err = catalog.Join(ctx, c.b, c.cfg)
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(c.interval):
			}
		}
	}
	if err != nil {
		return nil, err
	}
	c.m = m
	gen := m.Generation()
	a := &Assignment{Generation: gen.Number, Epoch: gen.Created, FirstCheckpoint: gen.FirstCheckpoint}
	if m.Leader() && gen.Mode == catalog.Aligned && gen.Processes > 1 {
		a.CommitDelay = c.interval / 2
	}
	for _, i := range m.Instances() {
		as := Assigned{Index: i, KeyGroups: m.KeyGroups(i), MaxParallelism: gen.MaxParallelism, Restore: m.Restore(i)}
		if len(as.Restore) == 1 {
			as.Restored = as.Restore[0].Checkpoint
		}
		a.Instances = append(a.Instances, as)
	}
	return a, nil
}

// Commit commits the process's checkpoint n.
func (c *Catalog) Commit(ctx context.Context, n int64, states []catalog.InstanceState) (int64, error) {
	st, err := c.m.Commit(ctx, n, states)
	return st.Complete, err
}

// Refresh learns once more which checkpoints are complete.
func (c *Catalog) Refresh(ctx context.Context) (int64, error) {
	st, err := c.m.Refresh(ctx)
	return st.Complete, err
}

// Collect applies the deletion rule on the leader.
func (c *Catalog) Collect(ctx context.Context) error {
	_, _, err := c.m.Collect(ctx, c.collect)
	return err
}
