package e2e

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// process is a child process of the suite — a candidate, a relect command —
// with its stdout and stderr in a log file: started so that it dies with
// the test binary, waited for by a goroutine of its own, and killed by the
// test's cleanup if it still runs.
type process struct {
	t   *testing.T
	id  string
	cmd *exec.Cmd

	waited  chan struct{} // closed when Wait returned
	mu      sync.Mutex    // guards deadAt and waitErr
	deadAt  time.Time     // when Wait returned
	waitErr error
}

// startProcess starts cmd as id, its output appended to logPath. The
// test's cleanup kills it if it still runs (after a SIGCONT, in case it was
// stopped), then calls dump if the test failed.
func startProcess(t *testing.T, id string, cmd *exec.Cmd, logPath string, dump func()) *process {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Dies with the test binary, even if a timeout kills that.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	p := &process{t: t, id: id, cmd: cmd, waited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.deadAt, p.waitErr = time.Now(), err
		p.mu.Unlock()
		close(p.waited)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-p.waited
		}
		if t.Failed() && dump != nil {
			dump()
		}
	})
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.waited:
		return true
	default:
		return false
	}
}

// dead is when the process was seen to exit (zero while it runs).
func (p *process) dead() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deadAt
}

// err is what Wait returned (nil while it runs, or if it exited 0).
func (p *process) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// signal sends sig and returns when it was sent.
func (p *process) signal(sig syscall.Signal) time.Time {
	p.t.Helper()
	at := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%s: sending %v: %v", p.id, sig, err)
	}
	return at
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *process) kill() (sent time.Time) {
	p.t.Helper()
	sent = p.signal(syscall.SIGKILL)
	<-p.waited
	return sent
}
