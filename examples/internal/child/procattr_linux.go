//go:build linux

package child

import (
	"os/exec"
	"syscall"
)

// DieWithParent has the kernel kill the child when verify dies without
// stopping it (SIGKILL, a crash): a child runs until it is
// stopped, and would otherwise run on with nobody to stop it.
func DieWithParent(c *exec.Cmd) {
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
