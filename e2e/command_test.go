package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/relect/relect/e2e/internal/faultproxy"
)

// The relect command (cmd/relect) and the CMD it runs in these tests
// (e2e/cmd/worker), each built once per run.
var (
	relectOnce sync.Once
	relectBin  string
	relectErr  error

	workerOnce sync.Once
	workerBin  string
	workerErr  error
)

// relectBinary builds cmd/relect from the root module (with the race
// detector when the tests run with it: relect then exits a second late,
// after its work is done).
func relectBinary(t *testing.T) string {
	t.Helper()
	relectOnce.Do(func() {
		relectBin, relectErr = build(t, "..", "relect", "./cmd/relect", raceEnabled)
	})
	if relectErr != nil {
		t.Fatal(relectErr)
	}
	return relectBin
}

func workerBinary(t *testing.T) string {
	t.Helper()
	workerOnce.Do(func() {
		// Never with the race detector: a binary built with it sleeps
		// a second before it exits (GORACE atexit_sleep_ms), longer than
		// the grace period, and the worker is not what is under test.
		workerBin, workerErr = build(t, ".", "worker", "./cmd/worker", false)
	})
	if workerErr != nil {
		t.Fatal(workerErr)
	}
	return workerBin
}

func build(t *testing.T, dir, name, pkg string, race bool) (string, error) {
	start := time.Now()
	bin := filepath.Join(workDir, name)
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool(), append(args, pkg)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %v: %v\n%s", args, err, out)
	}
	t.Logf("built %s (race=%v) in %v", pkg, race, time.Since(start).Round(time.Millisecond))
	return bin, nil
}

// durationFlags are the suite's lease timings as relect's flags.
func durationFlags() []string {
	return []string{"--lease-duration=" + leaseDuration.String(), "--renew-deadline=" + renewDeadline.String(),
		"--retry-period=" + retryPeriod.String()}
}

// relectProc is one relect process (any subcommand) reaching the apiserver
// through its own fault proxy.
type relectProc struct {
	*process
	proxy *faultproxy.Proxy
	kc    string // its kubeconfig
	log   string // stdout and stderr
}

// startRelect starts `relect SUBCOMMAND --kubeconfig=... ARGS...`. The
// test's cleanup kills it if it is still running, and shows its log if the
// test failed.
func (c *cluster) startRelect(t *testing.T, id string, subcommand string, args ...string) *relectProc {
	t.Helper()
	bin := relectBinary(t)
	dir, err := os.MkdirTemp(testDir(t), id+"-")
	if err != nil {
		t.Fatal(err)
	}
	p := &relectProc{proxy: c.newProxy(t, id), kc: filepath.Join(dir, "kubeconfig"), log: filepath.Join(dir, "relect.log")}
	kubeconfig(t, p.kc, c.adminConfig(), p.proxy.Addr())
	cmd := exec.Command(bin, append([]string{subcommand, "--kubeconfig=" + p.kc}, args...)...)
	p.process = startProcess(t, id, cmd, p.log, p.dump)
	return p
}

// exitCode waits up to timeout for the process to exit and returns its
// status.
func (p *relectProc) exitCode(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.waited:
	case <-time.After(timeout):
		p.t.Fatalf("relect %s did not exit within %v", p.id, timeout)
	}
	var exit *exec.ExitError
	switch err := p.err(); {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	p.t.Fatalf("relect %s: %v", p.id, p.err())
	return -1
}

// terminate sends SIGTERM and checks that relect exits 0 soon: after its
// CMD stopped (at most the grace period) and the release (at most the
// renew deadline).
func (p *relectProc) terminate() (sent time.Time) {
	p.t.Helper()
	sent = p.signal(syscall.SIGTERM)
	if code := p.exitCode(renewDeadline + 10*time.Second); code != 0 {
		p.t.Errorf("relect %s exited %d after SIGTERM, want 0", p.id, code)
	}
	return sent
}

// logHas reports whether its log holds a line containing every part.
func (p *relectProc) logHas(parts ...string) bool {
	data, _ := os.ReadFile(p.log)
	for line := range strings.SplitSeq(string(data), "\n") {
		all := true
		for _, part := range parts {
			all = all && strings.Contains(line, part)
		}
		if all {
			return true
		}
	}
	return false
}

func (p *relectProc) dump() {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	p.t.Logf("---- relect %s: last %d lines of its log:\n%s", p.id, len(lines), bytes.Join(lines, []byte("\n")))
}

// runRelect runs a relect command to its end (status) and returns its exit
// code, stdout and stderr.
func runRelect(t *testing.T, kc string, subcommand string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, relectBinary(t), append([]string{subcommand, "--kubeconfig=" + kc}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("relect %s: %v", subcommand, err)
	return -1, "", ""
}

// workerLine is one line a worker (e2e/cmd/worker) appended to the shared
// log.
type workerLine struct {
	Kind    string `json:"kind"` // start, stop (on the signal), exit (by itself)
	PID     int    `json:"pid"`
	ID      string `json:"id"`
	Term    string `json:"term"`
	Lease   string `json:"lease"`
	T       int64  `json:"t"`
	Overlap bool   `json:"overlap"`
	Code    int    `json:"code"`
}

func (l workerLine) time() time.Time { return time.Unix(0, l.T) }

func (l workerLine) String() string {
	return fmt.Sprintf("%s %s id=%s term=%s pid=%d overlap=%v", l.time().Format("15:04:05.000"), l.Kind, l.ID, l.Term, l.PID, l.Overlap)
}

// workers is the shared state of the workers of one test: their log, the
// lock only one may hold at a time, and their per-pid locks.
type workers struct {
	dir string
}

func newWorkers(t *testing.T) *workers {
	t.Helper()
	w := &workers{dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(w.dir, "pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			var lines []string
			for _, l := range w.lines(t) {
				lines = append(lines, "  "+l.String())
			}
			t.Logf("worker log:\n%s", strings.Join(lines, "\n"))
		}
	})
	return w
}

// cmd is the CMD for relect run: the worker with these extra flags.
func (w *workers) cmd(t *testing.T, flags ...string) []string {
	return append([]string{workerBinary(t), "-log", filepath.Join(w.dir, "log"), "-lock", filepath.Join(w.dir, "lock"),
		"-pid-dir", filepath.Join(w.dir, "pids")}, flags...)
}

// lines reads the log.
func (w *workers) lines(t *testing.T) []workerLine {
	t.Helper()
	f, err := os.Open(filepath.Join(w.dir, "log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []workerLine
	s := bufio.NewScanner(f)
	for s.Scan() {
		var l workerLine
		if err := json.Unmarshal(s.Bytes(), &l); err != nil {
			t.Fatalf("worker log: %q: %v", s.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// awaitLine waits for the first line after the first `after` lines that
// satisfies ok, and returns its index.
func (w *workers) awaitLine(t *testing.T, after int, timeout time.Duration, what string, ok func(workerLine) bool) (int, workerLine) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		lines := w.lines(t)
		for i := after; i < len(lines); i++ {
			if ok(lines[i]) {
				return i, lines[i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dead reports whether the worker with pid has died: its pid lock is free
// (the kernel drops a dead process's locks, whoever reaps it).
func (w *workers) dead(t *testing.T, pid int) bool {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(w.dir, "pids", strconv.Itoa(pid)+".lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("worker %d: %v", pid, err)
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// awaitDead polls until the worker with pid has died and returns when it
// was seen dead (polling every millisecond).
func (w *workers) awaitDead(t *testing.T, pid int, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !w.dead(t, pid) {
		if time.Now().After(deadline) {
			t.Fatalf("worker %d still alive after %v", pid, timeout)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Now()
}

// checkSafety checks what users of relect run rely on, over the whole log:
// no worker started while another was alive (the kernel's lock says so),
// and term numbers never go down and grow with every change of holder.
func (w *workers) checkSafety(t *testing.T) {
	t.Helper()
	lines := w.lines(t)
	var prev *workerLine
	for i, l := range lines {
		if l.Kind != "start" {
			continue
		}
		if l.Overlap {
			t.Errorf("SAFETY VIOLATION: %v started while another worker was alive", l)
		}
		if prev != nil {
			pt, _ := strconv.Atoi(prev.Term)
			nt, _ := strconv.Atoi(l.Term)
			if nt < pt || (l.ID != prev.ID && nt == pt) {
				t.Errorf("FENCING: line %d: %v after %v", i, l, *prev)
			}
		}
		prev = &lines[i]
	}
}
