package dstl

// Handle points to the stored bytes of a range of one writer's change sets:
// what a checkpoint keeps to read them back after a crash. A handle has a
// stable, versioned encoding: [Handle.MarshalBinary] and
// [Handle.MarshalJSON] round-trip through their Unmarshal counterparts.
type Handle struct {
	// StorageID is the identifier of the backend that holds the objects
	// ("local", "s3", ...).
	StorageID string
	// LogID is the writer's log.
	LogID LogID
	// KeyGroups is the writer's key-group range.
	KeyGroups KeyGroupRange
	// Entries are the change sets, in sequence-number order.
	Entries []HandleEntry
	// LogicalSize is the size of the changes before encoding and compression.
	LogicalSize int64
	// StoredSize is the number of stored bytes the entries cover.
	StoredSize int64
	// IncrementalSize is the part of StoredSize that no earlier handle of
	// the same writer covered.
	IncrementalSize int64
}

// HandleEntry locates one change set: Length bytes of Object from Offset on.
// Offset and Length count stored (compressed) bytes, so a reader fetches
// exactly this range.
type HandleEntry struct {
	Object         string
	Offset         int64
	Length         int64
	SequenceNumber SequenceNumber
	LogicalSize    int64
}

// Empty reports whether the handle covers no change set.
func (h *Handle) Empty() bool { return len(h.Entries) == 0 }
