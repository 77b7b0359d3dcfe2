// Package storetest is a conformance suite for the state stores of package
// statestore. It checks the key-value, window and versioned stores against
// models kept in maps, alone and under a Checkpointer. Every kind of store,
// in memory or on disk with statestore.Config.Dir, must pass it.
//
// Alone, it checks reads, writes, iteration order, codecs, key groups,
// logging, changes applied from the log, and snapshots. Under a
// Checkpointer, it checks checkpoints, materialisations, restores and
// rescaling.
//
// A store implementation's test calls Run with the Config its stores need:
//
//	func TestConformanceDisk(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) statestore.Config {
//			return statestore.Config{Dir: t.TempDir()}
//		})
//	}
//
// The subtests are grouped by what they check (KeyValue, Window,
// Versioned, Snapshot, Checkpoint, Rescale), so that go test's -run flag
// selects them, for instance -run 'TestConformanceDisk/KeyValue/'.
//
// The suite's random data come from a fixed seed, so a run is
// reproducible; a failing subtest logs its seed. The environment variable
// STORETEST_SEED, a number, changes the seeds.
package storetest
