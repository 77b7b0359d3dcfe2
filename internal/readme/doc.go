// Package readme holds the test of the README's program. The test builds
// the Go block that the README marks for it in a module of its own, runs
// it, and checks what it prints against what the README says. The package
// has no code.
package readme
