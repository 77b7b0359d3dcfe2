package statestore

import (
	"errors"

	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// attachDisk makes the store keep its entries in d.
func (s *KeyValueStore[K, V]) attachDisk(d *diskstate.DB) error {
	return errors.New("statestore: disk-backed KeyValueStore: not built yet")
}
