//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// inOwnGroup starts the check command cmd in a process group of its own,
// with CMD's parent-death signal where the system has one (sysProcAttr: a
// check that hangs must not outlive a relect killed with SIGKILL, whose
// timeout would never kill it), and makes its cancellation (the check's
// timeout) kill the whole group: nothing a check started outlives a check
// that hung. The caller runs the command on a goroutine locked to its
// thread (see startProc).
func inOwnGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // ESRCH: it has just exited
		return nil
	}
}

// killRest kills what is left of the check's process group after it
// exited: processes it left behind in the background.
func killRest(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // ESRCH: nobody left
	}
}
