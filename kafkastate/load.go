package kafkastate

import (
	"context"
	"fmt"

	"github.com/dstlgo/dstl/dstl"
)

// Loaded is a partition's state as its latest checkpoint holds it.
type Loaded[S any] struct {
	Partition[S]
	// Offset is the next input offset of the checkpoint; -1 when the
	// partition has none.
	Offset int64
	// Checkpoint is the checkpoint restored, 0 for none.
	Checkpoint int64
}

// Load restores the latest checkpoint of every one of the topic's
// partitions (0 to partitions-1) from the job's catalog, as a service
// would on assignment, without Kafka: for tools and tests, once the job's
// services are stopped (it joins the catalog for every partition, which
// fences the running ones). close releases the states.
func Load[S any](ctx context.Context, storage *dstl.Storage, cfg Config[S], partitions int) (states []Loaded[S], close func(), err error) {
	s, err := New(storage, cfg)
	if err != nil {
		return nil, nil, err
	}
	s.partitions = partitions
	s.loadOnly = true
	var parts []*partState[S]
	close = func() {
		for _, ps := range parts {
			ps.close()
		}
	}
	for p := range int32(partitions) {
		ps := newPartState(s, p)
		if err := s.join(ctx, ps); err != nil {
			close()
			return nil, nil, fmt.Errorf("kafkastate: load: %w", err)
		}
		parts = append(parts, ps)
		states = append(states, Loaded[S]{Partition: ps.part, Offset: ps.next, Checkpoint: ps.notified})
	}
	return states, close, nil
}
