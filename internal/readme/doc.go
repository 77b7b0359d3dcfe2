// Package readme holds the tests of the README and the docs: of the
// README's opening and of its program, and that docs/BENCHMARKS.md links
// the newest report of bench/results. The test of the program builds
// the Go block that the README marks for it in a module of its own, runs
// it, and checks what it prints against what the README says. The package
// has no code.
package readme
