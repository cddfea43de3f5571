package main

import "syscall"

// parentDeathSignal: CMD gets SIGKILL when relect dies, even by SIGKILL.
const parentDeathSignal = true

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// awaitExit does not wait here: the group is killed after CMD was reaped.
func awaitExit(int) (unreaped bool) { return false }
