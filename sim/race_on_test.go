//go:build race

package sim

// raceEnabled says the test binary was built with the race detector, so
// that a replay command asks for it too.
const raceEnabled = true
