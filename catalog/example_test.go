package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/local"
	"github.com/dstlgo/dstl/catalog"
)

// Example runs a job of two instances in two processes on local disk (the
// two members stand for two processes): each commits its part of two
// checkpoints, the leader (process 0) last; then process 1 restarts, and
// the generation it starts restores the latest complete checkpoint.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "catalog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := local.Open(ctx, local.Config{Root: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	cfg := func(process int) catalog.Config {
		return catalog.Config{JobID: "example", Instances: 2, Process: process, Logger: slog.New(slog.DiscardHandler)}
	}
	join := func(store backends.Backend, process int) *catalog.Member {
		m, err := catalog.Join(ctx, store, cfg(process))
		if err != nil {
			log.Fatal(err)
		}
		return m
	}
	commit := func(m *catalog.Member, n int64) catalog.Status {
		i := m.Instances()[0]
		st, err := m.Commit(ctx, n, []catalog.InstanceState{{Instance: i,
			State: fmt.Appendf(nil, "instance %d at checkpoint %d", i, n), Metadata: map[string]string{"offset": fmt.Sprint(n * 100)}}})
		if err != nil {
			log.Fatal(err)
		}
		return st
	}

	leader, other := join(store, 0), join(store, 1)
	for n := int64(1); n <= 2; n++ {
		commit(other, n)
		st := commit(leader, n) // the leader's commit completes n
		fmt.Printf("checkpoint %d complete: %v\n", n, st.Complete == n)
	}

	// Process 1 restarts: a process of its own, with a backend of its own.
	fresh, err := local.Open(ctx, local.Config{Root: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer fresh.Close()
	restarted := join(fresh, 1) // its slot is held: a new generation, which fences the other
	g := restarted.Generation()
	fmt.Printf("generation %d restores checkpoint %d\n", g.Number, g.RestoredCheckpoint)
	for _, p := range restarted.Restore(1) {
		fmt.Printf("  %s, offset %s\n", p.State, p.Metadata["offset"])
	}
	_, err = leader.Commit(ctx, 3, []catalog.InstanceState{{Instance: 0, State: []byte("late")}})
	fmt.Println("the old leader is fenced:", errors.Is(err, catalog.ErrFenced))
	// Output:
	// checkpoint 1 complete: true
	// checkpoint 2 complete: true
	// generation 2 restores checkpoint 2
	//   instance 1 at checkpoint 2, offset 200
	// the old leader is fenced: true
}
