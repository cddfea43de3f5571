//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// runSupported: relect run needs process groups and signals.
const runSupported = true

// proc is CMD, started in a process group of its own whose id is its pid.
type proc struct {
	pid int
	// done receives CMD's status once, after it exited, what was left of
	// its process group was killed, and it was reaped.
	done chan exitStatus
}

// exitStatus is how CMD ended, as a shell would report it.
type exitStatus struct {
	code   int            // the exit code, or 128 + the signal's number
	signal syscall.Signal // the signal that killed it, if one did
}

func (s exitStatus) String() string {
	if s.signal != 0 {
		return fmt.Sprintf("killed by %s (status %d)", signalName(s.signal), s.code)
	}
	return fmt.Sprintf("exit status %d", s.code)
}

// startProc starts argv in a new process group, with env, stdin from
// /dev/null, and stdout and stderr as given. Where the system has one
// (Linux, FreeBSD), CMD gets SIGKILL when relect dies.
//
// The parent-death signal fires when the thread that forked CMD exits, not
// the process (golang/go#27505): a goroutine that is not locked to its
// thread may move, and the runtime may retire the thread it started on,
// killing CMD early. So one goroutine, locked to its thread, starts CMD and
// waits for it, and unlocks only after CMD was reaped. The caller must
// receive from done.
func startProc(argv, env []string, stdout, stderr io.Writer) (*proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = sysProcAttr()
	p := &proc{done: make(chan exitStatus, 1)}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		p.done <- reap(cmd)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// reap waits for CMD to exit, kills what is left of its process group —
// processes CMD started must not outlive its term either — and reaps it.
// Where the system lets it wait without reaping (Linux), the group is killed
// while CMD is still a zombie, so that its id cannot have been reused.
func reap(cmd *exec.Cmd) exitStatus {
	pid := cmd.Process.Pid
	unreaped := awaitExit(pid)
	if unreaped {
		killGroup(pid, syscall.SIGKILL)
	}
	err := cmd.Wait()
	if !unreaped {
		killGroup(pid, syscall.SIGKILL)
	}
	return exitStatusOf(cmd, err)
}

// exitStatusOf returns the status of cmd after Wait returned err.
func exitStatusOf(cmd *exec.Cmd, err error) exitStatus {
	if cmd.ProcessState == nil {
		return exitStatus{code: exitCannotRun}
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitStatus{code: 128 + int(ws.Signal()), signal: ws.Signal()}
	}
	return exitStatus{code: cmd.ProcessState.ExitCode()}
}

// signal sends sig to CMD's process group. A group that is gone is not an
// error.
func (p *proc) signal(sig syscall.Signal) { killGroup(p.pid, sig) }

func killGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig) // ESRCH: nobody left
}

// startFailure is the status of a CMD that could not be started: 127 when
// it does not exist, 126 otherwise (as a shell reports them).
func startFailure(err error) exitStatus {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitStatus{code: exitNoCommand}
	}
	return exitStatus{code: exitCannotRun}
}

// signalName is SIGTERM for syscall.SIGTERM.
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}

// signals are the names --signal accepts, without "SIG".
var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT,
	"KILL": syscall.SIGKILL, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
	"TERM": syscall.SIGTERM, "ALRM": syscall.SIGALRM, "WINCH": syscall.SIGWINCH,
}

// parseSignal parses a signal name (TERM, SIGTERM, term) or number.
func parseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 64 {
			return 0, usagef("--signal %q: no such signal number", s)
		}
		return syscall.Signal(n), nil
	}
	if sig, ok := signals[strings.TrimPrefix(strings.ToUpper(s), "SIG")]; ok {
		return sig, nil
	}
	return 0, usagef("--signal %q: want a signal name (TERM, INT, HUP, QUIT, USR1, USR2, KILL, ...) or number", s)
}
