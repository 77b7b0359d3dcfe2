// Package importrules holds the test of the repository's import rules,
// which docs/DEPENDENCIES.md states: the log depends on nothing above it,
// the catalog and the collector on no state store, only the state stores
// import Pebble, only the Kafka code imports franz-go, production code
// imports no package meant for tests, and the dstl module requires no
// module that only the bench charts need. The package has no code.
package importrules
