//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// alive reports whether pid is a process that has not exited (a zombie,
// exited but not yet reaped by whoever inherited it, counts as exited).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	fields := strings.Fields(string(rest))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// waitDead polls until pid has exited and returns how long that took, or
// fails after timeout (a generous bound: missing it means "never").
func waitDead(t *testing.T, pid int, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for alive(pid) {
		if time.Since(start) > timeout {
			t.Fatalf("process %d still alive after %v", pid, timeout)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// CMD dies with relect even when relect is killed with SIGKILL: the
// parent-death signal of the thread that started it, which stays locked.
func TestCmdDiesWithRelect(t *testing.T) { diesWithHelper(t, "start-and-block", "CMD") }

// So does a --check command that hangs: with relect gone, nothing would
// ever time it out.
func TestCheckDiesWithRelect(t *testing.T) { diesWithHelper(t, "check-and-block", "the check") }

// diesWithHelper starts the test binary as a helper in mode, which starts
// a child the way relect does and writes its pid; the child must live as
// long as the helper, and die once the helper is killed with SIGKILL.
func diesWithHelper(t *testing.T, mode, what string) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	helper := exec.Command(os.Args[0])
	helper.Env = append(os.Environ(), helperEnv+"="+mode, helperPIDFile+"="+pidFile)
	helper.Stderr = os.Stderr
	require.NoError(t, helper.Start())
	var pid int
	deadline := time.Now().Add(10 * time.Second)
	for pid == 0 {
		if data, err := os.ReadFile(pidFile); err == nil {
			pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
			require.NoError(t, err)
		}
		require.True(t, time.Now().Before(deadline), "the helper wrote no pid")
		time.Sleep(5 * time.Millisecond)
	}
	require.True(t, alive(pid))
	time.Sleep(200 * time.Millisecond) // the child is not killed early either
	require.True(t, alive(pid), "%s died while relect lived", what)

	require.NoError(t, helper.Process.Signal(syscall.SIGKILL))
	_ = helper.Wait()
	t.Logf("%s died %v after its parent was killed", what, waitDead(t, pid, 10*time.Second))
}

// startProc puts CMD in a group of its own; when CMD exits, the rest of its
// group is killed before the status is reported.
func TestLeftoversOfCmdAreKilled(t *testing.T) {
	dir := t.TempDir()
	childFile, goFile := filepath.Join(dir, "child"), filepath.Join(dir, "go")
	require.NoError(t, syscall.Mkfifo(goFile, 0o600))
	// CMD starts a child, then waits until the test has looked, and exits.
	script := "sleep 300 & echo $! > " + childFile + "; read x < " + goFile + "; exit 7"
	p, err := startProc([]string{"sh", "-c", script}, os.Environ(), os.Stderr, os.Stderr)
	require.NoError(t, err)
	var child int
	require.Eventually(t, func() bool {
		data, _ := os.ReadFile(childFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		return child > 0
	}, 10*time.Second, time.Millisecond)
	for _, pid := range []int{p.pid, child} {
		pgid, err := syscall.Getpgid(pid)
		require.NoError(t, err)
		assert.Equal(t, p.pid, pgid, "CMD leads a process group of its own, and its child is in it")
	}
	assert.NotEqual(t, syscall.Getpgrp(), p.pid)

	require.NoError(t, os.WriteFile(goFile, []byte("go\n"), 0))
	st := <-p.done
	assert.Equal(t, 7, st.code)
	waitDead(t, child, 10*time.Second)
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		script string
		code   int
		signal syscall.Signal
	}{
		{"exit 0", 0, 0},
		{"exit 3", 3, 0},
		{"kill -KILL $$", 128 + 9, syscall.SIGKILL},
		{"kill -TERM $$", 128 + 15, syscall.SIGTERM},
	} {
		p, err := startProc([]string{"sh", "-c", tc.script}, nil, os.Stderr, os.Stderr)
		require.NoError(t, err)
		st := <-p.done
		assert.Equal(t, tc.code, st.code, tc.script)
		assert.Equal(t, tc.signal, st.signal, tc.script)
	}
	_, err := startProc([]string{"/nonexistent/cmd"}, nil, os.Stderr, os.Stderr)
	require.Error(t, err)
	assert.Equal(t, exitNoCommand, startFailure(err).code)
	noExec := filepath.Join(t.TempDir(), "x")
	require.NoError(t, os.WriteFile(noExec, nil, 0o644))
	_, err = startProc([]string{noExec}, nil, os.Stderr, os.Stderr)
	require.True(t, errors.Is(err, os.ErrPermission), "%v", err)
	assert.Equal(t, exitCannotRun, startFailure(err).code)
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"TERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT, "hup": syscall.SIGHUP, "10": 10, "sigusr2": syscall.SIGUSR2} {
		got, err := parseSignal(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "65", "-1", "TERMINATE", "SIG"} {
		_, err := parseSignal(in)
		assert.Error(t, err, in)
	}
}
