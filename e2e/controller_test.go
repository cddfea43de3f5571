package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestControllerExample runs examples/controller — the program
// deploy/controller deploys — as three replicas against the real control
// plane, as its Deployment would (identity from POD_NAME, relect's default
// durations): exactly one leads; every replica's /healthz (relect's health
// check) and /readyz pass and /metrics reports relect's metrics; SIGTERM of
// the leader hands the lease over at once (release + watching followers),
// and every replica exits 0 on SIGTERM.
func TestControllerExample(t *testing.T) {
	c := requireCluster(t)
	dir := testDir(t)
	bin := filepath.Join(dir, "controller")
	build := exec.Command(goTool(), "build", "-o", bin, "./examples/controller")
	build.Dir = ".." // the example lives in the root module
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/controller: %v\n%s", err, out)
	}
	kc := filepath.Join(dir, "kubeconfig")
	kubeconfig(t, kc, c.adminConfig(), c.apiAddr())
	lease := leaseName(t)

	type replica struct {
		name, addr string
		cmd        *exec.Cmd
		done       chan error
	}
	var replicas []*replica
	for i := range 3 {
		r := &replica{name: fmt.Sprintf("controller-%d", i), addr: freeAddr(t), done: make(chan error, 1)}
		r.cmd = exec.Command(bin, "-kubeconfig", kc, "-lease-namespace", namespace, "-lease-name", lease,
			"-health-addr", r.addr, "-work-every", "200ms")
		r.cmd.Env = append(os.Environ(), "POD_NAME="+r.name)
		logf, err := os.Create(filepath.Join(dir, r.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		defer logf.Close()
		r.cmd.Stdout, r.cmd.Stderr = logf, logf
		r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { r.done <- r.cmd.Wait() }()
		replicas = append(replicas, r)
	}
	defer func() {
		for _, r := range replicas {
			_ = r.cmd.Process.Kill()
		}
	}()

	holder := func() string {
		if l := c.getLease(t, lease); l != nil {
			return ptrVal(l.Spec.HolderIdentity)
		}
		return ""
	}
	waitHolder := func(what string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // the first: LeaseDuration (15 s) after the Lease was found missing
		for time.Now().Before(deadline) {
			if h := holder(); ok(h) {
				return h
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s: the Lease holder is still %q", what, holder())
		return ""
	}
	isReplica := func(h string) bool { return strings.HasPrefix(h, "controller-") }
	first := waitHolder("first leader", isReplica)
	t.Logf("%s leads", first)

	for _, r := range replicas {
		for _, path := range []string{"/healthz", "/readyz"} {
			if code, body := httpGet(t, "http://"+r.addr+path); code != http.StatusOK {
				t.Errorf("%s %s: %d %s", r.name, path, code, body)
			}
		}
		// The Lease names the leader a few milliseconds before its term
		// starts (client-go resumes the follower's write): poll a moment.
		want := fmt.Sprintf(`relect_is_leader{lease=%q,lease_namespace=%q} %d`, lease, namespace, map[bool]int{true: 1}[r.name == first])
		var code int
		var body string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if code, body = httpGet(t, "http://"+r.addr+"/metrics"); code == http.StatusOK && strings.Contains(body, want) {
				break
			}
		}
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s /metrics: %d, want a line %q", r.name, code, want)
		}
	}

	var leader *replica
	for _, r := range replicas {
		if r.name == first {
			leader = r
		}
	}
	stopped := time.Now()
	if err := leader.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	next := waitHolder("handover", func(h string) bool { return isReplica(h) && h != first })
	t.Logf("%s leads %v after SIGTERM of %s", next, time.Since(stopped).Round(time.Millisecond), first)
	if err := <-leader.done; err != nil {
		t.Errorf("%s exited with %v", leader.name, err)
	}
	for _, r := range replicas {
		if r == leader {
			continue
		}
		if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("%s exited with %v", r.name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not exit within 30s of SIGTERM", r.name)
		}
	}
	if h := holder(); h != "" {
		t.Errorf("after every replica stopped the Lease is held by %q", h)
	}
}

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	var resp *http.Response
	var err error
	for range 50 { // the server may still be starting
		if resp, err = http.Get(url); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
