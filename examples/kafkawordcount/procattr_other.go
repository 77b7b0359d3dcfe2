//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing where the kernel has no parent-death signal:
// instances that verify could not stop (it was killed) must be stopped by
// hand.
func dieWithParent(*exec.Cmd) {}
