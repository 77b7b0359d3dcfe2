// Package storetest is a conformance suite for the state stores of package
// statestore: it checks, against models kept in maps, that the key-value,
// window and versioned stores behave as statestore documents them, alone
// (reads, writes, iteration order, codecs, key groups, logging, changes
// applied from the log, snapshots) and under a Checkpointer (checkpoints,
// materialisations, restores and rescaling). Every kind of store (in
// memory, on disk with statestore.Config.Dir) must pass it.
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
