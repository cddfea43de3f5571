//go:build !unix

package main

import (
	"errors"
	"fmt"
	"io"
	"syscall"
)

// runSupported: relect run needs process groups and signals, which this
// system does not have; status and sidecar work.
const runSupported = false

const parentDeathSignal = false

var errNoRun = errors.New("relect run needs Unix process groups and signals")

type proc struct {
	pid  int
	done chan exitStatus
}

type exitStatus struct {
	code   int
	signal syscall.Signal
}

func (s exitStatus) String() string { return fmt.Sprintf("exit status %d", s.code) }

func signalName(sig syscall.Signal) string { return sig.String() }

func startProc(_, _ []string, _, _ io.Writer) (*proc, error) { return nil, errNoRun }

func (p *proc) signal(syscall.Signal) {}

func startFailure(error) exitStatus { return exitStatus{code: exitCannotRun} }

func parseSignal(string) (syscall.Signal, error) { return 0, errNoRun }
