//go:build !race

package job_test

// raceEnabled says that the test binary has the race detector, so that a
// replay command asks for it too.
const raceEnabled = false
