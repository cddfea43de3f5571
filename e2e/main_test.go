package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables the suite reads.
const (
	// envAssets is envtest's: the directory holding kube-apiserver and etcd
	// (hack/build-control-plane.sh prints it).
	envAssets = "KUBEBUILDER_ASSETS"
	// envRequired=1 turns "no control plane" from a skip into a failure;
	// CI sets it.
	envRequired = "RELECT_E2E_REQUIRED"
	// envTimeScale multiplies every lease timing of the suite by a whole
	// number, for a machine too slow for the defaults.
	envTimeScale = "RELECT_E2E_TIME_SCALE"
	// envKeep=1 keeps the scratch directory (control-plane logs, every
	// candidate's stderr and history) of a failed run.
	envKeep = "RELECT_E2E_KEEP"
	// envDir, if set, is the scratch directory to use (created if need
	// be) instead of a new temporary one; hack/test.sh sets it, and
	// envKeep, so that a failing run's summary can say where the logs are.
	envDir = "RELECT_E2E_DIR"
)

// The lease timings every candidate of the suite runs with (times the
// scale): short, so that the suite runs in minutes, yet with a renew
// deadline that a loaded two-core machine running the race detector meets.
// relect wants RetryPeriod + 1 s < RenewDeadline < LeaseDuration.
var (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

var (
	// workDir is the suite's scratch directory: the candidate binary, the
	// control plane's data and certificates, its logs.
	workDir string

	clusterOnce sync.Once
	theCluster  *cluster
	clusterErr  error

	binOnce      sync.Once
	candidateBin string
	binErr       error
)

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(envAssets) == "" && os.Getenv(envRequired) == "1" {
		fmt.Fprintf(os.Stderr, "FAIL: %s=1 but %s is not set: build the control plane with "+
			"KUBEBUILDER_ASSETS=$(hack/build-control-plane.sh)\n", envRequired, envAssets)
		os.Exit(1)
	}
	if s := os.Getenv(envTimeScale); s != "" {
		var k int
		if _, err := fmt.Sscan(s, &k); err != nil || k < 1 {
			fmt.Fprintf(os.Stderr, "FAIL: %s=%q is not a whole number ≥ 1\n", envTimeScale, s)
			os.Exit(1)
		}
		leaseDuration *= time.Duration(k)
		renewDeadline *= time.Duration(k)
		retryPeriod *= time.Duration(k)
	}
	dir, err := scratchDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	workDir = dir
	code := m.Run()
	if theCluster != nil {
		if err := theCluster.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
			code = 1
		}
	}
	if code == 0 || os.Getenv(envKeep) == "" {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "e2e: kept the logs of this failed run in", dir)
	}
	os.Exit(code)
}

// scratchDir makes the suite's scratch directory: envDir if set, else a new
// temporary one.
func scratchDir() (string, error) {
	if d := os.Getenv(envDir); d != "" {
		return d, os.MkdirAll(d, 0o755)
	}
	return os.MkdirTemp("", "relect-e2e-")
}

// testDir returns a directory for t's files (candidates' stderr and
// histories, a program's logs) under the suite's scratch directory, which
// is kept when the run fails (envKeep), unlike t.TempDir.
func testDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(workDir, "tests", strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// requireCluster returns the control plane shared by the whole suite,
// starting it on first use, or skips the test when no assets are configured.
func requireCluster(t *testing.T) *cluster {
	t.Helper()
	if os.Getenv(envAssets) == "" {
		t.Skipf("%s is not set: skipping the real-control-plane test (run with "+
			"KUBEBUILDER_ASSETS=$(hack/build-control-plane.sh); set %s=1 to make this a failure)", envAssets, envRequired)
	}
	clusterOnce.Do(func() {
		start := time.Now()
		theCluster, clusterErr = startCluster(filepath.Join(workDir, "controlplane"))
		if clusterErr == nil {
			t.Logf("control plane started in %v (apiserver %s)", time.Since(start).Round(time.Millisecond), theCluster.apiAddr())
		}
	})
	if clusterErr != nil {
		t.Fatalf("starting the control plane: %v", clusterErr)
	}
	return theCluster
}

// candidateBinary builds e2e/cmd/candidate once per run (with the race
// detector when the tests run with it) and returns its path.
func candidateBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		start := time.Now()
		candidateBin = filepath.Join(workDir, "candidate")
		args := []string{"build", "-o", candidateBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "./cmd/candidate")
		cmd := exec.Command(goTool(), args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go %v: %v\n%s", args, err, out)
			return
		}
		t.Logf("built the candidate (race=%v) in %v", raceEnabled, time.Since(start).Round(time.Millisecond))
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return candidateBin
}

// goTool is the go command that runs these tests.
func goTool() string {
	if p := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}
