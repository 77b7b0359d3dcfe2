package statestore_test

import (
	"testing"

	"github.com/dstlgo/dstl/statestore"
	"github.com/dstlgo/dstl/statestore/storetest"
)

// The stores in memory (no Config.Dir) pass the conformance suite.
func TestConformanceMemory(t *testing.T) {
	storetest.Run(t, func(*testing.T) statestore.Config { return statestore.Config{} })
}

// The stores on disk (Config.Dir) pass the conformance suite.
func TestConformanceDisk(t *testing.T) {
	storetest.Run(t, func(t *testing.T) statestore.Config { return statestore.Config{Dir: t.TempDir()} })
}
