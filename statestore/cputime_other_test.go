//go:build !unix

package statestore_test

import "time"

// processCPUTime is not measured here: benchmarks report 0 for it.
func processCPUTime() time.Duration { return 0 }
