package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// statusJSON is what `relect status -o json` prints.
type statusJSON struct {
	Lease                string     `json:"lease"`
	Exists               bool       `json:"exists"`
	State                string     `json:"state"`
	Holder               string     `json:"holder"`
	Term                 int32      `json:"term"`
	RenewAgeSeconds      *float64   `json:"renew_age_seconds"`
	LeaseDurationSeconds int32      `json:"lease_duration_seconds"`
	Valid                bool       `json:"valid"`
	Expires              *time.Time `json:"expires"`
	ValidityBasis        string     `json:"validity_basis"`
	CandidatesKnown      bool       `json:"candidates_known"`
	Candidates           []struct {
		Identity string `json:"identity"`
		Leader   bool   `json:"leader"`
	} `json:"candidates"`
}

// TestCommandStatus: `relect status` against a missing, a held and a
// released Lease, as a table and as JSON, and `--watch` following the
// release.
func TestCommandStatus(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	kubeconfig(t, kc, c.adminConfig(), c.apiAddr())
	ref := namespace + "/" + lease
	status := func(args ...string) (int, string, string) {
		t.Helper()
		return runRelect(t, kc, "status", append(args, ref)...)
	}
	statusJSONOf := func() statusJSON {
		t.Helper()
		code, out, errOut := status("-o", "json")
		if code != 0 {
			t.Fatalf("relect status -o json: exit %d: %s", code, errOut)
		}
		var st statusJSON
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("relect status -o json: %v\n%s", err, out)
		}
		return st
	}

	// Missing.
	code, out, errOut := status()
	if code != 3 || !strings.Contains(errOut, "does not exist") || !strings.Contains(out, "missing") {
		t.Errorf("status of a missing Lease: exit %d, stdout %q, stderr %q; want 3, a row saying missing and a message", code, out, errOut)
	}
	code, out, _ = status("-o", "json")
	var missing statusJSON
	if err := json.Unmarshal([]byte(out), &missing); code != 3 || err != nil || missing.Exists || missing.State != "missing" {
		t.Errorf("status -o json of a missing Lease: exit %d, %+v (%v)", code, missing, err)
	}

	// Held by a sidecar.
	holder := c.startRelect(t, "s1", "sidecar", append(durationFlags(), "--identity=s1", "--http-addr=127.0.0.1:0", ref)...)
	waitFor(t, leaseDuration+maxAcquireWait()+10*time.Second, "s1 to hold the Lease", func() bool {
		l := c.getLease(t, lease)
		return l != nil && ptrVal(l.Spec.HolderIdentity) == "s1"
	})
	held := statusJSONOf()
	l := c.getLease(t, lease)
	if !held.Exists || held.State != "held" || held.Holder != "s1" || !held.Valid || held.Term != ptrVal(l.Spec.LeaseTransitions) ||
		held.LeaseDurationSeconds != int32(leaseDuration/time.Second) || held.ValidityBasis != "renew-time" ||
		held.RenewAgeSeconds == nil || held.Expires == nil {
		t.Errorf("status -o json of a held Lease: %+v", held)
	}
	// s1 registers in the candidate registry within a retry period or so.
	waitFor(t, 2*retryPeriod, "s1 to be listed as the leading candidate", func() bool {
		st := statusJSONOf()
		return st.CandidatesKnown && len(st.Candidates) == 1 && st.Candidates[0].Identity == "s1" && st.Candidates[0].Leader
	})
	code, out, errOut = status()
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "LEASE") || !strings.Contains(lines[1], "held") ||
		!strings.Contains(lines[1], "s1") || !strings.Contains(out, "candidates: s1 (leader") {
		t.Errorf("status table of a held Lease:\n%s", out)
	}
	t.Logf("relect status of a held Lease:\n%s", out)

	// --watch sees the release.
	watcher := c.startRelect(t, "watch", "status", "--watch", "-o", "json", ref)
	waitFor(t, 10*time.Second, "status --watch to show s1", func() bool { return watchedStates(t, watcher.log)["held/s1"] })
	holder.terminate()
	released := statusJSONOf()
	if !released.Exists || released.State != "released" || released.Holder != "" || released.Valid {
		t.Errorf("status -o json of a released Lease: %+v", released)
	}
	waitFor(t, 10*time.Second, "status --watch to show the release", func() bool { return watchedStates(t, watcher.log)["released/"] })
	watcher.signal(syscall.SIGTERM)
	if code := watcher.exitCode(10 * time.Second); code != 0 {
		t.Errorf("status --watch exited %d after SIGTERM, want 0", code)
	}
}

// watchedStates returns the state/holder pairs that `status --watch -o
// json` printed to its log.
func watchedStates(t *testing.T, log string) map[string]bool {
	t.Helper()
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		var st statusJSON
		if json.Unmarshal(s.Bytes(), &st) == nil && st.Lease != "" {
			seen[st.State+"/"+st.Holder] = true
		}
	}
	return seen
}
