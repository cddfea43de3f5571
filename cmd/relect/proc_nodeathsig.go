//go:build unix && !linux && !freebsd

package main

import "syscall"

// parentDeathSignal: this system has no parent-death signal, so CMD
// survives relect if relect is killed with SIGKILL (see docs/command.md).
const parentDeathSignal = false

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// awaitExit does not wait here: the group is killed after CMD was reaped.
func awaitExit(int) (unreaped bool) { return false }
