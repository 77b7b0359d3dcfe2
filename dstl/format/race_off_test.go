//go:build !race

package format

// raceEnabled says the test binary was built with the race detector,
// under which a sync.Pool drops some of what it is given (so that tests
// of allocations through one do not hold).
const raceEnabled = false
