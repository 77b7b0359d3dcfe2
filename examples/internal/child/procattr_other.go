//go:build !linux

package child

import "os/exec"

// DieWithParent does nothing where the kernel has no parent-death signal:
// children that verify could not stop (it was killed) must be stopped by
// hand.
func DieWithParent(*exec.Cmd) {}
