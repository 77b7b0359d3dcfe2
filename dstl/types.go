package dstl

import (
	"fmt"

	"github.com/google/uuid"
)

// SequenceNumber orders the change sets of one writer. Numbers start at 0
// and grow by one at each rollover.
type SequenceNumber uint64

// LogID identifies one writer's log. It is a random UUID.
type LogID [16]byte

// NewLogID returns a new random log id.
func NewLogID() LogID { return LogID(uuid.New()) }

// String formats the id as a UUID.
func (id LogID) String() string { return uuid.UUID(id).String() }

// MetaKeyGroup is the key group of metadata changes ([Writer.AppendMeta]).
// Readers yield metadata first.
const MetaKeyGroup = -1

// MaxKeyGroup is the largest key group a range may hold (Flink's upper
// bound of the maximum parallelism, 2^15, minus one).
const MaxKeyGroup = 1<<15 - 1

// KeyGroupRange is an inclusive range of key groups [Start, End].
type KeyGroupRange struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// Contains reports whether kg is in the range.
func (r KeyGroupRange) Contains(kg int) bool { return kg >= r.Start && kg <= r.End }

// Validate checks that 0 <= Start <= End <= MaxKeyGroup.
func (r KeyGroupRange) Validate() error {
	if r.Start < 0 || r.End < r.Start || r.End > MaxKeyGroup {
		return fmt.Errorf("dstl: invalid key-group range %v (want 0 <= start <= end <= %d)", r, MaxKeyGroup)
	}
	return nil
}

func (r KeyGroupRange) String() string { return fmt.Sprintf("[%d, %d]", r.Start, r.End) }

// Change is one appended change, as a [Reader] yields it.
type Change struct {
	// KeyGroup is the key group, or MetaKeyGroup for metadata.
	KeyGroup int
	// SequenceNumber is the change set the change belongs to.
	SequenceNumber SequenceNumber
	// Data is the change's bytes. It is valid until the next change is
	// yielded; copy it to keep it.
	Data []byte
}
