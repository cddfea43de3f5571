package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// requestJSON is the pending_request of `relect status -o json`.
type requestJSON struct {
	Action string `json:"action"`
	Holder string `json:"holder"`
	Term   int32  `json:"term"`
	To     string `json:"to"`
	By     string `json:"by"`
}

// operatorKubeconfig writes a kubeconfig for the relect commands an
// operator runs (straight to the apiserver) and returns its path.
func operatorKubeconfig(t *testing.T, c *cluster) string {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	kubeconfig(t, kc, c.adminConfig(), c.apiAddr())
	return kc
}

// pendingRequest returns the request `relect status -o json` shows
// pending, or nil.
func pendingRequest(t *testing.T, kc, ref string) *requestJSON {
	t.Helper()
	code, out, errOut := runRelect(t, kc, "status", "-o", "json", ref)
	if code != 0 {
		t.Fatalf("relect status -o json: exit %d: %s", code, errOut)
	}
	var st struct {
		PendingRequest *requestJSON `json:"pending_request"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("relect status -o json: %v\n%s", err, out)
	}
	return st.PendingRequest
}

// TestCommandYieldHandOver: `relect yield` and `relect handover`, run as
// processes of their own, against relect candidates (processes too): the
// leader steps down or hands over at once, and each command says who
// leads and exits 0; a handover to an identity nobody registered is
// refused (4) without writing anything. And `spec.preferredHolder`, which
// an apiserver without the CoordinatedLeaderElection feature gate (off by
// default) drops silently: the update succeeds, the field reads back
// empty, and nothing happens — docs/command.md says so, and says to use
// relect handover.
func TestCommandYieldHandOver(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	ref := namespace + "/" + lease
	kc := operatorKubeconfig(t, c)
	relectBinary(t) // built before anything is timed
	r1 := c.startCandidate(t, "r1", candOpts{lease: lease})
	r2 := c.startCandidate(t, "r2", candOpts{lease: lease})
	first := waitLeader(t, leaseDuration+maxAcquireWait()+slack, r1, r2)
	second := others(first, r1, r2)[0]
	waitFor(t, 2*retryPeriod, "both candidates registered", func() bool {
		code, out, _ := runRelect(t, kc, "status", ref)
		return code == 0 && strings.Contains(out, "r1 (") && strings.Contains(out, "r2 (")
	})
	time.Sleep(retryPeriod) // the leader has listed the registry

	// spec.preferredHolder, as kubectl patch would set it.
	c.editLease(t, lease, func(s *coordinationv1.LeaseSpec) {
		s.PreferredHolder = &second.id
		s.Strategy = ptrTo(coordinationv1.OldestEmulationVersion)
	})
	if l := c.getLease(t, lease); l.Spec.PreferredHolder != nil || l.Spec.Strategy != nil {
		t.Errorf("the apiserver kept spec.preferredHolder %q (strategy %v): docs/command.md says one without the CoordinatedLeaderElection "+
			"feature gate drops it", ptrVal(l.Spec.PreferredHolder), l.Spec.Strategy)
	}
	if !first.leading() || second.leading() {
		t.Errorf("after spec.preferredHolder was set: %s should lead on", first.id)
	}

	sent := time.Now()
	code, out, errOut := runRelect(t, kc, "yield", "--by=e2e", ref)
	t.Logf("relect yield: exit %d\n%s%s", code, out, errOut)
	if code != 0 || !strings.Contains(out, first.id+" yielded "+ref+": "+second.id+" leads now") {
		t.Errorf("relect yield: exit %d, stdout %q, stderr %q; want 0 and %s leading", code, out, errOut, second.id)
	}
	waitNewLeader(t, maxAcquireWait()+slack, sent, r1, r2)
	if !second.leading() || len(first.eventsAfterOne(t, "released", sent)) != 1 {
		t.Errorf("after relect yield: %s should lead, and %s should have released the Lease once", second.id, first.id)
	}
	if req := pendingRequest(t, kc, ref); req != nil {
		t.Errorf("after the yield, status shows a request pending: %+v", req)
	}

	// Back to the first, once it follows again (after its backoff wait).
	time.Sleep(leaseDuration)
	sent = time.Now()
	code, out, errOut = runRelect(t, kc, "handover", "--by=e2e", ref, first.id)
	t.Logf("relect handover: exit %d\n%s%s", code, out, errOut)
	if code != 0 || !strings.Contains(out, second.id+" handed "+ref+" over to "+first.id+": "+first.id+" leads now") {
		t.Errorf("relect handover: exit %d, stdout %q, stderr %q; want 0 and %s leading", code, out, errOut, first.id)
	}
	next, _, _ := waitNewLeader(t, maxAcquireWait()+slack, sent, r1, r2)
	if n := len(second.eventsAfterOne(t, "handed-over", sent)); next != first || n != 1 {
		t.Errorf("after relect handover to %s: %s leads; %s's handed-over events: %d", first.id, next.id, second.id, n)
	}

	// A typo is refused by the command itself: nothing is written.
	before := c.getLease(t, lease).Annotations["relect.io/request"]
	code, _, errOut = runRelect(t, kc, "handover", ref, "r3")
	if code != 4 || !strings.Contains(errOut, `"r3" is not a registered candidate`) || !strings.Contains(errOut, "registered: ") ||
		!strings.Contains(errOut, "r1") || !strings.Contains(errOut, "r2") {
		t.Errorf("relect handover to r3: exit %d, stderr %q; want 4, naming the registered candidates", code, errOut)
	}
	if after := c.getLease(t, lease).Annotations["relect.io/request"]; after != before {
		t.Errorf("a refused handover wrote a request: %q", after)
	}
	r1.terminate()
	r2.terminate()
	ivs := checkSafety(t, r1, r2)
	checkTerms(t, ivs, time.Time{}, time.Time{})
	checkFences(t, ivs)
}

// TestCommandRequestClientGoLeader: a plain client-go leader ignores a
// request. `relect yield` gives up after --timeout (124), saying so, and
// `relect status` shows the request pending, in the table and as JSON,
// for as long as that leader's term lasts. When a relect candidate takes
// the Lease over, the request is stale: status no longer shows it, and the
// new leader leads on. Never two leaders.
func TestCommandRequestClientGoLeader(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	ref := namespace + "/" + lease
	kc := operatorKubeconfig(t, c)
	relectBinary(t) // built before anything is timed
	cg := c.startCandidate(t, "cg", candOpts{lease: lease, mode: modeClientGo})
	waitLeader(t, maxAcquireWait()+slack, cg)

	code, out, errOut := runRelect(t, kc, "yield", "--by=e2e", "--timeout="+leaseDuration.String(), ref)
	t.Logf("relect yield: exit %d\n%s%s", code, out, errOut)
	if code != 124 || !strings.Contains(errOut, "cg still leads "+ref) || !strings.Contains(errOut, "a plain client-go leader ignores requests") {
		t.Errorf("relect yield of a client-go leader: exit %d, stderr %q; want 124, saying cg leads on", code, errOut)
	}
	if !cg.leading() {
		t.Errorf("cg should lead on")
	}
	if !strings.Contains(errOut, "the request was withdrawn") {
		t.Errorf("relect yield without an outcome: stderr %q; want the request withdrawn", errOut)
	}
	if req := pendingRequest(t, kc, ref); req != nil {
		t.Errorf("withdrawn, yet status shows it pending: %+v", req)
	}
	// Left pending with --no-wait, status shows it while cg's term lasts.
	code, _, errOut = runRelect(t, kc, "yield", "--by=e2e", "--no-wait", ref)
	if code != 0 {
		t.Errorf("relect yield --no-wait: exit %d, stderr %q", code, errOut)
	}
	req := pendingRequest(t, kc, ref)
	if req == nil || req.Action != "yield" || req.Holder != "cg" || req.By != "e2e" {
		t.Errorf("relect status -o json: pending_request %+v; want a yield asked of cg by e2e", req)
	}
	code, out, _ = runRelect(t, kc, "status", ref)
	if code != 0 || !strings.Contains(out, "request pending: yield, asked of cg") {
		t.Errorf("relect status: exit %d; want a line with the request pending:\n%s", code, out)
	}
	t.Logf("relect status with the request pending:\n%s", out)

	r1 := c.startCandidate(t, "r1", candOpts{lease: lease})
	sent, _ := cg.terminate() // releases; r1 takes the Lease at once
	waitNewLeader(t, maxAcquireWait()+slack, sent, r1)
	if req := pendingRequest(t, kc, ref); req != nil {
		t.Errorf("with r1 leading, status shows the request to cg as pending: %+v", req)
	}
	time.Sleep(leaseDuration)
	if !r1.leading() || len(r1.intervals()) != 1 {
		t.Errorf("r1 should lead on, in one term, after the stale request: %v", r1.intervals())
	}
	r1.terminate()
	ivs := checkSafety(t, cg, r1)
	checkTerms(t, ivs, time.Time{}, time.Time{})
	checkFences(t, ivs)
}

func ptrTo[T any](v T) *T { return &v }
