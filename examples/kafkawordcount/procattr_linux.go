//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the instance when verify dies without
// stopping it (SIGKILL, a crash): an instance of several runs until it is
// stopped, and would otherwise run on with nobody to stop it.
func dieWithParent(c *exec.Cmd) {
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
