//go:build !unix

package main

import "os/exec"

// inOwnGroup does nothing where there are no process groups: the check's
// timeout kills the command itself (exec.CommandContext), not what it
// started.
func inOwnGroup(*exec.Cmd) {}

// killRest does nothing where there are no process groups.
func killRest(*exec.Cmd) {}
