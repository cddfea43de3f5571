package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// parentDeathSignal: CMD gets SIGKILL when relect dies, even by SIGKILL.
const parentDeathSignal = true

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// awaitExit waits until pid has exited, leaving it unreaped (a zombie), and
// reports whether it could.
func awaitExit(pid int) (unreaped bool) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err == nil
		}
	}
}
