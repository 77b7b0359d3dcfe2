package statestore

import (
	"errors"

	"github.com/dstlgo/dstl/statestore/internal/diskstate"
)

// attachDisk makes the store keep its entries in d.
func (s *WindowStore[K, V]) attachDisk(d *diskstate.DB) error {
	return errors.New("statestore: disk-backed WindowStore: not built yet")
}
